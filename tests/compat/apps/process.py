"""An application under test as a subprocess of the test: started with its output in a log file (shown when a test
fails), stopped with SIGTERM at teardown, killed only when it ignores that."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

STOP_BOUND_S = 30.0  # a daemon flushing its queue on SIGTERM may take a while on a loaded machine
READY_BOUND_S = 60.0


class AppError(AssertionError):
    """The application did not start, exited early or did not stop."""


class AppProcess:
    """One run of an application's command. As a context manager: started on entry, stopped on exit."""

    def __init__(self, name: str, command: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None):
        self.name = name
        self.command = list(command)
        self.log_path = Path(log_path)
        self.env = dict(os.environ) | dict(env or {})
        self.proc: subprocess.Popen | None = None

    def start(self) -> AppProcess:
        assert self.proc is None, f"{self.name} already runs"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         env=self.env, start_new_session=True)
        return self

    def stop(self) -> int:
        """SIGTERM, then the exit status; an application that ignores SIGTERM is killed and fails the test."""
        assert self.proc is not None, f"{self.name} is not running"
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=STOP_BOUND_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AppError(f"{self.name} ignored SIGTERM for {STOP_BOUND_S} s\n{self.describe()}") from None

    def __enter__(self) -> AppProcess:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        if self.proc is not None:
            self.stop()

    def wait_until(self, condition, what: str, bound_s: float = READY_BOUND_S) -> None:
        """Polls `condition` until true; fails at once if the application exits, and after `bound_s` seconds."""
        deadline = time.monotonic() + bound_s
        while not condition():
            if self.proc is not None and self.proc.poll() is not None:
                raise AppError(f"{self.name} exited ({self.proc.returncode}) before {what}\n{self.describe()}")
            if time.monotonic() > deadline:
                raise AppError(f"{self.name}: no {what} within {bound_s} s\n{self.describe()}")
            time.sleep(0.05)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def describe(self) -> str:
        tail = self.log_text()[-4000:] or "(no log)"
        return f"command: {' '.join(self.command)}\n--- {self.name} log (tail) ---\n{tail}"


def send_syslog(socket_path: Path, program: str, lines: Sequence[str]) -> None:
    """Logs `lines` the way syslog(3) does: RFC 3164 datagrams (facility user, severity info) on a Unix socket."""
    stamp = time.strftime("%b %e %H:%M:%S")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        for line in lines:
            sock.sendto(f"<14>{stamp} {program}[{os.getpid()}]: {line}".encode(), str(socket_path))
