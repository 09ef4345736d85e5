"""AlterConfigs (API key 33), versions 0-2: replace the whole set of a resource's config overrides.

Behaviour, as Kafka's (a broker that forwards to its controller, whose checks come in this order):
- A resource named twice in one request answers INVALID_REQUEST for each mention; a config key named twice within
  a resource, or a null value, answers INVALID_REQUEST.
- TOPIC (2): the given keys become the topic's overrides and every key left out falls back to its default (Kafka's
  legacy semantics; IncrementalAlterConfigs changes single keys). An empty name answers INVALID_REQUEST, an illegal
  one INVALID_TOPIC_EXCEPTION; a key Kafka does not know, a bad value or a rule broken by the new set (such as
  min.compaction.lag.ms above max.compaction.lag.ms) INVALID_CONFIG; then a topic that does not exist
  UNKNOWN_TOPIC_OR_PARTITION. The change is persisted (`compatbroker-topic-configs.json`) and applied at once to
  every partition: segment size and age, retention, cleanup policy, max.message.bytes, timestamp type and
  compression (recompression on append) take effect from the next append or storage pass. When the disk refuses
  the file, that resource answers UNKNOWN_SERVER_ERROR without a message (one WARNING line in the log).
- BROKER (4): the name must be this node's id or empty (the cluster-wide default), otherwise INVALID_REQUEST. The
  given configs become that resource's whole set of dynamic broker configs (`compatbroker.dynamic_config`): a
  broker config Kafka cannot change at run time answers INVALID_REQUEST ("Cannot update these configs
  dynamically: Set(...)"), as do an SSL store config without a listener prefix, a value of the wrong type or range
  (ConfigDef's message), a per-broker config (listeners, security) set cluster-wide, and a thread count beyond
  half or double its value (Kafka reports broker-side validation failures as INVALID_REQUEST). The change is kept
  cluster-wide (`broker-configs.json`, read at start) and applied at once to the nodes it concerns; when the disk
  refuses the file, UNKNOWN_SERVER_ERROR without a message.
- GROUP (32): the given keys become the group's whole set of group configs (Kafka 4.2's names,
  `compatbroker.coordinator.group_config`), whether or not the group exists. An empty name answers
  INVALID_REQUEST ("Default group resources are not allowed."); an unknown name, a value of the wrong type or
  out of range, a value outside the broker's bounds (e.g. `consumer.session.timeout.ms` within
  `group.consumer.min/max.session.timeout.ms`, `share.record.lock.duration.ms` within
  `group.share.min/max.record.lock.duration.ms`) or a session timeout not above the heartbeat interval answers
  INVALID_CONFIG with Kafka's message. The change is kept cluster-wide (`group-configs.json` beside the cluster
  metadata, read at start) and read by the coordinators from their next decision on.
- CLIENT_METRICS (16): the given keys become the whole config set of the KIP-714 client metrics subscription of
  that name (an empty set deletes it), after Kafka's checks (`compatbroker.telemetry.client_metrics_config`:
  INVALID_REQUEST or INVALID_CONFIG with Kafka's message); kept cluster-wide, seen by clients at their next
  GetTelemetrySubscriptions.
- BROKER_LOGGER (8) and any other type: INVALID_REQUEST (loggers only change through IncrementalAlterConfigs).
- Authorization, where Kafka's controller checks it (after the checks above that a Kafka broker makes before
  forwarding: duplicates, null values, a BROKER resource's name and keys): ALTER_CONFIGS on the topic for TOPIC
  (else TOPIC_AUTHORIZATION_FAILED, whether or not the topic exists), on the cluster for BROKER (else
  CLUSTER_AUTHORIZATION_FAILED), on the cluster for CLIENT_METRICS before its checks, on the group for GROUP (else
  GROUP_AUTHORIZATION_FAILED); a denied resource is not changed.
- `validate_only` runs every check and changes nothing.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from .. import dynamic_config, topic_names
from ..coordinator import group_config
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import AlterConfigsResponse
from ..security.acls.types import AclOperation
from ..storage.log_config import ConfigError
from ..telemetry import client_metrics_config
from .describe_configs import (BROKER, CLIENT_METRICS, GROUP, TOPIC, ResourceError, authorize_config_resource,
                               check_node_id)

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 33
MIN_VERSION = 0
MAX_VERSION = 2

Response = AlterConfigsResponse.AlterConfigsResourceResponse


async def handle(ctx: RequestContext, request) -> AlterConfigsResponse:
    return AlterConfigsResponse(throttle_time_ms=0, responses=alter_each(
        request.resources, lambda resource: _alter(ctx, resource, request.validate_only), Response))


def _alter(ctx: RequestContext, resource, validate_only: bool) -> None:
    broker = ctx.broker
    check_keys(resource.configs, null_allowed=False)
    overrides = {config.name: config.value for config in resource.configs}

    def authorize():
        authorize_config_resource(ctx, AclOperation.ALTER_CONFIGS, resource)

    if resource.resource_type in (TOPIC, GROUP, CLIENT_METRICS):
        authorize()
    if resource.resource_type == TOPIC:
        change_topic(broker, resource.resource_name, overrides, validate_only)
    elif resource.resource_type == BROKER:
        change_broker(broker, resource.resource_name, overrides, validate_only, authorize=authorize)
    elif resource.resource_type == GROUP:
        change_group(broker, resource.resource_name, overrides, validate_only)
    elif resource.resource_type == CLIENT_METRICS:
        change_client_metrics(broker, resource.resource_name, overrides, validate_only)
    else:
        raise ResourceError(ErrorCode.INVALID_REQUEST, f"resource type {resource.resource_type} cannot be altered here")


# --- shared with IncrementalAlterConfigs --------------------------------------------------------------------------

def alter_each(resources, alter, response_cls) -> list:
    """A `response_cls` (the response's per-resource struct) for each resource, in request order: INVALID_REQUEST
    for every mention of a resource named twice, otherwise what `alter(resource)` raises (or success)."""
    seen: dict[tuple[int, str], int] = {}
    for resource in resources:
        key = (resource.resource_type, resource.resource_name)
        seen[key] = seen.get(key, 0) + 1
    outcomes = []
    for resource in resources:
        if seen[(resource.resource_type, resource.resource_name)] > 1:
            outcomes.append((ErrorCode.INVALID_REQUEST, "resource named more than once in the request"))
            continue
        try:
            alter(resource)
        except ResourceError as failure:
            outcomes.append((failure.code, failure.message))
        else:
            outcomes.append((ErrorCode.NONE, None))
    return [response_cls(error_code=code, error_message=message, resource_type=resource.resource_type,
                         resource_name=resource.resource_name)
            for resource, (code, message) in zip(resources, outcomes)]


def check_keys(configs, *, null_allowed) -> None:
    """Kafka's checks of a resource's entries before anything else: no key twice, no null value (except where
    `null_allowed(config)` says so)."""
    names = [config.name for config in configs]
    if len(set(names)) != len(names):
        raise ResourceError(ErrorCode.INVALID_REQUEST, "a config key is named more than once")
    nulls = [config.name for config in configs
             if config.value is None and not (null_allowed and null_allowed(config))]
    if nulls:
        raise ResourceError(ErrorCode.INVALID_REQUEST, f"null value (allowed for DELETE only) for {', '.join(nulls)}")


def change_topic(broker, topic: str, overrides: Mapping[str, str], validate_only: bool) -> None:
    """Make `overrides` the whole override set of `topic`, after Kafka's checks; persisted and applied live."""
    if not topic:
        raise ResourceError(ErrorCode.INVALID_REQUEST, "a topic resource needs a topic name")
    reason = topic_names.invalid_reason(topic)
    if reason is not None:
        raise ResourceError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"illegal topic name: {reason}")
    try:
        broker.check_topic_configs(overrides)
    except ConfigError as exc:
        raise ResourceError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    if broker.topic(topic) is None:
        raise ResourceError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {topic}")
    if not validate_only:
        try:
            broker.set_topic_config(topic, dict(overrides))
        except OSError as exc:  # the disk refused the config file: this resource's answer, as Kafka's ApiError
            log.warning("could not store the configs of topic %s: %s", topic, exc)
            raise ResourceError(ErrorCode.UNKNOWN_SERVER_ERROR, None) from exc


def change_group(broker, group_id: str, overrides: Mapping[str, str], validate_only: bool) -> None:
    """Make `overrides` the whole set of group configs of `group_id`, after Kafka's checks (the controller's
    ControllerConfigurationValidator and GroupConfig.validate); kept cluster-wide."""
    if not group_id:
        raise ResourceError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
    try:
        group_config.validate(overrides, *group_config.settings_of(broker))
    except group_config.GroupConfigError as exc:
        raise ResourceError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    if validate_only:
        return
    try:
        broker.cluster.metadata.group_configs.set(group_id, group_config.normalized(overrides))
    except OSError as exc:  # the disk refused the file: this resource's answer, as Kafka's ApiError
        log.warning("could not store the configs of group %s: %s", group_id, exc)
        raise ResourceError(ErrorCode.UNKNOWN_SERVER_ERROR, None) from exc
    log.info("group %s: group configs are now %s", group_id, dict(overrides) or "the broker's")


def change_client_metrics(broker, name: str, configs: Mapping[str, str], validate_only: bool) -> None:
    """Make `configs` the whole set of the client metrics subscription `name` (KIP-714; an empty set deletes it),
    after Kafka's checks (`compatbroker.telemetry.client_metrics_config`)."""
    try:
        if validate_only:
            client_metrics_config.validate(name, configs)
        else:
            client_metrics_config.apply(broker, name, configs)
    except client_metrics_config.ClientMetricsConfigError as exc:
        raise ResourceError(exc.error_code, exc.message) from None


def change_broker(broker, name: str, properties: Mapping[str, str], validate_only: bool, *,
                  authorize: Callable[[], None]) -> None:
    """Make `properties` the whole set of dynamic configs of BROKER resource `name` ("" for the cluster default,
    else this node's id): Kafka's checks (`compatbroker.dynamic_config.validate`), then `authorize()` (which raises
    ResourceError when the principal may not: Kafka's broker checks before forwarding, its controller authorizes
    after), then kept and applied live."""
    if name:
        check_node_id(broker, name)
    try:
        dynamic_config.validate(broker, name, properties)
    except dynamic_config.DynamicConfigError as exc:
        raise ResourceError(exc.code, exc.message) from None
    authorize()
    if validate_only:
        return
    try:
        dynamic_config.commit(broker, name, properties)
    except OSError as exc:  # the disk refused the file: this resource's answer, as Kafka's ApiError
        log.warning("could not store the dynamic broker configs of %s: %s", name or "the cluster", exc)
        raise ResourceError(ErrorCode.UNKNOWN_SERVER_ERROR, None) from exc
