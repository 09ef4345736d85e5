"""Group protocol benchmark: 10 consumers joining a group with KIP-848's protocol against the classic one.

    python bench/group_protocol_bench.py                  # the three settings below, 5 passes per protocol each
    python bench/group_protocol_bench.py --consumers 10 --passes 3 --setting defaults

confluent-kafka (librdkafka) is the client: N consumers subscribe at once to a topic of N partitions that already
holds records, each a group of its own per pass, with `group.protocol=consumer` (KIP-848: the broker assigns with its
server assignor, members heartbeat with ConsumerGroupHeartbeat) or `group.protocol=classic` (JoinGroup/SyncGroup,
the client's eager range assignor). One `python -m compatbroker serve` per setting (bench/brokers.py) serves both
protocols; passes alternate between the protocols so that both see the same machine load, and the median of each
is reported. The clock runs from the creation of the first consumer until the group has settled: every partition
owned by exactly one consumer (read from each consumer's own assignment(), which covers the incremental
assignments of KIP-848), and every consumer handed a record from a partition it owns. Target (issue 18): the
consumer protocol takes <= 0.5x the classic protocol's time.

Heartbeat intervals decide both figures: a member learns about a changed assignment only from its next heartbeat.
Under KIP-848 the broker sets the interval (group.consumer.heartbeat.interval.ms: compatbroker's default 500 ms,
Kafka's 5000 ms); under the classic protocol the client does (heartbeat.interval.ms, librdkafka's default 3000 ms).
When all consumers join at once, the first ones own every partition; each later member gets its share only from the
first heartbeat it sends after the owners released it, so the consumer protocol needs about one heartbeat interval,
while a classic group whose members all send JoinGroup within the same moment can settle in one rebalance. Four
settings, each with its own broker:
  defaults   compatbroker's broker defaults and librdkafka's client defaults: what an application gets out of the
             box. The target row.
  500ms      both protocols heartbeat every 500 ms (the classic clients' heartbeat.interval.ms=500 too), to compare
             the protocols themselves rather than their default intervals. For information.
  kafka5000  the broker's consumer heartbeat interval at Kafka's 5000 ms, as on a Kafka broker. For information.
  delay3000  as defaults, but with Kafka's group.initial.rebalance.delay.ms=3000 (compatbroker's default is 0):
             a new classic group then waits 3 s for more members before its first rebalance, as on a Kafka
             broker. For information.
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
    from confluent_kafka import Consumer, KafkaException, Producer
except ImportError:
    raise SystemExit("the group protocol benchmark drives confluent-kafka: pip install confluent-kafka")
from brokers import BrokerError, CompatBroker  # noqa: E402

RATIO_TARGET = 0.5
RECORDS_PER_PARTITION = 10
TIMEOUT_S = 90.0
POLL_S = 0.02

# Nothing committed, so each new owner of a partition reads it from the start; log_level 3 keeps librdkafka quiet.
CONSUMER_CONFIG = {"auto.offset.reset": "earliest", "enable.auto.commit": False, "enable.auto.offset.store": False,
                   "broker.address.family": "v4", "log_level": 3}
PROTOCOLS = ("consumer", "classic")


@dataclasses.dataclass(frozen=True)
class Setting:
    name: str
    label: str
    broker: dict       # broker configs (--set)
    classic: dict      # client configs of the classic consumers (consumer-protocol clients take none of these)
    is_target: bool


SETTINGS = (
    Setting("defaults", "compatbroker's and librdkafka's defaults", {}, {}, True),
    Setting("500ms", "500 ms heartbeats on both protocols", {}, {"heartbeat.interval.ms": 500}, False),
    Setting("kafka5000", "Kafka's 5000 ms consumer heartbeat interval",
            {"group.consumer.heartbeat.interval.ms": 5000}, {}, False),
    Setting("delay3000", "defaults + group.initial.rebalance.delay.ms=3000",
            {"group.initial.rebalance.delay.ms": 3000}, {}, False),
)


class Joiner:
    """One consumer of a pass, polled by a thread of its own (librdkafka consumers are used from one thread)."""

    def __init__(self, config: dict, start: float):
        self.config = config
        self.start = start
        self.assignment: frozenset[int] = frozenset()
        self.fed: set[int] = set()  # owned partitions that handed a record since this consumer got them
        self.fed_at: float | None = None  # seconds from start until `fed` last became non-empty
        self.error: BaseException | None = None

    def run(self, topic: str, stop: threading.Event) -> None:
        try:
            consumer = Consumer(self.config)
            try:
                consumer.subscribe([topic])
                while not stop.is_set():  # polling on after the first record: later joiners change the group
                    message = consumer.poll(POLL_S)
                    self._track(frozenset(tp.partition for tp in consumer.assignment()))
                    if message is None:
                        continue
                    if message.error():
                        raise KafkaException(message.error())
                    if message.partition() in self.assignment and message.partition() not in self.fed:
                        if not self.fed:
                            self.fed_at = time.perf_counter() - self.start
                        self.fed.add(message.partition())
            finally:
                consumer.close()  # leaves the group
        except BaseException as exc:  # noqa: BLE001 - reported by the pass
            self.error = exc

    def _track(self, assignment: frozenset[int]) -> None:
        if assignment != self.assignment:
            self.fed &= assignment  # a partition given up and handed back must deliver again
            if not self.fed:
                self.fed_at = None
            self.assignment = assignment


def settled(joiners: list[Joiner], partitions: int) -> bool:
    owned = [j.assignment for j in joiners]
    return (all(j.fed for j in joiners) and sum(map(len, owned)) == partitions
            and frozenset().union(*owned) == frozenset(range(partitions)))


def join_pass(bootstrap: str, topic: str, consumers: int, protocol: str, classic: dict) -> float:
    """Seconds until `consumers` new consumers of one group settled (see the module docstring)."""
    group = f"bench-{protocol}-{uuid.uuid4().hex[:8]}"
    overrides = {"group.protocol": protocol} | (classic if protocol == "classic" else {})
    stop = threading.Event()
    start = time.perf_counter()
    joiners = [Joiner(CONSUMER_CONFIG | overrides | {"bootstrap.servers": bootstrap, "group.id": group,
                                                     "client.id": f"bench-{protocol}-{i}"}, start)
               for i in range(consumers)]
    threads = [threading.Thread(target=j.run, args=(topic, stop), daemon=True) for j in joiners]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while not settled(joiners, consumers):  # a cheap check; the figure comes from the consumers' own clocks
            failed = [j.error for j in joiners if j.error is not None]
            if failed:
                raise BrokerError(f"a {protocol} consumer failed: {failed[0]!r}")
            if time.monotonic() > deadline:
                raise BrokerError(f"the {protocol} group did not settle within {TIMEOUT_S} s: "
                                  f"{[sorted(j.assignment) for j in joiners]}")
            stop.wait(0.005)
        return max(j.fed_at for j in joiners)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)


def fill(bootstrap: str, topic: str, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "linger.ms": 5,
                         "log_level": 3})
    for p in range(partitions):
        for i in range(RECORDS_PER_PARTITION):
            producer.produce(topic, value=b"record %d of partition %d" % (i, p), partition=p)
    if producer.flush(30):
        raise BrokerError("the topic could not be filled")


def measure(setting: Setting, workdir: Path, args) -> dict[str, float]:
    """Median seconds per protocol under one setting, with a broker of its own."""
    broker = CompatBroker.start(workdir / f"data-{setting.name}", workdir / f"compatbroker-{setting.name}.log",
                                partitions=args.consumers, settings=setting.broker)
    try:
        topic = f"bench-join-{uuid.uuid4().hex[:6]}"
        fill(broker.bootstrap, topic, args.consumers)
        runs: dict[str, list[float]] = {protocol: [] for protocol in PROTOCOLS}
        for i in range(args.passes):
            order = PROTOCOLS if i % 2 == 0 else PROTOCOLS[::-1]
            for protocol in order:
                runs[protocol].append(join_pass(broker.bootstrap, topic, args.consumers, protocol, setting.classic))
        medians = {protocol: statistics.median(times) for protocol, times in runs.items()}
        for protocol in PROTOCOLS:
            print("  %-8s %-9s median %6.3f s   passes %s s" % (setting.name, protocol, medians[protocol],
                                                               " ".join("%.3f" % t for t in runs[protocol])),
                  flush=True)
        return medians
    except (BrokerError, KafkaException) as exc:
        print(f"  {setting.name}: failed: {exc}\n{broker.log_tail()}", flush=True)
        return {}
    finally:
        broker.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--consumers", type=int, default=10)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--setting", choices=[s.name for s in SETTINGS], action="append",
                        help="measure only this setting (repeatable; default: all)")
    parser.add_argument("--dir", type=Path, default=None, help="where the data directories go")
    args = parser.parse_args()
    settings = [s for s in SETTINGS if not args.setting or s.name in args.setting]

    workdir = Path(tempfile.mkdtemp(prefix="group-protocol-bench-", dir=args.dir))
    results = {}
    try:
        print(f"== {args.consumers} consumers join a group of their own and each receive a record, "
              f"group.protocol=consumer vs classic ({args.passes} passes each, alternating)", flush=True)
        for setting in settings:
            results[setting.name] = measure(setting, workdir, args)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return report(settings, results, args.consumers)


def report(settings, results: dict, consumers: int) -> int:
    """Both times and their ratio per setting; returns 1 when the target was missed or not measured."""
    print(f"\n== target: consumer protocol <= {RATIO_TARGET}x classic ({consumers} consumers)")
    missed = 0
    for setting in settings:
        figures = results.get(setting.name, {})
        ours, classic = figures.get("consumer"), figures.get("classic")
        ratio = ours / classic if ours is not None and classic else None
        if setting.is_target:
            verdict = ("NOT MEASURED" if ratio is None else "ok" if ratio <= RATIO_TARGET else "MISSED")
            missed += verdict != "ok"
        else:
            verdict = "(information)"
        print(f"  {setting.label:48s} consumer {_seconds(ours):>9s}  classic {_seconds(classic):>9s}  "
              f"ratio {'n/a' if ratio is None else f'{ratio:.2f}x':>6s}  {verdict}")
    return 1 if missed else 0


def _seconds(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f} s"


if __name__ == "__main__":
    sys.exit(main())
