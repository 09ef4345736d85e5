"""DescribeLogDirs (API key 35), versions 0-5: this node's log directories and the replicas each holds.

Behaviour, as a Kafka broker answers:
- One result per log directory of this node (`log.dirs`, in their configured order): its absolute path, and for
  each asked partition this node has a replica of (leader or follower) in that directory, its size (the bytes of
  its segment files, as Kafka's `log.size`), its offset lag (Kafka's max(high watermark - log end offset, 0): 0, as
  a replica's high watermark never passes its log end) and is_future_key false (AlterReplicaLogDirs moves a
  replica in one step here, so no future replica is ever seen). Topics are listed by name with their partitions in
  order; partitions not on this node are left out, and so are topics left with none. Each node describes only its
  own directories: the admin client asks every broker.
- `topics` null means every partition; an empty list means none (the directories are still described).
- v3+: the top-level error code (0); v4+: the file system's total and usable bytes (`os.statvfs`: blocks and blocks
  available to unprivileged users, times the fragment size, as Java's FileStore reports them); v5: never cordoned.
- Authorization: DESCRIBE on the cluster, else the top-level error CLUSTER_AUTHORIZATION_FAILED with no results
  (v0-2, which have no top-level error, then read as an empty answer), as Kafka's.
- A log directory that cannot be examined answers KAFKA_STORAGE_ERROR in its result.
"""
from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import DescribeLogDirsResponse
from ..security.acls.types import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 35
MIN_VERSION = 0
MAX_VERSION = 5

Result = DescribeLogDirsResponse.DescribeLogDirsResult
TopicResult = DescribeLogDirsResponse.DescribeLogDirsTopic
PartitionResult = DescribeLogDirsResponse.DescribeLogDirsPartition
log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request) -> DescribeLogDirsResponse:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                       results=[])
    logs = ctx.broker.logs
    wanted = _wanted(request)
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                   results=[_describe(logs, path, wanted) for path in logs.log_dirs])


def _wanted(request) -> set[tuple[str, int]] | None:
    if request.topics is None:
        return None
    return {(topic.topic, partition) for topic in request.topics for partition in topic.partitions}


def _describe(logs, path: str, wanted: set[tuple[str, int]] | None):
    try:
        stats = os.statvfs(path)
    except OSError as exc:
        log.warning("cannot describe log directory %s: %s", path, exc)
        return Result(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=path, topics=[])
    topics: dict[str, list] = {}
    for (topic, partition), partition_log in sorted(logs.logs.items()):
        if (wanted is None or (topic, partition) in wanted) and logs.log_dir_of(topic, partition) == path:
            lag = max(partition_log.high_watermark - partition_log.log_end_offset, 0)
            topics.setdefault(topic, []).append(PartitionResult(partition_index=partition,
                                                                partition_size=partition_log.size, offset_lag=lag,
                                                                is_future_key=False))
    return Result(error_code=ErrorCode.NONE, log_dir=path,
                  topics=[TopicResult(name=name, partitions=partitions) for name, partitions in topics.items()],
                  total_bytes=stats.f_blocks * stats.f_frsize, usable_bytes=stats.f_bavail * stats.f_frsize,
                  is_cordoned=False)
