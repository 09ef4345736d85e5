"""Compaction of `cleanup.policy=compact` logs: keep the latest record of every key.

A pass has two halves so that it never blocks appends or reads:

1. `prepare_clean` (may run in an executor thread): over the sealed segments below the cleanable limit, map every
   key of the dirty part (offsets at or after the first dirty offset) to its last offset, then write a cleaned copy
   of each sealed segment as `<base>.log.cleaned` (with its indexes), fsync it and rename it to `.swap`. It only
   reads sealed segments, which never change, through `pread` on their descriptors.
2. `commit_clean` (on the loop): swap the cleaned segments in for the old ones (`Log.replace_segments`), unless
   retention or truncation changed those segments meanwhile, in which case the pass is thrown away.

What is kept, as in Kafka: offsets never change (a cleaned batch keeps its base offset and last offset delta, so
gaps appear inside batches); a batch's producer id, epoch, base sequence, attributes and partition leader epoch are
kept; a batch all of whose records go is kept as an empty batch when it carries a producer id (producer state
needs it: header only, no codec, no base timestamp) and dropped otherwise; control batches are kept. A batch whose
records all survive is copied byte for byte; otherwise its surviving records are re-encoded with the same codec (our
own small encoder below, since the records package builds only batches with consecutive offsets).

Tombstones (null values) follow Kafka's delete horizon (KIP-534): the first pass that keeps a batch holding a
tombstone rewrites it with a delete horizon of now + `delete.retention.ms` (stored in baseTimestamp, flagged by
attribute bit 6; record timestamps stay, as deltas from it). A later pass drops the batch's tombstones once now has
reached its horizon. So a consumer replaying the log gets `delete.retention.ms` from the first cleaning to see them.
Deviations: aborted transactions are not removed (so markers get no horizon); cleaned segments replace old ones one
for one instead of being merged.

The cleanable limit is the active segment, pulled back by `min.compaction.lag.ms`; `needs_cleaning` applies
`min.cleanable.dirty.ratio` (dirty bytes over all sealed bytes) and `max.compaction.lag.ms`.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from crc32c import crc32c

from ..protocol.records.batch import (ATTRIBUTES_OFFSET, CRC_OFFSET, DELETE_HORIZON_MASK, HEADER, LOG_APPEND_TIME,
                                      LOG_OVERHEAD, NO_TIMESTAMP, RECORD_BATCH_OVERHEAD, iter_records,
                                      read_batch_header)
from ..protocol.records.compression import CODEC_MASK, Compression, compress
from ..protocol.records.varint import varint_size, write_varint, write_varlong
from .log import Log
from .segment import CLEANED_SUFFIX, SWAP_SUFFIX, AppendBatch, LogSegment

_MAX_DECOMPRESSED = 2**31 - 1  # the log's own batches: they were bounded when they were produced
_UINT32 = struct.Struct(">I")


@dataclass
class CleanPlan:
    """The result of `prepare_clean`: cleaned segments (under `.swap`) to put in place of `old`."""

    old: list[LogSegment]
    new: list[LogSegment]
    first_dirty_offset: int


def cleanable_limit(log: Log, now_ms: int) -> int:
    """Offsets below this may be compacted: the sealed segments, minus those younger than min.compaction.lag.ms."""
    limit_index = len(log.segments) - 1
    lag = log.config.min_compaction_lag_ms
    if lag > 0:
        for index, segment in enumerate(log.segments[:-1]):
            if segment.max_timestamp_so_far > now_ms - lag:
                limit_index = index
                break
    return log.segments[limit_index].base_offset


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
    latest = _key_map(segments, first_dirty_offset)
    new = [_clean_segment(log, segment, latest, now_ms=now_ms) for segment in segments]
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


# --- the key map --------------------------------------------------------------------------------------------------

def _key_map(segments: list[LogSegment], first_dirty_offset: int) -> dict[bytes, int]:
    """Key -> last offset, over the records at or after `first_dirty_offset`. Keys of the clean part stay unless a
    dirty record supersedes them."""
    latest: dict[bytes, int] = {}
    for segment in segments:
        if segment.next_offset <= first_dirty_offset:
            continue
        for batch in segment.iter_batches():
            if batch.last_offset < first_dirty_offset:
                continue
            data = segment.read_bytes(batch.position, batch.size)
            if read_batch_header(data).is_control:
                continue
            for record in iter_records(data, max_size=_MAX_DECOMPRESSED):
                if record.key is not None and record.offset >= first_dirty_offset:
                    latest[record.key] = record.offset
    return latest


# --- cleaning one segment -----------------------------------------------------------------------------------------

def _clean_segment(log: Log, segment: LogSegment, latest: dict[bytes, int], *, now_ms: int) -> LogSegment:
    for suffix in (".log", ".index", ".timeindex"):
        for stale in (CLEANED_SUFFIX, SWAP_SUFFIX):
            path = os.path.join(log.directory, f"{segment.base_offset:020d}{suffix}{stale}")
            if os.path.exists(path):
                os.unlink(path)
    cleaned = LogSegment(log.directory, segment.base_offset, index_interval_bytes=log.config.index_interval_bytes,
                         max_index_size=log.config.segment_index_bytes, active=True, created_ms=now_ms,
                         suffix=CLEANED_SUFFIX)
    for batch in segment.iter_batches():
        data = segment.read_bytes(batch.position, batch.size)
        kept = _clean_batch(data, latest, now_ms, log.config.delete_retention_ms)
        if kept is not None:
            header = read_batch_header(kept)
            cleaned.append([kept], [AppendBatch(len(kept), header.last_offset, header.max_timestamp)])
    cleaned.on_become_inactive()
    cleaned.flush()
    cleaned.rename_files(CLEANED_SUFFIX, SWAP_SUFFIX)
    cleaned.next_offset = max(cleaned.next_offset, segment.next_offset)  # its last batch may have gone
    return cleaned


def _clean_batch(data: bytes, latest: dict[bytes, int], now_ms: int, delete_retention_ms: int) -> bytes | None:
    """The batch with only the records to keep: the same bytes when all stay (and no delete horizon must be set),
    None when it should vanish."""
    header = read_batch_header(data)
    if header.is_control:
        return data
    horizon = header.base_timestamp if header.has_delete_horizon else None
    records = list(iter_records(data, max_size=_MAX_DECOMPRESSED))
    kept = [r for r in records if _keep(r, latest, horizon, now_ms)]
    if not kept:
        return _encode_batch(header, [], None) if header.producer_id >= 0 else None
    sets_horizon = horizon is None and any(record.value is None for record in kept)
    if sets_horizon:
        horizon = now_ms + delete_retention_ms  # first pass to keep these tombstones: they live until then
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
