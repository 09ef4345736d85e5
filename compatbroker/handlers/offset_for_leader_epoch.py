"""OffsetForLeaderEpoch (API key 23), versions 0-4: where a leader epoch ends in a partition's log.

Consumers (KIP-320, v3+ with replica id -1) send it to validate a position that carries a leader epoch: after
Metadata shows a new leader or leader epoch, and when they resume from a committed offset (committed with the
epoch of the last record read). They name that epoch and learn where it ends in the leader's log; an end offset
below their position means the log was truncated under them (the Java client then raises LogTruncationException,
or with a reset policy goes on from that end offset).

Behaviour, as Kafka's leader answers:
- The answer is the largest epoch at or below the asked one and the offset where it ends: the start offset of the
  next epoch in the leader epoch cache, or the log end offset for the latest epoch. An epoch older than every
  cached one answers the asked epoch with the start offset of the first cached epoch (the older records are gone);
  an epoch newer than every cached one, or -1, answers epoch -1 and end offset -1 without an error.
- Kafka writes the current leader epoch into the cache when a partition gets its leader, even before anything is
  appended. Our storage records an epoch with the first batch it appends, so a partition whose cache lags behind
  the broker's current epoch answers as if that epoch started at its log end offset.
- Only the leader answers, from its own leader epoch cache (followers and consumers alike ask it): a node that is
  no replica of the partition, or a follower, answers NOT_LEADER_OR_FOLLOWER. `current_leader_epoch` (v2+) other
  than -1 is checked first: older than the partition's FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH. An unknown
  topic or partition answers UNKNOWN_TOPIC_OR_PARTITION. Errors carry epoch -1 and end offset -1.
- Authorization: CLUSTER_ACTION on the cluster (brokers) allows every topic; otherwise each topic needs DESCRIBE
  (consumers, KIP-320), else its partitions answer TOPIC_AUTHORIZATION_FAILED with epoch -1 and end offset -1.
- `replica_id` (v3+) does not change the answer: a follower and a consumer are told the same, as on Kafka.
- Topics are answered in request order, a topic named twice twice (Kafka's request collection keeps both).
  Version 0 answers carry no epoch (the field starts at version 1).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import OffsetForLeaderEpochResponse
from ..security.acls.types import CLUSTER_NAME, AclOperation, ResourceType
from .partition_leadership import replica_error

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 23
MIN_VERSION = 0
MAX_VERSION = 4

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1

TopicResult = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochEndOffset = OffsetForLeaderEpochResponse.EpochEndOffset


async def handle(ctx: RequestContext, request) -> OffsetForLeaderEpochResponse:
    allowed = _describable(ctx, request.topics)
    topics = [TopicResult(topic=topic.topic, partitions=[
                  _answer(ctx.broker, topic.topic, partition) if topic.topic in allowed
                  else _error(partition.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                  for partition in topic.partitions])
              for topic in request.topics]
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)


def _describable(ctx: RequestContext, topics) -> set[str]:
    """The topics the principal may ask about: all with CLUSTER_ACTION (not logged when refused, as Kafka),
    else those it may DESCRIBE."""
    names = [topic.topic for topic in topics]
    if ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=False):
        return set(names)
    return ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, names)


def _answer(broker, topic: str, partition) -> EpochEndOffset:
    index = partition.partition
    asserted = None if partition.current_leader_epoch == UNDEFINED_EPOCH else partition.current_leader_epoch
    problem = replica_error(broker, topic, index, asserted, require_leader=True)  # only -1 means "not asserted"
    if problem is not None:
        return _error(index, problem)
    log = broker.get_log(topic, index)
    current_epoch = broker.leader_epoch(topic, index)
    epochs = _with_current_epoch(log.epochs.entries, current_epoch, log.log_end_offset)
    epoch, end_offset = end_offset_for(epochs, partition.leader_epoch, log.log_end_offset)
    return EpochEndOffset(partition=index, error_code=ErrorCode.NONE, leader_epoch=epoch, end_offset=end_offset)


def _with_current_epoch(entries: list[tuple[int, int]], current_epoch: int,
                        log_end_offset: int) -> list[tuple[int, int]]:
    """The cache as Kafka's leader would hold it: its current epoch is there from the moment it leads."""
    if current_epoch >= 0 and (not entries or entries[-1][0] < current_epoch):
        return entries + [(current_epoch, log_end_offset)]
    return entries


def end_offset_for(entries: list[tuple[int, int]], epoch: int, log_end_offset: int) -> tuple[int, int]:
    """(epoch, end offset) answering `epoch` over the (epoch, start offset) entries of a leader epoch cache."""
    if epoch == UNDEFINED_EPOCH or not entries or epoch > entries[-1][0]:
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    if epoch == entries[-1][0]:
        return epoch, log_end_offset
    later = next(i for i, (entry_epoch, _) in enumerate(entries) if entry_epoch > epoch)
    if later == 0:  # older than anything cached: those records were deleted; the log goes on from there
        return epoch, entries[0][1]
    return entries[later - 1][0], entries[later][1]


def _error(index: int, code: ErrorCode) -> EpochEndOffset:
    return EpochEndOffset(partition=index, error_code=code, leader_epoch=UNDEFINED_EPOCH, end_offset=UNDEFINED_OFFSET)
