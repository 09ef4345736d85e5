"""The transaction coordinator across restarts (clean, and without a clean shutdown), its timeouts and
expiration, and the migration of `transactional-ids.json`."""
from __future__ import annotations

import asyncio
import os

import pytest

from compatbroker import producer_ids
from compatbroker.coordinator.transactions import transactions_of
from compatbroker.producer_ids import (PRODUCER_ID_BLOCK_FILE, TRANSACTIONAL_IDS_FILE, TransactionalProducer,
                                       producer_ids_of, write_transactional_ids)
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.topic_names import TRANSACTION_STATE_TOPIC
from tests.async_tests import async_test

from .test_transactions_coordinator import GatedMarkers
from .transactions_support import TIMEOUT_MS, begin, loaded, markers, new_broker

E = ErrorCode


def reopen(broker, data_dir, *, clean: bool, **properties):
    if clean:
        broker.logs.shutdown()
    else:
        broker.logs.close_unclean()  # a SIGKILL: no flush, no checkpoint, no clean-shutdown marker
    return new_broker(data_dir, **properties)


async def until(condition, what: str) -> None:
    for _ in range(10_000):  # generous: a loaded machine still gets there long before
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"timed out waiting for {what}")


async def three_transactions(broker):
    """'done' committed, 'open' Ongoing, 'idle' Empty; returns the coordinator and the producers."""
    broker.create_topic("t", 2)
    coordinator = await loaded(broker)
    done = await begin(coordinator, "done", [("t", 0)])
    assert (await coordinator.end_transaction("done", *done, True, tv2=False)).error == E.NONE
    opened = await begin(coordinator, "open", [("t", 0), ("t", 1)])
    await coordinator.init_producer_id("idle", TIMEOUT_MS, None)
    return coordinator, done, opened


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])
@async_test
async def test_states_survive_a_restart(data_dir, clean):
    broker = new_broker(data_dir)
    before, done, opened = await three_transactions(broker)
    views = before.views()
    broker = reopen(broker, data_dir, clean=clean)
    try:
        after = await loaded(broker)
        assert after.views() == views
        assert after.describe("open").state == "Ongoing"  # still open: its timeout applies
        ended = await after.end_transaction("open", *opened, False, tv2=False)
        assert ended.error == E.NONE and markers(broker, "t", 1) == [(*opened, "ABORT", 0)]
        assert (await after.end_transaction("done", *done, True, tv2=False)).error == E.NONE  # a retry
        assert (await after.init_producer_id("idle", TIMEOUT_MS, None)).producer_epoch == 1
        # allocation resumes above every producer id the transaction log knows
        assert await producer_ids_of(broker).new_producer_id() > max(v.producer_id for v in views)
    finally:
        broker.logs.shutdown()


@async_test
async def test_a_prepared_commit_is_completed_at_start(data_dir, monkeypatch):
    broker = new_broker(data_dir)
    broker.create_topic("t", 2)
    try:
        coordinator = await loaded(broker)
        pid, epoch = await begin(coordinator, "tx", [("t", 0), ("t", 1)])
        gated = GatedMarkers(monkeypatch)
        ending = asyncio.ensure_future(coordinator.end_transaction("tx", pid, epoch, True, tv2=False))
        await gated.until_called()
        assert coordinator.describe("tx").state == "PrepareCommit"
    finally:
        monkeypatch.undo()
    ending.cancel()  # the broker dies with the markers unwritten
    broker = reopen(broker, data_dir, clean=False)
    try:
        assert markers(broker, "t", 0) == []
        restarted = await loaded(broker)
        await until(lambda: restarted.describe("tx").state == "CompleteCommit", "the commit to complete")
        assert markers(broker, "t", 0) == markers(broker, "t", 1) == [(pid, epoch, "COMMIT", 0)]
    finally:
        await restarted.stop()
        broker.logs.shutdown()


@async_test
async def test_a_timed_out_transaction_is_aborted_and_its_producer_fenced(data_dir):
    broker = new_broker(data_dir)
    broker.create_topic("t", 1)
    clock = [1_000_000]
    broker.now_ms = lambda: clock[0]
    try:
        coordinator = await loaded(broker)
        pid, epoch = await begin(coordinator, "slow", [("t", 0)], timeout_ms=5_000)
        await begin(coordinator, "fast", [("t", 0)], timeout_ms=60_000)
        clock[0] += 5_000
        assert await coordinator.abort_timed_out_transactions() == []  # not older than its timeout yet
        clock[0] += 1
        assert await broker.abort_timed_out_transactions() == 1
        view = coordinator.describe("slow")
        assert (view.state, view.producer_epoch) == ("CompleteAbort", epoch + 1)
        assert (pid, epoch + 1, "ABORT", 0) in markers(broker, "t", 0)
        assert coordinator.describe("fast").state == "Ongoing"
        assert await coordinator.add_partitions("slow", pid, epoch, [("t", 0)]) == E.PRODUCER_FENCED
        assert (await coordinator.end_transaction("slow", pid, epoch, True, tv2=False)).error == E.PRODUCER_FENCED
    finally:
        broker.logs.shutdown()


@async_test
async def test_idle_ids_expire_but_never_with_an_open_transaction(data_dir):
    broker = new_broker(data_dir, **{"transactional.id.expiration.ms": "1000"})
    broker.create_topic("t", 1)
    clock = [1_000_000]
    broker.now_ms = lambda: clock[0]
    try:
        coordinator = await loaded(broker)
        first = await coordinator.init_producer_id("idle", TIMEOUT_MS, None)
        await begin(coordinator, "open", [("t", 0)], timeout_ms=900_000)
        clock[0] += 999
        assert await coordinator.expire_transactional_ids() == []
        clock[0] += 1
        assert await broker.expire_transactional_ids() == 1
        assert coordinator.describe("idle") is None and coordinator.describe("open").state == "Ongoing"
        reborn = await coordinator.init_producer_id("idle", TIMEOUT_MS, None)
        assert reborn.producer_epoch == 0 and reborn.producer_id != first.producer_id
        clock[0] += 1000
        assert await coordinator.expire_transactional_ids() == ["idle"]
        broker = reopen(broker, data_dir, clean=True)  # the tombstone is in the log
        broker.now_ms = lambda: clock[0]
        assert (await loaded(broker)).describe("idle") is None
    finally:
        broker.logs.shutdown()


@async_test
async def test_the_json_file_is_migrated_once(data_dir):
    os.makedirs(data_dir)
    path = os.path.join(data_dir, TRANSACTIONAL_IDS_FILE)
    write_transactional_ids(path, {"a": TransactionalProducer(5000, 7, 5000, -1, 30_000, 123),
                                   "b": TransactionalProducer(6000, 0, -1, -1, TIMEOUT_MS, 456)})
    broker = new_broker(data_dir)
    try:
        coordinator = await loaded(broker)
        assert not os.path.exists(path)
        a = coordinator.describe("a")
        assert (a.state, a.producer_id, a.producer_epoch, a.transaction_timeout_ms) == ("Empty", 5000, 7, 30_000)
        assert coordinator.metadata("b").last_update_time_ms == 456
        assert await producer_ids_of(broker).new_producer_id() > 6000
        assert (await coordinator.init_producer_id("a", TIMEOUT_MS, (5000, 7))).producer_epoch == 8
        broker = reopen(broker, data_dir, clean=True)
        os.remove(os.path.join(data_dir, PRODUCER_ID_BLOCK_FILE))  # lost: the log alone must raise allocation
        again = await loaded(broker)
        assert again.describe("a").producer_epoch == 8 and again.describe("b").producer_id == 6000
        assert await producer_ids_of(broker).new_producer_id() > 6000
    finally:
        broker.logs.shutdown()


@async_test
async def test_an_unreadable_json_file_is_left_alone(data_dir):
    os.makedirs(data_dir)
    path = os.path.join(data_dir, TRANSACTIONAL_IDS_FILE)
    with open(path, "w") as target:
        target.write("{not json")
    broker = new_broker(data_dir)
    try:
        coordinator = await loaded(broker)
        assert coordinator.loaded and os.path.exists(path) and coordinator.views() == []
    finally:
        broker.logs.shutdown()


@async_test
async def test_background_work_starts_and_stops_the_coordinator(data_dir):
    broker = new_broker(data_dir)
    broker.start_background_work()
    coordinator = transactions_of(broker)
    await coordinator.start()
    assert broker.finalized_transaction_version == 2 and broker.transactions is coordinator
    assert (await coordinator.init_producer_id("tx", TIMEOUT_MS, None)).error == E.NONE
    assert broker.topic(TRANSACTION_STATE_TOPIC) is not None
    await broker.shutdown()
    assert producer_ids.read_next_block(os.path.join(data_dir, PRODUCER_ID_BLOCK_FILE)) > 0
