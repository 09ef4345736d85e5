"""ShareGroupHeartbeat (API key 76), version 1: a KIP-932 share consumer joins its share group, stays in it,
learns its assignment, and leaves (Kafka 4.1+; v0 was Kafka 4.0's early access and is not served).

Checks in Kafka 4.2's order (KafkaApis, then GroupCoordinatorService):
1. READ on the group, else GROUP_AUTHORIZATION_FAILED; then DESCRIBE on every subscribed topic named, else
   TOPIC_AUTHORIZATION_FAILED (a client may not learn of topics it cannot describe);
2. INVALID_REQUEST for an empty member id ("MemberId can't be empty.": from v1 the client makes its own), an empty
   group id, an empty rack id, a join (epoch 0) without subscribed topics, an epoch below -1;
3. NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS for a group this node does not (yet) serve;
4. the group's rules (`coordinator/share_group/heartbeat.py`): GROUP_ID_NOT_FOUND for an unknown group outside a
   join or a group of another type ("Group X is not a share group."), GROUP_MAX_SIZE_REACHED,
   UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, each with Kafka's message.
The answer carries the member id and epoch, the group's `share.heartbeat.interval.ms`, and the assignment (topic
ids and partitions) when it is new or the request was a full one; a leave (epoch -1) echoes the id and -1.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..coordinator import coordinator_of
from ..coordinator.share_group import HeartbeatArgs
from ..coordinator.share_group.model import assignment_pairs
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import ShareGroupHeartbeatResponse
from ..security.acls.types import AclOperation, ResourceType
from .join_group import client_host

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 76
MIN_VERSION = 1
MAX_VERSION = 1

Response = ShareGroupHeartbeatResponse


async def handle(ctx: RequestContext, request) -> ShareGroupHeartbeatResponse:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return Response(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    topics = request.subscribed_topic_names
    if topics and len(ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, set(topics))) < len(set(topics)):
        return Response(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    share_groups = coordinator_of(ctx.broker).share_groups
    answer = await share_groups.heartbeat(HeartbeatArgs(
        group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        rack_id=request.rack_id, subscribed_topic_names=None if topics is None else tuple(topics),
        client_id=ctx.client_id or "", client_host=client_host(ctx.peer)))
    if answer.error is not ErrorCode.NONE:
        return Response(error_code=answer.error, error_message=answer.message)
    assignment = None
    if answer.assignment is not None:
        assignment = Response.Assignment(topic_partitions=[
            Response.TopicPartitions(topic_id=topic_id, partitions=partitions)
            for topic_id, partitions in assignment_pairs(answer.assignment)])
    return Response(member_id=answer.member_id, member_epoch=answer.member_epoch,
                    heartbeat_interval_ms=answer.heartbeat_interval_ms, assignment=assignment)
