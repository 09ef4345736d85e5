"""Produce from idempotent and transactional producers, through the codec: retries answered as duplicates with
their first offsets (also after a restart or a crash), and each producer error with its exact code."""
from __future__ import annotations

import time

import pytest

from compatbroker.handlers import produce
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import ProduceRequest
from compatbroker.protocol.records.batch import build_batch
from compatbroker.storage import errors as storage_errors

from .conftest import make_broker
from .helpers import call, records_of, start

TopicData = ProduceRequest.TopicProduceData
PartitionData = ProduceRequest.PartitionProduceData
PID = 1000
VERSIONS = [3, 5, 7, 8, 9, 11, 12]  # v3 is the first with magic 2 batches only; v5 adds the log start offset


def idempotent(sequence: int, count: int = 1, *, producer_id: int = PID, epoch: int = 0,
               transactional: bool = False, tag: bytes = b"") -> bytes:
    now = int(time.time() * 1000)
    records = [(b"k", b"%s%d" % (tag, sequence + n), (), now) for n in range(count)]
    return build_batch(records, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
                       is_transactional=transactional)


def request(*partitions: tuple[int, bytes], acks: int = -1, topic: str = "t") -> ProduceRequest:
    data = TopicData(name=topic, partition_data=[PartitionData(index=index, records=records)
                                                 for index, records in partitions])
    return ProduceRequest(acks=acks, timeout_ms=1000, topic_data=[data], transactional_id=None)


async def send(broker, records: bytes, *, version: int = 9, partition: int = 0):
    answer = await call(broker, version, request((partition, records)))
    return answer.decoded.responses[0].partition_responses[0]


def stored_values(broker, partition: int = 0) -> list[bytes]:
    return [r.value for r in records_of(broker.get_log("t", partition).read_bytes(0, 1 << 20))]


def assert_refused(answer, code: ErrorCode, *, log_start_offset: int) -> None:
    assert (answer.error_code, answer.base_offset, answer.log_append_time_ms, answer.log_start_offset) == \
        (code, -1, -1, log_start_offset)


# --- duplicates ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
async def test_a_retried_batch_answers_its_first_offsets(broker, version):
    broker.create_topic("t", 1)
    first = await send(broker, idempotent(0, 3), version=version)
    second = await send(broker, idempotent(3, 2), version=version)
    assert (first.error_code, first.base_offset, second.base_offset) == (0, 0, 3)
    retried = await send(broker, idempotent(3, 2), version=version)
    assert (retried.error_code, retried.base_offset) == (0, 3)
    assert retried.log_start_offset == (0 if version >= 5 else -1)
    assert broker.get_log("t", 0).log_end_offset == 5
    assert stored_values(broker) == [b"0", b"1", b"2", b"3", b"4"]


async def test_each_of_the_last_five_batches_is_recognised(broker):
    broker.create_topic("t", 1)
    offsets = [(await send(broker, idempotent(seq, 2))).base_offset for seq in range(0, 12, 2)]
    assert offsets == [0, 2, 4, 6, 8, 10]
    for seq, offset in list(zip(range(0, 12, 2), offsets))[1:]:
        retried = await send(broker, idempotent(seq, 2))
        assert (retried.error_code, retried.base_offset) == (0, offset)
    # the sixth batch back is no longer remembered: Kafka cannot tell it from a reordering
    assert_refused(await send(broker, idempotent(0, 2)), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log_start_offset=0)
    assert broker.get_log("t", 0).log_end_offset == 12


async def test_a_duplicate_wakes_no_fetcher(broker):
    broker.create_topic("t", 1)
    woken = []
    broker.notify_appended = lambda topic, partition: woken.append((topic, partition))
    await send(broker, idempotent(0))
    await send(broker, idempotent(0))
    assert woken == [("t", 0)]


async def test_duplicates_and_new_batches_in_one_request(broker):
    broker.create_topic("t", 2)
    await send(broker, idempotent(0, 2), partition=0)
    answer = await call(broker, 9, request((0, idempotent(0, 2)), (1, idempotent(0, 1, producer_id=PID + 1))))
    got = [(p.index, p.error_code, p.base_offset) for p in answer.decoded.responses[0].partition_responses]
    assert got == [(0, 0, 0), (1, 0, 0)]
    assert (stored_values(broker, 0), stored_values(broker, 1)) == ([b"0", b"1"], [b"0"])


async def test_acks_0_retry_is_dropped_silently(broker):
    broker.create_topic("t", 1)
    for _ in range(2):
        assert await start(broker, 9, request((0, idempotent(0, 2)), acks=0)) is None
    assert stored_values(broker) == [b"0", b"1"]


@pytest.mark.parametrize("clean", [True, False], ids=["restart", "crash"])
async def test_a_retry_after_a_restart_is_still_a_duplicate(tmp_path, clean):
    """`crash`: the first broker is dropped without any shutdown, so the second recovers the log."""
    data_dir = tmp_path / "data"
    broker = make_broker(data_dir)
    broker.create_topic("t", 1)
    for seq in range(0, 6, 2):
        await send(broker, idempotent(seq, 2))
    if clean:
        broker.logs.shutdown()
    broker = make_broker(data_dir)
    try:
        retried = await send(broker, idempotent(4, 2))
        assert (retried.error_code, retried.base_offset) == (0, 4)
        following = await send(broker, idempotent(6, 1))
        assert (following.error_code, following.base_offset) == (0, 6)
        assert_refused(await send(broker, idempotent(9, 1)), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                       log_start_offset=0)
        assert stored_values(broker) == [b"0", b"1", b"2", b"3", b"4", b"5", b"6"]
    finally:
        broker.logs.shutdown()


# --- producer errors, each with its exact code --------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
async def test_a_sequence_gap_is_out_of_order(broker, version):
    broker.create_topic("t", 1)
    await send(broker, idempotent(0, 2), version=version)
    answer = await send(broker, idempotent(5), version=version)
    assert_refused(answer, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log_start_offset=0 if version >= 5 else -1)
    assert answer.error_message is None
    assert stored_values(broker) == [b"0", b"1"]


@pytest.mark.parametrize("version", VERSIONS)
async def test_an_older_epoch_is_invalid_producer_epoch(broker, version):
    broker.create_topic("t", 1)
    await send(broker, idempotent(0, epoch=3), version=version)
    answer = await send(broker, idempotent(1, epoch=2), version=version)
    assert_refused(answer, ErrorCode.INVALID_PRODUCER_EPOCH, log_start_offset=0 if version >= 5 else -1)
    assert stored_values(broker) == [b"0"]


async def test_a_new_epoch_must_start_at_sequence_zero(broker):
    broker.create_topic("t", 1)
    await send(broker, idempotent(0, epoch=0))
    assert_refused(await send(broker, idempotent(4, epoch=1)), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                   log_start_offset=0)
    bumped = await send(broker, idempotent(0, epoch=1, tag=b"e1-"))
    assert (bumped.error_code, bumped.base_offset) == (0, 1)


async def test_a_producer_without_state_must_start_at_sequence_zero(broker):
    """UNKNOWN_PRODUCER_ID for a producer the partition has no state for whose batch does not start at 0 (the
    issue's rule; Kafka answered so before KIP-360); the sequence then continues from the batch accepted."""
    broker.create_topic("t", 1)
    assert_refused(await send(broker, idempotent(7)), ErrorCode.UNKNOWN_PRODUCER_ID, log_start_offset=0)
    first = await send(broker, idempotent(0))
    assert (first.error_code, first.base_offset) == (0, 0)
    assert (await send(broker, idempotent(1))).base_offset == 1
    assert_refused(await send(broker, idempotent(3)), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log_start_offset=0)


@pytest.mark.parametrize("error, code", [
    (storage_errors.InvalidProducerEpochError, ErrorCode.INVALID_PRODUCER_EPOCH),
    (storage_errors.OutOfOrderSequenceError, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
    (storage_errors.UnknownProducerIdError, ErrorCode.UNKNOWN_PRODUCER_ID),
    (storage_errors.InvalidTxnStateError, ErrorCode.INVALID_TXN_STATE),
])
async def test_each_storage_producer_error_answers_its_code(broker, error, code):
    broker.create_topic("t", 1)
    await send(broker, idempotent(0, 3))
    partition_log = broker.get_log("t", 0)

    def refuse(*_, **__):
        raise error("refused by the test")

    partition_log.append = refuse
    answer = await send(broker, idempotent(3))
    assert_refused(answer, code, log_start_offset=0)
    assert answer.error_message is None and answer.record_errors == []


# --- transactional batches (tests/handlers/test_produce_transactional.py has the rest) -------------------------------

@pytest.mark.parametrize("version", VERSIONS)
async def test_a_transactional_batch_without_transactional_id_is_not_authorized(broker, version):
    """Kafka authorizes a transactional batch by the request's transactional id; without one it answers
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED for the whole request (the old refusal, INVALID_TXN_STATE, is gone)."""
    broker.create_topic("t", 1)
    answer = await send(broker, idempotent(0, 2, transactional=True), version=version)
    assert_refused(answer, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, log_start_offset=-1)
    assert answer.error_message is None
    assert stored_values(broker) == []


async def test_a_transactional_batch_without_transactional_id_and_acks_0_closes_the_connection(broker):
    broker.create_topic("t", 1)
    with pytest.raises(produce.UnacknowledgedProduceFailed, match="TRANSACTIONAL_ID_AUTHORIZATION_FAILED"):
        await start(broker, 9, request((0, idempotent(0, transactional=True)), acks=0))
    assert stored_values(broker) == []
