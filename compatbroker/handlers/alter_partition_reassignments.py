"""AlterPartitionReassignments (API key 45), versions 0-1: start or cancel moving partitions to new replicas
(KIP-455), decided by the controller.

Behaviour, as Kafka's KRaft controller answers (any node takes the request; a broker forwards it):
- Authorization first, as Kafka's controller: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED (with a
  message) at the top and on every partition asked for, and nothing moves.
- Per partition, in request order: UNKNOWN_TOPIC_OR_PARTITION for a topic or partition the cluster does not have;
  `replicas` null cancels the reassignment in progress (NO_REASSIGNMENT_IN_PROGRESS when there is none); a replica
  list starts one: `Controller.reassign` refuses an empty list, a repeated or unknown node with
  INVALID_REPLICA_ASSIGNMENT. New replicas copy the data, then the controller moves leadership and drops the old
  ones; the progress shows in ListPartitionReassignments.
- v1 (KIP-860): `allow_replication_factor_change` false refuses a list whose length differs from the current
  replica count with INVALID_REPLICATION_FACTOR ("The replication factor is changed from A to B"); the response
  echoes the flag.
- Errors carry a message; success has a null one; the top-level error is 0. `timeout_ms` is never reached: the
  controller accepts or refuses at once.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..cluster.controller import ControllerError
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import AlterPartitionReassignmentsResponse
from ..security.acls.types import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 45
MIN_VERSION = 0
MAX_VERSION = 1

TopicResult = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
PartitionResult = AlterPartitionReassignmentsResponse.ReassignablePartitionResponse


async def handle(ctx: RequestContext, request) -> AlterPartitionReassignmentsResponse:
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return _denied(request)
    allow_rf_change = request.allow_replication_factor_change if ctx.api_version >= 1 else True
    responses = [TopicResult(name=topic.name,
                             partitions=[_alter(ctx.broker, topic.name, wanted, allow_rf_change)
                                         for wanted in topic.partitions])
                 for topic in request.topics]
    return AlterPartitionReassignmentsResponse(throttle_time_ms=0, allow_replication_factor_change=allow_rf_change,
                                               error_code=ErrorCode.NONE, error_message=None, responses=responses)


def _alter(broker, topic: str, wanted, allow_rf_change: bool):
    index = wanted.partition_index
    state = broker.partition_state(topic, index)
    if state is None:
        message = (f"Unable to find partition {topic}:{index}." if broker.topic(topic) else
                   f"Unable to find a topic named {topic}.")
        return _result(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message)
    target = None if wanted.replicas is None else list(wanted.replicas)
    if target is not None and not allow_rf_change and len(target) != len(state.replicas):
        return _result(index, ErrorCode.INVALID_REPLICATION_FACTOR,
                       f"The replication factor is changed from {len(state.replicas)} to {len(target)}")
    try:
        broker.controller.reassign(topic, index, target)
    except ControllerError as exc:
        return _result(index, exc.code, exc.message)
    return _result(index, ErrorCode.NONE, None)


def _denied(request) -> AlterPartitionReassignmentsResponse:
    """Kafka's error answer: the error on every partition asked for and at the top."""
    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=code, error_message=code.message,
        responses=[TopicResult(name=topic.name, partitions=[_result(p.partition_index, code, code.message)
                                                            for p in topic.partitions])
                   for topic in request.topics])


def _result(partition: int, code: int, message: str | None):
    return PartitionResult(partition_index=partition, error_code=code, error_message=message)
