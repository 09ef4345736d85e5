"""Replaying `__consumer_offsets` at start: the committed offsets and group metadata its records leave behind.

Each partition is read from its log start offset to the log end offset it had when loading began, batch by batch
(`LOAD_BUFFER_BYTES` at a time, Kafka's `offsets.load.buffer.size`), in an executor thread: reading and decoding a
large topic must not stall the event loop, and nothing appends meanwhile (the coordinator answers
COORDINATOR_LOAD_IN_PROGRESS until the store is loaded).

Replay follows the log: a later record of a key replaces an earlier one and a tombstone removes it (and the
pending transactional commits of that key written before it). Offsets committed inside a transaction (batches
with the transactional bit, from TxnOffsetCommit) wait for their producer's marker: a commit marker makes each
visible unless a newer record (by offset) of the same key already is, as Kafka's replay does; an abort marker drops
them. Those still open at the end are handed to the store as pending, per partition and producer id, so that a
marker written after the restart completes them. Records this broker does not keep (KIP-848, share and streams
groups) are skipped, and so is a record that does not decode, with an error in the log rather than a broker that
cannot start.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..protocol import DecodeError
from ..protocol.messages import GroupMetadataValue
from ..protocol.records.batch import iter_batches, iter_records
from ..protocol.records.control import ControlRecordType, parse_control_record
from ..protocol.records.errors import CorruptRecordError, InvalidRecordError, UnsupportedCompressionError
from ..topic_names import GROUP_METADATA_TOPIC
from .offsets import CommittedOffset, GroupRecord, OffsetRecord, OpenTransactions, PendingCommit, parse_record

if TYPE_CHECKING:
    from ..broker import Broker
    from ..storage import Log

log = logging.getLogger(__name__)

LOAD_BUFFER_BYTES = 5_242_880
_MAX_RECORDS_BYTES = 2**31 - 1  # the log's own batches were bounded when they were written

OffsetKey = tuple[str, int]


@dataclass
class Replayed:
    """What the topic holds: per group, the committed offsets and the offset of the record each comes from; the
    last metadata record of each group that has one (None when that record is a tombstone); and the commits of
    transactions still open, by (partition, producer id)."""

    offsets: dict[str, dict[OffsetKey, CommittedOffset]] = field(default_factory=dict)
    positions: dict[str, dict[OffsetKey, int]] = field(default_factory=dict)
    groups: dict[str, GroupMetadataValue | None] = field(default_factory=dict)
    transactions: OpenTransactions = field(default_factory=dict)
    records: int = 0  # records read, for the log line


async def replay_offsets_topic(broker: Broker) -> Replayed:
    """Replay every partition of `__consumer_offsets` (nothing when the topic does not exist yet)."""
    replayed = Replayed()
    info = broker.topic(GROUP_METADATA_TOPIC)
    if info is None:
        return replayed
    loop = asyncio.get_running_loop()
    for partition in range(info.partitions):
        partition_log = broker.get_log(GROUP_METADATA_TOPIC, partition)
        if partition_log is not None and partition_log.log_end_offset > partition_log.log_start_offset:
            await loop.run_in_executor(None, replay_partition, partition_log, partition_log.log_end_offset,
                                       replayed)
    return replayed


def replay_partition(partition_log: Log, end: int, replayed: Replayed) -> None:
    """Replay one partition below offset `end` into `replayed` (runs in an executor thread and changes nothing
    but `replayed`)."""
    position = partition_log.log_start_offset
    transactions: dict[int, dict[str, dict[OffsetKey, PendingCommit]]] = {}  # open ones', by producer id
    while position < end:
        data = memoryview(partition_log.read_bytes(position, LOAD_BUFFER_BYTES))
        if not data:
            break
        for start, header in iter_batches(data):
            if header.base_offset >= end:  # appended after loading began: not ours to replay
                position = end
                break
            try:
                _replay_batch(data[start:start + header.size], header, transactions, replayed)
            except (CorruptRecordError, InvalidRecordError, UnsupportedCompressionError) as exc:
                log.error("%s-%d: skipping the batch at offset %d, which does not decode: %s",
                          GROUP_METADATA_TOPIC, partition_log.partition, header.base_offset, exc)
            position = header.next_offset
    for producer_id, by_group in transactions.items():
        if any(by_group.values()):
            replayed.transactions[(partition_log.partition, producer_id)] = by_group


def _replay_batch(batch, header, transactions: dict, replayed: Replayed) -> None:
    for record in iter_records(batch, max_size=_MAX_RECORDS_BYTES):
        replayed.records += 1
        if header.is_control:
            _end_transaction(header.producer_id, record, transactions, replayed)
            continue
        try:
            parsed = parse_record(_bytes(record.key), _bytes(record.value))
        except DecodeError as exc:
            log.error("%s: skipping the record at offset %d, which does not decode: %s", GROUP_METADATA_TOPIC,
                      record.offset, exc)
            continue
        if isinstance(parsed, GroupRecord):
            replayed.groups[parsed.group_id] = parsed.value
        elif isinstance(parsed, OffsetRecord):
            key = (parsed.topic, parsed.partition)
            if parsed.committed is None:
                _remove(parsed.group_id, key, transactions, replayed)
            elif header.is_transactional:
                by_group = transactions.setdefault(header.producer_id, {})
                by_group.setdefault(parsed.group_id, {})[key] = PendingCommit(parsed.committed, record.offset)
            else:
                _materialize(parsed.group_id, key, PendingCommit(parsed.committed, record.offset), replayed)


def _materialize(group_id: str, key: OffsetKey, commit: PendingCommit, replayed: Replayed) -> None:
    """Make the commit visible unless a newer record's offset already is (log order: only transactional commits,
    applied at their marker, can be older)."""
    positions = replayed.positions.setdefault(group_id, {})
    if commit.position > positions.get(key, -1):
        replayed.offsets.setdefault(group_id, {})[key] = commit.committed
        positions[key] = commit.position


def _remove(group_id: str, key: OffsetKey, transactions: dict, replayed: Replayed) -> None:
    """A tombstone: the visible offset goes, and so do the open transactions' commits of the key (all of them
    were written before it)."""
    replayed.offsets.get(group_id, {}).pop(key, None)
    replayed.positions.get(group_id, {}).pop(key, None)
    for by_group in transactions.values():
        by_group.get(group_id, {}).pop(key, None)


def _end_transaction(producer_id: int, record, transactions: dict, replayed: Replayed) -> None:
    try:
        marker = parse_control_record(_bytes(record.key), _bytes(record.value))
    except InvalidRecordError:
        return  # a control record that is no transaction marker
    by_group = transactions.pop(producer_id, {})
    if marker.type == ControlRecordType.COMMIT:
        for group_id, pending in by_group.items():
            for key, commit in pending.items():
                _materialize(group_id, key, commit, replayed)


def _bytes(data) -> bytes | None:
    return None if data is None else bytes(data)
