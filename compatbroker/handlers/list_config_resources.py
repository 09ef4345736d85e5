"""ListConfigResources (API key 74), versions 0-1: the config resources that exist (KIP-714, KIP-1142).

Version 0 is Kafka 3.7's ListClientMetricsResources: the client metrics subscriptions. Version 1 (Kafka 4.1+)
lists the types asked for (none: all it supports), each entry with its type, in Kafka's order: GROUP (32) groups
that have group configs, CLIENT_METRICS (16) subscriptions, BROKER_LOGGER (8) and BROKER (4) the live nodes' ids,
TOPIC (2) every topic, internal ones included. A type the version does not support answers UNSUPPORTED_VERSION
and nothing else. Needs DESCRIBE_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""
from __future__ import annotations

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import ListConfigResourcesResponse
from ..security.acls.types import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = 74
MIN_VERSION = 0
MAX_VERSION = 1

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SUPPORTED_TYPES = {0: (CLIENT_METRICS,), 1: (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)}
Resource = ListConfigResourcesResponse.ConfigResource


async def handle(ctx, request) -> ListConfigResourcesResponse:
    if not ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
        return ListConfigResourcesResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    supported = SUPPORTED_TYPES[ctx.api_version]
    wanted = set(request.resource_types or supported) if ctx.api_version >= 1 else set(supported)
    if not wanted <= set(supported):
        return ListConfigResourcesResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
    broker = ctx.broker
    found = []
    for kind, names in ((GROUP, _group_ids), (CLIENT_METRICS, _subscriptions), (BROKER_LOGGER, _node_ids),
                        (BROKER, _node_ids), (TOPIC, _topics)):
        if kind in wanted:
            found += [Resource(resource_name=name, resource_type=kind) for name in names(broker)]
    return ListConfigResourcesResponse(error_code=ErrorCode.NONE, config_resources=found)


def _group_ids(broker) -> list[str]:
    store = getattr(broker.cluster.metadata, "group_configs", None)
    return store.groups() if store is not None else []


def _subscriptions(broker) -> list[str]:
    return broker.client_telemetry.subscription_names()


def _node_ids(broker) -> list[str]:
    return [str(node_id) for node_id in broker.alive_node_ids()]


def _topics(broker) -> list[str]:
    return sorted(broker.topics())
