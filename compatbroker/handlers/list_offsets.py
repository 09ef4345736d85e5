"""ListOffsets (API key 2), versions 0-11: the offset that a timestamp, or a named position, stands for.

Behaviour, as Kafka's:
- Named positions (negative timestamps): -2 earliest (the log start offset), -1 latest (the high watermark for
  read_uncommitted, the last stable offset for read_committed, the log end offset for a replica), -3 the first record
  with the largest timestamp (v7+), -4 the earliest local offset (v8+; with no tiered storage, the log start
  offset), -5 the latest tiered offset (v9+) and -6 the earliest offset pending upload (v11+), both -1 without
  tiered storage. A negative timestamp that is not a position of the request's version answers
  UNSUPPORTED_VERSION.
- Any other timestamp finds the first record whose timestamp is at or after it; none (or one at or past the last
  fetchable offset: under read_committed, the LSO) answers offset -1 and timestamp -1 without an error.
- v1+: a partition named twice answers INVALID_REQUEST for each mention; from v4 the leader epoch of the answer is
  given (the epoch that wrote the record found, the current epoch for "latest", that of the log start for
  "earliest"), and a `current_leader_epoch` other than -1 is checked: older than ours FENCED_LEADER_EPOCH, newer
  UNKNOWN_LEADER_EPOCH.
- v0 answers `old_style_offsets`: Kafka's legacy lookup over segment start offsets and file modification times
  (latest: the log end offset, earliest: the log start offset, a timestamp: the start of the newest segment
  modified at or before it), at most `max_num_offsets` of them, newest first, none above the high watermark for a
  consumer. Timestamps below -2 answer UNSUPPORTED_VERSION.
- Only the leader answers (any replica for replica id -2, Kafka's debugging id): a node that is no replica of the
  partition, or a follower, answers NOT_LEADER_OR_FOLLOWER, after the leader epoch check. An unknown topic or
  partition answers UNKNOWN_TOPIC_OR_PARTITION.
- Just after a leader change, while the new leader's high watermark is below the start offset of its epoch, a
  consumer's "latest", and a timestamp whose record lies at or past the high watermark, answer OFFSET_NOT_AVAILABLE
  (v5+; LEADER_NOT_AVAILABLE before), as Kafka does: the client retries.
- Authorization: each topic needs DESCRIBE, else its partitions answer TOPIC_AUTHORIZATION_FAILED (before any
  other check, so an unknown topic does not show, and a partition named twice is not INVALID_REQUEST).

Deviation: Kafka lists a request's topics in the order of a hash map (refused topics last); we keep the request's
order.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import ListOffsetsResponse
from ..security.acls.types import AclOperation, ResourceType
from .partition_leadership import replica_error

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 2
MIN_VERSION = 0
MAX_VERSION = 11

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6
# The first version in which each named position may be asked for.
_POSITION_SINCE = {EARLIEST: 1, LATEST: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9,
                   EARLIEST_PENDING_UPLOAD: 11}
CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2  # may ask any replica; every other asker is served by the leader only
READ_COMMITTED = 1
NO_TIMESTAMP = -1
UNKNOWN_OFFSET = -1
UNKNOWN_EPOCH = -1

TopicResponse = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionResponse = ListOffsetsResponse.ListOffsetsPartitionResponse


async def handle(ctx: RequestContext, request) -> ListOffsetsResponse:
    allowed = ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                    [topic.name for topic in request.topics])
    if ctx.api_version == 0:
        topics = [_v0_topic(ctx.broker, request, topic) if topic.name in allowed else _refused(topic, 0)
                  for topic in request.topics]
    else:
        named_twice = _named_twice([topic for topic in request.topics if topic.name in allowed])
        topics = [TopicResponse(name=topic.name,
                                partitions=[_lookup(ctx, request, topic.name, partition, named_twice)
                                            for partition in topic.partitions])
                  if topic.name in allowed else _refused(topic, ctx.api_version)
                  for topic in request.topics]
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


def _refused(topic, version: int) -> TopicResponse:
    """A topic the principal may not DESCRIBE: TOPIC_AUTHORIZATION_FAILED for each partition (v0: no offsets)."""
    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    partitions = [PartitionResponse(partition_index=partition.partition_index, error_code=code, old_style_offsets=[])
                  if version == 0 else _error(partition.partition_index, code) for partition in topic.partitions]
    return TopicResponse(name=topic.name, partitions=partitions)


def _named_twice(topics) -> set[tuple[str, int]]:
    seen, twice = set(), set()
    for topic in topics:
        for partition in topic.partitions:
            key = (topic.name, partition.partition_index)
            (twice if key in seen else seen).add(key)
    return twice


def _error(index: int, code: ErrorCode):
    return PartitionResponse(partition_index=index, error_code=code, timestamp=NO_TIMESTAMP, offset=UNKNOWN_OFFSET,
                             leader_epoch=UNKNOWN_EPOCH)


def _lookup(ctx: RequestContext, request, topic: str, partition, named_twice) -> PartitionResponse:
    index, timestamp = partition.partition_index, partition.timestamp
    if (topic, index) in named_twice:
        return _error(index, ErrorCode.INVALID_REQUEST)
    if timestamp < 0 and ctx.api_version < _POSITION_SINCE.get(timestamp, 2**15):
        return _error(index, ErrorCode.UNSUPPORTED_VERSION)
    broker = ctx.broker
    asserted = None if partition.current_leader_epoch == UNKNOWN_EPOCH else partition.current_leader_epoch
    problem = replica_error(broker, topic, index, asserted, require_leader=request.replica_id != DEBUGGING_REPLICA_ID)
    if problem is not None:
        return _error(index, problem)
    log = broker.get_log(topic, index)
    try:
        found_timestamp, offset, epoch = _find(broker, log, timestamp, _last_fetchable_offset(request, log),
                                               _lagging_high_watermark(broker, request, log))
    except _OffsetNotAvailable:
        return _error(index, ErrorCode.OFFSET_NOT_AVAILABLE if ctx.api_version >= 5 else
                      ErrorCode.LEADER_NOT_AVAILABLE)
    return PartitionResponse(partition_index=index, error_code=ErrorCode.NONE, timestamp=found_timestamp,
                             offset=offset, leader_epoch=epoch if ctx.api_version >= 4 else UNKNOWN_EPOCH)


class _OffsetNotAvailable(Exception):
    """The new leader's high watermark has not yet reached the start of its epoch: what lies between is not known
    to be committed, so "latest" cannot be answered yet."""


def _lagging_high_watermark(broker, request, log) -> bool:
    """Kafka's check after a leader change, for consumers: the epoch's start offset (where the leader's log ended
    when it took over) is above its high watermark."""
    if request.replica_id != CONSUMER_REPLICA_ID:
        return False
    entries = log.epochs.entries
    current = broker.leader_epoch(log.topic, log.partition)
    return bool(entries) and entries[-1][0] == current and entries[-1][1] > log.high_watermark


def _last_fetchable_offset(request, log) -> int:
    """Where "latest" is for this asker (Kafka's lastFetchableOffset): consumers stop at the high watermark
    (read_uncommitted) or the last stable offset (read_committed, v2+), replicas at the log end. Timestamp lookups,
    MAX_TIMESTAMP included, find nothing at or past it."""
    if request.replica_id != CONSUMER_REPLICA_ID:
        return log.log_end_offset
    if request.isolation_level == READ_COMMITTED:
        return log.last_stable_offset
    return log.high_watermark


def _find(broker, log, timestamp: int, last_fetchable: int, lagging: bool) -> tuple[int, int, int]:
    """(timestamp, offset, leader epoch) answering `timestamp` (-1s for nothing found); `lagging`: the leader's
    high watermark trails the start of its epoch, and "latest" or a record past it raises _OffsetNotAvailable."""
    if timestamp == LATEST:
        if lagging:
            raise _OffsetNotAvailable
        return NO_TIMESTAMP, last_fetchable, broker.leader_epoch(log.topic, log.partition)
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return NO_TIMESTAMP, log.log_start_offset, _earliest_epoch(log)
    if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        return NO_TIMESTAMP, UNKNOWN_OFFSET, UNKNOWN_EPOCH  # nothing is tiered
    found = log.max_timestamp() if timestamp == MAX_TIMESTAMP else log.offset_for_timestamp(timestamp)
    if found is not None and found.offset >= last_fetchable and lagging:
        raise _OffsetNotAvailable
    if found is None or found.offset >= last_fetchable:
        return NO_TIMESTAMP, UNKNOWN_OFFSET, UNKNOWN_EPOCH
    return found.timestamp, found.offset, epoch_of_offset(log, found.offset)


def _earliest_epoch(log) -> int:
    """The epoch of the log start offset, when the epoch cache reaches back that far."""
    entries = log.epochs.entries
    if entries and entries[0][1] <= log.log_start_offset:
        return entries[0][0]
    return UNKNOWN_EPOCH


def epoch_of_offset(log, offset: int) -> int:
    """The leader epoch that wrote `offset`: the last epoch starting at or before it."""
    epoch = UNKNOWN_EPOCH
    for entry_epoch, start_offset in log.epochs.entries:
        if start_offset > offset:
            break
        epoch = entry_epoch
    return epoch


# --- version 0 ----------------------------------------------------------------------------------------------------

def _v0_topic(broker, request, topic) -> TopicResponse:
    partitions = []
    for partition in topic.partitions:
        index = partition.partition_index
        log = broker.get_log(topic.name, index)
        problem = replica_error(broker, topic.name, index, None,
                                require_leader=request.replica_id != DEBUGGING_REPLICA_ID)
        if partition.timestamp < EARLIEST:
            code, offsets = ErrorCode.UNSUPPORTED_VERSION, []
        elif problem is not None:
            code, offsets = problem, []
        else:
            offsets = _legacy_offsets(broker, log, partition.timestamp, partition.max_num_offsets)
            if request.replica_id == CONSUMER_REPLICA_ID:
                offsets = _cap_at_high_watermark(offsets, log.high_watermark)
            code = ErrorCode.NONE
        partitions.append(PartitionResponse(partition_index=index, error_code=code, old_style_offsets=offsets))
    return TopicResponse(name=topic.name, partitions=partitions)


def _legacy_offsets(broker, log, timestamp: int, max_count: int) -> list[int]:
    """Kafka's pre-0.10 lookup: candidates are each segment's start (its base offset, at least the log start) with
    the segment file's modification time, plus the log end offset "now" when the active segment holds data."""
    segments = log.segments
    candidates = [(max(segment.base_offset, log.log_start_offset), _modified_ms(segment)) for segment in segments]
    if segments[-1].size > 0:
        candidates.append((log.log_end_offset, broker.now_ms()))
    if timestamp == LATEST:
        start = len(candidates) - 1
    elif timestamp == EARLIEST:
        start = 0
    else:
        start = next((i for i in range(len(candidates) - 1, -1, -1) if candidates[i][1] <= timestamp), -1)
    count = max(0, min(max_count, start + 1))
    return sorted((candidates[start - i][0] for i in range(count)), reverse=True)


def _modified_ms(segment) -> int:
    return os.stat(segment.log_path).st_mtime_ns // 1_000_000  # by path: a sealed segment need not be opened


def _cap_at_high_watermark(offsets: list[int], high_watermark: int) -> list[int]:
    """A consumer never learns of offsets above the high watermark: they are replaced by the high watermark."""
    if not any(offset > high_watermark for offset in offsets):
        return offsets
    return [high_watermark] + [offset for offset in offsets if offset <= high_watermark]
