"""OffsetFetch (API key 9), versions 0-10: a group's committed offsets.

Behaviour, as Kafka 4.3's:
- v0-7 ask for one group; v8+ for a batch of groups, each answered on its own. Topics are named (v0-9) or given
  by id (v10); a null topic list (v2+) asks for every partition the group has an offset for.
- A partition without a committed offset answers offset -1, leader epoch -1 and metadata "" without an error,
  whether or not the group or topic exists; the committed leader epoch is answered from v5. Asking for all
  partitions of a group without offsets answers no topics. v10: an unknown topic id answers UNKNOWN_TOPIC_ID for
  its partitions, and "all partitions" leaves out topics that no longer exist.
- `require_stable` (v7+): a partition with a transactional commit still pending (from its TxnOffsetCommit's append
  until its transaction's marker, and across restarts) answers UNSTABLE_OFFSET_COMMIT (retriable) instead of an
  offset that may change; without it the last committed offset is answered. Asking for all partitions looks only
  at partitions with a visible offset, as Kafka does.
- While `__consumer_offsets` loads, the group answers COORDINATOR_LOAD_IN_PROGRESS (NOT_COORDINATOR when another
  node coordinates it): as the top-level error in v2-7, as the group's error in v8+, and on every requested
  partition in v0-1, which have no top-level error.
- Authorization, as Kafka's: DESCRIBE on each group, else the group answers GROUP_AUTHORIZATION_FAILED alone (as
  its error in v8+, the top-level error in v2-7; in v0-1 on every requested partition, as group errors are here).
  A named topic the principal
  may not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED (offset -1) on its partitions, its offsets not read; "all
  partitions" leaves such topics out. A v10 topic id that names no topic answers UNKNOWN_TOPIC_ID (nothing to
  authorize).
- `member_id` and `member_epoch` (v9+) are checked against a KIP-848 consumer group, as Kafka's
  ConsumerGroup.validateOffsetFetch: a null member id with epoch -1 (admin clients, older versions) is accepted;
  otherwise an unknown member answers UNKNOWN_MEMBER_ID and another epoch STALE_MEMBER_EPOCH (ILLEGAL_GENERATION
  for a member speaking the classic protocol), as the group's error. They are ignored for classic groups.
- A share group has no committed offsets: it is answered as a group without offsets (offset -1 on each partition
  asked for, no topics for "all partitions"), as Kafka answers the "not a consumer group" it finds.

Deviations: v0 answers UNKNOWN_TOPIC_OR_PARTITION for a partition the broker does not have, as Kafka did when v0
read ZooKeeper (Kafka 4 no longer serves v0); offsets come from `__consumer_offsets` for every version. Topics
answered for "all partitions" are sorted by name, partitions by index (Kafka: hash-map order). Denied topics keep
their place in the request's order (Kafka answers them after the others). A v1 request denied its group gets the
error on every partition asked for, as v0 does (Kafka 4, whose v1 has nowhere to put a group error, answers no
partitions at all).
"""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, NamedTuple

from ..coordinator import coordinator_of
from ..coordinator.consumer_group.model import GROUP_TYPE as CONSUMER_GROUP_TYPE
from ..coordinator.offsets import NO_LEADER_EPOCH, NO_OFFSET
from ..coordinator.share_group.model import GROUP_TYPE as SHARE_GROUP_TYPE
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import OffsetFetchResponse
from ..protocol.wire import ZERO_UUID
from ..security.acls.types import AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 9
MIN_VERSION = 0
MAX_VERSION = 10

NO_METADATA = ""


class _Partition(NamedTuple):
    index: int
    offset: int = NO_OFFSET
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = NO_METADATA
    error: ErrorCode = ErrorCode.NONE


class _Topic(NamedTuple):
    name: str
    topic_id: uuid.UUID
    partitions: list[_Partition]


class _Wanted(NamedTuple):
    """One requested topic: its name (None when its id is unknown), its id and the partitions asked for."""

    name: str | None
    topic_id: uuid.UUID
    partitions: list[int]


async def handle(ctx: RequestContext, request) -> OffsetFetchResponse:
    version = ctx.api_version
    store = coordinator_of(ctx.broker).offsets
    require_stable = request.require_stable if version >= 7 else False
    if version >= 8:
        groups = [_fetch_group(ctx, store, group.group_id, _wanted(ctx.broker, group.topics, version),
                               require_stable, _Requester(group.member_id, group.member_epoch))
                  for group in request.groups]
        return OffsetFetchResponse(throttle_time_ms=0, groups=[
            OffsetFetchResponse.OffsetFetchResponseGroup(group_id=group.group_id, error_code=error,
                                                         topics=[_topic_v8(topic) for topic in topics])
            for group, (error, topics) in zip(request.groups, groups, strict=True)])
    wanted = _wanted(ctx.broker, request.topics, version)
    error, topics = _fetch_group(ctx, store, request.group_id, wanted, require_stable, _ADMIN)
    if version < 2 and error != ErrorCode.NONE:  # no top-level error field: every partition carries it
        topics = [_Topic(topic.name, topic.topic_id, [_Partition(index, error=error) for index in topic.partitions])
                  for topic in wanted]
    return OffsetFetchResponse(throttle_time_ms=0, error_code=error, topics=[_topic_v0(topic) for topic in topics])


def _wanted(broker, topics, version: int) -> list[_Wanted] | None:
    if topics is None:
        return None
    if version < 10:
        return [_Wanted(topic.name, ZERO_UUID, list(topic.partition_indexes)) for topic in topics]
    wanted = []
    for topic in topics:
        info = broker.topic_by_id(topic.topic_id)
        wanted.append(_Wanted(info.name if info else None, topic.topic_id, list(topic.partition_indexes)))
    return wanted


class _Requester(NamedTuple):
    """Who asks (v9+): a consumer group's member, or nobody in particular (null id, epoch -1)."""

    member_id: str | None
    member_epoch: int


_ADMIN = _Requester(None, -1)


def _fetch_group(ctx: RequestContext, store, group_id: str, wanted: list[_Wanted] | None,
                 require_stable: bool, requester: _Requester) -> tuple[ErrorCode, list[_Topic]]:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    error = store.error_for(group_id)
    if error is not ErrorCode.NONE:
        return error, []
    coordinator = coordinator_of(ctx.broker)
    group_type = coordinator.group_type(group_id)
    if group_type == CONSUMER_GROUP_TYPE:
        error = ErrorCode(coordinator.consumer_groups.validate_offset_fetch(
            coordinator.group(group_id), requester.member_id, requester.member_epoch))
        if error is not ErrorCode.NONE:
            return error, []
    no_offsets = group_type == SHARE_GROUP_TYPE  # Kafka: "not a consumer group", every offset unknown
    if wanted is None:
        return ErrorCode.NONE, [] if no_offsets else _all_partitions(ctx, store, group_id, require_stable)
    describable = ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                        [topic.name for topic in wanted if topic.name is not None])
    topics = []
    for topic in wanted:
        if topic.name is None:
            partitions = [_Partition(index, error=ErrorCode.UNKNOWN_TOPIC_ID) for index in topic.partitions]
        elif topic.name not in describable:
            partitions = [_Partition(index, error=ErrorCode.TOPIC_AUTHORIZATION_FAILED) for index in topic.partitions]
        elif no_offsets:
            partitions = [_Partition(index) for index in topic.partitions]
        else:
            partitions = [_partition(ctx, store, group_id, topic.name, index, require_stable)
                          for index in topic.partitions]
        topics.append(_Topic(topic.name or "", topic.topic_id, partitions))
    return ErrorCode.NONE, topics


def _partition(ctx: RequestContext, store, group_id: str, topic: str, index: int, require_stable: bool):
    if require_stable and store.has_unstable_offset(group_id, topic, index):
        return _Partition(index, error=ErrorCode.UNSTABLE_OFFSET_COMMIT)
    committed = store.fetch(group_id, [(topic, index)]).get((topic, index))
    if committed is not None:
        return _Partition(index, committed.offset, committed.leader_epoch, committed.metadata)
    if ctx.api_version == 0 and not ctx.broker.has_partition(topic, index):
        return _Partition(index, error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return _Partition(index)


def _all_partitions(ctx: RequestContext, store, group_id: str, require_stable: bool) -> list[_Topic]:
    by_topic: dict[str, list[_Partition]] = {}
    for (topic, index), committed in sorted(store.fetch(group_id).items()):
        if require_stable and store.has_unstable_offset(group_id, topic, index):
            answer = _Partition(index, error=ErrorCode.UNSTABLE_OFFSET_COMMIT)
        else:
            answer = _Partition(index, committed.offset, committed.leader_epoch, committed.metadata)
        by_topic.setdefault(topic, []).append(answer)
    describable = ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, by_topic)
    topics = []
    for name, partitions in by_topic.items():
        if name not in describable:  # the principal may not even learn that the group reads it
            continue
        info = ctx.broker.topic(name)
        if ctx.api_version >= 10 and info is None:
            continue  # named by id from v10: a topic that no longer exists cannot be named
        topics.append(_Topic(name, info.topic_id if info else ZERO_UUID, partitions))
    return topics


def _topic_v0(topic: _Topic):
    return OffsetFetchResponse.OffsetFetchResponseTopic(name=topic.name, partitions=[
        OffsetFetchResponse.OffsetFetchResponsePartition(
            partition_index=p.index, committed_offset=p.offset, committed_leader_epoch=p.leader_epoch,
            metadata=p.metadata, error_code=p.error) for p in topic.partitions])


def _topic_v8(topic: _Topic):
    return OffsetFetchResponse.OffsetFetchResponseTopics(name=topic.name, topic_id=topic.topic_id, partitions=[
        OffsetFetchResponse.OffsetFetchResponsePartitions(
            partition_index=p.index, committed_offset=p.offset, committed_leader_epoch=p.leader_epoch,
            metadata=p.metadata, error_code=p.error) for p in topic.partitions])
