"""Broker benchmark: compatbroker against librdkafka's mock cluster, measured in the same run.

    python bench/broker_bench.py                 # default run, under about 3 minutes (a 256 MiB backlog)
    python bench/broker_bench.py --full          # the issue's full run: a 1 GiB backlog, longer produce runs
    python bench/broker_bench.py --only startup  # one or more sections: produce,consume,backlog,startup
    python bench/broker_bench.py --dir /data     # where the data dirs go (default: the system temp dir)
    python bench/broker_bench.py --profile /tmp/prof   # also print where compatbroker's time goes (py-spy)
    python bench/broker_bench.py --perf /tmp/perf      # ... and its CPU by DSO, symbol and syscall (perf record)

bench/README.md says how to read the output and where compatbroker's CPU goes on each path, per request and per
MB (bench/cpu_breakdown.py measures that with perf and py-spy).

confluent-kafka (librdkafka) is the load generator for every figure; each broker runs in a process of its own
(compatbroker: `python -m compatbroker serve`; the mock: bench/mock_cluster.py) and both get the same client
configuration (bench/loadgen.py). Figures count message values: MB is 10^6 bytes of payload, GB 10^9.

Sections and targets:
1. produce: 100 B and 1 KiB messages round-robin over the partitions of one topic, from the first message to
   the last acknowledgement, median of several passes. Targets: compatbroker >= 1.0x the mock at 1 KiB (0.7x at
   100 B), and at most 0.35 broker core-seconds per GB at 1 KiB. compatbroker writes
   to the data dir's disk (no fsync, Kafka's default) where the mock keeps 5 MiB per partition in memory.
   Each pass writes a topic of its own, deleted after the pass: kept, the passes' logs pile up in the page cache
   (2.5 GB in a default run, 7 GB with --full), and on a virtual machine whose memory the hypervisor backs on
   first touch (or takes back once freed), page cache growing into such memory made the kernel's copy into it
   several times slower (measured: from the 7th pass of 500 MB on, 69% of the broker's CPU in that copy and half
   the throughput), a cost of the machine rather than of the broker. Deleting the topic frees its pages for the
   next pass. Beside the figures, not a target, the produce floor: the same bytes received over TCP loopback by a
   plain loop that writes them to a file and runs CRC-32C over them (loadgen.produce_floor), the CPU per GB the
   kernel needs whatever the broker does.
2. consume: a backlog the mock can hold (it keeps 5 MiB per partition, so 4 MiB of records per partition, over
   several topics), written in full batches so that both brokers hold the same batch layout, read from the
   beginning with assign(), median of several passes. Target: >= 1.0x the mock.
3. backlog: 64 KiB messages in one partition (256 MiB, 1 GiB with --full), consumed from the beginning (median of
   the passes), beside the loopback limit: an os.sendfile of the same partition's log files over TCP loopback to a
   reader that discards them, median of 5 passes after an untimed one that warms the page cache (min, median and
   max printed: it varies a lot on a shared machine). Targets: >= 0.6x the median loopback limit, and at most 0.15
   broker core-seconds per GB; the loopback sender's CPU per GB is printed beside it (the kernel's cost of the
   same bytes).
4. startup: time from spawning `compatbroker serve` to its `listening` line (target <= 300 ms), and idle RSS
   (target <= 60 MB) with an empty data dir and with the data dir the sections above filled; RSS is taken after one
   Metadata round trip, and must not grow with the data stored (target: within 5 MB of the empty figure).

Each broker's CPU is printed beside the figures as core-seconds per GB of message values (its threads' run time
from /proc/PID/task/*/schedstat, in ns) and, with the client's and the rest of the machine's, as a share of the
wall time (100% = one core): a broker near 100% is the bottleneck; the client near 100% or more means the figure is
the client's limit. The machine's cores are shared by the broker and the load generator; "kernel" is kernel
threads (disk writeback, network softirq), partly working for them; "other" is every other process: figures taken
while it is well above 0 are noisy. Each timed run starts after a sync, so none pays for the writeback of data an
earlier one wrote. The summary (== targets) lists every verdict, with the CPU per GB of both brokers.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

try:
    import confluent_kafka
except ImportError:
    raise SystemExit("the broker benchmark drives confluent-kafka: /tmp/venv/bin/pip install confluent-kafka")
from brokers import (BrokerError, BrokerProcess, CompatBroker, MockBroker, file_tail,  # noqa: E402
                     kernel_threads_seconds, machine_busy_seconds)
from loadgen import (FILL_CONFIG, MOCK_FETCH_MAX_BYTES, LoadError, Loopback, Run, consume_run,  # noqa: E402
                     loopback_sendfile, make_producer, produce_floor, produce_run, watermarks)
from profiling import PERF_INSTALL, perf, perf_recorded, profiled  # noqa: E402

MiB = 1 << 20
SECTIONS = ("produce", "consume", "backlog", "startup")
SIZES = (100, 1024)
RECORD_OVERHEAD = 12  # bytes a v2 record adds to a small unkeyed value (length, attributes, deltas, lengths)
MOCK_BACKLOG_PER_PARTITION = 4 * MiB  # the mock drops batches past 5 MiB per partition
BACKLOG_MESSAGE = 64 * 1024
BACKLOG_TOPIC = "bench-backlog"
RSS_GROWTH_LIMIT = 5 * MiB
TIMEOUT_S = 180.0
# Issue 21's targets: 1 KiB produce at least the mock's throughput, at most 0.35 broker core-seconds per GB;
# 100 B produce no worse than before (0.7x); a backlog read at most 0.15 core-seconds per GB.
PRODUCE_VS_MOCK = {100: 0.7, 1024: 1.0}
PRODUCE_CORE_S_PER_GB = {1024: 0.35}
CONSUME_VS_MOCK = 1.0
BACKLOG_VS_LOOPBACK = 0.6
BACKLOG_CORE_S_PER_GB = 0.15
LOOPBACK_PASSES = 5
FLOOR_PASSES = 3


@dataclasses.dataclass(frozen=True)
class Plan:
    produce_count: dict
    produce_passes: int
    consume_topics: int  # the consume backlog spans several topics: the mock holds only 5 MiB per partition
    consume_passes: int
    backlog_bytes: int
    backlog_passes: int
    startup_runs: int

    @classmethod
    def for_args(cls, full: bool) -> "Plan":
        if full:
            return cls(produce_count={100: 3_000_000, 1024: 1_000_000}, produce_passes=7, consume_topics=8,
                       consume_passes=9, backlog_bytes=1024 * MiB, backlog_passes=3, startup_runs=7)
        return cls(produce_count={100: 2_000_000, 1024: 500_000}, produce_passes=5, consume_topics=4,
                   consume_passes=7, backlog_bytes=256 * MiB, backlog_passes=3, startup_runs=5)


# --- reporting -----------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Verdict:
    name: str
    figure: str
    target: str
    ok: bool | None  # None: could not be measured
    note: str = ""  # information beside the figure (the other broker's, the kernel's), not part of the verdict
    informative: bool = False  # a figure without a target


class Report:
    def __init__(self) -> None:
        self.verdicts: list[Verdict] = []

    def ratio(self, name: str, ratio: float | None, minimum: float) -> None:
        figure = "n/a" if ratio is None else "%.3fx" % ratio
        self.verdicts.append(Verdict(name, figure, ">= %.1fx" % minimum, None if ratio is None else ratio >= minimum))

    def at_most(self, name: str, value: float | None, limit: float, unit: str, fmt: str = "%.0f",
                note: str = "") -> None:
        """A figure that must not exceed `limit`; `fmt` formats both (e.g. "%.2f" for core-seconds per GB)."""
        figure = "n/a" if value is None else (fmt + " %s") % (value, unit)
        self.verdicts.append(Verdict(name, figure, ("<= " + fmt + " %s") % (limit, unit),
                                     None if value is None else value <= limit, note))

    def info(self, name: str, figure: str, note: str = "") -> None:
        """A figure printed in the summary without a target."""
        self.verdicts.append(Verdict(name, figure, "", None, note, informative=True))

    def print_summary(self) -> None:
        print("\n== targets")
        for v in self.verdicts:
            state = "info" if v.informative else {True: "ok", False: "MISSED", None: "NOT MEASURED"}[v.ok]
            target = "target " + v.target if v.target else ""
            print(("  %-44s %14s   %-25s %-12s %s" % (v.name, v.figure, target, state, v.note)).rstrip())


def section(title: str) -> None:
    print("\n== " + title, flush=True)


def rate_line(label: str, result: "Measured", size: int) -> str:
    run = result.run
    return ("  %-28s %11s msg/s %8.1f MB/s   broker %.2f core-s/GB   %s"
            % (label, "{:,.0f}".format(run.messages_per_s), run.messages * size / run.seconds / 1e6,
               result.core_seconds_per_gb(size), result.cpu_shares()))


@dataclasses.dataclass
class Measured:
    run: Run
    broker_cpu: float  # CPU seconds of the broker per second of wall time
    client_cpu: float  # the same for this process: the load generator, librdkafka's threads included
    kernel_cpu: float  # kernel threads: disk writeback, network softirq, ... (partly on the brokers' behalf)
    other_cpu: float  # every other process on the machine: noise when it is not near 0

    def core_seconds_per_gb(self, size: int) -> float:
        """The broker's CPU seconds per 10^9 bytes of message values (`size` bytes each) the run moved."""
        return self.broker_cpu * self.run.seconds / (self.run.messages * size / 1e9)

    def cpu_shares(self) -> str:
        return "cpu: broker %3.0f%%  client %3.0f%%  kernel %3.0f%%  other %3.0f%%" % (
            100 * self.broker_cpu, 100 * self.client_cpu, 100 * self.kernel_cpu, 100 * self.other_cpu)


def measured(peer: BrokerProcess, work, *args) -> Measured:
    """Run `work(*args)` and split the machine's CPU time meanwhile between the broker, this process (the client),
    kernel threads and everything else. The broker's is its threads' schedstat (ns); the rest, clock ticks."""
    before = (peer.cpu_seconds(), _own_cpu(), kernel_threads_seconds(), machine_busy_seconds())
    run = work(*args)
    after = (peer.cpu_seconds(), _own_cpu(), kernel_threads_seconds(), machine_busy_seconds())
    broker, client, kernel, machine = (b - a for a, b in zip(before, after))
    other = max(0.0, machine - broker - client - kernel)
    return Measured(run, *(seconds / run.seconds for seconds in (broker, client, kernel, other)))


def _own_cpu() -> float:
    times = os.times()
    return times.user + times.system


@dataclasses.dataclass(frozen=True)
class Profiling:
    """What to record of compatbroker's profiled runs (the first pass of each figure); None: not recorded."""
    py_spy_dir: Path | None = None  # --profile: py-spy's collapsed stacks
    perf_dir: Path | None = None  # --perf: perf record's data
    native: bool = False  # --native: py-spy samples C frames too


class Peers:
    """The brokers still standing. A broker that fails a measurement is reported and dropped from the rest."""

    def __init__(self, brokers: list[BrokerProcess], profiling: Profiling = Profiling()) -> None:
        self.brokers = brokers
        self.profiling = profiling

    def measure(self, peer: BrokerProcess, what: str, work, *args, profile: bool = True) -> Measured | None:
        """A timed run with the CPU it cost; compatbroker's runs are profiled when asked for."""
        chosen = self.profiling if profile and peer.name == "compatbroker" else Profiling()
        label = what.replace(" ", "-")
        os.sync()  # start with no dirty pages: no run pays for the writeback of the data an earlier one wrote
        with perf_recorded(peer.pid, chosen.perf_dir, label), \
                profiled(peer.pid, chosen.py_spy_dir, label, native=chosen.native):
            return self.attempt(peer, what, measured, peer, work, *args)

    def attempt(self, peer: BrokerProcess, what: str, work, *args):
        try:
            return work(*args)
        except (LoadError, BrokerError, confluent_kafka.KafkaException, OSError) as exc:
            print("  %s: %s failed: %s" % (peer.name, what, exc), flush=True)
            if not peer.alive():
                print("  %s exited with code %s; its log ends:\n%s" % (peer.name, peer.proc.returncode,
                                                                         _indent(peer.log_tail())))
                self.brokers.remove(peer)
            return None

    def get(self, name: str) -> BrokerProcess | None:
        return next((b for b in self.brokers if b.name == name), None)


def _indent(text: str) -> str:
    return "\n".join("    | " + line for line in text.splitlines())


def ratio_of(figures: dict) -> float | None:
    if "compatbroker" in figures and "mock" in figures:
        return figures["compatbroker"].run.messages_per_s / figures["mock"].run.messages_per_s
    return None


def print_ratio(ratio: float | None, target: float) -> None:
    if ratio is not None:
        print("  %-28s %.2fx the mock (target >= %.1fx)" % ("ratio", ratio, target), flush=True)


def report_cpu_per_gb(report: Report, what: str, figures: dict, size: int, limit: float | None = None) -> None:
    """compatbroker's core-seconds per GB in the summary, against `limit` when there is one; the mock's beside it."""
    compat, mock = figures.get("compatbroker"), figures.get("mock")
    value = compat.core_seconds_per_gb(size) if compat else None
    note = "mock %.2f core-s/GB" % mock.core_seconds_per_gb(size) if mock else ""
    name = "%s, compatbroker CPU" % what
    if limit is not None:
        report.at_most(name, value, limit, "core-s/GB", fmt="%.2f", note=note)
    else:
        report.info(name, "n/a" if value is None else "%.2f core-s/GB" % value, note)


def median_pass(passes: list[Loopback]) -> Loopback:
    return sorted(passes, key=lambda p: p.seconds)[len(passes) // 2]


def spread(passes: list[Loopback]) -> str:
    rates = sorted(p.bytes / p.seconds / 1e6 for p in passes)
    return "min %.0f, median %.0f, max %.0f MB/s" % (rates[0], rates[len(rates) // 2], rates[-1])


# --- 1. produce ----------------------------------------------------------------------------------------------------

def bench_produce(peers: Peers, plan: Plan, partitions: list[int], work: Path, report: Report) -> None:
    section("produce: %d partitions, acks=all, no compression, linger.ms=5, median of %d passes"
            % (len(partitions), plan.produce_passes))
    for size in SIZES:
        payload, count = os.urandom(size), plan.produce_count[size]
        runs: dict[str, list[Measured] | None] = {peer.name: [] for peer in peers.brokers}
        for i in range(plan.produce_passes):  # passes alternate between the brokers to spread noise evenly
            topic = "bench-produce-%d-%d" % (size, i)
            for peer in list(peers.brokers):
                if runs.get(peer.name) is None:
                    continue
                peer.ensure_topic(topic, len(partitions))
                result = peers.measure(peer, "produce %d B" % size, produce_run, peer.bootstrap, topic,
                                       partitions, payload, count, TIMEOUT_S, profile=i == 0)
                runs[peer.name] = None if result is None else runs[peer.name] + [result]
                if result is not None:
                    peers.attempt(peer, "delete %s" % topic, peer.drop_topic, topic)
        figures = {name: median_run(found) for name, found in runs.items() if found}
        for name, result in figures.items():
            print(rate_line("%s %d B x %d" % (name, size, count), result, size), flush=True)
        print_produce_floor(work / "produce-floor.bin", size * count, figures.get("compatbroker"), size)
        ratio = ratio_of(figures)
        print_ratio(ratio, PRODUCE_VS_MOCK[size])
        report.ratio("produce %d B (vs mock)" % size, ratio, PRODUCE_VS_MOCK[size])
        report_cpu_per_gb(report, "produce %d B" % size, figures, size, PRODUCE_CORE_S_PER_GB.get(size))


def print_produce_floor(path: Path, total: int, compat: Measured | None, size: int) -> None:
    """Not a target: what the kernel alone spends to take the same bytes in from a socket and write them to a file
    (loadgen.produce_floor, median of FLOOR_PASSES), and how far above it compatbroker is."""
    try:
        floors = [produce_floor(path, total) for _ in range(FLOOR_PASSES)]
    except (LoadError, OSError) as exc:
        print("  produce floor failed: %s" % exc)
        return
    cpu = sorted(floor.cpu_per_gb() for floor in floors)
    floor = cpu[len(cpu) // 2]
    print("  %-28s %8.0f MB of values: %.2f core-s/GB (min %.2f, max %.2f; one thread's recv_into 1 MiB, "
          "pwrite, crc32c; not a target)" % ("produce floor (kernel)", total / 1e6, floor, cpu[0], cpu[-1]))
    if compat is not None:
        mine = compat.core_seconds_per_gb(size)
        print("  %-28s %.2f core-s/GB above the floor (%.1fx the floor)" % ("compatbroker", mine - floor, mine / floor),
              flush=True)


# --- 2. consume ----------------------------------------------------------------------------------------------------

def consume_small(bootstrap: str, assignment, expected: int, timeout_s: float) -> Run:
    return consume_run(bootstrap, assignment, expected, timeout_s, fetch_max_bytes=MOCK_FETCH_MAX_BYTES)


def bench_consume(peers: Peers, plan: Plan, partitions: list[int], report: Report) -> None:
    section("consume: a backlog the mock holds, %d topics x %d partitions x 4 MiB, median of %d passes"
            % (plan.consume_topics, len(partitions), plan.consume_passes))
    for size in SIZES:
        payload = os.urandom(size)
        topics = ["bench-consume-%d-%d" % (size, t) for t in range(plan.consume_topics)]
        assignment = [(topic, p) for topic in topics for p in partitions]
        per_partition = MOCK_BACKLOG_PER_PARTITION // (size + RECORD_OVERHEAD)
        expected = {}
        for peer in list(peers.brokers):
            counts = [peers.attempt(peer, "fill %s" % topic, fill_backlog, peer, topic, partitions, payload,
                                    per_partition * len(partitions)) for topic in topics]
            if None not in counts:
                expected[peer.name] = sum(counts)
        runs: dict[str, list[Measured]] = {name: [] for name in expected}
        for i in range(plan.consume_passes):  # passes alternate between the brokers to spread noise evenly
            for peer in list(peers.brokers):
                if peer.name not in expected or runs[peer.name] is None:
                    continue
                result = peers.measure(peer, "consume %d B" % size, consume_small, peer.bootstrap, assignment,
                                       expected[peer.name], TIMEOUT_S, profile=i == 0)
                runs[peer.name] = None if result is None else runs[peer.name] + [result]
        figures = {name: median_run(found) for name, found in runs.items() if found}
        for name, result in figures.items():
            print(rate_line("%s %d B x %d" % (name, size, expected[name]), result, size), flush=True)
        ratio = ratio_of(figures)
        print_ratio(ratio, CONSUME_VS_MOCK)
        report.ratio("consume %d B (vs mock)" % size, ratio, CONSUME_VS_MOCK)
        report_cpu_per_gb(report, "consume %d B" % size, figures, size)


def fill_backlog(peer: BrokerProcess, topic: str, partitions: list[int], payload: bytes, count: int) -> int:
    """Produce a backlog and check the broker kept all of it; returns the number of messages to read."""
    peer.ensure_topic(topic, len(partitions))
    produce_run(peer.bootstrap, topic, partitions, payload, count, TIMEOUT_S, **FILL_CONFIG)
    marks = watermarks(peer.bootstrap, topic, partitions)
    if any(low != 0 for low, _ in marks):
        raise LoadError("%s dropped part of %s (watermarks %s): the backlog is larger than it holds"
                        % (peer.name, topic, marks))
    return sum(high - low for low, high in marks)


def median_run(found: list[Measured]) -> Measured:
    return sorted(found, key=lambda m: m.run.seconds)[len(found) // 2]


# --- 3. the large backlog against the loopback limit ---------------------------------------------------------------

def bench_backlog(peers: Peers, plan: Plan, data_dir: Path, report: Report) -> None:
    section("backlog: %d MiB of 64 KiB messages in one partition, median of %d passes; the loopback limit: median "
            "of %d on a warm page cache" % (plan.backlog_bytes // MiB, plan.backlog_passes, LOOPBACK_PASSES))
    peer = peers.get("compatbroker")
    if peer is None:
        print("  compatbroker is not running: skipped")
    runs = fill_and_read_backlog(peers, peer, plan) if peer else []
    if not runs:
        report.ratio("consume backlog (vs loopback sendfile)", None, BACKLOG_VS_LOOPBACK)
        report.at_most("consume backlog, compatbroker CPU", None, BACKLOG_CORE_S_PER_GB, "core-s/GB", fmt="%.2f")
        return
    segments = sorted(str(path) for path in (data_dir / ("%s-%d" % (BACKLOG_TOPIC, 0))).glob("*.log"))
    loopback_sendfile(segments)  # untimed: reads the log files into the page cache, if not there yet
    limits = [loopback_sendfile(segments) for _ in range(LOOPBACK_PASSES)]
    limit = median_pass(limits)
    kernel = limit.cpu_per_gb()
    print("  %-28s %8.1f MB/s of log bytes (%d MiB in %d segment files; %s)   sender %.2f core-s/GB"
          % ("loopback sendfile limit", limit.bytes / limit.seconds / 1e6, limit.bytes // MiB, len(segments),
             spread(limits), kernel))
    middle = median_run(runs)
    mine = middle.core_seconds_per_gb(BACKLOG_MESSAGE)
    print("  %-28s %8.1f MB/s of log bytes, %s msg/s   broker %.2f core-s/GB (the kernel's cost of the same "
          "bytes: %.2f, the loopback sender's)   %s"
          % ("compatbroker consume", limit.bytes / middle.run.seconds / 1e6,
             "{:,.0f}".format(middle.run.messages_per_s), mine, kernel, middle.cpu_shares()))
    ratio = limit.seconds / middle.run.seconds
    print("  %-28s %.2fx the median loopback limit (target >= %.1fx)" % ("ratio", ratio, BACKLOG_VS_LOOPBACK),
          flush=True)
    report.ratio("consume backlog (vs loopback sendfile)", ratio, BACKLOG_VS_LOOPBACK)
    report.at_most("consume backlog, compatbroker CPU", mine, BACKLOG_CORE_S_PER_GB, "core-s/GB", fmt="%.2f",
                   note="kernel (loopback sender) %.2f core-s/GB" % kernel)


def fill_and_read_backlog(peers: Peers, peer: BrokerProcess, plan: Plan) -> list[Measured]:
    """Write the backlog to compatbroker, then read it from the beginning backlog_passes times; the passes that
    completed (none if the fill failed)."""
    payload = os.urandom(BACKLOG_MESSAGE)
    produced = peers.measure(peer, "produce 64 KiB", produce_run, peer.bootstrap, BACKLOG_TOPIC, [0], payload,
                             plan.backlog_bytes // BACKLOG_MESSAGE - 1, TIMEOUT_S)
    if produced is None:
        return []
    print(rate_line("produce 64 KiB (to fill)", produced, BACKLOG_MESSAGE))
    expected = plan.backlog_bytes // BACKLOG_MESSAGE
    runs = []
    for i in range(plan.backlog_passes):
        result = peers.measure(peer, "consume backlog", consume_run, peer.bootstrap, [(BACKLOG_TOPIC, 0)],
                               expected, TIMEOUT_S, 256, profile=i == 0)
        if result is None:
            break
        runs.append(result)
    return runs


# --- 4. startup and idle memory ------------------------------------------------------------------------------------

@dataclasses.dataclass
class Startup:
    startup_ms: float
    rss_listening: int
    rss_idle: int | None  # after one ApiVersions + Metadata round trip; None when that failed
    shutdown_s: float
    exit_code: int | None


def start_and_stop(data_dir: Path, log_path: Path, partitions: int, pycache: Path) -> Startup:
    broker = CompatBroker.start(data_dir, log_path, partitions=partitions, pycache=pycache)
    try:
        rss_listening = broker.rss_bytes()
        rss_idle = broker.rss_bytes() if metadata_round_trip(broker.bootstrap) else None
    finally:
        shutdown_s, code = broker.stop()
    return Startup(broker.startup_s * 1000, rss_listening, rss_idle, shutdown_s, code)


def metadata_round_trip(bootstrap: str) -> bool:
    """ApiVersions and a Metadata request for one topic name that creates nothing: afterwards the broker has
    loaded what answering a client takes. A named topic rather than all topics keeps this probe about memory:
    librdkafka's all-topics request (v9+) carries 3 stray bytes, a decoding matter for the compat tests."""
    producer, _ = make_producer(bootstrap, **{"allow.auto.create.topics": False})
    try:
        producer.list_topics("bench-idle-probe", timeout=10)
        return True
    except confluent_kafka.KafkaException as exc:
        print("  compatbroker: Metadata round trip failed: %s" % exc)
        return False


def interpreter_start_ms(runs: int) -> float:
    """What a bare `python -c pass` costs here: the floor under any startup time of a Python broker."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def bench_startup(work: Path, data_dir: Path, plan: Plan, partitions: int, report: Report) -> None:
    section("startup and idle memory: median of %d starts, bytecode cached as in an installed package"
            % plan.startup_runs)
    print("  %-34s %4.0f ms" % ("python -c pass", interpreter_start_ms(plan.startup_runs)))
    # Not a target: the first start of a checkout (or with PYTHONDONTWRITEBYTECODE) compiles every module.
    cold = startups(lambda i: work / "cold", work, 1, partitions, work / "pycache-cold")
    print_startups("first start, compiling bytecode", cold)
    pycache = work / "pycache"
    empty = startups(lambda i: work / ("empty-%d" % i), work, plan.startup_runs + 1, partitions, pycache)[1:]
    print_startups("empty data dir", empty)
    stored = None
    if data_dir.exists() and any(data_dir.iterdir()):
        size, count = dir_size(data_dir)
        stored = startups(lambda i: data_dir, work, plan.startup_runs, partitions, pycache)
        print_startups("data dir: %d MiB, %d partitions" % (size // MiB, count), stored)
    else:
        print("  no data dir from the other sections: run them too to measure startup with data")
    report.at_most("startup, empty data dir", _median(empty, "startup_ms"), 300, "ms")
    report.at_most("startup, data dir with data", _median(stored, "startup_ms"), 300, "ms")
    report.at_most("idle RSS, empty data dir", _mb(_median(empty, "rss_idle")), 60, "MB")
    report.at_most("idle RSS, data dir with data", _mb(_median(stored, "rss_idle")), 60, "MB")
    growth = None
    if _median(empty, "rss_idle") is not None and _median(stored, "rss_idle") is not None:
        growth = (_median(stored, "rss_idle") - _median(empty, "rss_idle")) / MiB
    report.at_most("idle RSS growth from the data stored", growth, RSS_GROWTH_LIMIT / MiB, "MB")


def startups(data_dir_of, work: Path, runs: int, partitions: int, pycache: Path) -> list[Startup]:
    """`runs` starts and stops; an empty list if one fails (reported)."""
    found = []
    for i in range(runs):
        try:
            found.append(start_and_stop(data_dir_of(i), work / "startup.log", partitions, pycache))
        except (BrokerError, confluent_kafka.KafkaException, OSError) as exc:
            print("  compatbroker: startup failed: %s\n%s" % (exc, _indent(file_tail(work / "startup.log"))))
            return []
    return found


def print_startups(label: str, found: list[Startup] | None) -> None:
    if not found:
        return
    idle = _mb(_median(found, "rss_idle"))
    print("  %-34s start %4.0f ms (min %.0f, max %.0f)  RSS listening %5.1f MB, idle %s  "
          "SIGTERM exit %.2f s, codes %s"
          % (label, _median(found, "startup_ms"), min(s.startup_ms for s in found),
             max(s.startup_ms for s in found), _mb(_median(found, "rss_listening")),
             "n/a" if idle is None else "%5.1f MB" % idle, max(s.shutdown_s for s in found),
             sorted({s.exit_code for s in found}, key=str)), flush=True)


def _median(found, field: str) -> float | None:
    values = [getattr(s, field) for s in found or () if getattr(s, field) is not None]
    return statistics.median(values) if values else None


def _mb(value: float | None) -> float | None:
    return None if value is None else value / MiB


def dir_size(path: Path) -> tuple[int, int]:
    """Bytes under a data dir and the number of partition directories in it."""
    total = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return total, sum(1 for d in path.iterdir() if d.is_dir() and "-" in d.name)


# --- the run -------------------------------------------------------------------------------------------------------

def start_peers(work: Path, data_dir: Path, partitions: int, profiling: Profiling) -> Peers:
    """The mock and compatbroker, each in its own process; a broker that cannot start is reported and left out."""
    brokers = []
    try:
        brokers.append(MockBroker.start(work / "mock.log"))
    except BrokerError as exc:
        print("mock: %s" % exc)
    try:
        compat = CompatBroker.start(data_dir, work / "compatbroker.log", partitions=partitions,
                                    pycache=work / "pycache")
        brokers.append(compat)
    except BrokerError as exc:
        print("compatbroker: %s\n%s" % (exc, _indent(file_tail(work / "compatbroker.log"))))
    return Peers(brokers, profiling)


def run(args, work: Path, report: Report) -> None:
    plan = Plan.for_args(args.full)
    partitions = list(range(args.partitions))
    data_dir = work / "data"
    print("broker benchmark: python %s, confluent-kafka %s, librdkafka %s, %d cores, work dir %s"
          % (sys.version.split()[0], importlib.metadata.version("confluent-kafka"), confluent_kafka.libversion()[0],
             os.cpu_count(), work), flush=True)
    load = os.getloadavg()[0]
    if load > 0.5:
        print("note: load average %.1f before the run: other processes compete for the cores, figures are noisy"
              % load)
    load_sections = [s for s in args.only if s != "startup"]
    if load_sections:
        peers = start_peers(work, data_dir, args.partitions, Profiling(args.profile, args.perf, args.native))
        try:
            if "produce" in load_sections:
                bench_produce(peers, plan, partitions, work, report)
            if "consume" in load_sections:
                bench_consume(peers, plan, partitions, report)
            if "backlog" in load_sections:
                bench_backlog(peers, plan, data_dir, report)
            compat = peers.get("compatbroker")
            if compat:
                print("\n  compatbroker RSS after the load: %.1f MB" % (compat.rss_bytes() / MiB))
        finally:
            for peer in peers.brokers:
                peer.stop()
    if "startup" in args.only:
        bench_startup(work, data_dir, plan, args.partitions, report)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--full", action="store_true", help="1 GiB backlog and longer runs")
    parser.add_argument("--only", default=",".join(SECTIONS),
                        help="comma-separated sections to run (default: all of %s)" % ",".join(SECTIONS))
    parser.add_argument("--partitions", type=int, default=8, help="partitions per topic (default 8)")
    parser.add_argument("--dir", default=None, help="parent of the work dir (default: the system temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (data dirs and broker logs)")
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR",
                        help="sample compatbroker with py-spy during each section, print where its time goes and "
                             "keep the collapsed stacks in DIR (figures run a little lower)")
    parser.add_argument("--native", action="store_true", help="with --profile: py-spy samples C frames too")
    parser.add_argument("--perf", type=Path, default=None, metavar="DIR",
                        help="record compatbroker with perf record -g during each section, print where its CPU "
                             "goes (by DSO, symbols, system calls) and keep the perf data in DIR")
    args = parser.parse_args(argv)
    if args.perf is not None and perf() is None:
        print("--perf: no perf here (install it: %s); going on without it" % PERF_INSTALL)
        args.perf = None
    args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(args.only) - set(SECTIONS)
    if unknown:
        parser.error("unknown section(s): %s" % ", ".join(sorted(unknown)))
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="compatbroker-bench-", dir=args.dir))
    report = Report()
    started = time.perf_counter()
    try:
        run(args, work, report)
    finally:
        if args.keep:
            print("\nwork dir kept: %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    report.print_summary()
    print("\nbenchmark time: %.0f s" % (time.perf_counter() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
