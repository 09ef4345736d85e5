"""Producer state of one partition: what each idempotent or transactional producer wrote last, for deduplication
and fencing, kept by Kafka's rules (its ProducerStateManager and ProducerAppendInfo).

Per producer id the partition remembers the current epoch, the last five batches (sequence range, offsets, max
timestamp), the last timestamp, the epoch of the transaction coordinator that wrote its last marker, and where its
open transaction began. A client append is checked batch by batch against it before anything is written
(`check_append`):

- a batch whose epoch and sequence range equal one of the five remembered batches is a retry: the append is
  answered with that batch's offsets and writes nothing (Kafka does not answer DUPLICATE_SEQUENCE_NUMBER here);
- an epoch older than the current one is a zombie: InvalidProducerEpochError;
- with the current epoch, the first sequence must follow the last one (after 2147483647 comes 0); with a newer
  epoch it must be 0: OutOfOrderSequenceError otherwise, which also catches retries too old to be remembered;
- a producer the partition has no state for (new, or expired) must start at sequence 0: UnknownProducerIdError
  otherwise, as our issue asks and as Kafka answered before KIP-360 (Kafka 2.5+ accepts any sequence there). The
  clients recover from it the way KIP-360 describes (bump the epoch, restart the sequences at 0), and it only
  happens after `producer.id.expiration.ms` of silence or a lost state;
- a non-transactional batch while the producer's transaction is open: InvalidTxnStateError.

The coordinator's transaction markers (control batches, origin "coordinator") get Kafka's marker checks instead: a
producer epoch older than the producer's current one is InvalidProducerEpochError, a coordinator epoch older than
that of the producer's last marker TransactionCoordinatorFencedError. Other broker-own appends, and the replay of
the log at start-up, go straight to `update`, unchecked.

Once the bytes are written, `update` applies the batches. The first transactional batch of a producer opens its
transaction; a marker completes it, and `update` reports each completed transaction (`CompletedTxn`), with the
last stable offset that Kafka records for an aborted one in the `.txnindex`: the first offset of the earliest other
open transaction, else the marker's offset + 1. Open transactions are kept in first-offset order, so the first
unstable offset (which bounds the partition's last stable offset) is found in O(1); non-transactional batches cost
nothing extra.

Snapshots (`producer_snapshot`) hold the state as of an offset; `load` restores the newest usable one and the log
replays its batch headers from there. Producers stay when the log start offset passes their last batch, as in
Kafka since KIP-360: only `remove_expired` (`producer.id.expiration.ms`) forgets an idle producer, never one with an
open transaction.
"""
from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from ..protocol.records.batch import NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchHeader, iter_records
from ..protocol.records.control import ControlRecordType, TransactionMarker, parse_control_record
from ..protocol.records.errors import CorruptRecordError, InvalidRecordError
from .errors import (CorruptSnapshotError, InvalidProducerEpochError, InvalidTxnStateError, OutOfOrderSequenceError,
                     TransactionCoordinatorFencedError, UnknownProducerIdError)
from .producer_snapshot import (SnapshotEntry, delete_snapshot, fsync_path, read_snapshot, snapshot_offsets,
                                snapshot_path, write_snapshot)
from .transaction_index import AbortedTxn
from .validator import CLIENT, COORDINATOR

NUM_BATCHES_TO_RETAIN = 5
_SEQUENCE_MODULUS = 2**31  # sequences are int32s that wrap from 2147483647 to 0
_MAX_CONTROL_BATCH = 1 << 20


def in_sequence(last_sequence: int, next_sequence: int) -> bool:
    """Whether `next_sequence` is the one after `last_sequence` (-1: none yet, so 0)."""
    return next_sequence == (last_sequence + 1) % _SEQUENCE_MODULUS


class BatchMetadata(NamedTuple):
    """One remembered batch of a producer: enough to recognise a retry and answer it with the original offsets."""

    last_seq: int
    last_offset: int
    offset_delta: int  # last offset - first offset, which is also last sequence - first sequence
    timestamp: int  # the batch's max timestamp as stored (the append time under LogAppendTime)

    @property
    def first_seq(self) -> int:
        return (self.last_seq - self.offset_delta) % _SEQUENCE_MODULUS

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class ProducerBatch(NamedTuple):
    """What producer state needs of a batch with a producer id, with its offsets as assigned in the log.
    `marker` is set for control batches (the transaction marker they carry) and None for data batches."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp: int
    is_transactional: bool
    marker: TransactionMarker | None = None


def producer_batch(header: BatchHeader, first_offset: int, timestamp: int, raw=None) -> ProducerBatch | None:
    """The ProducerBatch of a batch whose header carries a producer id; `raw` (the batch's bytes) is read only for
    control batches. None for a control batch without a marker (compaction emptied it): it changes nothing."""
    marker = None
    if header.is_control:
        marker = transaction_marker(raw)
        if marker is None:
            return None
    return ProducerBatch(header.producer_id, header.producer_epoch, header.base_sequence, header.last_sequence,
                         first_offset, first_offset + header.last_offset_delta, timestamp, header.is_transactional,
                         marker)


def transaction_marker(raw) -> TransactionMarker | None:
    """The marker in the first record of a control batch; None when it has no record or is not a marker."""
    try:
        record = next(iter_records(raw, max_size=_MAX_CONTROL_BATCH), None)
        return None if record is None else parse_control_record(record.key, record.value)
    except (CorruptRecordError, InvalidRecordError):
        return None


class CompletedTxn(NamedTuple):
    """A transaction a marker completed: `last_offset` is the marker's offset, `last_stable_offset` Kafka's LSO
    for its `.txnindex` entry (the first offset of the earliest other open transaction, else the marker's + 1)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool
    last_stable_offset: int

    def aborted_txn(self) -> AbortedTxn:
        return AbortedTxn(self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)


class ProducerStateEntry:
    """The state of one producer id on one partition (what DescribeProducers reports)."""

    __slots__ = ("producer_id", "producer_epoch", "coordinator_epoch", "last_timestamp", "current_txn_start_offset",
                 "batches")

    def __init__(self, producer_id: int, producer_epoch: int = NO_PRODUCER_EPOCH, *, coordinator_epoch: int = -1,
                 last_timestamp: int = -1, current_txn_start_offset: int = -1,
                 batches: Iterable[BatchMetadata] = ()):
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_start_offset = current_txn_start_offset  # -1: no open transaction
        self.batches: deque[BatchMetadata] = deque(batches, maxlen=NUM_BATCHES_TO_RETAIN)  # oldest first

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        """Last offset of the newest remembered data batch; -1 when none is remembered."""
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.last_seq == last_seq and batch.first_seq == first_seq:
                return batch
        return None

    def apply(self, batch: ProducerBatch) -> None:
        """Take a written batch into the state. A new epoch forgets the batches of the old one."""
        if batch.producer_epoch != self.producer_epoch:
            self.producer_epoch = batch.producer_epoch
            self.batches.clear()
        if batch.marker is not None:
            self.coordinator_epoch = batch.marker.coordinator_epoch
            self.current_txn_start_offset = -1
        else:
            self.batches.append(BatchMetadata(batch.last_sequence, batch.last_offset,
                                              batch.last_offset - batch.first_offset, batch.timestamp))
            if batch.is_transactional and self.current_txn_start_offset < 0:
                self.current_txn_start_offset = batch.first_offset
        self.last_timestamp = batch.timestamp

    def to_snapshot(self) -> SnapshotEntry:
        newest = self.batches[-1] if self.batches else None
        return SnapshotEntry(self.producer_id, self.producer_epoch, self.last_sequence, self.last_offset,
                             newest.offset_delta if newest else 0, self.last_timestamp, self.coordinator_epoch,
                             self.current_txn_start_offset)

    @classmethod
    def from_snapshot(cls, entry: SnapshotEntry) -> ProducerStateEntry:
        """A snapshot keeps only the newest batch, so after a load that is the one retry recognised until the
        producer writes again."""
        batches = ([BatchMetadata(entry.last_sequence, entry.last_offset, entry.offset_delta, entry.timestamp)]
                   if entry.last_offset >= 0 else [])
        return cls(entry.producer_id, entry.producer_epoch, coordinator_epoch=entry.coordinator_epoch,
                   last_timestamp=entry.timestamp, current_txn_start_offset=entry.current_txn_first_offset,
                   batches=batches)

    def __repr__(self):
        return (f"ProducerStateEntry(producer_id={self.producer_id}, epoch={self.producer_epoch}, "
                f"last_sequence={self.last_sequence}, last_offset={self.last_offset}, "
                f"last_timestamp={self.last_timestamp}, coordinator_epoch={self.coordinator_epoch}, "
                f"current_txn_start_offset={self.current_txn_start_offset})")


class _Expected(NamedTuple):
    """What the next batch of a producer is checked against: the stored state, or the batch before it in the same
    append. `known`: the partition had state for the producer before this append (Kafka checks the sequences of
    an unknown producer against nothing, even those of its second batch in one append)."""

    epoch: int
    last_sequence: int
    txn_open: bool
    known: bool


_NOTHING_KNOWN = _Expected(NO_PRODUCER_EPOCH, NO_SEQUENCE, False, False)


def _check_marker(batch: ProducerBatch, entry: ProducerStateEntry | None) -> None:
    """Kafka's checks of a transaction marker the coordinator writes (ProducerAppendInfo.appendEndTxnMarker)."""
    if entry is None:
        return
    if batch.producer_epoch < entry.producer_epoch:
        raise InvalidProducerEpochError(f"epoch of producer {batch.producer_id} at offset {batch.first_offset} is "
                                        f"{batch.producer_epoch}, which is smaller than the last seen epoch "
                                        f"{entry.producer_epoch}")
    if entry.coordinator_epoch > batch.marker.coordinator_epoch:
        raise TransactionCoordinatorFencedError(
            f"invalid coordinator epoch for producer {batch.producer_id} at offset {batch.first_offset}: "
            f"{batch.marker.coordinator_epoch} (zombie), {entry.coordinator_epoch} (current)")


def _check_batch(batch: ProducerBatch, expected: _Expected) -> None:
    """Kafka's epoch, sequence and transaction checks of a client's batch; raises the error the producer gets."""
    epoch = expected.epoch
    if batch.producer_epoch < epoch:
        raise InvalidProducerEpochError(f"producer {batch.producer_id} has epoch {batch.producer_epoch}, older "
                                        f"than its current epoch {epoch}")
    if expected is _NOTHING_KNOWN and batch.base_sequence != 0:
        raise UnknownProducerIdError(f"no state for producer {batch.producer_id} here, and its batch starts at "
                                     f"sequence {batch.base_sequence}, not 0")
    if batch.producer_epoch != epoch:
        if batch.base_sequence != 0 and epoch != NO_PRODUCER_EPOCH:
            raise OutOfOrderSequenceError(f"producer {batch.producer_id} starts epoch {batch.producer_epoch} at "
                                          f"sequence {batch.base_sequence}, not 0")
    elif expected.known and not in_sequence(expected.last_sequence, batch.base_sequence):
        raise OutOfOrderSequenceError(f"producer {batch.producer_id} sent sequence {batch.base_sequence} after "
                                      f"{expected.last_sequence}")
    if expected.txn_open and not batch.is_transactional:
        raise InvalidTxnStateError(f"producer {batch.producer_id} wrote a non-transactional batch while its "
                                   f"transaction is open")


class ProducerStateManager:
    """The producer state of a partition and its snapshot files in `directory`.

    Called from the event loop, except `sync_snapshots`, which the log's flush runs in an executor thread."""

    def __init__(self, directory: str, *, names: Iterable[str] | None = None):
        """`names`: the files of `directory`, when the caller has just listed it."""
        self.directory = directory
        self._producers: dict[int, ProducerStateEntry] = {}
        # Open transactions, producer id -> first offset, in first-offset order (transactions open in offset order).
        self._ongoing: OrderedDict[int, int] = OrderedDict()
        self._snapshots: list[int] = snapshot_offsets(directory, names)  # ascending
        self._unsynced: list[int] = []  # snapshots written without fsync, for the next flush
        self._unsynced_lock = threading.Lock()

    # --- queries --------------------------------------------------------------------------------------------------

    def entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def active_producers(self) -> list[ProducerStateEntry]:
        return list(self._producers.values())

    def __len__(self) -> int:
        return len(self._producers)

    @property
    def first_unstable_offset(self) -> int | None:
        """First offset of the earliest open transaction; None when none is open."""
        while True:  # the cleaner reads this from an executor thread: a change on the loop mid-read raises
            try:
                return next(iter(self._ongoing.values()), None)
            except RuntimeError:
                continue

    def ongoing_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of each open transaction, in first-offset order."""
        return dict(self._ongoing)

    # --- appends --------------------------------------------------------------------------------------------------

    def check_append(self, batches: Sequence[ProducerBatch], origin: str = CLIENT) -> BatchMetadata | None:
        """Check the producer batches of an append before it is written. Returns the remembered batch when the
        append is a retry (the first batch, in order, that repeats one: nothing may then be written), None when
        it may go ahead; raises a StorageError subclass when it must be refused. Client appends get the producer
        checks, the coordinator's markers the marker checks; other appends none.
        """
        if origin != CLIENT:
            if origin == COORDINATOR:
                for batch in batches:
                    if batch.marker is not None:
                        _check_marker(batch, self._producers.get(batch.producer_id))
            return None
        producers = self._producers
        earlier: dict[int, _Expected] | None = {} if len(batches) > 1 else None
        for batch in batches:
            entry = producers.get(batch.producer_id)
            if entry is not None:
                duplicate = entry.find_duplicate(batch.producer_epoch, batch.base_sequence, batch.last_sequence)
                if duplicate is not None:
                    return duplicate
            expected = earlier.get(batch.producer_id) if earlier else None
            if expected is None:
                expected = _NOTHING_KNOWN if entry is None else _Expected(
                    entry.producer_epoch, entry.last_sequence, entry.current_txn_start_offset >= 0,
                    entry.producer_epoch != NO_PRODUCER_EPOCH)
            _check_batch(batch, expected)
            if earlier is not None:
                earlier[batch.producer_id] = _Expected(batch.producer_epoch, batch.last_sequence,
                                                       expected.txn_open or batch.is_transactional, expected.known)
        return None

    def update(self, batches: Iterable[ProducerBatch]) -> Sequence[CompletedTxn]:
        """Apply written batches, in offset order (no checks); returns the transactions their markers completed
        (an empty tuple when none did: non-transactional appends allocate nothing)."""
        producers = self._producers
        completed: list[CompletedTxn] | None = None
        for batch in batches:
            entry = producers.get(batch.producer_id)
            if entry is None:
                entry = producers[batch.producer_id] = ProducerStateEntry(batch.producer_id)
            if not batch.is_transactional:
                entry.apply(batch)
            elif batch.marker is None:
                if entry.current_txn_start_offset < 0:
                    self._ongoing[batch.producer_id] = batch.first_offset
                entry.apply(batch)
            else:
                done = self._complete(entry, batch)
                entry.apply(batch)
                if done is not None:
                    if completed is None:
                        completed = []
                    completed.append(done)
        return completed or ()

    def _complete(self, entry: ProducerStateEntry, marker: ProducerBatch) -> CompletedTxn | None:
        """The transaction `marker` ends (None when the producer has none open here: a marker then completes
        nothing, as in Kafka), with its last stable offset taken before it leaves the open ones."""
        first_offset = entry.current_txn_start_offset
        if first_offset < 0:
            return None
        last_stable_offset = marker.first_offset + 1
        for producer_id, other_first in self._ongoing.items():
            if producer_id != marker.producer_id:
                last_stable_offset = other_first
                break
        self._ongoing.pop(marker.producer_id, None)
        return CompletedTxn(marker.producer_id, first_offset, marker.first_offset,
                            marker.marker.type == ControlRecordType.ABORT, last_stable_offset)

    def remove_expired(self, now_ms: int, producer_id_expiration_ms: int) -> int:
        """Forget producers idle for `producer.id.expiration.ms` (not those with an open transaction); returns how
        many went."""
        expired = [producer_id for producer_id, entry in self._producers.items()
                   if entry.current_txn_start_offset < 0
                   and now_ms - entry.last_timestamp >= producer_id_expiration_ms]
        for producer_id in expired:
            del self._producers[producer_id]
        return len(expired)

    def clear(self) -> None:
        self._producers = {}
        self._ongoing = OrderedDict()

    # --- snapshots ------------------------------------------------------------------------------------------------

    @property
    def snapshot_offsets(self) -> list[int]:
        return list(self._snapshots)

    @property
    def latest_snapshot_offset(self) -> int | None:
        return self._snapshots[-1] if self._snapshots else None

    def take_snapshot(self, offset: int, *, sync: bool) -> bool:
        """Write the state (which must cover exactly the offsets below `offset`) as `<offset>.snapshot`, unless a
        snapshot at or above that offset exists already. Without `sync` the fsync waits for `sync_snapshots`.
        Returns whether a file was written."""
        latest = self.latest_snapshot_offset
        if offset <= 0 or (latest is not None and offset <= latest):
            return False
        entries = [entry.to_snapshot() for entry in self._producers.values()]
        write_snapshot(snapshot_path(self.directory, offset), entries, sync=sync)
        self._snapshots.append(offset)
        if not sync:
            with self._unsynced_lock:
                self._unsynced.append(offset)
        return True

    def sync_snapshots(self) -> bool:
        """fsync the snapshots written since the last call (the log's flush runs this); returns whether there were
        any, so the caller knows to fsync the directory too."""
        with self._unsynced_lock:
            pending, self._unsynced = self._unsynced, []
        for offset in pending:
            fsync_path(snapshot_path(self.directory, offset))
        return bool(pending)

    def load(self, log_start_offset: int, log_end_offset: int) -> int | None:
        """Replace the state with that of the newest usable snapshot: snapshots below the log start offset or past
        the log end offset are deleted first, and so is every newer one that fails its checks. Returns the loaded
        snapshot's offset (the log replays from there), or None when none is usable."""
        self.clear()
        for offset in list(self._snapshots):
            if offset < log_start_offset or offset > log_end_offset:
                self._delete(offset)
        while self._snapshots:
            offset = self._snapshots[-1]
            try:
                entries = read_snapshot(snapshot_path(self.directory, offset))
            except (CorruptSnapshotError, FileNotFoundError):
                self._delete(offset)
                continue
            self._producers = {entry.producer_id: ProducerStateEntry.from_snapshot(entry) for entry in entries}
            self._ongoing = OrderedDict(sorted(
                ((entry.producer_id, entry.current_txn_first_offset) for entry in entries
                 if entry.current_txn_first_offset >= 0), key=lambda item: item[1]))
            return offset
        return None

    def delete_snapshots_below(self, offset: int) -> None:
        while self._snapshots and self._snapshots[0] < offset:
            self._delete(self._snapshots[0])

    def delete_snapshots_above(self, offset: int) -> None:
        while self._snapshots and self._snapshots[-1] > offset:
            self._delete(self._snapshots[-1])

    def delete_all_snapshots(self) -> None:
        self.delete_snapshots_above(-1)

    def remove_stray_snapshots(self, segment_bases: Sequence[int]) -> None:
        """Keep one snapshot per segment (at its base offset) and, above the last segment's base, the newest other
        one (written at the last close or load); delete the rest. This bounds the files as Kafka does."""
        bases = set(segment_bases)
        strays = [offset for offset in self._snapshots if offset not in bases]
        if strays and strays[-1] > max(bases, default=-1):
            strays.pop()
        for offset in strays:
            self._delete(offset)

    def _delete(self, offset: int) -> None:
        self._snapshots.remove(offset)
        delete_snapshot(self.directory, offset)
