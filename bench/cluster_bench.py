"""Cluster benchmark: a 3-node cluster in one process against the single broker, measured in the same run.

    python bench/cluster_bench.py                    # default run, about a minute
    python bench/cluster_bench.py --records 200000 --passes 5
    python bench/cluster_bench.py --dir /data        # where the data dirs go (default: the system temp dir)

confluent-kafka (librdkafka) drives both brokers, each a `python -m compatbroker serve` child process
(bench/brokers.py); figures count message values (MB is 10^6 bytes of payload).

1. produce: 1 KiB records round-robin over 3 partitions with acks=all, to a topic of replication factor 3 and
   min.insync.replicas 2 on `serve --nodes 3` (every record copied to two followers before it is acknowledged)
   and to the same topic with replication factor 1 on the single broker; passes alternate, median of each.
   Target: cluster >= 0.5x single.
2. start-up: spawn to the `listening` line of `serve --nodes 3` on an empty data directory, then its resident
   memory once idle. Targets: <= 500 ms and <= 80 MB.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

try:
    from confluent_kafka.admin import AdminClient, NewTopic
except ImportError:
    raise SystemExit("the cluster benchmark drives confluent-kafka: pip install confluent-kafka")
from brokers import CompatBroker  # noqa: E402
from loadgen import produce_run  # noqa: E402

PARTITIONS = [0, 1, 2]
SIZE = 1024
PRODUCE_TARGET = 0.5
STARTUP_TARGET_S = 0.5
RSS_TARGET_BYTES = 80 * 1024 * 1024
IDLE_SETTLE_S = 1.0  # after the listening line, before the idle RSS is read


def create_topic(bootstrap: str, topic: str, replication_factor: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    new = NewTopic(topic, len(PARTITIONS), replication_factor,
                   config={"min.insync.replicas": str(min(2, replication_factor))})
    for future in admin.create_topics([new], operation_timeout=30).values():
        future.result(30)


def line(label: str, figure: str, target: str, ok: bool | None) -> None:
    verdict = "" if ok is None else ("  ok" if ok else "  MISSED")
    print(f"  {label:<44} {figure:>16}   target {target}{verdict}", flush=True)


def bench_produce(work: Path, records: int, passes: int, pycache: Path) -> None:
    single = CompatBroker.start(work / "single", work / "single.log", partitions=len(PARTITIONS), pycache=pycache)
    cluster = CompatBroker.start(work / "cluster", work / "cluster.log", partitions=len(PARTITIONS),
                                 pycache=pycache, args=("--nodes", "3"))
    payload = b"x" * SIZE
    figures: dict[str, list[float]] = {"single": [], "cluster": []}
    try:
        create_topic(single.bootstrap, "bench", 1)
        create_topic(cluster.bootstrap, "bench", 3)
        for n in range(passes):
            for name, broker in (("single", single), ("cluster", cluster)):
                run = produce_run(broker.bootstrap, "bench", PARTITIONS, payload, records, 300, acks="all")
                figures[name].append(run.messages_per_s)
                print(f"    pass {n + 1} {name:<8} {run.messages_per_s:>10,.0f} records/s "
                      f"({run.messages_per_s * SIZE / 1e6:.1f} MB/s)", flush=True)
    finally:
        single.stop()
        cluster.stop()
    single_rate = statistics.median(figures["single"])
    cluster_rate = statistics.median(figures["cluster"])
    ratio = cluster_rate / single_rate
    line("single broker, RF 1, acks=all", f"{single_rate:,.0f} rec/s", "(reference)", None)
    line("3 nodes, RF 3, min.insync.replicas 2, acks=all", f"{cluster_rate:,.0f} rec/s", "(measured)", None)
    line("cluster / single", f"{ratio:.2f}x", f">= {PRODUCE_TARGET}x", ratio >= PRODUCE_TARGET)


def bench_startup(work: Path, pycache: Path, samples: int) -> None:
    startups, rss = [], []
    for n in range(samples):
        data_dir = work / f"startup-{n}"
        broker = CompatBroker.start(data_dir, work / "startup.log", partitions=1, pycache=pycache,
                                    args=("--nodes", "3"))
        try:
            startups.append(broker.startup_s)
            time.sleep(IDLE_SETTLE_S)  # a measurement pause, not synchronisation: idle memory after start-up
            rss.append(broker.rss_bytes())
        finally:
            broker.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    startup = statistics.median(startups)
    memory = statistics.median(rss)
    line("3-node start-up (median)", f"{startup * 1000:.0f} ms", f"<= {STARTUP_TARGET_S * 1000:.0f} ms",
         startup <= STARTUP_TARGET_S)
    line("3-node idle RSS (median)", f"{memory / 2**20:.1f} MB", f"<= {RSS_TARGET_BYTES // 2**20} MB",
         memory <= RSS_TARGET_BYTES)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000, help="records per produce pass")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--startups", type=int, default=5, help="start-ups measured")
    parser.add_argument("--dir", type=Path, default=None, help="where the data dirs go (default: a temp dir)")
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cluster-bench-", dir=options.dir))
    try:
        pycache = work / "pycache"
        print("start-up and memory of serve --nodes 3:", flush=True)
        bench_startup(work, pycache, options.startups)
        print(f"produce, {options.records:,} records of {SIZE} bytes per pass, {options.passes} passes:", flush=True)
        bench_produce(work, options.records, options.passes, pycache)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
