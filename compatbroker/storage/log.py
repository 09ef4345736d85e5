"""The log of one partition: an ordered list of segments, of which the last is active.

Offsets: the log start offset (first offset a reader may ask for), the log end offset (next offset to assign), the
high watermark and the recovery point (everything below it was fsynced). The high watermark follows the log end
offset until replication first sets it (`update_high_watermark`: the in-sync replicas' minimum log end offset on a
leader, the leader's one on a follower); from then on it is state of its own, clamped to [log start, log end],
pulled down by truncation, and checkpointed by the LogManager in `replication-offset-checkpoint`. `read` reports
it but does not stop at it: a consumer's Fetch passes it as `max_offset`, a follower's reads to the log end.

Replicas (`append_as_follower`) append the leader's batches byte for byte: offsets, leader epochs and producer ids
as the leader wrote them, with the same producer state, `.txnindex` and leader epoch cache as a result.

Concurrency: the broker calls everything from its event loop. The segment list is copy-on-write: roll, retention,
truncation and compaction build a new tuple and swap it in, so a `read` works on the list it started with, and a
`FileRegion` it returned keeps its segment's file open even after the segment is deleted or its handles evicted.
`flush()` only fsyncs and moves the recovery point, and may run in an executor thread while the loop keeps appending.

Flush policy (Kafka's), decided here but run by the caller, since an fsync must not block the event loop:
- `flush.messages`: once that many offsets lie past the recovery point, `append` answers `flush_needed=True`; the
  broker runs `flush()` (in an executor) and acknowledges the produce only after it returns.
- `flush.ms`, and segment rolls: `flush_due` says when `maybe_flush` (also run in an executor) has work: data older
  than `flush.ms` since the last flush, or a rolled segment not fsynced yet (Kafka flushes a segment once it is
  rolled, off the append path, which keeps recovery down to the active segment).
The defaults never flush for messages or time: the page cache and recovery take care of durability, as in Kafka.

CRC-32C: checked inline by validation, once per batch, before anything is written (so a rejected append leaves the
log exactly as it was). Until issue 21 a worker thread checked the CRC of payloads of 512 KiB and more beside the
`pwritev` copy; measured on 2 cores (2026-11-27, two sets of runs, medians), that cost more broker CPU than it saved,
for no throughput: librdkafka producing 1 KiB records (drive.py, which keeps the other core busy: 9 passes a set)
1.77 and 1.37 core-s/GB with the worker against 1.44 and 1.29 inline, at 190/378 against 219/371 MB/s; a raw client
sending 1 MiB requests (rawload.py, 3 runs a set) 1.22 and 1.06 ms of broker CPU per request against 1.04 and 1.05.
The hand-off and the second core reading the bytes cold cost more than the overlap wins: perf puts the CRC itself
at about 6% of the broker's CPU on that path.

Producer state (`producer_state`): batches with a producer id are checked against it before anything is written
(see `producer_state` for Kafka's rules); a retry of a remembered batch writes nothing and answers the original
offsets with `duplicate=True`. Snapshots of it are written at every roll (at the new segment's base offset, fsynced
by the next flush) and at close (at the log end offset); opening, and truncation, load the newest snapshot at or
below the log end offset and replay the batch headers after it. Snapshots below the log start offset are deleted,
and at most one per segment plus the newest are kept.

Transactions (Kafka's rules): the last stable offset is the first offset of the earliest open transaction, else the
high watermark. Every abort a marker completes is recorded in the `.txnindex` of the segment holding the marker,
and `collect_aborted_transactions` answers a read_committed fetch from those indexes without reading records. The
replay at open and after truncation restores the open transactions and the index entries a crash lost, so after a
SIGKILL an open transaction stays open until its marker arrives.
"""
from __future__ import annotations

import bisect
import itertools
import os
import struct
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from ..protocol.records.batch import set_log_append_time, stamp_batch
from ..protocol.wire import FileRegion
from .checkpoints import LEADER_EPOCH_CHECKPOINT, fsync_path
from .errors import OffsetOutOfRangeError, PolicyViolationError
from .index_file import IndexCorruptError
from .leader_epoch import LeaderEpochCache
from .log_config import LogConfig
from .producer_state import BatchMetadata, CompletedTxn, ProducerBatch, ProducerStateManager, producer_batch
from .recovery import iter_batch_headers, recover_segment, recover_segments
from .segment import (CLEANED_SUFFIX, DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX, TIME_INDEX_SUFFIX,
                      AppendBatch, LogSegment, segment_name, segment_path)
from .time_index import TimestampOffset
from .transaction_index import TXN_INDEX_SUFFIX, AbortedTxn
from .validator import CLIENT, CheckedBatch, validate_follower_records, validate_records

_STAMP_PREFIX = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch: the bytes before magic

_REPLAY_CHUNK = 4096  # producer batches applied at a time when replaying: bounds the completed transactions held


class AppendResult(NamedTuple):
    base_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    flush_needed: bool = False  # flush.messages reached: run flush() before acknowledging
    duplicate: bool = False  # a producer's retry of a batch already in the log: nothing was written


class ReadResult(NamedTuple):
    regions: list[FileRegion]
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int
    # With `aborted=True`: the aborted transactions overlapping the first region (Kafka's addAbortedTransactions).
    aborted_transactions: list[AbortedTxn] | None = None

    @property
    def size(self) -> int:
        return sum(region.length for region in self.regions)


@dataclass
class _PendingDelete:
    deadline_ms: int
    segment: LogSegment


@dataclass
class _FlushState:
    last_flush_ms: int = 0
    rolled_up_to: int | None = None  # rolled segments below this offset still await their fsync
    truncations: int = 0  # bumped by every truncation: a flush that overlapped one must not move the recovery point
    pending_deletes: list[_PendingDelete] = field(default_factory=list)


class Log:
    """A partition log in `directory` (`<topic>-<partition>`). Build with `Log.open`."""

    def __init__(self, directory: str, topic: str, partition: int, config: LogConfig, segments: tuple,
                 log_start_offset: int, recovery_point: int, now_ms: int, *, names: set[str] | None = None):
        """`names`: the files of `directory` when the caller has just listed it (saves listing it again)."""
        # None: the high watermark follows the log end offset (a single replica). Replication sets it.
        self._high_watermark: int | None = None
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self._segments: tuple[LogSegment, ...] = segments
        self._bases: tuple[int, ...] = tuple(segment.base_offset for segment in segments)
        self.log_start_offset = log_start_offset
        self.recovery_point = recovery_point
        self.epochs = LeaderEpochCache(directory, exists=None if names is None else LEADER_EPOCH_CHECKPOINT in names)
        self.producer_state = ProducerStateManager(directory, names=names)
        self._flush = _FlushState(last_flush_ms=now_ms)
        self._flush_lock = threading.Lock()  # one flush at a time (they run in executor threads)
        self._offsets_lock = threading.Lock()  # recovery point and roll bookkeeping, shared with the flush thread
        self.closed = False

    # --- opening --------------------------------------------------------------------------------------------------

    @classmethod
    def open(cls, directory: str, topic: str, partition: int, config: LogConfig, *, log_start_offset: int = 0,
             recovery_point: int = 0, clean_shutdown: bool = False, now_ms: int = 0,
             high_watermark: int | None = None) -> Log:
        """Load (or create) the log in `directory`, recovering what an unclean shutdown may have torn.
        `high_watermark`: the checkpointed one of a replicated partition (None: it follows the log end offset)."""
        try:
            names = _finish_interrupted_operations(directory)
        except FileNotFoundError:
            os.makedirs(directory, exist_ok=True)
            names = set()
        segments = _open_segments(directory, names, config, recovery_point, clean_shutdown, now_ms)
        if not segments:
            segments = [_new_segment(directory, log_start_offset, config, now_ms)]
        else:
            segments[-1].make_active()
        log_start_offset = max(log_start_offset, segments[0].base_offset)
        log_end_offset = segments[-1].next_offset
        log = cls(directory, topic, partition, config, tuple(segments), min(log_start_offset, log_end_offset),
                  min(recovery_point, log_end_offset), now_ms, names=names)
        if not clean_shutdown and log.recovery_point < log_end_offset:
            log.flush()  # what recovery kept is now durable: it will not be scanned again
        log.epochs.truncate_from_end(log_end_offset)
        log._rebuild_producer_state(clean_shutdown=clean_shutdown)
        if high_watermark is not None:
            log.update_high_watermark(high_watermark)
        return log

    # --- offsets --------------------------------------------------------------------------------------------------

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return self._segments

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        """The offset below which every in-sync replica has the records: the log end offset until
        `update_high_watermark` is first called (a partition with one replica)."""
        high_watermark = self._high_watermark
        return self._segments[-1].next_offset if high_watermark is None else high_watermark

    @property
    def high_watermark_set(self) -> bool:
        """Whether the high watermark is state of its own (replication set it) rather than the log end offset."""
        return self._high_watermark is not None

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, clamped to [log start offset, log end offset], as Kafka's
        updateHighWatermark does; returns the value set."""
        offset = min(max(offset, self.log_start_offset), self.log_end_offset)
        self._high_watermark = offset
        return offset

    @property
    def last_stable_offset(self) -> int:
        """First offset of the earliest open transaction (at least the log start offset, as Kafka's
        updateFirstUnstableOffset has it), else the high watermark."""
        return self._last_stable_offset(self.high_watermark)

    def _last_stable_offset(self, high_watermark: int) -> int:
        first_unstable = self.producer_state.first_unstable_offset
        if first_unstable is None:
            return high_watermark
        return min(max(first_unstable, self.log_start_offset), high_watermark)

    def ongoing_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of its open transaction, in first-offset order."""
        return self.producer_state.ongoing_transactions()

    @property
    def size(self) -> int:
        return sum(segment.size for segment in self._segments)

    def _set_segments(self, segments) -> None:
        """Swap in a new segment list (copy-on-write: readers keep the tuple they started with)."""
        self._segments = tuple(segments)
        self._bases = tuple(segment.base_offset for segment in self._segments)

    # --- append ---------------------------------------------------------------------------------------------------

    def append(self, records, *, leader_epoch: int, now_ms: int, origin: str = CLIENT) -> AppendResult:
        """Validate, stamp and write a produce payload; returns its offsets. Nothing is written on error.

        `origin` is "client" for Produce and "coordinator" for the broker's own writes (which may hold control
        batches). An empty payload appends nothing and answers base offset -1, as Kafka does. With
        `flush_needed` in the result, the caller must run `flush()` before acknowledging the payload.
        """
        checked = validate_records(records, self.config, now_ms, origin=origin)
        if not checked:
            return AppendResult(-1, -1, -1, self.log_start_offset)
        return self._append_checked(checked, leader_epoch, now_ms, origin)

    def _append_checked(self, checked: list[CheckedBatch], leader_epoch: int, now_ms: int,
                        origin: str) -> AppendResult:
        config = self.config
        append_time = now_ms if config.log_append_time else -1
        active = self._segments[-1]
        base_offset = active.next_offset
        producer_batches = _producer_batches(checked, base_offset, append_time)
        if producer_batches:
            duplicate = self.producer_state.check_append(producer_batches, origin)
            if duplicate is not None:
                return self._duplicate_result(duplicate)
        buffers, batches, size, max_timestamp = _stamp_batches(checked, base_offset, leader_epoch, append_time)
        last_offset = batches[-1].last_offset
        if self._should_roll(size, last_offset, max_timestamp, now_ms):
            active = self.roll(now_ms)
        active.append(buffers, batches, size)
        if producer_batches:
            completed = self.producer_state.update(producer_batches)
            if completed:
                self._index_aborts(completed)
        self.epochs.assign(leader_epoch, base_offset)
        flush_needed = last_offset + 1 - self.recovery_point >= config.flush_messages
        return AppendResult(base_offset, last_offset, append_time, self.log_start_offset, flush_needed)

    def append_as_follower(self, records, *, now_ms: int) -> AppendResult:
        """Append batches copied from the leader, byte for byte (Kafka's appendAsFollower): offsets, partition
        leader epochs, producer ids and timestamps are kept as they are, nothing is re-stamped. Checked: each
        batch whole with its CRC, offsets at or after the log end offset and increasing (StorageError subclasses
        otherwise; nothing is written then). The leader epoch cache learns the batches' epochs, producer state and
        the `.txnindex` follow as on the leader, segments roll by the same rules (before any batch that does not
        fit, so a replica's segments match the leader's), and `flush_needed` honours flush.messages."""
        checked = validate_follower_records(records, self.log_end_offset)
        if not checked:
            return AppendResult(-1, -1, -1, self.log_start_offset)
        pending: list[CheckedBatch] = []
        pending_bytes = 0
        for batch in checked:
            header = batch.header
            if pending and (self.active_segment.size == 0 or self._should_roll(
                    pending_bytes + header.size, header.last_offset, header.max_timestamp, now_ms)):
                self._write_copied(pending)  # the roll rules are then judged on what is written
                pending, pending_bytes = [], 0
            if self._should_roll(header.size, header.last_offset, header.max_timestamp, now_ms):
                self.roll(now_ms, base_offset=header.base_offset)
            pending.append(batch)
            pending_bytes += header.size
        self._write_copied(pending)
        flush_needed = self.log_end_offset - self.recovery_point >= self.config.flush_messages
        return AppendResult(checked[0].header.base_offset, checked[-1].header.last_offset, -1,
                            self.log_start_offset, flush_needed)

    def _write_copied(self, batches: list[CheckedBatch]) -> None:
        """Write a follower's batches into the active segment, then apply them to the epoch cache and the
        producer state (before any roll after them: the roll's producer snapshot must cover them)."""
        self.active_segment.append([batch.view for batch in batches],
                                   [AppendBatch(b.header.size, b.header.last_offset, b.header.max_timestamp)
                                    for b in batches])
        produced = []
        for batch in batches:
            header = batch.header
            self.epochs.assign(header.partition_leader_epoch, header.base_offset)
            if header.producer_id >= 0:
                found = producer_batch(header, header.base_offset, header.max_timestamp,
                                       batch.view if header.is_control else None)
                if found is not None:
                    produced.append(found)
        if produced:
            completed = self.producer_state.update(produced)
            if completed:
                self._index_aborts(completed)

    def _index_aborts(self, completed: Iterable[CompletedTxn]) -> None:
        """Record the aborts among `completed` in the `.txnindex` of the segment holding each marker (one a replay
        finds there already is skipped by the segment)."""
        for txn in completed:
            if txn.is_aborted:
                segment = self._segments[max(bisect.bisect_right(self._bases, txn.last_offset) - 1, 0)]
                segment.append_aborted_transaction(txn.aborted_txn())

    def _duplicate_result(self, duplicate: BatchMetadata) -> AppendResult:
        """The answer to a retried batch: its original offsets, and a flush if the original still waits for one
        that flush.messages asked for (the retry must not be acknowledged before the original would be)."""
        append_time = duplicate.timestamp if self.config.log_append_time else -1
        flush_needed = (duplicate.last_offset >= self.recovery_point
                        and self.log_end_offset - self.recovery_point >= self.config.flush_messages)
        return AppendResult(duplicate.first_offset, duplicate.last_offset, append_time, self.log_start_offset,
                            flush_needed, duplicate=True)

    def _should_roll(self, append_bytes: int, last_offset: int, max_timestamp: int, now_ms: int) -> bool:
        active, config = self._segments[-1], self.config
        max_age = config.segment_ms - config.segment_jitter_ms
        if active.size and active.time_waited_for_roll(now_ms, max_timestamp) > max_age:
            return True
        return not active.can_hold(append_bytes, last_offset, config.segment_bytes)

    def roll(self, now_ms: int, *, base_offset: int | None = None) -> LogSegment:
        """Seal the active segment and start a new one at the log end offset (a no-op on an empty active one), or
        at `base_offset` when a follower's next batch starts past it (a gap in a compacted leader's log).

        The sealed segment awaits its fsync: `flush_due` turns true and `maybe_flush` syncs it, as Kafka's
        scheduler does after a roll."""
        active = self.active_segment
        if active.size == 0:
            return active
        active.on_become_inactive()
        new = _new_segment(self.directory, max(self.log_end_offset, base_offset or 0), self.config, now_ms)
        self._set_segments(self._segments + (new,))
        with self._offsets_lock:
            self._flush.rolled_up_to = new.base_offset
        # The state covers exactly the offsets below the new segment: a recovery of it can start here.
        self.producer_state.take_snapshot(new.base_offset, sync=False)
        self.producer_state.remove_stray_snapshots(self._bases)
        return new

    # --- flush ----------------------------------------------------------------------------------------------------

    def flush(self, *, now_ms: int | None = None, up_to: int | None = None) -> None:
        """Make every offset below `up_to` (default: the log end offset at the call) durable: fsync the segments
        that may hold bytes between the recovery point and there, and the producer snapshots written by rolls
        (and the directory when one of those files is new since the last flush), then move the recovery point.

        Runs in an executor thread while the loop appends: flushes take turns, one that finds its offsets already
        durable returns without an fsync, and one that overlapped a truncation leaves the recovery point alone."""
        target = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
        with self._flush_lock:
            start, truncations = self.recovery_point, self._flush.truncations
            new_files = self.producer_state.sync_snapshots()  # those of the rolls since the last flush
            segments = _segments_holding(self._segments, start, target) if target > start else []
            for segment in segments:
                segment.flush()
                new_files = segment.take_created_files() or new_files
            if new_files or any(segment.base_offset >= start for segment in segments):
                try:
                    fsync_path(self.directory)  # a file created since: its name must survive a crash
                except FileNotFoundError:
                    return  # the partition was deleted meanwhile
            with self._offsets_lock:
                if target > start and truncations == self._flush.truncations:
                    self.recovery_point = max(self.recovery_point, target)
                rolled = self._flush.rolled_up_to
                if rolled is not None and rolled <= self.recovery_point:
                    self._flush.rolled_up_to = None
            if now_ms is not None:
                self._flush.last_flush_ms = now_ms

    def flush_due(self, now_ms: int) -> bool:
        """Whether `maybe_flush` has work: a rolled segment awaiting its fsync, or unflushed data and `flush.ms`
        passed since the last flush."""
        return self._flush.rolled_up_to is not None or self._flush_ms_due(now_ms)

    def _flush_ms_due(self, now_ms: int) -> bool:
        return (self.recovery_point < self.log_end_offset
                and now_ms - self._flush.last_flush_ms >= self.config.flush_ms)

    def maybe_flush(self, now_ms: int) -> bool:
        """The periodic half of the flush policy (run it in an executor): everything once `flush.ms` has passed,
        otherwise the rolled segments only. Returns whether it flushed."""
        if self._flush_ms_due(now_ms):
            self.flush(now_ms=now_ms)
            return True
        rolled = self._flush.rolled_up_to
        if rolled is not None:
            self.flush(now_ms=now_ms, up_to=rolled)
            return True
        return False

    # --- read -----------------------------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, *, min_one_batch: bool = True,
             max_offset: int | None = None, aborted: bool = False) -> ReadResult:
        """File regions of the whole batches from the one holding `offset`, up to `max_bytes` in total (at least one
        batch with `min_one_batch`), stopping before the batch holding `max_offset`. Never waits, never copies.
        With `aborted` (read_committed), the result lists the aborted transactions overlapping the first region."""
        segments, bases = self._segments, self._bases
        log_end_offset, log_start_offset = segments[-1].next_offset, self.log_start_offset
        if offset < log_start_offset or offset > log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{log_start_offset}, {log_end_offset}] of {self.topic}-{self.partition}")
        high_watermark = log_end_offset if self._high_watermark is None else self._high_watermark
        last_stable_offset = self._last_stable_offset(high_watermark)
        fetch_offset = offset
        regions: list[FileRegion] = []
        first_read = None  # (segment, end position) of the first region
        remaining = max_bytes
        index = max(bisect.bisect_right(bases, offset) - 1, 0)
        while index < len(segments) and offset < log_end_offset:
            segment = segments[index]
            if max_offset is None:
                max_position = None
            elif segment.base_offset >= max_offset:
                break
            else:
                max_position = _position_of(segment, max_offset)
            found = segment.read(offset, remaining, max_position=max_position,
                                 min_one_batch=min_one_batch and not regions)
            if found is not None:
                position, length = found
                if length == 0:
                    break  # the next batch does not fit what is left of max_bytes
                regions.append(FileRegion(segment.file, position, length))
                if first_read is None:
                    first_read = (segment, position + length)
                remaining -= length
                if position + length < (segment.size if max_position is None else max_position) or remaining <= 0:
                    break
            index += 1
            if index < len(segments):
                offset = max(offset, segments[index].base_offset)
        found = None
        if aborted:
            found = [] if first_read is None else self.collect_aborted_transactions(
                fetch_offset, first_read[0].offset_at_position(first_read[1]))
        return ReadResult(regions, high_watermark, log_start_offset, log_end_offset, last_stable_offset, found)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start_offset, upper_bound_offset): Kafka's walk over the
        `.txnindex` of the segment holding `start_offset` and the ones after it, stopping at the first entry whose
        last stable offset reaches the upper bound (no later abort can concern a transaction begun below it)."""
        segments = self._segments
        found: list[AbortedTxn] = []
        for segment in segments[max(bisect.bisect_right(self._bases, start_offset) - 1, 0):]:
            entries, complete = segment.collect_aborted_transactions(start_offset, upper_bound_offset)
            found.extend(entries)
            if complete:
                break
        return found

    def read_bytes(self, offset: int, max_bytes: int, **kwargs) -> bytes:
        """The bytes `read` would send (tests and down-conversion)."""
        result = self.read(offset, max_bytes, **kwargs)
        return b"".join(os.pread(region.file.fileno(), region.length, region.position) for region in result.regions)

    # --- offsets for ListOffsets ----------------------------------------------------------------------------------

    def earliest(self) -> int:
        return self.log_start_offset

    def latest(self) -> int:
        return self.log_end_offset

    def max_timestamp(self) -> TimestampOffset | None:
        """The largest timestamp in the log and the first offset carrying it; None when no record has one."""
        best = None
        for segment in self._segments:
            if segment.max_timestamp_so_far >= 0 and (best is None
                                                      or segment.max_timestamp_so_far > best.max_timestamp_so_far):
                best = segment
        if best is None:
            return None
        return best.first_record_with_timestamp(best.max_timestamp_so_far)

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """The first record at or after the log start offset whose timestamp is >= `timestamp`; None if none."""
        for segment in self._segments:
            if segment.max_timestamp_so_far >= timestamp and segment.next_offset > self.log_start_offset:
                found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if found is not None:
                    return found
        return None

    # --- truncation, deletion -------------------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove everything at and after `offset` (a whole batch holding it goes too)."""
        if offset >= self.log_end_offset:
            return
        if offset <= self._segments[0].base_offset:
            self.truncate_fully_and_start_at(offset, now_ms=self._flush.last_flush_ms)
            return
        index = bisect.bisect_right(self._bases, offset) - 1
        doomed = self._segments[index + 1:]
        keep = self._segments[:index + 1]
        self._set_segments(keep)
        for segment in doomed:
            segment.delete_files()  # the .log descriptor closes with its last reader
        keep[-1].make_active()
        keep[-1].truncate_to(offset)
        self._after_truncation()
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        if self._high_watermark is not None:
            self._high_watermark = min(self._high_watermark, self.log_end_offset)
        self.epochs.truncate_from_end(self.log_end_offset)
        self._rebuild_producer_state()

    def truncate_fully_and_start_at(self, offset: int, *, now_ms: int) -> None:
        """Drop every segment and continue with an empty log at `offset` (a follower behind the leader's log
        start offset): no epochs, no producer state, the high watermark (if set) at `offset`."""
        for segment in self._segments:
            segment.delete_files()
        new = _new_segment(self.directory, offset, self.config, now_ms)
        self._set_segments((new,))
        self.log_start_offset = offset
        if self._high_watermark is not None:
            self._high_watermark = offset
        self._after_truncation(recovery_point=offset)
        self.epochs.clear()  # as Kafka: the epochs of the records gone say nothing about the offsets to come
        self.producer_state.clear()
        self.producer_state.delete_all_snapshots()

    def _after_truncation(self, recovery_point: int | None = None) -> None:
        """Pull the recovery point and the roll bookkeeping back to the new log end, and make a flush that is
        running now leave the recovery point alone (it fsynced bytes that are gone)."""
        end = self.log_end_offset
        with self._offsets_lock:
            self._flush.truncations += 1
            self.recovery_point = min(self.recovery_point, end) if recovery_point is None else recovery_point
            if self._flush.rolled_up_to is not None:
                self._flush.rolled_up_to = min(self._flush.rolled_up_to, end)

    def delete_records(self, offset: int, *, now_ms: int) -> int:
        """DeleteRecords: move the log start offset up to `offset` (-1 means the high watermark) and delete the
        segments wholly below it. Returns the new log start offset. As in Kafka, only logs whose cleanup.policy
        includes delete allow it (PolicyViolationError otherwise)."""
        if not self.config.delete:
            raise PolicyViolationError(f"cleanup.policy {','.join(self.config.cleanup_policy)} of "
                                       f"{self.topic}-{self.partition} does not allow deleting records")
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            raise OffsetOutOfRangeError(f"cannot delete records below {offset}: high watermark is "
                                        f"{self.high_watermark}")
        self.advance_log_start_offset(offset)
        self.delete_segments_below_start(now_ms)
        return self.log_start_offset

    def advance_log_start_offset(self, offset: int) -> None:
        """Move the log start offset up. Producer snapshots below it go; producer state stays (Kafka keeps a
        producer until `producer.id.expiration.ms`, even when its batches are gone: see `expire_producers`)."""
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            if self._high_watermark is not None and self._high_watermark < offset:
                self._high_watermark = offset  # a follower told the leader's start: nothing below it is readable
            self.epochs.truncate_from_start(offset)
            self.producer_state.delete_snapshots_below(offset)

    def delete_segments_below_start(self, now_ms: int) -> int:
        """Delete the segments whose successor starts at or below the log start offset. When the log start offset
        has reached the log end, the active segment is rolled first so that its bytes go too, as in Kafka."""
        if self.log_start_offset >= self.log_end_offset and self.active_segment.size:
            self.roll(now_ms)
        count = 0
        while count + 1 < len(self._segments) and self._segments[count + 1].base_offset <= self.log_start_offset:
            count += 1
        return self.delete_oldest_segments(count, now_ms)

    def delete_oldest_segments(self, count: int, now_ms: int) -> int:
        """Remove the `count` oldest segments (never the active one): rename them `.deleted` now and unlink them
        after `file.delete.delay.ms` (see `remove_deleted_segments`). The log start offset follows."""
        count = min(count, len(self._segments) - 1)
        if count <= 0:
            return 0
        doomed, kept = self._segments[:count], self._segments[count:]
        self._set_segments(kept)
        self.advance_log_start_offset(kept[0].base_offset)
        for segment in doomed:
            segment.rename_files("", DELETED_SUFFIX)
            self._flush.pending_deletes.append(_PendingDelete(now_ms + self.config.file_delete_delay_ms, segment))
        self.remove_deleted_segments(now_ms)
        return count

    def remove_deleted_segments(self, now_ms: int) -> int:
        """Unlink the `.deleted` files whose delay has passed; returns how many segments went."""
        due = [pending for pending in self._flush.pending_deletes if pending.deadline_ms <= now_ms]
        self._flush.pending_deletes = [p for p in self._flush.pending_deletes if p.deadline_ms > now_ms]
        for pending in due:
            pending.segment.delete_files()
        return len(due)

    def replace_segments(self, old: list[LogSegment], new: list[LogSegment], now_ms: int) -> None:
        """Swap sealed segments for cleaned ones (the cleaner's commit). `new` files carry the `.swap` suffix and
        are renamed into place after the old files are renamed `.deleted`, so a crash in between is finished by
        the next load (see `_finish_interrupted_operations`)."""
        current = list(self._segments)
        start = current.index(old[0])
        current[start:start + len(old)] = new
        for segment in old:
            segment.rename_files("", DELETED_SUFFIX)
        for segment in new:
            segment.rename_files(SWAP_SUFFIX, "")
        self._set_segments(current)
        for segment in old:
            self._flush.pending_deletes.append(_PendingDelete(now_ms + self.config.file_delete_delay_ms, segment))
        self.remove_deleted_segments(now_ms)

    # --- producer state -------------------------------------------------------------------------------------------

    def expire_producers(self, now_ms: int, producer_id_expiration_ms: int) -> int:
        """Forget the producers idle for `producer.id.expiration.ms` (none with an open transaction); returns how
        many went. The broker calls it every `producer.id.expiration.check.interval.ms`."""
        return self.producer_state.remove_expired(now_ms, producer_id_expiration_ms)

    def _rebuild_producer_state(self, *, clean_shutdown: bool = False) -> None:
        """Load the newest usable snapshot at or below the log end offset and replay the batch headers after it
        (restoring open transactions and missing `.txnindex` entries), then snapshot the result. Without any
        snapshot after a clean shutdown the log is not read at all: as in Kafka, such a log was written by a broker
        that kept no producer state, and scanning it could take long."""
        state = self.producer_state
        end = self.log_end_offset
        loaded = state.load(self.log_start_offset, end)
        if loaded is not None or not clean_shutdown:
            replay = _replayed_batches(self._segments, self.log_start_offset if loaded is None else loaded)
            while chunk := list(itertools.islice(replay, _REPLAY_CHUNK)):
                completed = state.update(chunk)
                if completed:
                    self._index_aborts(completed)  # those whose entry a crash lost
        state.take_snapshot(end, sync=True)
        state.remove_stray_snapshots(self._bases)

    # --- life cycle -----------------------------------------------------------------------------------------------

    def update_config(self, config: LogConfig) -> None:
        self.config = config

    def close(self) -> None:
        """Flush nothing (the caller decides), snapshot the producer state at the log end offset (so the next open
        need not read the log), seal the indexes and close every file."""
        for pending in self._flush.pending_deletes:
            pending.segment.delete_files()
        self._flush.pending_deletes = []
        try:
            self.producer_state.take_snapshot(self.log_end_offset, sync=True)
        except FileNotFoundError:
            pass  # the partition directory was deleted: there is nothing left to restore
        for segment in self._segments:
            segment.close()
        self.closed = True

    def __repr__(self):
        return (f"Log({self.topic}-{self.partition}, start={self.log_start_offset}, end={self.log_end_offset}, "
                f"segments={len(self._segments)})")


def _new_segment(directory: str, base_offset: int, config: LogConfig, now_ms: int) -> LogSegment:
    return LogSegment.create(directory, base_offset, index_interval_bytes=config.index_interval_bytes,
                             max_index_size=config.segment_index_bytes, now_ms=now_ms)


def _stamp_batches(checked: list[CheckedBatch], base_offset: int, leader_epoch: int,
                   append_time: int) -> tuple[list, list[AppendBatch], int, int]:
    """Assign offsets from `base_offset` (and the append time for LogAppendTime topics, which rewrites the CRC);
    returns the buffers to write, the batches' facts for the indexes, their total size and largest timestamp."""
    buffers, batches = [], []
    next_offset = base_offset
    size, largest = 0, None
    for view, header, writable in checked:
        max_timestamp = header.max_timestamp
        if append_time >= 0:
            view = view if writable else memoryview(bytearray(view))
            writable = True
            set_log_append_time(view, append_time)
            max_timestamp = append_time
        _stamp(buffers, view, writable, next_offset, leader_epoch)
        last_offset = next_offset + header.last_offset_delta
        batch_size = len(view)
        batches.append(AppendBatch(batch_size, last_offset, max_timestamp))
        size += batch_size
        largest = max_timestamp if largest is None else max(largest, max_timestamp)
        next_offset = last_offset + 1
    return buffers, batches, size, largest


def _producer_batches(checked: list[CheckedBatch], base_offset: int, append_time: int) -> list[ProducerBatch]:
    """The batches of an append that carry a producer id, with the offsets they will get: a header read per batch
    (control batches, written by the coordinator only, also have their one record read)."""
    found = []
    first_offset = base_offset
    for batch in checked:
        header = batch.header
        if header.producer_id >= 0:
            timestamp = header.max_timestamp if append_time < 0 else append_time
            produced = producer_batch(header, first_offset, timestamp, batch.view)
            if produced is not None:
                found.append(produced)
        first_offset += header.last_offset_delta + 1
    return found


def _replayed_batches(segments: tuple[LogSegment, ...], start: int) -> Iterator[ProducerBatch]:
    """The batches with a producer id from offset `start` to the log end, read from their headers."""
    for segment in segments:
        if segment.next_offset <= start:
            continue
        position = 0
        if start > segment.base_offset:
            holding = segment.translate_offset(start)
            if holding is None:
                continue
            position = holding.position
        file = segment.file
        for batch_position, header in iter_batch_headers(file, position, segment.size):
            if header.producer_id < 0 or header.last_offset < start:
                continue
            raw = os.pread(file.fd, header.size, batch_position) if header.is_control else None
            produced = producer_batch(header, header.base_offset, header.max_timestamp, raw)
            if produced is not None:
                yield produced


def _stamp(buffers: list, view: memoryview, writable: bool, base_offset: int, leader_epoch: int) -> None:
    """Add the buffers to write for one batch with its base offset and leader epoch set. A writable batch is
    stamped in place; a read-only one (the request frame) gets a new 16-byte prefix so its bytes are never copied."""
    if writable:
        stamp_batch(view, base_offset, leader_epoch)
        buffers.append(view)
    else:
        buffers.append(_STAMP_PREFIX.pack(base_offset, len(view) - 12, leader_epoch))
        buffers.append(view[_STAMP_PREFIX.size:])


def _segments_holding(segments: tuple[LogSegment, ...], start: int, end: int) -> list[LogSegment]:
    """The segments that may hold offsets in [start, end), found from the tail (the unflushed part is short)."""
    found = []
    for segment in reversed(segments):
        if segment.next_offset <= start:
            break
        if segment.base_offset < end:
            found.append(segment)
    return found


def _position_of(segment: LogSegment, offset: int | None) -> int | None:
    """File position of the batch holding `offset` in `segment`, None when `offset` is unset or past it."""
    if offset is None or offset >= segment.next_offset:
        return None
    batch = segment.translate_offset(offset)
    return None if batch is None else batch.position


# --- loading ------------------------------------------------------------------------------------------------------

def _base_offset_of(name: str) -> int | None:
    stem = name.split(".", 1)[0]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


def _finish_interrupted_operations(directory: str) -> set[str]:
    """Clean up after a crash: remove `.deleted`, `.cleaned` and `.tmp` files; complete `.swap` files (the
    cleaner's output was complete when renamed to `.swap`, so the old segments it replaces are removed). Returns the
    names of the files left in `directory`."""
    names = os.listdir(directory)
    changed = False
    for name in names:
        if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, ".tmp")):
            os.unlink(os.path.join(directory, name))
            changed = True
    for name in sorted(n for n in names if n.endswith(LOG_SUFFIX + SWAP_SUFFIX)):
        base = _base_offset_of(name)
        # `rename_files` renames the `.index` before the `.txnindex`: while the new `.index` is still a `.swap`, a
        # `.txnindex` under the final name is the replaced segment's (the new one may have none).
        stale_txn_index = os.path.exists(segment_path(directory, base, INDEX_SUFFIX) + SWAP_SUFFIX)
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            path = segment_path(directory, base, suffix)
            if os.path.exists(path + SWAP_SUFFIX):
                os.replace(path + SWAP_SUFFIX, path)
                changed = True
            elif suffix == TXN_INDEX_SUFFIX and stale_txn_index and os.path.exists(path):
                os.unlink(path)
                changed = True
    if changed:
        names = os.listdir(directory)
    for name in names:
        if name.endswith(SWAP_SUFFIX):
            os.unlink(os.path.join(directory, name))
            changed = True
    return set(os.listdir(directory) if changed else names)


def _open_segments(directory: str, names: set[str], config: LogConfig, recovery_point: int, clean_shutdown: bool,
                   now_ms: int) -> list[LogSegment]:
    """Load every segment. Sealed ones that were flushed (all of them after a clean shutdown) open nothing: their
    indexes are sanity-checked on first use. The rest are recovered unless the last shutdown was clean, and the last
    segment becomes the active one."""
    bases = sorted(base for name in names if name.endswith(LOG_SUFFIX)
                   and (base := _base_offset_of(name)) is not None)
    for name in names:  # index files whose log is gone
        base = _base_offset_of(name)
        if (base is not None and name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX))
                and base not in bases):
            os.unlink(os.path.join(directory, name))
    segments = []
    for position, base in enumerate(bases):
        following = bases[position + 1] if position + 1 < len(bases) else None
        indexed = all(segment_name(base) + suffix in names for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX))
        segment = LogSegment(directory, base, index_interval_bytes=config.index_interval_bytes,
                             max_index_size=config.segment_index_bytes, active=following is None,
                             created_ms=now_ms, next_offset=following)
        flushed = clean_shutdown or (following is not None and following <= recovery_point)
        if flushed and not indexed:
            recover_segment(segment)
        elif flushed and following is None:
            try:
                segment.load_state()
            except IndexCorruptError:
                recover_segment(segment)
        segments.append(segment)
    if not clean_shutdown:
        result = recover_segments(segments, recovery_point)
        for segment in result.dropped:
            segment.close()
            segment.delete_files()
        segments = result.kept
    for segment in segments[:-1]:
        segment.seal_loaded()
    return segments
