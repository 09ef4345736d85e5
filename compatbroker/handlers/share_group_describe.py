"""ShareGroupDescribe (API key 77), version 1: state, epochs, assignor and members of KIP-932 share groups (Kafka
4.1+; v0 was Kafka 4.0's early access and is not served).

Per group, as Kafka 4.2's KafkaApis and group coordinator answer:
- DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED (such groups come first in the answer, as in Kafka);
- INVALID_GROUP_ID for an empty group id, NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS for a group this node
  does not (yet) serve, GROUP_ID_NOT_FOUND ("Group X not found." / "Group X is not a share group.");
- otherwise the state (Empty, Stable), group epoch, assignment epoch, assignor "simple", and each member's id,
  rack, epoch, client id and host, subscribed topics and assigned partitions (topic id, name, partitions; a topic
  deleted since is left out);
- authorized operations (when asked, for groups described without error): the operations the principal may do on
  the group, else INT32_MIN;
- with an authorizer, a group assigning a topic the principal may not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED
  with Kafka's message and no members.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..coordinator import coordinator_of
from ..coordinator.share_group import ASSIGNOR_NAME
from ..coordinator.share_group.model import GROUP_TYPE, ShareGroup, assignment_pairs
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import ShareGroupDescribeResponse
from ..security.acls.types import AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 77
MIN_VERSION = 1
MAX_VERSION = 1

Response = ShareGroupDescribeResponse
Described = ShareGroupDescribeResponse.DescribedGroup

UNAUTHORIZED_TOPICS = "The group has described topic(s) that the client is not authorized to describe."


async def handle(ctx: RequestContext, request) -> ShareGroupDescribeResponse:
    denied, described = [], []
    coordinator = coordinator_of(ctx.broker)
    for group_id in request.group_ids:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            denied.append(Described(group_id=group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        entry = _describe(ctx, coordinator, group_id)
        if request.include_authorized_operations and entry.error_code == ErrorCode.NONE:
            entry.authorized_operations = ctx.authorized_operations(ResourceType.GROUP, group_id)
        described.append(entry)
    groups = denied + described
    if ctx.broker.security.authorizer is not None:
        groups = _hide_unauthorized_topics(ctx, groups)
    return Response(groups=groups)


def _describe(ctx: RequestContext, coordinator, group_id: str):
    if not group_id:
        return Described(group_id="", error_code=ErrorCode.INVALID_GROUP_ID)
    error = coordinator.error_for(group_id)
    if error is not ErrorCode.NONE:
        return Described(group_id=group_id, error_code=error)
    group = coordinator.group(group_id)
    if group is None:
        return Described(group_id=group_id, error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                         error_message=f"Group {group_id} not found.")
    if getattr(group, "group_type", None) != GROUP_TYPE:
        return Described(group_id=group_id, error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                         error_message=f"Group {group_id} is not a share group.")
    return _described(ctx.broker, group)


def _described(host, group: ShareGroup):
    members = [Response.Member(member_id=member.member_id, rack_id=member.rack_id, member_epoch=member.member_epoch,
                               client_id=member.client_id, client_host=member.client_host,
                               subscribed_topic_names=sorted(member.subscribed_topic_names),
                               assignment=Response.Assignment(topic_partitions=_topic_partitions(host, member)))
               for member in group.members.values()]
    return Described(group_id=group.group_id, group_state=str(group.state), group_epoch=group.group_epoch,
                     assignment_epoch=group.assignment_epoch, assignor_name=ASSIGNOR_NAME, members=members)


def _topic_partitions(host, member) -> list:
    named = []
    for topic_id, partitions in assignment_pairs(member.assigned_partitions):
        topic = host.topic_by_id(topic_id)
        if topic is not None:
            named.append(Response.TopicPartitions(topic_id=topic_id, topic_name=topic.name, partitions=partitions))
    return named


def _hide_unauthorized_topics(ctx: RequestContext, groups: list) -> list:
    """Kafka's all-or-nothing rule: a group whose members are assigned a topic the principal may not describe is
    answered TOPIC_AUTHORIZATION_FAILED without members."""
    names = {tp.topic_name for group in groups for member in group.members for tp in member.assignment.topic_partitions}
    allowed = ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    return [group if all(tp.topic_name in allowed for member in group.members
                         for tp in member.assignment.topic_partitions)
            else Described(group_id=group.group_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                           error_message=UNAUTHORIZED_TOPICS, members=[])
            for group in groups]
