"""Page-view events for the pipeline: JSON records keyed by user, each saying which page was viewed and when.

    python events.py --bootstrap localhost:9092 --topic page-views --count 600

`--count` random events spread over the last minutes (some out of order, a few late) are sent with kafka-python.
The Spark job (job.py) counts them per page and minute of event time.
"""
from __future__ import annotations

import argparse
import json
import random
from datetime import datetime, timedelta, timezone

from kafka import KafkaProducer

PAGES = ("/home", "/search", "/product", "/cart", "/checkout")


def event(user: str, page: str, at: datetime) -> dict:
    """One page view; event_time is ISO 8601 in UTC, as the job parses it."""
    return {"user": user, "page": page, "event_time": at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}


def send(bootstrap: str, topic: str, events: list[dict]) -> None:
    """Send `events` in order (key: the user, so that one user's views stay in one partition, in order)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for item in events:
            producer.send(topic, key=item["user"].encode(), value=json.dumps(item).encode())
        producer.flush()
    finally:
        producer.close()


def random_events(count: int, *, end: datetime, minutes: int = 5, seed: int | None = None) -> list[dict]:
    """`count` views over the `minutes` before `end`, mostly in time order, some a few seconds out of order."""
    rng = random.Random(seed)
    start = end - timedelta(minutes=minutes)
    step = (end - start) / max(count, 1)
    events = []
    for index in range(count):
        jitter = timedelta(seconds=rng.uniform(-20, 5))  # clocks and networks deliver views out of order
        events.append(event(f"user-{rng.randrange(50)}", rng.choice(PAGES), start + step * index + jitter))
    return events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="localhost:9092")
    parser.add_argument("--topic", default="page-views")
    parser.add_argument("--count", type=int, default=600)
    args = parser.parse_args()
    events = random_events(args.count, end=datetime.now(timezone.utc))
    send(args.bootstrap, args.topic, events)
    print(f"sent {len(events)} page views to {args.topic}")


if __name__ == "__main__":
    main()
