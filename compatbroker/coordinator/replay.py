"""Reading a partition of a coordinator's internal topic back (`__consumer_offsets`, `__transaction_state`) when
this node becomes its leader.

A partition is read from its log start offset to the log end offset it had when loading began, a buffer at a
time, in an executor thread (the coordinator's `ownership` runs it), so a large topic does not stall the event
loop; nothing appends meanwhile (the coordinator answers COORDINATOR_LOAD_IN_PROGRESS until it is loaded). A
batch that does not decode is skipped with an error in the log rather than a broker that cannot start.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..protocol.records.batch import BatchHeader, iter_batches
from ..protocol.records.errors import CorruptRecordError, InvalidRecordError, UnsupportedCompressionError

if TYPE_CHECKING:
    from ..storage import Log

log = logging.getLogger(__name__)

MAX_RECORDS_BYTES = 2**31 - 1  # the log's own batches were bounded when they were written


def replay_batches(partition_log: Log, end: int, buffer_bytes: int,
                   apply: Callable[[memoryview, BatchHeader], None]) -> None:
    """Call `apply(batch, header)` for every batch below offset `end`, in log order, reading `buffer_bytes` at a
    time; a batch whose records do not decode (`apply` raises a record error) is logged and skipped."""
    position = partition_log.log_start_offset
    while position < end:
        data = memoryview(partition_log.read_bytes(position, buffer_bytes))
        if not data:
            return
        for start, header in iter_batches(data):
            if header.base_offset >= end:  # appended after loading began: not ours to replay
                return
            try:
                apply(data[start:start + header.size], header)
            except (CorruptRecordError, InvalidRecordError, UnsupportedCompressionError) as exc:
                log.error("%s-%d: skipping the batch at offset %d, which does not decode: %s", partition_log.topic,
                          partition_log.partition, header.base_offset, exc)
            position = header.next_offset


def record_bytes(data) -> bytes | None:
    """A record's key or value as bytes (None stays None)."""
    return None if data is None else bytes(data)
