"""Writing transaction markers: one control batch (COMMIT or ABORT, the producer id and epoch of the transaction,
the coordinator epoch) appended to each partition of the transaction on its leader node, as Kafka's transaction
coordinator sends WriteTxnMarkers to the partition leaders. `write_markers` (the transaction coordinator's) sends
each partition's marker to its leader node (in-process); `write_markers_here` (the WriteTxnMarkers handler's)
writes on this node.

For each partition the answer is Kafka's: UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist,
NOT_LEADER_OR_FOLLOWER for one this node does not lead (or, from `write_markers`, that has no leader: the
coordinator retries), storage's code when it refuses the marker (INVALID_PRODUCER_EPOCH for a producer epoch older
than the partition's, TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch), KAFKA_STORAGE_ERROR when the
disk fails, and with several replicas NOT_ENOUGH_REPLICAS before appending when the ISR is below
`min.insync.replicas`, or the replication wait's error (markers are appended with acks=-1, as Kafka's are). A
marker counts as written once durable under the flush policy (with `flush.messages`/`flush.ms` set the partition
is fsynced first) and replicated. Then the long polls of the partition wake up, and for a partition of
`__consumer_offsets` the group side of the leader node applies or drops the transaction's offset commits.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from ...protocol.error_codes import ErrorCode
from ...protocol.records.control import ControlRecordType, build_control_batch
from ...storage import StorageError
from ...storage.validator import COORDINATOR
from ...topic_names import GROUP_METADATA_TOPIC
from ..appends import check_before_append, wait_for_replicas

if TYPE_CHECKING:
    from ...storage import Log
    from ..host import CoordinatorHost

log = logging.getLogger(__name__)

Partition = tuple[str, int]
MARKER_TIMEOUT_MS = 30_000  # Kafka appends markers waiting for the replicas up to request.timeout.ms


async def write_markers(host: CoordinatorHost, *, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                        commit: bool, partitions: list[Partition]) -> dict[Partition, ErrorCode]:
    """Write the marker to every partition on its leader node; returns each partition's error code."""
    results: dict[Partition, ErrorCode] = {}
    by_leader: dict[int, list[Partition]] = {}
    for topic, partition in dict.fromkeys(partitions):
        state = host.partition_state(topic, partition) if host.has_partition(topic, partition) else None
        if state is None:
            results[(topic, partition)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif state.leader not in host.cluster.nodes:
            results[(topic, partition)] = ErrorCode.NOT_LEADER_OR_FOLLOWER  # offline: retried
        else:
            by_leader.setdefault(state.leader, []).append((topic, partition))
    written = await asyncio.gather(*(
        write_markers_here(host.cluster.nodes[leader], producer_id=producer_id, producer_epoch=producer_epoch,
                           coordinator_epoch=coordinator_epoch, commit=commit, partitions=led)
        for leader, led in by_leader.items()))
    for answers in written:
        results.update(answers)
    return {key: results[key] for key in dict.fromkeys(partitions)}


async def write_markers_here(broker: CoordinatorHost, *, producer_id: int, producer_epoch: int,
                             coordinator_epoch: int, commit: bool, partitions: list[Partition]
                             ) -> dict[Partition, ErrorCode]:
    """Append the marker to every partition on this node, its leader; returns each partition's error code."""
    marker = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    results: dict[Partition, ErrorCode] = {}
    appended: dict[Partition, Log] = {}
    for topic, partition in dict.fromkeys(partitions):
        code, partition_log = _append(broker, topic, partition, marker, producer_id, producer_epoch,
                                      coordinator_epoch)
        results[(topic, partition)] = code
        if partition_log is not None:
            appended[(topic, partition)] = partition_log
    await _make_durable(broker, appended, results)
    for (topic, partition), partition_log in appended.items():
        if results[(topic, partition)] is ErrorCode.NONE:
            broker.notify_appended(topic, partition)
    await _wait_for_replicas(broker, appended, results)
    for (topic, partition), partition_log in appended.items():
        if results[(topic, partition)] is ErrorCode.NONE and topic == GROUP_METADATA_TOPIC:
            await _complete_offsets(broker, producer_id, partition, commit)
    return results


def _append(broker: CoordinatorHost, topic: str, partition: int, marker: ControlRecordType, producer_id: int,
            producer_epoch: int, coordinator_epoch: int) -> tuple[ErrorCode, Log | None]:
    partition_log = broker.get_log(topic, partition) if broker.has_partition(topic, partition) else None
    if partition_log is None:
        if broker.has_partition(topic, partition):  # a partition this node holds no replica of
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
    error = check_before_append(broker, topic, partition, partition_log)
    if error is not ErrorCode.NONE:
        return error, None
    now_ms = broker.now_ms()
    batch = build_control_batch(marker, producer_id=producer_id, producer_epoch=producer_epoch,
                                coordinator_epoch=coordinator_epoch, timestamp=now_ms)
    try:
        partition_log.append(batch, leader_epoch=broker.leader_epoch(topic, partition), now_ms=now_ms,
                             origin=COORDINATOR)
    except StorageError as exc:
        log.warning("%s marker for producer %d (epoch %d) refused by %s-%d: %s", marker.name, producer_id,
                    producer_epoch, topic, partition, exc)
        return ErrorCode(exc.error_code), None
    except OSError as exc:
        log.error("%s marker for producer %d could not be written to %s-%d: %s", marker.name, producer_id, topic,
                  partition, exc)
        return ErrorCode.KAFKA_STORAGE_ERROR, None
    return ErrorCode.NONE, partition_log


async def _make_durable(broker: CoordinatorHost, appended: dict[Partition, Log],
                        results: dict[Partition, ErrorCode]) -> None:
    """fsync the partitions that have a flush policy (one executor job for all of them)."""
    due = {key: partition_log for key, partition_log in appended.items() if partition_log.config.has_flush_policy}
    if not due:
        return
    try:
        await broker.make_durable(list(due.values()))
    except OSError as exc:
        log.error("fsync after writing transaction markers failed: %s", exc)
        for key in due:
            results[key] = ErrorCode.KAFKA_STORAGE_ERROR


async def _wait_for_replicas(broker: CoordinatorHost, appended: dict[Partition, Log],
                             results: dict[Partition, ErrorCode]) -> None:
    """acks=-1: each written marker's error becomes the replication wait's."""
    waiting = [key for key in appended if results[key] is ErrorCode.NONE]
    codes = await asyncio.gather(*(wait_for_replicas(broker, topic, partition, appended[(topic, partition)]
                                                     .log_end_offset, MARKER_TIMEOUT_MS)
                                   for topic, partition in waiting))
    for key, code in zip(waiting, codes, strict=True):
        results[key] = code


async def _complete_offsets(broker: CoordinatorHost, producer_id: int, partition: int, commit: bool) -> None:
    if broker.coordinator is None:  # a broker that is not serving (tests): its group side replays the marker
        return
    try:
        await broker.coordinator.offsets.complete_transaction(producer_id, partition, commit)
    except Exception:  # noqa: BLE001 - the marker is in the log: the group side's loader applies it at restart
        log.exception("%s-%d: the group coordinator could not apply the marker of producer %d",
                      GROUP_METADATA_TOPIC, partition, producer_id)
