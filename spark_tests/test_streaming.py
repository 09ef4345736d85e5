"""Structured Streaming from compatbroker: checkpointed queries into file and memory sinks, restarts that resume
exactly where they stopped, `maxOffsetsPerTrigger`, partitions added while a query runs, and `failOnDataLoss`
after retention deleted records a query had not read yet."""
from __future__ import annotations

import json
import re
import time

import pytest

from .kafka_tools import WITHOUT_HEADERS, Record, records_of, wait_until, without_headers

TRIGGER = "200 milliseconds"
HOUR_MS = 3_600_000


def stream(spark, kafka, **options):
    return (spark.readStream.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap).options(**options)
            .load())


def into_files(frame, directory, **trigger):
    """A query writing the Kafka columns as parquet files, checkpointed beside them."""
    return (frame.writeStream.format("parquet").option("path", str(directory / "out"))
            .option("checkpointLocation", str(directory / "checkpoint"))
            .trigger(**(trigger or {"processingTime": TRIGGER})).start())


def files_read(spark, directory) -> list[Record]:
    return records_of(spark.read.parquet(str(directory / "out")).selectExpr(*WITHOUT_HEADERS).collect())


def query_name(topic: str) -> str:
    """A memory sink's table name for a topic's query."""
    return re.sub(r"\W", "_", topic)


def memory_rows(spark, name: str) -> list[Record]:
    return records_of(spark.sql(f"SELECT * FROM `{name}`").selectExpr(*WITHOUT_HEADERS).collect())


def source_offsets(progress: dict, which: str = "endOffset") -> dict:
    """The source's "startOffset" or "endOffset" in one progress report, as {topic: {partition: offset}}."""
    [source] = progress["sources"]
    return json.loads(source[which]) if isinstance(source[which], str) else source[which]


def with_data(query) -> list[dict]:
    return [progress for progress in query.recentProgress if progress["numInputRows"] > 0]


def run_to_end(query, timeout_s: float = 120) -> None:
    """Wait for an availableNow query to finish; its failure is raised here."""
    assert query.awaitTermination(timeout_s), "the query did not finish"
    if query.exception() is not None:
        raise query.exception()


def test_restart_resumes_where_it_stopped(broker, spark, kafka, topic, tmp_path):
    """Records before, during and after a stop all reach the file sink once: no gap, no duplicate."""
    broker.create_topic(topic, 2)
    produced = kafka.produce_values(topic, 0, [f"a{i}" for i in range(10)])
    produced += kafka.produce_values(topic, 1, [f"a{i}" for i in range(7)])
    frame = stream(spark, kafka, subscribe=topic, startingOffsets="earliest")

    first = into_files(frame, tmp_path)
    first.processAllAvailable()
    produced += kafka.produce_values(topic, 0, [f"b{i}" for i in range(5)])
    first.processAllAvailable()
    produced += kafka.produce_values(topic, 1, [f"c{i}" for i in range(5)])  # maybe read before the stop, maybe not
    first.stop()
    produced += kafka.produce_values(topic, 0, [f"d{i}" for i in range(6)])  # written while no query runs
    stopped_at = source_offsets(first.lastProgress)

    second = into_files(frame, tmp_path)
    second.processAllAvailable()
    second.stop()
    assert source_offsets(with_data(second)[0], "startOffset") == stopped_at  # the first run's last committed batch
    assert source_offsets(second.lastProgress) == {topic: {"0": 21, "1": 12}}
    assert files_read(spark, tmp_path) == without_headers(sorted(produced))


def test_a_new_query_starts_at_the_latest_offsets(broker, spark, kafka, topic):
    """Without startingOffsets a stream starts at the end: records already there are not read, later ones are."""
    broker.create_topic(topic, 2)
    kafka.produce_values(topic, 0, ["before"])
    name = query_name(topic)
    query = (stream(spark, kafka, subscribe=topic).writeStream.format("memory").queryName(name)
             .trigger(processingTime=TRIGGER).start())
    try:
        query.processAllAvailable()  # the first batch has fixed the starting offsets
        produced = kafka.produce_values(topic, 0, ["after-0"]) + kafka.produce_values(topic, 1, ["after-1"])
        query.processAllAvailable()
    finally:
        query.stop()
    assert memory_rows(spark, name) == without_headers(sorted(produced))


def test_available_now_runs_continue_from_the_checkpoint(broker, spark, kafka, topic, tmp_path):
    """Three availableNow runs on one checkpoint, each taking exactly what arrived since the previous one."""
    broker.create_topic(topic, 1)
    produced = []
    for run in range(3):
        new = kafka.produce_values(topic, 0, [f"run{run}-{i}" for i in range(4 + run)])
        produced += new
        query = into_files(stream(spark, kafka, subscribe=topic, startingOffsets="earliest"), tmp_path,
                           availableNow=True)
        run_to_end(query)
        assert sum(progress["numInputRows"] for progress in query.recentProgress) == len(new)
        assert files_read(spark, tmp_path) == without_headers(produced)


def test_max_offsets_per_trigger(broker, spark, kafka, topic):
    broker.create_topic(topic, 2)
    produced = kafka.produce_values(topic, 0, [f"x{i}" for i in range(25)])
    produced += kafka.produce_values(topic, 1, [f"y{i}" for i in range(25)])
    name = query_name(topic)
    query = (stream(spark, kafka, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="12")
             .writeStream.format("memory").queryName(name).trigger(availableNow=True).start())
    run_to_end(query)
    sizes = [progress["numInputRows"] for progress in with_data(query)]
    assert sum(sizes) == 50 and len(sizes) >= 5 and max(sizes) <= 12, sizes
    assert memory_rows(spark, name) == without_headers(sorted(produced))


def test_partitions_added_while_the_query_runs(broker, spark, kafka, topic):
    """CreatePartitions under a running query: the new partitions are read from offset 0, nothing is lost."""
    broker.create_topic(topic, 2)
    produced = kafka.produce_values(topic, 0, ["p0-a", "p0-b"]) + kafka.produce_values(topic, 1, ["p1-a"])
    name = query_name(topic)
    query = (stream(spark, kafka, subscribe=topic, startingOffsets="earliest", failOnDataLoss="true")
             .writeStream.format("memory").queryName(name).trigger(processingTime=TRIGGER).start())
    try:
        query.processAllAvailable()
        kafka.grow(topic, 4)
        for partition in (2, 3, 0):
            produced += kafka.produce_values(topic, partition, [f"p{partition}-new-{i}" for i in range(3)])
        query.processAllAvailable()  # its next trigger lists the topic's partitions again
        assert set(source_offsets(query.lastProgress)[topic]) == {"0", "1", "2", "3"}
    finally:
        query.stop()
    assert query.exception() is None
    assert memory_rows(spark, name) == without_headers(sorted(produced))


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_fail_on_data_loss_after_retention(broker, spark, kafka, topic, tmp_path, fail_on_data_loss):
    """The query reads offsets 0-9 and stops; retention then deletes offsets 0-19 (each record is a segment of its
    own, 0-19 stamped two hours ago). The next run fails, or, with failOnDataLoss=false, goes on from 20."""
    segment_per_record = {"segment.bytes": "100"}
    broker.create_topic(topic, 1, segment_per_record)
    old = int(time.time() * 1000) - 2 * HOUR_MS
    produced = kafka.produce_values(topic, 0, [f"v{i:02d}" for i in range(10)], timestamp=old,
                                    batch_per_record=True)
    options = {"subscribe": topic, "startingOffsets": "earliest", "failOnDataLoss": str(fail_on_data_loss).lower()}
    run_to_end(into_files(stream(spark, kafka, **options), tmp_path, availableNow=True))
    assert files_read(spark, tmp_path) == without_headers(produced)

    produced += kafka.produce_values(topic, 0, [f"v{i:02d}" for i in range(10, 20)], timestamp=old,
                                     batch_per_record=True)
    produced += kafka.produce_values(topic, 0, [f"v{i:02d}" for i in range(20, 30)], batch_per_record=True)
    kafka.set_topic_configs(topic, {**segment_per_record, "retention.ms": str(HOUR_MS)})
    wait_until(lambda: kafka.offsets(topic, 1)[0] == {0: 20}, "retention to delete offsets 0-19")

    second = into_files(stream(spark, kafka, **options), tmp_path, availableNow=True)
    if fail_on_data_loss:
        with pytest.raises(Exception, match="(?s)KAFKA_DATA_LOSS|Some data may have been lost"):
            run_to_end(second)
        assert len(files_read(spark, tmp_path)) == 10  # nothing after the loss was written
    else:
        run_to_end(second)
        kept = without_headers(record for record in produced if record.offset < 10 or record.offset >= 20)
        assert files_read(spark, tmp_path) == kept
