"""DeleteRecords (API key 21), versions 0-2: move partitions' log start offsets up, deleting the records below.

Behaviour, as Kafka's:
- Per partition: the offset -1 means the high watermark; an offset above the high watermark (or another negative
  one) answers OFFSET_OUT_OF_RANGE, a topic whose `cleanup.policy` lacks `delete` POLICY_VIOLATION, an internal
  topic INVALID_TOPIC_EXCEPTION, an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION. Failed partitions
  answer low watermark -1.
- Otherwise the log start offset moves up (never down), the segments wholly below it go, and the new log start
  offset is checkpointed before the answer (`LogManager.delete_records`), so deleted records stay deleted after a
  crash. The answer's low watermark is the new log start offset.
- A partition listed twice is answered once, with its last offset (Kafka keys the request by partition); a topic
  listed twice is answered as one.

Deviation: `timeout_ms` is not used (no replicas to wait for).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .. import topic_names
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import DeleteRecordsResponse
from ..storage import StorageError

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 21
MIN_VERSION = 0
MAX_VERSION = 2

INVALID_LOW_WATERMARK = -1
TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionResult = DeleteRecordsResponse.DeleteRecordsPartitionResult
log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request) -> DeleteRecordsResponse:
    wanted: dict[str, dict[int, int]] = {}  # topic -> partition -> offset, in request order
    for topic in request.topics:
        offsets = wanted.setdefault(topic.name, {})
        for partition in topic.partitions:
            offsets[partition.partition_index] = partition.offset
    now_ms = ctx.broker.now_ms()
    topics = [TopicResult(name=name, partitions=[_delete(ctx.broker, name, index, offset, now_ms)
                                                 for index, offset in offsets.items()])
              for name, offsets in wanted.items()]
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)


def _delete(broker, topic: str, partition: int, offset: int, now_ms: int):
    if broker.get_log(topic, partition) is None:
        return _failed(partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if topic_names.is_internal(topic):
        return _failed(partition, ErrorCode.INVALID_TOPIC_EXCEPTION)
    try:
        low_watermark = broker.logs.delete_records(topic, partition, offset, now_ms=now_ms)
    except StorageError as exc:
        return _failed(partition, ErrorCode.for_code(exc.error_code))
    except OSError as exc:
        log.warning("deleting records of %s-%d below %d failed: %s", topic, partition, offset, exc)
        return _failed(partition, ErrorCode.KAFKA_STORAGE_ERROR)
    return PartitionResult(partition_index=partition, low_watermark=low_watermark, error_code=ErrorCode.NONE)


def _failed(partition: int, code: ErrorCode):
    return PartitionResult(partition_index=partition, low_watermark=INVALID_LOW_WATERMARK, error_code=code)
