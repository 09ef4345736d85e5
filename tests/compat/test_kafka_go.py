"""The Go client kafka-go (segmentio/kafka-go 0.2.1, Debian's golang-github-segmentio-kafka-go-dev) through every
flow it has: metadata, produce, consume, list offsets, consumer groups with committed offsets, topic admin, restart.

kafka-go 0.2.1 never asks ApiVersions: Metadata v1, Produce v2 with magic 1 messages, Fetch v2, ListOffsets v1,
CreateTopics v0, DeleteTopics v1, JoinGroup v1 / SyncGroup v0 / OffsetCommit v2 / OffsetFetch v1. The broker must
take magic 1 message sets (stored as v2 batches, as Kafka 3+ does) and down-convert what Fetch v2 reads, which drops
headers, as Kafka's down-conversion does. It is in no shared flow (catalog tag) because each tag has a test it cannot
pass: its ReadPartitions() for every topic sends an empty topic list, which Metadata v1 reads as "no topics" (tested
below); it cannot send headers (magic 1) and has no zstd codec; it has no call reading committed offsets back, its
group Reader reports no assignment, and its Reader.Close sends no LeaveGroup (it dials the coordinator with the
context it has just cancelled, so the next session waits out the old member's rebalance timeout). Where a shared
test's check fits it, that test function runs here with kafka-go as its client.

What the cells leave out (verified in the 0.2.1 source, /usr/share/gocode/src/github.com/segmentio/kafka-go):
acks=0 (Conn.SetRequiredAcks takes only 1 and -1; the Writer ignores the error and sends -1), zstd (no codec
package), headers (magic 1), the idempotent and transactional producers and admin_configs (no such requests).
"""
from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from . import clients
from . import test_committed_offsets, test_consume, test_metadata
from .checks import POSITIONING_BOUND_S, assert_stored_as, call_into, read_exactly
from .clients.base import DEFAULT_TIMEOUT_S
from .records import (
    CODEC_IDS,
    AtOffset,
    AtTimestamp,
    Record,
    assert_same,
    now_ms,
    numbered,
    record_shapes,
)
from .test_committed_offsets import offsets_broker  # noqa: F401 - the fixture of the shared test run below

pytestmark = pytest.mark.matrix(client="kafka-go")


@pytest.fixture(scope="module")
def kafka_go():
    return clients.load_or_fail("kafka-go")


def without_headers(records: list[Record]) -> list[Record]:
    return [dataclasses.replace(r, headers=()) for r in records]


def as_read(records: list[Record]) -> list[Record]:
    """What kafka-go's consumer makes of `records`: no headers (magic 1), and an empty key or value read as nil
    (its readNewBytes allocates only for a length above 0; it does send empty ones as empty)."""
    return [dataclasses.replace(r, headers=(), key=r.key or None, value=r.value or None) for r in records]


# --- metadata ------------------------------------------------------------------------------------------------------

@pytest.mark.matrix(flow="metadata")
def test_metadata_v1_describes_and_creates_named_topics(kafka_go, broker, reference, topic):
    """The shared metadata checks that fit Metadata v1 (it always allows auto-creation), then listing every topic:
    kafka-go sends an empty topic list, which from v1 on means no topic (Kafka's MetadataRequest.isAllTopics: null,
    or empty in v0 only), so it gets none, as from Apache Kafka."""
    test_metadata.test_named_topics_with_their_partitions_and_leaders(kafka_go, broker, reference, topic)
    test_metadata.test_an_unknown_topic_is_not_created_unless_allowed(kafka_go, broker, reference, topic)
    test_metadata.test_an_unknown_topic_is_created_when_allowed(kafka_go, broker, reference, topic)
    assert reference.list_topics(broker.bootstrap), "the broker has topics"
    assert kafka_go.metadata(broker.bootstrap).topics == {}, "an empty list in Metadata v1 names no topic"


# --- produce -------------------------------------------------------------------------------------------------------

@pytest.mark.matrix(flow="produce")
@pytest.mark.parametrize("acks", [1, -1])
def test_produce_record_shapes_with_each_acks(kafka_go, broker, reference, topic, acks):
    """Keys, null keys and values, empty and binary ones, explicit timestamps: magic 1 messages in Produce v2."""
    sent = without_headers(record_shapes(now_ms() - 60_000)) + numbered(30, f"acks{acks}")
    assert kafka_go.produce(broker.bootstrap, topic, sent, acks=acks) is None  # the Writer reports no offsets
    assert_same(sent, read_exactly(reference, broker, topic, len(sent)))
    assert_stored_as(broker, topic, len(sent), codec=CODEC_IDS["none"])


@pytest.mark.matrix(flow="produce")
@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
def test_produce_compressed(kafka_go, broker, reference, topic, codec):
    """Each codec kafka-go 0.2.1 ships: one compressed magic 1 wrapper message per Produce request, its inner
    offsets relative; the broker stores v2 batches with the same codec."""
    sent = numbered(200, codec, size=200)
    kafka_go.produce(broker.bootstrap, topic, sent, compression=codec)
    assert_same(sent, read_exactly(reference, broker, topic, len(sent)))
    assert_stored_as(broker, topic, len(sent), codec=CODEC_IDS[codec])


# --- consume -------------------------------------------------------------------------------------------------------

@pytest.mark.matrix(flow="consume")
def test_consume_down_converted_record_shapes(kafka_go, broker, reference, topic):
    """v2 batches with headers, read with Fetch v2: magic 1 messages, so without headers, everything else exact
    (but for kafka-go's nil for empty, see as_read)."""
    sent = record_shapes(now_ms() - 60_000)
    reference.produce(broker.bootstrap, topic, sent)
    got = kafka_go.consume(broker.bootstrap, topic, len(sent))
    assert_same(as_read(sent), got)
    assert [r.offset for r in got] == list(range(len(sent)))


@pytest.mark.matrix(flow="consume")
def test_consume_compressed_batches(kafka_go, broker, reference, topic):
    """gzip, snappy and lz4 v2 batches, each on a topic of its own, down-converted for Fetch v2. zstd batches cannot
    be down-converted (magic 1 has no zstd): the partition's answer is UNSUPPORTED_COMPRESSION_TYPE (76), as from
    Kafka 3's down-conversion (Kafka 4 refuses Fetch below v4 altogether)."""
    for codec in ("gzip", "snappy", "lz4"):
        sent = numbered(100, codec, size=100)
        reference.produce(broker.bootstrap, f"{topic}.{codec}", sent, compression=codec)
        assert_same(sent, kafka_go.consume(broker.bootstrap, f"{topic}.{codec}", len(sent)))
    reference.produce(broker.bootstrap, f"{topic}.zstd", numbered(10, "zstd"), compression="zstd")
    with pytest.raises(clients.ClientError, match=r"\[76\]"):
        kafka_go.consume(broker.bootstrap, f"{topic}.zstd", 10, timeout_s=30)


@pytest.mark.matrix(flow="consume")
def test_consume_ten_partitions(kafka_go, reference, partitioned_broker, topic):
    test_consume.test_ten_partitions(kafka_go, reference, partitioned_broker, topic)


@pytest.mark.matrix(flow="consume")
def test_consume_from_an_offset_and_a_timestamp(kafka_go, broker, reference, topic):
    """Reader.SetOffset to an offset, and to the offset Conn.ReadOffset(t) finds (ListOffsets v1) for a time."""
    base = now_ms() - 60_000
    reference.produce(broker.bootstrap, topic, [Record(f"k{i}".encode(), f"v{i}".encode(), (), base + 1000 * i)
                                                for i in range(10)])
    assert [r.value for r in kafka_go.consume(broker.bootstrap, topic, 3, start=AtOffset(7))] == [b"v7", b"v8", b"v9"]
    got = kafka_go.consume(broker.bootstrap, topic, 5, start=AtTimestamp(base + 4500))
    assert [(r.offset, r.timestamp) for r in got] == [(i, base + 1000 * i) for i in range(5, 10)]


@pytest.mark.matrix(flow="consume")
def test_consume_from_latest(kafka_go, broker, reference, topic):
    test_consume.test_start_at_latest(kafka_go, reference, broker, topic)


@pytest.mark.matrix(flow="consume")
def test_list_offsets(kafka_go, broker, reference, topic):
    """Conn.ReadOffsets and ReadOffset(t); after the newest record Kafka answers -1 (None here)."""
    test_consume.test_list_offsets(kafka_go, reference, broker, topic)


# --- groups and committed offsets ----------------------------------------------------------------------------------

@pytest.mark.matrix(flow="committed_offsets")
def test_commit_and_resume(kafka_go, reference, offsets_broker, topic):  # noqa: F811 - the imported fixture
    """The shared test: a group session reads 12 of 30 records over three partitions and commits them (OffsetCommit
    v2), a second resumes exactly there (OffsetFetch v1 inside the Reader); committed offsets read by kafka-python."""
    test_committed_offsets.test_commit_read_back_and_resume(kafka_go, reference, offsets_broker, topic)


@pytest.mark.matrix(flow="groups")
def test_two_readers_split_the_partitions(kafka_go, reference, offsets_broker, topic):  # noqa: F811
    """Two group Readers (JoinGroup v1, SyncGroup v0, kafka-go's range assignor) share three partitions. Once
    kafka-python's DescribeGroups shows them Stable with the partitions split (kafka-go's assignment, in Kafka's
    encoding), records are produced: each partition is read by its owner only, every record once, and the group's
    committed offsets are the ends."""
    broker, group = offsets_broker, f"group.{topic}"
    assert reference.partitions_for(broker.bootstrap, topic) == {0, 1, 2}
    outcome = {}
    readers = threading.Thread(target=call_into, args=(outcome, kafka_go.group_read, broker.bootstrap, topic, group,
                                                       30), kwargs={"readers": 2}, daemon=True)
    readers.start()
    owned = wait_for_split(reference, broker, group, readers)
    sent = [Record(None, f"p{p}-{i}".encode(), partition=p) for i in range(10) for p in range(3)]
    reference.produce(broker.bootstrap, topic, sent)
    readers.join(timeout=DEFAULT_TIMEOUT_S + 30)
    if "error" in outcome:
        raise outcome["error"]
    got = outcome["result"]
    assert sorted((r.partition, r.value) for _, r in got) == sorted((r.partition, r.value) for r in sent)
    by_reader = {reader: {r.partition for i, r in got if i == reader} for reader, _ in got}
    assert sorted(by_reader.values(), key=min) == sorted(owned, key=min), "records read by a non-owner"
    assert reference.group_offsets(broker.bootstrap, group) == {(topic, p): 10 for p in range(3)}


def wait_for_split(reference, broker, group: str, readers: threading.Thread) -> list[set[int]]:
    """The partitions of each member once the group is Stable with two members owning all three partitions."""
    deadline = time.monotonic() + POSITIONING_BOUND_S
    described = None
    while time.monotonic() < deadline and readers.is_alive():
        # Before the first JoinGroup there is no group to describe (GROUP_ID_NOT_FOUND, as from Kafka 4)
        if described is not None or group in reference.list_groups(broker.bootstrap):
            described = reference.describe_groups(broker.bootstrap, [group])[group]
        owned = [{p for _, p in member.assignment} for member in described.members] if described else []
        if described and described.state == "Stable" and len(owned) == 2 and set().union(*owned) == {0, 1, 2}:
            assert all(owned) and not owned[0] & owned[1], f"an overlapping split: {owned}"
            return owned
        readers.join(timeout=0.2)  # paces the polls; ends early if the readers failed
    raise AssertionError(f"the two readers did not share the partitions: {described}")


# --- admin ---------------------------------------------------------------------------------------------------------

@pytest.mark.matrix(flow="admin_topics")
def test_create_and_delete_topics(kafka_go, broker, reference, kafka_python_admin, topic):
    """Conn.CreateTopics (v0, with a config) and DeleteTopics (v1). kafka-go turns TOPIC_ALREADY_EXISTS into
    success, so creating again succeeds; an invalid partition count is refused with Kafka's error."""
    from kafka.admin import ConfigResource
    made = {"name": topic, "partitions": 3, "replication": 1, "configs": {"retention.ms": "3600000"}}
    errors = kafka_go.admin(broker.bootstrap, {"call": "create_topics", "topics": [made]},
                            {"call": "create_topics", "topics": [made]},
                            {"call": "create_topics", "topics": [{"name": f"{topic}.bad", "partitions": -2,
                                                                  "replication": 1}]})
    assert errors[:2] == [None, None]
    assert errors[2] is not None and errors[2].startswith("[37] Invalid Partition"), errors[2]
    assert reference.partitions_for(broker.bootstrap, topic) == {0, 1, 2}
    described = kafka_python_admin.describe_configs([ConfigResource("TOPIC", topic)])["topic"][topic]
    assert {name: entry["value"] for name, entry in described.items()} == {"retention.ms": "3600000"}

    assert kafka_go.admin(broker.bootstrap, {"call": "delete_topics", "topics": [{"name": topic}]}) == [None]
    assert topic not in reference.list_topics(broker.bootstrap)
    [error] = kafka_go.admin(broker.bootstrap, {"call": "delete_topics", "topics": [{"name": topic}]})
    assert error is not None and error.startswith("[3] Unknown Topic Or Partition"), error


# --- restart -------------------------------------------------------------------------------------------------------

@pytest.mark.matrix(flow="restart")
def test_restart_between_produce_and_consume(kafka_go, reference, fresh_broker, topic):
    sent = without_headers(record_shapes(now_ms() - 60_000)) + numbered(100, "before-restart", size=100)
    kafka_go.produce(fresh_broker.bootstrap, topic, sent, acks=-1, compression="snappy")
    fresh_broker.restart()
    assert_same(sent, read_exactly(reference, fresh_broker, topic, len(sent)))
    assert_same(as_read(sent), kafka_go.consume(fresh_broker.bootstrap, topic, len(sent)))
