"""SIGTERM handled as Ctrl-C by the commands that stream records (`produce`, `consume`).

A service manager, `docker stop` or `kill` ends a process with SIGTERM. Python's default for it ends the process
at once: a `consume -g` member would stay in its group until session.timeout.ms and its last positions would not be
committed; `produce` would drop the lines it had read but not sent. Inside `sigterm_as_interrupt()`, SIGTERM raises
`Terminated`, a KeyboardInterrupt, so the command stops exactly as on Ctrl-C (commit and leave the group, flush what
was read), and then exits 143 (128 + SIGTERM, as a shell reports a process SIGTERM ended) instead of 130. A second
SIGTERM while the command is stopping gets the previous handler (by default: the process ends at once).

Within `sigterm_held()` (records being written to stdout) SIGTERM waits for the block to end, so that `consume`
knows the records reached stdout and commits them; Ctrl-C may interrupt such a write, and those records are then
read again by the group's next consumer (duplicates rather than losses).
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

import click

from .errors import EXIT_INTERRUPTED

EXIT_TERMINATED = 128 + signal.SIGTERM
EXIT_CODES_NOTE = "Also 143: stopped by SIGTERM (handled as Ctrl-C)."


class Terminated(KeyboardInterrupt):
    """The process got SIGTERM."""


class _Holding:
    """Whether SIGTERM must wait (`depth` > 0) and whether one came meanwhile (`pending`)."""

    depth = 0
    pending = False


@contextmanager
def sigterm_as_interrupt():
    """Within the block, SIGTERM raises `Terminated` (only the main thread can handle signals; elsewhere this does
    nothing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)

    def terminate(signum, frame):
        signal.signal(signal.SIGTERM, previous)
        if _Holding.depth:
            _Holding.pending = True
            return
        raise Terminated()

    signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        _Holding.pending = False


@contextmanager
def sigterm_held():
    """SIGTERM arriving within the block is raised (as `Terminated`) when the block ends without an error."""
    _Holding.depth += 1
    try:
        yield
    finally:
        _Holding.depth -= 1
    if not _Holding.depth and _Holding.pending:
        _Holding.pending = False
        raise Terminated()


def stopped(stop: KeyboardInterrupt) -> int:
    """Says on stderr how the run was stopped and returns the exit code: 143 for SIGTERM, 130 for Ctrl-C."""
    if isinstance(stop, Terminated):
        click.echo("compatbroker: terminated", err=True)
        return EXIT_TERMINATED
    click.echo("compatbroker: interrupted", err=True)
    return EXIT_INTERRUPTED
