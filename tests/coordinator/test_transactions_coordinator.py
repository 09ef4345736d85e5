"""The transaction coordinator driven directly on a real Broker: Kafka's rules for InitProducerId, adding
partitions and offsets, verification, EndTxn (TV1 and TV2), fencing, and the describe/list views."""
from __future__ import annotations

import asyncio

import pytest

from compatbroker.coordinator.offsets import partition_for_group
from compatbroker.coordinator.transactions import TransactionCoordinator, coordinator as coordinator_module
from compatbroker.coordinator.transactions.state import LAST_USABLE_EPOCH, TransactionState
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.topic_names import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC
from tests.async_tests import async_test

from .transactions_support import TIMEOUT_MS, begin, loaded, markers, new_broker

E = ErrorCode
S = TransactionState


@pytest.fixture
def broker(data_dir):
    broker = new_broker(data_dir, **{"offsets.topic.num.partitions": "3"})
    broker.create_topic("t", 3)
    yield broker
    broker.logs.shutdown()


def state_log_end(broker, coordinator, transactional_id: str) -> int:
    return broker.get_log(TRANSACTION_STATE_TOPIC, coordinator.partition_for(transactional_id)).log_end_offset


class GatedMarkers:
    """write_markers that waits for the test to open the gate: the transaction stays in PrepareX meanwhile."""

    def __init__(self, monkeypatch):
        self.gate = asyncio.Event()
        self.calls = 0
        real = coordinator_module.write_markers

        async def gated(*args, **kwargs):
            self.calls += 1
            await self.gate.wait()
            return await real(*args, **kwargs)

        monkeypatch.setattr(coordinator_module, "write_markers", gated)

    async def until_called(self):
        while self.calls == 0:
            await asyncio.sleep(0.001)


# --- InitProducerId -----------------------------------------------------------------------------------------------

@async_test
async def test_requests_before_the_load_answer_load_in_progress(broker):
    coordinator = TransactionCoordinator(broker)  # not loaded yet
    assert (await coordinator.init_producer_id("tx", TIMEOUT_MS, None)).error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert await coordinator.add_partitions("tx", 0, 0, [("t", 0)]) == E.COORDINATOR_LOAD_IN_PROGRESS
    assert (await coordinator.end_transaction("tx", 0, 0, True, tv2=False)).error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert coordinator.verify_partitions("tx", 0, 0, [("t", 0)]) == {("t", 0): E.COORDINATOR_LOAD_IN_PROGRESS}


@async_test
async def test_init_creates_then_bumps_and_checks_the_timeout(broker):
    coordinator = await loaded(broker)
    first = await coordinator.init_producer_id("tx", TIMEOUT_MS, None)
    second = await coordinator.init_producer_id("tx", TIMEOUT_MS, None)
    assert (first.error, first.producer_epoch, second.producer_id, second.producer_epoch) == \
        (E.NONE, 0, first.producer_id, 1)
    for timeout in (0, -1, 900_001):
        assert (await coordinator.init_producer_id("tx", timeout, None)).error == E.INVALID_TRANSACTION_TIMEOUT
    assert (await coordinator.init_producer_id("", TIMEOUT_MS, None)).error == E.INVALID_REQUEST
    assert coordinator.describe("tx").state == "Empty"


@async_test
async def test_init_is_durable_under_a_flush_policy(data_dir):
    broker = new_broker(data_dir, **{"log.flush.interval.messages": "1"})
    try:
        coordinator = await loaded(broker)
        await coordinator.init_producer_id("tx", TIMEOUT_MS, None)
        log = broker.get_log(TRANSACTION_STATE_TOPIC, coordinator.partition_for("tx"))
        assert log.recovery_point == log.log_end_offset == 1
        info = broker.topic(TRANSACTION_STATE_TOPIC)
        assert info.partitions == 50 and info.is_internal
        assert log.config.cleanup_policy == ("compact",)
    finally:
        broker.logs.shutdown()


@async_test
async def test_a_failed_write_answers_not_coordinator_and_changes_nothing(broker, monkeypatch):
    coordinator = await loaded(broker)
    producer_id, epoch = await begin(coordinator, "tx", [("t", 0)])
    log = broker.get_log(TRANSACTION_STATE_TOPIC, coordinator.partition_for("tx"))

    def refuse(*_, **__):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(log, "append", refuse)
    assert await coordinator.add_partitions("tx", producer_id, epoch, [("t", 1)]) == E.NOT_COORDINATOR
    assert (await coordinator.end_transaction("tx", producer_id, epoch, True, tv2=False)).error == \
        E.NOT_COORDINATOR
    assert coordinator.describe("tx").partitions == [("t", 0)] and coordinator.describe("tx").state == "Ongoing"
    monkeypatch.undo()
    assert await coordinator.add_partitions("tx", producer_id, epoch, [("t", 1)]) == E.NONE


# --- fencing ------------------------------------------------------------------------------------------------------

@async_test
async def test_a_new_instance_aborts_the_ongoing_transaction_and_fences_the_old_one(broker):
    coordinator = await loaded(broker)
    producer_id, epoch = await begin(coordinator, "tx", [("t", 0), ("t", 2)])
    fenced = await coordinator.init_producer_id("tx", TIMEOUT_MS, None)
    assert fenced.error == E.CONCURRENT_TRANSACTIONS  # the client retries once the abort completes
    view = coordinator.describe("tx")
    assert (view.state, view.producer_epoch, view.partitions) == ("CompleteAbort", epoch + 1, [])
    assert markers(broker, "t", 0) == markers(broker, "t", 2) == [(producer_id, epoch + 1, "ABORT", 0)]
    assert markers(broker, "t", 1) == []
    retried = await coordinator.init_producer_id("tx", TIMEOUT_MS, None)
    assert (retried.error, retried.producer_id, retried.producer_epoch) == (E.NONE, producer_id, epoch + 2)
    assert await coordinator.add_partitions("tx", producer_id, epoch, [("t", 1)]) == E.PRODUCER_FENCED


@async_test
async def test_a_failed_fence_is_retried_with_the_same_bumped_epoch(broker, monkeypatch):
    coordinator = await loaded(broker)
    producer_id, epoch = await begin(coordinator, "tx", [("t", 0)])
    log = broker.get_log(TRANSACTION_STATE_TOPIC, coordinator.partition_for("tx"))

    def refuse(*_, **__):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(log, "append", refuse)
    assert (await coordinator.init_producer_id("tx", TIMEOUT_MS, None)).error == E.NOT_COORDINATOR
    assert coordinator.describe("tx").state == "Ongoing"
    monkeypatch.undo()
    assert (await coordinator.init_producer_id("tx", TIMEOUT_MS, None)).error == E.CONCURRENT_TRANSACTIONS
    assert coordinator.describe("tx").producer_epoch == epoch + 1  # Kafka's hasFailedEpochFence: bumped once
    assert markers(broker, "t", 0) == [(producer_id, epoch + 1, "ABORT", 0)]


@async_test
async def test_init_while_preparing_answers_concurrent_transactions(broker, monkeypatch):
    coordinator = await loaded(broker)
    producer_id, epoch = await begin(coordinator, "tx", [("t", 0)])
    gated = GatedMarkers(monkeypatch)
    ending = asyncio.ensure_future(coordinator.end_transaction("tx", producer_id, epoch, True, tv2=False))
    await gated.until_called()
    assert coordinator.describe("tx").state == "PrepareCommit"
    assert (await coordinator.init_producer_id("tx", TIMEOUT_MS, None)).error == E.CONCURRENT_TRANSACTIONS
    assert await coordinator.add_partitions("tx", producer_id, epoch, [("t", 1)]) == E.CONCURRENT_TRANSACTIONS
    assert coordinator.verify_partitions("tx", producer_id, epoch, [("t", 0)]) == \
        {("t", 0): E.CONCURRENT_TRANSACTIONS}
    assert (await coordinator.end_transaction("tx", producer_id, epoch, True, tv2=False)).error == \
        E.CONCURRENT_TRANSACTIONS
    assert (await coordinator.end_transaction("tx", producer_id, epoch, False, tv2=False)).error == \
        E.INVALID_TXN_STATE
    gated.gate.set()
    assert (await ending).error == E.NONE
    assert coordinator.describe("tx").state == "CompleteCommit"


@async_test
async def test_concurrent_init_for_one_transactional_id(broker):
    coordinator = await loaded(broker)
    first, second = await asyncio.gather(coordinator.init_producer_id("tx", TIMEOUT_MS, None),
                                         coordinator.init_producer_id("tx", TIMEOUT_MS, None))
    assert (first.error, second.error) == (E.NONE, E.CONCURRENT_TRANSACTIONS)


# --- AddPartitionsToTxn, AddOffsetsToTxn, verification -------------------------------------------------------------

@async_test
async def test_add_partitions_rules(broker):
    coordinator = await loaded(broker)
    assert await coordinator.add_partitions("unknown", 1, 0, [("t", 0)]) == E.INVALID_PRODUCER_ID_MAPPING
    init = await coordinator.init_producer_id("tx", TIMEOUT_MS, None)
    await coordinator.init_producer_id("tx", TIMEOUT_MS, None)  # epoch 1 now
    pid = init.producer_id
    assert await coordinator.add_partitions("tx", pid + 1, 1, [("t", 0)]) == E.INVALID_PRODUCER_ID_MAPPING
    assert await coordinator.add_partitions("tx", pid, 0, [("t", 0)]) == E.PRODUCER_FENCED
    assert await coordinator.add_partitions("tx", pid, 2, [("t", 0)]) == E.PRODUCER_FENCED
    assert await coordinator.add_partitions("", pid, 1, [("t", 0)]) == E.INVALID_REQUEST
    broker.now_ms = lambda: 1_000_000
    assert await coordinator.add_partitions("tx", pid, 1, [("t", 0)]) == E.NONE
    view = coordinator.describe("tx")
    assert (view.state, view.transaction_start_time_ms, view.partitions) == ("Ongoing", 1_000_000, [("t", 0)])
    before = state_log_end(broker, coordinator, "tx")
    assert await coordinator.add_partitions("tx", pid, 1, [("t", 0)]) == E.NONE  # already there: no write
    assert state_log_end(broker, coordinator, "tx") == before
    broker.now_ms = lambda: 1_000_500
    assert await coordinator.add_partitions("tx", pid, 1, [("t", 1)]) == E.NONE
    view = coordinator.describe("tx")
    assert (view.transaction_start_time_ms, view.partitions) == (1_000_000, [("t", 0), ("t", 1)])
    assert state_log_end(broker, coordinator, "tx") == before + 1


@async_test
async def test_verify_partitions_and_verify_for_append(broker):
    coordinator = await loaded(broker)
    pid, epoch = await begin(coordinator, "tx", [("t", 0)])
    assert coordinator.verify_partitions("tx", pid, epoch, [("t", 0), ("t", 1)]) == \
        {("t", 0): E.NONE, ("t", 1): E.TRANSACTION_ABORTABLE}
    assert coordinator.verify_partitions("tx", pid, epoch + 1, [("t", 0)]) == {("t", 0): E.PRODUCER_FENCED}
    assert coordinator.verify_partitions("nope", pid, epoch, [("t", 0)]) == {("t", 0): E.INVALID_PRODUCER_ID_MAPPING}
    assert await coordinator.verify_for_append("tx", pid, epoch, "t", 1, tv2=False) == E.TRANSACTION_ABORTABLE
    assert coordinator.describe("tx").partitions == [("t", 0)]  # TV1 only verifies
    assert await coordinator.verify_for_append("tx", pid, epoch, "t", 1, tv2=True) == E.NONE
    assert coordinator.describe("tx").partitions == [("t", 0), ("t", 1)]  # TV2 adds it


@async_test
async def test_tv2_append_starts_the_transaction(broker):
    coordinator = await loaded(broker)
    init = await coordinator.init_producer_id("tx", TIMEOUT_MS, None)
    assert await coordinator.verify_for_append("tx", init.producer_id, 0, "t", 2, tv2=True) == E.NONE
    assert coordinator.describe("tx").state == "Ongoing"
    assert coordinator.metadata("tx").client_transaction_version == 2


@async_test
async def test_verification_can_be_disabled(data_dir):
    broker = new_broker(data_dir, **{"transaction.partition.verification.enable": "false"})
    try:
        broker.create_topic("t", 1)
        coordinator = await loaded(broker)
        init = await coordinator.init_producer_id("tx", TIMEOUT_MS, None)
        assert await coordinator.verify_for_append("tx", init.producer_id, 0, "t", 0, tv2=False) == E.NONE
    finally:
        broker.logs.shutdown()


@async_test
async def test_add_offsets_adds_the_groups_offsets_partition(broker):
    broker.create_topic(GROUP_METADATA_TOPIC, 3)
    coordinator = await loaded(broker)
    pid, epoch = await begin(coordinator, "tx", [("t", 0)])
    assert await coordinator.add_offsets("tx", pid, epoch, "my-group") == E.NONE
    offsets_partition = partition_for_group("my-group", 3)
    assert (GROUP_METADATA_TOPIC, offsets_partition) in coordinator.describe("tx").partitions
    assert await coordinator.add_offsets("tx", pid, epoch + 1, "my-group") == E.PRODUCER_FENCED
    assert (await coordinator.end_transaction("tx", pid, epoch, True, tv2=False)).error == E.NONE
    assert markers(broker, GROUP_METADATA_TOPIC, offsets_partition) == [(pid, epoch, "COMMIT", 0)]


# --- EndTxn -------------------------------------------------------------------------------------------------------

@async_test
async def test_commit_writes_markers_then_completes(broker):
    coordinator = await loaded(broker)
    pid, epoch = await begin(coordinator, "tx", [("t", 0), ("t", 1)])
    result = await coordinator.end_transaction("tx", pid, epoch, True, tv2=False)
    assert (result.error, result.producer_id, result.producer_epoch) == (E.NONE, pid, epoch)
    assert markers(broker, "t", 0) == markers(broker, "t", 1) == [(pid, epoch, "COMMIT", 0)]
    assert (coordinator.describe("tx").state, coordinator.describe("tx").partitions) == ("CompleteCommit", [])
    # a retry of the same end answers NONE, the other end INVALID_TXN_STATE; neither writes a marker
    assert (await coordinator.end_transaction("tx", pid, epoch, True, tv2=False)).error == E.NONE
    assert (await coordinator.end_transaction("tx", pid, epoch, False, tv2=False)).error == E.INVALID_TXN_STATE
    assert len(markers(broker, "t", 0)) == 1


@async_test
async def test_end_errors(broker):
    coordinator = await loaded(broker)
    assert (await coordinator.end_transaction("nope", 1, 0, True, tv2=False)).error == E.INVALID_PRODUCER_ID_MAPPING
    init = await coordinator.init_producer_id("tx", TIMEOUT_MS, None)
    pid = init.producer_id
    assert (await coordinator.end_transaction("tx", pid, 0, True, tv2=False)).error == E.INVALID_TXN_STATE  # Empty
    assert (await coordinator.end_transaction("tx", pid + 7, 0, True, tv2=False)).error == \
        E.INVALID_PRODUCER_ID_MAPPING
    await coordinator.add_partitions("tx", pid, 0, [("t", 0)])
    assert (await coordinator.end_transaction("tx", pid, 1, True, tv2=False)).error == E.PRODUCER_FENCED
    aborted = await coordinator.end_transaction("tx", pid, 0, False, tv2=False)
    assert aborted.error == E.NONE and coordinator.describe("tx").state == "CompleteAbort"
    assert markers(broker, "t", 0) == [(pid, 0, "ABORT", 0)]
    assert (await coordinator.end_transaction("tx", pid, 0, True, tv2=False)).error == E.INVALID_TXN_STATE


@async_test
async def test_tv2_bumps_the_epoch_at_every_end_and_accepts_a_retry(broker):
    coordinator = await loaded(broker)
    init = await coordinator.init_producer_id("tx", TIMEOUT_MS, None)
    pid = init.producer_id
    assert await coordinator.verify_for_append("tx", pid, 0, "t", 0, tv2=True) == E.NONE
    ended = await coordinator.end_transaction("tx", pid, 0, True, tv2=True)
    assert (ended.error, ended.producer_id, ended.producer_epoch) == (E.NONE, pid, 1)
    assert markers(broker, "t", 0) == [(pid, 1, "COMMIT", 0)]  # the marker carries the bumped epoch
    retried = await coordinator.end_transaction("tx", pid, 0, True, tv2=True)  # its response was lost
    assert (retried.error, retried.producer_id, retried.producer_epoch) == (E.NONE, pid, 1)
    assert (await coordinator.end_transaction("tx", pid, 0, False, tv2=True)).error == E.INVALID_TXN_STATE
    assert await coordinator.verify_for_append("tx", pid, 0, "t", 1, tv2=True) == E.PRODUCER_FENCED
    assert await coordinator.verify_for_append("tx", pid, 1, "t", 1, tv2=True) == E.NONE
    second = await coordinator.end_transaction("tx", pid, 1, False, tv2=True)
    assert (second.error, second.producer_epoch) == (E.NONE, 2)
    assert markers(broker, "t", 1) == [(pid, 2, "ABORT", 0)]


@async_test
async def test_tv2_abort_of_an_empty_transaction_bumps_the_epoch(broker):
    coordinator = await loaded(broker)
    init = await coordinator.init_producer_id("tx", TIMEOUT_MS, None)
    ended = await coordinator.end_transaction("tx", init.producer_id, 0, False, tv2=True)
    assert (ended.error, ended.producer_epoch, coordinator.describe("tx").state) == (E.NONE, 1, "CompleteAbort")
    init2 = await coordinator.init_producer_id("tx2", TIMEOUT_MS, None)
    assert (await coordinator.end_transaction("tx2", init2.producer_id, 0, True, tv2=True)).error == \
        E.INVALID_TXN_STATE


@async_test
async def test_tv2_end_with_an_exhausted_epoch_rotates_the_producer_id(broker):
    coordinator = await loaded(broker)
    init = await coordinator.init_producer_id("tx", TIMEOUT_MS, None)
    old = coordinator.metadata("tx")
    coordinator._metadata["tx"] = old.transition(S.ONGOING, producer_epoch=LAST_USABLE_EPOCH,
                                                 partitions=frozenset({("t", 0)}), transaction_start_time_ms=1,
                                                 client_transaction_version=2)
    ended = await coordinator.end_transaction("tx", init.producer_id, LAST_USABLE_EPOCH, True, tv2=True)
    assert ended.error == E.NONE and ended.producer_id > init.producer_id and ended.producer_epoch == 0
    assert markers(broker, "t", 0) == [(init.producer_id, LAST_USABLE_EPOCH + 1, "COMMIT", 0)]
    view = coordinator.describe("tx")
    assert (view.producer_id, view.producer_epoch, view.state) == (ended.producer_id, 0, "CompleteCommit")
    retried = await coordinator.end_transaction("tx", init.producer_id, LAST_USABLE_EPOCH, True, tv2=True)
    assert (retried.error, retried.producer_id, retried.producer_epoch) == (E.NONE, ended.producer_id, 0)


@pytest.mark.parametrize("ended_with_commit", [True, False])
@async_test
async def test_tv2_end_after_a_completed_transaction_follows_kafkas_table(broker, ended_with_commit):
    """Retry (epoch - 1): the same result NONE, the other INVALID_TXN_STATE. Current epoch: abort bumps the epoch
    without markers, commit is INVALID_TXN_STATE. Any other epoch: PRODUCER_FENCED."""
    coordinator = await loaded(broker)
    pid = (await coordinator.init_producer_id("tx", TIMEOUT_MS, None)).producer_id
    await coordinator.verify_for_append("tx", pid, 0, "t", 0, tv2=True)
    assert (await coordinator.end_transaction("tx", pid, 0, ended_with_commit, tv2=True)).producer_epoch == 1
    end = coordinator.end_transaction
    assert (await end("tx", pid, 0, ended_with_commit, tv2=True)).error == E.NONE
    assert (await end("tx", pid, 0, not ended_with_commit, tv2=True)).error == E.INVALID_TXN_STATE
    assert (await end("tx", pid, 1, True, tv2=True)).error == E.INVALID_TXN_STATE
    assert (await end("tx", pid, 5, False, tv2=True)).error == E.PRODUCER_FENCED
    bumped = await end("tx", pid, 1, False, tv2=True)
    assert (bumped.error, bumped.producer_epoch, coordinator.describe("tx").state) == (E.NONE, 2, "CompleteAbort")
    assert len(markers(broker, "t", 0)) == 1  # no transaction was open: no marker


# --- views --------------------------------------------------------------------------------------------------------

@async_test
async def test_describe_and_list_filters(broker):
    coordinator = await loaded(broker)
    clock = [1_000_000]
    broker.now_ms = lambda: clock[0]
    old_pid, _ = await begin(coordinator, "old", [("t", 1), ("t", 0)])
    clock[0] += 5_000
    await begin(coordinator, "new", [("t", 2)])
    await coordinator.init_producer_id("idle", TIMEOUT_MS, None)
    clock[0] += 1_000
    assert [v.transactional_id for v in coordinator.views()] == ["idle", "new", "old"]
    assert coordinator.describe("old").partitions == [("t", 0), ("t", 1)]
    assert coordinator.describe("missing") is None
    assert {v.transactional_id for v in coordinator.list(states={"Ongoing"})} == {"old", "new"}
    assert [v.transactional_id for v in coordinator.list(producer_ids={old_pid})] == ["old"]
    assert [v.transactional_id for v in coordinator.list(states={"Ongoing"}, duration_filter_ms=3_000)] == ["old"]
    assert [v.transactional_id for v in coordinator.list(states={"Nonsense"})] == []
    assert len(coordinator.list()) == 3
