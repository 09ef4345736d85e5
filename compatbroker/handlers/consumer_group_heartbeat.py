"""ConsumerGroupHeartbeat (API key 68), versions 0-1: a KIP-848 consumer joins, stays in or leaves its group, reports
its subscription and owned partitions, and learns its member epoch and assignment.

Checks in Kafka's order (KafkaApis, then GroupCoordinatorService):
- UNSUPPORTED_VERSION when the broker does not serve the consumer protocol (`consumer` left out of
  group.coordinator.rebalance.protocols);
- READ on the group, else GROUP_AUTHORIZATION_FAILED;
- DESCRIBE on every topic of `subscribed_topic_names`, else TOPIC_AUTHORIZATION_FAILED (topics a regex matches are
  instead filtered by the member's DESCRIBE permission when the coordinator resolves the regex);
- the request's shape (INVALID_REQUEST with Kafka's message: a member id from v1, where the consumer generates it;
  epoch 0 needs a rebalance timeout, empty owned partitions and a subscription; ...; UNSUPPORTED_ASSIGNOR);
- NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS for a group this node does not serve (yet);
- then the coordinator's rules (`coordinator/consumer_group/heartbeat.py`). Error answers carry only the error
  code and Kafka's message, no member id.
v1 adds `subscribed_topic_regex` (RE2/J) and makes the member id the consumer's own.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..coordinator import coordinator_of
from ..coordinator.consumer_group.heartbeat import HeartbeatArgs, HeartbeatAnswer
from ..protocol.error_codes import ErrorCode
from ..protocol.error_responses import error_response
from ..protocol.messages import ConsumerGroupHeartbeatResponse
from ..security.acls.types import AclOperation, ResourceType
from .join_group import client_host

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 68
MIN_VERSION = 0
MAX_VERSION = 1

Response = ConsumerGroupHeartbeatResponse


async def handle(ctx: RequestContext, request) -> ConsumerGroupHeartbeatResponse:
    if not coordinator_of(ctx.broker).consumer_settings.enabled:  # before authorization, as KafkaApis
        return error_response(API_KEY, ctx.api_version, request, ErrorCode.UNSUPPORTED_VERSION)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return Response(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    names = request.subscribed_topic_names
    if names and len(ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, names)) < len(set(names)):
        return Response(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    answer = await coordinator_of(ctx.broker).consumer_groups.heartbeat(_args(ctx, request))
    return _response(answer)


def _args(ctx: RequestContext, request) -> HeartbeatArgs:
    owned = None
    if request.topic_partitions is not None:
        owned = {}
        for topic in request.topic_partitions:  # a topic listed twice counts once, with both lists
            owned[topic.topic_id] = owned.get(topic.topic_id, frozenset()) | frozenset(topic.partitions)
    return HeartbeatArgs(
        group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        instance_id=request.instance_id, rack_id=request.rack_id, rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=request.subscribed_topic_names,
        subscribed_topic_regex=request.subscribed_topic_regex if ctx.api_version >= 1 else None,
        server_assignor=request.server_assignor, owned_partitions=owned, client_id=ctx.client_id or "",
        client_host=client_host(ctx.peer), api_version=ctx.api_version, authorized_topic=_topic_filter(ctx))


def _topic_filter(ctx: RequestContext):
    """DESCRIBE on a topic, for the topics a regex resolves to (None: no authorizer, every topic passes). Denials
    are not logged, as Kafka's filter of resolved regexes does not log them."""
    if ctx.broker.security.authorizer is None:
        return None
    return lambda topic: ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic, log_if_denied=False)


def _response(answer: HeartbeatAnswer) -> ConsumerGroupHeartbeatResponse:
    if answer.error is not ErrorCode.NONE:
        return Response(error_code=answer.error, error_message=answer.message)
    assignment = None
    if answer.assignment is not None:
        assignment = Response.Assignment(topic_partitions=[
            Response.TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
            for topic_id, partitions in answer.assignment.items()])
    return Response(member_id=answer.member_id, member_epoch=answer.member_epoch,
                    heartbeat_interval_ms=answer.heartbeat_interval_ms, assignment=assignment)
