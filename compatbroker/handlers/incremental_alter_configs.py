"""IncrementalAlterConfigs (API key 44), versions 0-1: change single config keys (KIP-339).

Each entry is an operation on one key: SET (0) gives it a value, DELETE (1) removes the override (back to the
default), APPEND (2) and SUBTRACT (3) add or remove comma-separated items of a LIST key's current value (the
override, or Kafka's default when there is none). Keys the request does not name keep their value.

Behaviour, as Kafka's:
- A resource named twice answers INVALID_REQUEST for each mention; a key named twice within a resource, or a null
  value for anything but DELETE, answers INVALID_REQUEST.
- TOPIC (2): APPEND or SUBTRACT on a key that is not a LIST (or not a topic config at all) answers INVALID_CONFIG
  ("Can't APPEND to key <key> because its type is not LIST.", Kafka's controller's message); then the resulting
  overrides get the checks of AlterConfigs (empty name INVALID_REQUEST, illegal name INVALID_TOPIC_EXCEPTION,
  unknown key or bad value INVALID_CONFIG, missing topic UNKNOWN_TOPIC_OR_PARTITION) and are persisted and applied
  live. DELETE of a key that has no override changes nothing.
- BROKER (4): the operations apply to the resource's stored dynamic configs (DELETE removes a key), then the
  result gets the checks, storage and live application of AlterConfigs. APPEND or SUBTRACT on a key that is not a
  LIST answers INVALID_CONFIG ("Config value append is not allowed for config key: ..."), on a name Kafka does
  not know UNKNOWN_SERVER_ERROR (Kafka fails its look-up unexpectedly), an operation code other than 0-3
  INVALID_REQUEST ("Unknown operations type ...").
- GROUP (32): the checks and the storage of AlterConfigs on the group's resulting set of group configs (DELETE
  of a key the group does not set changes nothing); APPEND and SUBTRACT answer INVALID_CONFIG (no group config
  is a LIST).
- CLIENT_METRICS (16): SET and DELETE on the subscription's stored set (APPEND and SUBTRACT answer INVALID_CONFIG
  as Kafka's controller does), then the checks and storage of AlterConfigs.
- BROKER_LOGGER (8): the name must be this node's id (INVALID_REQUEST otherwise). SET needs an existing logger
  (INVALID_CONFIG) and one of TRACE, DEBUG, INFO, WARN, ERROR, FATAL (INVALID_CONFIG); DELETE resets a logger to
  its parent's level, except the root logger (INVALID_REQUEST); APPEND and SUBTRACT answer INVALID_REQUEST. The
  loggers are the process's Python loggers; like Kafka's, their levels do not survive a restart.
- Authorization, as Kafka's: ALTER_CONFIGS on the cluster for BROKER_LOGGER and CLIENT_METRICS before anything
  about them is checked, and for BROKER after the checks a Kafka broker makes before forwarding (the name, the keys
  and the operations); on the topic for TOPIC and on the group for GROUP before their checks. Denied:
  CLUSTER_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED (whether or not the topic exists) or
  GROUP_AUTHORIZATION_FAILED, and nothing changes.
- `validate_only` runs every check and changes nothing.

Deviations: an operation code other than 0-3 on a TOPIC or GROUP answers INVALID_REQUEST (Kafka fails it on the
controller with an unexpected error).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .. import config_catalog, dynamic_config
from ..config_catalog import LIST, LOG_LEVELS, ROOT_LOGGER, topic_config_key
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import IncrementalAlterConfigsResponse
from ..security.acls.types import AclOperation
from ..coordinator import group_config
from ..telemetry import client_metrics_config
from .alter_configs import alter_each, change_broker, change_client_metrics, change_group, change_topic, check_keys
from .describe_configs import (BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP, TOPIC, ResourceError,
                               authorize_config_resource, check_node_id)

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 44
MIN_VERSION = 0
MAX_VERSION = 1

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OPERATION_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

Response = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse


async def handle(ctx: RequestContext, request) -> IncrementalAlterConfigsResponse:
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=alter_each(
        request.resources, lambda resource: _alter(ctx, resource, request.validate_only), Response))


def _alter(ctx: RequestContext, resource, validate_only: bool) -> None:
    broker = ctx.broker
    check_keys(resource.configs, null_allowed=lambda config: config.config_operation == DELETE)

    def authorize():
        authorize_config_resource(ctx, AclOperation.ALTER_CONFIGS, resource)

    if resource.resource_type in (TOPIC, BROKER_LOGGER, GROUP, CLIENT_METRICS):
        authorize()
    if resource.resource_type == TOPIC:
        current = broker.logs.topic_overrides.get(resource.resource_name, {})
        overrides = _apply(resource.configs, current, _TopicKeys)
        change_topic(broker, resource.resource_name, overrides, validate_only)
    elif resource.resource_type == BROKER:
        change_broker(broker, resource.resource_name, _broker_set(broker, resource), validate_only,
                      authorize=authorize)
    elif resource.resource_type == BROKER_LOGGER:
        _alter_loggers(broker, resource, validate_only)
    elif resource.resource_type == GROUP:
        current = group_config.overrides_of(broker, resource.resource_name)
        change_group(broker, resource.resource_name, _apply(resource.configs, current, {}), validate_only)
    elif resource.resource_type == CLIENT_METRICS:
        change_client_metrics(broker, resource.resource_name, _client_metrics_set(broker, resource), validate_only)
    else:
        raise ResourceError(ErrorCode.INVALID_REQUEST, f"resource type {resource.resource_type} cannot be altered here")


def _broker_set(broker, resource) -> dict[str, str]:
    """The BROKER resource's dynamic configs after the operations (a node id that is not this node's is refused by
    change_broker first)."""
    if resource.resource_name:
        check_node_id(broker, resource.resource_name)
    operations = [(config.name, config.config_operation, config.value) for config in resource.configs]
    try:
        return dynamic_config.incremental(broker, resource.resource_name, operations)
    except dynamic_config.DynamicConfigError as exc:
        raise ResourceError(exc.code, exc.message) from None


def _client_metrics_set(broker, resource) -> dict[str, str]:
    operations = [(config.name, config.config_operation, config.value) for config in resource.configs]
    try:
        return client_metrics_config.incremental(broker, resource.resource_name, operations)
    except client_metrics_config.ClientMetricsConfigError as exc:
        raise ResourceError(exc.error_code, exc.message) from None


def _apply(operations, current: dict[str, str], catalogue) -> dict[str, str]:
    """The overrides after the operations, in order (Kafka keeps the text of list items as given)."""
    result = dict(current)
    for operation in operations:
        name, code = operation.name, operation.config_operation
        if code == SET:
            result[name] = operation.value
        elif code == DELETE:
            result.pop(name, None)
        elif code in (APPEND, SUBTRACT):
            result[name] = _list_operation(catalogue, name, code, result.get(name), operation.value)
        else:
            raise ResourceError(ErrorCode.INVALID_REQUEST, f"unknown config operation {code}")
    return result


class _TopicKeys:
    """The topic catalogue, the configs Kafka 4.0 removed included (change_topic refuses those unless emulating)."""

    get = staticmethod(topic_config_key)


def _list_operation(catalogue, name: str, code: int, current: str | None, operand: str) -> str:
    key = catalogue.get(name)
    if key is None or key.type != LIST:
        raise ResourceError(ErrorCode.INVALID_CONFIG,  # Kafka's controller's message
                            f"Can't {_OPERATION_NAMES[code]} to key {name} because its type is not LIST.")
    base = key.default if current is None else current
    items = [item for item in (base or "").split(",") if item]
    for item in operand.split(","):
        if code == APPEND and item not in items:
            items.append(item)
        elif code == SUBTRACT and item in items:
            items.remove(item)
    return ",".join(items)


def _alter_loggers(broker, resource, validate_only: bool) -> None:
    check_node_id(broker, resource.resource_name)
    for operation in resource.configs:
        _check_logger_operation(operation)
    if validate_only:
        return
    for operation in resource.configs:
        config_catalog.set_logger_level(operation.name, operation.value if operation.config_operation == SET
                                        else None)


def _check_logger_operation(operation) -> None:
    name, code = operation.name, operation.config_operation
    if code in (APPEND, SUBTRACT):
        raise ResourceError(ErrorCode.INVALID_REQUEST,
                            f"loggers take SET and DELETE only, not {_OPERATION_NAMES[code]}")
    if code not in (SET, DELETE):
        raise ResourceError(ErrorCode.INVALID_REQUEST, f"unknown config operation {code}")
    if not config_catalog.logger_exists(name):
        raise ResourceError(ErrorCode.INVALID_CONFIG, f"no logger {name}")
    if code == DELETE and name == ROOT_LOGGER:
        raise ResourceError(ErrorCode.INVALID_REQUEST, f"the {ROOT_LOGGER} logger must keep a level")
    if code == SET and operation.value not in LOG_LEVELS:
        raise ResourceError(ErrorCode.INVALID_CONFIG,
                            f"{operation.value!r} is not a log level: use one of {', '.join(LOG_LEVELS)}")
