"""DescribeCluster (API key 60), versions 0-2: the cluster id, the controller and the brokers.

Behaviour, as a Kafka broker answers:
- The broker list holds the live nodes, each with its endpoint on the listener the request came in on (as Metadata
  does) and its `broker.rack`. From v2, `include_fenced_brokers` adds the stopped nodes (fenced in Kafka's terms),
  with `is_fenced` true. A KRaft broker names a random live broker as the controller (clients send controller
  requests to a broker, which forwards them): here, the node answering.
- `endpoint_type` (v1+): 1 (brokers) is served; 2 (controllers) answers MISMATCHED_ENDPOINT_TYPE, since this is a
  broker's listener, and any other value UNSUPPORTED_ENDPOINT_TYPE, each with Kafka's message (a v0 request cannot
  carry the field). A served answer says endpoint type 1.
- No authorization is needed (Kafka's broker checks none). Cluster authorized operations: -2147483648 unless asked
  for; when asked, 0 for a principal without DESCRIBE on the cluster, else the cluster operations it may do
  (`RequestContext.authorized_operations`: every one Kafka supports when no authorizer is configured).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import DescribeClusterResponse
from ..security.acls.types import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 60
MIN_VERSION = 0
MAX_VERSION = 2

AUTHORIZED_OPERATIONS_OMITTED = -2**31  # the schema's default: not asked for
BROKER_ENDPOINT = 1
CONTROLLER_ENDPOINT = 2
_ENDPOINT_NAMES = {BROKER_ENDPOINT: "BROKER", CONTROLLER_ENDPOINT: "CONTROLLER"}


async def handle(ctx: RequestContext, request) -> DescribeClusterResponse:
    refusal = _endpoint_refusal(request.endpoint_type, ctx.api_version)
    if refusal is not None:
        return refusal
    broker = ctx.broker
    operations = (_cluster_operations(ctx) if request.include_cluster_authorized_operations
                  else AUTHORIZED_OPERATIONS_OMITTED)
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, endpoint_type=BROKER_ENDPOINT,
        cluster_id=broker.cluster_id, controller_id=broker.node_id,
        brokers=_brokers(ctx, include_fenced=ctx.api_version >= 2 and request.include_fenced_brokers),
        cluster_authorized_operations=operations)


def _cluster_operations(ctx: RequestContext) -> int:
    """Kafka's answer to include_cluster_authorized_operations: nothing for a principal that may not DESCRIBE it."""
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return 0
    return ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)


def _brokers(ctx: RequestContext, *, include_fenced: bool) -> list:
    broker = ctx.broker
    brokers = []
    for node_id, node in sorted(broker.metadata.nodes.items()):
        if not node.alive and not include_fenced:
            continue
        address = broker.endpoint_of(node_id, ctx.listener_host, ctx.listener_port)
        if address is not None:  # a node that has never listened has no endpoint to give
            brokers.append(DescribeClusterResponse.DescribeClusterBroker(
                broker_id=node_id, host=address[0], port=address[1], rack=node.rack, is_fenced=not node.alive))
    return brokers


def _endpoint_refusal(endpoint_type: int, version: int) -> DescribeClusterResponse | None:
    if endpoint_type == BROKER_ENDPOINT:
        return None
    if endpoint_type not in _ENDPOINT_NAMES:
        code = ErrorCode.INVALID_REQUEST if version == 0 else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        message = f"Unsupported endpoint type {endpoint_type}"
    else:
        code = ErrorCode.INVALID_REQUEST if version == 0 else ErrorCode.MISMATCHED_ENDPOINT_TYPE
        message = (f"The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type "
                   f"{_ENDPOINT_NAMES[endpoint_type]}")
    return DescribeClusterResponse(throttle_time_ms=0, error_code=code, error_message=message)
