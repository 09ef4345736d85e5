"""`compatbroker produce` and `consume` throughput, as a user runs them: a child process each, against a broker in
a process of its own (EmbeddedBroker(mode="subprocess")).

    python bench/cli_bench.py                      # 200,000 records of 100 bytes, codecs none and lz4
    python bench/cli_bench.py --records 50000 --size 1000 --codecs none gzip snappy lz4 zstd

Produce pipes KEY:VALUE lines into `produce TOPIC -K :` (6 partitions, murmur2 placement, linger 5 ms, batches of
16 KiB, acks=all); consume reads everything back with `consume TOPIC` (the default raw output to a pipe) until the
end of every partition. Times are wall clock of the child process, Python's start-up included; the records/s and
MB/s (key and value bytes) are the command's own summary line. No target: a reference for changes to the client.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from compatbroker import EmbeddedBroker  # noqa: E402 - after the path is set


def run(args: list[str], data: bytes | None = None) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "compatbroker", *args], input=data, capture_output=True, cwd=REPO,
                          check=True)
    return time.perf_counter() - started, done.stderr.decode().strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100, help="value bytes per record")
    parser.add_argument("--codecs", nargs="+", default=["none", "lz4"])
    options = parser.parse_args()
    lines = b"".join(b"key-%d:" % i + b"v" * options.size + b"\n" for i in range(options.records))
    with EmbeddedBroker(mode="subprocess") as broker:
        for codec in options.codecs:
            topic = f"bench-{codec}"
            broker.create_topic(topic, 6)
            produced = run(["produce", topic, "-b", broker.bootstrap_servers, "-K", ":", "-z", codec], lines)
            consumed = run(["consume", topic, "-b", broker.bootstrap_servers])
            for verb, (seconds, summary) in (("produce", produced), ("consume", consumed)):
                print(f"{verb:8} {codec:7} {seconds:6.2f} s  {summary}")


if __name__ == "__main__":
    main()
