"""Transactions seen through the Java client and Spark's Kafka source. A transactional Java producer
(`transactional.id`) commits a transaction, aborts one and commits another, each across three partitions.

- Readers with read_committed (the Java consumer, a Spark batch read and a streaming query with
  `kafka.isolation.level=read_committed`) get exactly the committed records, in order, and move past the markers
  and the aborted records. Readers with read_uncommitted get every record; the markers' offsets are gaps.
- The same with each codec, through the Java client.
- While a transaction is open, read_committed readers stop at the last stable offset: a streaming query reads the
  transaction once it commits; a Java consumer moves past it once it is aborted, fenced by a new producer with the
  same transactional id, or timed out.
- A consume-transform-produce loop (`sendOffsetsToTransaction` with the consumer's group metadata) commits its
  group's offsets together with its output; an aborted attempt commits neither. While such a transaction is
  open, the group's committed offsets are unstable: the Java consumer's OffsetFetch (require_stable) waits.
"""
from __future__ import annotations

import json
import uuid
from typing import NamedTuple

import pytest

from .java_clients import JavaRecord, java_exception_class

PARTITIONS = 3
PER_PARTITION = 4  # records of each transaction in each partition
TRANSACTIONS = 3   # committed, aborted, committed
# Each transaction takes PER_PARTITION offsets in a partition, then one for its marker (a control batch).
ENDS = {partition: TRANSACTIONS * (PER_PARTITION + 1) for partition in range(PARTITIONS)}
MARKERS = {k * (PER_PARTITION + 1) + PER_PARTITION for k in range(TRANSACTIONS)}
QUERY_TIMEOUT_S = 120
AFTER_ONE = {partition: end + PER_PARTITION + 1 for partition, end in ENDS.items()}  # ENDS and one more transaction


class Row(NamedTuple):
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


class Produced(NamedTuple):
    committed: list[Row]  # in (partition, offset) order
    aborted: list[Row]


def run_transaction(producer, topic: str, name: str, *, commit: bool | None) -> list[Row]:
    """One transaction of PER_PARTITION records in each partition, keys and values "<name>-<partition>-<i>";
    committed, aborted, or (commit=None) left open."""
    producer.begin_transaction()
    sent = producer.send(topic, [(partition, f"{name}-{partition}-{i}".encode(), f"{name}-{partition}-{i}".encode())
                                 for partition in range(PARTITIONS) for i in range(PER_PARTITION)])
    if commit is True:
        producer.commit_transaction()
    elif commit is False:
        producer.abort_transaction()
    return rows_of(sent)


def rows_of(records: list[JavaRecord]) -> list[Row]:
    """Records as Rows, in (partition, offset) order."""
    return sorted(rows_of_polled(records))


def rows_of_polled(records: list[JavaRecord]) -> list[Row]:
    """Polled records as Rows, in the order polled."""
    return [Row(record.partition, record.offset, record.key, record.value) for record in records]


@pytest.fixture
def produced(broker, java, topic) -> Produced:
    broker.create_topic(topic, PARTITIONS)
    producer = java.producer(**{"transactional.id": f"spark-tests-{topic}"})
    producer.init_transactions()
    first = run_transaction(producer, topic, "first", commit=True)
    aborted = run_transaction(producer, topic, "aborted", commit=False)
    second = run_transaction(producer, topic, "second", commit=True)
    return Produced(sorted(first + second), aborted)


def test_each_transaction_is_followed_by_its_marker(produced):
    """The producer's acknowledged offsets leave one offset for a marker after each transaction."""
    expected = [k * (PER_PARTITION + 1) + i for k in range(TRANSACTIONS) for i in range(PER_PARTITION)]
    for partition in range(PARTITIONS):
        offsets = sorted(row.offset for row in produced.committed + produced.aborted if row.partition == partition)
        assert offsets == expected, partition


def test_java_read_committed_consumer_sees_only_committed_records(java, produced, topic):
    consumer = java.consumer(**{"isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    consumer.assign(topic, list(range(PARTITIONS)))
    polled = rows_of_polled(consumer.poll_to_positions(topic, ENDS))
    for partition in range(PARTITIONS):  # in offset order within each partition
        assert [row for row in polled if row.partition == partition] == [
            row for row in produced.committed if row.partition == partition]
    assert sorted(polled) == produced.committed


def test_java_read_uncommitted_consumer_sees_every_record(java, produced, topic):
    consumer = java.consumer(**{"isolation.level": "read_uncommitted", "auto.offset.reset": "earliest"})
    consumer.assign(topic, list(range(PARTITIONS)))
    polled = rows_of_polled(consumer.poll_to_positions(topic, ENDS))
    assert sorted(polled) == sorted(produced.committed + produced.aborted)
    for partition in range(PARTITIONS):  # the markers' offsets are the gaps
        offsets = {row.offset for row in polled if row.partition == partition}
        assert set(range(ENDS[partition])) - offsets == MARKERS, partition


def test_java_consume_transform_produce(broker, java, produced, topic):
    """A group member reads the committed input, writes each value prefixed with "out-" to the output topic and
    sends its positions to the transaction. The first attempt aborts: neither the output nor the group's offsets
    become visible. The second commits: both do, exactly once."""
    output = f"{topic}.out"
    broker.create_topic(output, PARTITIONS)
    group = f"group-{uuid.uuid4().hex[:6]}"
    consumer = java.consumer(**{"group.id": group, "isolation.level": "read_committed",
                                "auto.offset.reset": "earliest"})
    consumer.subscribe(topic)
    polled = rows_of_polled(consumer.poll_to_positions(topic, ENDS))
    assert sorted(polled) == produced.committed
    producer = java.producer(**{"transactional.id": f"spark-tests-loop-{topic}"})
    producer.init_transactions()

    def attempt(commit: bool) -> list[Row]:
        producer.begin_transaction()
        sent = producer.send(output, [(row.partition, row.key, b"out-" + row.value) for row in polled])
        producer.send_offsets_to_transaction(topic, ENDS, consumer.group_metadata())
        if commit:
            producer.commit_transaction()
        else:
            producer.abort_transaction()
        return rows_of(sent)

    attempt(commit=False)
    assert consumer.committed(topic, list(range(PARTITIONS))) == {partition: None for partition in range(PARTITIONS)}
    written = attempt(commit=True)
    assert consumer.committed(topic, list(range(PARTITIONS))) == ENDS

    reader = java.consumer(**{"isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    reader.assign(output, list(range(PARTITIONS)))
    # per partition: the aborted attempt's records and marker, then the committed attempt's records and marker
    output_ends = {partition: 2 * (PER_PARTITION * 2 + 1) for partition in range(PARTITIONS)}
    assert sorted(rows_of_polled(reader.poll_to_positions(output, output_ends))) == written
    assert sorted((row.partition, row.key, row.value) for row in written) == sorted(
        (row.partition, row.key, b"out-" + row.value) for row in produced.committed)


def test_java_committed_offsets_wait_for_the_transaction_that_commits_them(java, produced, topic):
    """The Java consumer fetches committed offsets with require_stable: while a transaction holds offsets of its
    group, the broker answers UNSTABLE_OFFSET_COMMIT and committed() retries until its timeout; after the commit
    it gets them."""
    group = f"group-{uuid.uuid4().hex[:6]}"
    member = java.consumer(**{"group.id": group, "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    member.subscribe(topic)
    member.poll_to_positions(topic, ENDS)
    impatient = java.consumer(**{"group.id": group, "default.api.timeout.ms": "5000"})
    assert impatient.committed(topic, list(range(PARTITIONS))) == {partition: None for partition in range(PARTITIONS)}
    producer = java.producer(**{"transactional.id": f"spark-tests-offsets-{topic}"})
    producer.init_transactions()
    producer.begin_transaction()
    producer.send_offsets_to_transaction(topic, ENDS, member.group_metadata())

    with pytest.raises(Exception) as raised:
        impatient.committed(topic, list(range(PARTITIONS)))
    assert java_exception_class(raised.value) == "org.apache.kafka.common.errors.TimeoutException"
    producer.commit_transaction()
    assert java.consumer(**{"group.id": group}).committed(topic, list(range(PARTITIONS))) == ENDS


def test_java_read_committed_consumer_stops_at_an_open_transaction_until_it_aborts(java, produced, topic):
    producer = java.producer(**{"transactional.id": f"spark-tests-open-{topic}"})
    producer.init_transactions()
    run_transaction(producer, topic, "pending", commit=None)
    consumer = java.consumer(**{"isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    consumer.assign(topic, list(range(PARTITIONS)))
    assert sorted(rows_of_polled(consumer.poll_to_positions(topic, ENDS))) == produced.committed
    producer.abort_transaction()
    assert consumer.poll_to_positions(topic, AFTER_ONE) == []


def test_java_producer_fenced_by_a_new_one_with_the_same_transactional_id(java, produced, topic):
    """The new producer's InitProducerId aborts the old one's open transaction; the old one's commit fails with
    ProducerFencedException; the new one's transaction commits."""
    transactional_id = f"spark-tests-fenced-{topic}"
    old = java.producer(**{"transactional.id": transactional_id})
    old.init_transactions()
    run_transaction(old, topic, "fenced", commit=None)
    new = java.producer(**{"transactional.id": transactional_id})
    new.init_transactions()
    with pytest.raises(Exception) as raised:
        old.commit_transaction()
    assert java_exception_class(raised.value) == "org.apache.kafka.common.errors.ProducerFencedException"
    committed = run_transaction(new, topic, "new", commit=True)

    consumer = java.consumer(**{"isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    consumer.assign(topic, list(range(PARTITIONS)))
    after_two = {partition: end + PER_PARTITION + 1 for partition, end in AFTER_ONE.items()}
    polled = rows_of_polled(consumer.poll_to_positions(topic, after_two))
    assert sorted(polled) == sorted(produced.committed + committed)


def test_java_transaction_left_open_is_aborted_after_its_timeout(java, produced, topic):
    """A producer that begins a transaction and goes silent: after its transaction.timeout.ms (and the broker's
    transaction.abort.timed.out.transaction.cleanup.interval.ms, 10 s) the broker aborts it, and read_committed
    consumers move past it."""
    producer = java.producer(**{"transactional.id": f"spark-tests-silent-{topic}", "transaction.timeout.ms": "1000"})
    producer.init_transactions()
    run_transaction(producer, topic, "silent", commit=None)
    consumer = java.consumer(**{"isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    consumer.assign(topic, list(range(PARTITIONS)))
    assert sorted(rows_of_polled(consumer.poll_to_positions(topic, AFTER_ONE))) == produced.committed


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_java_compressed_transactions(broker, java, topic, codec):
    broker.create_topic(topic, PARTITIONS)
    producer = java.producer(**{"transactional.id": f"spark-tests-{codec}-{topic}", "compression.type": codec})
    producer.init_transactions()
    committed = run_transaction(producer, topic, "committed", commit=True)
    aborted = run_transaction(producer, topic, "aborted", commit=False)
    ends = {partition: 2 * (PER_PARTITION + 1) for partition in range(PARTITIONS)}
    for isolation, expected in ("read_committed", committed), ("read_uncommitted", sorted(committed + aborted)):
        consumer = java.consumer(**{"isolation.level": isolation, "auto.offset.reset": "earliest"})
        consumer.assign(topic, list(range(PARTITIONS)))
        assert sorted(rows_of_polled(consumer.poll_to_positions(topic, ends))) == expected, isolation


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_spark_batch_read(spark, kafka, produced, topic, isolation):
    frame = (spark.read.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest").option("endingOffsets", "latest")
             .option("kafka.isolation.level", isolation).load())
    expected = produced.committed if isolation == "read_committed" else sorted(produced.committed + produced.aborted)
    assert spark_rows(frame) == expected


def test_spark_streaming_read_committed(spark, kafka, produced, topic, tmp_path):
    """A streaming query gets the committed records, and its offsets end after the last marker."""
    query = into_files(read_committed_stream(spark, kafka, topic), tmp_path)
    run_to_end(query)
    assert files_read(spark, tmp_path) == produced.committed
    assert end_offsets(query) == ENDS


def test_spark_streaming_read_committed_stops_at_an_open_transaction(spark, kafka, java, produced, topic, tmp_path):
    """While a transaction is open the query reads up to its first offset (the last stable offset); once it
    commits, the next run from the checkpoint reads its records."""
    producer = java.producer(**{"transactional.id": f"spark-tests-open-{topic}"})
    producer.init_transactions()
    pending = run_transaction(producer, topic, "pending", commit=None)
    assert all(row.offset >= ENDS[row.partition] for row in pending)

    first = into_files(read_committed_stream(spark, kafka, topic), tmp_path)
    run_to_end(first)
    assert files_read(spark, tmp_path) == produced.committed
    assert end_offsets(first) == ENDS

    producer.commit_transaction()
    second = into_files(read_committed_stream(spark, kafka, topic), tmp_path)
    run_to_end(second)
    assert files_read(spark, tmp_path) == sorted(produced.committed + pending)
    assert end_offsets(second) == AFTER_ONE


def spark_rows(frame) -> list[Row]:
    return sorted(Row(row.partition, row.offset, _bytes(row.key), _bytes(row.value))
                  for row in frame.select("partition", "offset", "key", "value").collect())


def read_committed_stream(spark, kafka, topic: str):
    return (spark.readStream.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
            .option("subscribe", topic).option("startingOffsets", "earliest")
            .option("kafka.isolation.level", "read_committed").load())


def into_files(frame, directory):
    """An availableNow query writing the records as parquet files, checkpointed beside them."""
    return (frame.select("partition", "offset", "key", "value").writeStream.format("parquet")
            .option("path", str(directory / "out")).option("checkpointLocation", str(directory / "checkpoint"))
            .trigger(availableNow=True).start())


def run_to_end(query) -> None:
    assert query.awaitTermination(QUERY_TIMEOUT_S), "the query did not finish"
    if query.exception() is not None:
        raise query.exception()


def files_read(spark, directory) -> list[Row]:
    return spark_rows(spark.read.parquet(str(directory / "out")))


def end_offsets(query) -> dict[int, int]:
    """{partition: offset} where the query's last batch ended."""
    [source] = query.lastProgress["sources"]
    ends = source["endOffset"]
    ends = json.loads(ends) if isinstance(ends, str) else ends
    [(_, by_partition)] = ends.items()
    return {int(partition): offset for partition, offset in by_partition.items()}


def _bytes(value) -> bytes | None:
    return None if value is None else bytes(value)
