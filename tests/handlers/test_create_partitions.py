"""CreatePartitions: growing topics, every error Kafka's controller answers, validate_only, and the new partitions
being usable at once (Metadata, Produce, Fetch, disk)."""
from __future__ import annotations

import os

import pytest

from compatbroker.broker import TopicInfo
from compatbroker.handlers import create_partitions
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import CreatePartitionsRequest, MetadataRequest, ProduceRequest

from .conftest import make_broker
from .helpers import batch, call, fail_partition_creation

Grow = CreatePartitionsRequest.CreatePartitionsTopic
Assignment = CreatePartitionsRequest.CreatePartitionsAssignment
ALL_VERSIONS = range(create_partitions.MIN_VERSION, create_partitions.MAX_VERSION + 1)
E = ErrorCode


def grow(name: str, count: int, assignments=None):
    return Grow(name=name, count=count,
                assignments=None if assignments is None else [Assignment(broker_ids=ids) for ids in assignments])


async def request(broker, *topics, version: int = 3, validate_only: bool = False) -> list[tuple]:
    answer = await call(broker, version, CreatePartitionsRequest(topics=list(topics), timeout_ms=5000,
                                                                 validate_only=validate_only))
    return [(r.name, r.error_code, r.error_message) for r in answer.decoded.results]


def test_declares_every_schema_version():
    assert (create_partitions.API_KEY, create_partitions.MIN_VERSION, create_partitions.MAX_VERSION) == (37, 0, 3)
    assert CreatePartitionsRequest.VALID_VERSIONS == (0, 3)


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_grows_a_topic_at_every_version(broker, version):
    info = broker.create_topic("growing", 2)
    assert await request(broker, grow("growing", 5), version=version) == [("growing", E.NONE, None)]
    grown = broker.topic("growing")
    assert (grown.partitions, grown.topic_id) == (5, info.topic_id)
    assert all(os.path.isdir(os.path.join(broker.logs.data_dir, f"growing-{p}")) for p in range(5))


async def test_new_partitions_are_in_metadata_and_take_records(broker):
    broker.create_topic("growing", 1)
    await request(broker, grow("growing", 3))
    answer = (await call(broker, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="growing")],
                                                     allow_auto_topic_creation=False))).decoded
    assert [(p.partition_index, p.error_code, p.leader_id) for p in answer.topics[0].partitions] == [
        (0, 0, 1), (1, 0, 1), (2, 0, 1)]
    produce = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
        name="growing", partition_data=[ProduceRequest.PartitionProduceData(index=2, records=batch(b"new"))])])
    produced = (await call(broker, 9, produce)).decoded
    assert produced.responses[0].partition_responses[0].error_code == E.NONE
    assert broker.get_log("growing", 2).log_end_offset == 1


async def test_explicit_assignments(broker):
    broker.create_topic("placed", 1)
    assert await request(broker, grow("placed", 3, [[1], [1]])) == [("placed", E.NONE, None)]
    assert broker.topic("placed").partitions == 3


async def test_unknown_topic(broker):
    assert await request(broker, grow("nowhere", 2)) == [("nowhere", E.UNKNOWN_TOPIC_OR_PARTITION, None)]
    assert broker.topic("nowhere") is None


async def test_the_same_count(broker):
    broker.create_topic("same", 3)
    assert await request(broker, grow("same", 3)) == [
        ("same", E.INVALID_PARTITIONS, "Topic already has 3 partition(s).")]


async def test_a_smaller_count(broker):
    broker.create_topic("shrink", 3)
    assert await request(broker, grow("shrink", 2)) == [
        ("shrink", E.INVALID_PARTITIONS, "The topic shrink currently has 3 partition(s); 2 would not be an increase.")]
    assert broker.topic("shrink").partitions == 3


async def test_too_few_assignments(broker):
    broker.create_topic("short", 1)
    assert await request(broker, grow("short", 4, [[1]])) == [
        ("short", E.INVALID_REPLICA_ASSIGNMENT,
         "Attempted to add 3 additional partition(s), but only 1 assignment(s) were specified.")]
    assert broker.topic("short").partitions == 1


@pytest.mark.parametrize("replicas, message", [
    ([2], "The manual partition assignment includes broker 2, but no such broker is registered."),
    ([1, 1], "The manual partition assignment includes the broker 1 more than once."),
    ([], "The manual partition assignment includes an empty replica list."),
])
async def test_bad_assignments(broker, replicas, message):
    broker.create_topic("placed", 1)
    assert await request(broker, grow("placed", 2, [replicas])) == [("placed", E.INVALID_REPLICA_ASSIGNMENT, message)]
    assert broker.topic("placed").partitions == 1


async def test_duplicate_names(broker):
    broker.create_topic("twice", 1)
    broker.create_topic("once", 1)
    assert await request(broker, grow("twice", 2), grow("once", 2), grow("twice", 3)) == [
        ("twice", E.INVALID_REQUEST, "Duplicate topic name."), ("once", E.NONE, None)]
    assert (broker.topic("twice").partitions, broker.topic("once").partitions) == (1, 2)


async def test_validate_only_changes_nothing(broker):
    broker.create_topic("dry", 1)
    results = await request(broker, grow("dry", 4), grow("dry-missing", 2), validate_only=True)
    assert results == [("dry", E.NONE, None), ("dry-missing", E.UNKNOWN_TOPIC_OR_PARTITION, None)]
    assert broker.topic("dry").partitions == 1
    assert broker.get_log("dry", 1) is None
    assert not os.path.exists(os.path.join(broker.logs.data_dir, "dry-1"))


async def test_new_partitions_survive_a_restart(tmp_path):
    broker = make_broker(tmp_path / "data")
    info = broker.create_topic("durable", 1)
    await request(broker, grow("durable", 3))
    broker.logs.shutdown()
    again = make_broker(tmp_path / "data")
    try:
        assert again.topic("durable") == TopicInfo("durable", info.topic_id, 3, False)
    finally:
        again.logs.shutdown()


# --- Kafka's bound on new partitions per request, and all or nothing --------------------------------------------------

async def test_ten_thousand_new_partitions_per_request(broker):
    for name in ("a", "b", "c", "d"):
        broker.create_topic(name, 1)
    answers = await request(broker, grow("a", 6001), grow("b", 4001), grow("c", 2), grow("d", 1),
                            validate_only=True)
    assert answers == [("a", E.NONE, None), ("b", E.NONE, None), ("c", E.UNKNOWN_SERVER_ERROR, None),
                       ("d", E.INVALID_PARTITIONS, "Topic already has 1 partition(s).")]


async def test_the_topic_past_the_bound_and_those_after_it_fail(broker):
    for name in ("a", "b", "c"):
        broker.create_topic(name, 1)
    answers = await request(broker, grow("a", 2), grow("b", 2**31 - 1), grow("c", 2))
    assert answers == [("a", E.NONE, None), ("b", E.UNKNOWN_SERVER_ERROR, None), ("c", E.UNKNOWN_SERVER_ERROR, None)]
    assert [broker.topic(name).partitions for name in ("a", "b", "c")] == [2, 1, 1]


async def test_a_topic_that_fails_halfway_keeps_its_partitions(broker, monkeypatch):
    broker.create_topic("half", 2)
    broker.create_topic("other", 1)
    refused = fail_partition_creation(monkeypatch, after=2)
    answers = await request(broker, grow("half", 6), grow("other", 2))
    assert refused == ["half-4", "other-1"]
    assert answers == [("half", E.UNKNOWN_SERVER_ERROR, None), ("other", E.UNKNOWN_SERVER_ERROR, None)]
    assert broker.topic("half").partitions == 2 and broker.topic("other").partitions == 1
    assert sorted(entry for entry in os.listdir(broker.logs.data_dir) if entry.startswith(("half-", "other-"))) == [
        "half-0", "half-1", "other-0"]
    assert all(broker.get_log("half", partition) is None for partition in range(2, 6))
    monkeypatch.undo()
    assert await request(broker, grow("half", 6)) == [("half", E.NONE, None)]
    assert broker.topic("half").partitions == 6
