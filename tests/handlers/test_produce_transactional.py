"""Produce of transactional batches: the coordinator's check before the append and Kafka's translation of its
answer per Produce version (transactions v1 below v12, v2 from v12), the whole-request errors, and the order of
pipelined appends that wait for the coordinator."""
from __future__ import annotations

import asyncio

import pytest

from compatbroker.handlers import produce
from compatbroker.protocol.error_codes import ErrorCode
from tests.coordinator.transactions_support import markers

from .helpers import call, records_of, start
from .txn_helpers import add_partitions, end, init, loaded, produce as produce_one, produce_request, txn_batch


def stored_values(broker, topic: str = "t", partition: int = 0) -> list[bytes]:
    log = broker.get_log(topic, partition)
    return [record.value for record in records_of(log.read_bytes(0, 1 << 20)) if record.value is not None]


async def _producer(broker, partitions: int = 2, *, version: int = 4):
    broker.create_topic("t", partitions)
    await loaded(broker)
    return await init(broker, "tx", version=version)


@pytest.mark.parametrize("version, code, message", [
    (3, ErrorCode.INVALID_TXN_STATE, None), (8, ErrorCode.INVALID_TXN_STATE, produce.NOT_IN_TRANSACTION),
    (10, ErrorCode.INVALID_TXN_STATE, produce.NOT_IN_TRANSACTION), (11, ErrorCode.TRANSACTION_ABORTABLE, None)])
async def test_a_partition_not_added_to_the_transaction_is_refused(broker, version, code, message):
    """Transactions v1: the coordinator answers TRANSACTION_ABORTABLE, which clients older than v11 get as
    INVALID_TXN_STATE (with Kafka's message from v8)."""
    producer = await _producer(broker)
    answer = await produce_one(broker, "tx", "t", 0, txn_batch(producer, 0, b"a"), version=version)
    assert (answer.error_code, answer.base_offset, answer.log_start_offset) == (code, -1, -1)
    assert answer.error_message == message
    assert stored_values(broker) == []


@pytest.mark.parametrize("version", [3, 9, 11])
async def test_an_added_partition_takes_the_batch_and_later_batches_skip_the_check(broker, version, monkeypatch):
    producer = await _producer(broker)
    coordinator = await loaded(broker)
    assert await add_partitions(broker, "tx", producer, [("t", 0)]) == {("t", 0): 0}
    asked = []
    original = coordinator.verify_for_append

    async def counting(*args, **kwargs):
        asked.append(args)
        return await original(*args, **kwargs)

    monkeypatch.setattr(coordinator, "verify_for_append", counting)
    first = await produce_one(broker, "tx", "t", 0, txn_batch(producer, 0, b"a"), version=version)
    second = await produce_one(broker, "tx", "t", 0, txn_batch(producer, 1, b"b"), version=version)
    assert (first.error_code, first.base_offset, second.error_code, second.base_offset) == (0, 0, 0, 1)
    assert len(asked) == 1, "the open transaction on the partition answers for the second batch"
    assert stored_values(broker) == [b"a", b"b"]


@pytest.mark.parametrize("version", [3, 11, 12])
async def test_a_fenced_producer_gets_invalid_producer_epoch(broker, version):
    producer = await _producer(broker)
    newer = await init(broker, "tx")
    assert newer[1] == producer[1] + 1
    answer = await produce_one(broker, "tx", "t", 0, txn_batch(producer, 0, b"a"), version=version)
    assert (answer.error_code, answer.log_start_offset) == (ErrorCode.INVALID_PRODUCER_EPOCH, -1)
    assert stored_values(broker) == []


@pytest.mark.parametrize("version, code", [(11, ErrorCode.NOT_ENOUGH_REPLICAS), (12, ErrorCode.NOT_ENOUGH_REPLICAS)])
async def test_a_loading_coordinator_is_a_retriable_not_enough_replicas(broker, monkeypatch, version, code):
    producer = await _producer(broker)
    monkeypatch.setattr(await loaded(broker), "loaded", False)
    answer = await produce_one(broker, "tx", "t", 0, txn_batch(producer, 0, b"a"), version=version)
    assert answer.error_code == code
    assert answer.error_message == produce.UNVERIFIED.format("COORDINATOR_LOAD_IN_PROGRESS")


@pytest.mark.parametrize("version, code, retried", [(11, ErrorCode.NOT_ENOUGH_REPLICAS, False),
                                                    (12, ErrorCode.CONCURRENT_TRANSACTIONS, True)])
async def test_concurrent_transactions_is_retried_by_transactions_v2_only(broker, monkeypatch, version, code, retried):
    """Kafka retries CONCURRENT_TRANSACTIONS for v12+ (a previous transaction still completing) for up to
    add.partitions.to.txn.retry.backoff.max.ms, then answers it as is; older versions get NOT_ENOUGH_REPLICAS."""
    producer = await _producer(broker)
    coordinator = await loaded(broker)
    asked = []

    async def busy(*args, **kwargs):
        asked.append(args)
        return ErrorCode.CONCURRENT_TRANSACTIONS

    monkeypatch.setattr(coordinator, "verify_for_append", busy)
    answer = await produce_one(broker, "tx", "t", 0, txn_batch(producer, 0, b"a"), version=version)
    assert answer.error_code == code
    assert (len(asked) > 1) == retried
    assert stored_values(broker) == []


async def test_transactions_v2_adds_the_partition_and_a_retry_succeeds_once_it_may(broker, monkeypatch):
    producer = await _producer(broker, version=5)
    coordinator = await loaded(broker)
    original = coordinator.verify_for_append
    answers = iter([ErrorCode.CONCURRENT_TRANSACTIONS])

    async def busy_once(*args, **kwargs):
        code = next(answers, None)
        return code if code is not None else await original(*args, **kwargs)

    monkeypatch.setattr(coordinator, "verify_for_append", busy_once)
    answer = await produce_one(broker, "tx", "t", 1, txn_batch(producer, 0, b"a"), version=12)
    assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, 0)
    assert coordinator.describe("tx").partitions == [("t", 1)]


async def test_batches_of_two_producers_in_one_request_are_invalid_producer_id_mapping(broker):
    producer = await _producer(broker)
    other = await init(broker, "other")
    request = produce_request("tx", "t", {0: txn_batch(producer, 0, b"a"), 1: txn_batch(other, 0, b"b")})
    answer = await call(broker, 9, request)
    codes = [p.error_code for p in answer.decoded.responses[0].partition_responses]
    assert codes == [ErrorCode.INVALID_PRODUCER_ID_MAPPING] * 2
    assert stored_values(broker, partition=0) == [] and stored_values(broker, partition=1) == []


async def test_a_refused_transactional_batch_with_acks_0_closes_the_connection(broker):
    producer = await _producer(broker)
    with pytest.raises(produce.UnacknowledgedProduceFailed, match="INVALID_TXN_STATE"):
        await start(broker, 9, produce_request("tx", "t", {0: txn_batch(producer, 0, b"a")}, acks=0))


async def test_pipelined_appends_that_wait_for_the_coordinator_keep_their_order(broker, monkeypatch):
    """Two produces of one connection to a partition not yet in the transaction: the first one's check is slow,
    the second one's fast. The second must still append after the first (its sequence follows the first's); were
    it appended first, storage would refuse it (OUT_OF_ORDER_SEQUENCE_NUMBER) and the first would land after."""
    producer = await _producer(broker, version=5)
    coordinator = await loaded(broker)
    original = coordinator.verify_for_append
    release = asyncio.Event()
    calls = []

    async def first_one_slow(*args, **kwargs):
        calls.append(args)
        if len(calls) == 1:
            await release.wait()
        return await original(*args, **kwargs)

    monkeypatch.setattr(coordinator, "verify_for_append", first_one_slow)
    loop = asyncio.get_running_loop()
    first = loop.create_task(call(broker, 12, produce_request("tx", "t", {0: txn_batch(producer, 0, b"a")})))
    second = loop.create_task(call(broker, 12, produce_request("tx", "t", {0: txn_batch(producer, 1, b"b")})))
    for _ in range(1000):  # until the second request's check is done too (both wait for the first's)
        if len(calls) == 2 and all(not task.done() for task in (first, second)):
            break
        await asyncio.sleep(0)
    assert len(calls) == 2 and not second.done(), "the second append waits for the first"
    release.set()
    answers = [(await task).decoded.responses[0].partition_responses[0] for task in (first, second)]
    assert [(a.error_code, a.base_offset) for a in answers] == [(0, 0), (0, 1)]
    assert stored_values(broker) == [b"a", b"b"]


async def test_a_committed_transaction_of_transactions_v2_reaches_read_committed_readers(broker):
    producer = await _producer(broker, version=5)
    for sequence, value in enumerate((b"a", b"b")):
        answer = await produce_one(broker, "tx", "t", 0, txn_batch(producer, sequence, value), version=12)
        assert answer.error_code == ErrorCode.NONE
    assert broker.get_log("t", 0).last_stable_offset == 0
    assert (await end(broker, "tx", producer, True, version=5)).error_code == ErrorCode.NONE
    assert broker.get_log("t", 0).last_stable_offset == 3
    assert markers(broker, "t", 0) == [(producer[0], producer[1] + 1, "COMMIT", 0)]
