"""OffsetCommit (API key 8), versions 0-10: store a group's consumed positions in `__consumer_offsets`.

Behaviour, as Kafka 4.3's:
- Authorization comes first: READ on the group, else every partition answers GROUP_AUTHORIZATION_FAILED and
  nothing is looked at; then READ on each named topic, else its partitions answer TOPIC_AUTHORIZATION_FAILED (before
  the check that the topic exists, so that a denied principal cannot tell). A v10 topic id that names no topic
  answers UNKNOWN_TOPIC_ID: there is no name to authorize.
- Topics are named (v0-9) or given by id (v10). An unknown topic answers UNKNOWN_TOPIC_OR_PARTITION (v10: an
  unknown id answers UNKNOWN_TOPIC_ID), and so does a partition the topic does not have; the rest of the request
  goes on. When nothing is left, the group is not even looked at.
- The group check (the coordinator's `validate_offset_commit`): a commit with generation -1 and no member id
  (v0, and assign() consumers and admin tools later) is accepted while the group does not exist or is Empty;
  members must give their member id and the current generation (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
  FENCED_INSTANCE_ID for a static member replaced by another, REBALANCE_IN_PROGRESS while the group awaits its
  assignment). A generation >= 0 for a group that does not exist answers GROUP_ID_NOT_FOUND from v9 and
  ILLEGAL_GENERATION before. While `__consumer_offsets` loads: COORDINATOR_LOAD_IN_PROGRESS. A group error is
  answered for every partition that passed the topic checks.
- A KIP-848 consumer group checks the member id and member epoch instead (Kafka 4.2's
  ConsumerGroup.validateOffsetCommit, in its manager): epoch -1 is accepted while the group has no members; an
  unknown member answers UNKNOWN_MEMBER_ID; a member of the consumer protocol must commit with v9+
  (UNSUPPORTED_VERSION before); an epoch other than the member's answers STALE_MEMBER_EPOCH (ILLEGAL_GENERATION for
  a member speaking the classic protocol). A share group answers GROUP_ID_NOT_FOUND (it is not a consumer group).
- A metadata string longer than `offset.metadata.max.bytes` (4096, counted in UTF-16 units as Java does) answers
  OFFSET_METADATA_TOO_LARGE for its partition; the others are stored. A null metadata is stored as "".
- Stored per partition: the offset, the leader epoch (v6+, else -1), the metadata, the commit time (v1: the
  request's `commit_timestamp` unless -1; otherwise the broker's clock), an expire time for v2-4 requests with
  `retention_time_ms` other than -1 (now + retention, Kafka's old per-commit retention, in Java's wrapping long
  arithmetic as Kafka's coordinator computes it: a retention near Long.MAX_VALUE wraps to a time in the past, and
  the offset expires at the next retention check, as in Kafka), and the topic id.
- The answer comes once the commit is durable under the flush policy (see `coordinator.offsets`); a failed
  write answers Kafka's translation of the storage error (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
  UNKNOWN_SERVER_ERROR) for every partition written.

Deviations: Kafka 4 no longer serves v0-1 (KIP-896) and older Kafka kept v0 commits in ZooKeeper; here they go to
`__consumer_offsets` like the others. Partitions are answered in the request's order.
"""
from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, NamedTuple

from ..coordinator import coordinator_of
from ..coordinator.offsets import NO_TIMESTAMP, CommittedOffset, OffsetWriteError
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import OffsetCommitResponse
from ..protocol.wire import ZERO_UUID
from ..security.acls.types import AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 8
MIN_VERSION = 0
MAX_VERSION = 10

NO_RETENTION = -1

TopicResponse = OffsetCommitResponse.OffsetCommitResponseTopic
PartitionResponse = OffsetCommitResponse.OffsetCommitResponsePartition


class Wanted(NamedTuple):
    """A partition that passed the topic checks: where its answer goes, and what to store."""

    topic_index: int
    partition_index: int
    partition: object  # the request's partition
    name: str
    topic_id: uuid.UUID


async def handle(ctx: RequestContext, request) -> OffsetCommitResponse:
    version = ctx.api_version
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _response(request, [[ErrorCode.GROUP_AUTHORIZATION_FAILED] * len(topic.partitions)
                                   for topic in request.topics])
    answers = [[ErrorCode.NONE] * len(topic.partitions) for topic in request.topics]
    resolved = [_resolve_topic(ctx.broker, topic, version) for topic in request.topics]
    readable = ctx.filter_authorized(AclOperation.READ, ResourceType.TOPIC,
                                     [name for name, _, _ in resolved if name is not None])
    wanted = []
    for t, (topic, (name, topic_id, error)) in enumerate(zip(request.topics, resolved, strict=True)):
        if name is not None and name not in readable:
            error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        for p, partition in enumerate(topic.partitions):
            if error is not None:
                answers[t][p] = error
            elif not ctx.broker.has_partition(name, partition.partition_index):
                answers[t][p] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                wanted.append(Wanted(t, p, partition, name, topic_id))
    if wanted:
        for item, error in zip(wanted, await _commit(ctx, request, wanted), strict=True):
            answers[item.topic_index][item.partition_index] = error
    return _response(request, answers)


def _response(request, answers: list[list[ErrorCode]]) -> OffsetCommitResponse:
    """The answer of each partition, in the request's order."""
    return OffsetCommitResponse(throttle_time_ms=0, topics=[
        TopicResponse(name=topic.name, topic_id=topic.topic_id,
                      partitions=[PartitionResponse(partition_index=partition.partition_index, error_code=error)
                                  for partition, error in zip(topic.partitions, answers[t], strict=True)])
        for t, topic in enumerate(request.topics)])


def _resolve_topic(broker, topic, version: int) -> tuple[str | None, uuid.UUID, ErrorCode | None]:
    """(name, topic id, error): by name before v10, by id from v10."""
    if version >= 10:
        info = broker.topic_by_id(topic.topic_id)
        return (None, topic.topic_id, ErrorCode.UNKNOWN_TOPIC_ID) if info is None else (info.name, info.topic_id, None)
    info = broker.topic(topic.name)
    if info is None:
        return topic.name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return info.name, info.topic_id, None


async def _commit(ctx: RequestContext, request, wanted: list[Wanted]) -> list[ErrorCode]:
    """Check the group, then store what passes; returns the answer of each of `wanted`."""
    version = ctx.api_version
    coordinator = coordinator_of(ctx.broker)
    store = coordinator.offsets
    error = ErrorCode(coordinator.validate_offset_commit(
        request.group_id, request.generation_id_or_member_epoch, request.member_id, request.group_instance_id,
        api_version=version))
    if error != ErrorCode.NONE:
        return [error] * len(wanted)
    now_ms = ctx.broker.now_ms()
    expire_ms = _java_long(now_ms + request.retention_time_ms) \
        if 2 <= version <= 4 and request.retention_time_ms != NO_RETENTION else NO_TIMESTAMP

    def committed(item: Wanted, metadata: str) -> CommittedOffset:
        partition = item.partition
        return CommittedOffset(
            item.name, partition.partition_index, partition.committed_offset,
            leader_epoch=partition.committed_leader_epoch if version >= 6 else -1, metadata=metadata,
            commit_timestamp_ms=partition.commit_timestamp if version == 1 else NO_TIMESTAMP,
            expire_timestamp_ms=expire_ms, topic_id=item.topic_id)

    return await store_offsets(store, wanted, committed,
                               lambda offsets: store.commit(request.group_id, offsets))


async def store_offsets(store, wanted: list[Wanted], committed: Callable[[Wanted, str], CommittedOffset],
                        write: Callable[[list[CommittedOffset]], Awaitable[None]]) -> list[ErrorCode]:
    """The answer of each of `wanted`: OFFSET_METADATA_TOO_LARGE where its metadata (null stored as "") is over
    `offset.metadata.max.bytes`; for the others, stored with one `write` of their `committed(item, metadata)`,
    NONE or the write's error (OffsetCommit and TxnOffsetCommit alike)."""
    answers, offsets, stored = [], [], []
    for position, item in enumerate(wanted):
        metadata = item.partition.committed_metadata or ""
        if java_length(metadata) > store.config.metadata_max_bytes:
            answers.append(ErrorCode.OFFSET_METADATA_TOO_LARGE)
            continue
        answers.append(ErrorCode.NONE)
        stored.append(position)
        offsets.append(committed(item, metadata))
    try:
        await write(offsets)
    except OffsetWriteError as exc:
        for position in stored:
            answers[position] = exc.error_code
    return answers


def _java_long(value: int) -> int:
    """`value` wrapped to a signed 64-bit integer, as Java's long arithmetic does."""
    return (value + 2**63) % 2**64 - 2**63


def java_length(text: str) -> int:
    """Length of a string as Java counts it (UTF-16 code units)."""
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)
