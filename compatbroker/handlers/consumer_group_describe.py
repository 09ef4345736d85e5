"""ConsumerGroupDescribe (API key 69), versions 0-1: the full state of KIP-848 consumer groups.

Per group, as Kafka's: its state, group epoch, assignment epoch, the server assignor its members prefer (else the
broker's default, the first of `group.consumer.assignors`) and each member with its epoch, client, subscription,
current and target assignment (topic ids with names; a topic no longer in the cluster is left out); v1 adds each
member's type (1: consumer protocol, 0: classic protocol inside a consumer group).
Every group is answered UNSUPPORTED_VERSION when the broker does not serve the consumer protocol (`consumer` left
out of group.coordinator.rebalance.protocols).
Errors per group: GROUP_ID_NOT_FOUND "Group X not found." for an unknown group, "Group X is not a consumer group."
for a classic or share group; NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS for one this node does not serve.
Authorization, as KafkaApis: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED; those groups come first in
the answer, as in Kafka); with an authorizer, a group whose assignments name a topic the caller may not DESCRIBE is
answered TOPIC_AUTHORIZATION_FAILED without its members. Authorized operations (when asked) for groups described
without error.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..coordinator import coordinator_of
from ..coordinator.consumer_group import ConsumerGroup
from ..protocol.error_codes import ErrorCode
from ..protocol.error_responses import error_response
from ..protocol.messages import ConsumerGroupDescribeResponse
from ..security.acls.types import AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 69
MIN_VERSION = 0
MAX_VERSION = 1

Response = ConsumerGroupDescribeResponse
Described = ConsumerGroupDescribeResponse.DescribedGroup

MEMBER_TYPE_CLASSIC = 0
MEMBER_TYPE_CONSUMER = 1
UNAUTHORIZED_TOPICS = "The group has described topic(s) that the client is not authorized to describe."


async def handle(ctx: RequestContext, request) -> ConsumerGroupDescribeResponse:
    coordinator = coordinator_of(ctx.broker)
    if not coordinator.consumer_settings.enabled:  # before authorization, as KafkaApis
        return error_response(API_KEY, ctx.api_version, request, ErrorCode.UNSUPPORTED_VERSION)
    denied, described = [], []
    for group_id in request.group_ids:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            denied.append(Described(group_id=group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED))
        else:
            described.append(_describe(coordinator, group_id))
    if request.include_authorized_operations:
        for entry in described:
            if entry.error_code == ErrorCode.NONE:
                entry.authorized_operations = ctx.authorized_operations(ResourceType.GROUP, entry.group_id)
    groups = denied + described
    if ctx.broker.security.authorizer is not None:
        groups = _hide_unauthorized_topics(ctx, groups)
    return Response(groups=groups)


def _describe(coordinator, group_id: str):
    error = coordinator.error_for(group_id)
    if error is not ErrorCode.NONE:
        return Described(group_id=group_id, error_code=error)
    group = coordinator.group(group_id)
    if group is None or str(group.state) == "Dead":
        return Described(group_id=group_id, error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                         error_message=f"Group {group_id} not found.")
    if not isinstance(group, ConsumerGroup):
        return Described(group_id=group_id, error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                         error_message=f"Group {group_id} is not a consumer group.")
    return describe_group(group, coordinator.consumer_settings.default_assignor, coordinator.broker.topic_by_id)


def describe_group(group: ConsumerGroup, default_assignor: str, topic_by_id) -> Described:
    """Kafka's ConsumerGroup.asDescribedGroup."""
    members = [Response.Member(
        member_id=member.member_id, instance_id=member.instance_id, rack_id=member.rack_id,
        member_epoch=member.member_epoch, client_id=member.client_id, client_host=member.client_host,
        subscribed_topic_names=sorted(member.subscribed_topic_names),
        subscribed_topic_regex=member.subscribed_topic_regex,
        assignment=_assignment(member.assigned_partitions, topic_by_id),
        target_assignment=_assignment(group.target_assignment_of(member.member_id), topic_by_id),
        member_type=MEMBER_TYPE_CLASSIC if member.use_classic_protocol else MEMBER_TYPE_CONSUMER)
        for member in group.members.values()]
    return Described(group_id=group.group_id, group_state=str(group.state), group_epoch=group.group_epoch,
                     assignment_epoch=group.assignment_epoch,
                     assignor_name=group.preferred_server_assignor() or default_assignor, members=members)


def _assignment(assignment, topic_by_id):
    partitions = []
    for topic_id, numbers in assignment.items():
        topic = topic_by_id(topic_id)
        if topic is not None:
            partitions.append(Response.TopicPartitions(topic_id=topic_id, topic_name=topic.name,
                                                       partitions=sorted(numbers)))
    return Response.Assignment(topic_partitions=partitions)


def _hide_unauthorized_topics(ctx: RequestContext, groups: list) -> list:
    """KAFKA-18813: clients may not learn about topics they cannot DESCRIBE through a group's assignments."""
    def topics_of(entry) -> set[str]:
        return {tp.topic_name for member in entry.members
                for assignment in (member.assignment, member.target_assignment)
                for tp in assignment.topic_partitions}
    wanted = set().union(*(topics_of(entry) for entry in groups)) if groups else set()
    allowed = ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, wanted)
    return [entry if topics_of(entry) <= allowed else
            Described(group_id=entry.group_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                      error_message=UNAUTHORIZED_TOPICS)
            for entry in groups]
