"""Kafka's configuration keys as data, and the DescribeConfigs view of a topic and of the broker built from them.

Catalogues:
- `TOPIC_CONFIGS`: every topic-level config of Kafka 4.x, with its type, default, valid values and broker-level
  synonyms (the names a broker-wide default goes by, in the order Kafka consults them);
- `REMOVED_TOPIC_CONFIGS` (and their broker synonyms, `REMOVED_BROKER_CONFIGS`): the topic configs Kafka 4.0
  removed, with Kafka 3.9's types and defaults; a broker emulating a 3.x release (`broker.emulated_release`,
  `accepts_removed_topic_configs`) takes and describes them, any other refuses them as Kafka 4.x does;
- `BROKER_CONFIGS`: the broker configs compatbroker reads plus the Kafka broker configs clients and tools commonly
  look at, each with its type, Kafka's default and whether Kafka 4.x can change it at run time (`DYNAMIC_NAMES`,
  Kafka's DynamicBrokerConfig lists, by the part of the broker that reconfigures itself; the others are read-only).

Types are DescribeConfigs' config_type codes; `default` is the text Kafka reports for the default value (None where
Kafka has no default). Descriptions are our own one-liners.

`describe_topic_configs`, `describe_broker_configs` and `describe_default_broker_configs` answer what Kafka's
DescribeConfigs would: every key with its effective value, where that value comes from (`source`), and the synonyms
that could supply it, highest precedence first: this node's dynamic config (DYNAMIC_BROKER_CONFIG), the cluster-wide
dynamic default (DYNAMIC_DEFAULT_BROKER_CONFIG), the static configuration (STATIC_BROKER_CONFIG), the default. The
broker object is used through `broker.config` (BrokerConfig in force), `broker.static_config`,
`broker.cluster.broker_configs` (the dynamic configs, `compatbroker.dynamic_config`), `broker.logs.topic_overrides`,
`broker.logs.log_config(topic)` and `broker.node_id`.

Sources follow Kafka's rules, including one quirk: a topic key's synonyms start at the first broker synonym
(`log.retention.ms` for `retention.ms`), so a broker that sets only `log.retention.hours` reports `retention.ms`
with source DEFAULT_CONFIG although the hours value is in force. Values follow Kafka's text forms: `true`/`false`,
comma-separated lists, Java's form of doubles.
"""
from __future__ import annotations

import dataclasses
import logging
import math
from decimal import Decimal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

# --- codes of the protocol ----------------------------------------------------------------------------------------

UNKNOWN_TYPE, BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = range(10)
"""DescribeConfigs config_type codes."""

UNKNOWN_SOURCE = 0
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
DYNAMIC_BROKER_LOGGER_CONFIG = 6
"""ConfigSource codes."""

LONG_MAX = str(2**63 - 1)
INT_MAX = str(2**31 - 1)

MAX_VALUE_LENGTH = 32767
VALUE_TOO_LARGE = ("The configuration value cannot be added because it exceeds the maximum value size of "
                   f"{MAX_VALUE_LENGTH} bytes.")
"""Kafka's controller refuses a config value longer than Short.MAX_VALUE: INVALID_CONFIG with this message."""
_BOUNDS = {SHORT: (-2**15, 2**15 - 1), INT: (-2**31, 2**31 - 1), LONG: (-2**63, 2**63 - 1)}


@dataclass(frozen=True)
class ConfigKey:
    """One config key. `synonyms` (topic keys only) are the broker-level names of its default, in precedence order;
    `dynamic` (broker keys only) says Kafka can change it without a restart."""

    name: str
    type: int
    default: str | None
    doc: str
    synonyms: tuple[str, ...] = ()
    dynamic: bool = False
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None  # for a LIST, the values each item may take
    check: Callable[[Any], None] | None = None  # an extra rule; raises ValueError

    @property
    def sensitive(self) -> bool:
        return self.type == PASSWORD


@dataclass
class ConfigEntry:
    """One entry of a DescribeConfigs answer. `synonyms` are (name, value, source), highest precedence first."""

    name: str
    value: str | None
    read_only: bool
    source: int
    is_sensitive: bool
    config_type: int
    documentation: str | None
    synonyms: list[tuple[str, str | None, int]] = field(default_factory=list)


# --- parsing and printing values ----------------------------------------------------------------------------------

def parse_value(key: ConfigKey, value: Any) -> Any:
    """The typed value of `value` (text or already typed) for `key`; ValueError when it is not valid."""
    parsed = _parse_type(key.type, value)
    if key.choices is not None:
        items = parsed if key.type == LIST else [parsed]
        bad = [item for item in items if item not in key.choices]
        if bad:
            raise ValueError(f"{', '.join(map(str, bad))} is not one of {', '.join(key.choices)}")
    if key.minimum is not None and parsed < key.minimum:
        raise ValueError(f"{parsed} is below the minimum {number_text(key.minimum)}")
    if key.maximum is not None and parsed > key.maximum:
        raise ValueError(f"{parsed} is above the maximum {number_text(key.maximum)}")
    if key.check is not None:
        key.check(parsed)
    return parsed


def _parse_type(config_type: int, value: Any) -> Any:
    if config_type == BOOLEAN:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text not in ("true", "false"):
            raise ValueError(f"{value!r} is not true or false")
        return text == "true"
    if config_type in _BOUNDS:
        number = _whole_number(value)
        low, high = _BOUNDS[config_type]
        if not low <= number <= high:
            raise ValueError(f"{number} is outside the {_TYPE_NAMES[config_type]} range [{low}, {high}]")
        return number
    if config_type == DOUBLE:
        try:
            number = float(value.strip()) if isinstance(value, str) else float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{value!r} is not a number") from None
        if math.isnan(number):
            raise ValueError("NaN is not a valid number here")
        return number
    if config_type == LIST:
        items = value if isinstance(value, (list, tuple)) else str(value).split(",")
        return [str(item).strip() for item in items if str(item).strip()]
    return value.strip() if isinstance(value, str) else value


_TYPE_NAMES = {SHORT: "short", INT: "int", LONG: "long"}


def _whole_number(value: Any) -> int:
    if isinstance(value, (bool, float)):
        raise ValueError(f"{value!r} is not a whole number")
    try:
        return int(value.strip()) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{value!r} is not a whole number") from None


def to_text(config_type: int, value: Any) -> str | None:
    """Kafka's text form of a value (None stays None): true/false, comma-joined lists, Java-style doubles."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) or config_type == DOUBLE:
        return _java_double(float(value))
    if isinstance(value, Mapping):
        return ",".join(f"{name}:{item}" for name, item in value.items())
    if isinstance(value, (list, tuple)):
        return ",".join(_item_text(item) for item in value)
    return _item_text(value)


def _item_text(item: Any) -> str:
    if hasattr(item, "host_port") and hasattr(item, "name"):  # a listener endpoint
        return f"{item.name}://{item.host_port()}"
    return str(item)


def _java_double(number: float) -> str:
    """Java's Double.toString: plain between 1e-3 and 1e7, otherwise d.dddE<exponent>, shortest digits."""
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    if number == 0 or 1e-3 <= abs(number) < 1e7:
        text = repr(number)
        return text if "." in text else f"{text}.0"
    exact = Decimal(repr(abs(number)))
    digits = "".join(map(str, exact.as_tuple().digits)).rstrip("0") or "0"
    sign = "-" if number < 0 else ""
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exact.adjusted()}"


def number_text(number: float) -> str:
    """A bound as Kafka prints it: 1000, not 1000.0."""
    return str(int(number)) if float(number).is_integer() else str(number)


def normalized(key: ConfigKey, value: Any) -> str | None:
    """`value` checked against `key` and printed in Kafka's text form (ValueError when not valid)."""
    return to_text(key.type, parse_value(key, value))


def _throttled_replicas(items: list[str]) -> None:
    """Kafka's rule for the replication throttle lists: `*`, or partition:broker pairs of integers."""
    if items == ["*"]:
        return
    for item in items:
        partition, sep, broker = item.partition(":")
        if not sep or not partition.strip().isdigit() or not broker.strip().isdigit():
            raise ValueError(f"{item!r}: expected '*' or a list of partition:broker pairs")


def _gzip_level(level: int) -> None:
    if level != -1 and not 1 <= level <= 9:
        raise ValueError(f"{level} is not a gzip level: 1 to 9, or -1 for the codec's default")


# --- topic configs ------------------------------------------------------------------------------------------------

COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


def _topic(name, config_type, default, doc, *synonyms, **rules) -> ConfigKey:
    return ConfigKey(name, config_type, default, doc, tuple(synonyms), **rules)


TOPIC_CONFIGS: dict[str, ConfigKey] = {key.name: key for key in (
    _topic("cleanup.policy", LIST, "delete",
           "What happens to old segments: delete them, compact them to the latest record per key, or both.",
           "log.cleanup.policy", choices=("compact", "delete")),
    _topic("compression.gzip.level", INT, "-1", "Level used when the topic compresses with gzip.",
           "compression.gzip.level", check=_gzip_level),
    _topic("compression.lz4.level", INT, "9", "Level used when the topic compresses with lz4.",
           "compression.lz4.level", minimum=1, maximum=17),
    _topic("compression.type", STRING, "producer",
           "Codec the topic stores batches with; 'producer' keeps whatever codec the producer used.",
           "compression.type", choices=COMPRESSION_TYPES),
    _topic("compression.zstd.level", INT, "3", "Level used when the topic compresses with zstd.",
           "compression.zstd.level", minimum=-131072, maximum=22),
    _topic("delete.retention.ms", LONG, "86400000",
           "How long tombstones of a compacted topic stay readable after compaction reaches them.",
           "log.cleaner.delete.retention.ms", minimum=0),
    _topic("file.delete.delay.ms", LONG, "60000",
           "Delay between a segment leaving the log and its files being removed from disk.",
           "log.segment.delete.delay.ms", minimum=0),
    _topic("flush.messages", LONG, LONG_MAX,
           "Force an fsync after this many records; the default leaves flushing to the operating system.",
           "log.flush.interval.messages", minimum=1),
    _topic("flush.ms", LONG, LONG_MAX,
           "Force an fsync when data is older than this; the default leaves flushing to the operating system.",
           "log.flush.interval.ms", "log.flush.scheduler.interval.ms", minimum=0),
    _topic("follower.replication.throttled.replicas", LIST, "",
           "Replicas (partition:broker, or *) whose follower-side replication is throttled.",
           check=_throttled_replicas),
    _topic("index.interval.bytes", INT, "4096", "Bytes of log between two entries of the offset index.",
           "log.index.interval.bytes", minimum=0),
    _topic("leader.replication.throttled.replicas", LIST, "",
           "Replicas (partition:broker, or *) whose leader-side replication is throttled.",
           check=_throttled_replicas),
    _topic("local.retention.bytes", LONG, "-2",
           "With tiered storage, bytes kept on local disk per partition; -2 means retention.bytes.",
           "log.local.retention.bytes", minimum=-2),
    _topic("local.retention.ms", LONG, "-2",
           "With tiered storage, how long segments stay on local disk; -2 means retention.ms.",
           "log.local.retention.ms", minimum=-2),
    _topic("max.compaction.lag.ms", LONG, LONG_MAX,
           "Longest time a record may wait before its segment becomes eligible for compaction.",
           "log.cleaner.max.compaction.lag.ms", minimum=1),
    _topic("max.message.bytes", INT, "1048588", "Largest record batch the topic accepts, in bytes.",
           "message.max.bytes", minimum=0),
    _topic("message.timestamp.after.max.ms", LONG, "3600000",
           "How far in the future of the broker's clock a CreateTime timestamp may be.",
           "log.message.timestamp.after.max.ms", minimum=0),
    _topic("message.timestamp.before.max.ms", LONG, LONG_MAX,
           "How far in the past of the broker's clock a CreateTime timestamp may be.",
           "log.message.timestamp.before.max.ms", minimum=0),
    _topic("message.timestamp.type", STRING, "CreateTime",
           "Whether records keep the producer's timestamp (CreateTime) or get the broker's (LogAppendTime).",
           "log.message.timestamp.type", choices=("CreateTime", "LogAppendTime")),
    _topic("min.cleanable.dirty.ratio", DOUBLE, "0.5",
           "Share of uncompacted log above which the cleaner compacts a partition.",
           "log.cleaner.min.cleanable.ratio", minimum=0, maximum=1),
    _topic("min.compaction.lag.ms", LONG, "0", "Shortest time a record stays uncompacted.",
           "log.cleaner.min.compaction.lag.ms", minimum=0),
    _topic("min.insync.replicas", INT, "1",
           "Replicas that must acknowledge a write made with acks=all.", "min.insync.replicas", minimum=1),
    _topic("preallocate", BOOLEAN, "false", "Create segment files at full size up front.", "log.preallocate"),
    _topic("remote.log.copy.disable", BOOLEAN, "false",
           "With tiered storage, stop copying new segments to remote storage."),
    _topic("remote.log.delete.on.disable", BOOLEAN, "false",
           "With tiered storage, delete the remote data when tiering is turned off for the topic."),
    _topic("remote.storage.enable", BOOLEAN, "false", "Keep older segments in tiered (remote) storage."),
    _topic("retention.bytes", LONG, "-1",
           "Bytes a partition may hold before its oldest segments are deleted; -1 means no limit.",
           "log.retention.bytes"),
    _topic("retention.ms", LONG, "604800000",
           "How long records are kept before their segment is deleted; -1 means forever.",
           "log.retention.ms", "log.retention.minutes", "log.retention.hours", minimum=-1),
    _topic("segment.bytes", INT, "1073741824", "Size at which the active segment is closed and a new one begun.",
           "log.segment.bytes", minimum=61),  # Kafka: 1 MiB; see storage.log_config
    _topic("segment.index.bytes", INT, "10485760", "Maximum size of a segment's offset and time indexes.",
           "log.index.size.max.bytes", minimum=12),
    _topic("segment.jitter.ms", LONG, "0", "Random amount subtracted from segment.ms, to spread rolls out.",
           "log.roll.jitter.ms", "log.roll.jitter.hours", minimum=0),
    _topic("segment.ms", LONG, "604800000", "Age at which the active segment is closed even when not full.",
           "log.roll.ms", "log.roll.hours", minimum=1),
    _topic("unclean.leader.election.enable", BOOLEAN, "false",
           "Let a replica that is not in sync become leader, at the price of losing records.",
           "unclean.leader.election.enable"),
)}


# --- topic configs Kafka 4.0 removed -------------------------------------------------------------------------------
# Kafka 3.x had them; 4.x refuses them as unknown ("Unknown topic config name: ..."). A broker emulating a 3.x (or
# older) release accepts and describes them as Kafka 3.9 does (`accepts_removed_topic_configs`).

# MetadataVersion's inter-broker protocol versions up to 3.9, the values message.format.version took.
_IBP_VERSIONS = (("0.8.0", ""), ("0.8.1", ""), ("0.8.2", ""), ("0.9.0", ""), ("0.10.0", "IV0 IV1"),
                 ("0.10.1", "IV0 IV1 IV2"), ("0.10.2", "IV0"), ("0.11.0", "IV0 IV1 IV2"), ("1.0", "IV0"),
                 ("1.1", "IV0"), ("2.0", "IV0 IV1"), ("2.1", "IV0 IV1 IV2"), ("2.2", "IV0 IV1"), ("2.3", "IV0 IV1"),
                 ("2.4", "IV0 IV1"), ("2.5", "IV0"), ("2.6", "IV0"), ("2.7", "IV0 IV1 IV2"), ("2.8", "IV0 IV1"),
                 ("3.0", "IV0 IV1"), ("3.1", "IV0"), ("3.2", "IV0"), ("3.3", "IV0 IV1 IV2 IV3"), ("3.4", "IV0"),
                 ("3.5", "IV0 IV1 IV2"), ("3.6", "IV0 IV1 IV2"), ("3.7", "IV0 IV1 IV2 IV3 IV4"), ("3.8", "IV0"),
                 ("3.9", "IV0"))
_MESSAGE_FORMAT_VERSIONS = frozenset(
    {release for release, _ in _IBP_VERSIONS}
    | {f"{release}-{sub}" for release, subs in _IBP_VERSIONS for sub in subs.split()})


def _message_format_version(value: str) -> None:
    """MetadataVersion.fromVersionString: the first three parts of a 0.x version, two otherwise, must name one."""
    parts = value.split(".")
    wanted = 3 if value.startswith("0.") else 2
    key = value if wanted >= len(parts) else ".".join(parts[:wanted])
    if key not in _MESSAGE_FORMAT_VERSIONS:
        raise ValueError(f"Version {value} is not a valid version")


_REMOVED_TOPIC_CONFIGS = (
    _topic("message.downconversion.enable", BOOLEAN, "true",
           "Whether the broker down-converts records for consumers of old message formats.",
           "log.message.downconversion.enable"),
    _topic("message.format.version", STRING, "3.0-IV1",
           "Message format version of the topic's appends; ignored from 3.0 on (removed in Kafka 4.0).",
           "log.message.format.version", check=_message_format_version),
    _topic("message.timestamp.difference.max.ms", LONG, LONG_MAX,
           "How far a CreateTime timestamp may be from the broker's clock, where the before/after settings are "
           "unset (replaced by them in Kafka 4.0).", "log.message.timestamp.difference.max.ms", minimum=0),
)
_RELEASE_DEFAULTS = {"2.8": {"message.format.version": "2.8-IV1"}}  # 3.0 on: 3.0-IV1 (IBP_3_0_IV1)

REMOVED_BROKER_CONFIGS: dict[str, ConfigKey] = {key.name: key for key in (
    ConfigKey("log.message.downconversion.enable", BOOLEAN, "true", "Default of message.downconversion.enable."),
    ConfigKey("log.message.format.version", STRING, "3.0-IV1", "Default of message.format.version."),
    ConfigKey("log.message.timestamp.difference.max.ms", LONG, LONG_MAX,
              "Default of message.timestamp.difference.max.ms."),
)}
"""The broker-level synonyms of the removed topic configs, for their synonym lists (Kafka 3.9's defaults)."""


def before_kafka_4(release: str | None) -> bool:
    """Whether a broker emulating Kafka `release` (None: not emulating, so 4.x) stands in for a release before 4.0."""
    return release is not None and int(release.split(".")[0]) < 4


def accepts_removed_topic_configs(release: str | None) -> bool:
    """Whether a broker emulating Kafka `release` (None: not emulating, so 4.x) takes the removed topic configs."""
    return before_kafka_4(release)


def removed_topic_configs(release: str | None = None) -> dict[str, ConfigKey]:
    """The topic configs Kafka 4.0 removed, with the defaults of Kafka `release` (default 3.9's)."""
    defaults = _RELEASE_DEFAULTS.get(release or "", {})
    return {key.name: (dataclasses.replace(key, default=defaults[key.name]) if key.name in defaults else key)
            for key in _REMOVED_TOPIC_CONFIGS}


REMOVED_TOPIC_CONFIGS = removed_topic_configs()


def topic_config_key(name: str) -> ConfigKey | None:
    """The catalogue entry of a topic config name, removed ones included (None for a name Kafka never had)."""
    return TOPIC_CONFIGS.get(name) or REMOVED_TOPIC_CONFIGS.get(name)


def refused_topic_config(names, release: str | None) -> str | None:
    """The first of `names` a broker emulating `release` refuses as Kafka 4.x does (a removed config), or None."""
    if accepts_removed_topic_configs(release):
        return None
    return next((name for name in names if name in REMOVED_TOPIC_CONFIGS), None)


# --- broker configs -----------------------------------------------------------------------------------------------

def _broker(name, config_type, default, doc, **rules) -> ConfigKey:
    return ConfigKey(name, config_type, default, doc, dynamic=name in DYNAMIC_NAMES, **rules)


# Kafka 4.x's dynamic broker configs (DynamicBrokerConfig.AllDynamicConfigs), by the part of the broker that
# reconfigures itself with them; every other broker config is read-only (Kafka refuses to change it at run time).
SSL_RECONFIGURABLE = frozenset({  # SslConfigs.RECONFIGURABLE_CONFIGS: per listener only (listener.name.<l>.)
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.keystore.certificate.chain",
    "ssl.keystore.key", "ssl.truststore.certificates"})
LOG_CLEANER_RECONFIGURABLE = frozenset({
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size", "message.max.bytes", "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms"})
LOG_RECONFIGURABLE = frozenset({  # the first broker synonym of each topic config (ServerTopicConfigSynonyms)
    "log.segment.bytes", "log.roll.ms", "log.roll.jitter.ms", "log.index.size.max.bytes",
    "log.flush.interval.messages", "log.flush.interval.ms", "log.retention.bytes", "log.retention.ms",
    "message.max.bytes", "log.index.interval.bytes", "log.cleaner.delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", "log.segment.delete.delay.ms",
    "log.cleaner.min.cleanable.ratio", "log.cleanup.policy", "unclean.leader.election.enable",
    "min.insync.replicas", "compression.type", "compression.gzip.level", "compression.lz4.level",
    "compression.zstd.level", "log.preallocate", "log.message.timestamp.type",
    "log.message.timestamp.before.max.ms", "log.message.timestamp.after.max.ms", "log.local.retention.ms",
    "log.local.retention.bytes"})
THREAD_POOL_RECONFIGURABLE = frozenset({  # DynamicThreadPool: at least half, at most double the current value
    "num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir", "background.threads"})
LISTENER_RECONFIGURABLE = frozenset({  # DynamicListenerConfig (advertised.listeners left it in 4.0, KAFKA-18405)
    "listeners", "listener.security.protocol.map", "principal.builder.class", "ssl.protocol", "ssl.provider",
    "ssl.cipher.suites", "ssl.enabled.protocols", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation", "ssl.client.auth",
    "ssl.engine.factory.class", "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config",
    "sasl.enabled.mechanisms", "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter", "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.buffer.seconds", "max.connections", "max.connection.creation.rate", "num.network.threads",
    *SSL_RECONFIGURABLE})
SOCKET_SERVER_RECONFIGURABLE = frozenset({
    "max.connections.per.ip", "max.connections.per.ip.overrides", "max.connections", "max.connection.creation.rate"})
PRODUCER_STATE_RECONFIGURABLE = frozenset({"producer.id.expiration.ms", "transaction.partition.verification.enable"})
REMOTE_LOG_RECONFIGURABLE = frozenset({
    "remote.log.index.file.cache.total.size.bytes", "remote.fetch.max.wait.ms",
    "remote.log.manager.copy.max.bytes.per.second", "remote.log.manager.fetch.max.bytes.per.second",
    "remote.list.offsets.request.timeout.ms", "remote.log.manager.copier.thread.pool.size",
    "remote.log.manager.expiration.thread.pool.size", "remote.log.manager.follower.thread.pool.size",
    "remote.log.reader.threads"})
DYNAMIC_NAMES = (SSL_RECONFIGURABLE | LOG_CLEANER_RECONFIGURABLE | LOG_RECONFIGURABLE | THREAD_POOL_RECONFIGURABLE
                 | {"metric.reporters", "config.providers"} | LISTENER_RECONFIGURABLE | SOCKET_SERVER_RECONFIGURABLE
                 | PRODUCER_STATE_RECONFIGURABLE | REMOTE_LOG_RECONFIGURABLE)
"""Every broker config Kafka 4.x changes at run time."""
CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})
PER_BROKER_CONFIGS = (SSL_RECONFIGURABLE | LISTENER_RECONFIGURABLE) - CLUSTER_LEVEL_LISTENER_CONFIGS
"""Dynamic configs that only a node's own resource may set (Kafka refuses them as cluster-wide defaults)."""
BROKER_QUOTA_CONFIGS = {"leader.replication.throttled.rate": "9223372036854775807",
                        "follower.replication.throttled.rate": "9223372036854775807",
                        "replica.alter.log.dirs.io.max.bytes.per.second": "9223372036854775807"}
"""Kafka's broker quota configs (QuotaConfig.brokerQuotaConfigs, LONG, at least 0): dynamic only, not KafkaConfig
names, so Kafka describes them as custom names."""


_SECURITY_MAP_DEFAULT = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"

BROKER_CONFIGS: dict[str, ConfigKey] = {key.name: key for key in (
    # identity and roles
    _broker("node.id", INT, "-1", "Id of this node in the cluster."),
    _broker("broker.id", INT, "-1", "Id of this broker; in KRaft mode the same as node.id."),
    _broker("broker.rack", STRING, None, "Rack of the broker, for rack-aware replica placement."),
    _broker("process.roles", LIST, "", "Roles this node plays: broker, controller, or both."),
    _broker("controller.listener.names", STRING, None, "Listeners that serve controller traffic."),
    _broker("controller.quorum.voters", LIST, "", "Static list of the controller quorum's voters."),
    _broker("controller.quorum.bootstrap.servers", LIST, "", "Controllers to contact to discover the quorum."),
    # listeners and sockets
    _broker("listeners", STRING, "PLAINTEXT://:9092", "Addresses the broker listens on."),
    _broker("advertised.listeners", STRING, None, "Addresses clients are told to connect to."),  # read-only since 4.0
    _broker("listener.security.protocol.map", STRING, _SECURITY_MAP_DEFAULT,
            "Security protocol of each listener name."),
    _broker("inter.broker.listener.name", STRING, None, "Listener brokers use to talk to each other."),
    _broker("security.inter.broker.protocol", STRING, "PLAINTEXT", "Protocol between brokers."),
    _broker("socket.request.max.bytes", INT, "104857600", "Largest request the broker accepts, in bytes."),
    _broker("socket.send.buffer.bytes", INT, "102400", "SO_SNDBUF of the server sockets; -1 for the OS default."),
    _broker("socket.receive.buffer.bytes", INT, "102400",
            "SO_RCVBUF of the server sockets; -1 for the OS default."),
    _broker("socket.listen.backlog.size", INT, "50", "Backlog of pending connections per listener."),
    _broker("queued.max.requests", INT, "500", "Requests that may wait before the network threads stop reading."),
    _broker("queued.max.request.bytes", LONG, "-1", "Bytes of queued requests allowed; -1 means no limit."),
    _broker("connections.max.idle.ms", LONG, "600000", "Idle time after which a connection is closed."),
    _broker("connections.max.reauth.ms", LONG, "0", "Lifetime of an authenticated session; 0 means unlimited."),
    _broker("max.connections", INT, INT_MAX, "Connections the broker accepts in total."),
    _broker("max.connections.per.ip", INT, INT_MAX, "Connections accepted from one address."),
    _broker("max.connections.per.ip.overrides", STRING, "", "Per-address exceptions to max.connections.per.ip."),
    _broker("max.connection.creation.rate", INT, INT_MAX, "New connections accepted per second."),
    # threads
    _broker("num.network.threads", INT, "3", "Threads that read requests and write responses."),
    _broker("num.io.threads", INT, "8", "Threads that process requests."),
    _broker("background.threads", INT, "10", "Threads for background work."),
    _broker("num.replica.fetchers", INT, "1", "Fetcher threads per source broker for replication."),
    _broker("num.recovery.threads.per.data.dir", INT, "2",
            "Threads per data directory that recover logs at start-up and flush them at shutdown."),
    _broker("num.replica.alter.log.dirs.threads", INT, None, "Threads that move replicas between directories."),
    # topics
    _broker("num.partitions", INT, "1", "Partitions of a topic created without a partition count."),
    _broker("default.replication.factor", INT, "1", "Replication factor of automatically created topics."),
    _broker("auto.create.topics.enable", BOOLEAN, "true",
            "Create a topic when a client asks for metadata of one that does not exist."),
    _broker("delete.topic.enable", BOOLEAN, "true", "Allow topics to be deleted."),
    _broker("auto.leader.rebalance.enable", BOOLEAN, "true", "Move leadership back to preferred replicas."),
    _broker("leader.imbalance.check.interval.seconds", LONG, "300", "How often leader balance is checked."),
    _broker("leader.imbalance.per.broker.percentage", INT, "10", "Leader imbalance tolerated per broker."),
    _broker("unclean.leader.election.enable", BOOLEAN, "false",
            "Default of the topic config of the same name."),
    _broker("min.insync.replicas", INT, "1", "Default of the topic config of the same name."),
    _broker("compression.type", STRING, "producer", "Default of the topic config of the same name."),
    _broker("compression.gzip.level", INT, "-1", "Default of the topic config of the same name."),
    _broker("compression.lz4.level", INT, "9", "Default of the topic config of the same name."),
    _broker("compression.zstd.level", INT, "3", "Default of the topic config of the same name."),
    _broker("message.max.bytes", INT, "1048588", "Default of the topic config max.message.bytes."),
    _broker("create.topic.policy.class.name", CLASS, None, "Policy class that vets CreateTopics requests."),
    _broker("alter.config.policy.class.name", CLASS, None, "Policy class that vets config changes."),
    # logs
    _broker("log.dirs", STRING, None, "Directories that hold the partition logs."),
    _broker("log.dir", STRING, "/tmp/kafka-logs", "Directory of the logs when log.dirs is not set."),
    _broker("log.segment.bytes", INT, "1073741824", "Default of segment.bytes."),
    _broker("log.roll.ms", LONG, None, "Default of segment.ms; log.roll.hours applies when unset."),
    _broker("log.roll.hours", INT, "168", "Default of segment.ms, in hours.", minimum=1),
    _broker("log.roll.jitter.ms", LONG, None,
            "Default of segment.jitter.ms; log.roll.jitter.hours applies when unset."),
    _broker("log.roll.jitter.hours", INT, "0", "Default of segment.jitter.ms, in hours.", minimum=0),
    _broker("log.retention.ms", LONG, None, "Default of retention.ms; the minutes or hours form applies when unset."),
    _broker("log.retention.minutes", INT, None, "Default of retention.ms, in minutes."),
    _broker("log.retention.hours", INT, "168", "Default of retention.ms, in hours."),
    _broker("log.retention.bytes", LONG, "-1", "Default of retention.bytes."),
    _broker("log.retention.check.interval.ms", LONG, "300000", "How often retention runs.", minimum=1),
    _broker("log.cleanup.policy", LIST, "delete", "Default of cleanup.policy.",
            choices=("compact", "delete")),
    _broker("log.index.size.max.bytes", INT, "10485760", "Default of segment.index.bytes."),
    _broker("log.index.interval.bytes", INT, "4096", "Default of index.interval.bytes."),
    _broker("log.flush.interval.messages", LONG, LONG_MAX, "Default of flush.messages."),
    _broker("log.flush.interval.ms", LONG, None,
            "Default of flush.ms; log.flush.scheduler.interval.ms applies when unset."),
    _broker("log.flush.scheduler.interval.ms", LONG, LONG_MAX, "How often logs are checked for a due flush."),
    _broker("log.flush.offset.checkpoint.interval.ms", INT, "60000", "How often recovery points are written."),
    _broker("log.flush.start.offset.checkpoint.interval.ms", INT, "60000",
            "How often log start offsets are written."),
    _broker("log.segment.delete.delay.ms", LONG, "60000", "Default of file.delete.delay.ms."),
    _broker("log.preallocate", BOOLEAN, "false", "Default of preallocate."),
    _broker("log.message.timestamp.type", STRING, "CreateTime", "Default of message.timestamp.type."),
    _broker("log.message.timestamp.before.max.ms", LONG, LONG_MAX, "Default of message.timestamp.before.max.ms."),
    _broker("log.message.timestamp.after.max.ms", LONG, "3600000", "Default of message.timestamp.after.max.ms."),
    _broker("log.local.retention.ms", LONG, "-2", "Default of local.retention.ms."),
    _broker("log.local.retention.bytes", LONG, "-2", "Default of local.retention.bytes."),
    _broker("log.dir.failure.timeout.ms", LONG, "30000", "How long a failed log directory may go unreported."),
    _broker("log.cleaner.enable", BOOLEAN, "true", "Run the log cleaner, which compacts compacted topics."),
    _broker("log.cleaner.threads", INT, "1", "Threads of the log cleaner."),
    _broker("log.cleaner.backoff.ms", LONG, "15000", "Pause of the cleaner when nothing needs cleaning."),
    _broker("log.cleaner.dedupe.buffer.size", LONG, "134217728", "Memory the cleaner uses to deduplicate keys."),
    _broker("log.cleaner.io.buffer.size", INT, "524288", "I/O buffer memory of the cleaner."),
    _broker("log.cleaner.io.buffer.load.factor", DOUBLE, "0.9", "Fill factor of the cleaner's dedupe buffer."),
    _broker("log.cleaner.io.max.bytes.per.second", DOUBLE, "1.7976931348623157E308",
            "I/O rate limit of the cleaner."),
    _broker("log.cleaner.min.cleanable.ratio", DOUBLE, "0.5", "Default of min.cleanable.dirty.ratio."),
    _broker("log.cleaner.delete.retention.ms", LONG, "86400000", "Default of delete.retention.ms."),
    _broker("log.cleaner.min.compaction.lag.ms", LONG, "0", "Default of min.compaction.lag.ms."),
    _broker("log.cleaner.max.compaction.lag.ms", LONG, LONG_MAX, "Default of max.compaction.lag.ms."),
    _broker("remote.log.storage.system.enable", BOOLEAN, "false", "Enable tiered storage on this broker."),
    _broker("remote.log.index.file.cache.total.size.bytes", LONG, "1073741824",
            "Disk space of tiered storage's index cache (no effect here).", minimum=1),
    _broker("remote.fetch.max.wait.ms", INT, "500", "Wait of a fetch from tiered storage (no effect here).",
            minimum=1),
    _broker("remote.list.offsets.request.timeout.ms", LONG, "30000",
            "Timeout of an offset look-up in tiered storage (no effect here).", minimum=1),
    _broker("remote.log.manager.copy.max.bytes.per.second", LONG, LONG_MAX,
            "Copy rate to tiered storage (no effect here).", minimum=1),
    _broker("remote.log.manager.fetch.max.bytes.per.second", LONG, LONG_MAX,
            "Fetch rate from tiered storage (no effect here).", minimum=1),
    _broker("remote.log.manager.copier.thread.pool.size", INT, "10",
            "Threads copying segments to tiered storage (no effect here).", minimum=1),
    _broker("remote.log.manager.expiration.thread.pool.size", INT, "10",
            "Threads expiring tiered segments (no effect here).", minimum=1),
    _broker("remote.log.manager.follower.thread.pool.size", INT, "2",
            "Threads of followers' tiered storage work (no effect here).", minimum=1),
    _broker("remote.log.reader.threads", INT, "10", "Threads reading tiered storage (no effect here).", minimum=1),
    # replication
    _broker("replica.lag.time.max.ms", LONG, "30000", "Time after which a silent follower leaves the ISR."),
    _broker("replica.fetch.max.bytes", INT, "1048576", "Bytes a follower fetches per partition."),
    _broker("replica.fetch.response.max.bytes", INT, "10485760", "Bytes a follower fetch returns in total."),
    _broker("replica.fetch.min.bytes", INT, "1", "Bytes a follower fetch waits for."),
    _broker("replica.fetch.wait.max.ms", INT, "500", "How long a follower fetch waits for data."),
    _broker("replica.fetch.backoff.ms", INT, "1000", "Pause of a follower after a fetch error."),
    _broker("replica.socket.timeout.ms", INT, "30000", "Socket timeout of replication requests."),
    _broker("replica.socket.receive.buffer.bytes", INT, "65536", "SO_RCVBUF of replication connections."),
    _broker("replica.high.watermark.checkpoint.interval.ms", LONG, "5000", "How often high watermarks are saved."),
    _broker("replica.selector.class", STRING, None, "Chooses the replica a consumer reads from."),
    _broker("fetch.max.bytes", INT, "57671680", "Bytes a consumer fetch returns at most."),
    _broker("fetch.purgatory.purge.interval.requests", INT, "1000", "Purge interval of the fetch purgatory."),
    _broker("producer.purgatory.purge.interval.requests", INT, "1000", "Purge interval of the produce purgatory."),
    _broker("delete.records.purgatory.purge.interval.requests", INT, "1",
            "Purge interval of the delete-records purgatory."),
    _broker("max.incremental.fetch.session.cache.slots", INT, "1000", "Incremental fetch sessions kept at most."),
    # groups and committed offsets
    _broker("group.initial.rebalance.delay.ms", INT, "3000", "Wait for more members before the first rebalance."),
    _broker("group.min.session.timeout.ms", INT, "6000", "Shortest session timeout a member may ask for."),
    _broker("group.max.session.timeout.ms", INT, "1800000", "Longest session timeout a member may ask for."),
    _broker("group.max.size", INT, INT_MAX, "Members a classic group may have."),
    _broker("group.coordinator.rebalance.protocols", LIST, "classic,consumer,streams",
            "Group protocols the broker serves."),
    _broker("group.consumer.session.timeout.ms", INT, "45000", "Session timeout of consumer-protocol members."),
    _broker("group.consumer.heartbeat.interval.ms", INT, "5000", "Heartbeat interval of consumer-protocol members."),
    _broker("group.consumer.max.size", INT, INT_MAX, "Members a consumer-protocol group may have."),
    _broker("group.consumer.min.session.timeout.ms", INT, "45000", "Shortest session timeout of a consumer group."),
    _broker("group.consumer.max.session.timeout.ms", INT, "60000", "Longest session timeout of a consumer group."),
    _broker("group.consumer.min.heartbeat.interval.ms", INT, "5000", "Shortest heartbeat interval of consumer groups."),
    _broker("group.consumer.max.heartbeat.interval.ms", INT, "15000", "Longest heartbeat interval of consumer groups."),
    _broker("group.consumer.assignors", LIST, "uniform,range", "Server-side assignors; the first is the default."),
    _broker("group.consumer.migration.policy", STRING, "bidirectional",
            "Whether classic and consumer groups convert into each other while they have members."),
    _broker("group.share.session.timeout.ms", INT, "45000", "Session timeout of share-group members."),
    _broker("group.share.min.session.timeout.ms", INT, "45000", "Shortest session timeout of a share group."),
    _broker("group.share.max.session.timeout.ms", INT, "60000", "Longest session timeout of a share group."),
    _broker("group.share.heartbeat.interval.ms", INT, "5000", "Heartbeat interval of share-group members."),
    _broker("group.share.min.heartbeat.interval.ms", INT, "5000", "Shortest heartbeat interval of a share group."),
    _broker("group.share.max.heartbeat.interval.ms", INT, "15000", "Longest heartbeat interval of a share group."),
    _broker("group.share.max.size", INT, "200", "Members a share group may have."),
    _broker("group.share.record.lock.duration.ms", INT, "30000", "How long a delivered record stays acquired."),
    _broker("group.share.min.record.lock.duration.ms", INT, "15000", "Shortest record lock a share group may set."),
    _broker("group.share.max.record.lock.duration.ms", INT, "60000", "Longest record lock a share group may set."),
    _broker("group.share.delivery.count.limit", INT, "5", "Deliveries of a record before it is archived."),
    _broker("group.share.partition.max.record.locks", INT, "2000", "Records of a share-partition acquired at once."),
    _broker("group.share.max.share.sessions", INT, "2000", "Share sessions a broker keeps at most."),
    _broker("share.coordinator.state.topic.num.partitions", INT, "50", "Partitions of __share_group_state."),
    _broker("share.coordinator.state.topic.segment.bytes", INT, "104857600", "Segment size of __share_group_state."),
    _broker("offsets.topic.num.partitions", INT, "50", "Partitions of __consumer_offsets."),
    _broker("offsets.topic.replication.factor", SHORT, "3", "Replication factor of __consumer_offsets."),
    _broker("offsets.topic.segment.bytes", INT, "104857600", "Segment size of __consumer_offsets."),
    _broker("offsets.topic.compression.codec", INT, "0", "Codec of the batches of __consumer_offsets."),
    _broker("offsets.load.buffer.size", INT, "5242880", "Read buffer used to load committed offsets."),
    _broker("offsets.commit.timeout.ms", INT, "5000", "How long an offset commit waits to be replicated."),
    _broker("offsets.retention.minutes", INT, "10080", "How long committed offsets of an empty group are kept."),
    _broker("offsets.retention.check.interval.ms", LONG, "600000", "How often expired offsets are removed."),
    _broker("offset.metadata.max.bytes", INT, "4096", "Largest metadata string of a committed offset."),
    # transactions and producer ids
    _broker("share.coordinator.state.topic.replication.factor", SHORT, "3",
            "Replication factor of the share-group state topic."),
    _broker("share.coordinator.state.topic.min.isr", SHORT, "2", "min.insync.replicas of the share-group state topic."),
    _broker("transactional.id.expiration.ms", INT, "604800000", "Idle time after which a transactional id expires."),
    _broker("transaction.max.timeout.ms", INT, "900000", "Longest transaction timeout a producer may ask for."),
    _broker("transaction.state.log.num.partitions", INT, "50", "Partitions of __transaction_state."),
    _broker("transaction.state.log.replication.factor", SHORT, "3", "Replication factor of __transaction_state."),
    _broker("transaction.state.log.min.isr", INT, "2", "min.insync.replicas of __transaction_state."),
    _broker("transaction.state.log.segment.bytes", INT, "104857600", "Segment size of __transaction_state."),
    _broker("transaction.state.log.load.buffer.size", INT, "5242880", "Read buffer used to load transactions."),
    _broker("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, "10000",
            "How often timed-out transactions are aborted."),
    _broker("transaction.remove.expired.transaction.cleanup.interval.ms", INT, "3600000",
            "How often expired transactional ids are removed."),
    _broker("transaction.partition.verification.enable", BOOLEAN, "true",
            "Check that a partition joined the transaction before accepting its writes."),
    _broker("add.partitions.to.txn.retry.backoff.ms", INT, "20",
            "Pause between a partition leader's retries of a transaction coordinator that answered it is busy."),
    _broker("add.partitions.to.txn.retry.backoff.max.ms", INT, "100",
            "How long a partition leader retries a busy transaction coordinator before answering the producer."),
    _broker("producer.id.expiration.ms", INT, "86400000", "Idle time after which a producer id's state expires."),
    _broker("producer.id.expiration.check.interval.ms", INT, "600000", "How often expired producer ids are removed."),
    # KRaft metadata
    _broker("metadata.log.dir", STRING, None, "Directory of the cluster metadata log."),
    _broker("metadata.log.segment.bytes", INT, "1073741824", "Segment size of the metadata log."),
    _broker("metadata.max.retention.bytes", LONG, "104857600", "Bytes of metadata log kept before snapshots."),
    _broker("metadata.max.retention.ms", LONG, "604800000", "How long metadata log segments are kept."),
    _broker("broker.heartbeat.interval.ms", INT, "2000", "Interval of broker heartbeats to the controller."),
    _broker("broker.session.timeout.ms", INT, "9000", "How long a broker without heartbeats stays registered."),
    _broker("initial.broker.registration.timeout.ms", INT, "60000", "How long a broker waits to register."),
    # quotas and metrics
    _broker("quota.window.num", INT, "11", "Samples kept for client quotas."),
    _broker("quota.window.size.seconds", INT, "1", "Time span of one client quota sample."),
    _broker("replication.quota.window.num", INT, "11", "Samples kept for replication quotas."),
    _broker("replication.quota.window.size.seconds", INT, "1", "Time span of one replication quota sample."),
    _broker("metric.reporters", LIST, "org.apache.kafka.common.metrics.JmxReporter",
            "Classes that receive the broker's metrics (no effect here)."),
    _broker("config.providers", LIST, "", "Classes that resolve config variables (no effect here)."),
    _broker("metrics.num.samples", INT, "2", "Samples kept to compute metrics."),
    _broker("metrics.sample.window.ms", LONG, "30000", "Time span of one metrics sample."),
    _broker("metrics.recording.level", STRING, "INFO", "Highest level of metrics recorded."),
    _broker("telemetry.max.bytes", INT, "1048576", "Largest client metrics payload a PushTelemetry may carry."),
    # security
    _broker("authorizer.class.name", STRING, "", "Class that authorizes requests; empty means none."),
    _broker("sasl.enabled.mechanisms", LIST, "GSSAPI", "SASL mechanisms the broker offers."),
    _broker("sasl.mechanism.inter.broker.protocol", STRING, "GSSAPI", "SASL mechanism between brokers."),
    _broker("ssl.protocol", STRING, "TLSv1.3", "TLS protocol of the SSL context."),
    _broker("ssl.enabled.protocols", LIST, "TLSv1.2,TLSv1.3", "TLS protocols accepted."),
    _broker("ssl.client.auth", STRING, "none", "Whether TLS clients must present a certificate."),
    _broker("ssl.endpoint.identification.algorithm", STRING, "https", "Host name check of TLS peers."),
    _broker("ssl.keystore.type", STRING, "JKS", "Format of the key store."),
    _broker("ssl.keystore.location", STRING, None, "Path of the key store."),
    _broker("ssl.keystore.password", PASSWORD, None, "Password of the key store."),
    _broker("ssl.key.password", PASSWORD, None, "Password of the private key."),
    _broker("ssl.truststore.type", STRING, "JKS", "Format of the trust store."),
    _broker("ssl.truststore.location", STRING, None, "Path of the trust store."),
    _broker("ssl.truststore.password", PASSWORD, None, "Password of the trust store."),
    _broker("ssl.keystore.certificate.chain", PASSWORD, None, "PEM certificate chain of the key store."),
    _broker("ssl.keystore.key", PASSWORD, None, "PEM private key of the key store."),
    _broker("ssl.truststore.certificates", PASSWORD, None, "PEM certificates of the trust store."),
    _broker("ssl.cipher.suites", LIST, "", "Cipher suites TLS may use; empty means the defaults."),
    _broker("ssl.principal.mapping.rules", STRING, "DEFAULT", "Rules that turn a certificate subject into a "
            "principal name."),
    _broker("ssl.keymanager.algorithm", STRING, "SunX509", "Java key manager algorithm (no effect here)."),
    _broker("ssl.trustmanager.algorithm", STRING, "PKIX", "Java trust manager algorithm (no effect here)."),
    _broker("ssl.secure.random.implementation", STRING, None, "Java random generator of TLS (no effect here)."),
    _broker("ssl.engine.factory.class", CLASS, None, "Java TLS engine factory (no effect here)."),
    _broker("ssl.provider", STRING, None, "Java security provider of TLS (no effect here)."),
    _broker("ssl.allow.dn.changes", BOOLEAN, "false", "Whether a reloaded key store may change its subject."),
    _broker("ssl.allow.san.changes", BOOLEAN, "false", "Whether a reloaded key store may change its names."),
    _broker("principal.builder.class", CLASS,
            "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
            "Class that builds a connection's principal."),
    _broker("sasl.jaas.config", PASSWORD, None, "JAAS login context of a listener's SASL mechanism."),
    _broker("super.users", STRING, None, "Principals the authorizer allows everything (User:a;User:b)."),
    _broker("allow.everyone.if.no.acl.found", BOOLEAN, "false", "Whether a resource without ACLs is open to all."),
    _broker("connection.failed.authentication.delay.ms", INT, "100", "How long a refused client waits for its "
            "answer and the close."),
    _broker("sasl.server.max.receive.size", INT, "524288", "Largest SASL token accepted before authentication."),
    _broker("sasl.kerberos.service.name", STRING, None, "Kerberos service name (no effect here)."),
    _broker("sasl.kerberos.kinit.cmd", STRING, "/usr/bin/kinit", "Kerberos kinit command (no effect here)."),
    _broker("sasl.kerberos.min.time.before.relogin", LONG, "60000", "Kerberos relogin pause (no effect here)."),
    _broker("sasl.kerberos.ticket.renew.jitter", DOUBLE, "0.05", "Kerberos renewal jitter (no effect here)."),
    _broker("sasl.kerberos.ticket.renew.window.factor", DOUBLE, "0.8", "Kerberos renewal point (no effect here)."),
    _broker("sasl.kerberos.principal.to.local.rules", LIST, "DEFAULT", "Kerberos name rules (no effect here)."),
    _broker("sasl.login.refresh.window.factor", DOUBLE, "0.8", "Login refresh point (no effect here)."),
    _broker("sasl.login.refresh.window.jitter", DOUBLE, "0.05", "Login refresh jitter (no effect here)."),
    _broker("sasl.login.refresh.min.period.seconds", SHORT, "60", "Login refresh pause (no effect here)."),
    _broker("sasl.login.refresh.buffer.seconds", SHORT, "300", "Login refresh margin (no effect here)."),
    _broker("sasl.oauthbearer.jwks.endpoint.url", STRING, None, "Where the keys that sign OAuth tokens are "
            "(file: URLs here)."),
    _broker("sasl.oauthbearer.jwks.endpoint.refresh.ms", LONG, "3600000", "Reload period of the keys (no effect "
            "here)."),
    _broker("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", LONG, "100", "Key fetch backoff (no effect here)."),
    _broker("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", LONG, "10000", "Key fetch backoff limit (no "
            "effect here)."),
    _broker("sasl.oauthbearer.expected.audience", LIST, None, "Audiences an OAuth token must name one of."),
    _broker("sasl.oauthbearer.expected.issuer", STRING, None, "Issuer an OAuth token must name."),
    _broker("sasl.oauthbearer.sub.claim.name", STRING, "sub", "Claim of an OAuth token that names the principal."),
    _broker("sasl.oauthbearer.scope.claim.name", STRING, "scope", "Claim of an OAuth token that lists scopes."),
    _broker("sasl.oauthbearer.clock.skew.seconds", INT, "30", "Clock difference tolerated on OAuth token times."),
)}

# Broker names whose synonyms Kafka lists together (the ms form first); any other name is its own only synonym.
_BROKER_SYNONYM_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)
_BROKER_SYNONYMS = {name: group for group in _BROKER_SYNONYM_GROUPS for name in group}

# Names whose effective default here differs from Kafka's; their value comes from the running configuration.
_OUR_DEFAULTS = frozenset({"node.id", "broker.id", "listeners", "log.dirs", "group.initial.rebalance.delay.ms",
                           "group.consumer.heartbeat.interval.ms", "group.consumer.min.heartbeat.interval.ms"})


def broker_synonyms(name: str) -> tuple[str, ...]:
    """The broker names Kafka reports as synonyms of broker config `name`, highest precedence first."""
    return _BROKER_SYNONYMS.get(name, (name,))


# --- DescribeConfigs ----------------------------------------------------------------------------------------------

def describe_topic_configs(broker, topic: str) -> list[ConfigEntry]:
    """Every topic config of `topic`, sorted by name, as Kafka describes it. A name without overrides (a topic
    about to be created, say) is described with the broker's defaults. A broker emulating a Kafka 3.x release
    (`broker.emulated_release`) also lists the topic configs Kafka 4.0 removed, with 3.x's defaults."""
    overrides = broker.logs.topic_overrides.get(topic, {})
    modeled = broker.logs.log_config(topic).to_topic_properties()
    layers = broker_layers(broker)
    keys = list(TOPIC_CONFIGS.values())
    if accepts_removed_topic_configs(getattr(broker, "emulated_release", None)):
        keys += removed_topic_configs(broker.emulated_release).values()
    return [_topic_entry(key, overrides, modeled, layers) for key in sorted(keys, key=lambda key: key.name)]


def _topic_entry(key: ConfigKey, overrides: Mapping[str, str], modeled: Mapping[str, str],
                 layers: list) -> ConfigEntry:
    synonyms = _broker_level_synonyms(key.synonyms[0], key.synonyms, layers, None) if key.synonyms else []
    if key.name in overrides:
        synonyms.insert(0, (key.name, _safe_text(key, overrides[key.name]), DYNAMIC_TOPIC_CONFIG))
    value = _topic_value(key, overrides, modeled, layers)
    return ConfigEntry(key.name, None if key.sensitive else value, False,
                       synonyms[0][2] if synonyms else DEFAULT_CONFIG, key.sensitive, key.type, key.doc, synonyms)


def _topic_value(key: ConfigKey, overrides: Mapping[str, str], modeled: Mapping[str, str],
                 layers: list) -> str | None:
    """The effective value: the override as given (normalized), else what storage computed from the broker's
    settings (time units converted), else the broker-level synonym, else Kafka's default."""
    if key.name in overrides:
        return _safe_text(key, overrides[key.name])
    if key.name in modeled:
        return modeled[key.name]
    for properties, _ in layers:
        for synonym in key.synonyms:
            if synonym in properties:
                return _safe_text(key, properties[synonym])
    return key.default


def describe_broker_configs(broker) -> list[ConfigEntry]:
    """Every catalogued broker config of this broker (node `broker.node_id`), sorted by name, with its effective
    value (per-broker dynamic, cluster-wide dynamic default, static, default: the first set), and the names set
    dynamically that the catalogue does not know (Kafka keeps such custom names; their type is unknown)."""
    layers = broker_layers(broker)
    names = set(BROKER_CONFIGS)
    for properties, source in layers:
        if source != STATIC_BROKER_CONFIG:
            names.update(properties)
    return [_broker_entry(broker, _key_of(name), layers) for name in sorted(names)]


def describe_default_broker_configs(broker) -> list[ConfigEntry]:
    """The cluster-wide dynamic defaults (BROKER resource ""): only the names set there, as Kafka lists them."""
    layers = [(properties, source) for properties, source in broker_layers(broker)
              if source == DYNAMIC_DEFAULT_BROKER_CONFIG]
    return [_broker_entry(broker, _key_of(name), layers, default_level=True) for name in sorted(layers[0][0])]


LISTENER_PREFIX = "listener.name."


def listener_base_name(name: str) -> str:
    """The broker config a listener's own config stands for: `listener.name.<l>.<name>` (or
    `listener.name.<l>.<mechanism>.<name>`) -> `<name>`; any other name is itself."""
    if not name.startswith(LISTENER_PREFIX):
        return name
    rest = name[len(LISTENER_PREFIX):].partition(".")[2]
    return rest if rest in BROKER_CONFIGS else rest.partition(".")[2] or rest


def _key_of(name: str) -> ConfigKey:
    """The catalogue entry of a broker config name; a listener's own has its base name's type (a secret stays
    hidden) and is not itself in Kafka's dynamic list; a custom name has an unknown type."""
    key = BROKER_CONFIGS.get(name)
    if key is not None:
        return key
    base = BROKER_CONFIGS.get(listener_base_name(name))
    if base is not None:
        return dataclasses.replace(base, name=name, dynamic=False)
    return ConfigKey(name, UNKNOWN_TYPE, None, None, dynamic=name in DYNAMIC_NAMES)


def _broker_entry(broker, key: ConfigKey, layers: list, *, default_level: bool = False) -> ConfigEntry:
    synonyms = _broker_level_synonyms(key.name, broker_synonyms(key.name), layers, broker)
    if default_level:  # the cluster default resource shows its own layer only
        synonyms = [synonym for synonym in synonyms if synonym[2] == DYNAMIC_DEFAULT_BROKER_CONFIG]
    value = next((_broker_text(key.name, properties[key.name]) for properties, _ in layers
                  if key.name in properties), None)
    if value is None and not default_level and not any(key.name in properties for properties, _ in layers):
        value = _default_text(broker, key)
    read_only = not (key.dynamic or key.name in DYNAMIC_NAMES)
    return ConfigEntry(key.name, None if key.sensitive else value, read_only,
                       synonyms[0][2] if synonyms else DEFAULT_CONFIG, key.sensitive, key.type, key.doc, synonyms)


def _default_text(broker, key: ConfigKey) -> str | None:
    """The value a key has when nobody set it: Kafka's default, or ours where we deviate (`_OUR_DEFAULTS`)."""
    if broker is None or key.name not in _OUR_DEFAULTS:
        return key.default
    if key.name in ("node.id", "broker.id"):
        return str(broker.node_id)
    if key.name == "log.dirs":  # our default is a per-user directory; once set, Kafka's (none) applies
        given = broker.config.properties
        return None if given.get("log.dirs") or given.get("log.dir") else broker.config.data_dir
    return to_text(key.type, broker.config.get(key.name))


def _broker_level_synonyms(primary: str, names: tuple[str, ...], layers: list,
                           broker) -> list[tuple[str, str | None, int]]:
    """Kafka's synonym list: the names set per broker dynamically, then as cluster-wide dynamic defaults, then
    statically, then the names with a default, keeping only what follows the first mention of `primary` (a name of
    the group with higher precedence than `primary` is left out). With `broker`, the defaults where we deviate from
    Kafka are ours."""
    found = []
    for properties, source in layers:
        for name in names:
            if name in properties:
                found.append((name, _broker_text(name, properties[name]), source))
    for name in names:
        key = BROKER_CONFIGS.get(name) or REMOVED_BROKER_CONFIGS.get(name)
        default = None if key is None else _default_text(broker, key)
        if default is not None:
            found.append((name, None if key.sensitive else default, DEFAULT_CONFIG))
    while found and found[0][0] != primary:
        found.pop(0)
    return found


def broker_layers(broker) -> list[tuple[Mapping[str, Any], int]]:
    """Where a broker-level value may come from, highest precedence first: (properties, ConfigSource). The dynamic
    ones are kept by `compatbroker.dynamic_config` in `broker.cluster.broker_configs` (absent: none)."""
    store = getattr(getattr(broker, "cluster", None), "broker_configs", None)
    per_broker = store.broker(broker.node_id) if store is not None else {}
    defaults = store.defaults() if store is not None else {}
    return [(per_broker, DYNAMIC_BROKER_CONFIG), (defaults, DYNAMIC_DEFAULT_BROKER_CONFIG),
            (_static_broker_properties(broker), STATIC_BROKER_CONFIG)]


def _static_broker_properties(broker) -> dict[str, Any]:
    """What the operator set (server.properties and --set), under Kafka's names."""
    config = getattr(broker, "static_config", None) or broker.config
    return {name: value for name, value in config.properties.items() if value is not None}


def _broker_text(name: str, value: Any) -> str | None:
    key = REMOVED_BROKER_CONFIGS.get(name) or _key_of(name)
    if key.type == UNKNOWN_TYPE:
        return to_text(UNKNOWN_TYPE, value)
    return None if key.sensitive else _safe_text(key, value)


def _safe_text(key: ConfigKey, value: Any) -> str | None:
    """Kafka's text of a stored value; one that no longer parses (written by an older version) is shown as is."""
    try:
        return normalized(key, value)
    except (TypeError, ValueError):
        return to_text(key.type, value)


# --- broker loggers (the BROKER_LOGGER resource) ------------------------------------------------------------------
# Kafka lists its log4j loggers with their levels and lets IncrementalAlterConfigs change them (KIP-412); ours are
# Python's loggers, under log4j's level names. The root logger is "root", as in Kafka.

ROOT_LOGGER = "root"
LOG_LEVELS = {"TRACE": 5, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
              "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}
"""The levels Kafka accepts in a SET, and the Python level each stands for (TRACE is below DEBUG)."""

_LEVEL_NAMES = sorted([(0, "ALL"), *((level, name) for name, level in LOG_LEVELS.items()),
                       (logging.CRITICAL + 1, "OFF")])


def broker_loggers() -> dict[str, str]:
    """Every logger of the process (and "root") with the log4j name of its effective level, sorted by name."""
    manager = logging.Logger.manager
    names = sorted(name for name, item in list(manager.loggerDict.items()) if isinstance(item, logging.Logger))
    found = {ROOT_LOGGER: _level_name(logging.getLogger().getEffectiveLevel())}
    found.update((name, _level_name(logging.getLogger(name).getEffectiveLevel())) for name in names)
    return found


def logger_exists(name: str) -> bool:
    return name == ROOT_LOGGER or isinstance(logging.Logger.manager.loggerDict.get(name), logging.Logger)


def set_logger_level(name: str, level: str | None) -> None:
    """Set a logger's level by its log4j name; None unsets it, so that it inherits its parent's again."""
    logger = logging.getLogger() if name == ROOT_LOGGER else logging.getLogger(name)
    logger.setLevel(logging.NOTSET if level is None else LOG_LEVELS[level])


def _level_name(level: int) -> str:
    return [name for threshold, name in _LEVEL_NAMES if threshold <= level][-1]
