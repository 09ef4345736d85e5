"""AlterShareGroupOffsets (API key 91), version 0: set the share-partition start offset of partitions for an
Empty share group (the admin client's `alterShareGroupOffsets`, `kafka-share-groups.sh --reset-offsets`).

As Kafka 4.2's KafkaApis and group coordinator answer:
- READ on the group, else GROUP_AUTHORIZATION_FAILED alone;
- per topic: READ on it, else TOPIC_AUTHORIZATION_FAILED for each of its partitions; a topic the cluster does not
  have: UNKNOWN_TOPIC_OR_PARTITION for each (both with the topic's id when it has one, else the zero id);
- group-level errors, answered alone: INVALID_GROUP_ID (empty id), NOT_COORDINATOR /
  COORDINATOR_LOAD_IN_PROGRESS, GROUP_ID_NOT_FOUND (no such group, or not a share group), NON_EMPTY_GROUP (the
  group has members: offsets of a group in use are not altered);
- per partition of the remaining topics: UNKNOWN_TOPIC_OR_PARTITION beyond the topic's partitions, else the start
  offset is set (the partition's share state restarts there: nothing in flight) and the topic counts as
  initialized for the group; a failure of the share state is that partition's error.
"""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from ..coordinator import coordinator_of
from ..coordinator.share_group import alter_share_offsets
from ..coordinator.share_group.model import InitializedTopic
from ..coordinator.offsets import OffsetWriteError
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import AlterShareGroupOffsetsResponse
from ..security.acls.types import AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 91
MIN_VERSION = 0
MAX_VERSION = 0

Response = AlterShareGroupOffsetsResponse
TopicAnswer = Response.AlterShareGroupOffsetsResponseTopic
PartitionAnswer = Response.AlterShareGroupOffsetsResponsePartition

ZERO_UUID = uuid.UUID(int=0)


async def handle(ctx: RequestContext, request) -> AlterShareGroupOffsetsResponse:
    group_id = request.group_id
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return _refused(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    topics = ctx.broker.topics()
    readable = ctx.filter_authorized(AclOperation.READ, ResourceType.TOPIC, [t.topic_name for t in request.topics])
    answers, wanted = [], []
    for topic in request.topics:
        error = (ErrorCode.TOPIC_AUTHORIZATION_FAILED if topic.topic_name not in readable
                 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if topic.topic_name not in topics else None)
        if error is None:
            wanted.append(topic)
            continue
        known = topics.get(topic.topic_name)
        answers.append(TopicAnswer(topic_name=topic.topic_name, topic_id=known.topic_id if known else ZERO_UUID,
                                   partitions=[PartitionAnswer(partition_index=p.partition_index, error_code=error,
                                                               error_message=error.message)
                                               for p in topic.partitions]))
    coordinator = coordinator_of(ctx.broker)
    group, error, message = coordinator.share_groups.empty_group(group_id)
    if group is None:
        return _refused(error, message)
    try:
        answers += await _alter(ctx, coordinator, group, [(topics[t.topic_name], t) for t in wanted])
    except OffsetWriteError as exc:
        return _refused(exc.error_code)
    return Response(responses=answers)


async def _alter(ctx: RequestContext, coordinator, group, topics: list) -> list:
    answers, initialized = [], dict(group.initialized_topics)
    for topic, wanted in topics:
        offsets = {p.partition_index: p.start_offset for p in wanted.partitions
                   if 0 <= p.partition_index < topic.partitions}
        errors = await alter_share_offsets(ctx.broker, group.group_id, topic, offsets) if offsets else {}
        done = frozenset(partition for partition, error in errors.items() if error is ErrorCode.NONE)
        if done:
            known = initialized.get(topic.topic_id)
            earlier = known.partitions if known else frozenset()
            initialized[topic.topic_id] = InitializedTopic(topic.name, done | earlier)
        answers.append(TopicAnswer(topic_name=topic.name, topic_id=topic.topic_id, partitions=[
            _partition_answer(p.partition_index, errors.get(p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            for p in wanted.partitions]))
    if initialized != group.initialized_topics:
        deleting = {topic_id: name for topic_id, name in group.deleting_topics.items() if topic_id not in initialized}
        await coordinator.share_groups.record_state(group, initialized, deleting)
    return answers


def _partition_answer(index: int, error: ErrorCode):
    return PartitionAnswer(partition_index=index, error_code=error,
                           error_message=None if error is ErrorCode.NONE else error.message)


def _refused(error: ErrorCode, message: str | None = None) -> AlterShareGroupOffsetsResponse:
    return Response(error_code=error, error_message=message or error.message)
