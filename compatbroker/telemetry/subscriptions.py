"""Client metrics subscriptions: Kafka's CLIENT_METRICS config resource (type 16, KIP-714), as Kafka 4.2 has it.

A subscription is a named set of three configs (Kafka's ClientMetricsConfigs):
- `metrics`: LIST of metric name prefixes the matching clients should push; `*` asks for every metric; default
  empty (none).
- `interval.ms`: INT, how often the matching clients push; default 300000 (5 minutes), 100 to 3600000.
- `match`: LIST of `name=regex` client selectors, every one of which must match (all of them when empty): names
  `client_instance_id`, `client_id`, `client_software_name`, `client_software_version`, `client_source_address`,
  `client_source_port`; the regex must match the whole value.

`validate(name, configs)` runs Kafka's checks of a subscription's whole config set, in Kafka's order and with its
messages: an empty name or an unknown config is INVALID_REQUEST; a value that does not parse (not an INT, a LIST
with an empty or repeated item) or a malformed match selector is INVALID_CONFIG; an interval out of bounds is
INVALID_REQUEST. Errors are `ClientMetricsConfigError(error_code, message)`.

The configs are kept as the text they were set to (as Kafka's metadata records keep them) in
`<data dir>/client-metrics.json`, one store for the cluster (`SubscriptionStore`), read at start and written on each
change.

Deviation: match regexes are compiled as RE2/J compiles them (`compatbroker.re2j`, linear-time matching) rather
than with java.util.regex, so that no pattern can stall the broker: patterns with backreferences or lookaround are
refused (INVALID_CONFIG, Kafka's message).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from collections.abc import Mapping

from ..config_catalog import MAX_VALUE_LENGTH, VALUE_TOO_LARGE
from ..protocol.error_codes import ErrorCode
from ..re2j import PatternError, compile_pattern
from ..storage.config_sets import ConfigSets

METRICS = "metrics"
INTERVAL_MS = "interval.ms"
MATCH = "match"
CONFIG_NAMES = (INTERVAL_MS, MATCH, METRICS)  # sorted, as DescribeConfigs lists them

ALL_METRICS = "*"
INTERVAL_MS_DEFAULT = 5 * 60 * 1000
MIN_INTERVAL_MS = 100
MAX_INTERVAL_MS = 3_600_000

CLIENT_INSTANCE_ID = "client_instance_id"
CLIENT_ID = "client_id"
CLIENT_SOFTWARE_NAME = "client_software_name"
CLIENT_SOFTWARE_VERSION = "client_software_version"
CLIENT_SOURCE_ADDRESS = "client_source_address"
CLIENT_SOURCE_PORT = "client_source_port"
MATCH_NAMES = frozenset({CLIENT_INSTANCE_ID, CLIENT_ID, CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION,
                         CLIENT_SOURCE_ADDRESS, CLIENT_SOURCE_PORT})

SUBSCRIPTIONS_FILE = "client-metrics.json"

_COMMA = re.compile(r"\s*,\s*")
_INT = re.compile(r"[-+]?[0-9]{1,10}")


class ClientMetricsConfigError(ValueError):
    """A client metrics config change Kafka refuses: the error code to answer and Kafka's message."""

    def __init__(self, error_code: ErrorCode, message: str | None):
        super().__init__(message)
        self.error_code = error_code
        self.message = message


@dataclass(frozen=True)
class Subscription:
    """One parsed subscription."""

    name: str
    metrics: frozenset[str]
    interval_ms: int
    match: tuple[tuple[str, str], ...]  # (selector name, regex text)

    def __post_init__(self):
        # compiled once: every new client instance is matched, and a large pattern is not in re2j's cache
        object.__setattr__(self, "_patterns", tuple((name, compile_pattern(text)) for name, text in self.match))

    def matches(self, attributes: Mapping[str, str | None]) -> bool:
        """Every selector's regex matches the whole of the client's attribute (a missing attribute never does)."""
        for name, pattern in self._patterns:
            value = attributes.get(name)
            if value is None or pattern.fullmatch(value) is None:
                return False
        return True


# --- parsing and validation (ClientMetricsConfigs.validate) -------------------------------------------------------

def validate(name: str | None, configs: Mapping[str, str]) -> None:
    """Raise ClientMetricsConfigError unless `configs` is a valid whole config set for subscription `name`."""
    for value in configs.values():  # the controller's check, before the resource's own
        if value is not None and len(value) > MAX_VALUE_LENGTH:
            raise ClientMetricsConfigError(ErrorCode.INVALID_CONFIG, VALUE_TOO_LARGE)
    if not name:
        raise ClientMetricsConfigError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
    for key in configs:
        if key not in CONFIG_NAMES:
            raise ClientMetricsConfigError(ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {key}")
    _metrics, interval, selectors = _parsed_values(configs)
    if INTERVAL_MS in configs and not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
        raise ClientMetricsConfigError(
            ErrorCode.INVALID_REQUEST, f"Invalid value {interval} for {INTERVAL_MS}, interval must be "
                                       f"between {MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)")
    for item in selectors:
        _selector(item)


def parse(configs: Mapping[str, str], name: str = "") -> Subscription:
    """The subscription `configs` describe (unset names take their defaults); ClientMetricsConfigError
    (INVALID_CONFIG) when a value does not parse."""
    metrics, interval, selectors = _parsed_values(configs)
    return Subscription(name, frozenset(metrics), interval, tuple(_selector(item) for item in selectors))


def _parsed_values(configs: Mapping[str, str]) -> tuple[list[str], int, list[str]]:
    """ConfigDef.parse with Kafka's validators, in the order Kafka defines the keys."""
    return (_list_value(METRICS, configs.get(METRICS)), _int_value(INTERVAL_MS, configs.get(INTERVAL_MS)),
            _list_value(MATCH, configs.get(MATCH)))


def list_text(value: str | None) -> str:
    """A LIST value as Kafka describes it: its items joined by commas, blanks around them dropped."""
    text = (value or "").strip()
    return ",".join(_COMMA.split(text)) if text else ""


def int_text(value: str) -> str:
    """An INT value as Kafka describes it (no blanks, no sign or leading zeros)."""
    return str(int(value.strip()))


def _list_value(key: str, value: str | None) -> list[str]:
    """ConfigDef's LIST parse and ValidList.anyNonDuplicateValues(empty allowed, null not)."""
    text = (value or "").strip()
    items = _COMMA.split(text) if text else []
    if len(set(items)) != len(items):
        raise ClientMetricsConfigError(ErrorCode.INVALID_CONFIG,
                                       f"Configuration '{key}' values must not be duplicated.")
    if any(not item for item in items):
        raise ClientMetricsConfigError(ErrorCode.INVALID_CONFIG, f"Configuration '{key}' values must not be empty.")
    return items


def _int_value(key: str, value: str | None) -> int:
    if value is None:
        return INTERVAL_MS_DEFAULT
    text = value.strip()
    number = int(text) if _INT.fullmatch(text) else None
    if number is None or not -2**31 <= number < 2**31:
        raise ClientMetricsConfigError(ErrorCode.INVALID_CONFIG,
                                       f"Invalid value {value} for configuration {key}: Not a number of type INT")
    return number


def _selector(item: str) -> tuple[str, str]:
    """`name=regex` (split as Java's String.split("=") does: exactly two parts), both trimmed."""
    parts = item.split("=")
    while parts and parts[-1] == "":  # Java's split drops trailing empty strings
        parts.pop()
    if len(parts) != 2 or parts[0].strip() not in MATCH_NAMES:
        raise _illegal_pattern(item)
    pattern = parts[1].strip()
    try:
        compile_pattern(pattern)
    except PatternError:
        raise _illegal_pattern(item) from None
    return parts[0].strip(), pattern


def _illegal_pattern(item: str) -> ClientMetricsConfigError:
    return ClientMetricsConfigError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {item}")


# --- the cluster's subscriptions, persisted -----------------------------------------------------------------------

class SubscriptionStore(ConfigSets):
    """Subscription name -> {config name: value text}, saved in `<directory>/client-metrics.json` on each change
    (directory None: kept in memory only)."""

    FILE_NAME = SUBSCRIPTIONS_FILE
    KEY = "subscriptions"
    WHAT = "client metrics subscriptions"
