"""ListPartitionReassignments (API key 46), version 0: the partition reassignments in progress (KIP-455).

Behaviour, as Kafka's KRaft controller answers (any node takes the request):
- A partition is listed while its reassignment runs: `replicas` is its whole replica set then (the target replicas
  and those still to be removed), with the replicas being added and those being removed.
- Authorization first, as Kafka's controller: DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED with a
  message at the top, and each asked partition listed bare (Kafka's error answer: index only, empty replica lists).
- `topics` null lists every reassignment in progress (topics by name); otherwise only the asked partitions that are
  being reassigned. Unknown topics and partitions, and partitions not being reassigned, are left out, and so are
  topics left with none. Top-level error 0 with a null message.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import ListPartitionReassignmentsResponse
from ..security.acls.types import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 46
MIN_VERSION = 0
MAX_VERSION = 0

TopicResult = ListPartitionReassignmentsResponse.OngoingTopicReassignment
PartitionResult = ListPartitionReassignmentsResponse.OngoingPartitionReassignment


async def handle(ctx: RequestContext, request) -> ListPartitionReassignmentsResponse:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return _denied(request)
    metadata = ctx.broker.metadata
    if request.topics is None:
        wanted = [(topic, None) for topic in sorted(metadata.topics())]
    else:
        wanted = [(topic.name, topic.partition_indexes) for topic in request.topics]
    topics = []
    for topic, partitions in wanted:
        ongoing = [_ongoing(state) for state in _states(metadata, topic, partitions) if _reassigning(state)]
        if ongoing:
            topics.append(TopicResult(name=topic, partitions=ongoing))
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                                              topics=topics)


def _denied(request) -> ListPartitionReassignmentsResponse:
    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=code, error_message=code.message,
        topics=[TopicResult(name=topic.name, partitions=[PartitionResult(partition_index=index)
                                                         for index in topic.partition_indexes])
                for topic in request.topics or ()])


def _states(metadata, topic: str, partitions: list[int] | None) -> list:
    if partitions is None:
        return metadata.partitions(topic)
    return [state for state in (metadata.partition(topic, p) for p in partitions) if state is not None]


def _reassigning(state) -> bool:
    return bool(state.adding_replicas or state.removing_replicas)


def _ongoing(state):
    return PartitionResult(partition_index=state.partition, replicas=list(state.replicas),
                           adding_replicas=list(state.adding_replicas),
                           removing_replicas=list(state.removing_replicas))
