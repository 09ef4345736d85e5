"""Where a broker process spends its time during one measurement: py-spy samples its threads while they run
(not while they wait), and the summary names the functions that were on CPU (self time) and the ones under which
that time was spent (inclusive time). Compare the sample count with duration x rate to see how busy it was.

Opt-in (`broker_bench.py --profile DIR`): sampling takes CPU of its own on a 2-core machine, so profiled figures
run a little lower than unprofiled ones. py-spy installs with `/tmp/venv/bin/pip install py-spy`.
"""
from __future__ import annotations

import collections
import contextlib
import shutil
import signal
import subprocess
import sys
from pathlib import Path


def py_spy() -> str | None:
    """The py-spy beside this interpreter, else the one on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


@contextlib.contextmanager
def profiled(pid: int, out_dir: Path | None, label: str, rate: int = 200):
    """Sample `pid` while the block runs; afterwards print a summary and keep the collapsed stacks in out_dir."""
    exe = py_spy() if out_dir else None
    if exe is None:
        yield
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    stacks = out_dir / ("%s.collapsed.txt" % label)
    recorder = subprocess.Popen([exe, "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw",
                                 "--nonblocking", "--output", str(stacks)],
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
