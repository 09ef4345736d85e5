"""Where a broker process spends its time during one measurement, two ways (both opt-in, for compatbroker only):

- `profiled` (`broker_bench.py --profile DIR`): py-spy samples its threads while they run (not while they wait),
  and the summary names the Python functions that were on CPU (self time) and the ones under which that time was
  spent (inclusive time). Compare the sample count with duration x rate to see how busy it was. `--native` adds
  the C frames (py-spy then pauses the process at each sample). py-spy distorts a threaded process heavily; for
  the Python split of the single-threaded event loop it is fine. Installs with `pip install py-spy` into the
  bench's interpreter.
- `perf_recorded` (`broker_bench.py --perf DIR`): `perf record -g -F 999 -p PID`, the truth for CPU: the summary
  splits the samples by shared object (kernel, libpython, crc32c, libc), lists the symbols with the most self
  time, and the system calls with the most time under them (inclusive). perf runs as root here
  (or with kernel.perf_event_paranoid <= 1); it installs with `apt-get install linux-perf` on Debian.

Both take CPU of their own on a 2-core machine: profiled figures run lower than unprofiled ones.
"""
from __future__ import annotations

import collections
import contextlib
import os
import re
import select
import shutil
import signal
import subprocess
import sys
from pathlib import Path

PERF_INSTALL = "apt-get install linux-perf"


def py_spy() -> str | None:
    """The py-spy beside this interpreter, else the one on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


@contextlib.contextmanager
def profiled(pid: int, out_dir: Path | None, label: str, rate: int = 200, native: bool = False):
    """Sample `pid` while the block runs; afterwards print a summary and keep the collapsed stacks in out_dir.
    `native`: C frames too (py-spy --native), which py-spy can only take by pausing the process at each sample."""
    exe = py_spy() if out_dir else None
    if exe is None:
        yield
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    stacks = out_dir / ("%s.collapsed.txt" % label)
    recorder = subprocess.Popen([exe, "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw",
                                 "--output", str(stacks)] + (["--native"] if native else ["--nonblocking"]),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        recorder.send_signal(signal.SIGINT)  # py-spy writes its output when interrupted
        try:
            recorder.wait(30)
        except subprocess.TimeoutExpired:
            recorder.kill()
            recorder.wait()
    if stacks.exists():
        print(summarize(stacks.read_text(), label), flush=True)


def summarize(collapsed: str, label: str, top: int = 12) -> str:
    """Self and inclusive shares of samples, from py-spy's collapsed stacks ("frame;frame;... count" per line)."""
    self_time, inclusive, total = collections.Counter(), collections.Counter(), 0
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames, n = stack.split(";"), int(count)
        total += n
        self_time[_short(frames[-1])] += n
        for frame in {_short(f) for f in frames}:
            inclusive[frame] += n
    if not total:
        return "  profile %s: no samples" % label
    lines = ["  profile %s: %d samples of threads on CPU (waits left out)" % (label, total), "    self:"]
    lines += ["      %5.1f%%  %s" % (100 * n / total, frame) for frame, n in self_time.most_common(top)]
    lines.append("    inclusive (compatbroker code):")
    ours = [(frame, n) for frame, n in inclusive.most_common() if "compatbroker" in frame]
    lines += ["      %5.1f%%  %s" % (100 * n / total, frame) for frame, n in ours[:top]]
    return "\n".join(lines)


def _short(frame: str) -> str:
    """'handle (compatbroker/handlers/fetch.py:120)' -> 'handle (compatbroker/handlers/fetch.py)': lines apart
    would split one function's time."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    marker = path.find("compatbroker/")
    if marker >= 0:
        path = path[marker:]
    else:
        path = Path(path).name
    return "%s (%s)" % (name, path) if path else name


# --- perf ----------------------------------------------------------------------------------------------------------

def perf() -> str | None:
    """The perf executable, or None when it is not installed."""
    return shutil.which("perf") or next((p for p in ("/usr/bin/perf", "/usr/sbin/perf") if os.path.exists(p)), None)


@contextlib.contextmanager
def perf_recorded(pid: int, out_dir: Path | None, label: str, frequency: int = 999):
    """`perf record -g` of `pid` (all its threads) while the block runs; afterwards print a summary and keep the
    data in out_dir/LABEL.perf.data (`perf report -i` it for more) and perf's messages in LABEL.perf.log."""
    exe = perf() if out_dir else None
    if exe is None:
        yield
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    recorder = PerfRecorder(exe, pid, out_dir / ("%s.perf.data" % label), frequency)
    started = recorder.start()
    try:
        yield
    finally:
        recorder.stop()
    if started:
        print(perf_summary(exe, recorder.data, label, frequency), flush=True)


class PerfRecorder:
    """perf record attached to a process. It starts with its events disabled (-D -1) and enables them when told
    on its control pipe: once it acknowledged, the record covers what follows (perf takes a few hundred ms to set
    up). The control pipe stays open until perf stops: perf gives up when it is closed."""

    def __init__(self, exe: str, pid: int, data: Path, frequency: int) -> None:
        self.exe, self.pid, self.data, self.frequency = exe, pid, data, frequency
        self.log = data.with_suffix(".log")
        self.process: subprocess.Popen | None = None
        self.control: int | None = None

    def start(self, timeout_s: float = 30.0) -> bool:
        """Attach and enable; False (and why, printed) when perf did not come up."""
        control_read, self.control = os.pipe()
        ack_read, ack_write = os.pipe()
        with open(self.log, "wb") as log:  # a file: perf dies of a pipe nobody reads
            self.process = subprocess.Popen(
                [self.exe, "record", "-g", "-F", str(self.frequency), "-p", str(self.pid), "-o", str(self.data),
                 "-D", "-1", "--control", "fd:%d,%d" % (control_read, ack_write)],
                pass_fds=(control_read, ack_write), stdout=log, stderr=log)
        os.close(control_read)
        os.close(ack_write)
        try:
            os.write(self.control, b"enable\n")
            ready, _, _ = select.select([ack_read], [], [], timeout_s)
            if ready and os.read(ack_read, 16).startswith(b"ack"):
                return True
        finally:
            os.close(ack_read)
        self.stop()
        print("  perf: perf record did not start, see %s: %s"
              % (self.log, self.log.read_text(errors="replace").strip()[-500:]))
        return False

    def stop(self) -> None:
        """SIGINT: perf writes its data and exits."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.control is not None:
            os.close(self.control)
            self.control = None


DSO_GROUPS = (("kernel", ("[kernel", "[vdso]")), ("libpython", ("libpython", "python3")), ("crc32c", ("crc32c",)),
              ("libc", ("libc.so", "libc-")))


def perf_summary(exe: str, data: Path, label: str, frequency: int = 999, top: int = 12, syscalls: int = 8) -> str:
    """Shares of perf's samples by shared object, the symbols with the most self time and the system calls with
    the most time under them (perf report --children: a syscall's share counts the kernel work it did)."""
    by_dso = perf_rows(exe, data, "--no-children", "--sort", "dso", "-F", "overhead,sample,dso")
    samples = sum(int(row[1]) for row in by_dso if row[1].isdigit())
    if not samples:
        return "  perf %s: no samples" % label
    groups = collections.Counter()
    for share, _, dso in by_dso:
        name = next((group for group, marks in DSO_GROUPS if any(m in dso for m in marks)), "other")
        groups[name] += _percent(share)
    lines = ["  perf %s: %d samples (~%.2f CPU seconds at %d Hz)" % (label, samples, samples / frequency, frequency),
             "    by DSO: " + "  ".join("%s %.1f%%" % (g, groups[g]) for g, _ in DSO_GROUPS + (("other", ()),))]
    lines.append("    self time, top %d symbols:" % top)
    symbols = perf_rows(exe, data, "--no-children", "--sort", "dso,sym")
    lines += ["      %6s  %-40s %s" % (row[0], row[-1][:60], _short_dso(row[1])) for row in symbols[:top]]
    lines.append("    system calls, inclusive (perf report --children):")
    calls = syscall_shares(perf_rows(exe, data, "--children", "--sort", "sym"))
    lines += ["      %5.1f%%  %s" % (share, name) for name, share in calls.most_common(syscalls)] or ["      none"]
    return "\n".join(lines)


# The entry of a system call in the kernel's call chains: __x64_sys_NAME, or for the I/O calls that tail-call their
# worker (pwritev2 jumps to do_pwritev, leaving no frame of its own), the worker's name.
SYSCALL_FRAME = re.compile(r"^(?:__x64_sys_(\w+)|(?:ksys_|do_)(read|write|pread64|pwrite64|readv|writev|preadv|pwritev"
                           r"|sendfile|splice|fsync))$")


def syscall_shares(rows: list[list[str]]) -> collections.Counter:
    """Inclusive share per system call name, from perf report --children rows (children %, self %, symbol)."""
    calls = collections.Counter()
    for row in rows:
        match = SYSCALL_FRAME.match(row[-1])
        if match:
            name = (match.group(1) or match.group(2)).replace("sendfile64", "sendfile")
            calls[name] = max(calls[name], _percent(row[0]))  # a call and its worker: the same time, once
    return calls


def perf_rows(exe: str, data: Path, *options: str) -> list[list[str]]:
    """perf report's rows, split in columns: a percentage, ..., the symbol or DSO last ("[k] name" kept whole)."""
    report = subprocess.run([exe, "report", "-i", str(data), "--stdio", "-q", "-g", "none", *options],
                            capture_output=True, text=True)
    rows = []
    for line in report.stdout.splitlines():
        if "%" not in line:
            continue
        symbol = re.search(r"\[[.k]\] (.*)$", line)  # "[k] name": a kernel symbol, "[.] name": a user one
        head = line[:symbol.start()] if symbol else line
        rows.append(head.split() + ([symbol.group(1).strip()] if symbol else []))
    return rows


def _percent(text: str) -> float:
    return float(text.rstrip("%"))


def _short_dso(dso: str) -> str:
    return "kernel" if dso.startswith("[kernel") else dso.split(".cpython")[0].split(".so")[0]
