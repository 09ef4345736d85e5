"""Transactions benchmark: what transactions cost against the same broker without them, measured in the same run.

    python bench/transactions_bench.py                # default run, about a minute
    python bench/transactions_bench.py --records 400000 --passes 5
    python bench/transactions_bench.py --dir /data    # where the data dir goes (default: the system temp dir)

confluent-kafka (librdkafka) drives every figure against one `python -m compatbroker serve` (bench/brokers.py);
figures count message values (MB is 10^6 bytes of payload).

1. produce: 1 KiB records round-robin over 3 partitions, acks=all. A transactional producer commits every 100 ms
   (begin, produce for 100 ms, commit_transaction, which flushes) against an idempotent non-transactional producer
   with the same configuration; passes alternate, median of each. Target: transactional >= 0.85x idempotent.
2. consume: one topic written in transactions of 1,000 1 KiB records, every 10th aborted, read from the beginning to
   its end offsets with isolation.level read_committed (the aborted records are fetched and dropped by the client,
   from the broker's aborted-transaction list) and read_uncommitted; passes alternate, median of each. The figure
   is the time to read the whole log, so both count the same bytes. Target: read_committed >= 0.8x
   read_uncommitted.
3. sendfile: strace attaches to the broker while one read_committed Fetch (v11, isolation_level 1) reads a
   partition of that topic; every record byte of the response must have left the segment file through sendfile(2),
   the check of tests/compat/test_zero_copy.py. Needs strace (and ptrace permission); "not measured" without.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.compat's strace reader and raw client

try:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
except ImportError:
    raise SystemExit("the transactions benchmark drives confluent-kafka: pip install confluent-kafka")
from brokers import BrokerError, CompatBroker  # noqa: E402
from loadgen import CONSUMER_CONFIG, LoadError, make_producer  # noqa: E402

PARTITIONS = [0, 1, 2]
SIZE = 1024
COMMIT_INTERVAL_S = 0.1
TXN_RECORDS = 1000  # records of one transaction in the consume topic
ABORT_EVERY = 10  # every 10th transaction is aborted
PRODUCE_TARGET = 0.85
CONSUME_TARGET = 0.8
TIMEOUT_S = 180.0


# --- 1. produce ----------------------------------------------------------------------------------------------------

def make(bootstrap: str, transactional_id: str | None) -> tuple[Producer, list]:
    """loadgen's producer, idempotent, and transactional when given an id."""
    overrides = {"enable.idempotence": True}
    if transactional_id is not None:
        overrides["transactional.id"] = transactional_id
    return make_producer(bootstrap, **overrides)


def check_delivered(errors: list) -> None:
    if errors:
        raise LoadError("%d delivery errors, first: %s" % (len(errors), errors[0]))


def produce_pass(bootstrap: str, topic: str, count: int, transactional_id: str | None) -> float:
    """Seconds to have `count` records acknowledged (and, when transactional, committed)."""
    producer, errors = make(bootstrap, transactional_id)
    producer.list_topics(topic, timeout=10)  # metadata (and the topic) before the clock starts
    transactional = transactional_id is not None
    if transactional:
        producer.init_transactions(30)
    payload = os.urandom(SIZE)
    send, poll = producer.produce, producer.poll
    start = time.perf_counter()
    deadline = time.monotonic() + TIMEOUT_S
    if transactional:
        producer.begin_transaction()
    next_commit = time.perf_counter() + COMMIT_INTERVAL_S
    for i in range(count):
        while True:
            try:
                send(topic, payload, partition=PARTITIONS[i % len(PARTITIONS)])
                break
            except BufferError:
                poll(0.005)
                if time.monotonic() > deadline:
                    raise LoadError("produce timed out with the client queue full")
        if transactional and time.perf_counter() >= next_commit:
            producer.commit_transaction(TIMEOUT_S)
            producer.begin_transaction()
            next_commit = time.perf_counter() + COMMIT_INTERVAL_S
    if transactional:
        producer.commit_transaction(TIMEOUT_S)  # flushes
    elif producer.flush(TIMEOUT_S):
        raise LoadError("records left unacknowledged")
    seconds = time.perf_counter() - start
    check_delivered(errors)
    return seconds


def bench_produce(broker: CompatBroker, records: int, passes: int) -> float | None:
    print("\n== produce: %d x %d B over %d partitions, acks=all; transactional commits every %d ms; median of %d"
          % (records, SIZE, len(PARTITIONS), COMMIT_INTERVAL_S * 1000, passes), flush=True)
    times: dict[str, list[float]] = {"idempotent": [], "transactional": []}
    for i in range(passes):  # alternating, so that noise hits both alike
        for kind in times:
            topic = "bench-txn-produce-%s-%d" % (kind, i)
            seconds = produce_pass(broker.bootstrap, topic, records,
                                   "bench-txn-%d" % i if kind == "transactional" else None)
            times[kind].append(seconds)
            broker.drop_topic(topic)
    rates = {kind: records / statistics.median(found) for kind, found in times.items()}
    for kind, rate in rates.items():
        print("  %-14s %10s msg/s %8.1f MB/s" % (kind, "{:,.0f}".format(rate), rate * SIZE / 1e6), flush=True)
    return rates["transactional"] / rates["idempotent"]


# --- 2. consume ----------------------------------------------------------------------------------------------------

def fill_transactions(bootstrap: str, topic: str, transactions: int) -> int:
    """`transactions` transactions of TXN_RECORDS records, every ABORT_EVERY-th aborted; returns the committed count."""
    producer, errors = make(bootstrap, "bench-txn-fill")
    producer.init_transactions(30)
    payload = os.urandom(SIZE)
    committed = 0
    for t in range(transactions):
        producer.begin_transaction()
        for i in range(TXN_RECORDS):
            while True:
                try:
                    producer.produce(topic, payload, partition=PARTITIONS[i % len(PARTITIONS)])
                    break
                except BufferError:
                    producer.poll(0.005)
        if t % ABORT_EVERY == ABORT_EVERY - 1:
            producer.flush(TIMEOUT_S)  # the aborted records are in the log, as an application's would be
            producer.abort_transaction(TIMEOUT_S)
        else:
            producer.commit_transaction(TIMEOUT_S)
            committed += TXN_RECORDS
    check_delivered(errors)
    return committed


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer(dict(CONSUMER_CONFIG, **{"bootstrap.servers": bootstrap}))
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in PARTITIONS}
    finally:
        consumer.close()


def consume_pass(bootstrap: str, topic: str, isolation: str, expected: int, ends: dict[int, int]) -> float:
    """Seconds from assign() until `expected` records arrived and every position reached its end offset."""
    consumer = Consumer(dict(CONSUMER_CONFIG, **{"bootstrap.servers": bootstrap, "isolation.level": isolation}))
    try:
        consumer.list_topics(topic, timeout=10)
        got = 0
        deadline = time.monotonic() + TIMEOUT_S
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in PARTITIONS])
        while True:
            for message in consumer.consume(10_000, 0.2):
                if message.error() is not None:
                    raise LoadError("consume: %s" % message.error())
                got += 1
            if got >= expected:
                positions = consumer.position([TopicPartition(topic, p) for p in PARTITIONS])
                if all(tp.offset >= ends[tp.partition] for tp in positions):
                    break
            if time.monotonic() > deadline:
                raise LoadError("consume %s: %d of %d records within %.0f s" % (isolation, got, expected, TIMEOUT_S))
        seconds = time.perf_counter() - start
    finally:
        consumer.close()
    if got != expected:
        raise LoadError("consume %s: %d records, expected %d" % (isolation, got, expected))
    return seconds


def bench_consume(broker: CompatBroker, topic: str, transactions: int, passes: int) -> float | None:
    print("\n== consume: %d transactions of %d x %d B, every %dth aborted; whole log, median of %d"
          % (transactions, TXN_RECORDS, SIZE, ABORT_EVERY, passes), flush=True)
    committed = fill_transactions(broker.bootstrap, topic, transactions)
    ends = end_offsets(broker.bootstrap, topic)
    expected = {"read_committed": committed, "read_uncommitted": transactions * TXN_RECORDS}
    times: dict[str, list[float]] = {kind: [] for kind in expected}
    for _ in range(passes):
        for kind in times:
            times[kind].append(consume_pass(broker.bootstrap, topic, kind, expected[kind], ends))
    for kind, found in times.items():
        seconds = statistics.median(found)
        print("  %-17s %8.2f s for the log (%s records delivered, %.1f MB/s of log)"
              % (kind, seconds, "{:,}".format(expected[kind]), transactions * TXN_RECORDS * SIZE / seconds / 1e6),
              flush=True)
    return statistics.median(times["read_uncommitted"]) / statistics.median(times["read_committed"])


# --- 3. sendfile ---------------------------------------------------------------------------------------------------

def check_sendfile(broker: CompatBroker, data_dir: Path, topic: str, workdir: Path) -> bool | None:
    """One read_committed Fetch of partition 0 under strace: True when every record byte left through sendfile."""
    from compatbroker.protocol.messages.fetch import FetchRequest
    from tests.compat.raw_client import RawClient
    from tests.compat.test_zero_copy import _traced, summarize
    strace = shutil.which("strace")
    print("\n== sendfile: one read_committed Fetch (v11) of %s-0 under strace" % topic, flush=True)
    if strace is None:
        print("  strace is not installed: not measured")
        return None
    host, port = broker.bootstrap.rsplit(":", 1)
    partition = FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=256 << 20)
    request = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=256 << 20, isolation_level=1, session_epoch=-1,
                           topics=[FetchRequest.FetchTopic(topic=topic, partitions=[partition])])
    trace = workdir / "strace.out"
    try:
        with RawClient(types.SimpleNamespace(host=host, port=int(port)), "bench-sendfile") as client:
            with _traced(strace, broker.pid, trace):
                response = client.call(request, 11)
    except (AssertionError, subprocess.SubprocessError) as exc:
        print("  not measured: %s" % exc)
        return None
    data = response.responses[0].partitions[0]
    stats = summarize(trace.read_text(), os.path.realpath(data_dir / ("%s-0" % topic)))
    print("  %d record bytes answered (LSO %d, %d aborted transactions listed), %d through sendfile, "
          "%d read from the segment file" % (len(data.records or b""), data.last_stable_offset,
                                             len(data.aborted_transactions or []), stats.sendfile_bytes,
                                             stats.segment_read_bytes), flush=True)
    return data.error_code == 0 and stats.sendfile_bytes == len(data.records or b"") > 0


# --- main ----------------------------------------------------------------------------------------------------------

def verdict(name: str, ratio: float | None, target: float) -> bool:
    ok = ratio is not None and ratio >= target
    print("  %-40s %10s   target >= %.2fx %s" % (name, "n/a" if ratio is None else "%.3fx" % ratio, target,
                                                  "ok" if ok else "MISSED" if ratio is not None else "NOT MEASURED"))
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=300_000, help="records per produce pass")
    parser.add_argument("--transactions", type=int, default=300, help="transactions in the consume topic")
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None, help="where the data directory goes")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="txn-bench-", dir=args.dir))
    results: dict[str, float | None] = {}
    sendfile_ok = None
    try:
        broker = CompatBroker.start(workdir / "data", workdir / "compatbroker.log", partitions=len(PARTITIONS))
        try:
            results["produce"] = bench_produce(broker, args.records, args.passes)
            topic = "bench-txn-consume"
            results["consume"] = bench_consume(broker, topic, args.transactions, args.passes)
            sendfile_ok = check_sendfile(broker, workdir / "data", topic, workdir)
        except (LoadError, BrokerError, KafkaException) as exc:
            print("  failed: %s\n%s" % (exc, broker.log_tail()), flush=True)
        finally:
            broker.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print("\n== targets")
    ok = verdict("transactional / idempotent produce", results.get("produce"), PRODUCE_TARGET)
    ok &= verdict("read_committed / read_uncommitted consume", results.get("consume"), CONSUME_TARGET)
    print("  %-40s %10s" % ("record bytes through sendfile", {True: "yes", False: "NO", None: "not measured"}
                            [sendfile_ok]))
    return 0 if ok and sendfile_ok else 1


if __name__ == "__main__":
    sys.exit(main())
