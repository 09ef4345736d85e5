"""Replaying a partition of `__consumer_offsets` when this node becomes its leader (at start, or when leadership
moves here): the committed offsets and group metadata its records leave behind.

Each partition is read as `replay.py` reads a coordinator's topic (`LOAD_BUFFER_BYTES` at a time, Kafka's
`offsets.load.buffer.size`, in an executor thread).

Replay follows the log: a later record of a key replaces an earlier one and a tombstone removes it (and the
pending transactional commits of that key written before it). Offsets committed inside a transaction (batches
with the transactional bit, from TxnOffsetCommit) wait for their producer's marker: a commit marker makes each
visible unless a newer record (by offset) of the same key already is, as Kafka's replay does; an abort marker drops
them. Those still open at the end are handed to the store as pending, per partition and producer id, so that a
marker written after the restart completes them.

The records of consumer and share groups (`group_records.py`) are kept as compaction would leave them: the last
record of each key, in log order (a later record of a key moves it to its own position, a tombstone removes it);
the store hands them, in that order, to `Coordinator.replay_typed` once the offsets and classic groups are in.
Records this broker does not keep (streams groups) are skipped, and so is a batch or record that does not decode,
with an error in the log rather than a broker that cannot start.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..protocol import DecodeError
from ..protocol.messages import GroupMetadataValue
from ..protocol.records.batch import iter_records
from ..protocol.records.control import ControlRecordType, parse_control_record
from ..protocol.records.errors import InvalidRecordError
from ..topic_names import GROUP_METADATA_TOPIC
from .group_records import TypedRecord
from .offsets import CommittedOffset, GroupRecord, OffsetRecord, OpenTransactions, PendingCommit, parse_record
from .replay import MAX_RECORDS_BYTES, record_bytes, replay_batches

if TYPE_CHECKING:
    from ..storage import Log

log = logging.getLogger(__name__)

LOAD_BUFFER_BYTES = 5_242_880

OffsetKey = tuple[str, int]


@dataclass
class Replayed:
    """What the topic holds: per group, the committed offsets and the offset of the record each comes from; the
    last metadata record of each group that has one (None when that record is a tombstone); the commits of
    transactions still open, by (partition, producer id); and the live consumer and share group records, by their
    key bytes, in log order."""

    offsets: dict[str, dict[OffsetKey, CommittedOffset]] = field(default_factory=dict)
    positions: dict[str, dict[OffsetKey, int]] = field(default_factory=dict)
    groups: dict[str, GroupMetadataValue | None] = field(default_factory=dict)
    transactions: OpenTransactions = field(default_factory=dict)
    typed: dict[bytes, TypedRecord] = field(default_factory=dict)
    records: int = 0  # records read, for the log line


def replay_partition(partition_log: Log, end: int, replayed: Replayed) -> None:
    """Replay one partition below offset `end` into `replayed` (runs in an executor thread and changes nothing
    but `replayed`)."""
    transactions: dict[int, dict[str, dict[OffsetKey, PendingCommit]]] = {}  # open ones', by producer id
    replay_batches(partition_log, end, LOAD_BUFFER_BYTES,
                   lambda batch, header: _replay_batch(batch, header, transactions, replayed))
    for producer_id, by_group in transactions.items():
        if any(by_group.values()):
            replayed.transactions[(partition_log.partition, producer_id)] = by_group


def _replay_batch(batch, header, transactions: dict, replayed: Replayed) -> None:
    for record in iter_records(batch, max_size=MAX_RECORDS_BYTES):
        replayed.records += 1
        if header.is_control:
            _end_transaction(header.producer_id, record, transactions, replayed)
            continue
        raw_key = record_bytes(record.key)
        try:
            parsed = parse_record(raw_key, record_bytes(record.value))
        except DecodeError as exc:
            log.error("%s: skipping the record at offset %d, which does not decode: %s", GROUP_METADATA_TOPIC,
                      record.offset, exc)
            continue
        if isinstance(parsed, TypedRecord):
            _keep_last(raw_key, parsed, replayed.typed)
        elif isinstance(parsed, GroupRecord):
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


def _keep_last(key: bytes, parsed: TypedRecord, typed: dict[bytes, TypedRecord]) -> None:
    """Compaction's view: the key's earlier record goes; a live record takes the key's place at the end."""
    typed.pop(key, None)
    if parsed.value is not None:
        typed[key] = parsed


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
        marker = parse_control_record(record_bytes(record.key), record_bytes(record.value))
    except InvalidRecordError:
        return  # a control record that is no transaction marker
    by_group = transactions.pop(producer_id, {})
    if marker.type == ControlRecordType.COMMIT:
        for group_id, pending in by_group.items():
            for key, commit in pending.items():
                _materialize(group_id, key, commit, replayed)
