"""InitProducerId through the codec: producer ids that never repeat (restarts and crashes included), the
transaction coordinator's epoch rules with their exact error codes, transactional id expiry, and the migration of
the transactional ids kept in `transactional-ids.json` before `__transaction_state` existed."""
from __future__ import annotations

import asyncio
import os
import time

import pytest

from compatbroker import producer_ids
from compatbroker.coordinator.transactions import transactions_of
from compatbroker.coordinator.transactions.state import LAST_USABLE_EPOCH
from compatbroker.cluster import producer_id_blocks
from compatbroker.cluster.producer_id_blocks import ProducerIdBlocks
from compatbroker.producer_ids import (BLOCK_SIZE, PRODUCER_ID_BLOCK_FILE, TRANSACTIONAL_IDS_FILE,
                                       TransactionalProducer, producer_ids_of, write_transactional_ids)
from compatbroker.topic_names import TRANSACTION_STATE_TOPIC
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import FindCoordinatorRequest, InitProducerIdRequest, ProduceRequest
from compatbroker.protocol.records.batch import build_batch

from .helpers import make_broker
from .helpers import call

VERSIONS = range(6)
KIP_360_VERSIONS = range(3, 6)  # versions that carry a producer id and epoch
TIMEOUT_MS = 60_000


async def init(broker, version: int, transactional_id: str | None = None, *, producer_id: int = -1,
               epoch: int = -1, timeout_ms: int = TIMEOUT_MS):
    if transactional_id is not None:  # the coordinator answers COORDINATOR_LOAD_IN_PROGRESS until it is loaded
        await transactions_of(broker).start()
    request = InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=timeout_ms,
                                    producer_id=producer_id, producer_epoch=epoch)
    return (await call(broker, version, request)).decoded


def fenced(version: int) -> ErrorCode:
    """Kafka answers PRODUCER_FENCED from v4, INVALID_PRODUCER_EPOCH to older clients."""
    return ErrorCode.PRODUCER_FENCED if version >= 4 else ErrorCode.INVALID_PRODUCER_EPOCH


def stored(broker, transactional_id: str):
    """The transactional id's state in the coordinator (None when it has none)."""
    return transactions_of(broker).describe(transactional_id)


def assert_error(response, code: ErrorCode) -> None:
    assert (response.error_code, response.producer_id, response.producer_epoch) == (code, -1, -1)


# --- idempotent producers (no transactional id) -------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
async def test_idempotent_producers_get_fresh_ids_with_epoch_zero(broker, version):
    answers = [await init(broker, version) for _ in range(3)]
    assert [(a.error_code, a.producer_epoch, a.throttle_time_ms) for a in answers] == [(0, 0, 0)] * 3
    ids = [a.producer_id for a in answers]
    assert len(set(ids)) == 3 and all(pid >= 0 for pid in ids)


@pytest.mark.parametrize("version", KIP_360_VERSIONS)
async def test_idempotent_producer_naming_its_id_gets_a_new_one(broker, version):
    """Kafka ignores the producer id and epoch of a request without a transactional id: a new id, epoch 0."""
    first = await init(broker, version)
    again = await init(broker, version, producer_id=first.producer_id, epoch=7)
    assert again.error_code == 0 and again.producer_epoch == 0 and again.producer_id != first.producer_id


@pytest.mark.parametrize("version", KIP_360_VERSIONS)
@pytest.mark.parametrize("transactional_id", [None, "tx"])
@pytest.mark.parametrize("producer_id, epoch", [(5, -1), (-1, 3)])
async def test_producer_id_and_epoch_come_together(broker, version, transactional_id, producer_id, epoch):
    answer = await init(broker, version, transactional_id, producer_id=producer_id, epoch=epoch)
    assert_error(answer, ErrorCode.INVALID_REQUEST)


@pytest.mark.parametrize("version", [0, 2, 4, 5])
async def test_empty_transactional_id_is_invalid_request(broker, version):
    assert_error(await init(broker, version, ""), ErrorCode.INVALID_REQUEST)


# --- transactional ids --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
async def test_each_init_of_a_transactional_id_bumps_its_epoch(broker, version):
    answers = [await init(broker, version, "tx-a") for _ in range(3)]
    assert [a.error_code for a in answers] == [0, 0, 0]
    assert [a.producer_epoch for a in answers] == [0, 1, 2]
    assert len({a.producer_id for a in answers}) == 1
    other = await init(broker, version, "tx-b")
    assert (other.producer_epoch, other.producer_id != answers[0].producer_id) == (0, True)


@pytest.mark.parametrize("timeout_ms", [0, -1, 900_001])
async def test_transaction_timeout_outside_the_allowed_range(broker, timeout_ms):
    assert_error(await init(broker, 4, "tx", timeout_ms=timeout_ms), ErrorCode.INVALID_TRANSACTION_TIMEOUT)
    assert stored(broker, "tx") is None  # nothing was created


async def test_transaction_max_timeout_is_configurable(broker_factory):
    broker = broker_factory(**{"transaction.max.timeout.ms": "5000"})
    assert (await init(broker, 4, "tx", timeout_ms=5000)).error_code == 0
    assert_error(await init(broker, 4, "tx", timeout_ms=5001), ErrorCode.INVALID_TRANSACTION_TIMEOUT)
    assert stored(broker, "tx").transaction_timeout_ms == 5000


async def test_timeout_is_not_checked_without_a_transactional_id(broker):
    assert (await init(broker, 4, None, timeout_ms=-1)).error_code == 0


@pytest.mark.parametrize("version", KIP_360_VERSIONS)
async def test_a_recovering_producer_bumps_its_epoch_and_may_retry(broker, version):
    first = await init(broker, version, "tx")
    pid = first.producer_id
    bumped = await init(broker, version, "tx", producer_id=pid, epoch=0)
    assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (0, pid, 1)
    retried = await init(broker, version, "tx", producer_id=pid, epoch=0)  # the bump's response was lost
    assert (retried.error_code, retried.producer_id, retried.producer_epoch) == (0, pid, 1)
    again = await init(broker, version, "tx", producer_id=pid, epoch=1)
    assert (again.error_code, again.producer_epoch) == (0, 2)
    assert_error(await init(broker, version, "tx", producer_id=pid, epoch=0), fenced(version))
    assert stored(broker, "tx").producer_epoch == 2  # a fenced request changes nothing


@pytest.mark.parametrize("version", KIP_360_VERSIONS)
async def test_a_new_instance_fences_the_old_one(broker, version):
    old = await init(broker, version, "tx")
    new = await init(broker, version, "tx")
    assert (new.producer_id, new.producer_epoch) == (old.producer_id, 1)
    assert_error(await init(broker, version, "tx", producer_id=old.producer_id, epoch=0), fenced(version))


@pytest.mark.parametrize("version", KIP_360_VERSIONS)
async def test_another_producer_id_is_fenced(broker, version):
    current = await init(broker, version, "tx")
    idempotent = await init(broker, version)  # an id that exists, but not this transactional id's
    answer = await init(broker, version, "tx", producer_id=idempotent.producer_id, epoch=current.producer_epoch)
    assert_error(answer, fenced(version))


async def test_unknown_transactional_id_accepts_any_named_producer(broker):
    """A producer whose transactional id expired names its old id: it gets a new id with epoch 0."""
    answer = await init(broker, 4, "forgotten", producer_id=123_456, epoch=9)
    assert answer.error_code == 0 and answer.producer_epoch == 0 and answer.producer_id != 123_456


def seed(data_dir, transactional_id: str, entry: TransactionalProducer) -> None:
    os.makedirs(data_dir, exist_ok=True)
    write_transactional_ids(os.path.join(data_dir, TRANSACTIONAL_IDS_FILE), {transactional_id: entry})


@pytest.mark.parametrize("version", KIP_360_VERSIONS)
async def test_spent_epoch_rotates_the_producer_id(tmp_path, version):
    data_dir = tmp_path / "data"
    seed(data_dir, "tx", TransactionalProducer(42, LAST_USABLE_EPOCH, 42, -1, TIMEOUT_MS, 0))
    broker = make_broker(data_dir)
    try:
        rotated = await init(broker, version, "tx", producer_id=42, epoch=LAST_USABLE_EPOCH)
        assert rotated.error_code == 0 and rotated.producer_epoch == 0 and rotated.producer_id > 42
        # the rotation's response was lost: the retry names the old id and its spent epoch, and gets the same answer
        retried = await init(broker, version, "tx", producer_id=42, epoch=LAST_USABLE_EPOCH)
        assert (retried.error_code, retried.producer_id, retried.producer_epoch) == (0, rotated.producer_id, 0)
        assert_error(await init(broker, version, "tx", producer_id=42, epoch=5), fenced(version))
    finally:
        broker.logs.shutdown()


async def test_spent_epoch_rotates_for_a_new_instance_and_fences_the_old(tmp_path):
    data_dir = tmp_path / "data"
    seed(data_dir, "tx", TransactionalProducer(42, LAST_USABLE_EPOCH, 42, -1, TIMEOUT_MS, 0))
    broker = make_broker(data_dir)
    try:
        rotated = await init(broker, 4, "tx")
        assert rotated.error_code == 0 and rotated.producer_epoch == 0 and rotated.producer_id > 42
        # the old instance's spent epoch was not recorded, so its retry cannot pass for the new instance's
        assert_error(await init(broker, 4, "tx", producer_id=42, epoch=LAST_USABLE_EPOCH), ErrorCode.PRODUCER_FENCED)
    finally:
        broker.logs.shutdown()


async def test_concurrent_init_for_one_transactional_id(broker):
    """The second request arrives while the first is being written: CONCURRENT_TRANSACTIONS (retriable)."""
    first, second = await asyncio.gather(init(broker, 4, "tx"), init(broker, 4, "tx"))
    assert (first.error_code, first.producer_epoch) == (0, 0)
    assert_error(second, ErrorCode.CONCURRENT_TRANSACTIONS)
    assert (await init(broker, 4, "tx")).producer_epoch == 1  # and a later retry goes through


async def test_different_transactional_ids_are_written_concurrently(broker):
    answers = await asyncio.gather(*(init(broker, 4, f"tx-{n}") for n in range(8)))
    assert [a.error_code for a in answers] == [0] * 8
    views = transactions_of(broker).views()
    assert {view.transactional_id: (view.producer_id, view.producer_epoch) for view in views} == \
        {f"tx-{n}": (a.producer_id, 0) for n, a in enumerate(answers)}


# --- durability ---------------------------------------------------------------------------------------------------

async def test_ids_and_epochs_survive_a_restart(tmp_path):
    data_dir = tmp_path / "data"
    broker = make_broker(data_dir)
    before = [await init(broker, 4) for _ in range(3)]
    tx = await init(broker, 4, "tx")
    broker.logs.shutdown()
    broker = make_broker(data_dir)
    try:
        after = await init(broker, 4)
        assert after.producer_id > max(a.producer_id for a in before + [tx])
        again = await init(broker, 4, "tx", producer_id=tx.producer_id, epoch=tx.producer_epoch)
        assert (again.error_code, again.producer_id, again.producer_epoch) == (0, tx.producer_id, 1)
    finally:
        broker.logs.shutdown()


async def test_a_block_is_on_disk_before_its_first_id_is_handed_out(tmp_path):
    """A crash right after an answer (no shutdown of any kind) must not let the id be handed out again."""
    data_dir = tmp_path / "data"
    broker = make_broker(data_dir)
    try:
        handed = (await init(broker, 4)).producer_id
        assert producer_ids.read_next_block(str(data_dir / PRODUCER_ID_BLOCK_FILE)) == handed + BLOCK_SIZE
        after_crash = ProducerIdBlocks(str(data_dir / PRODUCER_ID_BLOCK_FILE))  # what a restarted broker reads
        assert (await after_crash.allocate_block()).start > handed
    finally:
        broker.logs.shutdown()


async def test_ids_are_unique_across_blocks(broker):
    manager = producer_ids_of(broker)
    ids = [await manager.new_producer_id() for _ in range(2 * BLOCK_SIZE + 500)]
    assert len(set(ids)) == len(ids) and ids == sorted(ids)
    assert producer_ids.read_next_block(broker.controller.producer_id_blocks.path) == 3 * BLOCK_SIZE


async def test_transactional_ids_raise_the_first_block(tmp_path):
    """A block file lost (or a data directory without one) must not hand out the transactional map's ids."""
    data_dir = tmp_path / "data"
    seed(data_dir, "tx", TransactionalProducer(5000, 3, 4000, -1, TIMEOUT_MS, 0))
    broker = make_broker(data_dir)
    try:
        assert await producer_ids_of(broker).new_producer_id() == 5001
    finally:
        broker.logs.shutdown()


async def test_producer_ids_the_logs_track_raise_the_first_block(broker):
    """A data directory written by Kafka has producer state but no block file: its ids must not come back."""
    broker.create_topic("t", 1)
    records = build_batch([(b"k", b"v", (), int(time.time() * 1000))], producer_id=4321, producer_epoch=0,
                          base_sequence=0)
    data = ProduceRequest.TopicProduceData(name="t", partition_data=[
        ProduceRequest.PartitionProduceData(index=0, records=records)])
    produced = await call(broker, 9, ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[data]))
    assert produced.decoded.responses[0].partition_responses[0].error_code == 0
    assert (await init(broker, 4)).producer_id == 4322


async def test_an_unreadable_block_file_stops_allocation(tmp_path):
    data_dir = tmp_path / "data"
    os.makedirs(data_dir)
    (data_dir / PRODUCER_ID_BLOCK_FILE).write_text("{not json")
    with pytest.raises(producer_ids.ProducerIdsError):
        await ProducerIdBlocks(str(data_dir / PRODUCER_ID_BLOCK_FILE)).allocate_block()
    broker = make_broker(data_dir)
    try:
        assert_error(await init(broker, 4), ErrorCode.UNKNOWN_SERVER_ERROR)
    finally:
        broker.logs.shutdown()


async def test_disk_failures_answer_retriable_errors(broker, monkeypatch):
    def refuse(*_, **__):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(producer_id_blocks, "write_next_block", refuse)
    assert_error(await init(broker, 4), ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    assert_error(await init(broker, 4, "tx"), ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)  # it needs an id too
    monkeypatch.undo()
    assert (await init(broker, 4, "tx")).error_code == 0
    state_log = broker.get_log(TRANSACTION_STATE_TOPIC, transactions_of(broker).partition_for("tx"))
    monkeypatch.setattr(state_log, "append", refuse)  # the transaction log cannot be written
    assert_error(await init(broker, 4, "tx"), ErrorCode.NOT_COORDINATOR)
    assert stored(broker, "tx").producer_epoch == 0  # not applied when not stored


# --- expiry -------------------------------------------------------------------------------------------------------

async def test_idle_transactional_ids_expire(broker_factory):
    broker = broker_factory(**{"transactional.id.expiration.ms": "1000"})
    clock = [1_000_000]
    broker.now_ms = lambda: clock[0]
    first = await init(broker, 4, "tx")
    await init(broker, 4, "kept")
    manager = transactions_of(broker)
    clock[0] += 500
    await init(broker, 4, "kept")  # touched again: its idle time restarts
    clock[0] = 1_000_999
    assert await manager.expire_transactional_ids() == []
    clock[0] = 1_001_000
    assert await manager.expire_transactional_ids() == ["tx"]
    assert [view.transactional_id for view in manager.views()] == ["kept"]
    reborn = await init(broker, 4, "tx")
    assert reborn.producer_epoch == 0 and reborn.producer_id != first.producer_id


# --- the coordinator lookup that precedes a transactional InitProducerId -------------------------------------------

@pytest.mark.parametrize("version", [1, 3])
async def test_find_coordinator_for_a_transactional_id_finds_this_broker(broker, version):
    answer = (await call(broker, version, FindCoordinatorRequest(key="tx", key_type=1))).decoded
    assert (answer.error_code, answer.node_id, answer.host, answer.port) == (0, broker.node_id, "localhost", 9092)


async def test_find_coordinator_v4_batches_transactional_ids(broker):
    answer = (await call(broker, 4, FindCoordinatorRequest(key_type=1, coordinator_keys=["a", "b"]))).decoded
    assert [(c.key, c.error_code, c.node_id) for c in answer.coordinators] == [("a", 0, broker.node_id),
                                                                              ("b", 0, broker.node_id)]
