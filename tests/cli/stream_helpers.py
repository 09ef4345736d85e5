"""Running `produce` and `consume` in this process with BYTES on stdin and stdout (records need not be text), as
helpers.run does for text; and the child-process form for signals and several consumers at once."""
from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from unittest import mock

from compatbroker.cli.main import main

from .helpers import REPO_ROOT


@dataclass
class RanBytes:
    code: int
    stdout: bytes
    stderr: str

    def json_lines(self) -> list:
        assert self.code == 0, self.stderr
        return [json.loads(line) for line in self.stdout.splitlines()]


def run_bytes(*args: str, input: bytes = b"") -> RanBytes:
    """`compatbroker ARGS...` in this process, `input` on stdin; stdout captured as bytes."""
    stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    stdin = io.TextIOWrapper(io.BytesIO(input), encoding="utf-8")
    err = io.StringIO()
    with redirect_stdout(stdout), redirect_stderr(err), mock.patch.object(sys, "stdin", stdin):
        code = main(list(args))
        stdout.flush()
    return RanBytes(code, stdout.buffer.getvalue(), err.getvalue())


def start_process(*args: str, stdin=subprocess.DEVNULL) -> subprocess.Popen:
    """`python -m compatbroker ARGS...` as a running child process, stdout and stderr piped (with faulthandler on,
    so that `exit_code` can show where a process that does not end is stuck)."""
    return subprocess.Popen([sys.executable, "-m", "compatbroker", *args], stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=REPO_ROOT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"})


def exit_code(process: subprocess.Popen, timeout_s: float) -> int:
    """The process's exit code; when it has not ended within `timeout_s`, a failure showing its stderr with the
    Python stacks of all its threads (faulthandler dumps them on SIGABRT)."""
    try:
        return process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        try:
            _, err = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            _, err = process.communicate()
        raise AssertionError(f"{' '.join(process.args[3:])} did not end within {timeout_s} s; its stderr:\n"
                             f"{err.decode(errors='replace')[-6000:]}") from None
