"""Where compatbroker's CPU goes on its hot paths, per request and per MB: the tables of bench/README.md.

    python bench/cpu_breakdown.py               # produce 1 KiB, produce 100 B, consume backlog; about 3 minutes
    python bench/cpu_breakdown.py --keep DIR    # also keep the perf data and py-spy stacks in DIR

One compatbroker (with its metrics endpoint, for the request counts) and the bench's load (bench/loadgen.py, as
broker_bench.py drives it): for each path, 3 passes measure the broker's CPU (schedstat, as broker_bench.py) and its
requests (kafka_network_requestmetrics_requests_total) and their median gives the totals; one more pass, 3 runs
long, is recorded with perf and py-spy (bench/profiling.py) and gives the split:
- kernel and CRC: perf, the truth for CPU: the system calls' inclusive shares (recv, pwritev, sendfile, sendto),
  the rest of the kernel's samples, and crc32c's shared object;
- Python: perf's share of libpython, libc and the rest, split between the steps by py-spy's samples (with native
  frames): a sample whose innermost frame is in libc (a system call or a wait) or in crc32c is left out, as perf
  measured those; any other goes to the innermost Python frame that names a step (a C helper such as struct's
  counts for the Python function calling it). Native frames make py-spy pause the process at each sample: the
  recorded pass runs slower, which changes the totals, not how the Python time splits.
Produce passes each write a topic of their own, deleted after the pass outside the CPU counted (see broker_bench's
docstring: kept, the page cache grows and the kernel's copies slow down); perf's share of that deletion
(unlinkat) is left out of the split. Figures move +-15% between runs on a shared machine: compare medians.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from brokers import CompatBroker, cpu_seconds  # noqa: E402
from loadgen import consume_run, produce_run  # noqa: E402
from profiling import (DSO_GROUPS, PERF_INSTALL, perf, perf_recorded, perf_rows, profiled, py_spy,  # noqa: E402
                       syscall_shares)

PARTITIONS = list(range(8))
BACKLOG_MESSAGES = 16384  # 1 GiB of 64 KiB messages
TIMEOUT_S = 180.0

# py-spy's native frames that perf measures instead (system calls and waits in libc, CRC-32C), and Python frames
# -> steps: the innermost frame that names one.
MEASURED_BY_PERF = re.compile(r"\((libc[.-]|libpthread|crc32c|selectmodule\.c)")
FRAME = [(re.compile(p), step) for p, step in (
    (r"\b_d_\w+|decode_request|read_u?varint|protocol/wire\.py|request_header", "decode (request)"),
    (r"\b_e_\w+|encode_response|response_header", "encode (response)"),
    (r"compatbroker/storage/|compatbroker/protocol/records/", "storage (log, segment, indexes, checks)"),
    (r"compatbroker/metrics/", "metrics"),
    (r"compatbroker/handlers/|compatbroker/fetch_session", "handler"),
    (r"compatbroker/server/|asyncio/|selectors\.py|concurrent/|threading\.py", "server, connection, event loop"),
)]
KERNEL_STEPS = (("recvfrom", "receive copy (recv)"), ("pwritev", "page-cache write (pwritev, ext4)"),
                ("sendfile", "sendfile of the records"), ("sendto", "send of responses (sendto)"))


@dataclass
class Totals:
    core_s_per_gb: float
    us_per_request: float
    requests_per_mb: float
    mb_per_s: float


def python_step(frames: list[str]) -> str | None:
    """The step a py-spy sample's stack belongs to; None for waits, system calls and CRC, which perf measures."""
    if MEASURED_BY_PERF.search(frames[-1]):
        return None
    for frame in reversed(frames):
        for pattern, step in FRAME:
            if pattern.search(frame):
                return step
    return "other"


def python_split(collapsed: Path) -> collections.Counter:
    steps = collections.Counter()
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        step = python_step(stack.split(";")) if count.isdigit() else None
        if step:
            steps[step] += int(count)
    return steps


def split(data: Path, collapsed: Path) -> tuple[list[tuple[str, float]], tuple[int, int]]:
    """(step, share of the broker's CPU in %) from one perf record and the py-spy stacks of the same runs, and the
    number of samples of each."""
    exe = perf()
    dso, perf_samples = collections.Counter(), 0
    for share, samples, name in perf_rows(exe, data, "--no-children", "--sort", "dso", "-F", "overhead,sample,dso"):
        dso[next((g for g, marks in DSO_GROUPS if any(m in name for m in marks)), "other")] += float(share[:-1])
        perf_samples += int(samples)
    calls = syscall_shares(perf_rows(exe, data, "--children", "--sort", "sym"))
    scale = 100 / (100 - calls["unlinkat"])  # the topic's deletion: recorded, but not part of the path
    rows = [("kernel: " + what, calls[name] * scale) for name, what in KERNEL_STEPS if calls[name] >= 0.5]
    rest = dso["kernel"] - calls["unlinkat"] - sum(calls[name] for name, _ in KERNEL_STEPS if calls[name] >= 0.5)
    rows.append(("kernel: the rest (faults, scheduling, epoll, futex, softirq)", rest * scale))
    rows.append(("CRC-32C (crc32c)", dso["crc32c"] * scale))
    python = (dso["libpython"] + dso["libc"] + dso["other"]) * scale
    steps = python_split(collapsed)
    total = sum(steps.values()) or 1
    rows += [("Python: " + step, python * n / total) for step, n in steps.most_common()]
    return rows, (perf_samples, sum(steps.values()))


class Broker:
    """compatbroker with its metrics endpoint, which counts the requests answered."""

    def __init__(self, work: Path) -> None:
        self.process = CompatBroker.start(work / "data", work / "broker.log", partitions=len(PARTITIONS),
                                          pycache=work / "pycache", args=("--metrics-listen", "127.0.0.1:0"))
        self.url = self._metrics_url(work / "broker.log")

    @staticmethod
    def _metrics_url(log: Path, timeout_s: float = 30.0) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = re.search(r"metrics on (http://\S+)", log.read_text(errors="replace"))
            if found:
                return found.group(1)
            time.sleep(0.05)  # polling the log for the start line, bounded by the deadline
        raise RuntimeError("no metrics start line in %s" % log)

    def requests(self, api: str) -> float:
        text = urllib.request.urlopen(self.url, timeout=10).read().decode()
        pattern = re.compile(r'kafka_network_requestmetrics_requests_total\{.*request="%s".*\} (\S+)' % api)
        return sum(float(m.group(1)) for m in pattern.finditer(text))


def measure(broker: Broker, label: str, run, cleanup, nbytes: int, api: str, out: Path,
            recorded_runs: int = 3) -> None:
    """3 passes for the totals, one recorded pass of `recorded_runs` runs for the split; prints the table."""
    found = []
    for i in range(4):
        record = out if i == 3 else None
        runs = recorded_runs if record else 1
        seconds = cpu = requests = 0.0
        with perf_recorded(broker.process.pid, record, label), \
                profiled(broker.process.pid, record, label, rate=250, native=True):
            for k in range(runs):
                os.sync()
                cpu0, requests0 = cpu_seconds(broker.process.pid), broker.requests(api)
                seconds += run(i * 10 + k).seconds
                cpu += cpu_seconds(broker.process.pid) - cpu0
                requests += broker.requests(api) - requests0
                cleanup(i * 10 + k)
        if not record:
            found.append(Totals(cpu / (nbytes / 1e9), cpu / requests * 1e6, requests / (nbytes / 1e6),
                                nbytes / seconds / 1e6))
    totals = sorted(found, key=lambda t: t.core_s_per_gb)[1]
    print("\n### %s: %.2f core-s/GB, %.0f us per %s request, %.2f requests per MB, %.0f MB/s (median of 3)"
          % (label, totals.core_s_per_gb, totals.us_per_request, api, totals.requests_per_mb, totals.mb_per_s))
    rows, samples = split(out / ("%s.perf.data" % label), out / ("%s.collapsed.txt" % label))
    print("(split: %d perf samples, %d py-spy samples of Python)" % samples)
    print("\n| step | share | per request (us) | per MB (ms) |\n|---|---:|---:|---:|")
    for step, share in rows:
        print("| %s | %.0f%% | %.0f | %.3f |" % (step, share, share / 100 * totals.us_per_request,
                                               share / 100 * totals.core_s_per_gb))
    print("| total | 100%% | %.0f | %.3f |" % (totals.us_per_request, totals.core_s_per_gb), flush=True)


def run_paths(broker: Broker, out: Path) -> None:
    bootstrap = broker.process.bootstrap

    def producing(prefix: str, payload: bytes, count: int):
        def run(i):
            return produce_run(bootstrap, "%s-%d" % (prefix, i), PARTITIONS, payload, count, TIMEOUT_S)
        return run, lambda i: broker.process.drop_topic("%s-%d" % (prefix, i))

    for size, count in ((1024, 500_000), (100, 2_000_000)):
        run, cleanup = producing("produce-%d" % size, os.urandom(size), count)
        measure(broker, "produce-%dB" % size, run, cleanup, size * count, "Produce", out)
    message = 64 * 1024
    produce_run(bootstrap, "backlog", [0], os.urandom(message), BACKLOG_MESSAGES - 1, TIMEOUT_S)
    measure(broker, "consume-backlog",
            lambda i: consume_run(bootstrap, [("backlog", 0)], BACKLOG_MESSAGES, TIMEOUT_S, 256),
            lambda i: None, BACKLOG_MESSAGES * message, "Fetch", out, recorded_runs=10)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR", help="keep perf data and py-spy stacks")
    parser.add_argument("--dir", default=None, help="parent of the work dir (default: the system temp dir)")
    args = parser.parse_args(argv)
    if perf() is None:
        raise SystemExit("cpu_breakdown needs perf: %s" % PERF_INSTALL)
    if py_spy() is None:
        raise SystemExit("cpu_breakdown needs py-spy: pip install py-spy (into the interpreter running it)")
    work = Path(tempfile.mkdtemp(prefix="compatbroker-cpu-", dir=args.dir))
    broker = None
    try:
        broker = Broker(work)
        run_paths(broker, args.keep or work / "profiles")
    finally:
        if broker is not None:
            broker.process.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
