"""`compatbroker serve`: start the broker (or a cluster of brokers), print where it listens, and stop cleanly on
SIGTERM or SIGINT.

Order of start-up: check the data directory, bind every node's listeners (a port in use is reported before the
data directory is touched further), load the logs, then accept and print the line
`compatbroker listening on HOST:PORT` for the first node and, in a cluster (`--nodes N`), one line
`compatbroker node ID listening on HOST:PORT` for each other node. Each service passed in (the toolkit's control
endpoint, `--control-listen`) then starts and may print a line of its own (`compatbroker control on
http://HOST:PORT`). A failure at any step is one line on stderr and exit status 1.

`ClusterRuntime` is that start-up and shutdown without the signals and the printing: the embedded broker of the
toolkit runs one on an event loop of its own. It builds the cluster (`compatbroker.broker.build_cluster`: one
node, today's broker and layout, unless `nodes` > 1) and one `Server` per node, and takes a node off the network
and back (`stop_node`, `start_node`) for tests of clients. Its start raises the process's soft limit of open files
to the hard limit (connections and partitions each hold descriptors) and logs the figure. What the testing toolkit
adds (request hooks for faults and the request log, a handler registry emulating a Kafka release with the
`transaction.version` level that release finalizes, the control endpoint) comes in as arguments (see `hooks`): this
module never imports the toolkit.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import resource
import signal
import sys
import tempfile
from collections.abc import Mapping, Sequence
from types import ModuleType

from .. import dynamic_config
from ..broker import Broker, build_cluster
from ..cluster import Cluster
from ..config import BrokerConfig, ConfigError, Endpoint, format_host_port, parse_endpoint
from ..storage import StorageError
from ..telemetry import telemetry_of
from .hooks import RequestHooks, RuntimeService
from .listeners import ListenError
from .server import Server

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_STARTUP_FAILED = 1
_MAX_PORT = 65535


class StartupError(Exception):
    """The broker cannot start; the message is the one line the user sees."""


def run(config: BrokerConfig, **runtime_options) -> int:
    """Serve until SIGTERM or SIGINT; returns the process exit status. `runtime_options` go to `ClusterRuntime`."""
    try:
        return asyncio.run(serve(config, **runtime_options))
    except StartupError as exc:
        print(f"compatbroker: {exc}", file=sys.stderr)
        return EXIT_STARTUP_FAILED


async def serve(config: BrokerConfig, **runtime_options) -> int:
    """Start, print where each node listens and the services' lines, and serve until a stop signal."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    runtime = ClusterRuntime(config, **runtime_options)
    await runtime.start()
    for line in runtime.listening_lines():
        print(line, flush=True)
    for line in runtime.service_lines:
        print(line, flush=True)
    await stop.wait()
    log.info("shutting down")
    await runtime.stop()
    log.info("stopped")
    return EXIT_OK


def cluster_listeners(config: BrokerConfig, nodes: int, listens: Sequence[str] = ()
                      ) -> list[tuple[Endpoint, ...]]:
    """Each node's listeners. `listens` gives them one node each (HOST:PORT, or NAME://HOST:PORT,... for several
    listeners, as `--listen` takes them; e.g. 127.0.0.1:9092, 127.0.0.2:9092, 127.0.0.3:9092); with none or one,
    every node gets the configured listeners with the ports counting up from them (port 0 stays 0: each node
    binds a free port). ConfigError when the count or an address is wrong."""
    if len(listens) > 1:
        if len(listens) != nodes:
            raise ConfigError(f"--listen: give one address for every node, or one per node ({nodes}), "
                              f"got {len(listens)}")
        try:
            return [tuple(parse_endpoint(item) for item in listen.split(",")) for listen in listens]
        except ValueError as exc:
            raise ConfigError(f"--listen: {exc}") from None
    per_node = []
    for index in range(nodes):
        endpoints = []
        for endpoint in config.listeners:
            port = endpoint.port + index if endpoint.port else 0
            if port > _MAX_PORT:
                raise ConfigError(f"--listen: node {index} would listen on port {port}, above {_MAX_PORT}")
            endpoints.append(dataclasses.replace(endpoint, port=port))
        per_node.append(tuple(endpoints))
    return per_node


class ClusterRuntime:
    """A cluster's nodes and their servers, with the services and request hooks given, started and stopped
    together on the running event loop.

    `nodes` > 1 makes a cluster of brokers with ids 0..nodes-1 or `node_ids` (racks from `racks`, listeners from
    `node_listeners`, default `cluster_listeners(config, nodes)`); 1 is the single broker of `config`. `handlers`
    replaces the default handler registry; `finalized_transaction_version` the `transaction.version` level the
    cluster finalizes (default: the broker's own); `emulated_release` the Kafka release the toolkit's `--emulate`
    stands in for (the nodes' `emulated_release`: Kafka 3.x's topic configs are then accepted)."""

    def __init__(self, config: BrokerConfig, *, nodes: int = 1, node_ids: Sequence[int] | None = None,
                 racks: Sequence[str | None] | None = None,
                 node_listeners: Sequence[tuple[Endpoint, ...]] | None = None,
                 handlers: Mapping[int, ModuleType] | None = None, hooks: RequestHooks | None = None,
                 services: Sequence[RuntimeService] = (), finalized_transaction_version: int | None = None,
                 emulated_release: str | None = None):
        if nodes < 1:
            raise ValueError(f"a cluster needs at least one node, got {nodes}")
        self.config = config
        self.nodes = nodes
        self.node_id_list = list(node_ids) if node_ids is not None else None  # default: 0..nodes-1
        self.racks = list(racks) if racks is not None else None
        self.node_listeners = list(node_listeners) if node_listeners is not None else None
        self.handlers = handlers
        self.hooks = hooks
        self.services = list(services)
        self.finalized_transaction_version = finalized_transaction_version
        self.emulated_release = emulated_release
        self.service_lines: list[str] = []  # what the services asked to print once started
        self.cluster: Cluster | None = None
        self.servers: dict[int, Server] = {}  # node id -> its server, in id order
        self._started_services: list[RuntimeService] = []

    # --- life cycle -----------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start serving, or raise StartupError with nothing left open."""
        config = self.config
        check_data_dir(config.data_dir)
        open_files = raise_open_files_limit()
        cluster = self._build_cluster()
        try:
            cluster.security.open()
        except (OSError, ValueError) as exc:  # a key, certificate, trust store, JWKS file or stored ACLs unusable
            raise StartupError(f"cannot set up security: {exc}") from None
        servers = {node_id: Server(node, self.handlers, self.hooks) for node_id, node in cluster.nodes.items()}
        try:
            for server in servers.values():
                server.bind()
        except ListenError as exc:
            _close_listeners(servers)
            raise StartupError(str(exc)) from None
        try:
            telemetry_of(cluster)  # reads the client metrics subscriptions
            cluster.startup()
        except (StorageError, OSError, ValueError) as exc:  # an unusable or foreign data directory
            _close_listeners(servers)
            raise StartupError(f"cannot load the data directory {config.data_dir}: {exc}") from None
        self.cluster, self.servers = cluster, servers
        for server in servers.values():  # the connection limits follow the dynamic broker configs
            dynamic_config.watch_connection_quotas(server)
        cluster.start_background_work()
        for server in servers.values():
            server.start_accepting()
        await self._start_services()
        for node_id, server in servers.items():
            log.info("node %d of cluster %s serving %s from %s", node_id, server.broker.cluster_id,
                     ", ".join(bound.display() for bound in server.listeners), server.broker.config.data_dir)
        log.info("open files limit: %s", open_files)

    def _build_cluster(self) -> Cluster:
        try:
            if self.nodes == 1:
                cluster = build_cluster(self.config)
            else:
                listeners = self.node_listeners or cluster_listeners(self.config, self.nodes)
                cluster = build_cluster(self.config, nodes=self.nodes, node_ids=self.node_id_list, racks=self.racks,
                                        node_listeners=listeners)
        except (ConfigError, ValueError) as exc:
            raise StartupError(str(exc)) from None
        for node in cluster.nodes.values():
            if self.finalized_transaction_version is not None:
                node.finalized_transaction_version = self.finalized_transaction_version
            node.emulated_release = self.emulated_release
        return cluster

    async def _start_services(self) -> None:
        for service in self.services:
            try:
                line = await service.start(self)
            except StartupError:
                await self.stop()
                raise
            self._started_services.append(service)
            if line:
                self.service_lines.append(line)

    async def stop(self) -> None:
        """Stop the services, then the servers (answering what they have read), then the nodes."""
        while self._started_services:
            await self._started_services.pop().stop()
        if self.servers:
            await asyncio.gather(*(server.stop() for server in self.servers.values()))
        if self.cluster is not None:
            await self.cluster.shutdown()
        self.servers, self.cluster = {}, None

    # --- what it serves -------------------------------------------------------------------------------------------

    @property
    def broker(self) -> Broker | None:
        """The first node (the only one of a single broker)."""
        return next(iter(self.cluster.nodes.values())) if self.cluster is not None else None

    @property
    def client_telemetry(self):
        """The cluster's client telemetry (KIP-714, compatbroker.telemetry.ClientTelemetry); None when stopped."""
        return telemetry_of(self.cluster) if self.cluster is not None else None

    @property
    def server(self) -> Server | None:
        """The first node's server."""
        return next(iter(self.servers.values())) if self.servers else None

    @property
    def node_ids(self) -> list[int]:
        return list(self.servers)

    def node(self, node_id: int) -> Broker:
        """The node `node_id` (ValueError when there is none)."""
        self._server_of(node_id)
        return self.cluster.nodes[node_id]

    def address_of(self, node_id: int, listener_name: str | None = None) -> str:
        """`host:port` of a node's listener (default: its first), where a client on this machine reaches it."""
        listeners = self._server_of(node_id).listeners
        bound = listeners[0] if listener_name is None else \
            next((bound for bound in listeners if bound.endpoint.name == listener_name.upper()), None)
        if bound is None:
            raise ValueError(f"node {node_id} has no listener named {listener_name}")
        host = bound.endpoint.host
        if bound.endpoint.is_wildcard or host == "localhost":
            host = "127.0.0.1"
        return format_host_port(host, bound.port)

    def bootstrap_servers_for(self, listener_name: str | None = None) -> str:
        """`host:port` of every node's listener of that name (default: the first), comma-separated."""
        return ",".join(self.address_of(node_id, listener_name) for node_id in self.servers)

    @property
    def bootstrap_servers(self) -> str:
        """`host:port` of every node's first listener, comma-separated: the addresses clients bootstrap from."""
        return self.bootstrap_servers_for()

    def listening_lines(self) -> list[str]:
        """What `serve` prints: the first node's line as a single broker prints it, then one per other node; a
        node with several listeners then names each further one with its security protocol."""
        lines = []
        for index, (node_id, server) in enumerate(self.servers.items()):
            node = "compatbroker" if index == 0 else f"compatbroker node {node_id}"
            lines.append(f"{node} listening on {server.listeners[0].display()}")
            for bound in server.listeners[1:]:
                protocol = self.config.security_protocol(bound.endpoint)
                lines.append(f"{node} listener {bound.endpoint.name} ({protocol}) on {bound.display()}")
        return lines

    # --- nodes down and up (tests of clients) ---------------------------------------------------------------------

    async def stop_node(self, node_id: int) -> None:
        """Stop a node as a crash would, seen from outside: the controller fences it (leadership fails over per
        Kafka's rules) and its listeners close and its connections are cut. Its state stays for `start_node`."""
        server = self._server_of(node_id)
        self.cluster.stop_node(node_id)
        await server.go_down()

    def start_node(self, node_id: int) -> None:
        """Bring a stopped node back: it listens on the same ports again and the controller unfences it (it
        rejoins the ISRs once caught up). ListenError when a port was taken meanwhile (the node stays down)."""
        server = self._server_of(node_id)
        server.come_up()
        self.cluster.start_node(node_id)

    def node_is_up(self, node_id: int) -> bool:
        return not self._server_of(node_id).is_down

    def _server_of(self, node_id: int) -> Server:
        server = self.servers.get(node_id)
        if server is None:
            known = ", ".join(map(str, self.servers)) or "none (not started)"
            raise ValueError(f"no node {node_id}; the nodes are {known}")
        return server


def _close_listeners(servers: Mapping[int, Server]) -> None:
    for server in servers.values():
        server.close_listeners()


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
