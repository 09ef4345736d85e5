"""Transactions at the log: open transactions and the last stable offset, the `.txnindex` of aborts (Kafka's
entries, files and search), the coordinator's marker checks, and all of it after a restart, a SIGKILL-like reopen,
a torn tail and a truncation, without another open descriptor."""
import os

import pytest

from compatbroker.protocol.records.batch import read_batch_header
from compatbroker.protocol.records.control import ControlRecordType, build_control_batch
from compatbroker.storage.errors import InvalidProducerEpochError, TransactionCoordinatorFencedError
from compatbroker.storage.producer_snapshot import snapshot_offsets, snapshot_path
from compatbroker.storage.producer_state import producer_batch
from compatbroker.storage.segment import DELETED_SUFFIX
from compatbroker.storage.transaction_index import TXN_INDEX_SUFFIX, AbortedTxn, read_transaction_index
from compatbroker.storage.validator import COORDINATOR

from .helpers import NOW, SMALL, abandon, batch, open_log, records_of

ABORT, COMMIT = ControlRecordType.ABORT, ControlRecordType.COMMIT


class Producer:
    """A transactional producer writing to one log: data batches (origin client) and its markers (origin
    coordinator), with the sequences a real one would use."""

    def __init__(self, log, producer_id, epoch=0):
        self.log, self.producer_id, self.epoch, self.sequence = log, producer_id, epoch, 0

    def send(self, count=1, size=10):
        values = [b"%d:%d" % (self.producer_id, self.sequence + n) + b"." * size for n in range(count)]
        payload = batch(values, producer_id=self.producer_id, producer_epoch=self.epoch,
                        base_sequence=self.sequence, is_transactional=True)
        self.sequence += count
        return self.log.append(payload, leader_epoch=0, now_ms=NOW).base_offset

    def end(self, marker_type, *, epoch=None, coordinator_epoch=0):
        marker = build_control_batch(marker_type, producer_id=self.producer_id,
                                     producer_epoch=self.epoch if epoch is None else epoch,
                                     coordinator_epoch=coordinator_epoch, timestamp=NOW)
        return self.log.append(marker, leader_epoch=0, now_ms=NOW, origin=COORDINATOR).base_offset


def plain(log, count=1):
    return log.append(batch([b"p"] * count), leader_epoch=0, now_ms=NOW).base_offset


def txn_index_files(log):
    return sorted(name for name in os.listdir(log.directory) if name.endswith(TXN_INDEX_SUFFIX))


def all_aborted(log):
    return [entry for segment in log.segments for entry in segment.aborted_transactions()]


# --- the last stable offset --------------------------------------------------------------------------------------

def test_the_lso_is_the_first_offset_of_the_earliest_open_transaction(tmp_path):
    log = open_log(tmp_path)
    first, second = Producer(log, 1), Producer(log, 2)
    plain(log, 2)
    assert log.last_stable_offset == log.high_watermark == 2
    a = first.send(2)
    b = second.send()
    first.send()  # more of the earliest transaction: it still bounds the LSO
    assert (a, b) == (2, 4)
    assert log.last_stable_offset == 2 and log.high_watermark == 6
    assert log.ongoing_transactions() == {1: 2, 2: 4}
    first.end(COMMIT)
    assert log.last_stable_offset == 4 and log.ongoing_transactions() == {2: 4}
    second.end(ABORT)
    assert log.last_stable_offset == log.high_watermark == 8 and log.ongoing_transactions() == {}
    assert log.read(0, 10**6).last_stable_offset == 8
    log.close()


def test_a_read_stopped_at_the_lso_returns_only_decided_batches(tmp_path):
    log = open_log(tmp_path)
    plain(log, 3)
    open_txn = Producer(log, 1)
    open_txn.send()
    plain(log)
    result = log.read(0, 10**6, max_offset=log.last_stable_offset, aborted=True)
    assert result.last_stable_offset == 3 and result.aborted_transactions == []
    data = b"".join(os.pread(r.file.fileno(), r.length, r.position) for r in result.regions)
    assert [offset for offset, _, _ in records_of(data)] == [0, 1, 2]
    assert log.read(3, 10**6, max_offset=3, aborted=True).regions == []
    log.close()


# --- the aborted transaction index --------------------------------------------------------------------------------

def test_an_abort_writes_kafkas_entry_and_a_commit_writes_none(tmp_path):
    log = open_log(tmp_path)
    committed, aborted, later = Producer(log, 1), Producer(log, 2), Producer(log, 3)
    committed.send()
    committed.end(COMMIT)
    assert txn_index_files(log) == []  # only an abort creates the file, as in Kafka
    aborted.send(2)        # 2-3
    later.send()           # 4: still open when 2 aborts, so the entry's LSO is 4
    marker = aborted.end(ABORT)  # 5
    assert txn_index_files(log) == [f"{0:020d}{TXN_INDEX_SUFFIX}"]
    assert log.active_segment.aborted_transactions() == [AbortedTxn(2, 2, marker, 4)]
    later.end(ABORT)       # 6: nothing else open, so LSO = marker + 1
    assert read_transaction_index(os.path.join(log.directory, txn_index_files(log)[0])) == [
        AbortedTxn(2, 2, 5, 4), AbortedTxn(3, 4, 6, 7)]
    log.close()


def test_a_marker_without_an_open_transaction_is_written_and_completes_nothing(tmp_path):
    log = open_log(tmp_path)
    producer = Producer(log, 4)
    assert producer.end(ABORT) == 0
    assert log.log_end_offset == 1 and all_aborted(log) == [] and log.last_stable_offset == 1
    log.close()


def test_collect_aborted_transactions_walks_segments_from_the_start_offset(tmp_path):
    log = open_log(tmp_path)  # 4 KiB segments
    expected = []
    for n in range(12):
        producer = Producer(log, 100 + n)
        first = producer.send(3, size=300)
        marker = producer.end(ABORT if n in (2, 7, 8) else COMMIT)
        if n in (2, 7, 8):
            expected.append(AbortedTxn(100 + n, first, marker, marker + 1))
        plain(log)
    assert len(log.segments) > 3 and all_aborted(log) == expected
    assert len(txn_index_files(log)) < len(log.segments)  # only segments holding an abort marker have one
    end = log.log_end_offset
    assert log.collect_aborted_transactions(0, end) == expected
    middle = expected[1]
    # Kafka's overlap rule: last offset >= start, first offset < upper bound
    assert log.collect_aborted_transactions(middle.first_offset, middle.first_offset + 1) == [middle]
    assert log.collect_aborted_transactions(middle.last_offset + 1, end) == expected[2:]
    assert log.collect_aborted_transactions(end, end + 10) == []
    log.close()


def test_read_committed_reads_list_the_aborts_overlapping_the_returned_range(tmp_path):
    log = open_log(tmp_path)
    aborted = Producer(log, 1)
    aborted.send(2)
    aborted.end(ABORT)                  # 0-1, marker 2
    plain(log)                          # 3
    again = Producer(log, 2)
    again.send()
    again.end(ABORT)                    # 4, marker 5
    first = log.read(0, 1, aborted=True)  # one batch (0-1): the range ends at 2
    assert first.aborted_transactions == [AbortedTxn(1, 0, 2, 3)]
    everything = log.read(0, 10**6, aborted=True)
    assert everything.aborted_transactions == [AbortedTxn(1, 0, 2, 3), AbortedTxn(2, 4, 5, 6)]
    assert log.read(3, 10**6, aborted=True).aborted_transactions == [AbortedTxn(2, 4, 5, 6)]
    assert log.read(0, 10**6).aborted_transactions is None  # read_uncommitted does not look
    log.close()


# --- marker checks ------------------------------------------------------------------------------------------------

def test_markers_from_a_fenced_producer_epoch_or_coordinator_are_refused(tmp_path):
    log = open_log(tmp_path)
    producer = Producer(log, 9, epoch=3)
    producer.send()
    producer.end(COMMIT, coordinator_epoch=5)
    producer.send()
    end = log.log_end_offset
    with pytest.raises(InvalidProducerEpochError):
        producer.end(ABORT, epoch=2, coordinator_epoch=5)
    with pytest.raises(TransactionCoordinatorFencedError) as fenced:
        producer.end(ABORT, coordinator_epoch=4)
    assert fenced.value.error_code == 52  # TRANSACTION_COORDINATOR_FENCED
    assert log.log_end_offset == end and log.ongoing_transactions() == {9: 2}
    producer.end(ABORT, epoch=4, coordinator_epoch=5)  # a newer epoch (fencing) and the same coordinator epoch
    assert log.ongoing_transactions() == {} and all_aborted(log) == [AbortedTxn(9, 2, 3, 4)]
    log.close()


# --- restarts, crashes, truncation --------------------------------------------------------------------------------

def test_open_transactions_survive_a_clean_restart_through_the_snapshot(tmp_path):
    log = open_log(tmp_path)
    early, late = Producer(log, 7), Producer(log, 3)
    early.send()
    late.send()
    log.close()
    log = open_log(tmp_path, clean_shutdown=True, recovery_point=2)
    assert log.ongoing_transactions() == {7: 0, 3: 1}  # in first-offset order, not producer id order
    assert log.last_stable_offset == 0
    Producer(log, 7).end(ABORT)
    assert log.last_stable_offset == 1 and all_aborted(log) == [AbortedTxn(7, 0, 2, 1)]
    log.close()


def test_after_a_sigkill_an_open_transaction_stays_open_and_its_marker_completes_it(tmp_path):
    log = open_log(tmp_path)
    producer = Producer(log, 1)
    for _ in range(15):  # several segments, so the state comes from a roll snapshot plus the log
        producer.send(2, size=300)
    aborter = Producer(log, 2)
    aborter.send()
    aborter.end(ABORT)
    assert len(log.segments) > 2
    lso, aborted = log.last_stable_offset, all_aborted(log)
    index_path = os.path.join(log.directory, txn_index_files(log)[0])
    abandon(log)  # no close: no snapshot at the log end
    os.unlink(index_path)  # the abort's entry never reached the disk either
    log = open_log(tmp_path)
    assert log.last_stable_offset == lso == 0 and log.ongoing_transactions() == {1: 0}
    assert all_aborted(log) == aborted  # rebuilt by the replay
    producer.log = log
    producer.end(COMMIT)
    assert log.ongoing_transactions() == {} and log.last_stable_offset == log.log_end_offset
    log.close()


def test_a_rebuild_from_the_log_alone_restores_transactions_and_the_index(tmp_path):
    log = open_log(tmp_path)
    aborted, still_open = Producer(log, 1), Producer(log, 2)
    aborted.send()
    still_open.send()
    aborted.end(ABORT)
    expected = all_aborted(log)
    abandon(log)
    for offset in snapshot_offsets(log.directory):
        os.unlink(snapshot_path(log.directory, offset))
    log = open_log(tmp_path)
    assert log.ongoing_transactions() == {2: 1} and all_aborted(log) == expected == [AbortedTxn(1, 0, 2, 1)]
    log.close()


def test_a_torn_tail_that_cuts_an_abort_marker_reopens_its_transaction(tmp_path):
    log = open_log(tmp_path)
    producer = Producer(log, 1)
    producer.send(3)
    marker = producer.end(ABORT)
    path = log.active_segment.file.path
    assert all_aborted(log) == [AbortedTxn(1, 0, marker, marker + 1)]
    abandon(log)
    with open(path, "r+b") as segment_file:  # the crash cut the marker in half
        segment_file.truncate(os.path.getsize(path) - 10)
    log = open_log(tmp_path)
    assert log.log_end_offset == marker
    assert all_aborted(log) == [] and log.active_segment.aborted_transactions() == []
    assert read_transaction_index(os.path.join(log.directory, f"{0:020d}{TXN_INDEX_SUFFIX}")) == []
    assert log.ongoing_transactions() == {1: 0} and log.last_stable_offset == 0
    log.close()


def test_truncation_removes_entries_at_and_after_the_offset(tmp_path):
    log = open_log(tmp_path)
    for producer_id in (1, 2, 3):
        producer = Producer(log, producer_id)
        producer.send()
        producer.end(ABORT)  # markers at 1, 3, 5
    log.truncate_to(3)
    assert all_aborted(log) == [AbortedTxn(1, 0, 1, 2)]
    assert log.ongoing_transactions() == {2: 2}  # the marker that closed it is gone
    log.close()
    log = open_log(tmp_path, clean_shutdown=True, recovery_point=3)
    assert all_aborted(log) == [AbortedTxn(1, 0, 1, 2)] and log.ongoing_transactions() == {2: 2}
    log.close()


# --- segment files ------------------------------------------------------------------------------------------------

def test_the_txnindex_is_deleted_with_its_segment_and_orphans_are_removed(tmp_path):
    log = open_log(tmp_path)
    producer = Producer(log, 1)
    producer.send(3, size=300)
    producer.end(ABORT)
    while len(log.segments) < 3:
        plain(log, 5)
    [name] = txn_index_files(log)
    log.delete_oldest_segments(1, now_ms=NOW)  # file.delete.delay.ms: renamed first, unlinked later
    assert txn_index_files(log) == [] and os.path.exists(os.path.join(log.directory, name + DELETED_SUFFIX))
    log.remove_deleted_segments(NOW + 10**9)
    assert not os.path.exists(os.path.join(log.directory, name + DELETED_SUFFIX))
    orphan = os.path.join(log.directory, f"{10**6:020d}{TXN_INDEX_SUFFIX}")
    log.close()
    open(orphan, "wb").close()  # an index whose log is gone
    log = open_log(tmp_path, clean_shutdown=True, recovery_point=log.log_end_offset)
    assert not os.path.exists(orphan)
    log.close()


def test_flush_fsyncs_the_txnindex_and_its_new_directory_entry(tmp_path, monkeypatch):
    log = open_log(tmp_path)
    producer = Producer(log, 1)
    producer.send()
    log.flush()
    producer.end(ABORT)
    synced = []
    real_fsync = os.fsync

    def recording_fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    log.flush()
    index = os.path.join(log.directory, f"{0:020d}{TXN_INDEX_SUFFIX}")
    assert os.path.realpath(index) in synced
    assert os.path.realpath(log.directory) in synced
    log.close()


def test_aborts_hold_no_extra_descriptor(tmp_path):
    log = open_log(tmp_path, SMALL)
    before = len(os.listdir("/proc/self/fd"))
    for producer_id in range(20):
        producer = Producer(log, producer_id)
        producer.send(2, size=200)
        producer.end(ABORT)
        log.read(0, 10**6, aborted=True)
    assert len(log.segments) > 2 and len(txn_index_files(log)) > 1
    # the .log files of the segments rolled since (the first was open already), nothing for the indexes
    assert len(os.listdir("/proc/self/fd")) - before <= len(log.segments) - 1
    log.close()


@pytest.mark.parametrize("renamed_before_crash, kept",
                         [((), False), ((".index", ".timeindex", TXN_INDEX_SUFFIX), True)])
def test_an_interrupted_swap_keeps_only_the_new_segments_txnindex(tmp_path, renamed_before_crash, kept):
    """A crash while the cleaner's `.swap` files were renamed into place: if the new `.index` is still a `.swap`,
    the `.txnindex` under the final name is the replaced segment's (the cleaned one had none) and goes; once the
    new indexes are renamed, it is the new segment's and stays."""
    log = open_log(tmp_path)
    producer = Producer(log, 1)
    producer.send(3, size=300)
    producer.end(ABORT)
    while len(log.segments) < 2:
        plain(log, 5)
    end = log.log_end_offset
    log.close()
    stem = os.path.join(log.directory, f"{0:020d}")
    for suffix in (".log", ".index", ".timeindex"):  # the cleaner's output: the same batches, no abort index
        if suffix not in renamed_before_crash:
            with open(stem + suffix, "rb") as source, open(stem + suffix + ".swap", "wb") as target:
                target.write(source.read())
    log = open_log(tmp_path, clean_shutdown=True, recovery_point=end)
    assert os.path.exists(stem + TXN_INDEX_SUFFIX) == kept
    assert not [name for name in os.listdir(log.directory) if name.endswith(".swap")]
    log.close()


def test_update_reports_completed_transactions_with_kafkas_last_stable_offset(tmp_path):
    log = open_log(tmp_path)
    first, second = Producer(log, 1), Producer(log, 2)
    first.send()   # 0
    second.send()  # 1
    state = log.producer_state
    plain(log)     # 2: non-transactional, completes nothing
    commit = build_control_batch(COMMIT, producer_id=1, producer_epoch=0, coordinator_epoch=0, timestamp=NOW)
    log.append(commit, leader_epoch=0, now_ms=NOW, origin=COORDINATOR)  # 3
    assert state.first_unstable_offset == 1 and state.ongoing_transactions() == {2: 1}
    abort = build_control_batch(ABORT, producer_id=2, producer_epoch=0, coordinator_epoch=0, timestamp=NOW,
                                base_offset=4)
    completed = state.update([producer_batch(read_batch_header(abort), 4, NOW, abort)])  # as the log hands it
    assert [tuple(txn) for txn in completed] == [(2, 1, 4, True, 5)]
    assert state.first_unstable_offset is None
    log.close()
