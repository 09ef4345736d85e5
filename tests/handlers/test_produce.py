"""Produce: every version, acks, and each per-partition error Kafka answers."""
from __future__ import annotations

import time
import uuid

import pytest

from compatbroker.handlers import produce
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import ProduceRequest
from compatbroker.protocol.records.batch import CRC_OFFSET, build_batch, read_batch_header
from compatbroker.protocol.records.compression import Compression
from compatbroker.protocol.records.legacy import encode_messages

from .helpers import batch, call, records_of, start

TopicData = ProduceRequest.TopicProduceData
PartitionData = ProduceRequest.PartitionProduceData


def request(records, *, topic="t", partition=0, acks=1, topic_id=None, version=9) -> ProduceRequest:
    topic_data = TopicData(name=topic if version < 13 else "",
                           topic_id=topic_id or uuid.UUID(int=0),
                           partition_data=[PartitionData(index=partition, records=records)])
    return ProduceRequest(acks=acks, timeout_ms=30_000, topic_data=[topic_data],
                          transactional_id=None)


def by_id(broker, records, **options) -> ProduceRequest:
    return request(records, topic_id=broker.topic(options.pop("topic", "t")).topic_id, version=13, **options)


async def produce_one(broker, version, records, **options):
    """The single partition answer (decoded) of a one-partition request."""
    make = by_id(broker, records, **options) if version >= 13 else request(records, version=version, **options)
    answer = await call(broker, version, make)
    return answer.decoded.responses[0].partition_responses[0]


def legacy_set(magic: int, values, compression=Compression.NONE) -> bytes:
    now = int(time.time() * 1000)
    return encode_messages([(i, now, b"k%d" % i, value) for i, value in enumerate(values)], magic, compression)


def test_declares_every_schema_version():
    assert (produce.API_KEY, produce.MIN_VERSION, produce.MAX_VERSION) == (0, 0, 13)


@pytest.mark.parametrize("version", [0, 1, 2])
@pytest.mark.parametrize("magic", [0, 1])
async def test_old_versions_append_legacy_message_sets(broker, version, magic):
    broker.create_topic("t", 1)
    answer = await produce_one(broker, version, legacy_set(magic, [b"a", b"b"]))
    assert (answer.error_code, answer.base_offset) == (0, 0)
    again = await produce_one(broker, version, legacy_set(magic, [b"c"], Compression.GZIP))
    assert (again.error_code, again.base_offset) == (0, 2)
    stored = records_of(broker.get_log("t", 0).read_bytes(0, 1 << 20))
    assert [(r.offset, r.value) for r in stored] == [(0, b"a"), (1, b"b"), (2, b"c")]


@pytest.mark.parametrize("version", range(3, 14))
async def test_v3_and_later_append_one_batch(broker, version):
    broker.create_topic("t", 2)
    first = await produce_one(broker, version, batch(b"x", b"y"), partition=1)
    second = await produce_one(broker, version, batch(b"z"), partition=1)
    assert (first.error_code, first.base_offset, second.base_offset) == (0, 0, 2)
    assert second.log_start_offset == (0 if version >= 5 else -1)
    assert second.log_append_time_ms == -1
    assert [r.value for r in records_of(broker.get_log("t", 1).read_bytes(0, 1 << 20))] == [b"x", b"y", b"z"]
    assert broker.get_log("t", 0).log_end_offset == 0


async def test_appends_carry_the_partitions_leader_epoch(broker):
    broker.create_topic("t", 1)
    broker.partition_state("t", 0).leader_epoch = 7  # as a leader election leaves it
    answer = await produce_one(broker, 9, batch(b"v"))
    log = broker.get_log("t", 0)
    assert answer.error_code == 0
    assert read_batch_header(log.read_bytes(0, 1 << 20)).partition_leader_epoch == 7
    assert log.epochs.entries == [(7, 0)]


async def test_v13_names_topics_by_id_and_answers_with_it(broker):
    info = broker.create_topic("t", 1)
    answer = await call(broker, 13, by_id(broker, batch(b"v")))
    topic = answer.decoded.responses[0]
    assert topic.topic_id == info.topic_id
    assert topic.partition_responses[0].error_code == 0


async def test_unknown_topic_id_in_v13(broker):
    broker.create_topic("t", 1)
    answer = await call(broker, 13, request(batch(b"v"), topic_id=uuid.uuid4(), version=13))
    partition = answer.decoded.responses[0].partition_responses[0]
    assert (partition.error_code, partition.base_offset, partition.log_start_offset) == (
        ErrorCode.UNKNOWN_TOPIC_ID, -1, -1)


@pytest.mark.parametrize("topic, partition", [("missing", 0), ("t", 1)])
async def test_unknown_topic_or_partition(broker, topic, partition):
    broker.create_topic("t", 1)
    answer = await produce_one(broker, 9, batch(b"v"), topic=topic, partition=partition)
    assert (answer.error_code, answer.base_offset) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)
    assert broker.topic("missing") is None  # Produce creates nothing


@pytest.mark.parametrize("version", [3, 8])
async def test_v3_payload_rules(broker, version):
    broker.create_topic("t", 1)
    two_batches = batch(b"a") + batch(b"b")
    assert (await produce_one(broker, version, two_batches)).error_code == ErrorCode.INVALID_RECORD
    assert (await produce_one(broker, version, legacy_set(1, [b"a"]))).error_code == ErrorCode.INVALID_RECORD
    assert (await produce_one(broker, version, b"")).error_code == ErrorCode.INVALID_RECORD
    truncated = batch(b"a")[:-1]
    assert (await produce_one(broker, version, truncated)).error_code == ErrorCode.INVALID_RECORD
    assert broker.get_log("t", 0).log_end_offset == 0


async def test_zstd_needs_v7(broker):
    broker.create_topic("t", 1)
    zstd = batch(b"squeezed", compression=Compression.ZSTD)
    refused = await produce_one(broker, 6, zstd)
    assert (refused.error_code, refused.log_start_offset) == (ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, -1)
    accepted = await produce_one(broker, 7, zstd)
    assert (accepted.error_code, accepted.base_offset) == (0, 0)


async def test_corrupt_batch(broker):
    broker.create_topic("t", 1)
    damaged = bytearray(batch(b"v"))
    damaged[CRC_OFFSET] ^= 0xFF
    answer = await produce_one(broker, 9, bytes(damaged))
    assert (answer.error_code, answer.log_start_offset, answer.error_message) == (ErrorCode.CORRUPT_MESSAGE, -1, None)


async def test_batch_over_max_message_bytes(broker):
    broker.create_topic("t", 1, {"max.message.bytes": "200"})
    answer = await produce_one(broker, 9, batch(b"x" * 300))
    assert (answer.error_code, answer.base_offset) == (ErrorCode.MESSAGE_TOO_LARGE, -1)
    assert (await produce_one(broker, 9, batch(b"small"))).error_code == 0


async def test_records_over_segment_bytes(broker):
    broker.create_topic("t", 1, {"segment.bytes": "150"})
    answer = await produce_one(broker, 9, batch(b"x" * 200))
    assert answer.error_code == ErrorCode.RECORD_LIST_TOO_LARGE


async def test_invalid_timestamps_name_the_records_from_v8(broker):
    broker.create_topic("t", 1, {"message.timestamp.before.max.ms": "60000"})
    now = int(time.time() * 1000)
    # storage judges a batch by its first and largest timestamps; the handler then names every bad record
    records = build_batch([(b"k", b"old", (), now - 3_600_000), (b"k", b"new", (), now),
                           (b"k", b"older", (), now - 7_200_000)])
    v8 = await produce_one(broker, 8, records)
    assert v8.error_code == ErrorCode.INVALID_TIMESTAMP
    assert [e.batch_index for e in v8.record_errors] == [0, 2]
    assert all("timestamp" in e.batch_index_error_message for e in v8.record_errors)
    assert v8.error_message and v8.log_start_offset == 0
    v7 = await produce_one(broker, 7, records)
    assert (v7.error_code, v7.record_errors, v7.error_message) == (ErrorCode.INVALID_TIMESTAMP, [], None)
    assert broker.get_log("t", 0).log_end_offset == 0


async def test_compacted_topic_needs_keys(broker):
    broker.create_topic("t", 1, {"cleanup.policy": "compact"})
    now = int(time.time() * 1000)
    records = build_batch([(b"k", b"a", (), now), (None, b"b", (), now)])
    answer = await produce_one(broker, 9, records)
    assert answer.error_code == ErrorCode.INVALID_RECORD
    assert [e.batch_index for e in answer.record_errors] == [1]
    assert "key" in answer.record_errors[0].batch_index_error_message
    assert answer.error_message


@pytest.mark.parametrize("acks", [2, -2, 5])
async def test_invalid_acks(broker, acks):
    broker.create_topic("t", 1)
    answer = await produce_one(broker, 9, batch(b"v"), acks=acks)
    assert (answer.error_code, answer.base_offset, answer.log_start_offset) == (ErrorCode.INVALID_REQUIRED_ACKS, -1, -1)
    assert broker.get_log("t", 0).log_end_offset == 0


async def test_acks_zero_sends_nothing_but_appends(broker):
    broker.create_topic("t", 1)
    assert await start(broker, 9, request(batch(b"quiet"), acks=0)) is None
    assert broker.get_log("t", 0).log_end_offset == 1


async def test_acks_zero_failure_closes_the_connection(broker):
    broker.create_topic("t", 1)
    with pytest.raises(produce.UnacknowledgedProduceFailed, match="UNKNOWN_TOPIC_OR_PARTITION"):
        await start(broker, 9, request(batch(b"lost"), topic="nowhere", acks=0))


async def test_answer_waits_for_the_fsync_the_flush_policy_asks_for(broker):
    broker.create_topic("every", 1, {"flush.messages": "1"})
    broker.create_topic("pairs", 1, {"flush.messages": "2"})
    broker.create_topic("cached", 1)
    await produce_one(broker, 9, batch(b"v"), topic="every", acks=1)
    every = broker.get_log("every", 0)
    assert every.recovery_point == every.log_end_offset == 1
    pairs = broker.get_log("pairs", 0)
    await produce_one(broker, 9, batch(b"a"), topic="pairs", acks=-1)
    assert pairs.recovery_point == 0  # not due yet: one message of two
    await produce_one(broker, 9, batch(b"b"), topic="pairs", acks=-1)
    assert pairs.recovery_point == pairs.log_end_offset == 2
    await produce_one(broker, 9, batch(b"v"), topic="cached", acks=-1)
    assert broker.get_log("cached", 0).recovery_point == 0  # Kafka's defaults leave durability to the page cache


async def test_log_append_time(broker):
    broker.create_topic("t", 1, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    answer = await produce_one(broker, 2, legacy_set(1, [b"v"]))
    after = int(time.time() * 1000)
    assert before <= answer.log_append_time_ms <= after
    v1 = await produce_one(broker, 1, legacy_set(1, [b"v"]))
    assert (v1.error_code, v1.log_append_time_ms) == (0, -1)  # the field arrives with v2


async def test_internal_topics_are_for_the_admin_client_only(broker):
    broker.create_topic("__consumer_offsets", 1)
    refused = await call(broker, 9, request(batch(b"v"), topic="__consumer_offsets"))
    assert refused.decoded.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    allowed = await call(broker, 9, request(batch(b"v"), topic="__consumer_offsets"), client_id="__admin_client")
    assert allowed.decoded.responses[0].partition_responses[0].error_code == 0


async def test_many_topics_and_partitions_keep_request_order(broker):
    broker.create_topic("a", 2)
    broker.create_topic("b", 1)
    made = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[
        TopicData(name="b", partition_data=[PartitionData(index=0, records=batch(b"1"))]),
        TopicData(name="a", partition_data=[PartitionData(index=1, records=batch(b"2")),
                                            PartitionData(index=5, records=batch(b"3")),
                                            PartitionData(index=0, records=batch(b"4"))])])
    answer = (await call(broker, 9, made)).decoded
    assert [(t.name, [(p.index, p.error_code) for p in t.partition_responses]) for t in answer.responses] == [
        ("b", [(0, 0)]), ("a", [(1, 0), (5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), (0, 0)])]
