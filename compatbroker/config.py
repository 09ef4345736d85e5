"""The broker's configuration: one typed object built from Kafka's configuration names.

Sources, later ones winning: Kafka's defaults (with the deviations below), a `server.properties` file
(`--config`), `--set name=value` overrides, and the command line's own options (`--listen`,
`--advertised-listener`, `--data-dir`, which stand for `listeners`, `advertised.listeners` and `log.dirs`).
An unknown name is an error, so that a typo never passes silently.

Broker-level settings become snake-case attributes (`config.num_partitions`, `config.auto_create_topics_enable`,
...); `config.get(name)` answers any accepted name, including the storage ones (`log.retention.ms`, ...), which
`compatbroker.storage.log_config` owns and validates.

Deviations from Kafka's defaults, chosen for development machines:
- `listeners` is `PLAINTEXT://localhost:9092` (Kafka: every interface), bound on both IPv4 and IPv6 loopback;
- `log.dirs` is a per-user data directory (`$XDG_DATA_HOME/compatbroker` or `~/.local/share/compatbroker`);
- `node.id` is 1 (Kafka has no default);
- `group.initial.rebalance.delay.ms` is 0 (Kafka: 3000), so that a consumer group forms at once.
- `group.consumer.heartbeat.interval.ms` and `group.consumer.min.heartbeat.interval.ms` are 500 (Kafka: 5000): a
  KIP-848 member learns of partitions another member released only from its next heartbeat, so a group of
  consumer-protocol members settles within about half a second instead of five.

Security settings (TLS, SASL, authorization; some also per listener as `listener.name.<listener>.<name>`) are
`compatbroker.security.settings`'s, typed per listener in `config.security`.

Some names of Kafka's own `server.properties` (KRaft roles, thread counts, replication of internal topics) are
accepted and ignored, so that such a file can be used as it is; see `IGNORED`, and `WITHOUT_EFFECT` for the dynamic
broker configs that tune parts compatbroker does not have.

The dynamic broker configs (`compatbroker.dynamic_config`) make a node's configuration in force a new BrokerConfig:
the static properties with the dynamic ones laid over them.
"""
from __future__ import annotations

import dataclasses
import difflib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .config_values import parse_bool as _parse_bool, parse_int as _parse_int, parse_list as _parse_list
from .config_values import parse_optional_str as _parse_optional_str
from .security.settings import MECHANISM_NAMES, SecuritySettings, is_security_name, security_names, security_settings
from .storage.log_config import SETTINGS_BY_NAME, ConfigError, LogConfig, StorageConfig

__all__ = ["BrokerConfig", "ConfigError", "Endpoint", "default_data_dir", "load_properties", "parse_endpoint",
           "parse_properties"]


_WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})


@dataclass(frozen=True)
class Endpoint:
    """One listener: its name (which maps to a security protocol), host and port. An empty host means every
    interface; port 0 means a free port chosen when binding."""

    name: str
    host: str
    port: int

    def host_port(self) -> str:
        return format_host_port(self.host, self.port)

    @property
    def is_wildcard(self) -> bool:
        """Every interface: a host to bind, not an address a client can connect to."""
        return self.host in _WILDCARD_HOSTS


def format_host_port(host: str, port: int) -> str:
    """`host:port`, with an IPv6 literal in brackets so that the port stays unambiguous."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def default_data_dir() -> str:
    base = os.environ.get("XDG_DATA_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "compatbroker")


# --- value parsers ------------------------------------------------------------------------------------------------

_HOST_PATTERN = re.compile(r"[0-9A-Za-z\-%._:]+")


def _parse_per_ip_overrides(value: Any) -> dict[str, int]:
    """`host:count,...` (Kafka: `hostName:100,127.0.0.1:200`); the count follows the last colon, so that an IPv6
    address needs no brackets."""
    if isinstance(value, Mapping):
        return {str(host): _parse_int(count) for host, count in value.items()}
    overrides = {}
    for item in _parse_list(value):
        host, sep, count = item.rpartition(":")
        host = host.strip().removeprefix("[").removesuffix("]")
        if not sep or not _HOST_PATTERN.fullmatch(host):
            raise ValueError(f"{item!r} is not HOST:COUNT")
        overrides[host] = _parse_int(count)
    return overrides


_LISTENER_NAME = re.compile(r"[A-Za-z0-9_]+")


def parse_endpoint(text: str, default_name: str = "PLAINTEXT") -> Endpoint:
    """`NAME://HOST:PORT` or `HOST:PORT` (IPv6 hosts in brackets; an empty host means every interface)."""
    text = text.strip()
    name, sep, rest = text.partition("://")
    if not sep:
        name, rest = default_name, text
    if not _LISTENER_NAME.fullmatch(name):
        raise ValueError(f"bad listener name in {text!r}")
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{text!r} is not HOST:PORT with a port from 0 to 65535")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"{text!r}: put an IPv6 address in brackets, as in [::1]:9092")
    return Endpoint(name.upper(), host, int(port))


def _parse_endpoints(value: Any) -> tuple[Endpoint, ...]:
    if isinstance(value, Endpoint):
        return (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(item, Endpoint) for item in value):
        return tuple(value)
    return tuple(parse_endpoint(item) for item in _parse_list(value))


def _parse_protocol_map(value: Any) -> dict[str, str]:
    mapping = {}
    for item in _parse_list(value):
        name, sep, protocol = item.partition(":")
        if not sep or not name.strip() or not protocol.strip():
            raise ValueError(f"{item!r} is not NAME:PROTOCOL")
        mapping[name.strip().upper()] = protocol.strip().upper()
    return mapping


def _parse_assignors(value: Any) -> tuple[str, ...]:
    """`group.consumer.assignors`: the server assignors Kafka ships, by name (uniform, range) or class name."""
    names = []
    for item in _parse_list(value):
        name = item.rsplit(".", 1)[-1].removesuffix("Assignor").lower()
        if name not in ("uniform", "range"):
            raise ValueError(f"unknown assignor {item} (Kafka ships uniform and range)")
        if name in names:
            raise ValueError("values must not be duplicated")
        names.append(name)
    if not names:
        raise ValueError("at least one assignor is needed")
    return tuple(names)


def _parse_rebalance_protocols(value: Any) -> tuple[str, ...]:
    """`group.coordinator.rebalance.protocols`: Kafka's group types (`share` is accepted and means nothing: share
    groups follow the share.version feature, as in Kafka 4.2); `classic` cannot be left out."""
    protocols = tuple(dict.fromkeys(item.strip().lower() for item in _parse_list(value)))
    for protocol in protocols:
        if protocol not in ("consumer", "classic", "share", "streams"):
            raise ValueError("String must be one of: consumer, classic, share, streams")
    if "classic" not in protocols:
        raise ValueError("Disabling the 'classic' protocol is not supported.")
    return protocols


def _parse_migration_policy(value: Any) -> str:
    policy = str(value).strip().lower()
    if policy not in ("disabled", "upgrade", "downgrade", "bidirectional"):
        raise ValueError("must be one of (case insensitive): DISABLED, UPGRADE, DOWNGRADE, BIDIRECTIONAL")
    return policy


# --- the settings the broker itself reads -------------------------------------------------------------------------

@dataclass(frozen=True)
class _Setting:
    name: str
    parse: Callable[[Any], Any]
    default: Any
    minimum: int | None = None
    maximum: int | None = None

    @property
    def attribute(self) -> str:
        return self.name.replace(".", "_")


_SETTINGS = (
    _Setting("listeners", _parse_endpoints, (Endpoint("PLAINTEXT", "localhost", 9092),)),
    _Setting("advertised.listeners", _parse_endpoints, ()),
    _Setting("listener.security.protocol.map", _parse_protocol_map,
             {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL"}),
    _Setting("controller.listener.names", _parse_list, ()),
    _Setting("log.dirs", _parse_list, ()),
    _Setting("log.dir", str, ""),
    _Setting("node.id", _parse_int, 1, 0),
    _Setting("num.partitions", _parse_int, 1, 1),
    _Setting("default.replication.factor", _parse_int, 1, 1),
    _Setting("auto.create.topics.enable", _parse_bool, True),
    _Setting("socket.request.max.bytes", _parse_int, 104_857_600, 1),
    _Setting("queued.max.requests", _parse_int, 500, 1),
    _Setting("queued.max.request.bytes", _parse_int, -1),  # 0 or less: no bound
    _Setting("max.connections", _parse_int, 2**31 - 1, 0),
    _Setting("max.connections.per.ip", _parse_int, 2**31 - 1, 0),
    _Setting("max.connections.per.ip.overrides", _parse_per_ip_overrides, {}),
    _Setting("connections.max.idle.ms", _parse_int, 600_000),  # negative: never close idle connections
    _Setting("message.max.bytes", _parse_int, 1_048_588, 0),
    _Setting("max.incremental.fetch.session.cache.slots", _parse_int, 1000, 0),
    _Setting("group.initial.rebalance.delay.ms", _parse_int, 0, 0),
    _Setting("group.min.session.timeout.ms", _parse_int, 6000, 0),
    _Setting("group.max.session.timeout.ms", _parse_int, 1_800_000, 0),
    _Setting("group.max.size", _parse_int, 2**31 - 1, 1),
    # KIP-848 consumer groups and KIP-932 share groups (typed views: compatbroker/coordinator/settings.py)
    _Setting("group.coordinator.rebalance.protocols", _parse_rebalance_protocols, ("classic", "consumer", "streams")),
    _Setting("group.consumer.session.timeout.ms", _parse_int, 45_000, 1),
    _Setting("group.consumer.min.session.timeout.ms", _parse_int, 45_000, 1),
    _Setting("group.consumer.max.session.timeout.ms", _parse_int, 60_000, 1),
    _Setting("group.consumer.heartbeat.interval.ms", _parse_int, 500, 1),  # Kafka: 5000 (see module doc)
    _Setting("group.consumer.min.heartbeat.interval.ms", _parse_int, 500, 1),  # Kafka: 5000
    _Setting("group.consumer.max.heartbeat.interval.ms", _parse_int, 15_000, 1),
    _Setting("group.consumer.max.size", _parse_int, 2**31 - 1, 1),
    _Setting("group.consumer.assignors", _parse_assignors, ("uniform", "range")),
    _Setting("group.consumer.migration.policy", _parse_migration_policy, "bidirectional"),
    _Setting("group.share.session.timeout.ms", _parse_int, 45_000, 1),
    _Setting("group.share.min.session.timeout.ms", _parse_int, 45_000, 1),
    _Setting("group.share.max.session.timeout.ms", _parse_int, 60_000, 1),
    _Setting("group.share.heartbeat.interval.ms", _parse_int, 5_000, 1),
    _Setting("group.share.min.heartbeat.interval.ms", _parse_int, 5_000, 1),
    _Setting("group.share.max.heartbeat.interval.ms", _parse_int, 15_000, 1),
    _Setting("group.share.max.size", _parse_int, 200, 1, 1000),
    _Setting("group.share.record.lock.duration.ms", _parse_int, 30_000, 1000, 3_600_000),
    _Setting("group.share.min.record.lock.duration.ms", _parse_int, 15_000, 1000, 30_000),
    _Setting("group.share.max.record.lock.duration.ms", _parse_int, 60_000, 30_000, 3_600_000),
    _Setting("group.share.delivery.count.limit", _parse_int, 5, 2, 10),
    _Setting("group.share.partition.max.record.locks", _parse_int, 2000, 100, 10_000),
    _Setting("group.share.max.share.sessions", _parse_int, 2000, 1),
    _Setting("share.coordinator.state.topic.num.partitions", _parse_int, 50, 1),
    _Setting("share.coordinator.state.topic.segment.bytes", _parse_int, 104_857_600, 1),
    _Setting("share.coordinator.state.topic.replication.factor", _parse_int, 3, 1),
    _Setting("share.coordinator.state.topic.min.isr", _parse_int, 2, 1),
    _Setting("offsets.topic.num.partitions", _parse_int, 50, 1),
    _Setting("offsets.topic.segment.bytes", _parse_int, 104_857_600, 1),
    _Setting("offsets.retention.minutes", _parse_int, 10_080, 1),
    _Setting("offsets.retention.check.interval.ms", _parse_int, 600_000, 1),
    _Setting("offset.metadata.max.bytes", _parse_int, 4096, 0),
    _Setting("producer.id.expiration.ms", _parse_int, 86_400_000, 1),
    _Setting("producer.id.expiration.check.interval.ms", _parse_int, 600_000, 1),
    _Setting("transactional.id.expiration.ms", _parse_int, 604_800_000, 1),
    _Setting("transaction.max.timeout.ms", _parse_int, 900_000, 1),
    _Setting("transaction.remove.expired.transaction.cleanup.interval.ms", _parse_int, 3_600_000, 1),
    _Setting("transaction.abort.timed.out.transaction.cleanup.interval.ms", _parse_int, 10_000, 1),
    _Setting("transaction.state.log.num.partitions", _parse_int, 50, 1),
    _Setting("transaction.state.log.segment.bytes", _parse_int, 104_857_600, 1),
    _Setting("transaction.state.log.load.buffer.size", _parse_int, 5_242_880, 1),
    _Setting("transaction.partition.verification.enable", _parse_bool, True),
    _Setting("add.partitions.to.txn.retry.backoff.ms", _parse_int, 20, 1),
    _Setting("add.partitions.to.txn.retry.backoff.max.ms", _parse_int, 100, 0),
    # cluster mode (compatbroker.cluster): placement, replication, elections
    _Setting("broker.rack", _parse_optional_str, None),
    _Setting("offsets.topic.replication.factor", _parse_int, 3, 1),
    _Setting("offsets.commit.timeout.ms", _parse_int, 5000, 1),
    _Setting("transaction.state.log.replication.factor", _parse_int, 3, 1),
    _Setting("transaction.state.log.min.isr", _parse_int, 2, 1),
    _Setting("replica.lag.time.max.ms", _parse_int, 30_000, 0),
    _Setting("replica.fetch.max.bytes", _parse_int, 1_048_576, 0),
    _Setting("replica.fetch.wait.max.ms", _parse_int, 500, 0),
    _Setting("replica.high.watermark.checkpoint.interval.ms", _parse_int, 5000, 1),
    _Setting("replica.selector.class", _parse_optional_str, None),
    _Setting("unclean.leader.election.enable", _parse_bool, False),
    _Setting("auto.leader.rebalance.enable", _parse_bool, True),
    _Setting("leader.imbalance.check.interval.seconds", _parse_int, 300, 1),
    _Setting("telemetry.max.bytes", _parse_int, 1_048_576, 1),  # KIP-714 pushes (compatbroker.telemetry)
)
_SETTINGS_BY_NAME = {setting.name: setting for setting in _SETTINGS}

REPLICA_SELECTORS = ("org.apache.kafka.common.replica.RackAwareReplicaSelector",)
"""The values `replica.selector.class` may take (Kafka loads the class; compatbroker has the one Kafka ships)."""

IGNORED = frozenset({
    "process.roles", "controller.quorum.voters", "controller.quorum.bootstrap.servers",
    "num.network.threads", "num.io.threads", "socket.send.buffer.bytes", "socket.receive.buffer.bytes",
})
"""Names from Kafka's sample `server.properties` that mean nothing to a single broker without a controller."""

WITHOUT_EFFECT = frozenset({
    "background.threads", "num.replica.fetchers", "log.cleaner.threads", "log.cleaner.io.buffer.size",
    "log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second", "max.connection.creation.rate",
    "metric.reporters", "config.providers", "compression.gzip.level", "compression.lz4.level",
    "compression.zstd.level", "log.local.retention.ms", "log.local.retention.bytes", "remote.fetch.max.wait.ms",
    "remote.list.offsets.request.timeout.ms", "remote.log.index.file.cache.total.size.bytes",
    "remote.log.manager.copier.thread.pool.size", "remote.log.manager.copy.max.bytes.per.second",
    "remote.log.manager.expiration.thread.pool.size", "remote.log.manager.fetch.max.bytes.per.second",
    "remote.log.manager.follower.thread.pool.size", "remote.log.reader.threads",
})
"""Kafka's dynamic broker configs that tune parts compatbroker does not have (thread pools, the cleaner's I/O,
metric reporters, tiered storage, the topic-level compression levels' broker defaults): accepted statically and
dynamically (`compatbroker.dynamic_config`), described, and otherwise without effect."""

# Broker-level names of storage settings (LogConfig's topic defaults, StorageConfig, and the coarse-unit forms
# that storage falls back on when the millisecond form is absent), with Kafka's defaults for the coarse forms.
_STORAGE_NAMES = frozenset(
    {setting.broker_name for setting in SETTINGS_BY_NAME.values()}
    | {field.name.replace("_", ".") for field in dataclasses.fields(StorageConfig)})
_STORAGE_FALLBACKS = {"log.roll.hours": 168, "log.roll.jitter.hours": 0, "log.retention.hours": 168,
                      "log.retention.minutes": None, "log.flush.scheduler.interval.ms": 2**63 - 1}


def known_names() -> frozenset[str]:
    """The unprefixed names accepted (security settings may also carry a `listener.name.<l>.` prefix)."""
    return (frozenset(_SETTINGS_BY_NAME) | _STORAGE_NAMES | frozenset(_STORAGE_FALLBACKS) | IGNORED | WITHOUT_EFFECT
            | security_names())


class BrokerConfig:
    """The effective configuration. Build it from Kafka names: `BrokerConfig({"num.partitions": 3})`; values may
    be strings (as in a properties file) or already typed. Raises ConfigError for an unknown name or a bad value."""

    listeners: tuple[Endpoint, ...]
    advertised_listeners: tuple[Endpoint, ...]
    node_id: int
    num_partitions: int
    default_replication_factor: int
    auto_create_topics_enable: bool
    socket_request_max_bytes: int
    queued_max_requests: int
    queued_max_request_bytes: int
    max_connections: int
    max_connections_per_ip: int
    max_connections_per_ip_overrides: dict[str, int]
    connections_max_idle_ms: int
    message_max_bytes: int
    max_incremental_fetch_session_cache_slots: int
    group_initial_rebalance_delay_ms: int
    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    group_max_size: int
    offsets_topic_num_partitions: int
    offsets_topic_segment_bytes: int
    offsets_retention_minutes: int
    offsets_retention_check_interval_ms: int
    offset_metadata_max_bytes: int
    producer_id_expiration_ms: int
    producer_id_expiration_check_interval_ms: int
    transactional_id_expiration_ms: int
    transaction_max_timeout_ms: int
    transaction_remove_expired_transaction_cleanup_interval_ms: int
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int
    transaction_state_log_num_partitions: int
    transaction_state_log_segment_bytes: int
    transaction_state_log_load_buffer_size: int
    transaction_partition_verification_enable: bool
    add_partitions_to_txn_retry_backoff_ms: int
    add_partitions_to_txn_retry_backoff_max_ms: int
    broker_rack: str | None
    offsets_topic_replication_factor: int
    offsets_commit_timeout_ms: int
    transaction_state_log_replication_factor: int
    transaction_state_log_min_isr: int
    replica_lag_time_max_ms: int
    replica_fetch_max_bytes: int
    replica_fetch_wait_max_ms: int
    replica_high_watermark_checkpoint_interval_ms: int
    replica_selector_class: str | None
    unclean_leader_election_enable: bool
    auto_leader_rebalance_enable: bool
    leader_imbalance_check_interval_seconds: int
    data_dir: str              # the first of data_dirs: meta.properties, topic configs, checkpoints of one dir
    data_dirs: tuple[str, ...]
    storage: StorageConfig
    log_defaults: LogConfig
    security: SecuritySettings  # TLS, SASL and authorization settings, per listener (compatbroker.security)

    def __init__(self, properties: Mapping[str, Any] | None = None):
        properties = dict(properties or {})
        _reject_unknown(properties)
        self.properties = properties  # as given: storage reads its own names from it
        self._values = {}
        for setting in _SETTINGS:
            value = _parse_setting(setting, properties[setting.name]) if setting.name in properties \
                else setting.default
            self._values[setting.name] = value
            setattr(self, setting.attribute, value)
        self._check_socket_server_settings()
        self._check_group_settings()
        self.listeners = self._serving_listeners()
        self.advertised_listeners = self._checked_advertised()
        self.security = security_settings(properties, {endpoint.name: self.security_protocol(endpoint)
                                                       for endpoint in self.listeners})
        self.data_dirs = self._data_dirs()
        self.data_dir = self._data_dir()
        self.storage, self.log_defaults = _storage_configs(self.storage_properties())

    # --- building from the command line ---------------------------------------------------------------------------

    @classmethod
    def from_sources(cls, *, config_file: str | None = None, overrides: list[str] = (), listen: str | None = None,
                     advertised_listener: str | None = None, data_dir: str | None = None) -> BrokerConfig:
        """The configuration of `compatbroker serve`: file, then `--set` overrides, then the dedicated options."""
        properties = load_properties(config_file) if config_file else {}
        for item in overrides:
            name, sep, value = item.partition("=")
            if not sep or not name.strip():
                raise ConfigError(f"--set expects name=value, got {item!r}")
            properties[name.strip()] = value.strip()
        if listen is not None:
            properties["listeners"] = _as_listener_list(listen, "--listen")
        if advertised_listener is not None:
            properties["advertised.listeners"] = _as_listener_list(advertised_listener, "--advertised-listener")
        if data_dir is not None:
            properties["log.dirs"] = data_dir
        return cls(properties)

    # --- lookups --------------------------------------------------------------------------------------------------

    def get(self, name: str) -> Any:
        """The effective value of any accepted Kafka name (storage names give what storage will use)."""
        if name in self._values:
            return self._values[name]
        for setting in SETTINGS_BY_NAME.values():
            if setting.broker_name == name:
                return getattr(self.log_defaults, setting.field)
        if name in _STORAGE_NAMES:
            return getattr(self.storage, name.replace(".", "_"))
        if name in _STORAGE_FALLBACKS:
            return self.properties.get(name, _STORAGE_FALLBACKS[name])
        if name in IGNORED or name in WITHOUT_EFFECT:
            return self.properties.get(name)
        if is_security_name(name):
            return self.properties.get(name)
        raise ConfigError(_unknown_message(name))

    def storage_properties(self) -> dict[str, Any]:
        """The settings handed to the storage layer (it ignores the names it does not know)."""
        return {name: value for name, value in self.properties.items()
                if name in _STORAGE_NAMES or name in _STORAGE_FALLBACKS}

    def security_protocol(self, listener: Endpoint) -> str:
        """The security protocol of a listener (listener.security.protocol.map)."""
        return self._values["listener.security.protocol.map"][listener.name]

    def advertised_for(self, listener: Endpoint) -> Endpoint | None:
        """The advertised endpoint configured for a listener, by listener name."""
        for endpoint in self.advertised_listeners:
            if endpoint.name == listener.name:
                return endpoint
        return None

    def __repr__(self):
        return f"BrokerConfig({self.properties!r})"

    # --- validation -----------------------------------------------------------------------------------------------

    def _check_socket_server_settings(self) -> None:
        """Kafka's checks of settings that depend on each other, and of class names it would load."""
        selector = self._values["replica.selector.class"]
        if selector is not None and selector not in REPLICA_SELECTORS:
            raise ConfigError(f"Invalid value {selector} for configuration replica.selector.class: Class {selector} "
                              f"could not be found. The selectors here: {', '.join(REPLICA_SELECTORS)}")
        queued_bytes = self._values["queued.max.request.bytes"]
        if 0 < queued_bytes < self._values["socket.request.max.bytes"]:
            raise ConfigError("queued.max.request.bytes must be larger or equal to socket.request.max.bytes")
        if self._values["max.connections.per.ip"] == 0 and not self._values["max.connections.per.ip.overrides"]:
            raise ConfigError("max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides "
                              "property is set.")

    def _check_group_settings(self) -> None:
        """Kafka's start-up checks of the group settings that bound each other."""
        for prefix in ("group.consumer.", "group.share."):
            for name in ("session.timeout.ms", "heartbeat.interval.ms", "record.lock.duration.ms"):
                value = self._values.get(prefix + name)
                if value is None:
                    continue
                if value < self._values[f"{prefix}min.{name}"]:
                    raise ConfigError(f"{prefix}{name} must be greater than or equal to {prefix}min.{name}")
                if value > self._values[f"{prefix}max.{name}"]:
                    raise ConfigError(f"{prefix}{name} must be less than or equal to {prefix}max.{name}")
            if self._values[f"{prefix}heartbeat.interval.ms"] >= self._values[f"{prefix}session.timeout.ms"]:
                raise ConfigError(f"{prefix}heartbeat.interval.ms must be less than {prefix}session.timeout.ms")
        if self._values["group.share.max.share.sessions"] < self._values["group.share.max.size"]:
            raise ConfigError("group.share.max.share.sessions must be greater than or equal to group.share.max.size")

    def _serving_listeners(self) -> tuple[Endpoint, ...]:
        """The listeners clients use: controller listeners are dropped; each has a security protocol."""
        protocols = self._values["listener.security.protocol.map"]
        controller_names = {name.upper() for name in self._values["controller.listener.names"]}
        names = [endpoint.name for endpoint in self._values["listeners"]]
        if len(set(names)) != len(names):
            raise ConfigError(f"listeners: each listener name may appear once, got {', '.join(names)}")
        serving = []
        for endpoint in self._values["listeners"]:
            if endpoint.name in controller_names:
                continue
            if endpoint.name not in protocols:
                raise ConfigError(f"No security protocol defined for listener {endpoint.name} "
                                  f"(see listener.security.protocol.map)")
            serving.append(endpoint)
        if not serving:
            raise ConfigError("listeners: no listener to serve clients on")
        return tuple(serving)

    def _checked_advertised(self) -> tuple[Endpoint, ...]:
        names = {endpoint.name for endpoint in self._values["listeners"]}
        for endpoint in self._values["advertised.listeners"]:
            if endpoint.name not in names:
                raise ConfigError(f"advertised.listeners: {endpoint.name} is not one of the listeners")
            if endpoint.is_wildcard:
                raise ConfigError(f"advertised.listeners: {endpoint.host_port()} is not an address clients can use")
        return self._values["advertised.listeners"]

    def _data_dir(self) -> str:
        return self.data_dirs[0]

    def _data_dirs(self) -> tuple[str, ...]:
        """log.dirs (or log.dir), absolute; the default data directory when neither is set. Several directories
        make a JBOD node: each partition lives in one of them."""
        dirs = self._values["log.dirs"] or ((self._values["log.dir"],) if self._values["log.dir"] else ())
        if not dirs:
            return (default_data_dir(),)
        absolute = tuple(os.path.abspath(os.path.expanduser(path)) for path in dirs)
        if len(set(absolute)) != len(absolute):
            raise ConfigError(f"log.dirs: each directory may appear once, got {', '.join(dirs)}")
        return absolute

    def for_node(self, node_id: int, *, listeners: tuple[Endpoint, ...], data_dirs: tuple[str, ...],
                 rack: str | None = None) -> BrokerConfig:
        """The configuration of one node of an in-process cluster: this one with its own id, listeners, log
        directories and rack (advertised.listeners do not carry over: each node advertises its own)."""
        properties = dict(self.properties)
        properties.pop("log.dir", None)
        properties.pop("advertised.listeners", None)
        properties.update({"node.id": node_id, "listeners": tuple(listeners), "log.dirs": ",".join(data_dirs)})
        if rack is not None:
            properties["broker.rack"] = rack
        return BrokerConfig(properties)


def _storage_configs(properties: dict[str, Any]) -> tuple[StorageConfig, LogConfig]:
    try:
        return StorageConfig.from_properties(properties), LogConfig.from_properties(properties)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:  # storage parses some numbers without naming the setting
        bad = ", ".join(f"{name}={value!r}" for name, value in sorted(properties.items()))
        raise ConfigError(f"invalid storage setting among {bad}: {exc}") from None


def _as_listener_list(value: str, option: str) -> str:
    try:
        return ",".join(f"{e.name}://{e.host_port()}" for e in (parse_endpoint(item) for item in value.split(",")))
    except ValueError as exc:
        raise ConfigError(f"{option}: {exc}") from None


def _parse_setting(setting: _Setting, value: Any) -> Any:
    try:
        parsed = setting.parse(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid value {value!r} for {setting.name}: {exc}") from None
    if setting.minimum is not None and parsed < setting.minimum:
        raise ConfigError(f"{setting.name}={parsed} is below the minimum {setting.minimum}")
    if setting.maximum is not None and parsed > setting.maximum:
        raise ConfigError(f"{setting.name}={parsed} is above the maximum {setting.maximum}")
    return parsed


def _reject_unknown(properties: Mapping[str, Any]) -> None:
    known = known_names()
    for name in properties:
        if name not in known and not is_security_name(name):
            raise ConfigError(_unknown_message(name))


def _unknown_message(name: str) -> str:
    if name in MECHANISM_NAMES:
        return (f"{name} is taken per listener and mechanism by a broker: "
                f"listener.name.<listener>.<mechanism>.{name}, e.g. listener.name.sasl_ssl.plain.{name}")
    close = difflib.get_close_matches(name, sorted(known_names()), n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"unknown configuration key {name!r}{hint}"


# --- server.properties ---------------------------------------------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def load_properties(path: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as source:
            return parse_properties(source.read())
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None


def parse_properties(text: str) -> dict[str, str]:
    """Java properties syntax as `server.properties` uses it: `#`/`!` comments, `=`, `:` or blanks between name
    and value, a trailing backslash continuing a line, and backslash escapes (including `\\uXXXX`)."""
    properties = {}
    for line in _logical_lines(text):
        key, value = _split_key_value(line)
        properties[_unescape(key)] = _unescape(value)
    return properties


def _logical_lines(text: str):
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:  # an odd number of backslashes: the last one joins the next line
            pending += line[:-1]
            continue
        yield pending + line
        pending = ""
    if pending:
        yield pending


def _split_key_value(line: str) -> tuple[str, str]:
    index = 0
    while index < len(line):
        char = line[index]
        if char == "\\":
            index += 2
            continue
        if char in "=: \t\f":
            break
        index += 1
    key, rest = line[:index], line[index:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest.rstrip()


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out, index = [], 0
    while index < len(text):
        char = text[index]
        if char != "\\" or index + 1 == len(text):
            out.append(char)
            index += 1
            continue
        code = text[index + 1]
        if code == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[index + 2:index + 6]):
            out.append(chr(int(text[index + 2:index + 6], 16)))
            index += 6
            continue
        out.append(_ESCAPES.get(code, code))
        index += 2
    return "".join(out)
