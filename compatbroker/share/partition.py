"""One share-partition (KIP-932): the delivery state of one topic partition for one share group, as Kafka's
SharePartition keeps it. Pure state, no I/O: the manager reads the log, persists and schedules; every method that
needs the time takes `now_ms`.

The window of in-flight records runs from the share-partition start offset (SPSO, `start_offset`) to the offset
after the last one ever acquired (`next_offset`, Kafka's end offset + 1). Each offset in it has a state:

- AVAILABLE: may be acquired (again); ACQUIRED: locked by one member until `deadline_ms` (the acquisition lock,
  `share.record.lock.duration.ms`); ACKNOWLEDGED (accepted) and ARCHIVED (rejected, a gap, an aborted
  transaction's record, or delivered `group.share.delivery.count.limit` times) are final.
- The delivery count rises with each acquisition. A record released (RELEASE, its lock expiring, its member's
  share session ending) becomes AVAILABLE again, or ARCHIVED once its delivery count has reached the limit.
- The SPSO moves forward over final records; they leave memory then. An offset inside the window with no entry is
  one never delivered (a hole of the persisted state after a restart): available, as Kafka's "gap window".

Acquisition walks the log batches read from the next fetch offset (the first available offset, else
`next_offset`): available offsets inside the window are acquired again, offsets past it are new (delivery count
1). Offsets the batches skip (compacted away) are archived. It stops at `max_records` acquired: at the end of the
log batch reached (ShareAcquireMode batch_optimized, Kafka's soft limit) or exactly (record_limit, KIP-1206). New
records are only taken while the window is shorter than `group.share.partition.max.record.locks` (a log batch
begun then is taken whole, but never more than `max_records`, nor than the limit again, past the limit: compaction
can leave a batch spanning many offsets). Acquired offsets are answered as ranges of equal delivery count, cut at a
log batch boundary once a range holds `batch_size` records (Kafka's createBatches).

Acknowledgement (ACCEPT, RELEASE, REJECT, GAP, and RENEW from ShareFetch/ShareAcknowledge v2, KIP-1222) is all or
nothing per partition: every offset of every batch must be ACQUIRED by the acknowledging member
(INVALID_RECORD_STATE otherwise, and for batches sharing an offset); offsets below the SPSO are skipped; a batch
beyond the window is INVALID_REQUEST, an ack with nothing in flight INVALID_RECORD_STATE (Kafka's answers).
"""
from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum
from typing import NamedTuple

from ..protocol.error_codes import ErrorCode


class RecordState(IntEnum):
    """Kafka's RecordState; the ids are what ShareSnapshot/ShareUpdate records store."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # v2 with IsRenewAck (KIP-1222): extend the acquisition lock


FINAL_STATES = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class LogBatch(NamedTuple):
    """What acquisition needs of a batch read from the log; `aborted`: an aborted transaction's batch or its abort
    marker, archived instead of acquired (read_committed)."""

    base_offset: int
    last_offset: int
    aborted: bool = False


class AcquiredRange(NamedTuple):
    first_offset: int
    last_offset: int
    delivery_count: int


class StateBatch(NamedTuple):
    """A run of offsets with one state and delivery count, as ShareSnapshotValue.StateBatch stores it."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


class AckBatch(NamedTuple):
    first_offset: int
    last_offset: int
    types: tuple[int, ...]  # one type for the whole batch, or one per offset


class ShareAckError(Exception):
    """An acknowledgement Kafka refuses; `error_code` goes into the partition's answer."""

    def __init__(self, error_code: ErrorCode, message: str):
        super().__init__(message)
        self.error_code = error_code


class InFlight:
    """One offset's delivery state."""

    __slots__ = ("state", "delivery_count", "member_id", "deadline_ms")

    def __init__(self, state: RecordState, delivery_count: int, member_id: str | None = None,
                 deadline_ms: int = 0):
        self.state = state
        self.delivery_count = delivery_count
        self.member_id = member_id
        self.deadline_ms = deadline_ms

    def release(self, delivery_count_limit: int) -> bool:
        """Back to AVAILABLE, or ARCHIVED at the delivery count limit; True when it may be delivered again."""
        self.member_id = None
        if self.delivery_count >= delivery_count_limit:
            self.state = RecordState.ARCHIVED
            return False
        self.state = RecordState.AVAILABLE
        return True


class Acquisition(NamedTuple):
    ranges: list[AcquiredRange]
    count: int             # records acquired
    last_offset: int       # the last offset acquired or archived by the walk (-1: none)


class SharePartition:
    """The in-flight records of one (group, topic id, partition)."""

    def __init__(self, group_id: str, topic_id, partition: int, start_offset: int, *, state_epoch: int = 0,
                 batches: Iterable[StateBatch] = (), created_ms: int = -1):
        self.group_id = group_id
        self.created_ms = created_ms  # when the state was first made (ShareSnapshotValue.CreateTimestamp)
        self.topic_id = topic_id
        self.partition = partition
        self.start_offset = start_offset
        self.next_offset = start_offset
        self.state_epoch = state_epoch
        self.dirty = False  # changed in a way the persisted state must learn (acquisitions alone do not count)
        self._records: dict[int, InFlight] = {}
        for batch in batches:
            self._restore(batch)
        self._advance_start()

    def _restore(self, batch: StateBatch) -> None:
        state = RecordState(batch.delivery_state) if batch.delivery_state in RecordState._value2member_map_ \
            else RecordState.AVAILABLE
        if state is RecordState.ACQUIRED:  # never persisted so, but a lock does not survive a restart anyway
            state = RecordState.AVAILABLE
        for offset in range(max(batch.first_offset, self.start_offset), batch.last_offset + 1):
            self._records[offset] = InFlight(state, batch.delivery_count)
        self.next_offset = max(self.next_offset, batch.last_offset + 1)

    # --- questions ------------------------------------------------------------------------------------------------

    @property
    def in_flight_count(self) -> int:
        """Kafka's numInFlightRecords: the window's length."""
        return self.next_offset - self.start_offset

    def next_fetch_offset(self) -> int:
        """Where the next read of the log starts: the first available offset of the window, else its end."""
        records = self._records
        for offset in range(self.start_offset, self.next_offset):
            record = records.get(offset)
            if record is None or record.state is RecordState.AVAILABLE:
                return offset
        return self.next_offset

    def can_acquire(self, max_record_locks: int) -> bool:
        """Whether a fetch could acquire anything now without new appends: an available offset in the window, or
        room for new records."""
        return self.next_fetch_offset() < self.next_offset or self.in_flight_count < max_record_locks

    def record(self, offset: int) -> InFlight | None:
        return self._records.get(offset)

    def earliest_deadline(self) -> int | None:
        deadlines = [record.deadline_ms for record in self._records.values() if record.state is RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    def state_batches(self) -> list[StateBatch]:
        """The window as Kafka persists it: runs of equal (state, delivery count), ACQUIRED written as AVAILABLE
        (a lock does not survive a restart), holes left out."""
        runs: list[StateBatch] = []
        for offset in range(self.start_offset, self.next_offset):
            record = self._records.get(offset)
            if record is None:
                continue
            state = RecordState.AVAILABLE if record.state is RecordState.ACQUIRED else record.state
            last = runs[-1] if runs else None
            if (last is not None and last.last_offset == offset - 1 and last.delivery_state == state
                    and last.delivery_count == record.delivery_count):
                runs[-1] = last._replace(last_offset=offset)
            else:
                runs.append(StateBatch(offset, offset, int(state), record.delivery_count))
        return runs

    # --- acquisition ----------------------------------------------------------------------------------------------

    def acquire(self, member_id: str, batches: list[LogBatch], *, fetch_offset: int, max_records: int,
                batch_size: int, strict: bool, max_record_locks: int, now_ms: int, lock_duration_ms: int
                ) -> Acquisition:
        """Acquire for `member_id` from the log batches read at `fetch_offset` (see the module docstring)."""
        # However large a log batch (compaction keeps a batch's offset span) and whatever MaxRecords the client
        # sends, the window grows by at most `max_records`, and never by more than the in-flight limit again, past
        # that limit: memory stays bounded.
        overshoot = min(max(max_records, 0), max_record_locks)
        walk = _Walk(self, member_id, now_ms + lock_duration_ms, max(batch_size, 1),
                     self.start_offset + max_record_locks + overshoot)
        if max_records <= 0:
            return walk.result()
        cursor = max(fetch_offset, self.start_offset)
        for batch in batches:
            if batch.last_offset < cursor:
                continue
            if walk.count >= max_records:
                break
            if batch.base_offset > cursor:
                walk.archive_missing(cursor, batch.base_offset)  # compacted away: nothing to deliver
            if batch.base_offset >= self.next_offset and self.in_flight_count >= max_record_locks:
                break  # at the in-flight limit: only records already in the window may be taken
            walk.start_log_batch()
            first = max(batch.base_offset, cursor)
            if batch.aborted:
                walk.archive_aborted(first, batch.last_offset)
            else:
                limit = max_records if strict else None
                walk.take(first, batch.last_offset, limit)
            cursor = batch.last_offset + 1
            if strict and walk.count >= max_records:
                break
        self._advance_start()
        return walk.result()

    # --- acknowledgement ------------------------------------------------------------------------------------------

    def acknowledge(self, member_id: str, batches: list[AckBatch], *, delivery_count_limit: int, now_ms: int,
                    lock_duration_ms: int) -> bool:
        """Apply the acknowledgements, all or none (raises ShareAckError); True when a record became available
        again (a RELEASE), so that waiting fetches may take it."""
        changes = [self._validate(member_id, batch) for batch in batches]
        for previous, batch in zip(batches, batches[1:]):
            if batch.first_offset <= previous.last_offset:  # Kafka: a transition already under way there
                raise ShareAckError(ErrorCode.INVALID_RECORD_STATE, "The record state is invalid. The "
                                    "acknowledgement of delivery could not be completed.")
        released = False
        for batch, offsets in zip(batches, changes):
            for offset in offsets:
                kind = batch.types[0] if len(batch.types) == 1 else batch.types[offset - batch.first_offset]
                released |= self._apply(self._records[offset], kind, delivery_count_limit,
                                        now_ms + lock_duration_ms)
                self.dirty |= kind != AcknowledgeType.RENEW
        self._advance_start()
        return released

    def _validate(self, member_id: str, batch: AckBatch) -> range:
        """The offsets of `batch` to change (those at or above the SPSO), after Kafka's checks."""
        if batch.last_offset < self.start_offset:
            return range(0)  # already final and gone
        if not self._records:
            raise ShareAckError(ErrorCode.INVALID_RECORD_STATE,
                                "Batch record not found. The request batch offsets are not found in the cache.")
        if batch.first_offset >= self.next_offset:
            raise ShareAckError(ErrorCode.INVALID_REQUEST,
                                "Batch record not found. The first offset in request is past acquired records.")
        if batch.last_offset >= self.next_offset:
            raise ShareAckError(ErrorCode.INVALID_REQUEST,
                                "Batch record not found. The last offset in request is past acquired records.")
        offsets = range(max(batch.first_offset, self.start_offset), batch.last_offset + 1)
        for offset in offsets:
            record = self._records.get(offset)
            if record is None or record.state is not RecordState.ACQUIRED:
                raise ShareAckError(ErrorCode.INVALID_RECORD_STATE,
                                    "The offset cannot be acknowledged. The offset is not acquired.")
            if record.member_id != member_id:
                raise ShareAckError(ErrorCode.INVALID_RECORD_STATE, "Member is not the owner of offset")
        return offsets

    @staticmethod
    def _apply(record: InFlight, kind: int, delivery_count_limit: int, renewed_deadline_ms: int) -> bool:
        if kind == AcknowledgeType.ACCEPT:
            record.state, record.member_id = RecordState.ACKNOWLEDGED, None
        elif kind == AcknowledgeType.RELEASE:
            return record.release(delivery_count_limit)
        elif kind == AcknowledgeType.RENEW:
            record.deadline_ms = renewed_deadline_ms
        else:  # REJECT, GAP
            record.state, record.member_id = RecordState.ARCHIVED, None
        return False

    # --- releases -------------------------------------------------------------------------------------------------

    def release_member(self, member_id: str, delivery_count_limit: int) -> bool:
        """The member's share session ended: its acquired records are released. True when any became available
        again."""
        return self._release(lambda record: record.member_id == member_id, delivery_count_limit)

    def expire_locks(self, now_ms: int, delivery_count_limit: int) -> bool:
        """Release the records whose acquisition lock has expired; True when any became available again."""
        return self._release(lambda record: record.deadline_ms <= now_ms, delivery_count_limit)

    def _release(self, which, delivery_count_limit: int) -> bool:
        available = False
        for record in self._records.values():
            if record.state is RecordState.ACQUIRED and which(record):
                available |= record.release(delivery_count_limit)
                self.dirty = True
        self._advance_start()
        return available

    def has_acquired(self, member_id: str | None = None) -> bool:
        return any(record.state is RecordState.ACQUIRED and (member_id is None or record.member_id == member_id)
                   for record in self._records.values())

    # --- the start offset -----------------------------------------------------------------------------------------

    def move_start_to_log_start(self, log_start_offset: int) -> bool:
        """Records below the log start offset are gone (retention, DeleteRecords): the SPSO follows. True when it
        moved."""
        if log_start_offset <= self.start_offset:
            return False
        for offset in range(self.start_offset, min(log_start_offset, self.next_offset)):
            self._records.pop(offset, None)
        self.start_offset = log_start_offset
        self.next_offset = max(self.next_offset, log_start_offset)
        self._advance_start()
        self.dirty = True
        return True

    def _advance_start(self) -> None:
        records = self._records
        offset = self.start_offset
        while offset < self.next_offset:
            record = records.get(offset)
            if record is None or record.state not in FINAL_STATES:
                break
            del records[offset]
            offset += 1
        self.start_offset = offset


class _Walk:
    """One acquisition's progress: the ranges answered and the log batch being walked."""

    def __init__(self, partition: SharePartition, member_id: str, deadline_ms: int, batch_size: int,
                 window_end: int):
        self.partition = partition
        self.window_end = window_end  # no new offset at or past it
        self.member_id = member_id
        self.deadline_ms = deadline_ms
        self.batch_size = batch_size
        self.ranges: list[AcquiredRange] = []
        self.count = 0
        self.last_offset = -1
        self._cut_allowed = False  # a range may be cut here: the start of a log batch

    def start_log_batch(self) -> None:
        self._cut_allowed = True

    def take(self, first: int, last: int, limit: int | None) -> None:
        """Acquire the available offsets of [first, last]; with `limit` stop once `count` reaches it."""
        partition, records = self.partition, self.partition._records
        for offset in range(first, last + 1):
            if limit is not None and self.count >= limit:
                return
            if offset >= partition.next_offset:
                if offset >= self.window_end:
                    return
                record = records[offset] = InFlight(RecordState.AVAILABLE, 0)
                partition.next_offset = offset + 1
            else:
                record = records.get(offset)
                if record is None:
                    record = records[offset] = InFlight(RecordState.AVAILABLE, 0)
                elif record.state is not RecordState.AVAILABLE:
                    self._cut_allowed = True  # the range is broken here anyway
                    self.last_offset = offset
                    continue
            record.state = RecordState.ACQUIRED
            record.delivery_count += 1
            record.member_id = self.member_id
            record.deadline_ms = self.deadline_ms
            self._add(offset, record.delivery_count)
            self.last_offset = offset

    def archive_missing(self, first: int, end: int) -> None:
        """Offsets [first, end) no batch holds: archived, never delivered."""
        partition = self.partition
        for offset in range(max(first, partition.start_offset), end):
            record = partition._records.get(offset)
            if record is None or record.state is RecordState.AVAILABLE:
                partition._records[offset] = InFlight(RecordState.ARCHIVED, 0 if record is None
                                                      else record.delivery_count)
                partition.dirty = True
        partition.next_offset = max(partition.next_offset, end)

    def archive_aborted(self, first: int, last: int) -> None:
        self.archive_missing(first, last + 1)
        self.last_offset = last
        self._cut_allowed = True

    def _add(self, offset: int, delivery_count: int) -> None:
        ranges = self.ranges
        previous = ranges[-1] if ranges else None
        cut = self._cut_allowed and previous is not None and \
            previous.last_offset - previous.first_offset + 1 >= self.batch_size
        self._cut_allowed = False
        self.count += 1
        if (previous is not None and not cut and previous.last_offset == offset - 1
                and previous.delivery_count == delivery_count):
            ranges[-1] = previous._replace(last_offset=offset)
        else:
            ranges.append(AcquiredRange(offset, offset, delivery_count))

    def result(self) -> Acquisition:
        return Acquisition(self.ranges, self.count, self.last_offset)
