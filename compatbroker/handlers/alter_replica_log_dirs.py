"""AlterReplicaLogDirs (API key 34), versions 0-2: move replicas this node holds to another of its log
directories (JBOD, several `log.dirs`).

The request goes to the broker holding the replicas (the admin client sends one per broker), so a node answers for
its own replicas only, whether it leads them or follows.

Authorization first, as Kafka's: ALTER on the cluster, else every partition asked for answers
CLUSTER_AUTHORIZATION_FAILED (one topic result per directory and topic, as Kafka's error answer lists them) and
nothing moves.

Behaviour, as a Kafka broker answers, per partition (a partition named under several directories: the last wins),
results grouped by topic in request order:
- INVALID_TOPIC_EXCEPTION when the topic name is too long for the `-future` directory name of a move (over 255
  characters); LOG_DIR_NOT_FOUND when the path is not one of this node's log directories (compared as absolute
  paths, so a relative path is not found); REPLICA_NOT_AVAILABLE when this node holds no replica of the partition;
- 0 when the replica already lives there, or when the move ran: `LogManager.move_log` copies the log into a
  `-future` directory in the target and swaps it in. Kafka answers at once and copies in the background; here the
  copy is done before the answer (on the event loop, so nothing appends meanwhile). KAFKA_STORAGE_ERROR (with one
  log line) when it fails; the replica then stays where it was.
"""
from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import AlterReplicaLogDirsResponse
from ..security.acls.types import CLUSTER_NAME, AclOperation, ResourceType
from ..storage.errors import StorageError

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 34
MIN_VERSION = 0
MAX_VERSION = 2

MAX_DIR_NAME_LENGTH = 255
# <topic>-<partition>.<32 hex digits>-future: Kafka's name for the directory a replica is copied into
_FUTURE_SUFFIX_LENGTH = 1 + 32 + len("-future")

TopicResult = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
PartitionResult = AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult
log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request) -> AlterReplicaLogDirsResponse:
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return _denied(request)
    targets: dict[tuple[str, int], str] = {}
    for target in request.dirs:
        for topic in target.topics:
            for partition in topic.partitions:
                targets[(topic.name, partition)] = target.path  # the last mention decides
    by_topic: dict[str, list] = {}
    for (topic, partition), path in targets.items():
        code = _move(ctx.broker, topic, partition, path)
        by_topic.setdefault(topic, []).append(PartitionResult(partition_index=partition, error_code=code))
    return AlterReplicaLogDirsResponse(throttle_time_ms=0, results=[TopicResult(topic_name=topic, partitions=results)
                                                                    for topic, results in by_topic.items()])


def _denied(request) -> AlterReplicaLogDirsResponse:
    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return AlterReplicaLogDirsResponse(throttle_time_ms=0, results=[
        TopicResult(topic_name=topic.name, partitions=[PartitionResult(partition_index=p, error_code=code)
                                                       for p in topic.partitions])
        for target in request.dirs for topic in target.topics])


def _move(broker, topic: str, partition: int, path: str) -> ErrorCode:
    if len(f"{topic}-{partition}") + _FUTURE_SUFFIX_LENGTH > MAX_DIR_NAME_LENGTH:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    logs = broker.logs
    if path not in logs.log_dirs:  # absolute paths, as Kafka compares them: a relative path is never found
        return ErrorCode.LOG_DIR_NOT_FOUND
    replica = broker.get_log(topic, partition)
    if replica is None:
        return ErrorCode.REPLICA_NOT_AVAILABLE
    if os.path.dirname(replica.directory) == path:
        return ErrorCode.NONE
    try:
        logs.move_log(topic, partition, path, now_ms=broker.now_ms())
    except (StorageError, OSError) as exc:
        log.warning("moving replica %s-%d to log directory %s failed: %s", topic, partition, path, exc)
        return ErrorCode.KAFKA_STORAGE_ERROR
    return ErrorCode.NONE
