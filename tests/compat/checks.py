"""Checks shared by the compat tests: reading back exactly what was produced, what the broker stored, and what a
consumer starting at the latest offset reads."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from .broker_process import BrokerProcess
from .clients.kafka_python_client import KafkaPythonClient
from .records import Consumed, stored_batches

POSITIONING_BOUND_S = 90.0  # how long a consumer may take to position itself: generous for a loaded machine


def read_exactly(reference: KafkaPythonClient, broker: BrokerProcess, topic: str, count: int,
                 partitions: Sequence[int] = (0,)) -> list[Consumed]:
    """All records of the topic through the reference consumer, in (partition, offset) order; asserts the log holds
    exactly `count` (nothing lost, nothing duplicated) and that offsets run from 0 without gaps."""
    got = reference.consume(broker.bootstrap, topic, count, partitions=partitions)
    ends = reference.end_offsets(broker.bootstrap, topic, partitions)
    assert sum(ends.values()) == count, f"the log holds {ends} records per partition, {count} were sent"
    got.sort(key=lambda r: (r.partition, r.offset))
    for partition in partitions:
        offsets = [r.offset for r in got if r.partition == partition]
        assert offsets == list(range(ends[partition])), f"partition {partition}: offsets {offsets[:20]}..."
    return got


def assert_stored_as(broker: BrokerProcess, topic: str, count: int, *, codec: int | None = None,
                     partitions: Sequence[int] = (0,), idempotent: bool = False) -> None:
    """The segment files hold `count` records in v2 batches, all compressed with `codec` when given, from
    idempotent producers (a producer id on every batch) or non-idempotent ones (producer id -1 on every batch)."""
    batches = [b for p in partitions for b in stored_batches(broker.segment_files(topic, p))]
    assert batches, f"no batches on disk for {topic}"
    assert sum(b.records for b in batches) == count, f"{sum(b.records for b in batches)} records on disk"
    assert {b.magic for b in batches} == {2}, f"magic {sorted({b.magic for b in batches})}, clients send v2"
    producer_ids = {b.producer_id for b in batches}
    if idempotent:
        assert min(producer_ids) >= 0, "an idempotent producer sent batches without a producer id"
    else:
        assert producer_ids == {-1}, "a producer was idempotent although configured not to be"
    if codec is not None:
        assert {b.codec for b in batches} == {codec}, f"codecs on disk {sorted({b.codec for b in batches})}"


def first_new_record(reference: KafkaPythonClient, broker: BrokerProcess, topic: str,
                     consume_latest: Callable[[], list[Consumed]]) -> Consumed:
    """The record `consume_latest` (a consumer of one record, starting at the latest offset) returns. When it has
    positioned itself is its client's business, so new records (`new-<n>`) are produced, paced, until it returns."""
    outcome: dict = {}
    consumer = threading.Thread(target=call_into, args=(outcome, consume_latest), daemon=True)
    consumer.start()
    producer = reference.producer(broker.bootstrap)
    deadline = time.monotonic() + POSITIONING_BOUND_S
    try:
        sent = 0
        while consumer.is_alive() and time.monotonic() < deadline:
            producer.send(topic, value=f"new-{sent}".encode()).get(timeout=10)
            sent += 1
            consumer.join(timeout=0.5)  # paces the new records; the loop ends as soon as the consumer returns
    finally:
        producer.close(timeout=5)
    consumer.join(timeout=POSITIONING_BOUND_S)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"][0]


def call_into(outcome: dict, call, *args, **kwargs) -> None:
    """A thread's target: runs `call`, keeping its "result" or "error" and the time it "finished" in `outcome`."""
    try:
        outcome["result"] = call(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - re-raised by the test
        outcome["error"] = exc
    outcome["finished"] = time.monotonic()
