"""What the Java client (kafka-clients, as Spark carries it) needs from the broker beyond Spark's own use of it:
positions validated with OffsetForLeaderEpoch, log truncation detected from its answer, incremental fetch sessions
over topic ids, and the admin client's DescribeCluster, DescribeTopics and ListOffsets."""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from .java_clients import java_exception_class
from .kafka_tools import last_seq

BASE_MS = 1_767_225_600_000
FIRST_TOPIC_ID_FETCH = 13  # Fetch names topics by id from version 13


def requests_of(broker, client_id: str, since: int, api: str | None = None) -> list:
    return [entry for entry in broker.requests(since, api) if entry.client_id == client_id]


def test_committed_position_is_validated_with_offset_for_leader_epoch(broker, kafka, java, topic):
    """A consumer commits what it read (with the records' leader epoch); the next consumer of the group starts from
    that commit, asks OffsetForLeaderEpoch where epoch 0 ends before fetching, and goes on from there."""
    broker.create_topic(topic, 1)
    group = f"group-{uuid.uuid4().hex[:6]}"
    kafka.produce_values(topic, 0, [f"a{i}" for i in range(10)])
    first = java.consumer(**{"group.id": group, "auto.offset.reset": "earliest"})
    first.assign(topic, [0])
    assert {record.leader_epoch for record in first.poll_until(10)} == {0}
    first.commit_positions()
    first.close()
    kafka.produce_values(topic, 0, [f"b{i}" for i in range(5)])

    since = last_seq(broker)
    second = java.consumer(**{"group.id": group, "auto.offset.reset": "none"})
    second.assign(topic, [0])
    assert [(record.offset, record.value) for record in second.poll_until(5)] == [
        (10 + i, f"b{i}".encode()) for i in range(5)]
    asked = requests_of(broker, second.client_id, since, "OffsetForLeaderEpoch")
    assert asked and all(entry.api_version >= 3 and entry.served for entry in asked), asked


def test_truncation_below_a_committed_offset_is_detected(broker, kafka, java, topic):
    """A committed offset (15, epoch 0) past where epoch 0 ends (10): without a reset policy the consumer raises
    LogTruncationException naming offset 10; with one it goes on from offset 10, the first that diverged."""
    broker.create_topic(topic, 1)
    group = f"group-{uuid.uuid4().hex[:6]}"
    kafka.produce_values(topic, 0, [f"v{i}" for i in range(10)])
    committer = java.consumer(**{"group.id": group})
    committer.commit(topic, 0, 15, leader_epoch=0)

    strict = java.consumer(**{"group.id": group, "auto.offset.reset": "none"})
    strict.assign(topic, [0])
    with pytest.raises(Exception) as raised:
        strict.poll_until(1)
    assert java_exception_class(raised.value) == "org.apache.kafka.clients.consumer.LogTruncationException"
    divergent = raised.value.java_exception.divergentOffsets().get(strict.partition(topic, 0))
    assert (divergent.offset(), divergent.leaderEpoch().get()) == (10, 0)

    lenient = java.consumer(**{"group.id": group, "auto.offset.reset": "earliest"})
    lenient.assign(topic, [0])
    assert lenient.position(topic, 0) == 10
    kafka.produce_values(topic, 0, ["after"])
    assert [(record.offset, record.value) for record in lenient.poll_until(1)] == [(10, b"after")]


@pytest.mark.matrix(flow="committed_offsets")
def test_group_member_consumes_and_commits(broker, kafka, java, topic):
    """The Java consumer's classic group protocol (JoinGroup, SyncGroup, Heartbeat, OffsetCommit, LeaveGroup)."""
    broker.create_topic(topic, 2)
    kafka.produce_values(topic, 0, ["a", "b", "c"])
    kafka.produce_values(topic, 1, ["d"])
    group = f"group-{uuid.uuid4().hex[:6]}"
    since = last_seq(broker)
    member = java.consumer(**{"group.id": group, "auto.offset.reset": "earliest"})
    member.subscribe(topic)
    assert sorted(record.value for record in member.poll_until(4)) == [b"a", b"b", b"c", b"d"]
    member.commit_positions()
    member.close()
    assert broker.committed_offsets(group) == {(topic, 0): 3, (topic, 1): 1}
    used = {entry.api for entry in requests_of(broker, member.client_id, since)}
    assert {"JoinGroup", "SyncGroup", "OffsetCommit", "LeaveGroup"} <= used, used


def test_incremental_fetch_sessions_over_topic_ids(broker, kafka, java, topic):
    """The consumer fetches by topic id (Fetch v13+) in a fetch session: once the partitions are in the session,
    an idle fetch names no partitions at all."""
    broker.create_topic(topic, 2)
    kafka.produce_values(topic, 0, ["x", "y"])
    kafka.produce_values(topic, 1, ["z"])
    since = last_seq(broker)
    consumer = java.consumer(**{"auto.offset.reset": "earliest"})
    consumer.assign(topic, [0, 1])
    assert len(consumer.poll_until(3)) == 3
    for _ in range(5):
        assert consumer.poll_once() == []
    fetches = requests_of(broker, consumer.client_id, since, "Fetch")
    assert all(entry.api_version >= FIRST_TOPIC_ID_FETCH for entry in fetches), fetches
    assert fetches[0].topics == (topic,)  # the full fetch that opens the session, its topic resolved from the id
    assert any(entry.topics == () for entry in fetches[1:]), fetches


@pytest.mark.matrix(flow="metadata")
def test_a_topic_recreated_under_a_consumer_is_a_new_topic(broker, kafka, java, topic):
    """The consumer fetches by topic id: when the topic is deleted and created again under the same name, the old
    id is unknown, the consumer takes the new id from Metadata, finds its position out of range in the new (shorter)
    log, and resets to its start."""
    broker.create_topic(topic, 1)
    kafka.produce_values(topic, 0, [f"old{i}" for i in range(5)])
    consumer = java.consumer(**{"auto.offset.reset": "earliest"})
    consumer.assign(topic, [0])
    assert len(consumer.poll_until(5)) == 5
    old_id = broker.topics()[topic].topic_id
    kafka.delete_topic(topic)
    broker.create_topic(topic, 1)
    assert broker.topics()[topic].topic_id != old_id
    kafka.produce_values(topic, 0, ["new0", "new1"])
    assert [(record.offset, record.value) for record in consumer.poll_until(2)] == [(0, b"new0"), (1, b"new1")]


@pytest.mark.matrix(flow="admin_topics")
def test_admin_client_describes_the_cluster_and_lists_offsets(broker, kafka, java, topic):
    broker.create_topic(topic, 1)
    kafka.produce(topic, [{"partition": 0, "key": b"k", "value": b"v", "timestamp": BASE_MS + delta}
                          for delta in (0, 10, 5)])
    admin = java.admin()
    since = last_seq(broker)
    cluster_id, nodes, controller = admin.describe_cluster()
    meta = dict(line.split("=", 1) for line in Path(broker.data_dir, "meta.properties").read_text().splitlines()
                if "=" in line and not line.startswith("#"))
    assert cluster_id == meta["cluster.id"]
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    assert nodes == [(1, host, int(port))] and controller == 1
    assert admin.topic_id(topic) == uuid.UUID(broker.topics()[topic].topic_id)
    assert admin.list_offsets(topic, 0, "earliest") == (0, -1, 0)
    assert admin.list_offsets(topic, 0, "latest") == (3, -1, 0)
    assert admin.list_offsets(topic, 0, BASE_MS + 6) == (1, BASE_MS + 10, 0)
    assert admin.list_offsets(topic, 0, "max-timestamp") == (1, BASE_MS + 10, 0)
    assert admin.list_offsets(topic, 0, BASE_MS + 11) == (-1, -1, None)
    used = {entry.api for entry in requests_of(broker, admin.client_id, since)}
    assert {"DescribeCluster", "ListOffsets", "Metadata"} <= used, used


def test_spark_resolves_timestamps_through_the_admin_client(broker, spark, kafka, topic):
    """Spark's source turns a starting timestamp into offsets with its admin client (ListOffsets by timestamp);
    earliest and latest of a batch query are resolved by the executors' consumers instead."""
    broker.create_topic(topic, 2)
    kafka.produce(topic, [{"partition": 1, "key": b"k", "value": f"{i}".encode(), "timestamp": BASE_MS + i}
                          for i in range(3)])
    kafka.produce(topic, [{"partition": 0, "key": b"k", "value": b"p0", "timestamp": BASE_MS + 5}])
    since = last_seq(broker)
    rows = (spark.read.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
            .option("subscribe", topic).option("startingTimestamp", str(BASE_MS + 1)).load()
            .selectExpr("partition", "offset").collect())
    assert sorted((row.partition, row.offset) for row in rows) == [(0, 0), (1, 1), (1, 2)]
    admin_apis = {entry.api for entry in broker.requests(since) if (entry.client_id or "").startswith("adminclient-")}
    assert "ListOffsets" in admin_apis, admin_apis
