"""Recovery of a partition log after an unclean shutdown.

Bytes after the recovery point may never have reached the disk whole. Two failure kinds look different on disk: a
torn tail (the file ends inside a batch) and garbage (the file grew, but the data blocks were never written, so the
tail reads as zeros or stale bytes). Both are caught by the same rule: walking the segment from its start, a batch is
valid when its header parses (magic 2, a length of at least a header), it fits in the file, its offsets follow the
previous batch, and its CRC-32C matches. The segment is truncated at the first invalid byte, its indexes are rebuilt
from the valid batches, and every later segment is deleted: nothing after a hole can be trusted.

Segments wholly before the recovery point are trusted (they were fsynced) and only sanity-checked: a sealed one on
its first use (`LogSegment.offset_index`), which recovers it when its indexes fail the check.

Producer state is rebuilt after recovery, from the batches recovery kept (`iter_batch_headers` reads their headers),
so a batch cut off here never counts as written for deduplication either. The same replay restores the open
transactions and writes the `.txnindex` entries of aborts whose entry did not survive; recovery itself only drops
the entries of aborts whose marker it cut off.
"""
from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from crc32c import crc32c

from ..protocol.records.batch import (ATTRIBUTES_OFFSET, HEADER, LOG_OVERHEAD, MAGIC, MIN_BATCH_LENGTH,
                                      RECORD_BATCH_OVERHEAD, BatchHeader)
from .segment import LogSegment, SegmentFile

_READ_CHUNK = 4 << 20
_HEADER_CHUNK = 64 << 10  # header scans: many small batches per read, little wasted on large ones
_INT32_MAX = 2**31 - 1


class ValidBatch(NamedTuple):
    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int


def iter_valid_batches(file: SegmentFile, end: int, segment_base_offset: int) -> Iterator[ValidBatch]:
    """Yield the batches of `file` from position 0 while they are valid; stop at the first invalid one. The file
    object is held (not its bare descriptor), so it stays open while the scan is suspended.

    Reads the file in large chunks and checks CRCs on views of them, so a 1 GiB segment costs a read of it and one
    CRC pass, not a Python call per byte.
    """
    fd = file.fd
    buf, buf_start, pos = b"", 0, 0
    next_offset = segment_base_offset
    while pos + RECORD_BATCH_OVERHEAD <= end:
        rel = pos - buf_start
        if rel + RECORD_BATCH_OVERHEAD > len(buf):
            buf, buf_start, rel = os.pread(fd, min(_READ_CHUNK, end - pos), pos), pos, 0
            if len(buf) < RECORD_BATCH_OVERHEAD:
                return
        (base_offset, length, _, magic, crc, _, last_delta, _, max_timestamp, *_) = HEADER.unpack_from(buf, rel)
        size = length + LOG_OVERHEAD
        if (magic != MAGIC or length < MIN_BATCH_LENGTH or pos + size > end or base_offset < next_offset
                or last_delta < 0 or base_offset + last_delta - segment_base_offset > _INT32_MAX):
            return
        if rel + size > len(buf):
            buf, buf_start, rel = os.pread(fd, max(_READ_CHUNK, size) if end - pos > size else size, pos), pos, 0
            if len(buf) < size:
                return
        with memoryview(buf) as view:
            if crc32c(view[rel + ATTRIBUTES_OFFSET:rel + size]) != crc:
                return
        yield ValidBatch(pos, size, base_offset, base_offset + last_delta, max_timestamp)
        next_offset = base_offset + last_delta + 1
        pos += size


def iter_batch_headers(file: SegmentFile, start: int, end: int) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) of the batches of `file` from position `start` to `end`, without reading the
    records or checking CRCs (the bytes were recovered or fsynced already). Stops at a batch that does not fit.
    The file object is held, so it stays open while the scan is suspended.
    """
    fd = file.fd
    buf, buf_start, pos = b"", start, start
    while pos + RECORD_BATCH_OVERHEAD <= end:
        rel = pos - buf_start
        if rel + RECORD_BATCH_OVERHEAD > len(buf):
            buf, buf_start, rel = os.pread(fd, min(_HEADER_CHUNK, end - pos), pos), pos, 0
            if len(buf) < RECORD_BATCH_OVERHEAD:
                return
        header = BatchHeader(*HEADER.unpack_from(buf, rel))
        if header.batch_length < MIN_BATCH_LENGTH or pos + header.size > end:
            return
        yield pos, header
        pos += header.size


def recover_segment(segment: LogSegment) -> int:
    """Rebuild the segment's indexes from its valid batches and cut the file after them; returns bytes cut."""
    segment.reset_for_recovery()
    valid_end = 0
    for batch in iter_valid_batches(segment.file, segment.size, segment.base_offset):
        segment.index_recovered_batch(batch.position, batch.size, batch.last_offset, batch.max_timestamp)
        valid_end = batch.position + batch.size
    truncated = segment.size - valid_end
    if truncated:
        segment.truncate_file(valid_end)
    segment.truncate_aborted_from(segment.next_offset)
    segment.time_index.maybe_append(segment.max_timestamp_so_far, segment.offset_of_max_timestamp,
                                    skip_full_check=True)
    return truncated


class RecoveryResult(NamedTuple):
    kept: list[LogSegment]
    dropped: list[LogSegment]
    truncated_bytes: int


def recover_segments(segments: Sequence[LogSegment], recovery_point: int) -> RecoveryResult:
    """Recover every segment that may hold bytes at or after `recovery_point` (ascending base offsets).

    The first segment that loses bytes ends the log (it is kept, possibly empty): the segments after it are returned
    as `dropped` for the caller to delete.
    """
    kept: list[LogSegment] = []
    truncated_total = 0
    for index, segment in enumerate(segments):
        following = segments[index + 1].base_offset if index + 1 < len(segments) else None
        if following is not None and following <= recovery_point:
            kept.append(segment)
            continue
        truncated = recover_segment(segment)
        truncated_total += truncated
        kept.append(segment)
        if truncated:
            return RecoveryResult(kept, list(segments[index + 1:]), truncated_total)
    return RecoveryResult(kept, [], truncated_total)
