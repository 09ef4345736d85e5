"""The Broker: identity in meta.properties, the topic registry, long-poll wake-ups, durability, periodic work."""
from __future__ import annotations

import asyncio
import os
import uuid

import pytest

from compatbroker.broker import Broker, TopicInfo
from compatbroker.protocol.records.batch import build_batch
from compatbroker.storage.checkpoints import read_offsets, read_properties

from .helpers import make_config


def _started(tmp_path, **properties) -> Broker:
    broker = Broker(make_config(tmp_path, **properties))
    broker.startup()
    return broker


def _append(broker: Broker, topic: str, partition: int, value: bytes = b"v") -> None:
    log = broker.get_log(topic, partition)
    log.append(build_batch([(None, value, (), broker.now_ms())]), leader_epoch=0, now_ms=broker.now_ms())


async def test_cluster_id_is_generated_once_and_kept_in_meta_properties(tmp_path):
    broker = _started(tmp_path, node_id=7)
    meta = read_properties(os.path.join(broker.config.data_dir, "meta.properties"))
    assert meta["cluster.id"] == broker.cluster_id and meta["node.id"] == "7"
    assert len(broker.cluster_id) == 22  # Kafka's base64 form of a 16-byte uuid
    await broker.shutdown()

    again = _started(tmp_path, node_id=7)
    assert again.cluster_id == broker.cluster_id and again.node_id == 7
    await again.shutdown()


async def test_topics_with_their_ids_survive_a_restart(tmp_path):
    broker = _started(tmp_path, num_partitions=3)
    created = broker.create_topic("orders")
    explicit = broker.create_topic("events", 2, {"cleanup.policy": "compact"})
    internal = broker.create_topic("__consumer_offsets", 1)
    assert created == TopicInfo("orders", created.topic_id, 3, False)
    assert explicit.partitions == 2 and internal.is_internal
    assert broker.create_topic("orders", 5) is created  # idempotent: the existing topic, unchanged
    assert broker.topic_by_id(created.topic_id) is created
    assert broker.topic("missing") is None and broker.topic_by_id(uuid.uuid4()) is None
    _append(broker, "orders", 2)
    await broker.shutdown()

    again = _started(tmp_path)
    assert again.topics() == {"orders": created, "events": explicit, "__consumer_offsets": internal}
    assert again.topic_by_id(explicit.topic_id) == explicit
    assert again.get_log("orders", 2).log_end_offset == 1
    assert again.get_log("events", 0).config.compact
    assert again.get_log("orders", 3) is None
    assert again.leader_epoch("orders", 0) == 0
    await again.shutdown()


async def test_topics_returns_a_copy_and_partition_counts_are_checked(tmp_path):
    broker = _started(tmp_path)
    broker.topics()["injected"] = None
    assert broker.topic("injected") is None
    with pytest.raises(ValueError):
        broker.create_topic("empty", 0)
    assert broker.topic("empty") is None
    await broker.shutdown()


async def test_long_poll_wakes_on_an_append_to_any_of_its_partitions(tmp_path):
    broker = _started(tmp_path)
    waiter = asyncio.create_task(broker.wait_for_append([("a", 0), ("b", 1)], 30))
    other = asyncio.create_task(broker.wait_for_append([("c", 0)], 30))
    await asyncio.sleep(0)  # let both register
    broker.notify_appended("b", 1)
    await asyncio.wait_for(waiter, 5)  # far below its own 30 s timeout
    assert not other.done()
    broker.notify_appended("c", 0)
    await asyncio.wait_for(other, 5)
    assert broker._append_waiters == {}  # nothing left registered
    await broker.shutdown()


async def test_long_poll_returns_after_its_timeout_without_an_append(tmp_path):
    broker = _started(tmp_path)
    loop = asyncio.get_running_loop()
    began = loop.time()
    await broker.wait_for_append([("a", 0)], 0.05)
    assert loop.time() - began >= 0.05
    assert broker._append_waiters == {}
    await broker.wait_for_append([("a", 0)], 0)  # no wait at all
    await broker.shutdown()


async def test_shutdown_answers_long_polls_at_once(tmp_path):
    broker = _started(tmp_path)
    waiter = asyncio.create_task(broker.wait_for_append([("a", 0)], 30))
    await asyncio.sleep(0)
    broker.begin_shutdown()
    await asyncio.wait_for(waiter, 5)
    await asyncio.wait_for(broker.wait_for_append([("a", 0)], 30), 5)  # later polls do not wait either
    await broker.shutdown()


async def test_make_durable_moves_the_recovery_point(tmp_path):
    broker = _started(tmp_path)
    broker.create_topic("t", 1)
    _append(broker, "t", 0)
    log = broker.get_log("t", 0)
    assert log.recovery_point == 0
    await broker.make_durable([log])
    assert log.recovery_point == 1
    await broker.shutdown()


async def test_periodic_jobs_flush_checkpoint_retain_and_clean(tmp_path):
    broker = _started(tmp_path, log_flush_interval_ms=0)
    broker.create_topic("t", 1)
    _append(broker, "t", 0)
    assert await broker.flush_due_logs() == 1  # flush.ms=0: everything unflushed is due
    assert broker.get_log("t", 0).recovery_point == 1
    await broker.checkpoint()
    checkpoint = read_offsets(os.path.join(broker.config.data_dir, "recovery-point-offset-checkpoint"))
    assert checkpoint[("t", 0)] == 1
    assert await broker.run_retention() == 0
    assert await broker.run_cleaner() == 0
    await broker.shutdown()


async def test_background_work_runs_at_its_interval_and_stops(tmp_path):
    broker = _started(tmp_path, log_flush_offset_checkpoint_interval_ms=20,
                      log_flush_start_offset_checkpoint_interval_ms=30, log_retention_check_interval_ms=3_600_000)
    calls = []
    second_call = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def checkpoint():
        calls.append(loop.time())
        if len(calls) == 2:
            second_call.set()

    broker.checkpoint = checkpoint  # the job the scheduler looks up when it starts
    began = loop.time()
    broker.start_background_work()
    assert {task.get_name() for task in broker._background} == {"compatbroker flush_due_logs",
                                                                "compatbroker checkpoint",
                                                                "compatbroker run_retention",
                                                                "compatbroker run_cleaner",
                                                                "compatbroker expire_producers",
                                                                "compatbroker expire_transactional_ids",
                                                                "compatbroker abort_timed_out_transactions"}
    await second_call.wait()
    assert calls[0] - began >= 0.02 and calls[1] - calls[0] >= 0.02  # the smaller of the two intervals
    await broker.shutdown()
    assert broker._background == []
    count = len(calls)
    await asyncio.sleep(0.05)  # stopped: no call comes later
    assert len(calls) == count


async def test_advertised_endpoint_defaults_to_the_listener(tmp_path):
    from compatbroker.config import Endpoint

    broker = _started(tmp_path, advertised_listeners="PLAINTEXT://kafka.internal:19092")
    assert broker.advertised_endpoint("127.0.0.1", 40000) == ("127.0.0.1", 40000)  # not registered yet
    broker.register_listener(Endpoint("PLAINTEXT", "127.0.0.1", 0), 40000)
    assert broker.advertised_endpoint("127.0.0.1", 40000) == ("kafka.internal", 19092)
    assert broker.advertised_endpoint("127.0.0.1", 40001) == ("127.0.0.1", 40001)
    await broker.shutdown()


async def test_fetch_session_cache_uses_the_configured_slots(tmp_path):
    broker = _started(tmp_path, max_incremental_fetch_session_cache_slots=7)
    assert broker.fetch_sessions.max_slots == 7
    await broker.shutdown()


async def test_expire_producers_forgets_idle_producers_in_every_partition(tmp_path):
    broker = _started(tmp_path, producer_id_expiration_ms=60_000)
    broker.create_topic("t", 2)
    now = broker.now_ms()
    for partition, (producer_id, last_write) in enumerate([(5, now - 120_000), (6, now)]):
        batch = build_batch([(None, b"v", (), last_write)], producer_id=producer_id, producer_epoch=0,
                            base_sequence=0)
        broker.get_log("t", partition).append(batch, leader_epoch=0, now_ms=now)
    assert await broker.expire_producers() == 1  # producer 5 wrote two minutes ago, over the minute allowed
    assert [entry.producer_id for entry in broker.get_log("t", 1).producer_state.active_producers()] == [6]
    assert broker.get_log("t", 0).producer_state.active_producers() == []
    assert await broker.expire_producers() == 0
    await broker.shutdown()
