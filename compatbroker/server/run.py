"""`compatbroker serve`: start the broker, print where it listens, and stop cleanly on SIGTERM or SIGINT.

Order of start-up: check the data directory, bind the listeners (a port in use is reported before the data
directory is touched further), load the logs, then accept and print the one line
`compatbroker listening on HOST:PORT`. A failure at any step is one line on stderr and exit status 1.
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import tempfile

from ..broker import Broker
from ..config import BrokerConfig
from ..storage import StorageError
from .listeners import ListenError
from .server import Server

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_STARTUP_FAILED = 1


class StartupError(Exception):
    """The broker cannot start; the message is the one line the user sees."""


def run(config: BrokerConfig) -> int:
    """Serve until SIGTERM or SIGINT; returns the process exit status."""
    try:
        return asyncio.run(serve(config))
    except StartupError as exc:
        print(f"compatbroker: {exc}", file=sys.stderr)
        return EXIT_STARTUP_FAILED


async def serve(config: BrokerConfig, *, ready=None) -> int:
    """Start, report the listening address (`ready(server)` if given, else the printed line), and serve until a
    stop signal."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    check_data_dir(config.data_dir)
    broker = Broker(config)
    server = Server(broker)
    try:
        server.bind()
    except ListenError as exc:
        raise StartupError(str(exc)) from None
    try:
        broker.startup()
    except (StorageError, OSError, ValueError) as exc:  # an unusable or foreign data directory
        server.close_listeners()
        raise StartupError(f"cannot load the data directory {config.data_dir}: {exc}") from None
    broker.start_background_work()
    server.start_accepting()
    if ready is not None:
        ready(server)
    else:
        print(f"compatbroker listening on {server.listeners[0].display()}", flush=True)
    log.info("node %d of cluster %s serving %s from %s", broker.node_id, broker.cluster_id,
             ", ".join(bound.display() for bound in server.listeners), config.data_dir)
    await stop.wait()
    log.info("shutting down")
    await server.stop()
    await broker.shutdown()
    log.info("stopped")
    return EXIT_OK


def check_data_dir(path: str) -> None:
    """Create the data directory if needed and prove it writable, or raise StartupError."""
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise StartupError(f"data directory {path} is not writable: {reason}") from None
