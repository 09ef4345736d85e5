"""DeleteRecords (API key 21), versions 0-2: move partitions' log start offsets up, deleting the records below.

Behaviour, as Kafka's:
- Authorization first: each topic needs DELETE, else its partitions answer TOPIC_AUTHORIZATION_FAILED (before
  the topic's existence is looked at) and nothing of it is deleted.
- Per partition: the offset -1 means the high watermark; an offset above the high watermark (or another negative
  one) answers OFFSET_OUT_OF_RANGE, a topic whose `cleanup.policy` lacks `delete` POLICY_VIOLATION, an internal
  topic INVALID_TOPIC_EXCEPTION, an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION, a node other than the
  partition's leader NOT_LEADER_OR_FOLLOWER. Failed partitions answer low watermark -1.
- Otherwise the leader's log start offset moves up (never down), the segments wholly below it go, and the new log
  start offset is checkpointed before the answer (`LogManager.delete_records`), so deleted records stay deleted
  after a crash.
- The answer's low watermark is the smallest log start offset of the partition's replicas on live nodes (Kafka's
  lowWatermarkIfLeader). A partition with followers answers once they have all moved their log start offset up
  too (replication copies the leader's, as a Kafka follower takes it from its fetch responses), or when the
  request's `timeout_ms` runs out: then REQUEST_TIMED_OUT with the low watermark of the leader's deletion, as
  Kafka's DelayedDeleteRecords answers. The followers' progress is checked when one of them copies and at least
  every `replica.fetch.wait.max.ms` (an idle Kafka follower fetches that often).
- A partition listed twice is answered once, with its last offset (Kafka keys the request by partition); a topic
  listed twice is answered as one.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import topic_names
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import DeleteRecordsResponse
from ..security.acls.types import AclOperation, ResourceType
from ..storage import StorageError
from .partition_leadership import replica_error

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 21
MIN_VERSION = 0
MAX_VERSION = 2

HIGH_WATERMARK = -1
INVALID_LOW_WATERMARK = -1
TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionResult = DeleteRecordsResponse.DeleteRecordsPartitionResult
log = logging.getLogger(__name__)


@dataclass
class _Pending:
    """A partition deleted on the leader whose followers have yet to follow."""
    topic: str
    result: object  # its PartitionResult, completed in place
    required_offset: int


async def handle(ctx: RequestContext, request) -> DeleteRecordsResponse:
    wanted: dict[str, dict[int, int]] = {}  # topic -> partition -> offset, in request order
    for topic in request.topics:
        offsets = wanted.setdefault(topic.name, {})
        for partition in topic.partitions:
            offsets[partition.partition_index] = partition.offset
    broker = ctx.broker
    allowed = ctx.filter_authorized(AclOperation.DELETE, ResourceType.TOPIC, wanted)
    now_ms = broker.now_ms()
    pending: list[_Pending] = []
    topics = [TopicResult(name=name, partitions=[
                  _delete(broker, name, index, offset, now_ms, pending) if name in allowed
                  else _failed(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                  for index, offset in offsets.items()])
              for name, offsets in wanted.items()]
    if pending:
        await _wait_for_followers(broker, pending, request.timeout_ms / 1000)
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)


def _delete(broker, topic: str, partition: int, offset: int, now_ms: int, pending: list[_Pending]):
    if not broker.has_partition(topic, partition):
        return _failed(partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if topic_names.is_internal(topic):
        return _failed(partition, ErrorCode.INVALID_TOPIC_EXCEPTION)
    problem = replica_error(broker, topic, partition, None, require_leader=True)
    if problem is not None:
        return _failed(partition, problem)
    leader_log = broker.get_log(topic, partition)
    required_offset = leader_log.high_watermark if offset == HIGH_WATERMARK else offset
    try:
        broker.logs.delete_records(topic, partition, offset, now_ms=now_ms)
    except StorageError as exc:
        return _failed(partition, ErrorCode.for_code(exc.error_code))
    except OSError as exc:
        log.warning("deleting records of %s-%d below %d failed: %s", topic, partition, offset, exc)
        return _failed(partition, ErrorCode.KAFKA_STORAGE_ERROR)
    result = PartitionResult(partition_index=partition, low_watermark=low_watermark(broker, topic, partition),
                             error_code=ErrorCode.NONE)
    if result.low_watermark < required_offset:
        broker.cluster.replication.on_leader_append(topic, partition)  # the followers copy the new start
        pending.append(_Pending(topic, result, required_offset))
    return result


def low_watermark(broker, topic: str, partition: int) -> int:
    """The smallest log start offset of the partition's replicas on live nodes (the leader's among them)."""
    state = broker.partition_state(topic, partition)
    lowest = broker.get_log(topic, partition).log_start_offset
    for node_id in state.replicas:
        if node_id != broker.node_id and broker.metadata.is_alive(node_id):
            replica = broker.cluster.nodes[node_id].get_log(topic, partition)
            if replica is not None:
                lowest = min(lowest, replica.log_start_offset)
    return lowest


async def _wait_for_followers(broker, pending: list[_Pending], timeout_s: float) -> None:
    """Kafka's DelayedDeleteRecords: until every pending partition's low watermark reaches its offset (NONE), it
    loses its leader (that error), or the time is up (REQUEST_TIMED_OUT, with the low watermark found at first)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(timeout_s, 0.0)
    recheck_s = broker.config.replica_fetch_wait_max_ms / 1000
    while pending:
        pending = [entry for entry in pending if not _settled(broker, entry)]
        remaining = deadline - loop.time()
        if not pending or remaining <= 0:
            break
        await _any_follower_copies(broker, pending, min(remaining, recheck_s))
    for entry in pending:
        entry.result.error_code = ErrorCode.REQUEST_TIMED_OUT


def _settled(broker, entry: _Pending) -> bool:
    index = entry.result.partition_index
    problem = replica_error(broker, entry.topic, index, None, require_leader=True)
    if problem is not None:
        entry.result.error_code, entry.result.low_watermark = problem, INVALID_LOW_WATERMARK
        return True
    current = low_watermark(broker, entry.topic, index)
    if current < entry.required_offset:
        return False
    entry.result.low_watermark = current
    return True


async def _any_follower_copies(broker, pending: list[_Pending], timeout_s: float) -> None:
    """Return when a follower of a pending partition is appended to (or its high watermark moves), or after
    `timeout_s`."""
    waits = {}
    for entry in pending:
        state = broker.partition_state(entry.topic, entry.result.partition_index)
        for node_id in state.replicas if state is not None else ():
            if node_id != broker.node_id:
                waits.setdefault(node_id, []).append((entry.topic, entry.result.partition_index))
    tasks = [asyncio.ensure_future(broker.cluster.nodes[node_id].wait_for_append(partitions, timeout_s))
             for node_id, partitions in waits.items() if node_id in broker.cluster.nodes]
    if not tasks:
        return
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _failed(partition: int, code: ErrorCode):
    return PartitionResult(partition_index=partition, low_watermark=INVALID_LOW_WATERMARK, error_code=code)
