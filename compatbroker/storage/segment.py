"""One segment of a partition log: the `.log` file of batches, its `.index` and `.timeindex`, and a `.txnindex`
(the aborted transactions whose ABORT marker it holds: see `transaction_index`) once an abort lands in it.

The three files are named by the segment's base offset in 20 digits (`00000000000000000000.log`). The `.log` file is
batches back to back, byte for byte as stored by Kafka. A segment only ever grows at its end while it is active;
after a roll it is sealed and never written again (the cleaner writes replacement segments instead).

Descriptors, as in Kafka, about one per partition: the active segment keeps its `.log` open and its indexes in
memory (written to their files on flush, seal and close). A sealed segment opens nothing until it is used; then its
`.log` is opened and its indexes mapped, and `open_segments`, one small LRU for the whole process, releases the
least recently used past `OPEN_SEALED_SEGMENTS`. The `.txnindex` keeps no descriptor: its entries are cached in
memory on first use and each abort opens, appends to and closes the file.

Readers get `(SegmentFile, position, length)` regions. `SegmentFile` owns the descriptor and closes it when the last
holder lets go, so a region taken before the segment was deleted or evicted still reads the bytes it covered.
"""
from __future__ import annotations

import errno
import os
import struct
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from ..protocol.records.batch import HEADER, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD, iter_records
from .index_file import IndexCorruptError
from .offset_index import OffsetIndex
from .time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset
from .transaction_index import (TXN_INDEX_SUFFIX, AbortedTxn, append_transaction_index, collect_aborted_txns,
                                read_transaction_index, truncate_transaction_index)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

_SCAN_CHUNK = 8192
_FIRST_SCAN_CHUNK = 256
_INT32_MAX = 2**31 - 1
_IOV_MAX = 1024
_LENGTH = struct.Struct(">i")


def segment_name(base_offset: int) -> str:
    """The 20-digit file name stem Kafka gives a segment."""
    return f"{base_offset:020d}"


def segment_path(directory: str, base_offset: int, suffix: str) -> str:
    return os.path.join(directory, segment_name(base_offset) + suffix)


class SegmentFile:
    """The open `.log` file of a segment. `fileno()` serves `os.sendfile`/`os.pread`; the descriptor is closed by
    `close()` (shutdown) or when the last reference goes away (a deleted or evicted segment still held by a reader).
    """

    __slots__ = ("fd", "path")

    def __init__(self, path: str, *, create: bool = True):
        self.path = path
        self.fd = -1
        self.fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)

    def fileno(self) -> int:
        return self.fd

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self):
        self.close()

    def __repr__(self):
        return f"SegmentFile({self.path!r})"


class OpenSegments:
    """The sealed segments that hold open handles (their `.log` descriptor, their index mappings). Past `capacity`,
    the least recently used is released: the segment drops its references, and each file closes when its last
    holder (a FileRegion, a scan in progress) lets go. Shared by every log of the process; a lock makes it usable
    from the cleaner's thread too.

    "Least recently used" is the clock approximation: a read only sets the segment's `recently_used` flag (no lock
    on the read path); eviction, which happens when a segment opens, passes over flagged segments once, clearing
    the flag, and releases the first one found unflagged."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._segments: OrderedDict[LogSegment, None] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, segment: LogSegment) -> None:
        """`segment` has opened a handle: count it, and release the least recently used past capacity."""
        evicted = []
        with self._lock:
            self._segments[segment] = None
            while len(self._segments) > max(self.capacity, 1):
                oldest, _ = self._segments.popitem(last=False)
                if oldest is segment:
                    self._segments[oldest] = None  # it is being used right now
                elif oldest.recently_used:
                    oldest.recently_used = False
                    self._segments[oldest] = None  # a second chance
                else:
                    evicted.append(oldest)
        for old in evicted:
            old.release_handles()

    def discard(self, segment: LogSegment) -> None:
        with self._lock:
            self._segments.pop(segment, None)

    def release_all(self) -> None:
        """Release every sealed segment's handles (each file closes once no reader holds it)."""
        with self._lock:
            released, self._segments = list(self._segments), OrderedDict()
        for segment in released:
            segment.release_handles()

    def __len__(self) -> int:
        return len(self._segments)


# How many sealed segments may hold open handles at once, over all logs (each: the `.log` descriptor, and before
# Python 3.13 one descriptor inside each index mapping). Not a Kafka setting: Kafka maps indexes without keeping
# descriptors, and opens sealed segments lazily the same way.
OPEN_SEALED_SEGMENTS = 128
open_segments = OpenSegments(OPEN_SEALED_SEGMENTS)


class BatchEntry(NamedTuple):
    """What the segment learns from a batch header: where it is and which offsets and timestamps it holds."""

    position: int
    base_offset: int
    size: int
    last_offset: int
    max_timestamp: int


class AppendBatch(NamedTuple):
    """A validated batch about to be written: its size, last offset and max timestamp."""

    size: int
    last_offset: int
    max_timestamp: int


class LogSegment:
    """A segment's files and the in-memory facts derived from them (size, next offset, max timestamp).

    The active segment keeps its `.log` open and its indexes in memory. A sealed one opens nothing until it is used:
    `file` opens the `.log`, the indexes map themselves, and `open_segments` bounds how many stay open. Code that
    reads a file across calls (scans, FileRegions) holds the `SegmentFile` object, never its bare descriptor.
    """

    def __init__(self, directory: str, base_offset: int, *, index_interval_bytes: int, max_index_size: int,
                 active: bool, created_ms: int = 0, suffix: str = "", next_offset: int | None = None):
        """The segment named `<base offset>.log<suffix>` and so on (the cleaner writes its output under a suffix
        and renames it into place). An `active` one is opened now (files created if missing); a sealed one (its
        `next_offset` being the next segment's base offset) only has its size read, and its indexes are
        sanity-checked on first use."""
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self._active = active
        self._log_path = segment_path(directory, base_offset, LOG_SUFFIX) + suffix
        self._file: SegmentFile | None = None
        if active:
            self._file = SegmentFile(self._log_path)
            self.size = os.fstat(self._file.fd).st_size
        else:
            self.size = os.stat(self._log_path).st_size
        read_indexes = active and self.size > 0  # an empty log's indexes can hold nothing: not worth reading
        self._offset_index = OffsetIndex(segment_path(directory, base_offset, INDEX_SUFFIX) + suffix, base_offset,
                                         max_index_size, in_memory=read_indexes, on_map=self._index_mapped)
        self._time_index = TimeIndex(segment_path(directory, base_offset, TIME_INDEX_SUFFIX) + suffix, base_offset,
                                     max_index_size, in_memory=read_indexes, on_map=self._index_mapped)
        if active and not read_indexes:
            self._offset_index.start_empty()
            self._time_index.start_empty()
        self._indexes_checked = active
        self._txn_index_path = segment_path(directory, base_offset, TXN_INDEX_SUFFIX) + suffix
        self._aborted: list[AbortedTxn] | None = None  # the `.txnindex` entries, read on first use
        self._txn_index_unsynced = False  # appended to since the last flush
        self._txn_index_created = False  # created since the last flush: its directory entry needs an fsync too
        self.created_ms = created_ms
        self.next_offset = base_offset if next_offset is None else next_offset
        self._max_timestamp: int | None = NO_TIMESTAMP if active else None  # None: read from the time index
        self._offset_of_max_timestamp = base_offset
        self._bytes_since_last_index_entry = 0
        self._rolling_timestamp: int | None = None
        self._closed = False
        self.recently_used = False  # for `open_segments`
        # Fetches repeat themselves: a partition that did not fit a response is asked for at the same offset next
        # time, and a consumer that got data asks for the offset right after it. Remembering the batch found last
        # (or the one a read stopped before, whose header it read) and where the last read ended spares the index
        # lookup and all but one header read per fetch. Truncation forgets both.
        self._last_found: BatchEntry | None = None
        self._after_last_read: tuple[int, int] | None = None  # (next offset, position of the batch holding it)

    # --- handles --------------------------------------------------------------------------------------------------

    @property
    def file(self) -> SegmentFile:
        """The open `.log` file (opened now for a sealed segment that had none)."""
        file = self._file
        if file is None:
            file = self._file = SegmentFile(self._log_path, create=False)
            open_segments.add(self)
        self.recently_used = True
        return file

    @property
    def log_path(self) -> str:
        return self._log_path

    def _index_mapped(self) -> None:
        if not self._active:
            open_segments.add(self)

    def release_handles(self) -> None:
        """Drop this sealed segment's handles (`open_segments` evicts it); they open again on next use."""
        if self._active:
            return
        self._file = None
        self._offset_index.release()
        self._time_index.release()
        if self._aborted:  # entries are read again on next use (bounded memory); "no file" stays known
            self._aborted = None

    @property
    def offset_index(self) -> OffsetIndex:
        if not self._indexes_checked:
            self._check_indexes()
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if not self._indexes_checked:
            self._check_indexes()
        return self._time_index

    def _check_indexes(self) -> None:
        """Kafka's sanity check of a sealed segment's indexes, on their first use after loading; indexes that fail
        it are rebuilt from the log (with a recovery of the segment, as Kafka does)."""
        self._indexes_checked = True
        try:
            self._offset_index.sanity_check(max(self.size, 1))
            self._time_index.sanity_check(self.next_offset)
        except IndexCorruptError:
            from .recovery import recover_segment  # recovery builds on this module
            next_offset = self.next_offset
            recover_segment(self)
            self.next_offset = max(self.next_offset, next_offset)
            self._offset_index.seal()
            self._time_index.seal()

    @property
    def max_timestamp_so_far(self) -> int:
        if self._max_timestamp is None:
            self._load_max_timestamp()
        return self._max_timestamp

    @max_timestamp_so_far.setter
    def max_timestamp_so_far(self, value: int) -> None:
        self._max_timestamp = value

    @property
    def offset_of_max_timestamp(self) -> int:
        if self._max_timestamp is None:
            self._load_max_timestamp()
        return self._offset_of_max_timestamp

    @offset_of_max_timestamp.setter
    def offset_of_max_timestamp(self, value: int) -> None:
        self._offset_of_max_timestamp = value

    def _load_max_timestamp(self) -> None:
        """A sealed segment's largest timestamp is its time index's last entry (written when it was sealed)."""
        entry = self.time_index.last_entry
        self._max_timestamp, self._offset_of_max_timestamp = entry.timestamp, entry.offset

    # --- opening --------------------------------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: str, base_offset: int, *, index_interval_bytes: int, max_index_size: int,
               now_ms: int) -> LogSegment:
        """A new, empty, active segment. Files left over at that name (an interrupted roll) are emptied."""
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            try:
                os.unlink(segment_path(directory, base_offset, suffix))
            except FileNotFoundError:
                pass
        segment = cls(directory, base_offset, index_interval_bytes=index_interval_bytes,
                      max_index_size=max_index_size, active=True, created_ms=now_ms)
        segment._offset_index.create_file()
        segment._time_index.create_file()
        return segment

    def load_state(self) -> None:
        """Derive next offset and max timestamp of the active segment from its trusted indexes and the tail of
        the `.log` file.

        Raises IndexCorruptError when the indexes disagree with the log; the caller then recovers the segment.
        """
        self.offset_index.sanity_check(max(self.size, 1))
        start = self.offset_index.lookup(2**63 - 1).position if self.offset_index.entries else 0
        last = None
        for last in self.iter_batches(start):
            pass
        self.next_offset = last.last_offset + 1 if last else self.base_offset
        if last is None and self.size:
            raise IndexCorruptError(f"{self._log_path}: no whole batch after index position {start}")
        self.time_index.sanity_check(self.next_offset)
        self._load_max_timestamp()

    # --- scanning -------------------------------------------------------------------------------------------------

    def iter_batches(self, start_position: int = 0, end_position: int | None = None) -> Iterator[BatchEntry]:
        """Yield the batch headers from `start_position` up to `end_position` (default: the segment's size).

        Reads headers only, a chunk at a time; a batch that would run past the end stops the iteration.
        """
        end = self.size if end_position is None else min(end_position, self.size)
        pos = start_position
        file = self.file  # held: the descriptor stays open while the scan is suspended, even if evicted
        fd = file.fd
        want = _FIRST_SCAN_CHUNK  # most lookups need one header: start small, read more if the scan goes on
        while pos + RECORD_BATCH_OVERHEAD <= end:
            chunk = os.pread(fd, min(want, end - pos), pos)
            want = min(want * 4, _SCAN_CHUNK)
            offset_in_chunk = 0
            while offset_in_chunk + RECORD_BATCH_OVERHEAD <= len(chunk):
                fields = HEADER.unpack_from(chunk, offset_in_chunk)
                size = fields[1] + LOG_OVERHEAD
                if size < RECORD_BATCH_OVERHEAD or pos + size > end:
                    return
                yield BatchEntry(pos, fields[0], size, fields[0] + fields[6], fields[8])
                pos += size
                offset_in_chunk += size
            if not chunk:
                return

    def read_bytes(self, position: int, length: int) -> bytes:
        file = self.file  # held across the call: an eviction elsewhere must not close it under the read
        return os.pread(file.fd, length, position)

    # --- appending ------------------------------------------------------------------------------------------------

    def append(self, buffers: Sequence, batches: Sequence[AppendBatch], size: int | None = None) -> None:
        """Write `buffers` (together: the `batches`, back to back, `size` bytes when the caller knows) at the end
        with one `pwritev`, then index the batches. If the write fails, the file is cut back to its old size: the
        segment is exactly as it was, and neither readers nor recovery see the rejected bytes."""
        position = self.size
        if size is None:
            size = sum(batch.size for batch in batches)
        try:
            if len(buffers) > _IOV_MAX or os.pwritev(self._file.fd, buffers, position) != size:
                self._write_all(buffers, position)  # a short write (rare): again, resuming until done
        except BaseException:
            os.ftruncate(self._file.fd, position)
            raise
        for batch in batches:
            self._index_batch(position, batch.size, batch.last_offset, batch.max_timestamp)
            position += batch.size
        self.size = position

    def _write_all(self, buffers: Sequence, position: int) -> None:
        """pwritev everything at `position`, resuming after a partial write. Buffers are bytes-like with one byte
        per item (bytes, or memoryviews cast to "B")."""
        pending = list(buffers)
        fd = self._file.fd
        while pending:
            written = os.pwritev(fd, pending[:_IOV_MAX], position)
            if written == 0:
                raise OSError(f"no progress writing {self._log_path}")
            position += written
            while pending and written >= len(pending[0]):
                written -= len(pending.pop(0))
            if written:
                pending[0] = pending[0][written:]

    def _index_batch(self, position: int, size: int, last_offset: int, max_timestamp: int) -> None:
        """Kafka's rule: a new index entry once more than `index.interval.bytes` were written since the last one."""
        if self._rolling_timestamp is None:
            self._rolling_timestamp = max_timestamp
        if max_timestamp > self._max_timestamp:
            self._max_timestamp, self._offset_of_max_timestamp = max_timestamp, last_offset
        offset_index, time_index = self._offset_index, self._time_index
        if (self._bytes_since_last_index_entry > self.index_interval_bytes and not offset_index.is_full
                and not time_index.is_full):  # a full index only costs longer scans until the next roll
            offset_index.append(last_offset, position)
            time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += size
        self.next_offset = last_offset + 1

    def can_hold(self, append_bytes: int, last_offset: int, segment_bytes: int) -> bool:
        """False when the append would pass `segment.bytes`, fill an index, or overflow relative offsets."""
        if self.size and self.size > segment_bytes - append_bytes:
            return False
        if self.offset_index.is_full or self.time_index.is_full:
            return False
        return last_offset - self.base_offset <= _INT32_MAX

    def time_waited_for_roll(self, now_ms: int, max_timestamp_in_append: int) -> int:
        """How long the segment has been open for `segment.ms`, Kafka's way: from the first batch's max timestamp
        to the newest timestamp being appended, or, without timestamps, from the segment's creation to now."""
        if self._rolling_timestamp is None and self.size:
            first = next(self.iter_batches(0), None)
            self._rolling_timestamp = first.max_timestamp if first else NO_TIMESTAMP
        if self._rolling_timestamp is not None and self._rolling_timestamp >= 0:
            return max_timestamp_in_append - self._rolling_timestamp
        return now_ms - self.created_ms

    # --- reading --------------------------------------------------------------------------------------------------

    def translate_offset(self, offset: int, start_position: int = 0) -> BatchEntry | None:
        """The first batch at or after `start_position` whose last offset is >= `offset`; None if none."""
        found = self._last_found
        if found is not None and found.base_offset <= offset <= found.last_offset and found.position >= start_position:
            return found
        after = self._after_last_read
        if after is not None and after[0] == offset and after[1] >= start_position:
            batch = self._batch_at(after[1])  # a consumer reading on: the batch where its last read ended
            if batch is not None and batch.last_offset >= offset:
                self._last_found = batch
                return batch
            position = after[1]
        else:
            position = max(start_position, self.offset_index.lookup(offset).position)
        for batch in self.iter_batches(position):
            if batch.last_offset >= offset:
                self._last_found = batch
                return batch
        return None

    def _batch_at(self, position: int) -> BatchEntry | None:
        """The header of the whole batch at `position` (one read of its header), None when there is none."""
        size = self.size
        if position + RECORD_BATCH_OVERHEAD > size:
            return None
        file = self.file  # held across the read: an eviction elsewhere must not close it under the read
        header = os.pread(file.fd, RECORD_BATCH_OVERHEAD, position)
        if len(header) < RECORD_BATCH_OVERHEAD:
            return None
        fields = HEADER.unpack(header)
        batch_size = fields[1] + LOG_OVERHEAD
        if batch_size < RECORD_BATCH_OVERHEAD or position + batch_size > size:
            return None
        return BatchEntry(position, fields[0], batch_size, fields[0] + fields[6], fields[8])

    def _forget_positions(self) -> None:
        self._last_found = self._after_last_read = None

    def read(self, offset: int, max_bytes: int, *, max_position: int | None = None,
             min_one_batch: bool = True) -> tuple[int, int] | None:
        """(position, length) of the whole batches from the one holding `offset`, at most `max_bytes` of them
        (but one batch even if larger, with `min_one_batch`), ending before `max_position`. None when the segment
        holds no such batch; length 0 when there is one but it does not fit `max_bytes`."""
        first = self.translate_offset(offset)
        size = self.size
        end_limit = size if max_position is None or max_position > size else max_position
        if first is None or first.position + first.size > end_limit:
            return None
        if first.size > max_bytes:
            if not min_one_batch:
                return first.position, 0
            end, next_offset = first.position + first.size, first.last_offset + 1
        else:
            target_end = first.position + max_bytes
            end, next_offset = self._last_batch_end_before(first, end_limit if target_end > end_limit else target_end)
        if end < size and next_offset is not None:
            self._after_last_read = (next_offset, end)
        return first.position, end - first.position

    def _last_batch_end_before(self, first: BatchEntry, target_end: int) -> tuple[int, int | None]:
        """(end, the offset after it) of the last whole batch that finishes by `target_end`, `first` being the
        first batch read; the offset is None when no header read tells it. The header of the batch that does not
        fit, when read here, is kept as `_last_found`: the next fetch most likely starts in it."""
        if target_end >= self.size:
            return self.size, self.next_offset
        end, next_offset = first.position + first.size, first.last_offset + 1
        if target_end - end < RECORD_BATCH_OVERHEAD:
            return end, next_offset  # no other batch fits: no index lookup, no header read
        start = self.offset_index.lookup_by_position(target_end).position
        if start > end:  # the batches up to the index entry fit whole
            end, next_offset = start, None
        for batch in self.iter_batches(end):
            if batch.position + batch.size > target_end:
                self._last_found = batch
                return end, batch.base_offset
            end, next_offset = batch.position + batch.size, batch.last_offset + 1
        return end, next_offset

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> TimestampOffset | None:
        """The first record at or after `start_offset` with a timestamp >= `timestamp`, as (timestamp, offset)."""
        indexed = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(indexed.offset, start_offset)).position
        for batch in self.iter_batches(position):
            if batch.max_timestamp >= timestamp and batch.last_offset >= start_offset:
                for record in iter_records(self.read_bytes(batch.position, batch.size), max_size=2**31 - 1):
                    if record.timestamp >= timestamp and record.offset >= start_offset:
                        return TimestampOffset(record.timestamp, record.offset)
        return None

    def first_record_with_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """The first record whose timestamp equals `timestamp` (the max timestamp: ListOffsets MAX_TIMESTAMP)."""
        for batch in self.iter_batches(0):
            if batch.max_timestamp == timestamp:
                for record in iter_records(self.read_bytes(batch.position, batch.size), max_size=2**31 - 1):
                    if record.timestamp == timestamp:
                        return TimestampOffset(record.timestamp, record.offset)
        return None

    # --- aborted transactions -------------------------------------------------------------------------------------

    def aborted_transactions(self) -> list[AbortedTxn]:
        """The entries of the `.txnindex` ([] without one), cached after the first read."""
        if self._aborted is None:
            self._aborted = read_transaction_index(self._txn_index_path)
        return self._aborted

    def append_aborted_transaction(self, txn: AbortedTxn) -> None:
        """Record an abort whose marker this segment holds (the file is created by the first). An abort at or
        before the last one recorded is there already (a replay after a crash that kept the index) and is skipped."""
        entries = self.aborted_transactions()
        if entries and entries[-1].last_offset >= txn.last_offset:
            return
        if append_transaction_index(self._txn_index_path, txn):
            self._txn_index_created = True
        self._aborted = [*entries, txn]  # a new list: a reader of the old one sees it unchanged
        self._txn_index_unsynced = True

    def collect_aborted_transactions(self, fetch_offset: int,
                                     upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Kafka's search of this segment's index (see `transaction_index.collect_aborted_txns`)."""
        return collect_aborted_txns(self.aborted_transactions(), fetch_offset, upper_bound_offset)

    def truncate_aborted_from(self, offset: int) -> None:
        """Drop the entries of aborts whose marker is at or after `offset` (Kafka's TransactionIndex.truncateTo):
        truncation, and recovery of a segment whose tail was cut off."""
        entries = self.aborted_transactions()
        kept = [entry for entry in entries if entry.last_offset < offset]
        if len(kept) != len(entries):
            truncate_transaction_index(self._txn_index_path, len(kept))
            self._aborted = kept

    def offset_at_position(self, position: int) -> int:
        """The first offset of the batch at `position` (the segment's next offset at or past its end)."""
        if position >= self.size:
            return self.next_offset
        after = self._after_last_read
        if after is not None and after[1] == position:
            return after[0]
        batch = next(self.iter_batches(position), None)
        return self.next_offset if batch is None else batch.base_offset

    # --- truncation and recovery ----------------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove the batch holding `offset` and everything after it; returns the bytes removed."""
        batch = self.translate_offset(offset)
        if batch is None:
            return 0
        removed = self.size - batch.position
        self._forget_positions()
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        os.ftruncate(self._file.fd, batch.position)  # the active segment's (truncation makes it active first)
        self.size = batch.position
        self.next_offset = batch.base_offset if batch.position else self.base_offset
        self.truncate_aborted_from(self.next_offset)
        entry = self.time_index.last_entry
        self.max_timestamp_so_far, self.offset_of_max_timestamp = entry.timestamp, entry.offset
        self._bytes_since_last_index_entry = 0
        if batch.position == 0:
            self._rolling_timestamp = None
        return removed

    def reset_for_recovery(self) -> None:
        """Drop both indexes and the derived state; `recovery.recover_segment` then re-indexes batch by batch."""
        self._forget_positions()
        self._indexes_checked = True  # rebuilt from the log: nothing left to check
        self._offset_index.reset()
        self._time_index.reset()
        self.next_offset = self.base_offset
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset
        self._bytes_since_last_index_entry = 0
        self._rolling_timestamp = None

    def index_recovered_batch(self, position: int, size: int, last_offset: int, max_timestamp: int) -> None:
        self._index_batch(position, size, last_offset, max_timestamp)

    def truncate_file(self, position: int) -> None:
        self._forget_positions()
        file = self.file
        os.ftruncate(file.fd, position)
        self.size = position

    # --- life cycle -----------------------------------------------------------------------------------------------

    def on_become_inactive(self) -> None:
        """Seal: write the final time index entry and both indexes to their files, as Kafka does; from now on the
        indexes are mapped when used, and the segment's handles count in `open_segments`."""
        self._time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp, skip_full_check=True)
        self._offset_index.seal()
        self._time_index.seal()
        self._active = False
        if self._file is not None:
            open_segments.add(self)

    def seal_loaded(self) -> None:
        """After loading: a sealed segment whose indexes recovery rebuilt in memory writes them out and maps them
        from now on (the others were never read into memory)."""
        if self._offset_index.in_memory or self._time_index.in_memory:
            self._offset_index.seal()
            self._time_index.seal()

    def make_active(self) -> None:
        """Make this segment the one appended to (the last after a load or a truncation): keep its `.log` open and
        read its indexes into memory."""
        if self._active:
            return
        if not self._indexes_checked:
            self._check_indexes()
        if self._max_timestamp is None:
            self._load_max_timestamp()
        open_segments.discard(self)
        self._file = self._file or SegmentFile(self._log_path)
        self._offset_index.load_in_memory()
        self._time_index.load_in_memory()
        self._active = True

    def flush(self) -> None:
        """fsync the log and the indexes (writing the active segment's new entries first); safe to run in an
        executor thread while the loop appends, rolls or evicts (a segment deleted meanwhile is skipped). It does
        not touch `open_segments`: a sealed segment without an open file is fsynced by path."""
        if self._closed:
            return  # the log was closed (after its own flush) or the segment deleted
        file = self._file
        fd = -1 if file is None else file.fd
        try:
            if fd >= 0:
                os.fsync(fd)
            else:
                fd = os.open(self._log_path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno == errno.EBADF:
                return  # closed by the loop meanwhile: the segment was closed or deleted
            raise
        self._offset_index.persist(sync=True)
        self._time_index.persist(sync=True)
        self._flush_txn_index()

    def _flush_txn_index(self) -> None:
        if self._txn_index_unsynced:
            self._txn_index_unsynced = False  # first: an abort appended during the fsync sets it again
            try:
                fd = os.open(self._txn_index_path, os.O_RDONLY)
            except FileNotFoundError:
                return  # renamed or deleted meanwhile
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def take_created_files(self) -> bool:
        """Whether a file of this segment was created since the last call (the `.txnindex`): the log's flush
        then fsyncs the directory as well."""
        created, self._txn_index_created = self._txn_index_created, False
        return created

    def rename_files(self, old_suffix: str, new_suffix: str) -> None:
        """Rename the files (three, four with a `.txnindex`) from `<name><old_suffix>` to `<name><new_suffix>`
        (for example "" to ".deleted"); open descriptors stay valid. Indexes go first (`.index`, `.timeindex`, then
        `.txnindex`), so a `.log` under the new suffix means all were renamed (what loading relies on for `.swap`)."""
        for index in (self._offset_index, self._time_index):
            index.rename(index.path[:len(index.path) - len(old_suffix)] + new_suffix)
        txn_stem = self._txn_index_path[:len(self._txn_index_path) - len(old_suffix)]
        try:
            os.rename(self._txn_index_path, txn_stem + new_suffix)
        except FileNotFoundError:
            pass  # no abort in this segment
        self._txn_index_path = txn_stem + new_suffix
        stem = self._log_path[:len(self._log_path) - len(old_suffix)]
        os.rename(self._log_path, stem + new_suffix)
        self._log_path = stem + new_suffix
        if self._file is not None:
            self._file.path = self._log_path

    def close(self) -> None:
        """Seal the time index, write and drop the indexes, close the log (shutdown)."""
        if self._closed:
            return
        self._closed = True
        open_segments.discard(self)
        if self._active:
            self._time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp,
                                          skip_full_check=True)
        self._offset_index.close()
        self._time_index.close()
        self._active = False
        file, self._file = self._file, None
        if file is not None:
            file.close()

    def delete_files(self) -> None:
        """Unmap the indexes and unlink all the files. The `.log` descriptor is not closed here: readers may
        still hold it, and it closes with its last reference."""
        open_segments.discard(self)
        self._offset_index.delete()
        self._time_index.delete()
        for path in (self._txn_index_path, self._log_path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def __repr__(self):
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, next_offset={self.next_offset})"
