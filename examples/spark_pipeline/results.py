"""Read the job's results: every page's views per minute written so far, with a plain Python Kafka consumer.

    python results.py --bootstrap localhost:9092 --topic page-views-per-minute
"""
from __future__ import annotations

import argparse
import json
import time

from kafka import KafkaConsumer, TopicPartition

POLL_MS = 500


def read_results(bootstrap: str, topic: str, *, timeout_s: float = 30.0) -> list[dict]:
    """Every result record in the topic now (from the first offset up to the end offsets of this moment)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = consumer.end_offsets(partitions)
        results = []
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < end for tp, end in ends.items()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {len(results)} results of {topic} in {timeout_s} s, expected more")
            for records in consumer.poll(timeout_ms=POLL_MS).values():
                results.extend({"key": record.key.decode(), **json.loads(record.value)} for record in records)
        return results
    finally:
        consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="localhost:9092")
    parser.add_argument("--topic", default="page-views-per-minute")
    args = parser.parse_args()
    results = sorted(read_results(args.bootstrap, args.topic), key=lambda r: (r["window_start"], r["page"]))
    for result in results:
        print(f"{result['window_start']}  {result['page']:<10} {result['views']:>5} views {result['users']:>4} users")
    print(f"{len(results)} result(s)")


if __name__ == "__main__":
    main()
