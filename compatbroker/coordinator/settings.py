"""Broker settings of the new group types, with Kafka 4.2's names and defaults: KIP-848 consumer groups
(`group.consumer.*`) and KIP-932 share groups (`group.share.*`, and the share coordinator's state topic,
`share.coordinator.state.topic.*`).

A group may override some of them for itself (GROUP configs, `group_config.py`); these are the broker's values and
the bounds a group's own value must stay within. Tests and a developer's laptop lower the session timeouts and
lock durations; the minimums must then be lowered with them, as on a Kafka broker (BrokerConfig checks the bounds
and the names at start).
"""
from __future__ import annotations

from dataclasses import dataclass

INT32_MAX = 2**31 - 1

CONSUMER_ASSIGNORS = ("uniform", "range")
"""The server-side assignors Kafka ships, by the names clients ask for (`group.remote.assignor`)."""


def _read(cls, config):
    """An instance of `cls` with each field taken from the broker configuration (`BrokerConfig`, which parses and
    checks each name of `cls.NAMES`)."""
    return cls(**{field: config.get(name) for field, name in cls.NAMES.items()})


@dataclass(frozen=True)
class ConsumerGroupSettings:
    """KIP-848 consumer groups (`group.protocol=consumer`)."""

    session_timeout_ms: int = 45_000
    min_session_timeout_ms: int = 45_000
    max_session_timeout_ms: int = 60_000
    heartbeat_interval_ms: int = 500          # Kafka: 5000; compatbroker's development default (config.py)
    min_heartbeat_interval_ms: int = 500      # Kafka: 5000
    max_heartbeat_interval_ms: int = 15_000
    max_size: int = INT32_MAX
    assignors: tuple[str, ...] = CONSUMER_ASSIGNORS  # the first is the default
    migration_policy: str = "bidirectional"
    rebalance_protocols: tuple[str, ...] = ("classic", "consumer", "streams")

    NAMES = {
        "session_timeout_ms": "group.consumer.session.timeout.ms",
        "min_session_timeout_ms": "group.consumer.min.session.timeout.ms",
        "max_session_timeout_ms": "group.consumer.max.session.timeout.ms",
        "heartbeat_interval_ms": "group.consumer.heartbeat.interval.ms",
        "min_heartbeat_interval_ms": "group.consumer.min.heartbeat.interval.ms",
        "max_heartbeat_interval_ms": "group.consumer.max.heartbeat.interval.ms",
        "max_size": "group.consumer.max.size",
        "assignors": "group.consumer.assignors",
        "migration_policy": "group.consumer.migration.policy",
        "rebalance_protocols": "group.coordinator.rebalance.protocols",
    }

    @classmethod
    def from_config(cls, config) -> ConsumerGroupSettings:
        return _read(cls, config)

    @property
    def enabled(self) -> bool:
        """The broker serves the consumer protocol (`consumer` in group.coordinator.rebalance.protocols); when it does
        not, ConsumerGroupHeartbeat and ConsumerGroupDescribe answer UNSUPPORTED_VERSION, as Kafka's do."""
        return "consumer" in self.rebalance_protocols

    @property
    def default_assignor(self) -> str:
        return self.assignors[0]

    def upgrade_allowed(self) -> bool:
        """A classic group may become a consumer group while it has members."""
        return self.migration_policy in ("upgrade", "bidirectional")

    def downgrade_allowed(self) -> bool:
        """A consumer group whose members all speak the classic protocol may become a classic group again."""
        return self.migration_policy in ("downgrade", "bidirectional")


@dataclass(frozen=True)
class ShareGroupSettings:
    """KIP-932 share groups and the share coordinator's state topic."""

    session_timeout_ms: int = 45_000
    min_session_timeout_ms: int = 45_000
    max_session_timeout_ms: int = 60_000
    heartbeat_interval_ms: int = 5_000
    min_heartbeat_interval_ms: int = 5_000
    max_heartbeat_interval_ms: int = 15_000
    max_size: int = 200
    record_lock_duration_ms: int = 30_000
    min_record_lock_duration_ms: int = 15_000
    max_record_lock_duration_ms: int = 60_000
    delivery_count_limit: int = 5
    partition_max_record_locks: int = 2000
    max_share_sessions: int = 2000
    state_topic_partitions: int = 50
    state_topic_segment_bytes: int = 104_857_600
    state_topic_replication_factor: int = 3
    state_topic_min_isr: int = 2

    NAMES = {
        "session_timeout_ms": "group.share.session.timeout.ms",
        "min_session_timeout_ms": "group.share.min.session.timeout.ms",
        "max_session_timeout_ms": "group.share.max.session.timeout.ms",
        "heartbeat_interval_ms": "group.share.heartbeat.interval.ms",
        "min_heartbeat_interval_ms": "group.share.min.heartbeat.interval.ms",
        "max_heartbeat_interval_ms": "group.share.max.heartbeat.interval.ms",
        "max_size": "group.share.max.size",
        "record_lock_duration_ms": "group.share.record.lock.duration.ms",
        "min_record_lock_duration_ms": "group.share.min.record.lock.duration.ms",
        "max_record_lock_duration_ms": "group.share.max.record.lock.duration.ms",
        "delivery_count_limit": "group.share.delivery.count.limit",
        "partition_max_record_locks": "group.share.partition.max.record.locks",
        "max_share_sessions": "group.share.max.share.sessions",
        "state_topic_partitions": "share.coordinator.state.topic.num.partitions",
        "state_topic_segment_bytes": "share.coordinator.state.topic.segment.bytes",
        "state_topic_replication_factor": "share.coordinator.state.topic.replication.factor",
        "state_topic_min_isr": "share.coordinator.state.topic.min.isr",
    }

    @classmethod
    def from_config(cls, config) -> ShareGroupSettings:
        return _read(cls, config)
