"""Transactional offset commits in the offset store: the batch Kafka's group coordinator writes, pending until the
marker, commit / abort, the newer record winning over an older transactional commit, tombstones, retention, and
open transactions surviving a restart (clean and SIGKILL-style) to be completed by a marker written afterwards.

Markers are written here as the transaction coordinator's marker writer does (a control batch appended with origin
COORDINATOR, then `complete_transaction`), so these tests need nothing of the transaction coordinator."""
from __future__ import annotations

import asyncio
import threading

import pytest

from compatbroker.coordinator import loader
from compatbroker.coordinator.offsets import (TXN_OFFSET_COMMIT_BASE_SEQUENCE, OffsetRecord, OffsetWriteError,
                                              offset_commit_key, offset_commit_value, parse_record)
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.records.batch import iter_batches, iter_records
from compatbroker.protocol.records.control import ControlRecordType, build_control_batch
from compatbroker.storage.validator import COORDINATOR
from tests.async_tests import async_test
from tests.coordinator.test_offsets_store import (RETENTION, T0, TOPIC, StandInCoordinator, append_raw, new_broker,
                                                  offset, raw_batch, started)

PRODUCER, EPOCH = 4000, 3


@pytest.fixture
def broker(data_dir):
    broker = new_broker(data_dir)
    yield broker
    broker.logs.shutdown()


def write_marker(broker, store, group_id, commit, producer_id=PRODUCER, epoch=EPOCH):
    """The marker of the producer's transaction in the group's partition, as the marker writer appends it."""
    partition_log = broker.get_log(TOPIC, store.partition_for(group_id))
    marker = build_control_batch(ControlRecordType.COMMIT if commit else ControlRecordType.ABORT,
                                 producer_id=producer_id, producer_epoch=epoch, coordinator_epoch=0, timestamp=T0)
    partition_log.append(marker, leader_epoch=broker.leader_epoch(TOPIC, partition_log.partition), now_ms=T0,
                         origin=COORDINATOR)


async def end_transaction(broker, store, group_id, commit, producer_id=PRODUCER, epoch=EPOCH):
    write_marker(broker, store, group_id, commit, producer_id, epoch)
    await store.complete_transaction(producer_id, store.partition_for(group_id), commit)


def visible(store, group_id="g"):
    return {key: committed.offset for key, committed in store.fetch(group_id).items()}


def batches_of(broker, store, group_id="g"):
    partition_log = broker.get_log(TOPIC, store.partition_for(group_id))
    data = partition_log.read_bytes(partition_log.log_start_offset, 1 << 30)
    return [(header, list(iter_records(data[start:start + header.size], max_size=1 << 30)))
            for start, header in iter_batches(data)]


# --- the batch ----------------------------------------------------------------------------------------------------

@async_test
async def test_the_commit_is_one_transactional_batch_of_the_producer(broker):
    store = (await started(broker)).offsets
    await store.commit_transactional("g", PRODUCER, EPOCH, [offset("t", 0, 10, metadata="m"), offset("t", 1, 11)])
    (header, records), = batches_of(broker, store)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (PRODUCER, EPOCH, 0)
    assert TXN_OFFSET_COMMIT_BASE_SEQUENCE == 0  # Kafka's group coordinator writes base sequence 0
    assert header.is_transactional and not header.is_control
    parsed = [parse_record(bytes(r.key), bytes(r.value)) for r in records]
    assert [(p.group_id, p.topic, p.partition, p.committed.offset, p.committed.metadata) for p in parsed] == [
        ("g", "t", 0, 10, "m"), ("g", "t", 1, 11, "")]
    assert parsed[0].committed.commit_timestamp_ms == T0  # stamped with the broker's clock


@async_test
async def test_pending_until_the_commit_marker(broker):
    store = (await started(broker)).offsets
    await store.commit("g", [offset("t", 0, 1)])
    await store.commit_transactional("g", PRODUCER, EPOCH, [offset("t", 0, 10), offset("t", 1, 11)])
    assert visible(store) == {("t", 0): 1}
    assert store.has_unstable_offset("g", "t", 0) and store.has_unstable_offset("g", "t", 1)
    assert not store.has_unstable_offset("g", "t", 2) and not store.has_unstable_offset("other", "t", 0)
    await end_transaction(broker, store, "g", commit=True)
    assert visible(store) == {("t", 0): 10, ("t", 1): 11}
    assert not store.has_unstable_offset("g", "t", 0) and not store.has_unstable_offset("g", "t", 1)


@async_test
async def test_an_abort_drops_the_pending_commits(broker):
    store = (await started(broker)).offsets
    await store.commit("g", [offset("t", 0, 1)])
    await store.commit_transactional("g", PRODUCER, EPOCH, [offset("t", 0, 10), offset("t", 1, 11)])
    await end_transaction(broker, store, "g", commit=False)
    assert visible(store) == {("t", 0): 1}
    assert not store.has_unstable_offset("g", "t", 0) and not store.has_unstable_offset("g", "t", 1)
    await end_transaction(broker, store, "g", commit=True)  # a later marker finds nothing to complete
    assert visible(store) == {("t", 0): 1}


@async_test
async def test_a_group_with_only_an_open_transaction_is_known_until_an_abort(broker):
    coordinator = await started(broker)
    store = coordinator.offsets
    await store.commit_transactional("fresh", PRODUCER, EPOCH, [offset("t", 0, 10)])
    assert store.groups_with_offsets() == {"fresh"}  # Kafka materialises the simple group at the commit
    await end_transaction(broker, store, "fresh", commit=False)
    assert store.groups_with_offsets() == set() and store.fetch("fresh") == {}


@async_test
async def test_transactions_of_different_producers_end_separately(broker):
    store = (await started(broker)).offsets
    await store.commit_transactional("g", PRODUCER, EPOCH, [offset("t", 0, 10)])
    await store.commit_transactional("g", PRODUCER + 1, 0, [offset("t", 1, 20)])
    await end_transaction(broker, store, "g", commit=True)
    assert visible(store) == {("t", 0): 10}
    assert store.has_unstable_offset("g", "t", 1)
    await end_transaction(broker, store, "g", commit=True, producer_id=PRODUCER + 1, epoch=0)
    assert visible(store) == {("t", 0): 10, ("t", 1): 20}


@async_test
async def test_a_marker_completes_only_the_commits_of_its_partition(broker):
    groups = ("g", "h")
    store = (await started(broker)).offsets
    assert store.partition_for("g") != store.partition_for("h")
    for group_id in groups:
        await store.commit_transactional(group_id, PRODUCER, EPOCH, [offset("t", 0, 10)])
    await end_transaction(broker, store, "g", commit=True)
    assert visible(store, "g") == {("t", 0): 10} and visible(store, "h") == {}
    assert store.has_unstable_offset("h", "t", 0)
    await end_transaction(broker, store, "h", commit=True)
    assert visible(store, "h") == {("t", 0): 10}


@async_test
async def test_the_commit_is_durable_before_it_returns_under_a_flush_policy(data_dir):
    broker = new_broker(data_dir, **{"log.flush.interval.messages": "1"})
    store = (await started(broker)).offsets
    await store.commit_transactional("g", PRODUCER, EPOCH, [offset("t", 0, 10)])
    partition_log = broker.get_log(TOPIC, store.partition_for("g"))
    assert partition_log.recovery_point == partition_log.log_end_offset == 1
    broker.logs.shutdown()


@async_test
async def test_nothing_is_pending_when_the_write_is_refused(broker):
    coordinator = StandInCoordinator(broker)  # not loaded
    with pytest.raises(OffsetWriteError) as refused:
        await coordinator.offsets.commit_transactional("g", PRODUCER, EPOCH, [offset("t", 0, 10)])
    assert refused.value.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert not coordinator.offsets.has_unstable_offset("g", "t", 0)


# --- the newer record wins ----------------------------------------------------------------------------------------

@async_test
async def test_a_regular_commit_written_after_the_transactional_one_wins(broker):
    store = (await started(broker)).offsets
    await store.commit_transactional("g", PRODUCER, EPOCH, [offset("t", 0, 10), offset("t", 1, 11)])
    await store.commit("g", [offset("t", 0, 20)])
    assert store.has_unstable_offset("g", "t", 0)  # pending all the same, as in Kafka
    await end_transaction(broker, store, "g", commit=True)
    assert visible(store) == {("t", 0): 20, ("t", 1): 11}


@async_test
async def test_a_transactional_commit_written_after_a_regular_one_wins(broker):
    store = (await started(broker)).offsets
    await store.commit("g", [offset("t", 0, 20)])
    await store.commit_transactional("g", PRODUCER, EPOCH, [offset("t", 0, 10)])
    await end_transaction(broker, store, "g", commit=True)
    assert visible(store) == {("t", 0): 10}


@async_test
async def test_replay_keeps_the_newer_regular_commit_too(data_dir):
    broker = new_broker(data_dir)
    store = (await started(broker)).offsets
    await store.commit_transactional("g", PRODUCER, EPOCH, [offset("t", 0, 10), offset("t", 1, 11)])
    await store.commit("g", [offset("t", 0, 20)])
    await end_transaction(broker, store, "g", commit=True)
    await broker.shutdown()
    reopened = new_broker(data_dir)
    again = (await started(reopened)).offsets
    assert visible(again) == {("t", 0): 20, ("t", 1): 11}
    assert not again.has_unstable_offset("g", "t", 0)
    await reopened.shutdown()


# --- restarts -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("commit", [True, False])
@pytest.mark.parametrize("clean", [True, False])
@async_test
async def test_an_open_transaction_survives_a_restart_and_its_marker_completes_it(data_dir, commit, clean):
    properties = {"log.flush.interval.messages": "1"}  # durable before acknowledged, so a SIGKILL keeps it
    broker = new_broker(data_dir, **properties)
    store = (await started(broker)).offsets
    await store.commit("g", [offset("t", 0, 1)])
    await store.commit_transactional("g", PRODUCER, EPOCH, [offset("t", 0, 10), offset("t", 1, 11)])
    await store.commit_transactional("h", PRODUCER + 1, 0, [offset("t", 0, 30)])
    await end_transaction(broker, store, "h", commit=True, producer_id=PRODUCER + 1, epoch=0)
    if clean:
        await broker.shutdown()
    else:
        broker.logs.close_unclean()
    reopened = new_broker(data_dir, **properties)
    again = (await started(reopened)).offsets
    assert visible(again) == {("t", 0): 1} and visible(again, "h") == {("t", 0): 30}
    assert again.has_unstable_offset("g", "t", 0) and again.has_unstable_offset("g", "t", 1)
    assert not again.has_unstable_offset("h", "t", 0)
    await end_transaction(reopened, again, "g", commit=commit)
    assert visible(again) == ({("t", 0): 10, ("t", 1): 11} if commit else {("t", 0): 1})
    assert not again.has_unstable_offset("g", "t", 0)
    await reopened.shutdown()


@async_test
async def test_a_group_known_only_from_an_open_transaction_after_a_restart(data_dir):
    broker = new_broker(data_dir)
    store = (await started(broker)).offsets
    await store.commit_transactional("fresh", PRODUCER, EPOCH, [offset("t", 0, 10)])
    await broker.shutdown()
    reopened = new_broker(data_dir)
    again = (await started(reopened)).offsets
    assert again.groups_with_offsets() == {"fresh"} and again.fetch("fresh") == {}
    await end_transaction(reopened, again, "fresh", commit=True)
    assert visible(again, "fresh") == {("t", 0): 10}
    await reopened.shutdown()


@async_test
async def test_a_marker_written_while_the_replay_runs_completes_after_it(data_dir, monkeypatch):
    broker = new_broker(data_dir)
    store = (await started(broker)).offsets
    await store.commit_transactional("g", PRODUCER, EPOCH, [offset("t", 0, 10)])
    await broker.shutdown()
    reopened = new_broker(data_dir)
    coordinator = StandInCoordinator(reopened)
    again = coordinator.offsets
    original = loader.replay_partition
    replayed, release = threading.Event(), threading.Event()

    def replay_raced_by_the_marker_writer(partition_log, end, into):
        original(partition_log, end, into)  # read up to the end the log had: the marker below is past it
        replayed.set()
        release.wait(30)

    monkeypatch.setattr(loader, "replay_partition", replay_raced_by_the_marker_writer)
    loading = asyncio.ensure_future(again.load())
    assert await asyncio.to_thread(replayed.wait, 30)
    write_marker(reopened, again, "g", commit=True)
    racing = asyncio.ensure_future(again.complete_transaction(PRODUCER, again.partition_for("g"), True))
    await asyncio.sleep(0)  # a yield: the marker writer's call takes its first step before the replay is applied
    release.set()
    await loading
    await racing
    assert visible(again) == {("t", 0): 10} and not again.has_unstable_offset("g", "t", 0)
    await reopened.shutdown()


@async_test
async def test_replay_applies_a_transactions_last_commit_of_a_partition(broker):
    key = offset_commit_key("g", "t", 0)
    for at in (10, 11):
        append_raw(broker, "g", raw_batch((key, offset_commit_value(offset("t", 0, at))), producer_id=PRODUCER,
                                          producer_epoch=EPOCH, is_transactional=True))
    store = (await started(broker)).offsets
    await end_transaction(broker, store, "g", commit=True)
    assert visible(store) == {("t", 0): 11}


# --- tombstones and retention -------------------------------------------------------------------------------------

@async_test
async def test_offset_deletion_writes_a_tombstone_for_a_pending_commit_and_drops_it(data_dir):
    broker = new_broker(data_dir)
    store = (await started(broker)).offsets
    await store.commit_transactional("g", PRODUCER, EPOCH, [offset("t", 0, 10), offset("t", 1, 11)])
    await store.delete_offsets("g", [("t", 0)])
    _, records = batches_of(broker, store)[-1]
    assert [(bytes(r.key), r.value) for r in records] == [(offset_commit_key("g", "t", 0), None)]
    assert not store.has_unstable_offset("g", "t", 0) and store.has_unstable_offset("g", "t", 1)
    await end_transaction(broker, store, "g", commit=True)
    assert visible(store) == {("t", 1): 11}
    await broker.shutdown()
    reopened = new_broker(data_dir)
    assert visible((await started(reopened)).offsets) == {("t", 1): 11}  # replay agrees
    await reopened.shutdown()


@async_test
async def test_a_commit_written_after_the_tombstone_stays(broker):
    store = (await started(broker)).offsets
    await store.commit("g", [offset("t", 0, 1)])
    await store.delete_offsets("g", [("t", 0)])
    await store.commit_transactional("g", PRODUCER, EPOCH, [offset("t", 0, 10)])
    await end_transaction(broker, store, "g", commit=True)
    assert visible(store) == {("t", 0): 10}


@async_test
async def test_group_deletion_covers_pending_commits(broker):
    store = (await started(broker)).offsets
    await store.commit("g", [offset("t", 0, 1)])
    await store.commit_transactional("g", PRODUCER, EPOCH, [offset("t", 0, 10), offset("t", 1, 11)])
    await store.delete_group("g")
    _, records = batches_of(broker, store)[-1]
    tombstones = [parse_record(bytes(r.key), None) for r in records]
    assert sorted(t.partition for t in tombstones if isinstance(t, OffsetRecord)) == [0, 1]
    assert all(r.value is None for r in records)
    assert not store.has_unstable_offset("g", "t", 0) and not store.has_unstable_offset("g", "t", 1)
    await end_transaction(broker, store, "g", commit=True)
    assert store.fetch("g") == {} and store.groups_with_offsets() == set()


@async_test
async def test_retention_waits_for_the_pending_commit_and_keeps_the_group(broker):
    coordinator = await started(broker, RETENTION)
    store = coordinator.offsets
    await store.commit("g", [offset("t", 0, 1), offset("t", 1, 2)])
    await store.commit_transactional("g", PRODUCER, EPOCH, [offset("t", 0, 10)])
    await store.commit_transactional("only-open", PRODUCER, EPOCH, [offset("t", 0, 10)])
    broker.now_ms.now_ms += RETENTION.retention_ms
    assert await store.expire_offsets() == 1  # t-1; t-0 waits for its transaction
    assert visible(store) == {("t", 0): 1}
    assert coordinator.offsets_gone == []  # a group with an open transaction is not removed
    await end_transaction(broker, store, "g", commit=False)
    assert await store.expire_offsets() == 1
    assert "g" in coordinator.offsets_gone and "only-open" not in coordinator.offsets_gone

