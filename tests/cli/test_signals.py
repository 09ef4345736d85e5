"""`compatbroker.cli.signals`: SIGTERM as Ctrl-C, and both held while records are written to stdout. Each case runs
in a child process (signal handlers belong to a process's main thread; the test runner's stay untouched), which
signals itself at a chosen point and prints what happened after it."""
from __future__ import annotations

import ast
import subprocess
import sys
import textwrap

import pytest

from .helpers import REPO_ROOT

PROLOGUE = """
import os, signal
from compatbroker.cli.signals import Terminated, sigterm_as_interrupt, stop_held
events = []
with sigterm_as_interrupt():
    try:
{body}
    except KeyboardInterrupt as exc:
        events.append(type(exc).__name__)
print(events)
"""


def events_of(body: str) -> list[str]:
    script = PROLOGUE.format(body=textwrap.indent(textwrap.dedent(body), " " * 8))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=REPO_ROOT,
                          check=False)
    assert done.returncode == 0, done.stderr
    return ast.literal_eval(done.stdout)  # the list the child printed


@pytest.mark.parametrize("signum, raised", [("SIGINT", "KeyboardInterrupt"), ("SIGTERM", "Terminated")])
def test_a_stop_within_the_held_block_waits_for_its_end(signum, raised):
    # The write's "done" note after the signal is still made: what reached stdout is known and committed.
    assert events_of(f"""
        with stop_held():
            os.kill(os.getpid(), signal.{signum})
            events.append("written")
        events.append("after the block")
    """) == ["written", raised]


def test_a_second_ctrl_c_interrupts_the_held_block_at_once():
    assert events_of("""
        with stop_held():
            os.kill(os.getpid(), signal.SIGINT)
            events.append("held")
            os.kill(os.getpid(), signal.SIGINT)
            events.append("written")
    """) == ["held", "KeyboardInterrupt"]


@pytest.mark.parametrize("signum, raised", [("SIGINT", "KeyboardInterrupt"), ("SIGTERM", "Terminated")])
def test_a_stop_outside_the_held_block_is_raised_at_once(signum, raised):
    assert events_of(f"""
        os.kill(os.getpid(), signal.{signum})
        events.append("went on")
    """) == [raised]
