"""Replaying `__transaction_state` at start: the last state of every transactional id.

Each partition is read from its log start offset to the log end offset it had when loading began, batch by batch
(`transaction.state.log.load.buffer.size`, Kafka's 5 MiB), in an executor thread, so a large log does not stall the
event loop; nothing appends meanwhile (the coordinator answers COORDINATOR_LOAD_IN_PROGRESS until it is loaded).
A later record of a transactional id replaces an earlier one; a tombstone (or a Dead state, never written here)
removes it. A batch or record that
does not decode is skipped with an error in the log rather than a broker that cannot start. What the coordinator
then does with the states found (completing PrepareCommit/PrepareAbort) is in coordinator.py.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from ...protocol import DecodeError
from ...protocol.records.batch import iter_batches, iter_records
from ...protocol.records.errors import CorruptRecordError, InvalidRecordError, UnsupportedCompressionError
from ...topic_names import TRANSACTION_STATE_TOPIC
from .records import parse_record
from .state import TransactionMetadata, TransactionState

if TYPE_CHECKING:
    from ...broker import Broker
    from ...storage import Log

log = logging.getLogger(__name__)

LOAD_BUFFER_BYTES = 5_242_880  # transaction.state.log.load.buffer.size's default
_MAX_RECORDS_BYTES = 2**31 - 1  # the log's own batches were bounded when they were written


async def replay_transaction_log(broker: Broker) -> dict[str, TransactionMetadata]:
    """Every transactional id's last state (nothing when the topic does not exist yet)."""
    states: dict[str, TransactionMetadata] = {}
    info = broker.topic(TRANSACTION_STATE_TOPIC)
    if info is None:
        return states
    loop = asyncio.get_running_loop()
    buffer_bytes = broker.config.transaction_state_log_load_buffer_size
    for partition in range(info.partitions):
        partition_log = broker.get_log(TRANSACTION_STATE_TOPIC, partition)
        if partition_log is not None and partition_log.log_end_offset > partition_log.log_start_offset:
            await loop.run_in_executor(None, replay_partition, partition_log, partition_log.log_end_offset, states,
                                       buffer_bytes)
    return states


def replay_partition(partition_log: Log, end: int, states: dict[str, TransactionMetadata],
                     buffer_bytes: int = LOAD_BUFFER_BYTES) -> None:
    """Replay one partition below offset `end` into `states` (runs in an executor thread; changes only `states`)."""
    position = partition_log.log_start_offset
    while position < end:
        data = memoryview(partition_log.read_bytes(position, buffer_bytes))
        if not data:
            break
        for start, header in iter_batches(data):
            if header.base_offset >= end:
                return
            if not header.is_control:
                try:
                    _replay_batch(data[start:start + header.size], states)
                except (CorruptRecordError, InvalidRecordError, UnsupportedCompressionError) as exc:
                    log.error("%s-%d: skipping the batch at offset %d, which does not decode: %s",
                              TRANSACTION_STATE_TOPIC, partition_log.partition, header.base_offset, exc)
            position = header.next_offset


def _replay_batch(batch, states: dict[str, TransactionMetadata]) -> None:
    for record in iter_records(batch, max_size=_MAX_RECORDS_BYTES):
        try:
            parsed = parse_record(_bytes(record.key), _bytes(record.value))
        except DecodeError as exc:
            log.error("%s: skipping the record at offset %d, which does not decode: %s", TRANSACTION_STATE_TOPIC,
                      record.offset, exc)
            continue
        if parsed.metadata is None or parsed.metadata.state is TransactionState.DEAD:  # Dead: on its way out
            states.pop(parsed.transactional_id, None)
        else:
            states[parsed.transactional_id] = parsed.metadata


def _bytes(data) -> bytes | None:
    return None if data is None else bytes(data)
