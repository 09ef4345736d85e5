"""A broker for a test suite: `with EmbeddedBroker() as broker: ... broker.bootstrap_servers ...`

The broker listens on a free port of 127.0.0.1 and keeps its data in a temporary directory that `stop()` removes.
It runs either

- in a background thread of the calling process (`mode="thread"`, the default): its own event loop in a daemon
  thread, started in a few milliseconds; the helpers below run on that loop through
  `asyncio.run_coroutine_threadsafe`, or
- as a child process (`mode="subprocess"`): `python -m compatbroker serve --control-listen 127.0.0.1:0`, which
  isolates it from the test process (its own GIL, a crash stays there); the helpers then go through the control
  endpoint (`compatbroker.toolkit.control`).

Both modes offer the same helpers: create topics; inject errors, latency and dropped connections; take the broker
down and up; read what it stored (topics, records, committed offsets, groups of every type) and which requests it
received, and on which node. `restart()` stops and starts it on the same ports and data (fault rules and the
request log start afresh).

`EmbeddedBroker(security=SecuritySetup(...))` (compatbroker.toolkit.security) is a secured broker: one listener per
entry of the setup (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL, ...; each on a free port), its certificates, SASL
users (SCRAM users are stored once it runs), OAUTHBEARER validation and ACLs. `bootstrap_servers_for(listener)`
gives a listener's address and `client_config(family, listener, user=...)` a client library's ready configuration;
`add_user`, `remove_user`, `add_acl` and `remove_acls` change users and ACLs while it runs.

`EmbeddedBroker(metrics_listen="127.0.0.1:0")` also serves Prometheus metrics (`compatbroker.metrics`) at
`metrics_url` (`http://HOST:PORT/metrics`), on the same port again after `restart()`.

`EmbeddedBroker(nodes=3)` is a cluster of three brokers (node ids 0, 1, 2, each on a port of its own, `racks` for
their `broker.rack`) in that one thread or process; `bootstrap_servers` then names every node. The cluster helpers
stop and start a node (its listener closes and leadership fails over, as when a broker dies), isolate one from
replication, delay a follower, move a partition's leader and say who leads it.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Self

from .faults import RequestLogEntry

if TYPE_CHECKING:
    from .security import SecuritySetup

THREAD = "thread"
SUBPROCESS = "subprocess"
MODES = (THREAD, SUBPROCESS)
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
CALL_TIMEOUT_S = 60.0
_LISTENING = re.compile(r"^compatbroker listening on (?P<host>\[[^\]]+\]|[^\s:]+):(?P<port>\d+)$")
_CONTROL = re.compile(r"^compatbroker control on (?P<url>http://\S+)$")
_METRICS = re.compile(r"^compatbroker metrics on (?P<url>http://\S+)$")
# the lines after the first that say where listeners are: other nodes', and each node's further listeners
_NODE_LISTENING = re.compile(r"^compatbroker (node \d+ listening on |(node \d+ )?listener \S+ \(\w+\) on )")


class EmbeddedBrokerError(RuntimeError):
    """The embedded broker did not start, or was used after `stop()`."""


@dataclass(frozen=True)
class TopicSummary:
    name: str
    partitions: int
    topic_id: str
    internal: bool = False


@dataclass(frozen=True)
class NodeSummary:
    """A node of the cluster: `up` when it listens, `alive` for the controller (False once stopped), `isolated`
    from replication, how many partitions it leads, and where each of its listeners is ({name: host:port})."""

    node_id: int
    rack: str | None
    address: str
    up: bool
    alive: bool
    isolated: bool
    leader_of: int
    listeners: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StoredRecord:
    """A record as the broker stored it: key, value and header values are bytes (or None)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


@dataclass(frozen=True)
class GroupSummary:
    """A group as ListGroups shows it: `type` "classic", "consumer" or "share", `state` Kafka's name."""

    group_id: str
    type: str
    state: str
    protocol_type: str


@dataclass(frozen=True)
class TransactionSummary:
    """A transactional id as the transaction coordinator holds it; `state` is Kafka's name ("Ongoing",
    "CompleteCommit", ...), `partitions` those of the open transaction, as (topic, partition)."""

    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int
    partitions: list[tuple[str, int]] = field(default_factory=list)


class EmbeddedBroker:
    def __init__(self, settings: Mapping[str, object] | None = None, *, mode: str = THREAD,
                 data_dir: str | os.PathLike | None = None, host: str = "127.0.0.1", port: int = 0,
                 emulate: str | None = None, control_listen: str | None = None, log_level: str = "WARNING",
                 nodes: int = 1, racks: Sequence[str | None] | None = None, security: SecuritySetup | None = None,
                 metrics_listen: str | None = None):
        """Start a broker. `settings` are broker settings by Kafka name (`{"num.partitions": 3}`); `data_dir`
        keeps the data somewhere of your own (it is then not removed); `emulate` names a Kafka release whose API
        versions the broker advertises; `control_listen` (HOST:PORT) also opens the HTTP control endpoint in
        thread mode (subprocess mode always has one); `log_level` is a subprocess broker's --log-level (a broker
        in a thread logs through this process's `logging`, as `compatbroker.*` loggers). `nodes` > 1 starts a
        cluster of that many brokers (ids 0..nodes-1) on ports counting up from `port` (each a free one when 0),
        `racks` giving each node's broker.rack. `security` makes it a secured broker (see the module docstring):
        its listeners replace the single PLAINTEXT one (`port` is then the first listener's), and `settings` win
        over the setup's. `metrics_listen` (HOST:PORT, port 0 for a free one) serves Prometheus metrics there
        (`metrics_url`)."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
            raise ValueError(f"nodes must be a positive integer, got {nodes!r}")
        if racks is not None and len(racks) != nodes:
            raise ValueError(f"racks must name one rack per node ({nodes}), got {len(racks)}")
        self.mode = mode
        self.nodes = nodes
        self.racks = list(racks) if racks is not None else None
        self.ports: dict[int, int] = {}  # node id -> its port, once started
        self.listener_ports: dict[int, dict[str, int]] = {}  # node id -> {listener name: port}, once started
        self.security = security
        self.settings = dict(security.broker_settings()) if security is not None else {}
        self.settings.update({str(name): str(value) for name, value in (settings or {}).items()})
        self.host = host
        self.port = port
        self.emulate = emulate
        self._control_listen = control_listen
        self._metrics_listen = metrics_listen
        self._log_level = log_level
        self._resources = _Resources(tempfile.mkdtemp(prefix="compatbroker-"))
        self._finalizer = weakref.finalize(self, self._resources.release)
        self.data_dir = os.fspath(data_dir) if data_dir is not None else os.path.join(self._resources.root, "data")
        self._ops = None
        try:
            self._start()
        except BaseException:
            self._finalizer()
            raise

    # --- life cycle -----------------------------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """`host:port` for a client's bootstrap.servers, which is also the address the broker listens on; in a
        cluster every node's, comma-separated (so that a client finds the cluster while some node is stopped)."""
        ports = list(self.ports.values()) or [self.port]
        return ",".join(self._address(port) for port in ports)

    def bootstrap_servers_for(self, listener: str) -> str:
        """`host:port` of a listener (by name: "SSL", "SASL_SSL", ...), every node's in a cluster."""
        self._require_running()
        name = listener.upper()
        missing = [node for node, ports in self.listener_ports.items() if name not in ports]
        if missing:
            known = ", ".join(next(iter(self.listener_ports.values()), {})) or "none"
            raise ValueError(f"no listener {listener!r}; the listeners are {known}")
        return ",".join(self._address(ports[name]) for ports in self.listener_ports.values())

    def client_config(self, family: str, listener: str, **options) -> dict:
        """A ready configuration of a client family for one listener of a secured broker, with its bootstrap
        address: `SecuritySetup.client_config` (options: user, password, mechanism, certificate, ca_file, token)."""
        if self.security is None:
            raise EmbeddedBrokerError("client_config needs a secured broker: EmbeddedBroker(security=SecuritySetup())")
        return self.security.client_config(family, listener, bootstrap=self.bootstrap_servers_for(listener),
                                           **options)

    @property
    def node_ids(self) -> list[int]:
        """The ids of the nodes (a single broker: its node.id, 1 by default)."""
        self._require_running()
        return list(self.ports)

    def _address(self, port: int) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{port}"

    @property
    def control_url(self) -> str | None:
        """The HTTP control endpoint (subprocess mode, or thread mode with `control_listen`), else None."""
        return self._resources.control_url

    @property
    def metrics_url(self) -> str | None:
        """`http://HOST:PORT/metrics` when started with `metrics_listen`, else None."""
        return self._resources.metrics_url

    @property
    def log_path(self) -> str:
        """Where a subprocess broker writes its log (stderr)."""
        return os.path.join(self._resources.root, "broker.log")

    @property
    def running(self) -> bool:
        return self._ops is not None

    def restart(self) -> None:
        """Stop and start again on the same ports and data directory; fault rules and the request log are reset."""
        self._require_running()
        self._stop_broker()
        self._start()

    def stop(self) -> None:
        """Stop the broker and remove its temporary directory. Calling it again does nothing."""
        try:
            if self._ops is not None:
                self._stop_broker()
        finally:
            self._finalizer()

    def __enter__(self) -> Self:
        self._require_running()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def __repr__(self):
        state = self.bootstrap_servers if self.running else "stopped"
        return f"EmbeddedBroker(mode={self.mode!r}, {state})"

    def reset(self) -> None:
        """Clear fault rules and the request log, and bring the broker up if it is down (between tests); in a
        cluster every node fault is undone too (see `restore_nodes`)."""
        self._require_running()
        self._ops.clear_faults()
        self._ops.clear_requests()
        if self.nodes > 1:
            self._ops.restore_nodes()
        elif not self._ops.status()["up"]:
            self._ops.up()

    # --- topics and what is stored --------------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int | None = None, config: Mapping[str, object] | None = None,
                     *, replication_factor: int | None = None) -> TopicSummary:
        """Create a topic (default: num.partitions partitions, default.replication.factor replicas) with
        topic-level config overrides; a topic that exists already is left as it is."""
        found = self._call().create_topic(name, partitions, dict(config or {}) or None, replication_factor)
        return TopicSummary(**found)

    def topics(self, *, include_internal: bool = False) -> dict[str, TopicSummary]:
        return {topic["name"]: TopicSummary(**topic) for topic in self._call().topics()
                if include_internal or not topic["internal"]}

    def records(self, topic: str, partition: int = 0, *, offset: int | None = None,
                limit: int = 1000) -> list[StoredRecord]:
        """The records stored in a partition, from `offset` (default: the first kept), at most `limit`."""
        found = self._call().records(topic, partition, offset, limit)
        return [StoredRecord(r["topic"], r["partition"], r["offset"], r["timestamp"], r["key"], r["value"],
                             [(name, value) for name, value in r["headers"]]) for r in found]

    def committed_offsets(self, group: str) -> dict[tuple[str, int], int]:
        """{(topic, partition): offset} committed by a group (classic or KIP-848 consumer group); for a share
        group, its share-partition start offsets (where its next delivery starts)."""
        return {(entry["topic"], entry["partition"]): entry["offset"]
                for entry in self._call().committed_offsets(group)}

    def groups(self) -> dict[str, GroupSummary]:
        """{group id: its type, state and protocol type} for every group the coordinators know."""
        return {entry["group_id"]: GroupSummary(**entry) for entry in self._call().groups()}

    def describe_group(self, group: str) -> dict:
        """A group of any type as plain data: `type`, `state`, `epoch`, `members` (each with its `assignment` as
        [[topic, partition], ...]), for a share group `start_offsets`; see compatbroker.toolkit.control.groups."""
        return self._call().describe_group(group)

    def telemetry_clients(self) -> list[dict]:
        """What clients pushed with KIP-714 telemetry, one dict per client, newest push first (the fields of
        `compatbroker.telemetry.ClientTelemetry.clients`, as JSON gives them)."""
        return self._call().telemetry_clients() or []

    def transactions(self) -> dict[str, TransactionSummary]:
        """{transactional id: its state} for every transactional id the broker's transaction coordinator knows."""
        found = {}
        for entry in self._call().transactions(None):
            partitions = [(topic, partition) for topic, partition in entry.pop("partitions")]
            found[entry["transactional_id"]] = TransactionSummary(**entry, partitions=partitions)
        return found

    # --- faults ---------------------------------------------------------------------------------------------------

    def inject_error(self, api: str | int, error: str | int, count: int | None = 1,
                     topic: str | None = None) -> dict:
        """Answer the next `count` requests of `api` (those naming `topic`, when given) with `error`, by Kafka's
        name or code, in the form Kafka answers that API with an error; count=None: until cleared."""
        return self._call().inject_error(api, error, count, topic)

    def inject_latency(self, api: str | int | None, ms: float, count: int | None = None) -> dict:
        """Delay requests of `api` (None: of every API) by `ms` before serving them; the next `count` ones, or
        every one until cleared. ms=0 removes the delay."""
        return self._call().inject_latency(api, ms, count)

    def drop_connections_after(self, after: int = 0, api: str | int | None = None,
                               count: int | None = 1) -> dict:
        """Serve `after` more requests (of `api`, when given), then close the connection of the next one without
        answering it; `count` times, or until cleared with count=None."""
        return self._call().drop_connections_after(after, api, count)

    def clear_faults(self) -> None:
        self._call().clear_faults()

    def faults(self) -> dict:
        return self._call().faults()

    def down(self) -> None:
        """Vanish from the network: listeners closed, every client connection cut; data and state are kept."""
        self._call().down()

    def up(self) -> None:
        """Listen again on the same port after `down()`."""
        self._call().up()

    @property
    def is_up(self) -> bool:
        """Every node listens."""
        return bool(self._call().status()["up"])

    # --- nodes of a cluster ---------------------------------------------------------------------------------------

    def nodes_status(self) -> list[NodeSummary]:
        return [NodeSummary(**node) for node in self._call().nodes()]

    def stop_node(self, node_id: int) -> None:
        """Stop a node as a crash would look to clients: leadership fails over (Kafka's rules: a new leader from
        the ISR), its listener closes and its connections are cut. Its data stays for `start_node`."""
        self._call().stop_node(node_id)

    def start_node(self, node_id: int) -> None:
        """Start a stopped node again on its port; it rejoins the ISRs once it has caught up."""
        self._call().start_node(node_id)

    def isolate_node(self, node_id: int, isolated: bool = True) -> None:
        """Cut a node off from replication (clients still reach it): it falls out of the ISRs after
        replica.lag.time.max.ms. `isolated=False` restores it."""
        self._call().isolate_node(node_id, isolated)

    def delay_follower(self, node_id: int, delay_ms: float) -> None:
        """Make a node copy from its leaders `delay_ms` late (0: on time again)."""
        self._call().delay_follower(node_id, delay_ms)

    def move_leader(self, topic: str, partition: int, node_id: int) -> None:
        """Make `node_id`, a live in-sync replica, the partition's leader (its leader epoch goes up by one)."""
        self._call().move_leader(topic, partition, node_id)

    def leader_of(self, topic: str, partition: int = 0) -> int:
        """The node leading the partition now (-1 while it has no leader)."""
        return self.partition_state(topic, partition)["leader"]

    def partition_state(self, topic: str, partition: int = 0) -> dict:
        """The partition as the controller holds it: {"leader", "leader_epoch", "replicas", "isr", ...}."""
        return self._call().leader(topic, partition)

    def restore_nodes(self) -> None:
        """Undo every node fault: stopped nodes start, isolated ones rejoin, delayed ones copy on time."""
        self._call().restore_nodes()

    # --- SCRAM users and ACLs -------------------------------------------------------------------------------------

    def add_user(self, name: str, password: str, mechanisms: Sequence[str] | None = None,
                 iterations: int = 4096) -> dict:
        """Store SCRAM credentials of a user (default: SCRAM-SHA-256 and SCRAM-SHA-512)."""
        return self._call().add_user(name, password, list(mechanisms) if mechanisms is not None else None,
                                     iterations)

    def remove_user(self, name: str, mechanisms: Sequence[str] | None = None) -> dict:
        return self._call().remove_user(name, list(mechanisms) if mechanisms is not None else None)

    def users(self) -> dict[str, list[dict]]:
        """{user: [{"mechanism", "iterations"}]} of the SCRAM credential store."""
        return self._call().users()

    def add_acl(self, resource_type: str, name: str, principal: str, operation: str, *,
                pattern_type: str = "LITERAL", host: str = "*", permission: str = "ALLOW") -> list[dict]:
        """Add one ACL binding, names as Kafka's (e.g. add_acl("TOPIC", "orders-", "User:alice", "READ",
        pattern_type="PREFIXED")); answers it ([] when it existed)."""
        return self.add_acls([{"resource_type": resource_type, "name": name, "pattern_type": pattern_type,
                               "principal": principal, "host": host, "operation": operation,
                               "permission": permission}])

    def add_acls(self, acls: Sequence[Mapping[str, object]]) -> list[dict]:
        return self._call().add_acls([dict(acl) for acl in acls])

    def acls(self, **acl_filter) -> list[dict]:
        """The ACL bindings matching a filter (resource_type, name, pattern_type, principal, host, operation,
        permission; left out: any)."""
        return self._call().acls(*_acl_filter_args(acl_filter))

    def remove_acls(self, **acl_filter) -> list[dict]:
        """Remove the ACL bindings matching the filter (as `acls`); answers them."""
        return self._call().remove_acls(*_acl_filter_args(acl_filter))

    # --- the request log ------------------------------------------------------------------------------------------

    def requests(self, since: int = 0, api: str | int | None = None) -> list[RequestLogEntry]:
        """Requests received (numbered above `since`, of `api` when given), oldest first."""
        return [RequestLogEntry.from_dict(entry) for entry in self._call().requests(since, api)]

    def clear_requests(self) -> None:
        self._call().clear_requests()

    # --- internals ------------------------------------------------------------------------------------------------

    def _call(self):
        self._require_running()
        return self._ops

    def _require_running(self) -> None:
        if self._ops is None:
            raise EmbeddedBrokerError("the embedded broker is stopped")

    def _start(self) -> None:
        if self.mode == THREAD:
            self._start_thread()
        else:
            self._start_subprocess()

    def _stop_broker(self) -> None:
        self._ops = None
        self._resources.stop_broker()

    def _start_thread(self) -> None:
        from ..config import BrokerConfig, ConfigError, Endpoint
        from ..server.run import ClusterRuntime, StartupError
        from .control.operations import ControlOperations
        from .runtime import toolkit_for

        overrides = [f"{name}={value}" for name, value in self._settings_with_listeners().items()]
        try:
            config = BrokerConfig.from_sources(overrides=overrides, listen=None if self.security is not None else
                                               self._address(self.port), data_dir=self.data_dir)
            toolkit = toolkit_for(emulate=self.emulate, control_listen=self._control_listen, record_requests=True)
        except (ConfigError, StartupError) as exc:
            raise EmbeddedBrokerError(str(exc)) from None
        listeners = None
        if self.nodes > 1 and self.listener_ports:  # a restart: every node on its ports again
            listeners = [tuple(Endpoint(name, self.host, port) for name, port in ports.items())
                         for ports in self.listener_ports.values()]
        options = toolkit.runtime_options()
        exporter = None
        if self._metrics_listen is not None:
            from ..metrics.exporter import MetricsExporter
            exporter = MetricsExporter(self._metrics_listen)
            options["services"] = [*options["services"], exporter]
        runtime = ClusterRuntime(config, nodes=self.nodes, racks=self.racks, node_listeners=listeners, **options)
        loop_thread = self._resources.loop_thread()
        try:
            loop_thread.call(runtime.start(), START_TIMEOUT_S)
        except StartupError as exc:
            raise EmbeddedBrokerError(str(exc)) from None
        self._resources.runtime = runtime
        self._resources.control_url = toolkit.control.url if toolkit.control is not None else None
        self._metrics_started(exporter.url if exporter is not None else None)
        self._ops = _OnLoop(loop_thread, ControlOperations(runtime, toolkit.injector))
        self._started()

    def _start_subprocess(self) -> None:
        from .control.client import ControlClient

        command = [sys.executable, "-m", "compatbroker", "serve", "--data-dir", self.data_dir,
                   "--control-listen", self._control_listen or "127.0.0.1:0", "--log-level", self._log_level]
        command += self._listen_options()
        if self.nodes > 1:
            command += ["--nodes", str(self.nodes)]
            if self.racks is not None:
                command += ["--racks", ",".join(rack or "" for rack in self.racks)]
        for name, value in self._settings_with_listeners().items():
            command += ["--set", f"{name}={value}"]
        if self.emulate is not None:
            command += ["--emulate", self.emulate]
        if self._metrics_listen is not None:
            command += ["--metrics-listen", self._metrics_listen]
        url, metrics_url = self._resources.start_process(command, self.log_path,
                                                         metrics=self._metrics_listen is not None)
        self._resources.control_url = url
        self._metrics_started(metrics_url)
        self._ops = ControlClient(url, timeout_s=CALL_TIMEOUT_S)
        self._started()

    def _metrics_started(self, url: str | None) -> None:
        """Remember where metrics are served; a restart listens on the same port again."""
        self._resources.metrics_url = url
        if url is not None:
            self._metrics_listen = url.removeprefix("http://").removesuffix("/metrics")

    def _settings_with_listeners(self) -> dict[str, str]:
        """The settings, with a secured broker's `listeners` (on their ports again after a first start)."""
        if self.security is None or "listeners" in self.settings:
            return self.settings
        ports = next(iter(self.listener_ports.values()), None)
        if ports is None and self.port:
            ports = {next(iter(self.security.listener_protocols)): self.port}
        return {**self.settings, "listeners": self.security.listeners_setting(self.host, ports)}

    def _listen_options(self) -> list[str]:
        """`--listen` options of the broker process: a restarted cluster's nodes each on their ports again; a
        plain broker on its port; a secured single broker takes its listeners from the settings."""
        if self.nodes > 1 and self.listener_ports:
            return [option for ports in self.listener_ports.values()
                    for option in ("--listen", ",".join(f"{name}://{self._address(port)}"
                                                        for name, port in ports.items()))]
        return [] if self.security is not None else ["--listen", self._address(self.port)]

    def _started(self) -> None:
        """Learn the ports; a secured broker's SCRAM users go into its credential store."""
        self._learn_ports()
        if self.security is not None:
            users: dict[str, tuple[str, list[str]]] = {}
            for user, mechanism, password in self.security.scram_users():
                users.setdefault(user, (password, []))[1].append(mechanism)
            for user, (password, mechanisms) in users.items():
                self._ops.add_user(user, password, mechanisms, 4096)

    def _learn_ports(self) -> None:
        """Each node's port and listeners' ports, as the running broker reports them; `port` is the first node's."""
        nodes = self._ops.nodes()
        self.ports = {node["node_id"]: int(node["address"].rpartition(":")[2]) for node in nodes}
        self.listener_ports = {node["node_id"]: {name: int(address.rpartition(":")[2])
                                                 for name, address in node["listeners"].items()} for node in nodes}
        self.port = next(iter(self.ports.values()))


class _OnLoop:
    """ControlOperations called from another thread: each call runs on the broker's loop and waits for it."""

    def __init__(self, loop_thread: _LoopThread, operations):
        self._loop_thread = loop_thread
        self._operations = operations

    def __getattr__(self, name):
        operation = getattr(self._operations, name)

        def call(*args):
            return self._loop_thread.call(operation(*args), CALL_TIMEOUT_S)

        return call


class _LoopThread:
    """An event loop running in a daemon thread until `close()`."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="compatbroker-embedded", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            with contextlib.suppress(Exception):
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
                self.loop.run_until_complete(self.loop.shutdown_default_executor())
            self.loop.close()

    def call(self, coroutine, timeout_s: float):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout_s)

    def close(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(STOP_TIMEOUT_S)


class _Resources:
    """What an EmbeddedBroker holds outside Python objects (a loop thread or a child process, a temporary
    directory), kept apart from it so that a finalizer can release them when the broker is never stopped."""

    def __init__(self, root: str):
        self.root = root
        self.control_url: str | None = None
        self.metrics_url: str | None = None
        self.runtime = None  # the ClusterRuntime on the loop thread (thread mode)
        self._loop_thread: _LoopThread | None = None
        self._process: subprocess.Popen | None = None

    def stop_broker(self) -> None:
        """Stop the running broker (thread or process), keeping the loop thread and the directory."""
        runtime, self.runtime = self.runtime, None
        if runtime is not None:
            self._loop_thread.call(runtime.stop(), STOP_TIMEOUT_S + 5)
        self.stop_process()

    def loop_thread(self) -> _LoopThread:
        if self._loop_thread is None:
            self._loop_thread = _LoopThread()
        return self._loop_thread

    def start_process(self, command: list[str], log_path: str, *, metrics: bool = False) -> tuple[str, str | None]:
        """Start the broker process and wait for its ready lines (where each node and listener listens, then the
        services': the control endpoint and, with `metrics`, the metrics endpoint, in either order); the control
        URL and the metrics URL."""
        with open(log_path, "ab") as log:
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL)
        self._process = process
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=_forward_lines, args=(process.stdout, lines), daemon=True).start()
        control = metrics_url = None
        try:
            if _LISTENING.match(lines.get(timeout=START_TIMEOUT_S) or ""):
                line = lines.get(timeout=START_TIMEOUT_S) or ""
                while _NODE_LISTENING.match(line):
                    line = lines.get(timeout=START_TIMEOUT_S) or ""
                while line:  # the services' lines, up to the last one expected
                    if (found := _METRICS.match(line)) is not None:
                        metrics_url = found["url"]
                    else:
                        control = _CONTROL.match(line) or control
                    if control is not None and (metrics_url is not None or not metrics):
                        break
                    line = lines.get(timeout=START_TIMEOUT_S) or ""
        except queue.Empty:
            pass
        if control is None or (metrics and metrics_url is None):
            self.stop_process()
            raise EmbeddedBrokerError(f"the broker process did not start: {_tail(log_path)}")
        return control["url"], metrics_url

    def stop_process(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def release(self) -> None:
        """Stop whatever still runs and remove the temporary directory."""
        with contextlib.suppress(Exception):  # releasing at exit: the directory must go whatever happened
            self.stop_broker()
        if self._loop_thread is not None:
            self._loop_thread.close()
            self._loop_thread = None
        shutil.rmtree(self.root, ignore_errors=True)


def _acl_filter_args(acl_filter: Mapping[str, object]) -> tuple:
    """The ACL filter's fields in the order the control operations take them."""
    fields = ("resource_type", "name", "pattern_type", "principal", "host", "operation", "permission")
    unknown = sorted(set(acl_filter) - set(fields))
    if unknown:
        raise TypeError(f"an ACL filter has {', '.join(fields)}; unknown: {', '.join(unknown)}")
    return tuple(acl_filter.get(name) for name in fields)


def _forward_lines(stream, lines: queue.Queue) -> None:
    """Hand the process's stdout lines over; keep reading so that it never blocks on a full pipe."""
    for raw in stream:
        lines.put(raw.decode(errors="replace").rstrip("\n"))
    lines.put(None)


def _tail(path: str, size: int = 2000) -> str:
    try:
        with open(path, "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - size))
            return log.read().decode(errors="replace").strip() or "(no output)"
    except OSError:
        return "(no log)"
