"""Writes: `df.write.format("kafka")` and `writeStream.format("kafka")` with key, value, headers, topic and partition
columns, through Spark's Java producer (idempotent by default). What the broker stored is read back through its
control API, and Spark reads it again to check the round trip."""
from __future__ import annotations

from .kafka_tools import KAFKA_COLUMNS, last_seq, records_of

# The columns the Kafka sink takes (value is the only one it requires).
WRITE_SCHEMA = ("topic string, partition int, key binary, value binary, "
                "headers array<struct<key: string, value: binary>>")


def stored(broker, topic: str, partitions: int) -> list[tuple]:
    """(partition, key, value, headers) of every record the broker stored for `topic`, in offset order."""
    return [(record.partition, record.key, record.value, tuple(record.headers))
            for partition in range(partitions) for record in broker.records(topic, partition)]


def java_producer_requests(broker, since: int) -> dict[str, int]:
    """How many requests of each API Spark's producers sent after `since`."""
    counts: dict[str, int] = {}
    for entry in broker.requests(since):
        if (entry.client_id or "").startswith("producer-"):
            counts[entry.api] = counts.get(entry.api, 0) + 1
    return counts


def test_batch_write_with_every_column(broker, spark, kafka, topic):
    """Rows name their topic and partition; null keys, a null value (a tombstone), headers with a null value and
    repeated names. The producer is idempotent: the partitions know its producer id and sequences."""
    first, second = f"{topic}.one", f"{topic}.two"
    broker.create_topic(first, 3)
    broker.create_topic(second, 1)
    rows = [(first, 2, b"k1", b"v1", [("h", b"1"), ("h", b"2")]),
            (first, 0, None, b"v2", [("null", None)]),
            (second, 0, b"k3", None, []),
            (first, 2, b"k4", b"", None),
            (second, 0, b"k5", b"v5" * 1000, [("big", b"x" * 500)])]
    since = last_seq(broker)
    frame = spark.createDataFrame(rows, WRITE_SCHEMA).coalesce(1)  # one task: rows reach Kafka in this order
    frame.write.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap).save()

    assert stored(broker, first, 3) == [(0, None, b"v2", (("null", None),)),
                                        (2, b"k1", b"v1", (("h", b"1"), ("h", b"2"))),
                                        (2, b"k4", b"", ())]
    assert stored(broker, second, 1) == [(0, b"k3", None, ()), (0, b"k5", b"v5" * 1000, (("big", b"x" * 500),))]
    assert java_producer_requests(broker, since).get("Produce", 0) >= 1
    # Spark caches its producer across queries, so its InitProducerId may predate this test; the partition's
    # producer state shows the batches carried a producer id and sequences (a non-idempotent producer leaves none).
    [producer] = kafka.producers(second, 0)
    assert producer.producer_id >= 0 and producer.last_sequence == 1  # two records, sequences 0 and 1

    back = records_of(spark.read.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
                      .option("subscribe", first).option("includeHeaders", "true").load()
                      .selectExpr(*KAFKA_COLUMNS).collect())
    assert [(r.partition, r.key, r.value, r.headers) for r in back] == [
        (0, None, b"v2", (("null", None),)), (2, b"k1", b"v1", (("h", b"1"), ("h", b"2"))), (2, b"k4", b"", ())]


def test_topic_option_and_key_partitioning(broker, spark, kafka, topic):
    """With the `topic` option and no partition column the Java producer hashes keys: one key, one partition."""
    broker.create_topic(topic, 4)
    rows = [(f"key-{i % 5}".encode(), f"value-{i}".encode()) for i in range(40)]
    frame = spark.createDataFrame(rows, "key binary, value binary")
    frame.write.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap).option("topic", topic).save()
    found = stored(broker, topic, 4)
    assert sorted((key, value) for _, key, value, _ in found) == sorted(rows)
    partitions_of_key: dict[bytes, set[int]] = {}
    for partition, key, _, _ in found:
        partitions_of_key.setdefault(key, set()).add(partition)
    assert all(len(partitions) == 1 for partitions in partitions_of_key.values()), partitions_of_key


def test_write_stream_from_topic_to_topic(broker, spark, kafka, topic, tmp_path):
    """A streaming job copies one topic to another, changing values and adding a header; a second run with the
    same checkpoint copies only what arrived since."""
    source, sink = f"{topic}.in", f"{topic}.out"
    broker.create_topic(source, 2)
    broker.create_topic(sink, 2)

    def run():
        frame = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
                 .option("subscribe", source).option("startingOffsets", "earliest").option("includeHeaders", "true")
                 .load()
                 .selectExpr("key", "upper(CAST(value AS STRING)) AS value", "partition",
                             "concat(coalesce(headers, array()), array(named_struct('key', 'copied-from', "
                             "'value', CAST(concat(topic, '/', offset) AS BINARY)))) AS headers"))
        query = (frame.writeStream.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
                 .option("topic", sink).option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(availableNow=True).start())
        assert query.awaitTermination(120)
        assert query.exception() is None

    def expected(records):
        return sorted((r.partition, r.key, r.value.upper(),
                       r.headers + (("copied-from", f"{source}/{r.offset}".encode()),)) for r in records)

    produced = kafka.produce(source, [{"partition": i % 2, "key": f"k{i}".encode(), "value": f"v{i}".encode(),
                                       "headers": [("n", str(i).encode())]} for i in range(10)])
    run()
    assert sorted(stored(broker, sink, 2)) == expected(produced)
    produced += kafka.produce(source, [{"partition": 1, "key": b"late", "value": b"later"}])
    run()
    assert sorted(stored(broker, sink, 2)) == expected(produced)
