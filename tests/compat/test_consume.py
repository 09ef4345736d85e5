"""Each client consumes what the reference producer (kafka-python) wrote: by assignment, without a consumer group,
except kafkajs, whose consumers always join a group."""
from __future__ import annotations

import random
import threading
import time

import pytest

from .checks import POSITIONING_BOUND_S, call_into, first_new_record
from .records import (
    CODECS,
    EARLIEST,
    LATEST,
    ONE_MIB,
    AtOffset,
    AtTimestamp,
    Record,
    assert_same,
    by_partition,
    now_ms,
    numbered,
    record_shapes,
)


def test_record_shapes(client, reference, broker, topic):
    # Every client reads binary keys and values exactly; kcat prints headers as text, so it gets text headers.
    sent = record_shapes(now_ms() - 60_000, binary_headers=client.name != "kcat")
    reference.produce(broker.bootstrap, topic, sent)
    got = client.consume(broker.bootstrap, topic, len(sent))
    assert_same(sent, got)
    assert [r.offset for r in got] == list(range(len(sent)))


@pytest.mark.parametrize("codec", CODECS)
def test_compressed(client, reference, broker, topic, codec):
    sent = numbered(200, codec, size=200)
    reference.produce(broker.bootstrap, topic, sent, compression=codec)
    assert_same(sent, client.consume(broker.bootstrap, topic, len(sent)))


def test_one_mib_record(client, reference, broker, topic):
    sent = [Record(b"big", random.Random(2).randbytes(ONE_MIB)), Record(b"after", b"small")]
    reference.produce(broker.bootstrap, topic, sent)
    assert_same(sent, client.consume(broker.bootstrap, topic, len(sent)))


def test_ten_partitions(client, reference, partitioned_broker, topic):
    sent = numbered(200, "keyed", key_every=20)
    placed = reference.produce(partitioned_broker.bootstrap, topic, sent)
    assert len({partition for partition, _ in placed}) > 1
    got = client.consume(partitioned_broker.bootstrap, topic, len(sent), partitions=range(10))
    expected = {place: record.value for place, record in zip(placed, sent)}
    assert {(r.partition, r.offset): r.value for r in got} == expected
    for partition, records in by_partition(got).items():
        assert [r.offset for r in records] == sorted(o for p, o in placed if p == partition)


def _timed(base: int) -> list[Record]:
    return [Record(f"k{i}".encode(), f"v{i}".encode(), (), base + 1000 * i) for i in range(10)]


def test_start_at_timestamp(client, reference, broker, topic):
    base = now_ms() - 60_000
    reference.produce(broker.bootstrap, topic, _timed(base))
    got = client.consume(broker.bootstrap, topic, 5, start=AtTimestamp(base + 4500))  # between records 4 and 5
    assert [r.offset for r in got] == [5, 6, 7, 8, 9]
    assert [r.timestamp for r in got] == [base + 1000 * i for i in range(5, 10)]


def test_start_at_offset(client, reference, broker, topic):
    reference.produce(broker.bootstrap, topic, _timed(now_ms() - 60_000))
    assert [r.value for r in client.consume(broker.bootstrap, topic, 3, start=AtOffset(7))] == [b"v7", b"v8", b"v9"]


def test_start_at_latest(client, reference, broker, topic):
    """A consumer starting at the latest offset sees only records produced after it positioned itself. When that
    happens is the client's business, so new records are produced until the consumer reports one; it must never
    report one of the old ones."""
    reference.produce(broker.bootstrap, topic, numbered(10, "old"))
    first = first_new_record(reference, broker, topic,
                             lambda: client.consume(broker.bootstrap, topic, 1, start=LATEST,
                                                    timeout_s=POSITIONING_BOUND_S))
    assert first.value.startswith(b"new-") and first.offset >= 10, f"got an old record: {first.short()}"


def test_long_poll(client, reference, broker, topic):
    """A consumer blocked on an empty topic gets a record produced later as soon as it is appended, not when its
    fetch wait (20 s here) runs out; while it waits, the broker holds its fetch instead of answering it empty."""
    assert reference.partitions_for(broker.bootstrap, topic) == {0}  # the topic exists, empty
    outcome = {}
    consumer = threading.Thread(target=call_into, args=(outcome, client.consume, broker.bootstrap, topic, 1),
                                kwargs={"start": EARLIEST, "timeout_s": 45, "fetch_wait_ms": 20_000}, daemon=True)
    cpu_before = broker.cpu_seconds()
    consumer.start()
    consumer.join(timeout=3.0)  # part of the check: with nothing to read, the consumer must still be waiting
    assert consumer.is_alive(), f"the consumer returned from an empty topic: {outcome}"
    # A held fetch costs the broker nothing (measured: <= 0.01 s); fetches answered at once make every client here
    # re-fetch in a loop (0.4-0.5 s of broker CPU in these 3 s with a 1 ms wait).
    busy = broker.cpu_seconds() - cpu_before
    assert busy < 0.2, f"the broker used {busy:.2f} s of CPU in 3 s while the consumer waited on an empty topic"
    reference.produce(broker.bootstrap, topic, [Record(b"k", b"wake up")])
    appended = time.monotonic()
    consumer.join(timeout=40)
    if "error" in outcome:
        raise outcome["error"]
    assert [r.value for r in outcome["result"]] == [b"wake up"]
    latency = outcome["finished"] - appended
    assert latency < 5.0, f"the record arrived {latency:.1f} s after it was appended: the fetch was not woken"


def test_twenty_consumers(client, reference, broker, topic):
    sent = numbered(200, "shared")
    assert reference.partitions_for(broker.bootstrap, topic) == {0}  # kcat -C gives up on an unknown topic
    results = client.consume_concurrently(
        broker.bootstrap, topic, 20, len(sent), started=lambda: reference.produce(broker.bootstrap, topic, sent))
    assert len(results) == 20
    for got in results:
        assert_same(sent, got)


def test_list_offsets(client, reference, broker, topic):
    base = now_ms() - 60_000
    reference.produce(broker.bootstrap, topic, _timed(base))
    assert client.list_offsets(broker.bootstrap, topic, 0, base + 3000) == (0, 10, 3)
    assert client.list_offsets(broker.bootstrap, topic, 0, base + 3001)[2] == 4
    # After the newest record Kafka answers offset -1; kafkajs' admin client turns that into the latest offset.
    expected = 10 if client.name == "kafkajs" else None
    assert client.list_offsets(broker.bootstrap, topic, 0, base + 60_000)[2] == expected
