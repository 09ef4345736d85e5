"""The CLIENT_METRICS config resource (type 16) for DescribeConfigs, IncrementalAlterConfigs and AlterConfigs.

The config handlers call these after their authorization check (Kafka: DESCRIBE_CONFIGS / ALTER_CONFIGS on the
cluster, else CLUSTER_AUTHORIZATION_FAILED). `owner` is a broker (`ctx.broker`) or the `ClientTelemetry` itself.
Refusals raise `ClientMetricsConfigError` with `.error_code` (an ErrorCode) and `.message` (Kafka's text); answer
them as the resource's error.

    describe(owner, name) -> list[ConfigEntry]
        Every config of the subscription `name`, existing or not (Kafka describes any name): `interval.ms`, `match`,
        `metrics`, sorted by name. A set value has source CLIENT_METRICS_CONFIG (7) and itself as its one synonym;
        an unset one its default ("300000", "", "") with source DEFAULT_CONFIG (5) and no synonym; read_only and
        is_sensitive false; types INT (3) / LIST (7). Values as Kafka shows them (list items joined by commas
        without blanks). The caller filters by the requested keys. Empty name: INVALID_REQUEST "Client metrics
        subscription name must not be empty".
    incremental(owner, name, operations) -> dict[str, str]
        The subscription's whole config set after IncrementalAlterConfigs' operations, given as
        (config name, operation code 0 SET / 1 DELETE / 2 APPEND / 3 SUBTRACT, value) in request order. Kafka's
        controller refuses APPEND and SUBTRACT on client metrics keys (its config schema knows only topic and
        broker LIST keys): INVALID_CONFIG "Can't APPEND to key metrics because its type is not LIST.".
    validate(name, configs) -> None
        Kafka's checks of a whole config set (`subscriptions.validate`): INVALID_REQUEST or INVALID_CONFIG.
    apply(owner, name, configs) -> None
        Validate, then make `configs` the subscription's whole config set (AlterConfigs' replacement, or the
        result of `incremental`), persisted cluster-wide; an empty set deletes the subscription. Clients see the
        change on their next GetTelemetrySubscriptions. A disk that refuses the file: UNKNOWN_SERVER_ERROR (one
        WARNING line), nothing changed.

With validate_only, call `validate` (after `incremental`) and not `apply`.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from ..config_catalog import DEFAULT_CONFIG, INT, LIST, ConfigEntry
from ..protocol.error_codes import ErrorCode
from . import subscriptions as subs
from .client_telemetry import ClientTelemetry
from .subscriptions import ClientMetricsConfigError

__all__ = ["CLIENT_METRICS", "CLIENT_METRICS_CONFIG", "ClientMetricsConfigError", "apply", "describe", "incremental",
           "validate"]

log = logging.getLogger(__name__)

CLIENT_METRICS = 16          # ConfigResource.Type.CLIENT_METRICS
CLIENT_METRICS_CONFIG = 7    # ConfigSource.CLIENT_METRICS_CONFIG
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OPERATION_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

# name -> (config type, default text, documentation)
_KEYS = {
    subs.INTERVAL_MS: (INT, str(subs.INTERVAL_MS_DEFAULT),
                       "How often matching clients push their metrics, in milliseconds (100 to 3600000)."),
    subs.MATCH: (LIST, "", "Selectors name=regex a client must all match (client_instance_id, client_id, "
                           "client_software_name, client_software_version, client_source_address, "
                           "client_source_port); none: every client."),
    subs.METRICS: (LIST, "", "Metric name prefixes matching clients push; * for all of them."),
}


def describe(owner, name: str | None) -> list[ConfigEntry]:
    if not name:
        raise ClientMetricsConfigError(ErrorCode.INVALID_REQUEST, "Client metrics subscription name must not be empty")
    configs = _telemetry(owner).subscriptions.get(name)
    entries = []
    for key, (config_type, default, doc) in sorted(_KEYS.items()):
        if key in configs:
            value = _shown(key, configs[key])
            entries.append(ConfigEntry(key, value, False, CLIENT_METRICS_CONFIG, False, config_type, doc,
                                       [(key, value, CLIENT_METRICS_CONFIG)]))
        else:
            entries.append(ConfigEntry(key, default, False, DEFAULT_CONFIG, False, config_type, doc, []))
    return entries


def incremental(owner, name: str, operations: Iterable[tuple[str, int, str | None]]) -> dict[str, str]:
    configs = _telemetry(owner).subscriptions.get(name)
    for key, code, value in operations:
        if code == SET:
            configs[key] = value
        elif code == DELETE:
            configs.pop(key, None)
        elif code in (APPEND, SUBTRACT):
            raise ClientMetricsConfigError(ErrorCode.INVALID_CONFIG, f"Can't {_OPERATION_NAMES[code]} to key {key} "
                                                                     "because its type is not LIST.")
        else:
            raise ClientMetricsConfigError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {code}")
    return configs


def validate(name: str | None, configs: Mapping[str, str]) -> None:
    subs.validate(name, configs)


def apply(owner, name: str, configs: Mapping[str, str]) -> None:
    subs.validate(name, configs)
    try:
        _telemetry(owner).set_subscription(name, dict(configs))
    except OSError as exc:
        log.warning("could not store client metrics subscription %s: %s", name, exc)
        raise ClientMetricsConfigError(ErrorCode.UNKNOWN_SERVER_ERROR, None) from exc


def _shown(key: str, value: str) -> str:
    """The value as Kafka describes it: parsed, then printed back."""
    try:
        return subs.int_text(value) if _KEYS[key][0] == INT else subs.list_text(value)
    except ValueError:  # a hand-edited file: show it as stored
        return value


def _telemetry(owner) -> ClientTelemetry:
    if isinstance(owner, ClientTelemetry):
        return owner
    return owner.client_telemetry
