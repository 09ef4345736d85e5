"""Share group benchmark (KIP-932): 100,000 records delivered to 3 share consumers, each record acknowledged.

    python bench/share_bench.py                       # 100,000 records, 3 consumers, one partition, 3 passes
    python bench/share_bench.py --records 20000 --consumers 3 --partitions 3 --commit sync --passes 5

confluent-kafka's ShareConsumer (librdkafka) is the client, against one `python -m compatbroker serve`
(bench/brokers.py). The topic (one partition by default: the queue case, where the consumers share every partition)
is filled first with 100-byte records in batches of 100 records (--batch-records; about what the Java producer's
default batch.size of 16 KiB holds, where librdkafka's defaults would make batches of 10,000: a share fetch
acquires whole batches, so huge batches would hand most of a partition to whichever consumer fetches first); the
share group is set to share.auto.offset.reset=earliest (a group config,
IncrementalAlterConfigs on the GROUP resource) so that it starts at the first record. Then the consumers start
together, one thread each, with share.acknowledgement.mode=explicit: every record of a poll is acknowledged on its
own (acknowledge(record): ACCEPT), then the poll's acknowledgements are committed with commit_async() (or
commit_sync() with --commit sync). The clock runs from the creation of the first consumer until every record has
been received and each consumer has committed its last acknowledgements with commit_sync(). Each pass reads the
whole topic again with a share group of its own; printed per pass: the time, records/s, each consumer's share (a
consumer that fetches first may take most of a single partition: records go to whoever asks) and the records
delivered more than once (a redelivery is not an error: an acquisition lock that expires releases its records, but
with the default 30 s lock there should be none); then the median pass.

The issue asks for the figure; there is no target to meet.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

try:
    from confluent_kafka import KafkaException, Producer, ShareConsumer
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
except ImportError:
    raise SystemExit("the share benchmark drives confluent-kafka >= 2.16 (ShareConsumer): pip install confluent-kafka")
from brokers import BrokerError, CompatBroker  # noqa: E402

VALUE_SIZE = 100
TIMEOUT_S = 600.0
POLL_S = 0.5
CLIENT = {"broker.address.family": "v4", "log_level": 3}


class Reader:
    """One share consumer, used only by its own thread."""

    def __init__(self, bootstrap: str, group: str, index: int, commit: str):
        self.config = CLIENT | {"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"bench-share-{index}",
                                "share.acknowledgement.mode": "explicit"}
        self.commit = commit
        self.received = 0        # records handed to this consumer, redeliveries included
        self.redelivered = 0     # of which delivered before (delivery count > 1)
        self.error: BaseException | None = None

    def run(self, topic: str, done: threading.Event, seen, lock: threading.Lock) -> None:
        try:
            consumer = ShareConsumer(self.config)
            try:
                consumer.subscribe([topic])
                while not done.is_set():
                    self._poll_once(consumer, seen, lock)
                consumer.commit_sync()  # the last acknowledgements, before the clock stops
            finally:
                consumer.close()
        except BaseException as exc:  # noqa: BLE001 - reported by the run
            self.error = exc
            done.set()

    def _poll_once(self, consumer, seen, lock) -> None:
        messages = consumer.poll(POLL_S)
        if not messages:
            return
        for message in messages:
            if message.error():
                raise KafkaException(message.error())
            consumer.acknowledge(message)  # ACCEPT, one record at a time
            self.received += 1
            if message.delivery_count() > 1:
                self.redelivered += 1
        with lock:
            seen.update((m.partition(), m.offset()) for m in messages)
        if self.commit == "sync":
            consumer.commit_sync()
        else:
            consumer.commit_async()


def fill(bootstrap: str, topic: str, records: int, partitions: int, batch_records: int) -> None:
    producer = Producer(CLIENT | {"bootstrap.servers": bootstrap, "linger.ms": 20,
                                  "batch.num.messages": batch_records})
    value = b"x" * VALUE_SIZE
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=value, partition=i % partitions)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
    if producer.flush(120):
        raise BrokerError("the topic could not be filled")


def start_at_earliest(bootstrap: str, group: str) -> None:
    """share.auto.offset.reset=earliest for the group: a share group starts at the latest offset otherwise."""
    admin = AdminClient(CLIENT | {"bootstrap.servers": bootstrap})
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource], request_timeout=30).values():
        future.result()


def deliver(bootstrap: str, topic: str, args) -> dict:
    group = f"bench-share-{uuid.uuid4().hex[:8]}"
    start_at_earliest(bootstrap, group)
    readers = [Reader(bootstrap, group, i, args.commit) for i in range(args.consumers)]
    seen: set[tuple[int, int]] = set()
    lock = threading.Lock()
    done = threading.Event()
    start = time.perf_counter()
    threads = [threading.Thread(target=r.run, args=(topic, done, seen, lock), daemon=True) for r in readers]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + TIMEOUT_S
    while not done.is_set():
        with lock:
            count = len(seen)
        if count >= args.records:
            done.set()
        elif time.monotonic() > deadline:
            done.set()
            raise BrokerError(f"only {count} of {args.records} records arrived within {TIMEOUT_S} s")
        else:
            done.wait(0.01)
    for thread in threads:
        thread.join(timeout=60)
    took = time.perf_counter() - start
    failed = [r.error for r in readers if r.error is not None]
    if failed:
        raise BrokerError(f"a share consumer failed: {failed[0]!r}")
    return {"seconds": took, "records": len(seen), "received": [r.received for r in readers],
            "redelivered": sum(r.redelivered for r in readers)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--consumers", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--commit", choices=("async", "sync"), default="async",
                        help="commit each poll's acknowledgements with commit_async (default) or commit_sync")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--batch-records", type=int, default=100, help="records per produced batch")
    parser.add_argument("--dir", type=Path, default=None, help="where the data directory goes")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="share-bench-", dir=args.dir))
    broker = None
    try:
        broker = CompatBroker.start(workdir / "data", workdir / "compatbroker.log", partitions=args.partitions)
        topic = f"bench-share-{uuid.uuid4().hex[:6]}"
        print(f"== {args.records} records of {VALUE_SIZE} bytes on {args.partitions} partition(s), delivered to "
              f"{args.consumers} share consumers, each record acknowledged (explicit mode, commit_{args.commit})",
              flush=True)
        fill(broker.bootstrap, topic, args.records, args.partitions, args.batch_records)
        passes = []
        for i in range(args.passes):
            figures = deliver(broker.bootstrap, topic, args)
            passes.append(figures)
            print(f"  pass {i + 1}: {figures['records']} records in {figures['seconds']:.2f} s, "
                  f"{figures['records'] / figures['seconds']:,.0f} records/s; per consumer {figures['received']}, "
                  f"redelivered {figures['redelivered']}", flush=True)
    except (BrokerError, KafkaException) as exc:
        print(f"  failed: {exc}\n{broker.log_tail() if broker else ''}", flush=True)
        return 1
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    median = statistics.median(f["seconds"] for f in passes)
    print(f"\n== median of {len(passes)} passes: {args.records} records in {median:.2f} s, "
          f"{args.records / median:,.0f} records/s (per-record acknowledgement, commit_{args.commit})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
