"""Consumer-group benchmark: how fast a group of consumers forms, and how fast one consumer commits offsets.

    python bench/group_bench.py                 # both sections, compatbroker and librdkafka's mock cluster
    python bench/group_bench.py --no-mock       # compatbroker only
    python bench/group_bench.py --consumers 10 --passes 5 --commit-seconds 3

confluent-kafka (librdkafka) is the client; each broker runs in a process of its own (bench/brokers.py), the
consumers all run here, one thread each.

1. join: N consumers subscribe at once to a topic of N partitions that already holds records, in a group of their
   own. The clock runs from the creation of the first consumer until the group has settled: every partition owned
   by exactly one consumer and every consumer handed a record since its latest assignment. Median of several
   passes, each with a new group; "rounds" is the most assignments one consumer went through (one per rebalance it
   took part in). Target: <= 1 s for 10 consumers, with group.initial.rebalance.delay.ms=0 (compatbroker's
   default; Kafka's is 3000) and a heartbeat interval of 100 ms. A member of a Stable group learns that a
   rebalance started only from its next heartbeat, with Kafka too, so with librdkafka's default interval (3 s) the
   first consumer to join holds the others for up to 3 s whatever the broker: that figure is printed as well.
   librdkafka also waits about 2 s before rejoining after some SyncGroup errors, which makes a pass now and then
   take 2 s; the median smooths that out.
2. commit: one consumer owning every partition commits synchronously in a loop (commit(asynchronous=False): the
   next commit leaves only when the broker answered the previous one), first one partition per commit, then all
   N. Each commit is appended to __consumer_offsets before it is answered. Target: >= 1000 commits/s (the issue
   asks for the figure, not a value; this is ours: a consumer committing after every small batch should not be
   limited by the broker).

The mock is printed beside compatbroker as a reference, not as a target: it keeps offsets in memory and runs its
own rebalance timers.
"""
from __future__ import annotations

import argparse
import dataclasses
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
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
except ImportError:
    raise SystemExit("the group benchmark drives confluent-kafka: /tmp/venv/bin/pip install confluent-kafka")
from brokers import BrokerError, BrokerProcess, CompatBroker, MockBroker  # noqa: E402

JOIN_TARGET_S = 1.0
COMMIT_TARGET_PER_S = 1000.0
RECORDS_PER_PARTITION = 10
TIMEOUT_S = 60.0

# Kafka's defaults but for the ones below; log_level 3 keeps librdkafka quiet unless something fails.
CONSUMER_CONFIG = {"auto.offset.reset": "earliest", "enable.auto.commit": False, "enable.auto.offset.store": False,
                   "broker.address.family": "v4", "log_level": 3}


# --- 1. join -------------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class JoinRun:
    seconds: float  # until the group settled
    rounds: int  # most assignments one consumer received


class Joiner:
    """One consumer of a join pass, polled by a thread of its own; the callbacks run in that thread."""

    def __init__(self, bootstrap: str, topic: str, group: str, index: int, start: float, overrides: dict):
        self.topic = topic
        self.start = start
        self.assignment: frozenset[int] = frozenset()
        self.assignments = 0
        self.fed_at: float | None = None  # seconds from start to the first record since the latest assignment
        self.error: BaseException | None = None
        self.config = CONSUMER_CONFIG | overrides | {"bootstrap.servers": bootstrap, "group.id": group,
                                                     "client.id": f"bench-join-{index}"}

    def on_assign(self, consumer, partitions) -> None:
        self.assignment = frozenset(tp.partition for tp in partitions)
        self.assignments += 1
        self.fed_at = None

    def on_revoke(self, consumer, partitions) -> None:
        self.assignment = frozenset()
        self.fed_at = None

    def run(self, stop: threading.Event) -> None:
        try:
            consumer = Consumer(self.config)
            try:
                consumer.subscribe([self.topic], on_assign=self.on_assign, on_revoke=self.on_revoke)
                while not stop.is_set():  # polling on after the first record: later joiners rebalance the group
                    message = consumer.poll(0.02)
                    if message is None:
                        continue
                    if message.error():
                        raise KafkaException(message.error())
                    if self.fed_at is None and message.partition() in self.assignment:
                        self.fed_at = time.perf_counter() - self.start
            finally:
                consumer.close()  # LeaveGroup
        except BaseException as exc:  # noqa: BLE001 - reported by the pass
            self.error = exc


def settled(joiners: list[Joiner], partitions: int) -> bool:
    owned = [j.assignment for j in joiners]
    return (all(j.fed_at is not None for j in joiners) and sum(map(len, owned)) == partitions
            and frozenset().union(*owned) == frozenset(range(partitions)))


def join_pass(bootstrap: str, topic: str, consumers: int, overrides: dict) -> JoinRun:
    group = f"bench-join-{uuid.uuid4().hex[:8]}"
    stop = threading.Event()
    start = time.perf_counter()
    joiners = [Joiner(bootstrap, topic, group, i, start, overrides) for i in range(consumers)]
    threads = [threading.Thread(target=j.run, args=(stop,), daemon=True) for j in joiners]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while not settled(joiners, consumers):  # a cheap check; the figure comes from the consumers' own clocks
            failed = [j.error for j in joiners if j.error is not None]
            if failed:
                raise BrokerError(f"a consumer failed: {failed[0]!r}")
            if time.monotonic() > deadline:
                raise BrokerError(f"the group did not settle within {TIMEOUT_S} s: "
                                  f"{[sorted(j.assignment) for j in joiners]}")
            stop.wait(0.005)
        return JoinRun(max(j.fed_at for j in joiners), max(j.assignments for j in joiners))
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)


# --- 2. commit ------------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class CommitRun:
    commits: int
    seconds: float
    broker_cpu: float  # broker CPU seconds per wall second

    @property
    def per_s(self) -> float:
        return self.commits / self.seconds


def owning_consumer(bootstrap: str, topic: str, partitions: int) -> Consumer:
    """A consumer of a new group, once it owns every partition of `topic`."""
    consumer = Consumer(CONSUMER_CONFIG | {"bootstrap.servers": bootstrap, "group.id": f"bench-commit-"
                                           f"{uuid.uuid4().hex[:8]}", "client.id": "bench-commit"})
    consumer.subscribe([topic])
    deadline = time.monotonic() + TIMEOUT_S
    while len(consumer.assignment()) < partitions:
        if time.monotonic() > deadline:
            consumer.close()
            raise BrokerError(f"the committing consumer got no full assignment within {TIMEOUT_S} s")
        consumer.poll(0.05)
    return consumer


def commit_run(broker: BrokerProcess, consumer: Consumer, topic: str, partitions: list[int],
               seconds: float) -> CommitRun:
    commit = consumer.commit
    count = 0
    cpu_before = broker.cpu_seconds()
    start = time.perf_counter()
    end = start + seconds
    while time.perf_counter() < end:
        offset = count % (RECORDS_PER_PARTITION + 1)  # offsets the partitions hold
        done = commit(offsets=[TopicPartition(topic, p, offset) for p in partitions], asynchronous=False)
        failed = [tp.error for tp in done if tp.error]
        if failed:
            raise BrokerError(f"commit failed: {failed[0]}")
        count += 1
    took = time.perf_counter() - start
    return CommitRun(count, took, (broker.cpu_seconds() - cpu_before) / took)


# --- running it -----------------------------------------------------------------------------------------------------

def fill(bootstrap: str, topic: str, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "linger.ms": 5,
                         "log_level": 3})
    for p in range(partitions):
        for i in range(RECORDS_PER_PARTITION):
            producer.produce(topic, value=b"record %d of partition %d" % (i, p), partition=p)
    if producer.flush(30):
        raise BrokerError("the topic could not be filled")


# The join with a short heartbeat interval (the broker's figure) and with the client's defaults (see section 1).
JOIN_SETTINGS = (("join", "heartbeat.interval.ms=100", {"heartbeat.interval.ms": 100}),
                 ("join, client defaults", "librdkafka's defaults (heartbeat.interval.ms=3000)", {}))


def measure(broker: BrokerProcess, args) -> dict:
    topic = f"bench-group-{uuid.uuid4().hex[:6]}"
    broker.ensure_topic(topic, args.consumers)
    fill(broker.bootstrap, topic, args.consumers)
    figures = {}
    for key, label, overrides in JOIN_SETTINGS:
        runs = [join_pass(broker.bootstrap, topic, args.consumers, overrides) for _ in range(args.passes)]
        figures[key] = statistics.median(r.seconds for r in runs)
        print("  %-14s join, %s: median %.3f s   passes %s s, rounds %s" % (
            broker.name, label, figures[key], " ".join("%.3f" % r.seconds for r in runs),
            [r.rounds for r in runs]), flush=True)
    consumer = owning_consumer(broker.bootstrap, topic, args.consumers)
    try:
        for key, partitions in (("commit 1 partition", [0]),
                                (f"commit {args.consumers} partitions", list(range(args.consumers)))):
            run = commit_run(broker, consumer, topic, partitions, args.commit_seconds)
            figures[key] = run.per_s
            print("  %-14s %s: %8.0f commits/s   broker cpu %3.0f%%" % (broker.name, key, run.per_s,
                                                                        100 * run.broker_cpu), flush=True)
    finally:
        consumer.close()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--consumers", type=int, default=10)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--commit-seconds", type=float, default=3.0)
    parser.add_argument("--no-mock", action="store_true", help="measure compatbroker only")
    parser.add_argument("--dir", type=Path, default=None, help="where the data directory goes")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="group-bench-", dir=args.dir))
    results = {}
    try:
        brokers = [lambda: CompatBroker.start(workdir / "data", workdir / "compatbroker.log",
                                              partitions=args.consumers,
                                              settings={"group.initial.rebalance.delay.ms": 0})]
        if not args.no_mock:
            brokers.append(lambda: MockBroker.start(workdir / "mock.log"))
        print(f"== {args.consumers} consumers join a group of their own ({args.passes} passes); one consumer "
              f"commits synchronously ({args.commit_seconds:.0f} s per figure)", flush=True)
        for start in brokers:
            broker = start()
            try:
                results[broker.name] = measure(broker, args)
            except (BrokerError, KafkaException) as exc:
                print(f"  {broker.name}: failed: {exc}\n{broker.log_tail()}", flush=True)
            finally:
                broker.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return report(results, args.consumers)


def report(results: dict, consumers: int) -> int:
    """The figures beside their targets; returns 1 when one was missed or not measured."""
    print("\n== targets (compatbroker; the mock beside it for reference)")
    ours, mock = results.get("compatbroker", {}), results.get("mock", {})
    rows = [(f"{consumers} consumers join and receive", "join", JOIN_TARGET_S, "s"),
            ("the same, client defaults", "join, client defaults", None, "s")]
    rows += [(key, key, COMMIT_TARGET_PER_S, "commits/s") for key in ours if key.startswith("commit")]
    missed = 0
    for name, key, target, unit in rows:
        shown = [_figure(figures.get(key), unit) for figures in (ours, mock)]
        if target is None:
            verdict, wanted = "(information)", ""
        else:
            value = ours.get(key)
            ok = value is not None and (value <= target if unit == "s" else value >= target)
            verdict = "ok" if ok else ("NOT MEASURED" if value is None else "MISSED")
            missed += not ok
            wanted = f"<= {target:.1f} s" if unit == "s" else f">= {target:.0f}/s"
        print(f"  {name:38s} {shown[0]:>16s}   target {wanted:10s} {verdict:13s} mock {shown[1]}")
    return 1 if missed else 0


def _figure(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    return f"{value:.3f} s" if unit == "s" else f"{value:.0f} {unit}"


if __name__ == "__main__":
    sys.exit(main())
