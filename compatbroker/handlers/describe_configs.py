"""DescribeConfigs (API key 32), versions 0-4: the configuration of topics, of the broker and of its loggers.

Behaviour, as Kafka's:
- Authorization of each resource before it is looked at: DESCRIBE_CONFIGS on the cluster for BROKER, BROKER_LOGGER
  and CLIENT_METRICS (else CLUSTER_AUTHORIZATION_FAILED), on the topic for TOPIC (else TOPIC_AUTHORIZATION_FAILED,
  whether or not it exists), on the group for GROUP (else GROUP_AUTHORIZATION_FAILED); a denied resource answers
  the error with Kafka's message and no configs.
- TOPIC (2): every topic config Kafka has, defaults included, with its value, source (1 topic override, 4 set in the
  broker's properties, 2 and 3 a dynamic broker config, 5 default), read_only false and, when asked, synonyms (v1+:
  the topic override, then the broker-level names that could supply the value) and documentation (v3+); see
  `compatbroker.config_catalog`. An illegal name answers INVALID_TOPIC_EXCEPTION, a topic that does not exist
  UNKNOWN_TOPIC_OR_PARTITION.
- BROKER (4): the name must be the id of the node answering, giving its catalogued broker configs with their
  values in force (read_only unless Kafka 4.x can change it at run time, secrets with a null value) and the custom
  names set dynamically; the source is where the value comes from, in Kafka's order: DYNAMIC_BROKER_CONFIG (2,
  this node's dynamic config), DYNAMIC_DEFAULT_BROKER_CONFIG (3, the cluster-wide default), STATIC_BROKER_CONFIG
  (4, server.properties or --set), DEFAULT_CONFIG (5), and the synonyms list every level that sets the name or its
  synonyms (`compatbroker.dynamic_config`). An empty name gives the cluster-wide dynamic defaults: only the names
  set there, each with source 3. Another node's id or a name that is not a number answers INVALID_REQUEST with Kafka's
  message (ConfigHelper): in a cluster the admin client sends each node's resource to that node.
- BROKER_LOGGER (8): the name must be this node's id (empty or another answers INVALID_REQUEST, Kafka's messages);
  the entries are the process's loggers (and "root") with their levels, source DYNAMIC_BROKER_LOGGER_CONFIG.
- `configuration_keys` null or empty asks for every key; otherwise only the named keys are returned (an unknown
  name is simply left out). v0 answers `is_default` (true when the source is the default) instead of the source.
- A resource type Kafka does not know fails the whole request: every resource answers INVALID_REQUEST.

- GROUP (32): the group configs of Kafka 4.2 (KIP-848, KIP-932; `compatbroker.coordinator.group_config`) for
  any group name, existing or not: the group's own value (source 8, GROUP_CONFIG) or the broker's (source 5,
  DEFAULT_CONFIG, the broker setting's value, e.g. `group.consumer.session.timeout.ms`), read_only false, and as
  its one synonym the same name, value and source. An empty name answers INVALID_REQUEST ("Group name must not
  be empty").

- CLIENT_METRICS (16): the KIP-714 client metrics subscription of that name, existing or not
  (`compatbroker.telemetry.client_metrics_config`): `interval.ms`, `match`, `metrics`, each set one with source
  CLIENT_METRICS_CONFIG (7) and itself as its synonym, the others their default with source 5. An empty name
  answers INVALID_REQUEST ("Client metrics subscription name must not be empty").

Deviations: Kafka lists entries in hash order, we sort them by name. Kafka 4.2's `streams.*` group configs are not
listed (no streams groups here). Denied resources keep their place in the request's order (Kafka answers them
last).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .. import config_catalog, topic_names
from ..config_catalog import DEFAULT_CONFIG, DYNAMIC_BROKER_LOGGER_CONFIG, INT, STRING, UNKNOWN_TYPE, ConfigEntry
from ..coordinator import group_config
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import DescribeConfigsResponse
from ..security.acls.types import CLUSTER_NAME, AclOperation, ResourceType
from ..telemetry import client_metrics_config

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 32
MIN_VERSION = 0
MAX_VERSION = 4

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
CLIENT_METRICS = 16
GROUP = 32
GROUP_CONFIG_SOURCE = 8  # ConfigSource.GROUP_CONFIG
KNOWN_RESOURCE_TYPES = frozenset({TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP})

Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = DescribeConfigsResponse.DescribeConfigsResourceResult
Synonym = DescribeConfigsResponse.DescribeConfigsSynonym


class ResourceError(Exception):
    """A resource cannot be described (or altered): the error code to answer and why."""

    def __init__(self, code: ErrorCode, message: str | None = None):
        super().__init__(message)
        self.code = code
        self.message = message


async def handle(ctx: RequestContext, request) -> DescribeConfigsResponse:
    unknown = [r.resource_type for r in request.resources if r.resource_type not in KNOWN_RESOURCE_TYPES]
    if unknown:  # Kafka fails the whole request on a type it cannot authorize
        failure = ResourceError(ErrorCode.INVALID_REQUEST, f"resource type {unknown[0]} is not a config resource")
        return DescribeConfigsResponse(throttle_time_ms=0,
                                       results=[_failed(r, failure) for r in request.resources])
    return DescribeConfigsResponse(throttle_time_ms=0,
                                   results=[_describe(ctx, request, resource) for resource in request.resources])


def _describe(ctx: RequestContext, request, resource) -> Result:
    try:
        authorize_config_resource(ctx, AclOperation.DESCRIBE_CONFIGS, resource)
        entries = _entries(ctx.broker, resource)
    except ResourceError as failure:
        return _failed(resource, failure)
    wanted = set(resource.configuration_keys or ())
    return Result(error_code=ErrorCode.NONE, error_message=None, resource_type=resource.resource_type,
                  resource_name=resource.resource_name,
                  configs=[_wire_entry(ctx.api_version, entry, request) for entry in entries
                           if not wanted or entry.name in wanted])


def authorize_config_resource(ctx: RequestContext, operation: AclOperation, resource) -> None:
    """Kafka's check of a config resource (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs): `operation` on
    the cluster for broker-wide types, else on the topic or group; ResourceError with the matching
    *_AUTHORIZATION_FAILED when denied."""
    kind = resource.resource_type
    if kind == TOPIC:
        target, name, denied = ResourceType.TOPIC, resource.resource_name, ErrorCode.TOPIC_AUTHORIZATION_FAILED
    elif kind == GROUP:
        target, name, denied = ResourceType.GROUP, resource.resource_name, ErrorCode.GROUP_AUTHORIZATION_FAILED
    else:  # BROKER, BROKER_LOGGER, CLIENT_METRICS
        target, name, denied = ResourceType.CLUSTER, CLUSTER_NAME, ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    if not ctx.authorize(operation, target, name):
        raise ResourceError(denied, denied.message)


def _entries(broker, resource) -> list[ConfigEntry]:
    if resource.resource_type == TOPIC:
        return _topic_entries(broker, resource.resource_name)
    if resource.resource_type == BROKER:
        if not resource.resource_name:  # the cluster-wide dynamic defaults
            return config_catalog.describe_default_broker_configs(broker)
        if _node_id(resource.resource_name) != broker.node_id:  # the admin client asks each node for its own
            raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {broker.node_id} or "
                                                           f"empty string, but received {resource.resource_name}")
        return config_catalog.describe_broker_configs(broker)
    if resource.resource_type == BROKER_LOGGER:
        if not resource.resource_name:
            raise ResourceError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
        if _node_id(resource.resource_name) != broker.node_id:
            raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {broker.node_id} but "
                                                           f"received {resource.resource_name}")
        return [ConfigEntry(name, level, False, DYNAMIC_BROKER_LOGGER_CONFIG, False, UNKNOWN_TYPE, None)
                for name, level in config_catalog.broker_loggers().items()]
    if resource.resource_type == GROUP:
        return _group_entries(broker, resource.resource_name)
    if resource.resource_type == CLIENT_METRICS:
        try:
            return client_metrics_config.describe(broker, resource.resource_name)
        except client_metrics_config.ClientMetricsConfigError as exc:
            raise ResourceError(exc.error_code, exc.message) from None
    raise ResourceError(ErrorCode.INVALID_REQUEST,
                        f"resource type {resource.resource_type} is not kept by this broker")


def _group_entries(broker, name: str) -> list[ConfigEntry]:
    if not name:
        raise ResourceError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
    defaults = group_config.broker_defaults(*group_config.settings_of(broker))
    overrides = group_config.overrides_of(broker, name)
    entries = []
    for key in sorted(group_config.GROUP_CONFIG_KEYS.values()):
        source = GROUP_CONFIG_SOURCE if key.name in overrides else DEFAULT_CONFIG
        value = overrides.get(key.name, defaults[key.name])
        entries.append(ConfigEntry(key.name, value, False, source, False, INT if key.is_int else STRING, key.doc,
                                   [(key.name, value, source)]))
    return entries


def _topic_entries(broker, name: str) -> list[ConfigEntry]:
    reason = topic_names.invalid_reason(name)
    if reason is not None:
        raise ResourceError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"illegal topic name: {reason}")
    if broker.topic(name) is None:
        raise ResourceError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
    return config_catalog.describe_topic_configs(broker, name)


def _node_id(name: str) -> int:
    try:
        return int(name)
    except ValueError:
        raise ResourceError(ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}") from None


def check_node_id(broker, name: str) -> None:
    """The rule of AlterConfigs and IncrementalAlterConfigs for BROKER and BROKER_LOGGER resource names: this node's
    id as a decimal number (Kafka's ConfigAdminManager messages)."""
    try:
        node_id = int(name)
    except ValueError:
        raise ResourceError(ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}") from None
    if node_id != broker.node_id:
        raise ResourceError(ErrorCode.INVALID_REQUEST,
                            f"Unexpected broker id, expected {broker.node_id}, but received {name}")


def _wire_entry(version: int, entry: ConfigEntry, request) -> Entry:
    wire = Entry(name=entry.name, value=entry.value, read_only=entry.read_only, is_sensitive=entry.is_sensitive)
    if version == 0:
        wire.is_default = entry.source == DEFAULT_CONFIG
        return wire
    wire.config_source = entry.source
    if request.include_synonyms:
        wire.synonyms = [Synonym(name=name, value=value, source=source) for name, value, source in entry.synonyms]
    if version >= 3:
        wire.config_type = entry.config_type
        wire.documentation = entry.documentation if request.include_documentation else None
    return wire


def _failed(resource, failure: ResourceError) -> Result:
    return Result(error_code=failure.code, error_message=failure.message, resource_type=resource.resource_type,
                  resource_name=resource.resource_name, configs=[])
