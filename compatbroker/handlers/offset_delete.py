"""OffsetDelete (API key 47), version 0: remove a group's committed offsets of some partitions (the admin client's
`delete_consumer_group_offsets`).

Behaviour, as Kafka 4.3's:
- Authorization first: DELETE on the group, else GROUP_AUTHORIZATION_FAILED alone and nothing is deleted; then
  READ on each topic, else its partitions answer TOPIC_AUTHORIZATION_FAILED (before the check that the topic
  exists) and keep their offsets.
- Group-level errors answer the error alone, without topics: INVALID_GROUP_ID for an empty group id,
  COORDINATOR_LOAD_IN_PROGRESS while `__consumer_offsets` loads, NOT_COORDINATOR for a group
  another node coordinates, GROUP_ID_NOT_FOUND for a group that neither
  exists nor has offsets or is a share group (which has no committed offsets), NON_EMPTY_GROUP for a classic group
  with members whose protocol type is not `consumer` (Kafka cannot tell what such a group reads), and the
  coordinator's error when the tombstones cannot be written. A KIP-848 consumer group in any state is accepted.
- Otherwise every requested partition is answered: UNKNOWN_TOPIC_OR_PARTITION for a topic or partition the broker
  does not have, GROUP_SUBSCRIBED_TO_TOPIC for a topic that a member of the group subscribes to (its offsets are
  in use), and no error for the rest, whose offsets get tombstones (a partition without an offset needs none).

Deviation: partitions are answered in the request's order.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..coordinator import GroupState, coordinator_of
from ..coordinator.group import CONSUMER_PROTOCOL_TYPE, GROUP_TYPE
from ..coordinator.share_group.model import GROUP_TYPE as SHARE_GROUP_TYPE
from ..coordinator.offsets import OffsetWriteError
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import OffsetDeleteResponse
from ..security.acls.types import AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 47
MIN_VERSION = 0
MAX_VERSION = 0

TopicResponse = OffsetDeleteResponse.OffsetDeleteResponseTopic
PartitionResponse = OffsetDeleteResponse.OffsetDeleteResponsePartition


async def handle(ctx: RequestContext, request) -> OffsetDeleteResponse:
    coordinator = coordinator_of(ctx.broker)
    store = coordinator.offsets
    group_id = request.group_id
    if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, group_id):
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0)
    readable = ctx.filter_authorized(AclOperation.READ, ResourceType.TOPIC, [topic.name for topic in request.topics])
    error = _group_error(coordinator, store, group_id)
    if error != ErrorCode.NONE:
        return OffsetDeleteResponse(error_code=error, throttle_time_ms=0)
    group = coordinator.group(group_id)
    topics, doomed = [], []
    for topic in request.topics:
        subscribed = group is not None and group.is_subscribed(topic.name)
        partitions = []
        for partition in topic.partitions:
            index = partition.partition_index
            answer = (_partition_error(ctx.broker, topic.name, index, subscribed) if topic.name in readable
                      else ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            if answer == ErrorCode.NONE:
                doomed.append((topic.name, index))
            partitions.append(PartitionResponse(partition_index=index, error_code=answer))
        topics.append(TopicResponse(name=topic.name, partitions=partitions))
    try:
        await store.delete_offsets(group_id, doomed)
    except OffsetWriteError as exc:
        return OffsetDeleteResponse(error_code=exc.error_code, throttle_time_ms=0)
    return OffsetDeleteResponse(error_code=ErrorCode.NONE, throttle_time_ms=0, topics=topics)


def _group_error(coordinator, store, group_id: str) -> ErrorCode:
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID
    error = store.error_for(group_id)
    if error is not ErrorCode.NONE:
        return error
    group = coordinator.group(group_id)  # a group with offsets only exists too (as a simple group)
    if group is None or str(group.state) == GroupState.DEAD or group.group_type == SHARE_GROUP_TYPE:
        return ErrorCode.GROUP_ID_NOT_FOUND  # Kafka: "Group X is not a consumer group." for a share group
    if group.group_type != GROUP_TYPE:  # a consumer group: any state, its subscribed topics are refused below
        return ErrorCode.NONE
    if group.state is not GroupState.EMPTY and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return ErrorCode.NON_EMPTY_GROUP
    return ErrorCode.NONE


def _partition_error(broker, topic: str, index: int, subscribed: bool) -> ErrorCode:
    if not broker.has_partition(topic, index):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if subscribed else ErrorCode.NONE
