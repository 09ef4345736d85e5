"""Transaction markers: `write_markers` on its own, markers retried until they are written, the group side told
about markers in `__consumer_offsets`, and the periodic abort of timed-out transactions on a running broker."""
from __future__ import annotations

import asyncio

from compatbroker.coordinator.transactions import transactions_of, write_markers
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.topic_names import GROUP_METADATA_TOPIC
from tests.async_tests import async_test

from .transactions_support import begin, loaded, markers, new_broker

E = ErrorCode


async def until(condition, what: str) -> None:
    for _ in range(20_000):  # generous: a loaded machine still gets there long before
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"timed out waiting for {what}")


@async_test
async def test_write_markers_answers_per_partition(data_dir):
    broker = new_broker(data_dir, **{"log.flush.interval.messages": "1"})
    try:
        broker.create_topic("t", 2)
        results = await write_markers(broker, producer_id=7, producer_epoch=3, coordinator_epoch=0, commit=True,
                                      partitions=[("t", 0), ("t", 1), ("t", 5), ("gone", 0)])
        assert results == {("t", 0): E.NONE, ("t", 1): E.NONE, ("t", 5): E.UNKNOWN_TOPIC_OR_PARTITION,
                           ("gone", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        assert markers(broker, "t", 1) == [(7, 3, "COMMIT", 0)]
        log = broker.get_log("t", 1)
        assert log.recovery_point == log.log_end_offset == 1  # durable under the flush policy
    finally:
        broker.logs.shutdown()


@async_test
async def test_the_group_side_learns_of_markers_in_consumer_offsets(data_dir):
    broker = new_broker(data_dir)
    try:
        broker.create_topic(GROUP_METADATA_TOPIC, 2)
        calls = []

        class Offsets:
            async def complete_transaction(self, producer_id, partition, commit):
                calls.append((producer_id, partition, commit))

        class Groups:
            offsets = Offsets()

        broker.coordinator = Groups()
        await write_markers(broker, producer_id=9, producer_epoch=0, coordinator_epoch=0, commit=False,
                            partitions=[(GROUP_METADATA_TOPIC, 1)])
        assert calls == [(9, 1, False)]
        assert markers(broker, GROUP_METADATA_TOPIC, 1) == [(9, 0, "ABORT", 0)]
    finally:
        broker.logs.shutdown()


@async_test
async def test_markers_that_fail_are_retried_until_the_transaction_completes(data_dir, monkeypatch):
    broker = new_broker(data_dir)
    try:
        broker.create_topic("t", 2)
        coordinator = await loaded(broker)
        pid, epoch = await begin(coordinator, "tx", [("t", 0), ("t", 1)])
        log = broker.get_log("t", 1)
        failures = [OSError(5, "Input/output error")]
        real_append = log.append

        def append_failing_once(*args, **kwargs):
            if failures:
                raise failures.pop()
            return real_append(*args, **kwargs)

        monkeypatch.setattr(log, "append", append_failing_once)
        ended = await coordinator.end_transaction("tx", pid, epoch, True, tv2=False)
        assert ended.error == E.NONE  # PrepareCommit is durable: the commit will happen
        await until(lambda: coordinator.describe("tx").state == "CompleteCommit", "the retried markers")
        assert markers(broker, "t", 0) == markers(broker, "t", 1) == [(pid, epoch, "COMMIT", 0)]
    finally:
        await transactions_of(broker).stop()
        broker.logs.shutdown()


@async_test
async def test_the_broker_aborts_a_silent_transaction_after_its_timeout(data_dir):
    broker = new_broker(data_dir, **{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "20"})
    broker.start_background_work()
    try:
        broker.create_topic("t", 1)
        coordinator = await loaded(broker)
        pid, epoch = await begin(coordinator, "silent", [("t", 0)], timeout_ms=1)
        await until(lambda: coordinator.describe("silent").state == "CompleteAbort", "the timeout abort")
        assert markers(broker, "t", 0) == [(pid, epoch + 1, "ABORT", 0)]
        assert coordinator.describe("silent").producer_epoch == epoch + 1
    finally:
        await broker.shutdown()
