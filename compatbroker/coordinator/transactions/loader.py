"""Replaying a partition of `__transaction_state` when this node becomes its leader: the last state of each of its
transactional ids.

Each partition is read as `coordinator/replay.py` reads a coordinator's topic
(`transaction.state.log.load.buffer.size` at a time, Kafka's 5 MiB, in an executor thread). A later record of a
transactional id replaces an earlier one; a tombstone (or a Dead state, never written here) removes it. A batch or
record that does not decode is skipped with an error in the log rather than a broker that cannot start. What the
coordinator then does with the states found (completing PrepareCommit/PrepareAbort) is in coordinator.py.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ...protocol import DecodeError
from ...protocol.records.batch import iter_records
from ...topic_names import TRANSACTION_STATE_TOPIC
from ..replay import MAX_RECORDS_BYTES, record_bytes, replay_batches
from .records import parse_record
from .state import TransactionMetadata, TransactionState

if TYPE_CHECKING:
    from ...storage import Log

log = logging.getLogger(__name__)

LOAD_BUFFER_BYTES = 5_242_880  # transaction.state.log.load.buffer.size's default


def replay_partition(partition_log: Log, end: int, states: dict[str, TransactionMetadata],
                     buffer_bytes: int = LOAD_BUFFER_BYTES) -> None:
    """Replay one partition below offset `end` into `states` (runs in an executor thread; changes only `states`)."""
    replay_batches(partition_log, end, buffer_bytes,
                   lambda batch, header: None if header.is_control else _replay_batch(batch, states))


def _replay_batch(batch, states: dict[str, TransactionMetadata]) -> None:
    for record in iter_records(batch, max_size=MAX_RECORDS_BYTES):
        try:
            parsed = parse_record(record_bytes(record.key), record_bytes(record.value))
        except DecodeError as exc:
            log.error("%s: skipping the record at offset %d, which does not decode: %s", TRANSACTION_STATE_TOPIC,
                      record.offset, exc)
            continue
        if parsed.metadata is None or parsed.metadata.state is TransactionState.DEAD:  # Dead: on its way out
            states.pop(parsed.transactional_id, None)
        else:
            states[parsed.transactional_id] = parsed.metadata
