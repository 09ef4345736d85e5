"""Spark batch-read benchmark: rows per second of `spark.read.format("kafka")` over compatbroker.

    COMPATBROKER_SPARK_JARS=a.jar,b.jar,... python bench/spark_read.py
    python bench/spark_read.py --records 200000 --passes 2          # a quicker look

1. compatbroker starts (`python -m compatbroker serve`, bench/brokers.py) and librdkafka (confluent-kafka)
   produces `--records` records of `--value-bytes` bytes, no key, round robin over `--partitions` partitions.
2. Spark (`local[2]`, the Kafka connector from COMPATBROKER_SPARK_JARS or Maven, see spark_tests/connector.py)
   reads the whole topic in one batch query, one Spark task per partition, and sums the value lengths, so that
   every record is fetched, decoded and turned into a row. The clock runs around the query; the first query of
   the session (class loading, JIT) is an unmeasured warm-up over a small topic. Median of `--passes`, with the
   broker's CPU time during the query: near the wall time means the broker is the bottleneck.
3. Two references measured in the same run, on the same machine and data:
   - Spark reading the same rows from a parquet copy: the cost of Spark's own row handling with no Kafka at all,
     an upper bound for any broker;
   - one Java consumer (the kafka-clients jar Spark uses, no Spark) reading the topic from compatbroker: how fast
     the broker and the Java client go without Spark's rows and tasks.

The machine this runs on has two cores; Spark's two task threads, the Java client's fetch threads and the broker
share them, which the figures reflect.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from brokers import CompatBroker  # noqa: E402

from spark_tests.connector import ConnectorUnavailable, find_connector, session_builder  # noqa: E402

try:
    from loadgen import make_producer, produce as produce_all
except ImportError:
    raise SystemExit("the Spark read benchmark produces with confluent-kafka: pip install -e '.[test]'")

# loadgen's producer configuration, with the 20 ms linger this benchmark's figures were measured with.
PRODUCER_OVERRIDES = {"linger.ms": 20, "broker.address.family": "v4"}
PRODUCE_TIMEOUT_S = 300.0
BYTES_DESERIALIZER = "org.apache.kafka.common.serialization.ByteArrayDeserializer"
WARM_UP_RECORDS = 10_000


def produce(bootstrap: str, topic: str, records: int, partitions: int, value_bytes: int) -> float:
    """Send the records with librdkafka, round robin; returns the seconds it took (for the report only)."""
    producer, errors = make_producer(bootstrap, **PRODUCER_OVERRIDES)
    run = produce_all(producer, errors, topic, list(range(partitions)), b"v" * value_bytes, records,
                      PRODUCE_TIMEOUT_S)
    return run.seconds


def spark_sum(spark, bootstrap: str, topic: str) -> tuple[int, int]:
    """(rows, total value bytes) of the whole topic, read by Spark's Kafka source."""
    row = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
           .load().selectExpr("count(*) AS n", "sum(length(value)) AS bytes").collect()[0])
    return row.n, row.bytes


def timed(action, broker: CompatBroker | None = None) -> tuple[float, float, object]:
    """(wall seconds, broker CPU seconds meanwhile, result) of `action()`."""
    cpu_before = broker.cpu_seconds() if broker is not None else 0.0
    start = time.perf_counter()
    result = action()
    wall = time.perf_counter() - start
    return wall, (broker.cpu_seconds() - cpu_before) if broker is not None else 0.0, result


def java_consumer_read(spark, bootstrap: str, topic: str, partitions: int, records: int) -> int:
    """Read the topic with the Java consumer alone (Spark's kafka-clients, driven through py4j one poll at a time,
    so that no record passes through Python); returns the records read."""
    jvm = spark._jvm
    properties = jvm.java.util.Properties()
    for name, value in {"bootstrap.servers": bootstrap, "max.poll.records": "50000", "enable.auto.commit": "false",
                        "key.deserializer": BYTES_DESERIALIZER, "value.deserializer": BYTES_DESERIALIZER}.items():
        properties.setProperty(name, value)
    consumer = jvm.org.apache.kafka.clients.consumer.KafkaConsumer(properties)
    try:
        assigned = [jvm.org.apache.kafka.common.TopicPartition(topic, partition) for partition in range(partitions)]
        consumer.assign(assigned)
        consumer.seekToBeginning(assigned)
        seen = 0
        deadline = time.monotonic() + 300
        while seen < records:
            if time.monotonic() > deadline:
                raise SystemExit(f"the Java consumer read {seen} of {records} records in 300 s")
            seen += consumer.poll(jvm.java.time.Duration.ofMillis(500)).count()
        return seen
    finally:
        consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    try:
        connector = find_connector()
    except ConnectorUnavailable as exc:
        raise SystemExit(str(exc))

    work = Path(tempfile.mkdtemp(prefix="compatbroker-spark-bench-"))
    broker = CompatBroker.start(work / "data", work / "broker.log", partitions=args.partitions)
    spark = None
    try:
        topic, warm_topic = "bench-spark-read", "bench-spark-warm-up"
        produce_s = produce(broker.bootstrap, topic, args.records, args.partitions, args.value_bytes)
        produce(broker.bootstrap, warm_topic, WARM_UP_RECORDS, args.partitions, args.value_bytes)
        print(f"produced {args.records:,} records of {args.value_bytes} bytes into {args.partitions} partitions "
              f"in {produce_s:.1f} s (librdkafka)")

        spark = session_builder(connector, "compatbroker-spark-read-bench").getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        print(f"spark {spark.version}, connector: {connector.source}")
        spark_sum(spark, broker.bootstrap, warm_topic)

        expected = (args.records, args.records * args.value_bytes)
        passes = []
        for number in range(args.passes):
            wall, cpu, found = timed(lambda: spark_sum(spark, broker.bootstrap, topic), broker)
            if found != expected:
                raise SystemExit(f"Spark read {found} (rows, bytes), expected {expected}")
            passes.append((wall, cpu))
            print(f"  pass {number + 1}: {wall:.2f} s, {args.records / wall:,.0f} rows/s, broker CPU {cpu:.2f} s")
        wall = statistics.median(w for w, _ in passes)
        cpu = statistics.median(c for _, c in passes)
        rows_per_s = args.records / wall
        print(f"Spark batch read from compatbroker: {rows_per_s:,.0f} rows/s "
              f"({rows_per_s * args.value_bytes / 1e6:.1f} MB/s of values), median of {args.passes}; "
              f"broker CPU {cpu:.2f} s of {wall:.2f} s wall")

        parquet = str(work / "copy.parquet")
        spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", topic) \
            .load().write.parquet(parquet)
        parquet_runs = [timed(lambda: spark.read.parquet(parquet)
                              .selectExpr("count(*) AS n", "sum(length(value)) AS bytes").collect())[0]
                        for _ in range(args.passes)]
        parquet_rate = args.records / statistics.median(parquet_runs)
        print(f"reference, Spark reading the same rows from parquet: {parquet_rate:,.0f} rows/s "
              f"(Kafka source at {rows_per_s / parquet_rate:.2f}x of it)")

        java_runs = [timed(lambda: java_consumer_read(spark, broker.bootstrap, topic, args.partitions,
                                                      args.records), broker)[:2] for _ in range(args.passes)]
        java_wall = statistics.median(w for w, _ in java_runs)
        java_cpu = statistics.median(c for _, c in java_runs)
        java_rate = args.records / java_wall
        print(f"reference, one Java consumer (no Spark) reading the topic from compatbroker: {java_rate:,.0f} rows/s, "
              f"broker CPU {java_cpu:.2f} s of {java_wall:.2f} s (Spark at {rows_per_s / java_rate:.2f}x of it)")
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
