"""Partition count benchmark: file descriptors per partition, and the time to create and to load many partitions.

    python bench/partitions_bench.py                   # 10,000 partitions (one topic), in the system temp dir
    python bench/partitions_bench.py --partitions 2000 --dir /data

Prints:
1. the time `LogManager.create_topic` takes to create the partitions (one fsync of the data dir per topic, plus one
   of each partition's `partition.metadata`);
2. file descriptors per partition once they are open (`/proc/self/fd` counted before and after). Target: about 1,
   the active segment's `.log` (its indexes live in memory);
3. the time `LogManager.startup` takes to load them after a clean shutdown, and after a crash (no clean-shutdown
   marker: the active segments are recovered). Target: <= 2 s for 10,000 partitions after a clean shutdown.

`fds_per_partition`, `create_seconds` and `startup_seconds` may be imported by other benchmarks.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compatbroker.storage.log_manager import LogManager  # noqa: E402

NOW = 1_700_000_000_000


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def create_seconds(data_dir: str, partitions: int) -> tuple[float, LogManager]:
    """Seconds to create one topic of `partitions` partitions in a new data dir; returns the open manager too."""
    manager = LogManager(data_dir)
    manager.startup(NOW)
    started = time.perf_counter()
    manager.create_topic("bench", partitions, now_ms=NOW)
    return time.perf_counter() - started, manager


def fds_per_partition(data_dir: str, partitions: int) -> float:
    before = open_fds()
    _, manager = create_seconds(data_dir, partitions)
    per_partition = (open_fds() - before) / partitions
    manager.shutdown()
    return per_partition


def startup_seconds(data_dir: str, *, clean: bool) -> float:
    """Seconds for `LogManager.startup` over the partitions in `data_dir` (left by a clean shutdown)."""
    if not clean:
        os.unlink(os.path.join(data_dir, ".kafka_cleanshutdown"))
    manager = LogManager(data_dir)
    started = time.perf_counter()
    manager.startup(NOW)
    elapsed = time.perf_counter() - started
    manager.shutdown()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--dir", default=None, help="parent directory for the data dir (default: system temp)")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="partitions-bench-", dir=args.dir)
    try:
        data_dir = os.path.join(root, "data")
        before = open_fds()
        created, manager = create_seconds(data_dir, args.partitions)
        per_partition = (open_fds() - before) / args.partitions
        manager.shutdown()
        print(f"create {args.partitions} partitions: {created:.2f} s")
        print(f"fds per partition: {per_partition:.2f}")
        print(f"startup after a clean shutdown: {startup_seconds(data_dir, clean=True):.2f} s")
        print(f"startup after a crash: {startup_seconds(data_dir, clean=False):.2f} s")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
