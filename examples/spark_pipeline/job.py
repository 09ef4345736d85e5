"""The Spark Structured Streaming job: page views per page and minute of event time, written back to Kafka.

    python job.py --bootstrap localhost:9092 --checkpoint /tmp/page-views-checkpoint [--once]

It reads the JSON events of `--source`, keeps a watermark of `--watermark` behind the latest event time seen, and
once the watermark has passed the end of a minute, writes that minute's result for each page to `--sink`: key
"<page>|<window start>", value JSON with the window, the number of views and of distinct users. A view arriving
after its minute was written is dropped (append mode writes each result once). The checkpoint keeps the offsets
read, the open windows and the watermark, so a restarted job goes on where it stopped.

`--once` processes what is there and stops (Trigger.AvailableNow); without it the job runs until interrupted.
Spark's Kafka connector must be on the class path: COMPATBROKER_SPARK_JARS names its jars (comma-separated), or
else Spark downloads it from Maven Central (spark.jars.packages), which needs network access.
"""
from __future__ import annotations

import argparse
import glob
import os

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import StringType, StructField, StructType

EVENT_SCHEMA = StructType([StructField("user", StringType()), StructField("page", StringType()),
                           StructField("event_time", StringType())])


def page_views_per_minute(spark: SparkSession, bootstrap: str, source: str, *, watermark: str = "30 seconds",
                          window: str = "1 minute") -> DataFrame:
    """The streaming result: one row per page and closed window, as Kafka key and value columns."""
    events = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", source)
              .option("startingOffsets", "earliest")
              .load()
              .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("event"))
              .select("event.user", "event.page", F.to_timestamp("event.event_time").alias("event_time"))
              .where(F.col("event_time").isNotNull()))  # a record that is not an event is skipped
    counts = (events.withWatermark("event_time", watermark)
              .groupBy(F.window("event_time", window).alias("window"), "page")
              .agg(F.count("*").alias("views"), F.size(F.collect_set("user")).alias("users")))
    start = F.date_format("window.start", "yyyy-MM-dd'T'HH:mm:ss'Z'")
    end = F.date_format("window.end", "yyyy-MM-dd'T'HH:mm:ss'Z'")
    return counts.select(
        F.concat_ws("|", "page", start).alias("key"),
        F.to_json(F.struct("page", start.alias("window_start"), end.alias("window_end"), "views", "users"))
        .alias("value"))


def start(spark: SparkSession, bootstrap: str, *, source: str, sink: str, checkpoint: str,
          once: bool = False) -> StreamingQuery:
    """Start the job; with `once` it stops by itself after taking in everything available."""
    writer = (page_views_per_minute(spark, bootstrap, source).writeStream
              .format("kafka")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("topic", sink)
              .option("checkpointLocation", checkpoint)
              .outputMode("append"))
    writer = writer.trigger(availableNow=True) if once else writer.trigger(processingTime="5 seconds")
    return writer.start()


def session() -> SparkSession:
    """A local session with the Kafka connector: the jars COMPATBROKER_SPARK_JARS names, or Maven coordinates
    for the installed PySpark."""
    import pyspark

    builder = (SparkSession.builder.master("local[2]").appName("page-views-per-minute")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.shuffle.partitions", "2"))
    jars = os.environ.get("COMPATBROKER_SPARK_JARS", "").strip()
    if jars:
        return builder.config("spark.jars", jars).getOrCreate()
    library = glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "scala-library-*.jar"))[0]
    scala = ".".join(os.path.basename(library).split("-")[-1].split(".")[:2])
    package = f"org.apache.spark:spark-sql-kafka-0-10_{scala}:{pyspark.__version__}"
    return builder.config("spark.jars.packages", package).getOrCreate()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="localhost:9092")
    parser.add_argument("--source", default="page-views")
    parser.add_argument("--sink", default="page-views-per-minute")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--once", action="store_true", help="process what is there, then stop")
    args = parser.parse_args()
    spark = session()
    query = start(spark, args.bootstrap, source=args.source, sink=args.sink, checkpoint=args.checkpoint,
                  once=args.once)
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
