"""Batch reads: `spark.read.format("kafka")` with each way of naming partitions and offsets, every column, the
codecs, and `minPartitions`. Every answer is compared with what kafka-python produced, record by record."""
from __future__ import annotations

import json

import pytest

from .kafka_tools import KAFKA_COLUMNS, LOG_APPEND_TIME, WITHOUT_HEADERS, Record, records_of, without_headers

BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z; record i of partition p is stamped BASE_MS + i s + p * 10 ms
PARTITIONS = 3
PER_PARTITION = 5


def load(spark, kafka, **options):
    return spark.read.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap).options(**options).load()


def read(spark, kafka, **options) -> list[Record]:
    frame = load(spark, kafka, **options)
    columns = KAFKA_COLUMNS if "headers" in frame.columns else WITHOUT_HEADERS
    return records_of(frame.selectExpr(*columns).collect())


def stamp(partition: int, index: int) -> int:
    return BASE_MS + index * 1000 + partition * 10


@pytest.fixture
def produced(broker, kafka, topic) -> list[Record]:
    """Three partitions of five records, one batch each: keys, values and headers of every kind (null key, empty
    value, repeated header names, empty header value), timestamps rising by a second. (kafka-python cannot send a
    null header value; the write tests cover that.)"""
    broker.create_topic(topic, PARTITIONS)
    items = []
    for partition in range(PARTITIONS):
        for index in range(PER_PARTITION):
            headers = [("source", f"p{partition}".encode()), ("index", str(index).encode())]
            if index == 1:
                headers += [("source", b"again"), ("empty", b"")]
            items.append({"partition": partition, "timestamp": stamp(partition, index), "headers": headers,
                          "key": None if (partition, index) == (1, 2) else f"key-{partition}-{index}".encode(),
                          "value": b"" if index == 3 else f"value-{partition}-{index}".encode() * (index + 1)})
    return sorted(kafka.produce(topic, items))


def test_subscribe_reads_every_column_as_produced(spark, kafka, topic, produced):
    assert read(spark, kafka, subscribe=topic, includeHeaders="true") == produced


def test_headers_only_when_asked_for(spark, kafka, topic, produced):
    frame = load(spark, kafka, subscribe=topic)
    assert frame.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert read(spark, kafka, subscribe=topic) == without_headers(produced)


def test_assign_reads_only_the_named_partitions(spark, kafka, topic, produced):
    found = read(spark, kafka, assign=json.dumps({topic: [0, 2]}), includeHeaders="true")
    assert found == [record for record in produced if record.partition in (0, 2)]


def test_subscribe_pattern_reads_every_matching_topic(broker, spark, kafka, topic):
    """Two topics match (one stamps LogAppendTime), a third does not."""
    broker.create_topic(f"{topic}.create", 2)
    broker.create_topic(f"{topic}.append", 1, {"message.timestamp.type": "LogAppendTime"})
    broker.create_topic(f"{topic}-other", 1)
    expected = kafka.produce(f"{topic}.create", [{"partition": p, "key": b"k", "value": b"c", "timestamp": BASE_MS}
                                                 for p in (0, 1, 1)])
    expected += kafka.produce(f"{topic}.append", [{"partition": 0, "key": b"k", "value": b"a", "timestamp": BASE_MS}],
                              timestamp_type=LOG_APPEND_TIME)
    kafka.produce(f"{topic}-other", [{"partition": 0, "key": b"k", "value": b"o", "timestamp": BASE_MS}])
    found = read(spark, kafka, subscribePattern=rf"\Q{topic}.\E(create|append)")
    assert found == without_headers(sorted(expected))
    appended = [record for record in found if record.topic.endswith(".append")]
    assert appended[0].timestamp_type == LOG_APPEND_TIME and appended[0].timestamp > BASE_MS


def test_earliest_to_latest(spark, kafka, topic, produced):
    found = read(spark, kafka, subscribe=topic, startingOffsets="earliest", endingOffsets="latest")
    assert found == without_headers(produced)


def test_offsets_per_partition(spark, kafka, topic, produced):
    """JSON offsets per partition, with -2 (earliest) and -1 (latest) among them; starts and ends inside a batch,
    where the broker answers with the whole batch and the Java consumer skips what was not asked for."""
    starting = {topic: {"0": 1, "1": -2, "2": 3}}
    ending = {topic: {"0": 4, "1": -1, "2": 3}}
    found = read(spark, kafka, subscribe=topic, startingOffsets=json.dumps(starting),
                 endingOffsets=json.dumps(ending))
    wanted = {0: range(1, 4), 1: range(0, PER_PARTITION), 2: range(3, 3)}
    assert found == without_headers([r for r in produced if r.offset in wanted[r.partition]])


def test_starting_and_ending_timestamp_for_all_partitions(spark, kafka, topic, produced):
    """ListOffsets by timestamp (through Spark's admin client): the first record at or after the time."""
    found = read(spark, kafka, subscribe=topic, startingTimestamp=str(stamp(0, 1) + 500),
                 endingTimestamp=str(stamp(0, 4)))
    assert found == without_headers([r for r in produced if r.offset in (2, 3)])


def test_starting_offsets_by_timestamp_per_partition(spark, kafka, topic, produced):
    starting = {topic: {"0": stamp(0, 0), "1": stamp(1, 3) - 1, "2": stamp(2, 4)}}
    ending = {topic: {"0": stamp(0, 2) + 1, "1": stamp(1, 4) + 1, "2": stamp(2, 4) + 1}}
    found = read(spark, kafka, subscribe=topic, startingOffsetsByTimestamp=json.dumps(starting),
                 endingOffsetsByTimestamp=json.dumps(ending))
    wanted = {0: range(0, 3), 1: range(3, 5), 2: range(4, 5)}  # an ending time after every record means latest
    assert found == without_headers([r for r in produced if r.offset in wanted[r.partition]])


def test_a_timestamp_after_every_record(spark, kafka, topic, produced):
    """No offset for the time: an error by default, the latest offset with the "latest" strategy."""
    late = json.dumps({topic: {str(p): stamp(p, PER_PARTITION) for p in range(PARTITIONS)}})
    with pytest.raises(Exception, match="No offset matched"):
        read(spark, kafka, subscribe=topic, startingOffsetsByTimestamp=late)
    found = read(spark, kafka, subscribe=topic, startingOffsetsByTimestamp=late,
                 startingOffsetsByTimestampStrategy="latest")
    assert found == []


def test_min_partitions_splits_offset_ranges(spark, kafka, topic, produced):
    frame = load(spark, kafka, subscribe=topic, minPartitions="9", includeHeaders="true")
    assert frame.rdd.getNumPartitions() == 9  # each partition's five offsets in three Spark partitions
    assert records_of(frame.selectExpr(*KAFKA_COLUMNS).collect()) == produced


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches(broker, spark, kafka, topic, compression):
    broker.create_topic(topic, 1)
    items = [{"partition": 0, "key": f"k{i}".encode(), "value": bytes([i % 7]) * 300, "timestamp": BASE_MS + i}
             for i in range(50)]
    produced = kafka.produce(topic, items, compression=compression)
    assert read(spark, kafka, subscribe=topic, includeHeaders="true") == produced


def test_many_fetches_over_a_long_partition(broker, spark, kafka, topic):
    """Small fetch sizes: the Java consumer walks the partition in many Fetch requests of one fetch session."""
    broker.create_topic(topic, 1)
    produced = kafka.produce(topic, [{"partition": 0, "key": None, "value": f"{i:06d}".encode() * 20,
                                      "timestamp": BASE_MS + i} for i in range(3000)])
    found = read(spark, kafka, subscribe=topic, **{"kafka.max.partition.fetch.bytes": "4096",
                                                   "kafka.fetch.max.bytes": "4096"})
    assert [record.offset for record in found] == list(range(3000))
    assert found == without_headers(produced)
