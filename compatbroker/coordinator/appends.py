"""The replication side of a coordinator's writes (offsets, group metadata, transaction state, markers), as
Kafka's appendRecords does them with acks=-1:

- before appending, a partition whose ISR is smaller than its `min.insync.replicas` refuses the write
  (NOT_ENOUGH_REPLICAS);
- after appending (and the fsync the flush policy asks for), the write is acknowledged once every in-sync replica
  has it: `cluster.replication.wait_for_isr` up to the write's timeout (NOT_ENOUGH_REPLICAS_AFTER_APPEND when the
  ISR shrank below `min.insync.replicas` meanwhile, REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER when leadership
  moved).

A partition with a single replica (every partition of a single node) needs neither: what is appended is committed.
The coordinators translate the errors with `COORDINATOR_APPEND_ERRORS`, Kafka's mapping.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol.error_codes import ErrorCode
from .host import CoordinatorHost

if TYPE_CHECKING:
    from ..storage import Log

# Kafka's translation of append errors into coordinator errors (CoordinatorOperationExceptionHelper; the transaction
# coordinator's appendTransactionToLog and the classic GroupMetadataManager also map NOT_ENOUGH_REPLICAS_AFTER_APPEND).
COORDINATOR_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


def coordinator_error(code: ErrorCode) -> ErrorCode:
    return COORDINATOR_APPEND_ERRORS.get(code, code)


def _replicated(host: CoordinatorHost, topic: str, partition: int):
    """The partition's state when it has more than one replica, else None (nothing to wait for)."""
    state = host.partition_state(topic, partition)
    return state if state is not None and len(state.replicas) > 1 else None


def check_before_append(host: CoordinatorHost, topic: str, partition: int, partition_log: Log) -> ErrorCode:
    """NOT_LEADER_OR_FOLLOWER when this node does not lead the partition, NOT_ENOUGH_REPLICAS when its ISR is
    smaller than `min.insync.replicas`, else NONE."""
    if not host.is_leader(topic, partition):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    state = _replicated(host, topic, partition)
    if state is not None and len(state.isr) < partition_log.config.min_insync_replicas:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    return ErrorCode.NONE


async def wait_for_replicas(host: CoordinatorHost, topic: str, partition: int, end_offset: int,
                            timeout_ms: int) -> ErrorCode:
    """NONE once the ISR has everything below `end_offset` (at once for a single replica), else the error."""
    if _replicated(host, topic, partition) is None:
        return ErrorCode.NONE
    return ErrorCode(await host.cluster.replication.wait_for_isr(topic, partition, end_offset, timeout_ms / 1000))
