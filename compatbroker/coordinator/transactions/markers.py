"""Writing transaction markers: one control batch (COMMIT or ABORT, the producer id and epoch of the transaction,
the coordinator epoch) appended to each partition of the transaction, as Kafka's WriteTxnMarkers does on the
partition leaders. Used by the transaction coordinator and by the WriteTxnMarkers handler.

For each partition the answer is Kafka's: UNKNOWN_TOPIC_OR_PARTITION for a partition this broker does not have,
storage's code when it refuses the marker (INVALID_PRODUCER_EPOCH for a producer epoch older than the partition's,
TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch), KAFKA_STORAGE_ERROR when the disk fails. A marker
counts as written once durable under the flush policy (with `flush.messages`/`flush.ms` set the partition is
fsynced first, as Produce with acks=-1 does). Then the long polls of the partition wake up, and for a partition of
`__consumer_offsets` the group side applies or drops the transaction's offset commits.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ...protocol.error_codes import ErrorCode
from ...protocol.records.control import ControlRecordType, build_control_batch
from ...storage import StorageError
from ...storage.validator import COORDINATOR
from ...topic_names import GROUP_METADATA_TOPIC

if TYPE_CHECKING:
    from ...broker import Broker
    from ...storage import Log

log = logging.getLogger(__name__)

Partition = tuple[str, int]


async def write_markers(broker: Broker, *, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                        commit: bool, partitions: list[Partition]) -> dict[Partition, ErrorCode]:
    """Append the marker to every partition; returns each partition's error code (NONE when written)."""
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
            if topic == GROUP_METADATA_TOPIC:
                await _complete_offsets(broker, producer_id, partition, commit)
    return results


def _append(broker: Broker, topic: str, partition: int, marker: ControlRecordType, producer_id: int,
            producer_epoch: int, coordinator_epoch: int) -> tuple[ErrorCode, Log | None]:
    partition_log = broker.get_log(topic, partition) if broker.has_partition(topic, partition) else None
    if partition_log is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
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


async def _make_durable(broker: Broker, appended: dict[Partition, Log], results: dict[Partition, ErrorCode]) -> None:
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


async def _complete_offsets(broker: Broker, producer_id: int, partition: int, commit: bool) -> None:
    if broker.coordinator is None:  # a broker that is not serving (tests): its group side replays the marker
        return
    try:
        await broker.coordinator.offsets.complete_transaction(producer_id, partition, commit)
    except Exception:  # noqa: BLE001 - the marker is in the log: the group side's loader applies it at restart
        log.exception("%s-%d: the group coordinator could not apply the marker of producer %d",
                      GROUP_METADATA_TOPIC, partition, producer_id)
