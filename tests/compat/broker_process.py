"""A compatbroker started as a subprocess, the way a user starts it: `python -m compatbroker serve`.

The broker announces itself with exactly one stdout line, `compatbroker listening on HOST:PORT`; we wait for that
line instead of probing the port. Its stderr goes to a log file beside the data directory, shown when something fails.
"""
from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

READY_LINE = re.compile(r"^compatbroker listening on (?P<host>\[[^\]]+\]|[^\s:]+):(?P<port>\d+)$")
START_TIMEOUT_S = 60.0  # a bound: the ready line comes as soon as the broker listens
STOP_TIMEOUT_S = 5.0  # the broker's contract: SIGTERM -> exit 0 within 5 s
REPO = Path(__file__).resolve().parents[2]


class BrokerError(AssertionError):
    """The broker did not start or did not stop as its contract says."""


class BrokerProcess:
    """One broker subprocess over one data directory; `restart()` keeps the directory (and the port). As a context
    manager it is started on entry and stopped (SIGTERM, with stop()'s checks) on exit."""

    def __init__(self, data_dir: Path, settings: dict[str, str] | None = None, listen: str = "127.0.0.1:0"):
        self.data_dir = Path(data_dir)
        self.settings = dict(settings or {})
        self.listen = listen
        self.log_path = self.data_dir.parent / (self.data_dir.name + ".broker.log")
        self.proc: subprocess.Popen | None = None
        self.host = ""
        self.port = 0
        self.startup_s = 0.0
        self._stdout_lines: list[str] = []
        self._reader: threading.Thread | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def command(self, listen: str) -> list[str]:
        cmd = [sys.executable, "-m", "compatbroker", "serve", "--listen", listen, "--data-dir", str(self.data_dir)]
        for key, value in self.settings.items():
            cmd += ["--set", f"{key}={value}"]
        return cmd

    def start(self, listen: str | None = None) -> BrokerProcess:
        assert self.proc is None, "already running"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command(listen or self.listen), cwd=REPO, stdout=subprocess.PIPE,
                                         stderr=log, stdin=subprocess.DEVNULL)
        first: queue.Queue = queue.Queue()
        self._stdout_lines = []  # this process's own list: a previous process's reader may still be finishing
        self._reader = threading.Thread(target=_drain_stdout, args=(self.proc.stdout, first, self._stdout_lines),
                                        daemon=True)
        self._reader.start()
        try:
            line = first.get(timeout=START_TIMEOUT_S)
        except queue.Empty:
            self._kill()
            raise BrokerError(f"no ready line within {START_TIMEOUT_S} s\n{self.describe()}") from None
        match = READY_LINE.match(line or "")
        if match is None:
            self._kill()
            raise BrokerError(f"expected 'compatbroker listening on HOST:PORT', got {line!r}\n{self.describe()}")
        self.startup_s = time.monotonic() - began
        self.host, self.port = match["host"].strip("[]"), int(match["port"])
        return self

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signals the broker and waits; for SIGTERM asserts Kafka-like shutdown: exit 0 within 5 s."""
        assert self.proc is not None, "not running"
        proc, self.proc = self.proc, None
        began = time.monotonic()
        proc.send_signal(sig)
        try:
            code = proc.wait(timeout=STOP_TIMEOUT_S * 3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise BrokerError(f"broker ignored signal {sig} for {STOP_TIMEOUT_S * 3} s\n{self.describe()}")
        took = time.monotonic() - began
        self._reader.join(timeout=5)  # the pipe closed with the process: every stdout line is in by now
        if sig == signal.SIGTERM:
            if code != 0:
                raise BrokerError(f"SIGTERM: exit status {code}, expected 0\n{self.describe()}")
            if took > STOP_TIMEOUT_S:
                raise BrokerError(f"SIGTERM: took {took:.1f} s to exit, the limit is {STOP_TIMEOUT_S} s")
        if len(self._stdout_lines) > 1:
            raise BrokerError(f"the broker printed more than its one stdout line: {self._stdout_lines}")
        return code

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        if self.proc is not None:  # a failed restart may have left it stopped
            self.stop()

    def restart(self, *, hard: bool = False) -> BrokerProcess:
        """Stops (SIGTERM, or SIGKILL with `hard`) and starts again on the same data directory and port."""
        port = self.port
        self.stop(signal.SIGKILL if hard else signal.SIGTERM)
        return self.start(listen=f"{self.host}:{port}")

    def _kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def describe(self) -> str:
        """The broker's command and the tail of its log, for failure messages."""
        try:
            tail = self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            tail = "(no log)"
        return f"command: {' '.join(self.command(self.listen))}\n--- broker log (tail) ---\n{tail}"

    def cpu_seconds(self) -> float:
        """CPU time (user + system) the broker process has used so far, from /proc (Linux)."""
        with open(f"/proc/{self.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()  # after "pid (comm)"; utime and stime are fields 14, 15
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def segment_files(self, topic: str, partition: int) -> list[Path]:
        """The partition's `.log` segment files in offset order (Kafka's `<topic>-<partition>/` layout)."""
        return sorted((self.data_dir / f"{topic}-{partition}").glob("*.log"))


def _drain_stdout(stream, first: queue.Queue, lines: list[str]) -> None:
    """Hands the first line to start(); keeps reading so that the broker never blocks on a full pipe."""
    for raw in stream:
        lines.append(raw.decode(errors="replace").rstrip("\n"))
        if len(lines) == 1:
            first.put(lines[0])
    if not lines:
        first.put(None)  # exited before announcing itself
