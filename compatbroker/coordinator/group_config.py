"""Per-group dynamic configs: Kafka's GROUP config resource (KIP-848, KIP-932), as Kafka 4.2 has it.

A group may override some broker settings for itself: `consumer.session.timeout.ms`,
`consumer.heartbeat.interval.ms` (consumer groups), `share.session.timeout.ms`, `share.heartbeat.interval.ms`,
`share.record.lock.duration.ms`, `share.auto.offset.reset` and `share.isolation.level` (share groups). Each unset
name takes the broker's value (`coordinator/settings.py`). Kafka 4.2's `streams.*` names are left out (no streams
groups here) and answer INVALID_CONFIG like any unknown name; `share.delivery.count.limit` is a group config from
Kafka 4.3 only, so a group always gets the broker's `group.share.delivery.count.limit`.

- `group_config(host, group_id)`: the typed view the coordinators and the share data path read.
- `validate(overrides, consumer, share)`: Kafka's checks of a group's whole override set (GroupConfig.validate):
  every name known, each value of its type and range, the broker's min/max bounds, session timeout above the
  heartbeat interval; raises `GroupConfigError` (answered INVALID_CONFIG).
- `GROUP_CONFIG_KEYS`: the catalogue (name, type, documentation) DescribeConfigs lists.

The overrides themselves are cluster-wide state kept with the cluster metadata (`host.cluster.metadata
.group_configs`, a `compatbroker.cluster.metadata.GroupConfigs`: a mapping group id -> {name: value text}, saved
on each change and read at start), reached structurally like the rest of the node.
"""
from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from .settings import ConsumerGroupSettings, ShareGroupSettings

CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"
SHARE_SESSION_TIMEOUT_MS = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL_MS = "share.heartbeat.interval.ms"
SHARE_RECORD_LOCK_DURATION_MS = "share.record.lock.duration.ms"
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_ISOLATION_LEVEL = "share.isolation.level"

log = logging.getLogger(__name__)
_WARNED: set[tuple[str, str]] = set()  # (group id, name) of stored values already reported as invalid

ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
INT32_MAX = 2**31 - 1


class GroupConfigError(ValueError):
    """A group config change Kafka refuses with INVALID_CONFIG; the text is Kafka's message."""


class GroupConfigKey(NamedTuple):
    name: str
    is_int: bool          # INT, else STRING (DescribeConfigs' config_type)
    minimum: int | None   # ConfigDef's atLeast, for INT keys
    doc: str


GROUP_CONFIG_KEYS: dict[str, GroupConfigKey] = {key.name: key for key in (
    GroupConfigKey(CONSUMER_HEARTBEAT_INTERVAL_MS, True, 1,
                   "The heartbeat interval given to the members of a consumer group."),
    GroupConfigKey(CONSUMER_SESSION_TIMEOUT_MS, True, 1,
                   "The timeout to detect client failures when using the consumer group protocol."),
    GroupConfigKey(SHARE_AUTO_OFFSET_RESET, False, None,
                   "The strategy to initialize the share-partition start offset: earliest, latest or "
                   "by_duration:<ISO-8601 duration> (not negative)."),
    GroupConfigKey(SHARE_HEARTBEAT_INTERVAL_MS, True, 1,
                   "The heartbeat interval given to the members of a share group."),
    GroupConfigKey(SHARE_ISOLATION_LEVEL, False, None,
                   "Whether a share group delivers only committed transactional records (read_committed) or all "
                   "records (read_uncommitted)."),
    GroupConfigKey(SHARE_RECORD_LOCK_DURATION_MS, True, 1000,
                   "The record acquisition lock duration in milliseconds for share groups."),
    GroupConfigKey(SHARE_SESSION_TIMEOUT_MS, True, 1,
                   "The timeout to detect client failures when using the share group protocol."),
)}


@dataclass(frozen=True)
class GroupConfig:
    """A group's effective configs: its overrides over the broker's settings."""

    consumer_session_timeout_ms: int
    consumer_heartbeat_interval_ms: int
    share_session_timeout_ms: int
    share_heartbeat_interval_ms: int
    share_record_lock_duration_ms: int
    share_auto_offset_reset: str       # "latest" | "earliest" | "by_duration:<ISO-8601 duration>"
    share_isolation_level: str         # "read_uncommitted" | "read_committed"
    share_delivery_count_limit: int    # the broker's group.share.delivery.count.limit (a group config from 4.3)

    @property
    def share_reset_duration_ms(self) -> int | None:
        """For `by_duration:<duration>`, the duration in milliseconds; None for earliest and latest."""
        if not self.share_auto_offset_reset.lower().startswith(_BY_DURATION):
            return None
        return duration_ms(self.share_auto_offset_reset[len(_BY_DURATION):])


def broker_defaults(consumer: ConsumerGroupSettings, share: ShareGroupSettings) -> dict[str, str]:
    """Each group config's value when the group does not set it (Kafka: extractGroupConfigMap + the defaults)."""
    return {
        CONSUMER_HEARTBEAT_INTERVAL_MS: str(consumer.heartbeat_interval_ms),
        CONSUMER_SESSION_TIMEOUT_MS: str(consumer.session_timeout_ms),
        SHARE_AUTO_OFFSET_RESET: "latest",
        SHARE_HEARTBEAT_INTERVAL_MS: str(share.heartbeat_interval_ms),
        SHARE_ISOLATION_LEVEL: "read_uncommitted",
        SHARE_RECORD_LOCK_DURATION_MS: str(share.record_lock_duration_ms),
        SHARE_SESSION_TIMEOUT_MS: str(share.session_timeout_ms),
    }


def settings_of(host) -> tuple[ConsumerGroupSettings, ShareGroupSettings]:
    """The broker settings the coordinator uses (read from the node's config when there is no coordinator yet)."""
    coordinator = getattr(host, "coordinator", None)
    consumer = getattr(coordinator, "consumer_settings", None) or ConsumerGroupSettings.from_config(host.config)
    share = getattr(coordinator, "share_settings", None) or ShareGroupSettings.from_config(host.config)
    return consumer, share


def overrides_of(host, group_id: str) -> dict[str, str]:
    """The group's own config values (empty when it sets none, or before the cluster metadata is loaded)."""
    metadata = getattr(host.cluster, "metadata", None)
    store = getattr(metadata, "group_configs", None)
    return store.get(group_id) if store is not None else {}


def group_config(host, group_id: str) -> GroupConfig:
    """The group's effective configs: each unset value from the broker's settings (and each stored value that is
    not valid, which only a hand-edited file can hold: one WARNING line per group and name)."""
    consumer, share = settings_of(host)
    values = broker_defaults(consumer, share)
    for name, value in overrides_of(host, group_id).items():
        key = GROUP_CONFIG_KEYS.get(name)
        try:
            if key is None:
                raise GroupConfigError(f"Unknown group config name: {name}")
            _check_value(key, value)
        except GroupConfigError as exc:
            if (group_id, name) not in _WARNED:
                _WARNED.add((group_id, name))
                log.warning("group %s: ignoring its stored config %s=%r (%s)", group_id, name, value, exc)
            continue
        values[name] = normalized({name: value})[name]
    return GroupConfig(
        consumer_session_timeout_ms=int(values[CONSUMER_SESSION_TIMEOUT_MS]),
        consumer_heartbeat_interval_ms=int(values[CONSUMER_HEARTBEAT_INTERVAL_MS]),
        share_session_timeout_ms=int(values[SHARE_SESSION_TIMEOUT_MS]),
        share_heartbeat_interval_ms=int(values[SHARE_HEARTBEAT_INTERVAL_MS]),
        share_record_lock_duration_ms=int(values[SHARE_RECORD_LOCK_DURATION_MS]),
        share_auto_offset_reset=values[SHARE_AUTO_OFFSET_RESET].lower(),
        share_isolation_level=values[SHARE_ISOLATION_LEVEL].lower(),
        share_delivery_count_limit=share.delivery_count_limit,
    )


# --- validation (Kafka's GroupConfig.validate) --------------------------------------------------------------------

def validate(overrides: Mapping[str, str], consumer: ConsumerGroupSettings, share: ShareGroupSettings) -> None:
    """Raise GroupConfigError unless `overrides` is a valid whole override set for a group."""
    for name in overrides:
        if name not in GROUP_CONFIG_KEYS:
            raise GroupConfigError(f"Unknown group config name: {name}")
    values = {**broker_defaults(consumer, share), **overrides}
    for name, value in overrides.items():
        _check_value(GROUP_CONFIG_KEYS[name], value)
    number = {name: _int_value(values[name]) for name, key in GROUP_CONFIG_KEYS.items() if key.is_int}
    _within(number, CONSUMER_HEARTBEAT_INTERVAL_MS, consumer.min_heartbeat_interval_ms,
            consumer.max_heartbeat_interval_ms, "group.consumer.min.heartbeat.interval.ms",
            "group.consumer.max.heartbeat.interval.ms")
    _within(number, CONSUMER_SESSION_TIMEOUT_MS, consumer.min_session_timeout_ms, consumer.max_session_timeout_ms,
            "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms")
    _within(number, SHARE_HEARTBEAT_INTERVAL_MS, share.min_heartbeat_interval_ms, share.max_heartbeat_interval_ms,
            "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms")
    _within(number, SHARE_SESSION_TIMEOUT_MS, share.min_session_timeout_ms, share.max_session_timeout_ms,
            "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms")
    _within(number, SHARE_RECORD_LOCK_DURATION_MS, share.min_record_lock_duration_ms,
            share.max_record_lock_duration_ms, "group.share.min.record.lock.duration.ms",
            "group.share.max.record.lock.duration.ms")
    for session, heartbeat in ((CONSUMER_SESSION_TIMEOUT_MS, CONSUMER_HEARTBEAT_INTERVAL_MS),
                               (SHARE_SESSION_TIMEOUT_MS, SHARE_HEARTBEAT_INTERVAL_MS)):
        if number[session] <= number[heartbeat]:
            raise GroupConfigError(f"{session} must be greater than {heartbeat}")


def normalized(overrides: Mapping[str, str]) -> dict[str, str]:
    """Valid overrides in the text Kafka keeps and shows (numbers without blanks or signs, names trimmed)."""
    return {name: str(_int_value(value)) if GROUP_CONFIG_KEYS[name].is_int else value.strip()
            for name, value in overrides.items()}


def _check_value(key: GroupConfigKey, value: str) -> None:
    """ConfigDef's parse and validators, with Kafka's messages."""
    text = value.strip()
    if key.is_int:
        number = _int_value(text)
        if number is None:
            raise GroupConfigError(f"Invalid value {value} for configuration {key.name}: Not a number of type INT")
        if number < key.minimum:
            raise GroupConfigError(f"Invalid value {text} for configuration {key.name}: "
                                   f"Value must be at least {key.minimum}")
    elif key.name == SHARE_ISOLATION_LEVEL and text not in ISOLATION_LEVELS:
        raise GroupConfigError(f"Invalid value {text} for configuration {key.name}: String must be one of: "
                               f"{', '.join(ISOLATION_LEVELS)}")
    elif key.name == SHARE_AUTO_OFFSET_RESET and not is_share_auto_offset_reset(text):
        raise GroupConfigError(f"Invalid value {text} for configuration {key.name}: Invalid value `{text}` for "
                               f"configuration {key.name}. The value must be either 'earliest', 'latest' or of "
                               "the format 'by_duration:<PnDTnHnMn.nS>'.")


def _int_value(text: str) -> int | None:
    """The value as Java's Integer.parseInt reads it (any number of leading zeros); None when it is not an INT.
    The digits are bounded before int() sees them, which refuses strings of more than 4300 digits."""
    match = _INT.fullmatch(text.strip())
    if match is None:
        return None
    number = int(match.group(1) + match.group(2))
    return number if -2**31 <= number <= INT32_MAX else None


_INT = re.compile(r"([-+]?)0*([0-9]{1,10})")


def _within(values: Mapping[str, int], name: str, low: int, high: int, low_name: str, high_name: str) -> None:
    if values[name] < low:
        raise GroupConfigError(f"{name} must be greater than or equal to {low_name}")
    if values[name] > high:
        raise GroupConfigError(f"{name} must be less than or equal to {high_name}")


# --- share.auto.offset.reset --------------------------------------------------------------------------------------

_BY_DURATION = "by_duration:"
# java.time.Duration.parse: PnDTnHnMn.nS, case-insensitive, each part optionally signed, at least one part
_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?"
                       r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
                       re.IGNORECASE)


def is_share_auto_offset_reset(value: str) -> bool:
    """earliest, latest, or by_duration:<ISO-8601 duration> that is not negative (Kafka's validator)."""
    lowered = value.lower()
    if lowered in ("earliest", "latest"):
        return True
    if not lowered.startswith(_BY_DURATION):
        return False
    try:
        return duration_ms(value[len(_BY_DURATION):]) >= 0
    except ValueError:
        return False


def duration_ms(text: str) -> int:
    """Milliseconds of an ISO-8601 duration as java.time.Duration.parse reads it; ValueError when it is not one."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not an ISO-8601 duration: {text!r}")
    sign, days, time_part, hours, minutes, seconds, fraction = match.groups()
    if days is None and not (hours or minutes or seconds):
        raise ValueError(f"not an ISO-8601 duration: {text!r}")
    if time_part is not None and not (hours or minutes or seconds):
        raise ValueError(f"not an ISO-8601 duration: {text!r}")
    terms = [int(number or 0) * unit for number, unit in ((days, 86_400), (hours, 3_600), (minutes, 60), (seconds, 1))]
    whole_seconds = sum(terms)
    if not all(-2**63 <= value <= 2**63 - 1 for value in (*terms, whole_seconds)):
        raise ValueError(f"duration out of range: {text!r}")  # Java's exact long arithmetic refuses it
    millis = whole_seconds * 1000
    if fraction:
        part = int(fraction.ljust(3, "0")[:3])
        millis += -part if (seconds or "").startswith("-") else part
    return -millis if sign == "-" else millis
