"""Compaction of `cleanup.policy=compact` logs: keep the latest record of every key, drop aborted transactions.

A pass has two halves so that it never blocks appends or reads:

1. `prepare_clean` (may run in an executor thread): over the sealed segments below the cleanable limit, map every
   key of the dirty part (offsets at or after the first dirty offset) to its last offset, then write a cleaned copy
   of each sealed segment as `<base>.log.cleaned` (with its `.index`, `.timeindex` and `.txnindex`), fsync it and
   rename it to `.swap`. It only reads sealed segments, which never change, through `pread` on their descriptors.
2. `commit_clean` (on the loop): swap the cleaned segments in for the old ones (`Log.replace_segments`), unless
   retention or truncation changed those segments meanwhile, in which case the pass is thrown away.

The cleanable limit, as in Kafka's LogCleanerManager, is the base offset of the first segment that may not be
cleaned: the active segment, the segment holding the last stable offset (records of an open transaction are never
cleaned, whether it will commit or abort), and the first segment younger than `min.compaction.lag.ms`.
`needs_cleaning` applies `min.cleanable.dirty.ratio` (dirty bytes over all sealed cleanable bytes) and
`max.compaction.lag.ms`.

What is kept, as in Kafka: offsets never change (a cleaned batch keeps its base offset and last offset delta, so
gaps appear inside batches); a batch's producer id, epoch, base sequence, attributes and partition leader epoch are
kept. A batch all of whose records go is dropped, except (as Kafka's empty batch: header only, no codec, no base
timestamp) the last batch of an active producer (`isBatchLastRecordOfProducer`: its last data batch, which holds its
last sequence, or, when it has none, its last marker, which holds its epoch) so that producer state survives a
reload, and the last batch below the cleanable limit, so that the last offset is not lost. A batch whose records all
survive is copied byte for byte; otherwise its surviving records are re-encoded with the same codec (our own small
encoder below, since the records package builds only batches with consecutive offsets).

Transactions (Kafka's CleanedTransactionMetadata): the aborted transactions come from the segments' `.txnindex`
files. Batches of an aborted transaction are discarded and never count as the latest value of a key; committed
transactional data are compacted like any data. A marker stays as long as a pass finds a batch of its transaction
before it (the pass that drops the last one included, and an empty batch kept for producer state counts); the
first pass that finds none gives it a delete horizon of now + `delete.retention.ms`, and a pass at or after that
horizon removes it (or empties it, when it is the batch kept for its producer). The `.txnindex` of a cleaned segment
(`<base>.txnindex.cleaned`, then `.swap`, renamed with the segment's other files) holds the aborted transactions
whose ABORT marker it keeps for their batches; none, no file.

Tombstones (null values) follow the same delete horizon (KIP-534): the first pass that keeps a batch holding a
tombstone rewrites it with a delete horizon of now + `delete.retention.ms` (stored in baseTimestamp, flagged by
attribute bit 6; record timestamps stay, as deltas from it). A later pass drops the batch's tombstones once now has
reached its horizon. So a consumer replaying the log gets `delete.retention.ms` from the first cleaning to see them.
Deviation: cleaned segments replace old ones one for one instead of being merged.
"""
from __future__ import annotations

import heapq
import os
import struct
from dataclasses import dataclass, field
from typing import NamedTuple

from crc32c import crc32c

from ..protocol.records.batch import (ATTRIBUTES_OFFSET, CRC_OFFSET, DELETE_HORIZON_MASK, HEADER, LOG_APPEND_TIME,
                                      LOG_OVERHEAD, NO_TIMESTAMP, RECORD_BATCH_OVERHEAD, iter_records,
                                      read_batch_header)
from ..protocol.records.compression import CODEC_MASK, Compression, compress
from ..protocol.records.control import ControlRecordType, parse_control_key
from ..protocol.records.errors import CorruptRecordError, InvalidRecordError
from ..protocol.records.varint import varint_size, write_varint, write_varlong
from .log import Log
from .segment import CLEANED_SUFFIX, SWAP_SUFFIX, AppendBatch, LogSegment, segment_path
from .transaction_index import TXN_INDEX_SUFFIX, AbortedTxn, write_transaction_index

_MAX_DECOMPRESSED = 2**31 - 1  # the log's own batches: they were bounded when they were produced
_UINT32 = struct.Struct(">I")
_UNKNOWN_CONTROL = -1  # a control record we cannot read as a marker: kept, as Kafka keeps unknown types


@dataclass
class CleanPlan:
    """The result of `prepare_clean`: cleaned segments (under `.swap`) to put in place of `old`."""

    old: list[LogSegment]
    new: list[LogSegment]
    first_dirty_offset: int


def cleanable_limit(log: Log, now_ms: int) -> int:
    """Offsets below this may be compacted: the sealed segments before the one holding the last stable offset,
    minus those younger than min.compaction.lag.ms. Always a segment's base offset."""
    segments = log.segments
    limit = segments[-1].base_offset
    lag = log.config.min_compaction_lag_ms
    if lag > 0:
        limit = next((s.base_offset for s in segments[:-1] if s.max_timestamp_so_far > now_ms - lag), limit)
    return min(limit, _base_of_segment_holding(segments, log.last_stable_offset))


def _base_of_segment_holding(segments, offset: int) -> int:
    base = segments[0].base_offset
    for segment in segments:
        if segment.base_offset > offset:
            break
        base = segment.base_offset
    return base


def dirty_ratio(log: Log, first_dirty_offset: int, now_ms: int) -> float:
    """Bytes of sealed, cleanable segments at or after the first dirty offset, over all cleanable bytes."""
    limit = cleanable_limit(log, now_ms)
    clean = dirty = 0
    for segment in log.segments[:-1]:
        if segment.base_offset >= limit:
            break
        if segment.next_offset <= first_dirty_offset:
            clean += segment.size
        else:
            dirty += segment.size
    total = clean + dirty
    return dirty / total if total else 0.0


def needs_cleaning(log: Log, first_dirty_offset: int, now_ms: int) -> bool:
    if not log.config.compact or cleanable_limit(log, now_ms) <= max(first_dirty_offset, log.log_start_offset):
        return False
    if dirty_ratio(log, first_dirty_offset, now_ms) >= log.config.min_cleanable_dirty_ratio:
        return True
    lag = log.config.max_compaction_lag_ms
    first_dirty = next((s for s in log.segments[:-1] if s.next_offset > first_dirty_offset), None)
    return first_dirty is not None and 0 <= first_dirty.max_timestamp_so_far < now_ms - lag


def prepare_clean(log: Log, first_dirty_offset: int, now_ms: int) -> CleanPlan | None:
    """Build cleaned copies of the cleanable segments; None when there is nothing to clean."""
    limit = cleanable_limit(log, now_ms)
    segments = [s for s in log.segments[:-1] if s.base_offset < limit]
    if not segments or segments[-1].next_offset <= first_dirty_offset:
        return None
    latest = _key_map(log, segments, first_dirty_offset, limit)
    cleaning = _Round(latest, now_ms, log.config.delete_retention_ms, _last_records_of_active_producers(log),
                      upper_bound_offset=segments[-1].next_offset)
    new = []
    for position, segment in enumerate(segments):
        # The whole range of the segment: its cleaned .txnindex is rebuilt from these.
        upper = segments[position + 1].base_offset if position + 1 < len(segments) else segment.next_offset
        cleaning.transactions.add_aborted_transactions(log.collect_aborted_transactions(segment.base_offset, upper))
        new.append(_clean_segment(log, segment, cleaning))
    return CleanPlan(segments, new, segments[-1].next_offset)


def commit_clean(log: Log, plan: CleanPlan, now_ms: int) -> bool:
    """Put the cleaned segments in place; False (and the plan's files removed) if the log changed meanwhile."""
    current = log.segments
    try:
        start = current.index(plan.old[0])
    except ValueError:
        start = -1
    if start < 0 or list(current[start:start + len(plan.old)]) != plan.old or start + len(plan.old) >= len(current):
        for segment in plan.new:
            segment.close()
            segment.delete_files()
        return False
    log.replace_segments(plan.old, plan.new, now_ms)
    return True


def clean(log: Log, first_dirty_offset: int, now_ms: int) -> int | None:
    """One synchronous pass (prepare + commit); returns the new first dirty offset, or None if nothing was done."""
    plan = prepare_clean(log, first_dirty_offset, now_ms)
    if plan is None or not commit_clean(log, plan, now_ms):
        return None
    return plan.first_dirty_offset


# --- transactions -------------------------------------------------------------------------------------------------

@dataclass
class _AbortedTransaction:
    txn: AbortedTxn
    last_observed_batch_offset: int | None = None


class CleanedTransactionMetadata:
    """Kafka's: the transactions the cleaner is inside of as it walks the log in offset order. It says which data
    batches belong to an aborted transaction, which markers may go (none of their transaction's batches was seen
    since the previous marker of the producer), and collects the aborted transactions a cleaned segment still needs
    in its `.txnindex` (`cleaned_index`)."""

    def __init__(self):
        self._pending: list[tuple[int, AbortedTxn]] = []  # min-heap on first offset: not reached yet
        self._ongoing_aborted: dict[int, _AbortedTransaction] = {}
        self._ongoing_committed: set[int] = set()
        self.cleaned_index: list[AbortedTxn] = []

    def add_aborted_transactions(self, transactions: list[AbortedTxn]) -> None:
        for txn in transactions:
            heapq.heappush(self._pending, (txn.first_offset, txn))

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0][0] <= offset:
            txn = heapq.heappop(self._pending)[1]
            self._ongoing_aborted.setdefault(txn.producer_id, _AbortedTransaction(txn))

    def on_batch_read(self, header) -> bool:
        """A data batch: True when it belongs to an aborted transaction (it may be discarded)."""
        self._consume_aborted_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        aborted = self._ongoing_aborted.get(header.producer_id)
        if aborted is not None:
            aborted.last_observed_batch_offset = header.last_offset
            return True
        self._ongoing_committed.add(header.producer_id)
        return False

    def on_control_batch_read(self, header, control_type) -> bool:
        """A control batch (`control_type`: its record's type, None when it has none): True when it may be
        discarded, since no batch of its transaction is left."""
        self._consume_aborted_up_to(header.last_offset)
        producer_id = header.producer_id
        if control_type is None:
            return True  # emptied by an earlier pass
        if control_type == ControlRecordType.ABORT:
            aborted = self._ongoing_aborted.pop(producer_id, None)
            if aborted is not None and aborted.last_observed_batch_offset is not None:
                self.cleaned_index.append(aborted.txn)
                return False
            return True
        if control_type == ControlRecordType.COMMIT:
            if producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(producer_id)
                return False
            return True
        return False


def _control_type(data: bytes):
    """The type of a control batch's record: a ControlRecordType, another type id, or None when it has none."""
    try:
        record = next(iter_records(data, max_size=_MAX_DECOMPRESSED), None)
        return None if record is None else parse_control_key(record.key)
    except (CorruptRecordError, InvalidRecordError):
        return _UNKNOWN_CONTROL


class _LastRecord(NamedTuple):
    """Kafka's LastRecord: an active producer's last data offset (-1: none remembered) and its epoch."""

    last_data_offset: int
    producer_epoch: int


def _last_records_of_active_producers(log: Log) -> dict[int, _LastRecord]:
    """Read in an executor thread while the loop may append: a value from just before or after an append only
    keeps one batch more (an older last batch) or drops one Kafka would drop too (the newer one is not cleaned)."""
    return {entry.producer_id: _LastRecord(_last_data_offset(entry), entry.producer_epoch)
            for entry in log.producer_state.active_producers()}


def _last_data_offset(entry) -> int:
    try:
        return entry.batches[-1].last_offset
    except IndexError:  # none remembered (or a new epoch cleared them under us)
        return -1


def _is_batch_last_record_of_producer(header, producers: dict[int, _LastRecord]) -> bool:
    """Kafka's rule: keep the batch holding an active producer's last sequence, or, when it has no data batch
    remembered, its last marker of the current epoch (the epoch fences zombies)."""
    last = producers.get(header.producer_id)
    if last is None:
        return False
    if last.last_data_offset >= 0:
        return header.last_offset == last.last_data_offset
    return header.is_control and header.producer_epoch == last.producer_epoch


@dataclass
class _Round:
    """What one pass carries from segment to segment."""

    latest: dict[bytes, int]
    now_ms: int
    delete_retention_ms: int
    producers: dict[int, _LastRecord]
    upper_bound_offset: int  # the next offset after the last batch the pass cleans
    transactions: CleanedTransactionMetadata = field(default_factory=CleanedTransactionMetadata)


# --- the key map --------------------------------------------------------------------------------------------------

def _key_map(log: Log, segments: list[LogSegment], first_dirty_offset: int, limit: int) -> dict[bytes, int]:
    """Key -> last offset, over the records at or after `first_dirty_offset`, leaving out aborted transactions.
    Keys of the clean part stay unless a dirty record supersedes them."""
    transactions = CleanedTransactionMetadata()
    transactions.add_aborted_transactions(log.collect_aborted_transactions(first_dirty_offset, limit))
    latest: dict[bytes, int] = {}
    for segment in segments:
        if segment.next_offset <= first_dirty_offset:
            continue
        for batch in segment.iter_batches():
            if batch.last_offset < first_dirty_offset:
                continue
            data = segment.read_bytes(batch.position, batch.size)
            header = read_batch_header(data)
            if header.is_control:
                transactions.on_control_batch_read(header, _control_type(data))
                continue
            if transactions.on_batch_read(header):
                continue  # aborted: never the latest value of a key
            for record in iter_records(data, max_size=_MAX_DECOMPRESSED):
                if record.key is not None and record.offset >= first_dirty_offset:
                    latest[record.key] = record.offset
    return latest


# --- cleaning one segment -----------------------------------------------------------------------------------------

def _clean_segment(log: Log, segment: LogSegment, cleaning: _Round) -> LogSegment:
    for suffix in (".log", ".index", ".timeindex", TXN_INDEX_SUFFIX):
        for stale in (CLEANED_SUFFIX, SWAP_SUFFIX):
            path = segment_path(log.directory, segment.base_offset, suffix) + stale
            if os.path.exists(path):
                os.unlink(path)
    cleaned = LogSegment(log.directory, segment.base_offset, index_interval_bytes=log.config.index_interval_bytes,
                         max_index_size=log.config.segment_index_bytes, active=True, created_ms=cleaning.now_ms,
                         suffix=CLEANED_SUFFIX)
    cleaning.transactions.cleaned_index = []
    for batch in segment.iter_batches():
        data = segment.read_bytes(batch.position, batch.size)
        kept = _clean_batch(data, cleaning)
        if kept is not None:
            header = read_batch_header(kept)
            cleaned.append([kept], [AppendBatch(len(kept), header.last_offset, header.max_timestamp)])
    cleaned.on_become_inactive()
    cleaned.flush()
    _write_cleaned_transaction_index(log.directory, segment.base_offset, cleaning.transactions.cleaned_index)
    cleaned.rename_files(CLEANED_SUFFIX, SWAP_SUFFIX)
    cleaned.next_offset = max(cleaned.next_offset, segment.next_offset)  # its last batch may have gone
    return cleaned


def _write_cleaned_transaction_index(directory: str, base_offset: int, entries: list[AbortedTxn]) -> None:
    """`<base>.txnindex.cleaned` (fsynced), only when it has entries, as Kafka creates the file on the first one.
    The swap removes the old segment's index with its other files."""
    if entries:
        write_transaction_index(segment_path(directory, base_offset, TXN_INDEX_SUFFIX) + CLEANED_SUFFIX, entries)


def _clean_batch(data: bytes, cleaning: _Round) -> bytes | None:
    """The batch with only the records to keep (Kafka's checkBatchRetention and shouldRetainRecord): the same
    bytes when all stay and no delete horizon must be set, an empty batch or None when none stays."""
    header = read_batch_header(data)
    now_ms = cleaning.now_ms
    horizon = header.base_timestamp if header.has_delete_horizon else None
    if header.is_control:
        can_discard = cleaning.transactions.on_control_batch_read(header, _control_type(data))
        discard_records = can_discard and horizon is not None and horizon <= now_ms
    else:
        can_discard = discard_records = cleaning.transactions.on_batch_read(header)
    retain_empty = ((header.producer_id >= 0 and _is_batch_last_record_of_producer(header, cleaning.producers))
                    or header.next_offset == cleaning.upper_bound_offset)
    if discard_records:
        return _encode_batch(header, [], None) if retain_empty else None
    records = list(iter_records(data, max_size=_MAX_DECOMPRESSED))
    kept = records if header.is_control else [r for r in records if _keep(r, cleaning.latest, horizon, now_ms)]
    if not kept:
        return _encode_batch(header, [], None) if retain_empty else None
    sets_horizon = horizon is None and ((header.is_control and can_discard)
                                        or any(record.value is None for record in kept))
    if sets_horizon:
        horizon = now_ms + cleaning.delete_retention_ms  # first pass to keep these: they live until then
    if len(kept) == len(records) and not sets_horizon:
        return data
    return _encode_batch(header, kept, horizon)


def _keep(record, latest: dict[bytes, int], horizon: int | None, now_ms: int) -> bool:
    if record.key is None:
        return False  # compacted topics refuse keyless records; any left from before the policy change go
    if latest.get(record.key, record.offset) > record.offset:
        return False
    return record.value is not None or horizon is None or now_ms < horizon


def _encode_batch(header, records, delete_horizon: int | None) -> bytes:
    """A batch with `header`'s fields and these records at their original offsets (Kafka's layout). With a
    `delete_horizon`, it takes baseTimestamp's place. Without records, Kafka's empty batch: the header alone,
    uncompressed, with no base timestamp."""
    attributes = header.attributes
    if not records:
        attributes &= ~(CODEC_MASK | DELETE_HORIZON_MASK)
        base_timestamp = NO_TIMESTAMP
    elif delete_horizon is not None:
        attributes |= DELETE_HORIZON_MASK
        base_timestamp = delete_horizon
    else:
        base_timestamp = records[0].timestamp
    body = bytearray()
    for record in records:
        _encode_record(body, record.offset - header.base_offset, record.timestamp - base_timestamp, record)
    if header.compression != Compression.NONE and records:
        body = bytearray(compress(header.compression, body))
    if header.timestamp_type == LOG_APPEND_TIME or not records:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = max(record.timestamp for record in records)
    out = bytearray(RECORD_BATCH_OVERHEAD) + body
    HEADER.pack_into(out, 0, header.base_offset, len(out) - LOG_OVERHEAD, header.partition_leader_epoch,
                     header.magic, 0, attributes, header.last_offset_delta, base_timestamp, max_timestamp,
                     header.producer_id, header.producer_epoch, header.base_sequence, len(records))
    with memoryview(out) as view:
        _UINT32.pack_into(out, CRC_OFFSET, crc32c(view[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def _bytes_field_size(data) -> int:
    return 1 if data is None else varint_size(len(data)) + len(data)


def _write_bytes_field(out: bytearray, data) -> None:
    if data is None:
        write_varint(out, -1)
    else:
        write_varint(out, len(data))
        out += data


def _encode_record(out: bytearray, offset_delta: int, timestamp_delta: int, record) -> None:
    headers = [(key.encode("utf-8"), value) for key, value in record.headers]
    size = (1 + varint_size(timestamp_delta) + varint_size(offset_delta) + _bytes_field_size(record.key)
            + _bytes_field_size(record.value) + varint_size(len(headers))
            + sum(_bytes_field_size(k) + _bytes_field_size(v) for k, v in headers))
    write_varint(out, size)
    out.append(0)  # record attributes: unused
    write_varlong(out, timestamp_delta)
    write_varint(out, offset_delta)
    _write_bytes_field(out, record.key)
    _write_bytes_field(out, record.value)
    write_varint(out, len(headers))
    for key, value in headers:
        _write_bytes_field(out, key)
        _write_bytes_field(out, value)
