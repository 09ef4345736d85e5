"""DescribeShareGroupOffsets (API key 90), versions 0-1: the share-partition start offsets of share groups (the
admin client's `listShareGroupOffsets`); v1 adds each partition's lag (KIP-1226, Kafka 4.2).

Per group, as Kafka 4.2's KafkaApis and group coordinator answer:
- DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED (no topics);
- topics null: every partition whose share state the group initialized, after NOT_COORDINATOR /
  COORDINATOR_LOAD_IN_PROGRESS for a group this node does not (yet) serve; topics the principal may not DESCRIBE
  are silently left out; an unknown group has no initialized partitions (no error);
- topics empty: the group with no topics;
- topics named: a topic the principal may not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED per partition (start
  offset -1, zero topic id); an unknown topic, or a partition without share state, has start offset -1 (absence of
  data, as OffsetFetch answers, not an error); otherwise the start offset, the leader epoch and (v1) the lag.
  As in Kafka, this path reads the share state without asking whether the group exists or is coordinated here.
The lag is -1 when not known. Order as Kafka's: unknown topics, then the described ones, then the unauthorized.
"""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from ..coordinator import coordinator_of
from ..coordinator.share_group import read_share_offsets
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import DescribeShareGroupOffsetsResponse
from ..security.acls.types import AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 90
MIN_VERSION = 0
MAX_VERSION = 1

Response = DescribeShareGroupOffsetsResponse
GroupAnswer = Response.DescribeShareGroupOffsetsResponseGroup
TopicAnswer = Response.DescribeShareGroupOffsetsResponseTopic
PartitionAnswer = Response.DescribeShareGroupOffsetsResponsePartition

ZERO_UUID = uuid.UUID(int=0)


async def handle(ctx: RequestContext, request) -> DescribeShareGroupOffsetsResponse:
    answers = []
    for group in request.groups:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group.group_id):
            answers.append(GroupAnswer(group_id=group.group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED))
        elif group.topics is None:
            answers.append(await _all_offsets(ctx, group.group_id))
        elif not group.topics:
            answers.append(GroupAnswer(group_id=group.group_id))
        else:
            answers.append(await _offsets(ctx, group.group_id, group.topics))
    return Response(groups=answers)


async def _all_offsets(ctx: RequestContext, group_id: str):
    coordinator = coordinator_of(ctx.broker)
    error = coordinator.error_for(group_id)
    if error is not ErrorCode.NONE:
        return GroupAnswer(group_id=group_id, error_code=error, error_message=error.message)
    share_groups = coordinator.share_groups
    initialized = share_groups.initialized_partitions(group_id) if share_groups is not None else {}
    topics = [(topic, sorted(partitions)) for topic_id, partitions in initialized.items()
              if (topic := ctx.broker.topic_by_id(topic_id)) is not None]
    readable = ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, [topic.name for topic, _ in topics])
    described = [await _described(ctx, group_id, topic, partitions)
                 for topic, partitions in sorted(topics, key=lambda pair: pair[0].name) if topic.name in readable]
    return GroupAnswer(group_id=group_id, topics=described)


async def _offsets(ctx: RequestContext, group_id: str, requested):
    readable = ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, [t.topic_name for t in requested])
    unknown, described, denied = [], [], []
    topics = ctx.broker.topics()
    for wanted in requested:
        if wanted.topic_name not in readable:
            denied.append(TopicAnswer(topic_name=wanted.topic_name, topic_id=ZERO_UUID, partitions=[
                PartitionAnswer(partition_index=index, start_offset=-1,
                                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                error_message=ErrorCode.TOPIC_AUTHORIZATION_FAILED.message)
                for index in wanted.partitions]))
        elif wanted.topic_name not in topics:
            unknown.append(TopicAnswer(topic_name=wanted.topic_name, topic_id=ZERO_UUID, partitions=[
                PartitionAnswer(partition_index=index, start_offset=-1) for index in wanted.partitions]))
        else:
            described.append(await _described(ctx, group_id, topics[wanted.topic_name], list(wanted.partitions)))
    return GroupAnswer(group_id=group_id, topics=unknown + described + denied)


async def _described(ctx: RequestContext, group_id: str, topic, partitions: list[int]):
    offsets = await read_share_offsets(ctx.broker, group_id, topic, partitions)
    return TopicAnswer(topic_name=topic.name, topic_id=topic.topic_id, partitions=[
        PartitionAnswer(partition_index=index, start_offset=offsets[index].start_offset,
                        leader_epoch=offsets[index].leader_epoch, lag=offsets[index].lag)
        for index in partitions])
