"""Dynamic broker configs (KIP-226) as Apache Kafka 4.x has them: which broker configs change at run time, their
cluster-wide store, and their application to the running nodes.

Two levels, as in Kafka: per node (the BROKER resource named by the node's id) and the cluster-wide default (the
BROKER resource ""). A node's configuration in force (`broker.config`) is its static configuration
(`broker.static_config`: server.properties and `--set`) with the cluster-wide dynamic defaults laid over it, then
its own dynamic configs; setting a name removes its synonyms of the lower levels (`log.roll.ms` set dynamically
hides a static `log.roll.hours`), as Kafka's DynamicBrokerConfig does. Which names are dynamic is Kafka's list
(`compatbroker.config_catalog.DYNAMIC_NAMES`); every other broker config is read-only.

Changes (AlterConfigs replaces a resource's whole set, IncrementalAlterConfigs changes single names) are checked as
Kafka's ConfigAdminManager and DynamicBrokerConfig check them, every failure answering INVALID_REQUEST with Kafka's
message: a read-only name ("Cannot update these configs dynamically: Set(...)"), an SSL store config without a
listener prefix, a value of the wrong type or range (ConfigDef's messages), a per-broker config (listeners,
security) at the cluster default level, then the new configuration as a whole (a thread count changed to less than
half or more than double its current value, as Kafka's thread pools and log cleaner refuse it); an APPEND or
SUBTRACT on a name that is not a LIST, and a value longer than 32767 characters (Kafka's controller), answer
INVALID_CONFIG. Deviation: new topic defaults that an existing topic's
overrides contradict (its `min.compaction.lag.ms` above a new `log.cleaner.max.compaction.lag.ms`) answer
INVALID_REQUEST naming the topic, where Kafka takes them.

Names Kafka does not know are kept as custom configs, as Kafka does. They are kept in `broker-configs.json` beside
the cluster metadata (written atomically), loaded at start before the logs, and applied at once to the nodes they
concern.

Applied live:
- the topic defaults every topic without its own override inherits (`message.max.bytes`, `log.segment.bytes`,
  `log.roll.ms`, `log.retention.ms`/`bytes`, `log.cleanup.policy`, `compression.type`, `min.insync.replicas`,
  `log.message.timestamp.*`, `log.cleaner.*` lag and ratio settings, `log.flush.*`, `log.preallocate`, ...): from
  the next append or storage pass of every partition;
- `unclean.leader.election.enable` (the cluster default: the controller's next election);
- `max.connections`, `max.connections.per.ip`, `max.connections.per.ip.overrides`: at the next accept;
- `producer.id.expiration.ms` (the next expiration pass), `transaction.partition.verification.enable`.

Accepted, checked, kept and described, without effect here (compatbroker has no such part, or reads it only when the
listeners start): `num.io.threads`, `num.network.threads`, `num.replica.fetchers`,
`num.recovery.threads.per.data.dir`, `background.threads`, `log.cleaner.threads`, `log.cleaner.backoff.ms` (the
cleaner's period is set at start), `log.cleaner.dedupe.buffer.size`, `log.cleaner.io.*`,
`max.connection.creation.rate`, `metric.reporters`, `config.providers`, `compression.*.level`,
`log.local.retention.*` and `remote.*` (no tiered storage), the broker quota rates
(`leader.replication.throttled.rate`, `follower.replication.throttled.rate`,
`replica.alter.log.dirs.io.max.bytes.per.second`), and the listener and security configs (`listeners`,
`listener.security.protocol.map`, `principal.builder.class`, `ssl.*`, `sasl.*`, `listener.name.<l>.*`).
"""
from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .config import BrokerConfig, ConfigError, known_names
from .config_catalog import (BOOLEAN, BROKER_CONFIGS, BROKER_QUOTA_CONFIGS, CLUSTER_LEVEL_LISTENER_CONFIGS, DOUBLE,
                             DYNAMIC_NAMES, INT, LIST, LISTENER_PREFIX, LONG, LOG_RECONFIGURABLE, MAX_VALUE_LENGTH,
                             PER_BROKER_CONFIGS, SHORT, SSL_RECONFIGURABLE, STRING, THREAD_POOL_RECONFIGURABLE,
                             TOPIC_CONFIGS, VALUE_TOO_LARGE, ConfigKey, broker_synonyms, listener_base_name,
                             number_text)
from .protocol.error_codes import ErrorCode
from .security.settings import is_security_name
from .storage.checkpoints import write_atomically

log = logging.getLogger(__name__)

BROKER_CONFIGS_FILE = "broker-configs.json"
_FORMAT_VERSION = 1
_DYNAMIC_CONFIG_INVALID = "Invalid dynamic configuration"


class DynamicConfigError(Exception):
    """A change Kafka refuses: the error code and Kafka's message."""

    def __init__(self, code: ErrorCode, message: str | None):
        super().__init__(message)
        self.code = code
        self.message = message


# --- the store ----------------------------------------------------------------------------------------------------

class BrokerConfigStore:
    """The dynamic broker configs of a cluster: the cluster-wide defaults and each node's, as given (text)."""

    def __init__(self, directory: str | None = None):
        self._path = None if directory is None else os.path.join(directory, BROKER_CONFIGS_FILE)
        self._defaults: dict[str, str] = {}
        self._brokers: dict[int, dict[str, str]] = {}
        self.watchers: dict[int, list[Callable[[BrokerConfig], None]]] = {}  # node id -> live reconfigurations
        self.cluster_static: BrokerConfig | None = None  # the cluster's own configuration, as started

    def defaults(self) -> dict[str, str]:
        return dict(self._defaults)

    def broker(self, node_id: int) -> dict[str, str]:
        return dict(self._brokers.get(node_id, {}))

    def resource(self, name: str) -> dict[str, str]:
        """The set of the BROKER resource `name` ("" or a node id)."""
        return self.defaults() if not name else self.broker(int(name))

    def set(self, name: str, configs: Mapping[str, str]) -> None:
        """Make `configs` the whole set of resource `name` and save; OSError when the disk refuses (nothing changes)."""
        defaults, brokers = dict(self._defaults), dict(self._brokers)
        if not name:
            defaults = dict(configs)
        elif configs:
            brokers[int(name)] = dict(configs)
        else:
            brokers.pop(int(name), None)
        if self._path is not None:
            document = {"version": _FORMAT_VERSION, "default": defaults,
                        "brokers": {str(node_id): configs for node_id, configs in sorted(brokers.items())}}
            write_atomically(self._path, json.dumps(document, indent=1, sort_keys=True).encode())
        self._defaults, self._brokers = defaults, brokers

    @classmethod
    def load(cls, directory: str) -> BrokerConfigStore:
        """The saved configs of `directory`, or none; ValueError for a file that cannot be read as one."""
        store = cls(directory)
        try:
            with open(store._path, "rb") as source:
                data = json.loads(source.read())
            defaults, brokers = data["default"], data["brokers"]
            store._defaults = {str(name): str(value) for name, value in defaults.items()}
            store._brokers = {int(node_id): {str(name): str(value) for name, value in configs.items()}
                              for node_id, configs in brokers.items()}
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{store._path}: unreadable dynamic broker configs: {exc!r}") from None
        return store


def store_of(cluster) -> BrokerConfigStore:
    """The cluster's store (`cluster.broker_configs`), loaded from its data directory on first use."""
    store = getattr(cluster, "broker_configs", None)
    if store is None:
        store = BrokerConfigStore.load(cluster.data_dir)
        store.cluster_static = cluster.config
        cluster.broker_configs = store
    return store


# --- checks -------------------------------------------------------------------------------------------------------

def validate(node, name: str, configs: Mapping[str, str]) -> None:
    """Kafka's checks of `configs` as the new set of BROKER resource `name` ("" or `node`'s id), against `node`:
    DynamicConfigError (INVALID_REQUEST with Kafka's message) for the first failure."""
    _refuse(sorted(key for key in configs if _read_only(key)), "Cannot update these configs dynamically")
    _refuse(sorted(key for key in configs if key in SSL_RECONFIGURABLE),
            "These security configs can be dynamically updated only per-listener using the listener prefix")
    for key, value in configs.items():
        _check_type(listener_base_name(key), value)
    if not name:
        _refuse(sorted(key for key in configs if _per_broker(key)),
                "Cannot update these configs at default cluster level, broker id must be specified")
    store = store_of(node.cluster)
    defaults, own = (configs, store.broker(node.node_id)) if not name else (store.defaults(), configs)
    try:
        _check_topics(node, BrokerConfig(_applied_properties(node, defaults, own)))
    except ConfigError as exc:
        raise DynamicConfigError(ErrorCode.INVALID_REQUEST, str(exc)) from None
    _check_thread_counts(node.config, _all_properties(node, defaults, own))
    if any(len(value) > MAX_VALUE_LENGTH for value in configs.values()):  # the controller's check, last
        raise DynamicConfigError(ErrorCode.INVALID_CONFIG, VALUE_TOO_LARGE)


def _check_topics(node, config: BrokerConfig) -> None:
    """Every topic's overrides must still make a valid topic config over the new defaults (a topic's
    min.compaction.lag.ms above a new log.cleaner.max.compaction.lag.ms, say), else storage could not apply them."""
    for topic, overrides in node.logs.topic_overrides.items():
        try:
            config.log_defaults.with_overrides(overrides)
        except ConfigError as exc:
            raise ConfigError(f"topic {topic}: {exc}") from None


def incremental(node, name: str, operations: Iterable[tuple[str, int, str | None]]) -> dict[str, str]:
    """The resource's set after IncrementalAlterConfigs `operations` (name, SET 0 / DELETE 1 / APPEND 2 /
    SUBTRACT 3, value), applied to what is stored, as Kafka's ConfigAdminManager does."""
    result = store_of(node.cluster).resource(name)
    for key, operation, value in operations:
        if operation == 0:
            result[key] = value
        elif operation == 1:
            result.pop(key, None)
        elif operation in (2, 3):
            result[key] = _list_operation(key, operation, result.get(key), value)
        else:
            raise DynamicConfigError(ErrorCode.INVALID_REQUEST, f"Unknown operations type {operation}")
    return result


def _list_operation(key: str, operation: int, current: str | None, operand: str) -> str:
    catalogued = BROKER_CONFIGS.get(key)
    if catalogued is None:  # Kafka looks the name up in its config keys and fails unexpectedly
        raise DynamicConfigError(ErrorCode.UNKNOWN_SERVER_ERROR, None)
    verb = "append" if operation == 2 else "subtract"
    if catalogued.type != LIST:
        raise DynamicConfigError(ErrorCode.INVALID_CONFIG, f"Config value {verb} is not allowed for config key: {key}")
    base = current if current is not None else (catalogued.default or "")
    items = [item for item in base.split(",") if item or operation == 3]
    if operation == 2:
        return ",".join(items + [item for item in operand.split(",") if item not in items])
    removed = operand.split(",")
    return ",".join(item for item in items if item not in removed)


def _read_only(key: str) -> bool:
    """A name Kafka knows as a broker config that it cannot change at run time (custom names pass, as in Kafka)."""
    if key in DYNAMIC_NAMES or key in BROKER_QUOTA_CONFIGS or key.startswith(LISTENER_PREFIX):
        return False
    return key in BROKER_CONFIGS or key in known_names()


def _per_broker(key: str) -> bool:
    if key.startswith(LISTENER_PREFIX):  # Kafka's ListenerConfigRegex: everything after the listener's name
        return key[len(LISTENER_PREFIX):].partition(".")[2] not in CLUSTER_LEVEL_LISTENER_CONFIGS
    return key in PER_BROKER_CONFIGS


def _refuse(names: list[str], reason: str) -> None:
    if names:
        raise DynamicConfigError(ErrorCode.INVALID_REQUEST, f"{reason}: {_scala_set(names)}")


def _scala_set(names: list[str]) -> str:
    """How Kafka's message prints a set of names (Scala's toString: Set up to four items, HashSet beyond)."""
    return f"{'Set' if len(names) <= 4 else 'HashSet'}({', '.join(names)})"


# ConfigDef's type names and messages: the text Kafka answers for a value that does not parse or is out of range.
_TYPE_NAMES = {INT: "INT", LONG: "LONG", SHORT: "SHORT", DOUBLE: "DOUBLE"}
_BOUNDS = {SHORT: (-2**15, 2**15 - 1), INT: (-2**31, 2**31 - 1), LONG: (-2**63, 2**63 - 1)}


def _check_type(key: str, value: str) -> None:
    if key not in DYNAMIC_NAMES and key not in BROKER_QUOTA_CONFIGS:  # custom names are not checked
        return
    rules = _rules_of(key)
    text = str(value).strip()

    def invalid(message: str, shown: Any = text) -> DynamicConfigError:
        return DynamicConfigError(ErrorCode.INVALID_REQUEST,
                                  f"Invalid value {shown} for configuration {key}: {message}")

    if rules.type == BOOLEAN and text.lower() not in ("true", "false"):
        raise invalid("Expected value to be either true or false")
    if rules.type in _BOUNDS or rules.type == DOUBLE:
        try:
            number = float(text) if rules.type == DOUBLE else int(text)
        except ValueError:
            raise invalid(f"Not a number of type {_TYPE_NAMES[rules.type]}") from None
        low, high = _BOUNDS.get(rules.type, (None, None))
        if low is not None and not low <= number <= high:
            raise invalid(f"Not a number of type {_TYPE_NAMES[rules.type]}")
        if rules.minimum is not None and number < rules.minimum:
            raise invalid(f"Value must be at least {number_text(rules.minimum)}")
        if rules.maximum is not None and number > rules.maximum:
            raise invalid(f"Value must be no more than {number_text(rules.maximum)}")
    if rules.choices is not None:
        items = [item.strip() for item in text.split(",")] if rules.type == LIST else [text]
        for item in items:
            if item not in rules.choices:
                raise invalid(f"String must be one of: {', '.join(rules.choices)}", item)


def _rules_of(key: str) -> ConfigKey | None:
    """The type and range Kafka checks a dynamic broker config against: a topic default's are the topic config's."""
    if key in BROKER_QUOTA_CONFIGS:
        return ConfigKey(key, LONG, BROKER_QUOTA_CONFIGS[key], None, minimum=0)
    catalogued = BROKER_CONFIGS.get(key)
    if catalogued is None:
        return ConfigKey(key, STRING, None, None)  # not in our catalogue (remote.*): any text
    if key in LOG_RECONFIGURABLE:
        topic = next((item for item in TOPIC_CONFIGS.values() if item.synonyms[:1] == (key,)), None)
        if topic is not None:
            return ConfigKey(key, catalogued.type, None, None, minimum=topic.minimum, maximum=topic.maximum,
                             choices=topic.choices)
    return catalogued


_REMOTE_THREAD_POOLS = frozenset({  # DynamicRemoteLogConfig checks them as DynamicThreadPool checks its own
    "remote.log.reader.threads", "remote.log.manager.copier.thread.pool.size",
    "remote.log.manager.expiration.thread.pool.size", "remote.log.manager.follower.thread.pool.size"})


def _check_thread_counts(current: BrokerConfig, properties: Mapping[str, Any]) -> None:
    """What Kafka's reconfigurables check of the new configuration as a whole: a thread count may change to no
    less than half and no more than double its current value (wrapped in Kafka's "Invalid dynamic configuration")."""
    for key in sorted(THREAD_POOL_RECONFIGURABLE | _REMOTE_THREAD_POOLS | {"log.cleaner.threads"}):
        old, new = _thread_count(current.properties, key), _thread_count(properties, key)
        if new == old:
            continue
        if key == "log.cleaner.threads":
            reason = _cleaner_threads_reason(old, new)
        else:
            prefix = f"Dynamic thread count update validation failed for {key}={new}"
            reason = (f"{prefix}, value should be at least 1" if new <= 0 else
                      f"{prefix}, value should be at least half the current value {old}" if new < old // 2 else
                      f"{prefix}, value should not be greater than double the current value {old}"
                      if new > old * 2 else None)
        if reason is not None:
            raise DynamicConfigError(ErrorCode.INVALID_REQUEST, f"Invalid value org.apache.kafka.common.config."
                                     f"ConfigException: {reason} for configuration {_DYNAMIC_CONFIG_INVALID}")


def _cleaner_threads_reason(old: int, new: int) -> str | None:
    if new < 1:
        return "Log cleaner threads should be at least 1"
    if new < old // 2:
        return f"Log cleaner threads cannot be reduced to less than half the current value {old}"
    if new > old * 2:
        return f"Log cleaner threads cannot be increased to more than double the current value {old}"
    return None


def _thread_count(properties: Mapping[str, Any], key: str) -> int:
    value = properties.get(key)
    return int(value) if value is not None else int(BROKER_CONFIGS[key].default)


# --- the configuration in force -----------------------------------------------------------------------------------

def _all_properties(node, defaults: Mapping[str, str], own: Mapping[str, str]) -> dict[str, Any]:
    """The node's static properties with the cluster-wide defaults, then its own dynamic configs, laid over them."""
    properties = dict(node.static_config.properties)
    for layer in (defaults, own):
        _lay_over(properties, layer)
    return properties


def _applied_properties(node, defaults: Mapping[str, str], own: Mapping[str, str]) -> dict[str, Any]:
    """What BrokerConfig takes: custom names, and the listener and security configs (read when the listeners
    start), keep their static values."""
    properties = dict(node.static_config.properties)
    for layer in (defaults, own):
        _lay_over(properties, {key: value for key, value in layer.items() if _applies(key)})
    return properties


def _lay_over(properties: dict[str, Any], layer: Mapping[str, str]) -> None:
    """A name set at a higher level removes its synonyms of the levels below (Kafka's overrideProps): a dynamic
    `log.roll.ms` hides a static `log.roll.hours`."""
    for key, value in layer.items():
        for synonym in broker_synonyms(key):
            properties.pop(synonym, None)
        properties[key] = value


def _applies(key: str) -> bool:
    return (key in known_names() and not is_security_name(key) and not key.startswith(LISTENER_PREFIX)
            and key not in ("listeners", "listener.security.protocol.map", "advertised.listeners"))


def start(node) -> None:
    """At start, before the logs load: the saved dynamic configs take effect on `node` and on the cluster's own
    configuration (ValueError for a store that cannot be read)."""
    apply(node)
    _apply_cluster_defaults(node.cluster, store_of(node.cluster))


def commit(node, name: str, configs: Mapping[str, str]) -> None:
    """Keep `configs` as the whole set of resource `name` (OSError when the disk refuses) and apply them to the
    nodes they concern: every node for the cluster default, else `node`."""
    store = store_of(node.cluster)
    store.set(name, configs)
    log.info("dynamic broker configs of %s are now %s", f"node {name}" if name else "the cluster default",
             _loggable(configs) or "none")
    targets = list(node.cluster.nodes.values()) if not name else [node]
    for target in targets:
        apply(target)
    if not name:
        _apply_cluster_defaults(node.cluster, store)


def apply(node) -> None:
    """Make `node.config` its static configuration with the dynamic configs in force, and reconfigure what reads
    them. A stored set that no longer makes a valid configuration leaves the node's as it was (one ERROR line)."""
    store = store_of(node.cluster)
    try:
        config = BrokerConfig(_applied_properties(node, store.defaults(), store.broker(node.node_id)))
    except ConfigError as exc:
        log.error("node %d: the dynamic broker configs could not be applied, keeping the configuration in force: "
                  "%s", node.node_id, exc)
        return
    node.config = config
    _reconfigure_logs(node.logs, config)
    for reconfigure in store.watchers.get(node.node_id, []):
        reconfigure(config)


def _apply_cluster_defaults(cluster, store: BrokerConfigStore) -> None:
    """The cluster's own configuration (what the controller reads, e.g. unclean.leader.election.enable) with the
    cluster-wide dynamic defaults."""
    properties = dict(store.cluster_static.properties)
    _lay_over(properties, {key: value for key, value in store.defaults().items() if _applies(key)})
    try:
        cluster.config = BrokerConfig(properties)
    except ConfigError as exc:
        log.error("the cluster-wide dynamic broker configs could not be applied: %s", exc)


def _reconfigure_logs(logs, config: BrokerConfig) -> None:
    """The topic defaults every partition without its own override inherits (Kafka's DynamicLogConfig)."""
    logs.reconfigure(config.storage_properties(), config.storage, config.log_defaults)


def watch(node, reconfigure: Callable[[BrokerConfig], None]) -> None:
    """Call `reconfigure(config)` now and whenever the node's configuration in force changes."""
    store_of(node.cluster).watchers.setdefault(node.node_id, []).append(reconfigure)
    reconfigure(node.config)


def watch_connection_quotas(server) -> None:
    """max.connections, max.connections.per.ip and its overrides apply to `server`'s next accept."""
    def reconfigure(config: BrokerConfig) -> None:
        try:
            server.reconfigure_quotas(config)
        except ValueError as exc:  # an override host that does not resolve: the old limits stay
            log.error("node %d: connection limits not changed: %s", server.broker.node_id, exc)

    watch(server.broker, reconfigure)


def _loggable(configs: Mapping[str, str]) -> dict[str, str]:
    """As Kafka's loggableValue: a secret, or a name of unknown type (a custom config), is logged as [hidden]."""
    def hidden(key: str) -> bool:
        catalogued = BROKER_CONFIGS.get(listener_base_name(key))
        return catalogued.sensitive if catalogued is not None else key not in BROKER_QUOTA_CONFIGS
    return {key: "[hidden]" if hidden(key) else value for key, value in configs.items()}
