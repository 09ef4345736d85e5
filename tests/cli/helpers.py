"""Running the command line in tests: in this process through `compatbroker.cli.main.main` (fast, stdout and stderr
captured apart, never a terminal), or as `python -m compatbroker` in a child process (the real entry point)."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from unittest import mock

from compatbroker.cli.main import main
from tests.client.helpers import wait_for

REPO_ROOT = __file__.rsplit("/tests/", 1)[0]


@dataclass
class Ran:
    code: int
    stdout: str
    stderr: str

    def json(self):
        assert self.code == 0, self.stderr
        return json.loads(self.stdout)


def run(*args: str, input: str = "", env: dict | None = None) -> Ran:
    """`compatbroker ARGS...` in this process, with `input` on stdin."""
    out, err = io.StringIO(), io.StringIO()
    stdin = io.StringIO(input)
    with redirect_stdout(out), redirect_stderr(err), mock.patch.object(sys, "stdin", stdin), \
            mock.patch.dict(os.environ, env or {}):
        code = main(list(args))
    return Ran(code, out.getvalue(), err.getvalue())


def run_process(*args: str, input: str | None = None, env: dict | None = None, timeout: float = 60) -> Ran:
    """`python -m compatbroker ARGS...` as a child process."""
    done = subprocess.run([sys.executable, "-m", "compatbroker", *args], input=input, capture_output=True, text=True,
                          timeout=timeout, cwd=REPO_ROOT, env=None if env is None else {**os.environ, **env},
                          check=False)
    return Ran(done.returncode, done.stdout, done.stderr)


def wait_until(condition, what: str, timeout_s: float = 60.0):
    """Polls `condition` until it returns something true (returned), failing after a generous bound."""
    return wait_for(condition, what, timeout_s)
