"""DeleteTopics: by name and by id, every malformed request, and what deletion does to the rest of the broker (disk,
Produce, Fetch, ListOffsets, Metadata, long polls, fetch sessions, committed offsets, re-creation)."""
from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid

import pytest

from compatbroker import broker as broker_module
from compatbroker.coordinator import coordinator_of
from compatbroker.coordinator.offsets import CommittedOffset
from compatbroker.handlers import delete_topics
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import DeleteTopicsRequest, ListOffsetsRequest, MetadataRequest, ProduceRequest
from compatbroker.storage.checkpoints import RECOVERY_POINT_CHECKPOINT, read_offsets

from .helpers import make_broker
from .helpers import batch, call, on_the_wire, start
from .test_fetch import WaitSpy, fetch_request

State = DeleteTopicsRequest.DeleteTopicState
ALL_VERSIONS = range(delete_topics.MIN_VERSION, delete_topics.MAX_VERSION + 1)
ZERO_UUID = uuid.UUID(int=0)
E = ErrorCode


async def delete(broker, *names, version: int = 6) -> list:
    """Delete by name; the decoded results in order."""
    request = (DeleteTopicsRequest(topic_names=list(names), timeout_ms=5000) if version < 6 else
               DeleteTopicsRequest(topics=[State(name=name) for name in names], timeout_ms=5000))
    return (await call(broker, version, request)).decoded.responses


async def delete_states(broker, *states) -> list:
    return (await call(broker, 6, DeleteTopicsRequest(topics=list(states), timeout_ms=5000))).decoded.responses


def answered(results) -> list[tuple]:
    return [(r.name, r.topic_id, r.error_code, r.error_message) for r in results]


def on_disk(broker) -> list[str]:
    return sorted(entry for entry in os.listdir(broker.logs.data_dir)
                  if os.path.isdir(os.path.join(broker.logs.data_dir, entry)))


def append(broker, topic: str, partition: int, *values: bytes) -> None:
    broker.get_log(topic, partition).append(batch(*values), leader_epoch=0, now_ms=broker.now_ms())


def test_declares_every_schema_version():
    assert (delete_topics.API_KEY, delete_topics.MIN_VERSION, delete_topics.MAX_VERSION) == (20, 0, 6)
    assert DeleteTopicsRequest.VALID_VERSIONS == (0, 6)


# --- deleting ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_deletes_by_name_at_every_version(broker, version):
    info = broker.create_topic("doomed", 3)
    broker.create_topic("kept", 1)
    append(broker, "doomed", 1, b"bye")
    [result] = await delete(broker, "doomed", version=version)
    assert (result.name, result.error_code) == ("doomed", E.NONE)
    assert result.topic_id == (info.topic_id if version >= 6 else ZERO_UUID)
    assert result.error_message is None
    assert broker.topic("doomed") is None and broker.topic_by_id(info.topic_id) is None
    assert all(broker.get_log("doomed", partition) is None for partition in range(3))
    assert on_disk(broker) == ["kept-0"]  # no `-delete` directory left behind either


async def test_deletes_by_id(broker):
    info = broker.create_topic("by-id", 2)
    [result] = await delete_states(broker, State(name=None, topic_id=info.topic_id))
    assert answered([result]) == [("by-id", info.topic_id, E.NONE, None)]
    assert broker.topic("by-id") is None
    assert on_disk(broker) == []


async def test_unknown_name(broker):
    results = await delete(broker, "ghost")
    assert answered(results) == [("ghost", ZERO_UUID, E.UNKNOWN_TOPIC_OR_PARTITION,
                                  E.UNKNOWN_TOPIC_OR_PARTITION.message)]


@pytest.mark.parametrize("version", [0, 4])
async def test_unknown_name_before_messages_existed(broker, version):
    [result] = await delete(broker, "ghost", version=version)
    assert (result.error_code, result.error_message) == (E.UNKNOWN_TOPIC_OR_PARTITION, None)


async def test_unknown_id(broker):
    missing = uuid.uuid4()
    results = await delete_states(broker, State(name=None, topic_id=missing))
    assert answered(results) == [(None, missing, E.UNKNOWN_TOPIC_ID, E.UNKNOWN_TOPIC_ID.message)]


async def test_neither_name_nor_id(broker):
    results = await delete_states(broker, State(name=None, topic_id=ZERO_UUID))
    assert answered(results) == [(None, ZERO_UUID, E.INVALID_REQUEST, "Neither topic name nor id were specified.")]


async def test_both_name_and_id(broker):
    info = broker.create_topic("both", 1)
    results = await delete_states(broker, State(name="both", topic_id=info.topic_id))
    assert answered(results) == [("both", info.topic_id, E.INVALID_REQUEST,
                                  "You may not specify both topic name and topic id.")]
    assert broker.topic("both") is not None


async def test_duplicate_names_are_answered_once_and_kept(broker):
    broker.create_topic("twice", 1)
    broker.create_topic("once", 1)
    results = await delete(broker, "twice", "once", "twice")
    assert [(r.name, r.error_code, r.error_message) for r in results] == [
        ("twice", E.INVALID_REQUEST, "Duplicate topic name."), ("once", E.NONE, None)]
    assert broker.topic("twice") is not None and broker.topic("once") is None


async def test_duplicate_ids_are_answered_once_and_kept(broker):
    info = broker.create_topic("twice", 1)
    results = await delete_states(broker, State(name=None, topic_id=info.topic_id),
                                  State(name=None, topic_id=info.topic_id))
    assert answered(results) == [(None, info.topic_id, E.INVALID_REQUEST, "Duplicate topic id.")]
    assert broker.topic("twice") is not None


async def test_a_name_and_its_id_in_one_request(broker):
    info = broker.create_topic("aliased", 1)
    results = await delete_states(broker, State(name=None, topic_id=info.topic_id), State(name="aliased"))
    message = "The provided topic name maps to an ID that was already supplied."
    assert answered(results) == [("aliased", info.topic_id, E.INVALID_REQUEST, message)] * 2
    assert broker.topic("aliased") is not None


@pytest.mark.parametrize("name", ["__consumer_offsets", "__transaction_state"])
async def test_internal_topics_are_refused(broker, name):
    info = broker.create_topic(name, 2)
    [result] = await delete(broker, name)
    assert (result.name, result.topic_id, result.error_code) == (name, info.topic_id, E.INVALID_TOPIC_EXCEPTION)
    assert broker.topic(name) is not None and f"{name}-1" in on_disk(broker)


# --- after deletion ---------------------------------------------------------------------------------------------------

async def test_produce_answers_unknown_topic_by_name_and_unknown_id_by_id(broker):
    info = broker.create_topic("gone", 1)
    await delete(broker, "gone")
    for version, expected in ((9, E.UNKNOWN_TOPIC_OR_PARTITION), (13, E.UNKNOWN_TOPIC_ID)):
        request = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
            name="gone", topic_id=info.topic_id,
            partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch(b"late"))])])
        answer = (await call(broker, version, request)).decoded
        assert answer.responses[0].partition_responses[0].error_code == expected
    assert broker.topic("gone") is None  # Produce never re-creates it


async def test_fetch_answers_unknown_topic_by_name_and_unknown_id_by_id(broker):
    info = broker.create_topic("gone", 1)
    append(broker, "gone", 0, b"old")
    await delete(broker, "gone")
    by_name = (await call(broker, 12, fetch_request(broker, 12, ("gone", 0, 0, 1000)))).decoded
    by_id = (await call(broker, 13, fetch_request(broker, 13, ("gone", 0, 0, 1000),
                                                  topic_ids={"gone": info.topic_id}))).decoded
    assert by_name.responses[0].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert by_id.responses[0].partitions[0].error_code == E.UNKNOWN_TOPIC_ID


async def test_list_offsets_and_metadata_answer_unknown(broker):
    info = broker.create_topic("gone", 1)
    await delete(broker, "gone")
    lookup = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name="gone", partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    listed = (await call(broker, 7, lookup)).decoded
    assert listed.topics[0].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    wanted = MetadataRequest.MetadataRequestTopic
    by_name = (await call(broker, 12, MetadataRequest(topics=[wanted(name="gone")],
                                                      allow_auto_topic_creation=False))).decoded
    by_id = (await call(broker, 12, MetadataRequest(topics=[wanted(name=None, topic_id=info.topic_id)]))).decoded
    assert by_name.topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert by_id.topics[0].error_code == E.UNKNOWN_TOPIC_ID


async def test_a_recreated_topic_has_a_new_id_and_no_records(broker):
    old = broker.create_topic("phoenix", 2)
    append(broker, "phoenix", 0, b"a", b"b", b"c")
    await delete(broker, "phoenix")
    new = broker.create_topic("phoenix", 1)
    assert new.topic_id != old.topic_id and new.partitions == 1
    assert broker.get_log("phoenix", 0).log_end_offset == 0
    assert on_disk(broker) == ["phoenix-0"]


async def test_the_checkpoints_forget_the_deleted_partitions(broker):
    broker.create_topic("doomed", 2)
    broker.create_topic("kept", 1)
    append(broker, "doomed", 0, b"a", b"b")
    await broker.checkpoint()
    path = os.path.join(broker.logs.data_dir, RECOVERY_POINT_CHECKPOINT)
    assert ("doomed", 0) in read_offsets(path)
    await delete(broker, "doomed")
    assert sorted(read_offsets(path)) == [("kept", 0)]


async def test_deletion_survives_a_restart(tmp_path):
    broker = make_broker(tmp_path / "data")
    broker.create_topic("short-lived", 2)
    broker.create_topic("long-lived", 1)
    await delete(broker, "short-lived")
    broker.logs.shutdown()
    again = make_broker(tmp_path / "data")
    try:
        assert list(again.topics()) == ["long-lived"]
    finally:
        again.logs.shutdown()


async def test_a_long_poll_on_a_deleted_topic_answers_at_once(broker):
    broker.create_topic("t", 1)
    spy = WaitSpy(broker)
    began = time.monotonic()
    poll = asyncio.create_task(start(broker, 11, fetch_request(broker, 11, ("t", 0, 0, 1 << 20),
                                                                max_wait_ms=20_000)))
    await spy.until(1)
    assert not poll.done()
    await delete(broker, "t")
    response = await poll
    assert response.responses[0].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert time.monotonic() - began < 10


async def test_a_long_poll_over_two_topics_ends_when_one_is_deleted(broker):
    broker.create_topic("t", 1)
    broker.create_topic("other", 1)
    spy = WaitSpy(broker)
    began = time.monotonic()
    poll = asyncio.create_task(start(broker, 11, fetch_request(broker, 11, ("t", 0, 0, 1 << 20),
                                                                ("other", 0, 0, 1 << 20), max_wait_ms=20_000)))
    await spy.until(1)
    await delete(broker, "t")
    response = await poll
    assert time.monotonic() - began < 10, "the wait went on for the partition that is still there"
    errors = {topic.topic: topic.partitions[0].error_code for topic in response.responses}
    assert errors == {"t": E.UNKNOWN_TOPIC_OR_PARTITION, "other": E.NONE}


async def test_a_fetch_session_reports_its_deleted_partition(broker):
    broker.create_topic("t", 1)
    broker.create_topic("other", 1)
    first = (await call(broker, 13, fetch_request(broker, 13, ("t", 0, 0, 1000), ("other", 0, 0, 1000),
                                                  session_epoch=0))).decoded
    assert first.session_id != 0
    await delete(broker, "t")
    incremental = (await call(broker, 13, fetch_request(broker, 13, session_id=first.session_id,
                                                        session_epoch=1))).decoded
    assert incremental.error_code == E.NONE
    errors = [(p.partition_index, p.error_code) for topic in incremental.responses for p in topic.partitions]
    assert errors == [(0, E.UNKNOWN_TOPIC_OR_PARTITION)]  # as Kafka: the fetcher learns, then forgets it


# --- committed offsets ------------------------------------------------------------------------------------------------

async def test_committed_offsets_of_a_deleted_topic_are_removed(tmp_path):
    broker = make_broker(tmp_path / "data")
    broker.create_topic("gone", 2)
    broker.create_topic("kept", 1)
    coordinator = coordinator_of(broker)
    await coordinator.start()
    await coordinator.offsets.commit("g1", [CommittedOffset("gone", 0, 5), CommittedOffset("gone", 1, 7),
                                            CommittedOffset("kept", 0, 3)])
    await coordinator.offsets.commit("g2", [CommittedOffset("gone", 1, 1)])
    await delete(broker, "gone")
    assert set(coordinator.offsets.fetch("g1")) == {("kept", 0)}
    assert coordinator.offsets.fetch("g2") == {}
    await coordinator.stop()
    broker.logs.shutdown()

    again = make_broker(tmp_path / "data")  # the tombstones are in __consumer_offsets: a restart agrees
    replayed = coordinator_of(again)
    await replayed.start()
    try:
        assert set(replayed.offsets.fetch("g1")) == {("kept", 0)}
        assert replayed.offsets.fetch("g2") == {}
    finally:
        await replayed.stop()
        again.logs.shutdown()


# --- concurrent deletions and checkpoints -----------------------------------------------------------------------------

class HeldCheckpoints:
    """Replaces the broker's write_checkpoints: each write is held until `release()`, and the writes running at
    once are counted (a race of two writes over one file is what this must rule out)."""

    def __init__(self, monkeypatch):
        self._real = broker_module.write_checkpoints
        self._released = threading.Event()
        self._lock = threading.Lock()
        self.running = self.most_at_once = self.writes = 0
        monkeypatch.setattr(broker_module, "write_checkpoints", self._write)

    def release(self) -> None:
        self._released.set()

    def _write(self, *args):
        with self._lock:
            self.running += 1
            self.writes += 1
            self.most_at_once = max(self.most_at_once, self.running)
        try:
            self._released.wait(TEST_WAIT_S)
            return self._real(*args)
        finally:
            with self._lock:
                self.running -= 1


TEST_WAIT_S = 20


async def test_concurrent_deletions_and_a_periodic_checkpoint_write_one_at_a_time(broker, monkeypatch):
    doomed = [f"doomed-{index}" for index in range(12)]
    for name in doomed:
        broker.create_topic(name, 2)
    broker.create_topic("kept", 3)
    held = HeldCheckpoints(monkeypatch)
    requests = [DeleteTopicsRequest(topics=[State(name=name) for name in doomed[first::4]], timeout_ms=5000)
                for first in range(4)]
    tasks = [asyncio.ensure_future(start(broker, 6, request)) for request in requests]
    tasks.append(asyncio.ensure_future(broker.checkpoint()))  # the periodic one, at the same moment
    for _ in range(1000):  # loop turns, not time: until every deletion has asked for its checkpoint
        if all(broker.topic(name) is None for name in doomed) and held.writes:
            break
        await asyncio.sleep(0)
    held.release()
    *answers, _ = await asyncio.gather(*tasks)
    assert held.most_at_once == 1
    assert held.writes <= 3  # coalesced: the one that was running, then one for everything asked meanwhile
    results = [result for answer in answers for result in on_the_wire(delete_topics.API_KEY, 6, answer).responses]
    assert sorted((r.name, r.error_code) for r in results) == sorted((name, E.NONE) for name in doomed)
    path = os.path.join(broker.logs.data_dir, RECOVERY_POINT_CHECKPOINT)
    assert sorted(read_offsets(path)) == [("kept", 0), ("kept", 1), ("kept", 2)]  # the newest state landed last


async def test_a_checkpoint_asked_for_during_a_write_sees_the_state_after_the_call(broker, monkeypatch):
    broker.create_topic("first", 1)
    held = HeldCheckpoints(monkeypatch)
    running = asyncio.ensure_future(broker.checkpoint())
    for _ in range(1000):
        if held.writes:
            break
        await asyncio.sleep(0)
    broker.create_topic("second", 1)  # after the running write took its copy
    later = asyncio.ensure_future(broker.checkpoint())
    held.release()
    await asyncio.gather(running, later)
    assert held.writes == 2
    path = os.path.join(broker.logs.data_dir, RECOVERY_POINT_CHECKPOINT)
    assert sorted(read_offsets(path)) == [("first", 0), ("second", 0)]


async def test_a_failed_deletion_is_that_topics_answer(broker, monkeypatch, caplog):
    for name in ("a", "b", "c"):
        broker.create_topic(name, 1)
    delete_topic = broker.logs.delete_topic

    def fail_for_b(name):
        if name == "b":
            raise OSError(16, "Device or resource busy", name)
        delete_topic(name)

    monkeypatch.setattr(broker.logs, "delete_topic", fail_for_b)
    results = await delete(broker, "a", "b", "c")
    assert [(r.name, r.error_code) for r in results] == [("a", E.NONE), ("b", E.UNKNOWN_SERVER_ERROR),
                                                         ("c", E.NONE)]
    assert broker.topic("a") is None and broker.topic("c") is None
    assert [(r.levelname, r.exc_info) for r in caplog.records if r.levelno >= 30] == [("WARNING", None)]


async def test_a_failed_checkpoint_after_a_deletion_still_answers_the_deletion(broker, monkeypatch):
    broker.create_topic("gone", 1)

    def full_disk(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(broker_module, "write_checkpoints", full_disk)
    [result] = await delete(broker, "gone")
    assert (result.name, result.error_code) == ("gone", E.NONE) and broker.topic("gone") is None
