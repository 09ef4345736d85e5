"""Configuration of partition logs, under Kafka's names and with Kafka's defaults.

Two levels, as in Kafka:

- `LogConfig`: the topic-level settings storage uses (`segment.bytes`, `retention.ms`, ...). Each has a broker-level
  default (`log.segment.bytes`, `log.retention.ms`, ...) that a topic override replaces.
- `StorageConfig`: broker-only settings of the storage layer (check intervals, checkpoint intervals, the cleaner).

`LogConfig.from_properties(broker_properties, topic_overrides)` builds the effective config of one topic. Values may
be given as strings (as in a properties file or a CreateTopics request) or already typed. The broker-level time
settings keep Kafka's fallbacks: `log.roll.ms` before `log.roll.hours`, `log.retention.ms` before
`log.retention.minutes` before `log.retention.hours`, `log.flush.interval.ms` before
`log.flush.scheduler.interval.ms`.

Topic-level names are those of Kafka's catalogue (`compatbroker.config_catalog.TOPIC_CONFIGS`, and the ones Kafka
4.0 removed, which the handlers refuse unless the broker emulates Kafka 3.x: `message.timestamp.difference.max.ms`
then bounds CreateTime timestamps both ways where the before/after settings are unset, as in 3.x; the other two are
kept and described only). Every override is checked against the catalogue's type, range and allowed values, as Kafka
does; the settings storage models become fields of LogConfig, the others (replication throttles, tiered storage,
compression levels, ...) are only checked and stay in the topic's override map, where DescribeConfigs finds them. A
name Kafka does not know is a ConfigError. As in Kafka, `min.compaction.lag.ms` may not exceed
`max.compaction.lag.ms`, and `remote.storage.enable=true` is refused since this broker has no tiered storage.

Deviation: Kafka 4 refuses `segment.bytes` below 1 MiB; we accept any size of at least one batch header so tests can
roll segments cheaply.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..config_catalog import parse_value, topic_config_key

LONG_MAX = 2**63 - 1
"""Java's Long.MAX_VALUE: Kafka's "never" for the flush and compaction-lag settings."""

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
DELETE = "delete"
COMPACT = "compact"


class ConfigError(ValueError):
    """A configuration value has the wrong type or is out of range. Kafka answers INVALID_CONFIG (40)."""

    error_code = 40


def _parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ConfigError(f"{value!r} is not a boolean")


def _parse_policy(value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    policy = tuple(sorted({item.strip() for item in items if item.strip()}))
    if not set(policy) <= {DELETE, COMPACT}:
        raise ConfigError(f"cleanup.policy {value!r} must list delete and/or compact")
    return policy


def _parse_timestamp_type(value: Any) -> str:
    if value not in (CREATE_TIME, LOG_APPEND_TIME):
        raise ConfigError(f"message.timestamp.type {value!r} must be CreateTime or LogAppendTime")
    return value


def _parse_compression(value: Any) -> str:
    value = str(value).strip().lower()
    if value not in ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"):
        raise ConfigError(f"unknown compression.type {value!r}")
    return value


@dataclass(frozen=True)
class _Setting:
    """One topic-level setting: its Kafka name, the dataclass field, the parser, and its broker-level name."""

    name: str
    field: str
    parse: Callable[[Any], Any]
    broker_name: str
    minimum: float | None = None


_SETTINGS = (
    _Setting("cleanup.policy", "cleanup_policy", _parse_policy, "log.cleanup.policy"),
    _Setting("compression.type", "compression_type", _parse_compression, "compression.type"),
    _Setting("delete.retention.ms", "delete_retention_ms", int, "log.cleaner.delete.retention.ms", 0),
    _Setting("file.delete.delay.ms", "file_delete_delay_ms", int, "log.segment.delete.delay.ms", 0),
    _Setting("flush.messages", "flush_messages", int, "log.flush.interval.messages", 1),
    _Setting("flush.ms", "flush_ms", int, "log.flush.interval.ms", 0),
    _Setting("index.interval.bytes", "index_interval_bytes", int, "log.index.interval.bytes", 0),
    _Setting("max.compaction.lag.ms", "max_compaction_lag_ms", int, "log.cleaner.max.compaction.lag.ms", 1),
    _Setting("max.message.bytes", "max_message_bytes", int, "message.max.bytes", 0),
    _Setting("message.timestamp.after.max.ms", "message_timestamp_after_max_ms", int,
             "log.message.timestamp.after.max.ms", 0),
    _Setting("message.timestamp.before.max.ms", "message_timestamp_before_max_ms", int,
             "log.message.timestamp.before.max.ms", 0),
    _Setting("message.timestamp.type", "message_timestamp_type", _parse_timestamp_type,
             "log.message.timestamp.type"),
    _Setting("min.cleanable.dirty.ratio", "min_cleanable_dirty_ratio", float, "log.cleaner.min.cleanable.ratio", 0),
    _Setting("min.compaction.lag.ms", "min_compaction_lag_ms", int, "log.cleaner.min.compaction.lag.ms", 0),
    _Setting("min.insync.replicas", "min_insync_replicas", int, "min.insync.replicas", 1),
    _Setting("preallocate", "preallocate", _parse_bool, "log.preallocate"),
    _Setting("retention.bytes", "retention_bytes", int, "log.retention.bytes"),
    _Setting("retention.ms", "retention_ms", int, "log.retention.ms", -1),
    _Setting("segment.bytes", "segment_bytes", int, "log.segment.bytes", 61),
    _Setting("segment.index.bytes", "segment_index_bytes", int, "log.index.size.max.bytes", 12),
    _Setting("segment.jitter.ms", "segment_jitter_ms", int, "log.roll.jitter.ms", 0),
    _Setting("segment.ms", "segment_ms", int, "log.roll.ms", 1),
)
SETTINGS_BY_NAME = {setting.name: setting for setting in _SETTINGS}

# Broker-level settings that stand in when the millisecond form is absent: (ms name, [(fallback, ms per unit)]).
_BROKER_FALLBACKS = {
    "log.roll.ms": [("log.roll.hours", 3_600_000)],
    "log.roll.jitter.ms": [("log.roll.jitter.hours", 3_600_000)],
    "log.retention.ms": [("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000)],
    "log.flush.interval.ms": [("log.flush.scheduler.interval.ms", 1)],
}


@dataclass(frozen=True)
class LogConfig:
    """Effective topic-level configuration of one partition log. Field names are Kafka's with `_` for `.`."""

    segment_bytes: int = 1_073_741_824
    segment_ms: int = 604_800_000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10_485_760
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    retention_ms: int = 604_800_000
    retention_bytes: int = -1
    cleanup_policy: tuple[str, ...] = (DELETE,)
    delete_retention_ms: int = 86_400_000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    file_delete_delay_ms: int = 60_000
    max_message_bytes: int = 1_048_588
    message_timestamp_type: str = CREATE_TIME
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000  # Kafka 4.0 lowered this from Long.MAX (KIP-1030)
    compression_type: str = "producer"
    preallocate: bool = False
    min_insync_replicas: int = 1

    @property
    def compact(self) -> bool:
        return COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return DELETE in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def has_flush_policy(self) -> bool:
        """Whether flush.messages or flush.ms asks for fsyncs (Kafka's defaults leave durability to the page cache
        and recovery): the coordinators then fsync their writes before acknowledging them."""
        return self.flush_messages != LONG_MAX or self.flush_ms != LONG_MAX

    @classmethod
    def from_properties(cls, broker_properties: Mapping[str, Any] | None = None,
                        topic_overrides: Mapping[str, Any] | None = None) -> LogConfig:
        """Effective config: Kafka's defaults, replaced by broker-level settings, replaced by topic overrides.

        Unknown topic-level names raise ConfigError (Kafka refuses them on CreateTopics); unknown broker-level names
        are ignored, since the broker's properties hold much more than storage settings.
        """
        values: dict[str, Any] = {}
        broker = _resolve_broker_fallbacks(broker_properties or {})
        for setting in _SETTINGS:
            if setting.broker_name in broker:
                values[setting.field] = _parse(setting, broker[setting.broker_name])
        values.update(_topic_changes(topic_overrides or {}))
        return _checked(cls(**values))

    def with_overrides(self, topic_overrides: Mapping[str, Any]) -> LogConfig:
        """This config with some topic-level settings replaced (ConfigError for a name or value Kafka refuses)."""
        return _checked(dataclasses.replace(self, **_topic_changes(topic_overrides)))

    def to_topic_properties(self) -> dict[str, str]:
        """Every setting under its topic-level name, as Kafka reports them in DescribeConfigs."""
        out = {}
        for setting in _SETTINGS:
            value = getattr(self, setting.field)
            if isinstance(value, tuple):
                value = ",".join(value)
            elif isinstance(value, bool):
                value = str(value).lower()
            out[setting.name] = str(value)
        return out


def _topic_changes(topic_overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The LogConfig fields that `topic_overrides` set, after checking every override against the catalogue."""
    changes = {}
    for name, value in topic_overrides.items():
        key = topic_config_key(name)
        if key is None:
            raise ConfigError(f"Unknown topic config name: {name}")
        try:
            parsed = parse_value(key, value)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"invalid value {value!r} for {name}: {exc}") from None
        if name == "remote.storage.enable" and parsed:
            raise ConfigError("remote.storage.enable: this broker has no tiered storage")
        setting = SETTINGS_BY_NAME.get(name)
        if setting is not None:
            changes[setting.field] = _parse(setting, value)
    if "message.timestamp.difference.max.ms" in topic_overrides:
        changes.update(_timestamp_difference(topic_overrides))
    return changes


def _timestamp_difference(topic_overrides: Mapping[str, Any]) -> dict[str, int]:
    """Kafka 3.x's message.timestamp.difference.max.ms (removed in 4.0; accepted when emulating 3.x): it bounds
    both directions wherever the topic leaves message.timestamp.before/after.max.ms unset (or at Long.MAX)."""
    difference = int(topic_overrides["message.timestamp.difference.max.ms"])
    bounds = {}
    for name, field in (("message.timestamp.before.max.ms", "message_timestamp_before_max_ms"),
                        ("message.timestamp.after.max.ms", "message_timestamp_after_max_ms")):
        if int(topic_overrides.get(name, LONG_MAX)) == LONG_MAX:
            bounds[field] = difference
    return bounds


def _checked(config: LogConfig) -> LogConfig:
    """Rules that involve two settings (Kafka checks them on the merged topic config)."""
    if config.min_compaction_lag_ms > config.max_compaction_lag_ms:
        raise ConfigError(f"min.compaction.lag.ms ({config.min_compaction_lag_ms}) exceeds max.compaction.lag.ms "
                          f"({config.max_compaction_lag_ms})")
    return config


def _parse(setting: _Setting, value: Any) -> Any:
    try:
        parsed = setting.parse(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid value {value!r} for {setting.name}: {exc}") from None
    if setting.minimum is not None and parsed < setting.minimum:
        raise ConfigError(f"{setting.name}={parsed} is below the minimum {setting.minimum}")
    return parsed


def _resolve_broker_fallbacks(broker: Mapping[str, Any]) -> dict[str, Any]:
    """Fill in the millisecond names from their hour/minute forms when only those are set."""
    resolved = dict(broker)
    for name, fallbacks in _BROKER_FALLBACKS.items():
        if resolved.get(name) is not None:
            continue
        for fallback, unit_ms in fallbacks:
            if resolved.get(fallback) is not None:
                resolved[name] = int(resolved[fallback]) * unit_ms
                break
    return {name: value for name, value in resolved.items() if value is not None}


@dataclass(frozen=True)
class StorageConfig:
    """Broker-level storage settings that have no topic-level form."""

    log_retention_check_interval_ms: int = 300_000
    log_flush_offset_checkpoint_interval_ms: int = 60_000
    log_flush_start_offset_checkpoint_interval_ms: int = 60_000
    log_cleaner_enable: bool = True
    log_cleaner_backoff_ms: int = 15_000
    log_cleaner_dedupe_buffer_size: int = 134_217_728
    num_recovery_threads_per_data_dir: int = 2  # Kafka 4.0 default (KIP-1030); we recover on one thread

    @classmethod
    def from_properties(cls, broker_properties: Mapping[str, Any] | None = None) -> StorageConfig:
        values = {}
        for field in dataclasses.fields(cls):
            name = field.name.replace("_", ".")
            if name in (broker_properties or {}):
                raw = broker_properties[name]
                values[field.name] = _parse_bool(raw) if field.type == "bool" else int(raw)
        return cls(**values)
