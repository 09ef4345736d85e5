"""`compatbroker serve`: start the broker, print where it listens, and stop cleanly on SIGTERM or SIGINT.

Order of start-up: check the data directory, bind the listeners (a port in use is reported before the data
directory is touched further), load the logs, then accept and print the one line
`compatbroker listening on HOST:PORT`. With a control endpoint (`--control-listen`, see `compatbroker.control`) a
second line follows: `compatbroker control on http://HOST:PORT`. A failure at any step is one line on stderr and
exit status 1.

`BrokerRuntime` is that start-up and shutdown without the signals and the printing: the embedded broker
(`compatbroker.embedded`) runs one on an event loop of its own. Its start raises the process's soft limit of open
files to the hard limit (connections and partitions each hold descriptors) and logs the figure. With a registry
emulating a Kafka release (`--emulate`), the broker finalizes that release's `transaction.version` level.
"""
from __future__ import annotations

import asyncio
import logging
import os
import resource
import signal
import sys
import tempfile
from collections.abc import Mapping
from types import ModuleType

from ..broker import Broker
from ..config import BrokerConfig, format_host_port
from ..faults import FaultInjector
from ..storage import StorageError
from .listeners import ListenError
from .server import Server

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_STARTUP_FAILED = 1


class StartupError(Exception):
    """The broker cannot start; the message is the one line the user sees."""


def run(config: BrokerConfig, *, control_listen: str | None = None, emulate: str | None = None) -> int:
    """Serve until SIGTERM or SIGINT; returns the process exit status."""
    try:
        handlers = registry_for(emulate)
        return asyncio.run(serve(config, handlers=handlers, control_listen=control_listen))
    except StartupError as exc:
        print(f"compatbroker: {exc}", file=sys.stderr)
        return EXIT_STARTUP_FAILED


async def serve(config: BrokerConfig, *, ready=None, handlers: Mapping[int, ModuleType] | None = None,
                control_listen: str | None = None) -> int:
    """Start, report the listening address (`ready(server)` if given, else the printed lines), and serve until a
    stop signal."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    runtime = BrokerRuntime(config, handlers=handlers, control_listen=control_listen)
    await runtime.start()
    if ready is not None:
        ready(runtime.server)
    else:
        print(f"compatbroker listening on {runtime.server.listeners[0].display()}", flush=True)
        if runtime.control is not None:
            print(f"compatbroker control on {runtime.control.url}", flush=True)
    await stop.wait()
    log.info("shutting down")
    await runtime.stop()
    log.info("stopped")
    return EXIT_OK


class BrokerRuntime:
    """A broker, its server, fault injector and optional control endpoint, started and stopped together on the
    running event loop. The request log records when `record_requests` says so (default: with a control
    endpoint, where someone can read it)."""

    def __init__(self, config: BrokerConfig, *, handlers: Mapping[int, ModuleType] | None = None,
                 control_listen: str | None = None, record_requests: bool | None = None):
        self.config = config
        self.handlers = handlers
        self.control_listen = control_listen
        record = control_listen is not None if record_requests is None else record_requests
        self.injector = FaultInjector(record_requests=record)
        self.broker: Broker | None = None
        self.server: Server | None = None
        self.control = None  # compatbroker.control.http.ControlServer

    async def start(self) -> None:
        """Start serving, or raise StartupError with nothing left open."""
        config = self.config
        check_data_dir(config.data_dir)
        open_files = raise_open_files_limit()
        broker = Broker(config)
        _apply_emulated_features(broker, self.handlers)
        server = Server(broker, self.handlers, self.injector)
        try:
            server.bind()
        except ListenError as exc:
            raise StartupError(str(exc)) from None
        try:
            broker.startup()
        except (StorageError, OSError, ValueError) as exc:  # an unusable or foreign data directory
            server.close_listeners()
            raise StartupError(f"cannot load the data directory {config.data_dir}: {exc}") from None
        self.broker, self.server = broker, server
        broker.start_background_work()
        server.start_accepting()
        if self.control_listen is not None:
            await self._start_control()
        log.info("node %d of cluster %s serving %s from %s", broker.node_id, broker.cluster_id,
                 ", ".join(bound.display() for bound in server.listeners), config.data_dir)
        log.info("open files limit: %s", open_files)

    async def _start_control(self) -> None:
        from ..control.http import ControlServer
        from ..control.operations import ControlOperations

        try:
            self.control = await ControlServer.start(ControlOperations(self), self.control_listen)
        except (OSError, ValueError) as exc:
            await self.stop()
            raise StartupError(f"cannot listen for control requests on {self.control_listen}: {exc}") from None

    async def stop(self) -> None:
        """Stop the control endpoint, then the server (answering what it has read), then the broker."""
        if self.control is not None:
            await self.control.close()
            self.control = None
        if self.server is not None:
            await self.server.stop()
        if self.broker is not None:
            await self.broker.shutdown()
        self.server = self.broker = None

    @property
    def bootstrap_servers(self) -> str:
        """`host:port` of the first listener, the address clients bootstrap from."""
        bound = self.server.listeners[0]
        host = bound.endpoint.host
        if bound.endpoint.is_wildcard or host == "localhost":
            host = "127.0.0.1"
        return format_host_port(host, bound.port)


def registry_for(release: str | None) -> Mapping[int, ModuleType] | None:
    """The handler registry emulating Kafka `release` (None: the default registry, which the server picks)."""
    if release is None:
        return None
    from ..emulation import RELEASES, emulated_registry
    if release not in RELEASES:
        raise StartupError(f"--emulate: unknown Kafka release {release!r}; known: {', '.join(RELEASES)}")
    from ..handlers import default_registry
    return emulated_registry(default_registry(), release)


def _apply_emulated_features(broker: Broker, handlers: Mapping[int, ModuleType] | None) -> None:
    """Under `--emulate`, the cluster finalizes the release's `transaction.version` level."""
    from ..emulation import finalized_transaction_version, release_of
    release = release_of(handlers)
    if release is not None:
        broker.finalized_transaction_version = finalized_transaction_version(release)


def raise_open_files_limit() -> str:
    """Raise the soft RLIMIT_NOFILE to the hard limit (as far as the kernel allows); the limit, as text to log."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else _kernel_open_files_max(soft)
    if soft != resource.RLIM_INFINITY and target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.debug("cannot raise the open files limit from %d to %d: %s", soft, target, exc)
    return f"{_limit_text(soft)} (hard limit {_limit_text(hard)})"


def _limit_text(limit: int) -> str:
    return "unlimited" if limit == resource.RLIM_INFINITY else str(limit)


def _kernel_open_files_max(default: int) -> int:
    """Linux's ceiling for an unlimited hard limit (fs.nr_open); `default` where there is none to read."""
    try:
        with open("/proc/sys/fs/nr_open") as source:
            return int(source.read())
    except (OSError, ValueError):
        return default


def check_data_dir(path: str) -> None:
    """Create the data directory if needed and prove it writable, or raise StartupError."""
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise StartupError(f"data directory {path} is not writable: {reason}") from None
