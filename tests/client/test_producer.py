"""compatbroker.client.producer and .partitioner against compatbroker: placement as the Java client's default
partitioner (checked with kafka-python's own murmur2), every codec, acks, idempotence, retries, limits."""
from __future__ import annotations

import os
import random
import uuid

import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from compatbroker.client.consumer import topic_uuid
from compatbroker.client.partitioner import (DefaultPartitioner, RoundRobinPartitioner, make_partitioner, murmur2,
                                             murmur2_partition)
from compatbroker.client.producer import Producer
from compatbroker.protocol.messages import FetchRequest
from compatbroker.protocol.records import Compression, iter_batches


@pytest.fixture
def topic(request):
    return f"{request.node.name[:40]}-{uuid.uuid4().hex[:8]}"


def produce(client, topic, records, **options):
    """Send (key, value) pairs with a Producer; returns the delivery reports in arrival order."""
    reports = []
    producer = Producer(client, on_delivery=reports.append, **options)
    for key, value in records:
        producer.send(topic, value, key=key)
    producer.flush()
    return reports


def raw_batches(client, topic, partition=0):
    """The stored v2 batch headers of a partition, fetched as they are on disk (codec and producer fields)."""
    meta = client.topic(topic, refresh=True)
    response = client.send(lambda version: FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 24, session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic="" if version >= 13 else topic,
                                        topic_id=topic_uuid(meta.topic_id) if version >= 13 else topic_uuid(None),
                                        partitions=[FetchRequest.FetchPartition(
                                            partition=partition, fetch_offset=0, partition_max_bytes=1 << 24)])]),
        node_id=client.leader(topic, partition), api_key=1)
    (part,) = response.responses[0].partitions
    return [header for _, header in iter_batches(part.records)]


# --- partitioner --------------------------------------------------------------------------------------------------

def test_murmur2_matches_kafka_python_and_javas_test_vector():
    rng = random.Random(7)
    for length in range(0, 70):
        data = bytes(rng.randrange(256) for _ in range(length))
        assert murmur2(data) & 0xFFFFFFFF == kafka_python_murmur2(data) & 0xFFFFFFFF, data
    assert murmur2(b"21") == -973932308  # Kafka's UtilsTest value, a negative int as in Java


def test_keyed_partition_is_positive_murmur2_modulo_partitions():
    for key in (b"", b"a", b"orders-17", os.urandom(33)):
        expected = (kafka_python_murmur2(key) & 0x7FFFFFFF) % 12
        assert murmur2_partition(key, 12) == expected
        assert DefaultPartitioner().partition("t", key, 10, 12, range(12)) == expected


def test_sticky_partition_for_keyless_records_switches_after_batch_size():
    partitioner = DefaultPartitioner(batch_size=100, rng=random.Random(1))
    first = [partitioner.partition("t", None, 30, 6, range(6)) for _ in range(4)]  # 120 bytes: the 4th still sticks
    assert len(set(first)) == 1
    switched = partitioner.partition("t", None, 30, 6, range(6))
    assert switched != first[0]
    only_available = {partitioner.partition("u", None, 200, 6, [4]) for _ in range(5)}
    assert only_available == {4}


def test_round_robin_ignores_keys_and_skips_leaderless_partitions():
    partitioner = RoundRobinPartitioner()
    assert [partitioner.partition("t", b"same", 1, 4, range(4)) for _ in range(6)] == [0, 1, 2, 3, 0, 1]
    assert [partitioner.partition("u", None, 1, 4, [1, 3]) for _ in range(4)] == [1, 3, 1, 3]
    with pytest.raises(ValueError, match="unknown partitioner"):
        make_partitioner("crc32")


# --- producing ----------------------------------------------------------------------------------------------------

def test_keyed_records_land_where_the_java_client_puts_them(broker, client, topic):
    broker.create_topic(topic, 6)
    keys = [f"key-{index}".encode() for index in range(60)]
    reports = produce(client, topic, [(key, b"v" + key) for key in keys])
    assert all(report.error is None for report in reports)
    for partition in range(6):
        stored = {record.key for record in broker.records(topic, partition)}
        assert stored == {key for key in keys if (kafka_python_murmur2(key) & 0x7FFFFFFF) % 6 == partition}


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_round_trips_with_headers(broker, client, topic, codec):
    broker.create_topic(topic, 1)
    reports = []
    producer = Producer(client, compression=codec, on_delivery=reports.append)
    for index in range(50):
        producer.send(topic, b"value-%d" % index * 20, key=b"k%d" % index, headers=[("trace", b"t%d" % index)])
    producer.flush()
    assert [(r.partition, r.offset, r.error) for r in reports] == [(0, index, None) for index in range(50)]
    stored = broker.records(topic, 0)
    assert [(r.offset, r.key, r.value, r.headers) for r in stored] == [
        (index, b"k%d" % index, b"value-%d" % index * 20, [("trace", b"t%d" % index)]) for index in range(50)]
    assert {header.compression for header in raw_batches(client, topic)} == {Compression[codec.upper()]}


def test_acks_zero_reports_offsets_as_unknown(broker, client, topic):
    broker.create_topic(topic, 1)
    reports = produce(client, topic, [(None, b"a"), (None, b"b")], acks=0)
    assert [(r.offset, r.error) for r in reports] == [(-1, None), (-1, None)]
    # a later acks=1 request on the same connection is answered after the acks=0 one has been applied
    produce(client, topic, [(None, b"c")], acks=1)
    assert [r.value for r in broker.records(topic, 0)] == [b"a", b"b", b"c"]


def test_idempotent_batches_carry_producer_id_and_sequences(broker, client, topic):
    broker.create_topic(topic, 1)
    producer = Producer(client, enable_idempotence=True, batch_size=100, linger_ms=0)
    for index in range(10):
        producer.send(topic, b"x" * 40, key=b"%d" % index)
    producer.flush()
    headers = raw_batches(client, topic)
    assert len(headers) > 1 and {h.producer_id for h in headers} != {-1}
    assert [h.base_sequence for h in headers] == [h.base_offset for h in headers]
    with pytest.raises(ValueError, match="acks=-1"):
        Producer(client, enable_idempotence=True, acks=1)


def test_retriable_error_is_retried_after_a_metadata_refresh_without_duplicates(broker, client, topic):
    broker.create_topic(topic, 1)
    broker.inject_error("Produce", "NOT_LEADER_OR_FOLLOWER", count=2, topic=topic)
    reports = produce(client, topic, [(None, b"once")], enable_idempotence=True)
    assert [(r.offset, r.error) for r in reports] == [(0, None)]
    assert [r.value for r in broker.records(topic, 0)] == [b"once"]


def test_non_retriable_error_fails_the_batch_records(broker, client, topic):
    broker.create_topic(topic, 1)
    broker.inject_error("Produce", "INVALID_RECORD", count=1, topic=topic)
    reports = produce(client, topic, [(None, b"a"), (None, b"b")])
    assert [(r.offset, r.error and r.error.name) for r in reports] == [(-1, "INVALID_RECORD")] * 2
    assert broker.records(topic, 0) == []


def test_record_over_max_request_size_fails_without_being_sent(broker, client, topic):
    broker.create_topic(topic, 1)
    reports = produce(client, topic, [(None, b"x" * 2000), (None, b"small")], max_request_size=1024)
    assert [(r.error and r.error.name) for r in reports] == ["MESSAGE_TOO_LARGE", None]
    assert [r.value for r in broker.records(topic, 0)] == [b"small"]


def test_a_batch_waits_for_linger_until_polled_late_enough_or_flushed(broker, client, topic):
    broker.create_topic(topic, 1)
    producer = Producer(client, linger_ms=3_600_000)
    producer.send(topic, b"waiting")
    producer.poll()
    assert producer.pending == 1 and 0 < producer.time_until_ready() <= 3600
    assert broker.records(topic, 0) == []
    producer.flush()
    assert producer.pending == 0 and producer.time_until_ready() is None
    assert [r.value for r in broker.records(topic, 0)] == [b"waiting"]


def test_explicit_partition_and_unknown_partition(broker, client, topic):
    broker.create_topic(topic, 2)
    producer = Producer(client)
    producer.send(topic, b"there", partition=1)
    producer.flush()
    assert [r.value for r in broker.records(topic, 1)] == [b"there"]
    with pytest.raises(Exception, match="UNKNOWN_TOPIC_OR_PARTITION"):
        producer.send(topic, b"nowhere", partition=2)


def test_buffer_memory_bounds_queued_records_and_the_sender_waits_for_answers(broker, client, topic):
    """Backpressure: 100 records of 1000 bytes through a 5000-byte buffer.memory all arrive, and what waits in
    memory never exceeds it."""
    broker.create_topic(topic, 1)
    reports = []
    producer = Producer(client, buffer_memory=5000, batch_size=3000, linger_ms=3_600_000, on_delivery=reports.append)
    most = 0
    for index in range(100):
        producer.send(topic, b"%04d" % index + b"x" * 996)
        most = max(most, producer.buffered_bytes)
    producer.flush()
    assert 0 < most <= 5000 and producer.buffered_bytes == 0
    assert [(r.offset, r.error) for r in reports] == [(index, None) for index in range(100)]
    assert len(broker.records(topic, 0)) == 100


def test_a_full_buffer_fails_the_record_after_max_block_ms_as_the_java_producer(broker, client, topic):
    """No leader answers (a retriable error on every Produce): the queued records keep buffer.memory full, and the
    next record fails with a timeout once max.block.ms has passed; a record bigger than buffer.memory fails at once."""
    broker.create_topic(topic, 1)
    reports = []
    producer = Producer(client, buffer_memory=3000, batch_size=1000, linger_ms=0, max_block_ms=300,
                        on_delivery=reports.append)
    broker.inject_error("Produce", "NOT_LEADER_OR_FOLLOWER", count=None, topic=topic)
    try:
        producer.send(topic, b"x" * 3000)  # never fits
        assert [(r.error.name, "buffer.memory configuration" in r.error.message) for r in reports] == \
            [("MESSAGE_TOO_LARGE", True)]
        for _ in range(3):
            producer.send(topic, b"y" * 800)
        assert producer.buffered_bytes <= 3000 and len(reports) == 1
        producer.send(topic, b"z" * 800)
        assert producer.buffered_bytes <= 3000
        assert reports[-1].error.name == "REQUEST_TIMED_OUT"
        assert "within the configured max blocking time 300 ms" in reports[-1].error.message
    finally:
        broker.clear_faults()
    producer.flush()
    assert [r.value for r in broker.records(topic, 0)] == [b"y" * 800] * 3
