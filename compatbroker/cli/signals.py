"""SIGTERM handled as Ctrl-C by the commands that stream records (`produce`, `consume`).

A service manager, `docker stop` or `kill` ends a process with SIGTERM. Python's default for it ends the process
at once: a `consume -g` member would stay in its group until session.timeout.ms and its last positions would not be
committed; `produce` would drop the lines it had read but not sent. Inside `sigterm_as_interrupt()`, SIGTERM raises
`Terminated`, a KeyboardInterrupt, so the command stops exactly as on Ctrl-C (commit and leave the group, flush what
was read), and then exits 143 (128 + SIGTERM, as a shell reports a process SIGTERM ended) instead of 130. A second
SIGTERM while the command is stopping gets the previous handler (by default: the process ends at once).

Within `stop_held()` (records being written to stdout) SIGTERM and a first Ctrl-C wait for the block to end, so
that `consume` knows whether the records reached stdout and commits exactly those. Raised anywhere inside the
block, the interrupt could land between the write's return and the note that it was done (a loaded machine
deschedules a process right after a write that wakes its reader), and records already out would be read again. A
second Ctrl-C interrupts the write at once (a reader that stopped reading must not hold the command); those records
are then read again by the group's next consumer (duplicates rather than losses).
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
    """Whether a stop must wait (`depth` > 0) and the interrupt that came meanwhile (`pending`)."""

    depth = 0
    pending: type[KeyboardInterrupt] | None = None


@contextmanager
def sigterm_as_interrupt():
    """Within the block, SIGTERM raises `Terminated` and Ctrl-C KeyboardInterrupt, each held by `stop_held` (only
    the main thread can handle signals; elsewhere this does nothing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}

    def stop(signum, frame):
        signal.signal(signum, previous[signum])  # the second one is not held
        raised = Terminated if signum == signal.SIGTERM else KeyboardInterrupt
        if _Holding.depth:
            _Holding.pending = _Holding.pending or raised
            return
        raise raised()

    for signum in previous:
        signal.signal(signum, stop)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _Holding.pending = None


@contextmanager
def stop_held():
    """SIGTERM or a first Ctrl-C arriving within the block is raised when the block ends without an error."""
    _Holding.depth += 1
    try:
        yield
    finally:
        _Holding.depth -= 1
    if not _Holding.depth and _Holding.pending:
        raised, _Holding.pending = _Holding.pending, None
        raise raised()


def stopped(stop: KeyboardInterrupt) -> int:
    """Says on stderr how the run was stopped and returns the exit code: 143 for SIGTERM, 130 for Ctrl-C."""
    if isinstance(stop, Terminated):
        click.echo("compatbroker: terminated", err=True)
        return EXIT_TERMINATED
    click.echo("compatbroker: interrupted", err=True)
    return EXIT_INTERRUPTED
