"""Producer state of one partition, by Kafka's rules: retries of the last five batches, epochs, sequence gaps and
wrap-around, transactions, expiry, and snapshots written, loaded and pruned."""
import os

import pytest

from compatbroker.protocol.records.control import ControlRecordType, TransactionMarker
from compatbroker.storage.errors import (InvalidProducerEpochError, InvalidTxnStateError, OutOfOrderSequenceError,
                                         UnknownProducerIdError)
from compatbroker.storage.producer_snapshot import snapshot_path
from compatbroker.storage.producer_state import (NUM_BATCHES_TO_RETAIN, BatchMetadata, ProducerBatch,
                                                 ProducerStateManager, in_sequence)
from compatbroker.storage.validator import COORDINATOR

MAX_SEQ = 2**31 - 1
NOW = 1_700_000_000_000


class Partition:
    """A ProducerStateManager and the offsets a log would assign, so a test reads like a producer's requests."""

    def __init__(self, directory):
        self.state = ProducerStateManager(str(directory))
        self.next_offset = 0

    def batch(self, pid, epoch, base_seq, count=1, *, transactional=False, timestamp=NOW):
        return ProducerBatch(pid, epoch, base_seq, (base_seq + count - 1) % 2**31, self.next_offset,
                             self.next_offset + count - 1, timestamp, transactional)

    def send(self, *batches, origin="client"):
        """Check then write, as the log does: returns the duplicate's metadata, or None when written."""
        duplicate = self.state.check_append(batches, origin)
        if duplicate is None:
            self.state.update(batches)
            self.next_offset = batches[-1].last_offset + 1
        return duplicate

    def marker(self, pid, epoch, coordinator_epoch, kind=ControlRecordType.COMMIT, timestamp=NOW):
        batch = ProducerBatch(pid, epoch, -1, -1, self.next_offset, self.next_offset, timestamp, True,
                              TransactionMarker(kind, coordinator_epoch))
        return self.send(batch, origin=COORDINATOR)


def described(state):
    return sorted((e.producer_id, e.producer_epoch, e.last_sequence, e.last_offset, e.last_timestamp,
                   e.coordinator_epoch, e.current_txn_start_offset) for e in state.active_producers())


@pytest.fixture
def partition(tmp_path):
    return Partition(tmp_path)


def test_in_sequence_wraps_after_int32_max():
    assert in_sequence(-1, 0) and in_sequence(5, 6) and in_sequence(MAX_SEQ, 0)
    assert not in_sequence(5, 5) and not in_sequence(5, 7) and not in_sequence(MAX_SEQ - 1, 0)


def test_each_of_the_last_five_batches_is_recognised_as_a_retry(partition):
    sent = []
    for n in range(7):
        batch = partition.batch(1, 0, 3 * n, 3)
        assert partition.send(batch) is None
        sent.append(batch)
    for batch in sent[-NUM_BATCHES_TO_RETAIN:]:
        retry = partition.batch(1, 0, batch.base_sequence, 3)
        assert partition.send(retry) == BatchMetadata(batch.last_sequence, batch.last_offset, 2, NOW)
    assert partition.next_offset == 21  # nothing written by the retries
    for old in sent[:2]:  # too old to be remembered: the producer must learn it is out of order
        with pytest.raises(OutOfOrderSequenceError):
            partition.send(partition.batch(1, 0, old.base_sequence, 3))


def test_a_retry_must_match_the_whole_sequence_range(partition):
    partition.send(partition.batch(1, 0, 0, 3))
    with pytest.raises(OutOfOrderSequenceError):  # same first sequence, other length: not the same batch
        partition.send(partition.batch(1, 0, 0, 2))


def test_gaps_and_reorderings_are_out_of_order(partition):
    partition.send(partition.batch(1, 0, 0, 2))
    for base_seq in (3, 1, 100):
        with pytest.raises(OutOfOrderSequenceError):
            partition.send(partition.batch(1, 0, base_seq))
    assert partition.send(partition.batch(1, 0, 2)) is None


def test_a_stale_epoch_is_fenced(partition):
    partition.send(partition.batch(1, 3, 0))
    with pytest.raises(InvalidProducerEpochError):
        partition.send(partition.batch(1, 2, 1))
    with pytest.raises(InvalidProducerEpochError):  # even as a retry of an old batch: retries need the epoch
        partition.send(partition.batch(1, 2, 0))


def test_a_new_epoch_starts_at_zero_and_forgets_the_old_batches(partition):
    partition.send(partition.batch(1, 0, 0, 5))
    with pytest.raises(OutOfOrderSequenceError):
        partition.send(partition.batch(1, 1, 5))
    assert partition.send(partition.batch(1, 1, 0)) is None
    assert partition.state.entry(1).producer_epoch == 1 and len(partition.state.entry(1).batches) == 1
    with pytest.raises(InvalidProducerEpochError):
        partition.send(partition.batch(1, 0, 0, 5))


def test_a_producer_without_state_must_start_at_sequence_zero(partition):
    """UNKNOWN_PRODUCER_ID (the issue's rule; Kafka before KIP-360); once known, the next batch must follow."""
    with pytest.raises(UnknownProducerIdError):
        partition.send(partition.batch(9, 4, 1000, 2))
    assert partition.state.entry(9) is None
    assert partition.send(partition.batch(9, 4, 0, 1002)) is None
    assert partition.state.entry(9).last_sequence == 1001
    with pytest.raises(OutOfOrderSequenceError):
        partition.send(partition.batch(9, 4, 1003))
    assert partition.send(partition.batch(9, 4, 1002)) is None


def test_sequences_wrap_around(partition):
    partition.send(partition.batch(1, 0, MAX_SEQ - 2, 2), origin=COORDINATOR)  # state as if written long ago
    across = partition.batch(1, 0, MAX_SEQ, 3)  # sequences MAX_SEQ, 0, 1
    assert across.last_sequence == 1
    assert partition.send(across) is None
    assert partition.send(partition.batch(1, 0, MAX_SEQ, 3)) == BatchMetadata(1, 4, 2, NOW)  # its retry
    assert partition.send(partition.batch(1, 0, 2)) is None
    with pytest.raises(OutOfOrderSequenceError):
        partition.send(partition.batch(1, 0, 0))


def test_batches_of_one_append_are_checked_in_order_against_each_other(partition):
    partition.send(partition.batch(1, 0, 0))
    first = partition.batch(1, 0, 1)
    second = ProducerBatch(1, 0, 2, 2, 1, 1, NOW, False)
    assert partition.send(first, second) is None
    assert partition.state.entry(1).last_sequence == 2
    gap = ProducerBatch(1, 0, 9, 9, 3, 3, NOW, False)
    with pytest.raises(OutOfOrderSequenceError):
        partition.send(partition.batch(1, 0, 3), gap)
    assert partition.state.entry(1).last_sequence == 2  # a refused append changes nothing


def test_a_retry_later_in_an_append_answers_for_the_whole_append(partition):
    partition.send(partition.batch(1, 0, 0))
    partition.send(partition.batch(2, 0, 0))
    assert partition.send(partition.batch(2, 0, 1), partition.batch(1, 0, 0)) == BatchMetadata(0, 0, 0, NOW)
    assert partition.state.entry(2).last_sequence == 0


def test_transactions_open_with_data_and_close_with_a_marker(partition):
    partition.send(partition.batch(5, 0, 0))
    partition.send(partition.batch(5, 0, 1, 2, transactional=True))
    partition.send(partition.batch(5, 0, 3, transactional=True))
    entry = partition.state.entry(5)
    assert entry.current_txn_start_offset == 1
    with pytest.raises(InvalidTxnStateError):
        partition.send(partition.batch(5, 0, 4))
    partition.marker(5, 0, coordinator_epoch=6, timestamp=NOW + 5)
    assert (entry.current_txn_start_offset, entry.coordinator_epoch, entry.last_timestamp) == (-1, 6, NOW + 5)
    assert entry.last_sequence == 3  # a marker carries no sequence
    assert partition.send(partition.batch(5, 0, 4)) is None


def test_the_coordinators_appends_are_not_checked(partition):
    partition.send(partition.batch(1, 5, 0))
    assert partition.send(partition.batch(1, 2, 77), origin=COORDINATOR) is None
    assert partition.state.entry(1).producer_epoch == 2  # taken as written, like a replayed batch


def test_expiry_forgets_idle_producers_but_not_open_transactions(partition):
    partition.send(partition.batch(1, 0, 0, timestamp=NOW))
    partition.send(partition.batch(2, 0, 0, timestamp=NOW + 500))
    partition.send(partition.batch(3, 0, 0, timestamp=NOW, transactional=True))
    assert partition.state.remove_expired(NOW + 999, 1000) == 0
    assert partition.state.remove_expired(NOW + 1000, 1000) == 1
    assert sorted(e.producer_id for e in partition.state.active_producers()) == [2, 3]
    assert partition.state.remove_expired(NOW + 10**9, 1000) == 1
    assert [e.producer_id for e in partition.state.active_producers()] == [3]


def test_a_snapshot_restores_every_field_and_the_newest_batch(partition, tmp_path):
    for n in range(3):
        partition.send(partition.batch(1, 2, 2 * n, 2, timestamp=NOW + n))
    partition.send(partition.batch(7, 0, 0, transactional=True))
    partition.marker(8, 1, coordinator_epoch=4)
    assert partition.state.take_snapshot(partition.next_offset, sync=True)
    assert not partition.state.take_snapshot(partition.next_offset, sync=True)  # one per offset
    loaded = ProducerStateManager(str(tmp_path))
    assert loaded.load(0, partition.next_offset) == partition.next_offset
    assert described(loaded) == described(partition.state) == [(1, 2, 5, 5, NOW + 2, -1, -1), (7, 0, 0, 6, NOW, -1, 6),
                                                             (8, 1, -1, -1, NOW, 4, -1)]
    partition.state = loaded
    assert partition.send(partition.batch(1, 2, 4, 2)) == BatchMetadata(5, 5, 1, NOW + 2)
    with pytest.raises(OutOfOrderSequenceError):  # a snapshot keeps only the newest batch, as Kafka's does
        partition.send(partition.batch(1, 2, 2, 2))


def test_load_skips_snapshots_out_of_range_or_corrupt(partition, tmp_path):
    state = partition.state
    for sequence, offset in enumerate((10, 20, 30, 40)):
        partition.send(partition.batch(1, 0, sequence))
        state.take_snapshot(offset, sync=False)
    with open(snapshot_path(str(tmp_path), 30), "r+b") as damaged:
        damaged.write(b"\x00\x09")
    assert state.load(15, 35) == 20  # 10 is below the log start, 40 past the end, 30 corrupt
    assert state.snapshot_offsets == [20] and os.listdir(tmp_path) == ["00000000000000000020.snapshot"]
    assert state.entry(1).last_sequence == 1
    assert state.load(25, 35) is None and len(state) == 0


def test_stray_snapshots_are_pruned_to_one_per_segment_and_the_newest(partition):
    state = partition.state
    for offset in (5, 10, 15, 20, 27, 33):
        state.take_snapshot(offset, sync=False)
    state.remove_stray_snapshots([10, 20, 30])
    assert state.snapshot_offsets == [10, 20, 33]
    state.remove_stray_snapshots([10, 20, 30, 40])
    assert state.snapshot_offsets == [10, 20]


def test_snapshots_written_without_sync_are_synced_once(partition):
    partition.state.take_snapshot(10, sync=False)
    assert partition.state.sync_snapshots() is True
    assert partition.state.sync_snapshots() is False
    partition.state.take_snapshot(20, sync=False)
    partition.state.delete_snapshots_above(15)  # deleted before the flush got to it: skipped
    assert partition.state.sync_snapshots() is True
