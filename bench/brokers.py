"""The broker processes the benchmark runs: compatbroker and librdkafka's mock cluster, each a child process.

Both expose the same small surface: `bootstrap` (HOST:PORT), `ensure_topic`, `drop_topic`, `rss_bytes`,
`cpu_seconds` and `stop`, so the benchmark measures them the same way.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MOCK_SCRIPT = Path(__file__).resolve().parent / "mock_cluster.py"
LISTENING = re.compile(r"^compatbroker listening on (\S+):(\d+)\s*$")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class BrokerError(RuntimeError):
    """A broker process did not start or misbehaved; the message carries what it printed."""


def rss_bytes(pid: int) -> int:
    """Resident set size of a process, from /proc (what `ps` calls RSS)."""
    with open("/proc/%d/status" % pid) as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise BrokerError("no VmRSS for pid %d" % pid)


def cpu_seconds(pid: int) -> float:
    """CPU time a process has used so far, user and system, its threads' together, in nanoseconds' resolution.

    From each thread's /proc/PID/task/TID/schedstat (the first field is the time it ran, ns): utime and stime in
    /proc/PID/stat count clock ticks (10 ms), too coarse for runs of a fraction of a second. A thread that ends
    between two readings takes the time it ran with it (the brokers' threads live as long as they do). Kernels
    without schedstat (CONFIG_SCHED_INFO off) fall back to the ticks."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as schedstat:
                total += int(schedstat.read().split()[0])
        except FileNotFoundError:  # no schedstat in this kernel, or the thread ended meanwhile
            if not os.path.exists("/proc/%d/task/%s" % (pid, tid)):
                continue
            return cpu_ticks_seconds(pid)
    return total / 1e9


def cpu_ticks_seconds(pid: int) -> float:
    """utime + stime of a process (all threads, those that ended included), in clock ticks' resolution."""
    with open("/proc/%d/stat" % pid) as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime (fields 14 and 15 of stat(5))


def machine_busy_seconds() -> float:
    """CPU time all processes have used so far, all cores together (idle and iowait left out)."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS


PF_KTHREAD = 0x00200000  # the flag of a kernel thread in /proc/PID/stat


def kernel_threads_seconds() -> float:
    """CPU time kernel threads (disk writeback, network softirq, ...) have used so far."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry.name) as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:  # it ended meanwhile
            continue
        if int(fields[6]) & PF_KTHREAD:  # flags, field 9 of stat(5)
            total += int(fields[11]) + int(fields[12])
    return total / CLOCK_TICKS


def file_tail(path: Path) -> str:
    """The end of a broker's log, to show why it failed; empty if there is none."""
    try:
        return path.read_text(errors="replace")[-2000:]
    except OSError:
        return ""


def die_with_parent() -> None:
    """preexec_fn: have the kernel stop the child if the benchmark dies without cleaning up."""
    import ctypes
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


class BrokerProcess:
    name = "broker"

    def __init__(self, proc: subprocess.Popen, bootstrap: str, log_path: Path) -> None:
        self.proc = proc
        self.bootstrap = bootstrap
        self.log_path = log_path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss_bytes(self) -> int:
        return rss_bytes(self.proc.pid)

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.proc.pid)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self) -> str:
        return file_tail(self.log_path)

    def stop(self, timeout_s: float = 10.0) -> tuple[float, int | None]:
        """SIGTERM, then wait; returns (seconds until exit, exit code). SIGKILL if it overstays."""
        if self.proc.poll() is not None:
            return 0.0, self.proc.returncode
        start = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            code = None
        return time.perf_counter() - start, code


class CompatBroker(BrokerProcess):
    """`python -m compatbroker serve` on a free port. Topics are created by Metadata with num.partitions."""

    name = "compatbroker"

    def __init__(self, proc, bootstrap, log_path, startup_s: float, partitions: int) -> None:
        super().__init__(proc, bootstrap, log_path)
        self.startup_s = startup_s
        self.partitions = partitions

    @classmethod
    def start(cls, data_dir: Path, log_path: Path, *, partitions: int = 8, timeout_s: float = 30.0,
              settings: dict | None = None, pycache: Path | None = None,
              args: tuple[str, ...] = ()) -> "CompatBroker":
        """Start the broker and wait for its `listening` line; startup_s is the time from spawn to that line.

        `pycache`: where the broker's bytecode is cached (PYTHONPYCACHEPREFIX), even when the environment says
        PYTHONDONTWRITEBYTECODE: an installed package has its bytecode compiled at install time, and compiling
        every module at each start would be most of the startup time measured. `args`: more command-line
        options (`--nodes 3`: a cluster in the process; the bootstrap is its first node)."""
        cmd = [sys.executable, "-m", "compatbroker", "serve", "--listen", "127.0.0.1:0",
               "--data-dir", str(data_dir), "--set", "num.partitions=%d" % partitions]
        for key, value in (settings or {}).items():
            cmd += ["--set", "%s=%s" % (key, value)]
        cmd += list(args)  # e.g. ("--nodes", "3")
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        if pycache is not None:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(pycache)
        log = open(log_path, "ab")
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=log, preexec_fn=die_with_parent)
        try:
            host, port = _wait_for_listening(proc, timeout_s)
        except BaseException:
            proc.kill()
            proc.wait()
            log.close()
            raise
        startup_s = time.perf_counter() - start
        # Whatever else it prints on stdout goes to the log, so a full pipe never blocks the broker.
        threading.Thread(target=_drain, args=(proc.stdout, log), daemon=True).start()
        return cls(proc, "%s:%s" % (host, port), log_path, startup_s, partitions)

    def ensure_topic(self, topic: str, partitions: int) -> None:
        if partitions != self.partitions:
            raise BrokerError("compatbroker creates topics with num.partitions=%d, not %d"
                              % (self.partitions, partitions))
        # Nothing to do: the producer's first Metadata request creates it (auto.create.topics.enable).

    def drop_topic(self, topic: str, timeout_s: float = 30.0) -> None:
        """Delete the topic and its log files (DeleteTopics), which frees their page cache."""
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})
        for future in admin.delete_topics([topic], operation_timeout=timeout_s).values():
            future.result(timeout_s)


def _wait_for_listening(proc: subprocess.Popen, timeout_s: float) -> tuple[str, str]:
    """Read stdout lines until the broker announces its address. A deadline guards a broker that hangs silently."""
    timer = threading.Timer(timeout_s, proc.kill)
    timer.start()
    try:
        for raw in proc.stdout:
            match = LISTENING.match(raw.decode(errors="replace"))
            if match:
                return match.group(1), match.group(2)
    finally:
        timer.cancel()
    code = proc.wait()
    raise BrokerError("compatbroker exited (code %s) without printing its listening line" % code)


def _drain(stream, sink) -> None:
    for chunk in iter(lambda: stream.read1(65536), b""):
        sink.write(chunk)
        sink.flush()


class MockBroker(BrokerProcess):
    """librdkafka's mock cluster (one broker) in a child process: see mock_cluster.py."""

    name = "mock"

    @classmethod
    def start(cls, log_path: Path, timeout_s: float = 30.0) -> "MockBroker":
        log = open(log_path, "ab")
        proc = subprocess.Popen([sys.executable, str(MOCK_SCRIPT)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1,
                                preexec_fn=die_with_parent)
        timer = threading.Timer(timeout_s, proc.kill)
        timer.start()
        line = proc.stdout.readline()
        timer.cancel()
        if not line.startswith("mock listening on "):
            proc.kill()
            proc.wait()
            raise BrokerError("mock cluster did not start: %r" % line)
        return cls(proc, line.split()[-1], log_path)

    def ensure_topic(self, topic: str, partitions: int) -> None:
        self.proc.stdin.write("create %s %d\n" % (topic, partitions))
        answer = self.proc.stdout.readline().strip()
        if answer != "ok":
            raise BrokerError("mock cluster could not create %s: %s" % (topic, answer))

    def drop_topic(self, topic: str) -> None:
        """Nothing to free: the mock keeps at most 5 MiB per partition in memory, whatever was produced."""

    def stop(self, timeout_s: float = 10.0) -> tuple[float, int | None]:
        """Closing stdin ends the mock cleanly; SIGTERM only if that does not work."""
        if self.proc.poll() is None:
            start = time.perf_counter()
            self.proc.stdin.close()
            try:
                return time.perf_counter() - start, self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                pass
        return super().stop(timeout_s)
