"""DescribeQuorum (API key 55), versions 0-2: the KRaft controller quorum as Kafka describes its metadata log.

The cluster's controller state stands for `__cluster_metadata`, partition 0: one voter, the controller (the lowest
node id), which leads it; each change to the cluster metadata is one more offset (`ClusterMetadata.metadata_offset`).

Behaviour, as Kafka's controller answers (a broker forwards the request to it, so any node answers the same):
- Authorization first, as Kafka's controller: DESCRIBE on the cluster, else the top-level error
  CLUSTER_AUTHORIZATION_FAILED with a message and nothing else.
- The request must name exactly `__cluster_metadata` with exactly partition 0; otherwise every partition asked for
  gets UNKNOWN_TOPIC_OR_PARTITION with a message, the other fields left at their defaults (top-level error 0).
- Leader: the controller, at quorum epoch 1 (one voter, elected once); high watermark and every replica's log end
  offset: the metadata offset (the voter commits alone, and the brokers follow in the same process).
- Voters: the controller. Observers: the other nodes that are running (brokers follow the metadata log without
  voting). v1+: fetch and caught-up timestamps are the current time (the leader reports now for itself; the
  in-process brokers are always caught up). v2: replica directory ids are all zeroes (a static quorum, as with
  `controller.quorum.voters`), and `nodes` gives the voter's endpoint on the listener the request came in on.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import DescribeQuorumResponse
from ..protocol.wire import ZERO_UUID
from ..security.acls.types import CLUSTER_NAME, AclOperation, ResourceType
from ..topic_names import CLUSTER_METADATA_TOPIC

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 55
MIN_VERSION = 0
MAX_VERSION = 2

METADATA_PARTITION = 0
QUORUM_EPOCH = 1

TopicData = DescribeQuorumResponse.TopicData
PartitionData = DescribeQuorumResponse.PartitionData
ReplicaState = DescribeQuorumResponse.ReplicaState
Node = DescribeQuorumResponse.Node
Listener = DescribeQuorumResponse.Listener


async def handle(ctx: RequestContext, request) -> DescribeQuorumResponse:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return DescribeQuorumResponse(error_code=code, error_message=code.message, topics=[], nodes=[])
    if not _asks_for_metadata_log(request):
        return _unknown_partitions(request)
    metadata = ctx.broker.metadata
    controller = metadata.controller_id
    now_ms = ctx.broker.now_ms()
    offset = metadata.metadata_offset
    observers = [node for node in metadata.alive_nodes() if node != controller]
    partition = PartitionData(partition_index=METADATA_PARTITION, error_code=ErrorCode.NONE, error_message=None,
                              leader_id=controller, leader_epoch=QUORUM_EPOCH, high_watermark=offset,
                              current_voters=[_replica(controller, offset, now_ms)],
                              observers=[_replica(node, offset, now_ms) for node in observers])
    return DescribeQuorumResponse(error_code=ErrorCode.NONE, error_message=None,
                                  topics=[TopicData(topic_name=CLUSTER_METADATA_TOPIC, partitions=[partition])],
                                  nodes=[_node(ctx, controller)] if ctx.api_version >= 2 else [])


def _asks_for_metadata_log(request) -> bool:
    topics = request.topics
    return (len(topics) == 1 and topics[0].topic_name == CLUSTER_METADATA_TOPIC and len(topics[0].partitions) == 1
            and topics[0].partitions[0].partition_index == METADATA_PARTITION)


def _unknown_partitions(request) -> DescribeQuorumResponse:
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return DescribeQuorumResponse(error_code=ErrorCode.NONE, error_message=None, nodes=[], topics=[
        TopicData(topic_name=topic.topic_name,
                  partitions=[PartitionData(partition_index=p.partition_index, error_code=code,
                                            error_message=code.message)
                              for p in topic.partitions])
        for topic in request.topics])


def _replica(node_id: int, log_end_offset: int, now_ms: int):
    return ReplicaState(replica_id=node_id, replica_directory_id=ZERO_UUID, log_end_offset=log_end_offset,
                        last_fetch_timestamp=now_ms, last_caught_up_timestamp=now_ms)


def _node(ctx: RequestContext, node_id: int):
    endpoint = ctx.broker.endpoint_of(node_id, ctx.listener_host, ctx.listener_port)
    if endpoint is None:  # the node has never listened
        return Node(node_id=node_id, listeners=[])
    host, port = endpoint
    return Node(node_id=node_id, listeners=[Listener(name=_listener_name(ctx), host=host, port=port)])


def _listener_name(ctx: RequestContext) -> str:
    listeners = ctx.broker.config.listeners
    return next((listener.name for listener in listeners if listener.port == ctx.listener_port), listeners[0].name)
