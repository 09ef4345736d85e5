"""Compaction of transactional data, as Kafka's LogCleaner does it: committed data compacted like any data, aborted
data removed (and never the latest value of a key), markers kept until their transaction's data are gone and then
for delete.retention.ms, never a record of an open transaction touched, offsets and producer state unchanged."""
import dataclasses
import os

from compatbroker.protocol.records.batch import batch_crc, iter_records
from compatbroker.protocol.records.control import ControlRecordType, build_control_batch, parse_control_key
from compatbroker.storage.cleaner import cleanable_limit, clean, needs_cleaning, prepare_clean
from compatbroker.storage.log_manager import LogManager
from compatbroker.storage.transaction_index import AbortedTxn, read_transaction_index
from compatbroker.storage.validator import COORDINATOR

from .helpers import NOW, SMALL, all_bytes, batch, batches_of, open_log, records_of

COMPACT = dataclasses.replace(SMALL, cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.01,
                              delete_retention_ms=1000)
COMMIT, ABORT = ControlRecordType.COMMIT, ControlRecordType.ABORT


class Producer:
    """A transactional producer writing to one log: data with its sequences, and the coordinator's markers."""

    def __init__(self, log, producer_id, epoch=0):
        self.log, self.producer_id, self.epoch, self.sequence = log, producer_id, epoch, 0

    def send(self, *pairs):
        keys, values = [k for k, _ in pairs], [v for _, v in pairs]
        result = self.log.append(batch(values, keys=keys, producer_id=self.producer_id, producer_epoch=self.epoch,
                                       base_sequence=self.sequence, is_transactional=True),
                                 leader_epoch=0, now_ms=NOW)
        self.sequence += len(pairs)
        return result.base_offset

    def end(self, marker_type, *, epoch=None):
        self.epoch = self.epoch if epoch is None else epoch
        marker = build_control_batch(marker_type, producer_id=self.producer_id, producer_epoch=self.epoch,
                                     coordinator_epoch=0, timestamp=NOW)
        return self.log.append(marker, leader_epoch=0, now_ms=NOW, origin=COORDINATOR).base_offset


def plain(log, key, value):
    return log.append(batch([value], keys=[key]), leader_epoch=0, now_ms=NOW).base_offset


def committed_view(log):
    """What a read_committed consumer gets: the aborted ranges from the index, then Kafka's consumer rule (drop a
    transactional batch of a producer whose aborted transaction has begun, until its ABORT marker)."""
    pending = sorted(log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset),
                     key=lambda txn: txn.first_offset)
    aborting, out = set(), []
    for header, raw in batches_of(all_bytes(log)):
        while pending and pending[0].first_offset <= header.last_offset:
            aborting.add(pending.pop(0).producer_id)
        if header.is_control:
            if _control_type(raw) == ABORT:
                aborting.discard(header.producer_id)
        elif not (header.is_transactional and header.producer_id in aborting):
            out += records_of(raw)
    return out


def uncommitted_view(log):
    """What a read_uncommitted consumer gets: every data record."""
    return [record for header, raw in batches_of(all_bytes(log)) if not header.is_control
            for record in records_of(raw)]


def markers(log):
    """[(offset, type, has delete horizon)] of the markers still in the log (emptied ones have type None)."""
    return [(header.base_offset, _control_type(raw), header.has_delete_horizon)
            for header, raw in batches_of(all_bytes(log)) if header.is_control]


def _control_type(raw):
    record = next(iter_records(raw, max_size=1 << 20), None)
    return None if record is None else parse_control_key(record.key)


def compacted(records, limit):
    """The latest record per key among those below `limit`, in offset order, then every record from `limit`."""
    latest = {}
    for record in records:
        if record[0] < limit:
            latest[record[1]] = record
    return sorted(latest.values()) + [record for record in records if record[0] >= limit]


def _mixed_log(tmp_path):
    """Committed and aborted transactions and plain records over four sealed segments, then an active one:

        segment 0: 0 plain k1 | 1-2 A k1 k2 | 3-4 B k1 k3 (aborted) | 5 A COMMIT
        segment 6: 6 B k4 (aborted) | 7 B ABORT | 8 plain k2
        segment 9: 9 B k5 | 10 B COMMIT | 11 A k6 (aborted) | 12 A ABORT
        segment 13: 13 plain k7 | 14 plain k5 | 15 A k8 | 16 A COMMIT | 17 B k9 | 18 B COMMIT
        active 19: 19 plain k10
    """
    log = open_log(tmp_path, COMPACT)
    a, b = Producer(log, 1000), Producer(log, 2000)
    plain(log, b"k1", b"plain-1")
    a.send((b"k1", b"a-commit-1"), (b"k2", b"a-commit-2"))
    b.send((b"k1", b"b-abort-1"), (b"k3", b"b-abort-3"))  # the newest k1, but aborted: k1 stays a-commit-1
    a.end(COMMIT)
    log.roll(NOW)
    b.send((b"k4", b"b-abort-4"))
    b.end(ABORT)
    plain(log, b"k2", b"plain-2")
    log.roll(NOW)
    b.send((b"k5", b"b-commit-5"))
    b.end(COMMIT)
    a.send((b"k6", b"a-abort-6"))
    a.end(ABORT)
    log.roll(NOW)
    plain(log, b"k7", b"plain-7")
    plain(log, b"k5", b"plain-5")  # B's committed k5 is superseded: its transaction loses all its data
    a.send((b"k8", b"a-last"))  # the producers' last data batches
    a.end(COMMIT)
    b.send((b"k9", b"b-last"))
    b.end(COMMIT)
    log.roll(NOW)
    plain(log, b"k10", b"active")
    assert [s.base_offset for s in log.segments] == [0, 6, 9, 13, 19]
    return log


def test_committed_data_is_compacted_and_aborted_data_removed_at_the_same_offsets(tmp_path):
    log = _mixed_log(tmp_path)
    before = committed_view(log)
    assert (3, b"k1", b"b-abort-1") in uncommitted_view(log) and (3, b"k1", b"b-abort-1") not in before
    limit = cleanable_limit(log, NOW)
    assert limit == 19 and needs_cleaning(log, 0, NOW)
    assert clean(log, 0, NOW) == limit
    expected = compacted(before, limit)
    assert (1, b"k1", b"a-commit-1") in expected  # the aborted k1 after it did not supersede it
    assert committed_view(log) == expected
    assert uncommitted_view(log) == expected  # no aborted record is left below the limit
    assert log.log_end_offset == 20
    assert all(batch_crc(raw, len(raw)) == header.crc for header, raw in batches_of(all_bytes(log)))
    log.close()
    reopened = open_log(tmp_path, COMPACT, recovery_point=0)
    assert committed_view(reopened) == uncommitted_view(reopened) == expected
    reopened.close()


def test_markers_stay_until_the_delete_horizon_once_their_data_are_gone(tmp_path):
    """The pass that removes a transaction's last batch still sees it, so the marker stays; the next pass finds no
    batch of it and gives the marker a delete horizon; a pass at or after the horizon removes it."""
    log = _mixed_log(tmp_path)
    everything = [(5, COMMIT, False), (7, ABORT, False), (10, COMMIT, False), (12, ABORT, False),
                  (16, COMMIT, False), (18, COMMIT, False)]
    assert markers(log) == everything
    clean(log, 0, NOW)
    assert markers(log) == everything
    clean(log, 0, NOW)
    horizons = [(5, COMMIT, False), (7, ABORT, True), (10, COMMIT, True), (12, ABORT, True), (16, COMMIT, False),
                (18, COMMIT, False)]  # A's k1 at 1 is still the latest k1: its COMMIT at 5 stays
    assert markers(log) == horizons
    assert [h.base_timestamp for h, _ in batches_of(all_bytes(log)) if h.has_delete_horizon] == [NOW + 1000] * 3
    clean(log, 0, NOW + 999)
    assert markers(log) == horizons
    clean(log, 0, NOW + 1000)
    assert markers(log) == [(5, COMMIT, False), (16, COMMIT, False), (18, COMMIT, False)]
    assert committed_view(log) == uncommitted_view(log) == compacted(uncommitted_view(log), 19)
    assert log.log_end_offset == 20
    log.close()


def test_a_marker_stays_while_a_batch_of_its_transaction_is_kept_for_producer_state(tmp_path):
    """The aborted batch is its producer's last data batch: kept empty (it holds the last sequence), so its ABORT
    marker stays, without a horizon, and the cleaned segment's .txnindex keeps the transaction."""
    log = open_log(tmp_path, COMPACT)
    c = Producer(log, 3000)
    plain(log, b"x", b"1")
    first = c.send((b"k", b"aborted"))
    abort = c.end(ABORT)
    plain(log, b"y", b"2")
    log.roll(NOW)
    plain(log, b"z", b"3")
    assert clean(log, 0, NOW + 10**6) == 4
    (h0, _), (h1, raw1), (h2, _), (h3, _), _ = batches_of(all_bytes(log))
    assert (h1.base_offset, h1.count, h1.producer_id, h1.base_sequence) == (first, 0, 3000, 0)
    assert (h2.base_offset, h2.is_control, h2.has_delete_horizon) == (abort, True, False)
    entries = read_transaction_index(os.path.join(log.directory, "00000000000000000000.txnindex"))
    assert entries == [AbortedTxn(3000, first, abort, abort + 1)]
    assert committed_view(log) == uncommitted_view(log) == [(0, b"x", b"1"), (3, b"y", b"2"), (4, b"z", b"3")]
    log.close()


def _forget_snapshots(log):
    """Remove the producer snapshots of a closed log: its producer state must then come from the log alone."""
    for name in os.listdir(log.directory):
        if name.endswith(".snapshot"):
            os.unlink(os.path.join(log.directory, name))


def _producer(log, producer_id):
    entry = log.producer_state.entry(producer_id)
    return None if entry is None else (entry.producer_epoch, entry.last_sequence, entry.last_offset)


def test_the_last_marker_of_a_producer_without_data_keeps_its_epoch(tmp_path):
    """A fenced producer: its transaction was aborted with a bumped epoch, so no data batch is remembered for it
    and the marker is what holds its epoch. The cleaner keeps it; after its horizon, as Kafka's empty batch."""
    log = open_log(tmp_path, COMPACT)
    c = Producer(log, 4000)
    c.send((b"k", b"zombie"))
    abort = c.end(ABORT, epoch=1)
    plain(log, b"k", b"later")
    log.roll(NOW)
    plain(log, b"z", b"3")
    clean(log, 0, NOW)
    clean(log, 0, NOW + 10**6)  # the zombie's batch went in the first pass: the marker gets its horizon
    assert markers(log) == [(abort, ABORT, True)] and _producer(log, 4000) == (1, -1, -1)
    log.close()
    _forget_snapshots(log)
    reopened = open_log(tmp_path, COMPACT, recovery_point=0, clean_shutdown=False)
    assert _producer(reopened, 4000) == (1, -1, -1)  # replayed from the cleaned log
    assert committed_view(reopened) == uncommitted_view(reopened) == [(2, b"k", b"later"), (3, b"z", b"3")]
    clean(reopened, 0, NOW + 2 * 10**6)  # past the horizon: kept, emptied
    assert markers(reopened) == [(abort, None, False)]
    reopened.close()


def test_producer_state_after_a_reload_is_the_same(tmp_path):
    log = _mixed_log(tmp_path)
    clean(log, 0, NOW)
    clean(log, 0, NOW)
    clean(log, 0, NOW + 1000)
    expected = {1000: (0, 3, 15), 2000: (0, 4, 17)}
    assert {pid: _producer(log, pid) for pid in expected} == expected
    log.close()
    _forget_snapshots(log)
    reopened = open_log(tmp_path, COMPACT, recovery_point=0, clean_shutdown=False)
    assert {pid: _producer(reopened, pid) for pid in expected} == expected
    assert reopened.last_stable_offset == reopened.log_end_offset == 20 and not reopened.ongoing_transactions()
    reopened.close()


def test_an_open_transaction_is_never_cleaned(tmp_path):
    """The cleanable limit stops at the segment holding the last stable offset: the open transaction's records,
    and everything after them, stay byte for byte until it completes."""
    log = open_log(tmp_path, COMPACT)
    plain(log, b"k", b"old")
    plain(log, b"k", b"older-than-open")
    log.roll(NOW)
    d = Producer(log, 5000)
    plain(log, b"k", b"before-open")
    opened = d.send((b"k", b"open"))
    log.roll(NOW)
    plain(log, b"k", b"after-open")
    log.roll(NOW)
    plain(log, b"k", b"active")
    assert log.last_stable_offset == opened == 3
    assert cleanable_limit(log, NOW) == log.segments[1].base_offset == 2
    untouched = b"".join(s.read_bytes(0, s.size) for s in log.segments[1:])
    assert clean(log, 0, NOW) == 2
    assert b"".join(s.read_bytes(0, s.size) for s in log.segments[1:]) == untouched
    assert records_of(all_bytes(log))[0] == (1, b"k", b"older-than-open")
    assert not needs_cleaning(log, 2, NOW)
    d.end(ABORT)
    log.roll(NOW)
    plain(log, b"z", b"new active")
    assert needs_cleaning(log, 2, NOW) and clean(log, 2, NOW) == 7
    assert uncommitted_view(log) == committed_view(log) == [(5, b"k", b"active"), (7, b"z", b"new active")]
    log.close()


def test_cleaned_segments_get_their_own_txnindex(tmp_path):
    log = _mixed_log(tmp_path)
    path = {base: os.path.join(log.directory, f"{base:020d}.txnindex") for base in (0, 6, 9, 13)}
    assert [os.path.exists(path[base]) for base in (0, 6, 9, 13)] == [False, True, True, False]
    entries = {6: [AbortedTxn(2000, 3, 7, 8)], 9: [AbortedTxn(1000, 11, 12, 13)]}
    assert {base: read_transaction_index(path[base]) for base in (6, 9)} == entries
    clean(log, 0, NOW)  # the aborted batches are seen, then dropped: the entries stay with their markers
    assert {base: read_transaction_index(path[base]) for base in (6, 9)} == entries
    assert not os.path.exists(path[0]) and not os.path.exists(path[13])
    clean(log, 0, NOW)  # no batch of them is left: the cleaned segments need no index
    assert not any(os.path.exists(name) for name in path.values())
    assert log.collect_aborted_transactions(0, 20) == []
    assert not any(name.endswith((".cleaned", ".swap")) for name in os.listdir(log.directory))
    log.close()


def test_a_crash_after_the_swap_files_were_written_is_finished_on_load(tmp_path):
    """Completing the swap removes the old .txnindex when the cleaned segment needs none."""
    log = open_log(tmp_path, COMPACT)
    c = Producer(log, 6000)
    plain(log, b"k", b"v0")
    first = c.send((b"k", b"aborted"))
    abort = c.end(ABORT)
    c.send((b"k", b"committed"))  # C's last data batch: kept (empty) for producer state
    c.end(COMMIT)
    plain(log, b"k", b"v1")
    log.roll(NOW)
    plain(log, b"z", b"active")
    index = os.path.join(log.directory, "00000000000000000000.txnindex")
    clean(log, 0, NOW)
    assert read_transaction_index(index) == [AbortedTxn(6000, first, abort, abort + 1)]
    plan = prepare_clean(log, 0, NOW)  # the aborted batch is gone: no entry, the marker gets its horizon
    assert os.path.exists(index) and not os.path.exists(index + ".swap")
    log.close()
    for segment in plan.new:
        segment.close()
    reopened = open_log(tmp_path, COMPACT, clean_shutdown=True)
    assert not any(name.endswith((".swap", ".cleaned", ".deleted")) for name in os.listdir(reopened.directory))
    assert reopened.segments[0].aborted_transactions() == [] and not os.path.exists(index)
    assert markers(reopened) == [(abort, ABORT, True), (abort + 2, COMMIT, False)]
    assert committed_view(reopened) == uncommitted_view(reopened) == [(5, b"k", b"v1"), (6, b"z", b"active")]
    reopened.close()


def test_only_the_last_batch_of_an_idempotent_producer_stays_empty(tmp_path):
    """Kafka's isBatchLastRecordOfProducer: the batch holding a producer's last sequence is kept (empty) when all
    its records go; its older batches just go."""
    log = open_log(tmp_path, COMPACT)
    for sequence, value in enumerate((b"1", b"2")):
        log.append(batch([value], keys=[b"k"], producer_id=7000, producer_epoch=0, base_sequence=sequence),
                   leader_epoch=0, now_ms=NOW)
    plain(log, b"k", b"3")
    plain(log, b"z", b"4")
    log.roll(NOW)
    plain(log, b"z", b"active")
    clean(log, 0, NOW)
    assert [(h.base_offset, h.count, h.producer_id, h.base_sequence) for h, _ in batches_of(all_bytes(log))] == [
        (1, 0, 7000, 1), (2, 1, -1, -1), (3, 1, -1, -1), (4, 1, -1, -1)]
    log.close()


def test_the_last_batch_below_the_cleanable_limit_stays_even_empty(tmp_path):
    """Kafka keeps the last batch of a cleaning round so that its last offset is not lost."""
    log = open_log(tmp_path, COMPACT)
    plain(log, b"k", b"v")
    plain(log, b"k", None)
    log.roll(NOW)
    plain(log, b"z", b"active")
    clean(log, 0, NOW)  # the tombstone gets its horizon
    clean(log, 0, NOW + 1000)  # and goes: its batch stays, empty
    assert [(h.base_offset, h.last_offset, h.count) for h, _ in batches_of(all_bytes(log))] == [(1, 1, 0), (2, 2, 1)]
    log.close()


def test_the_log_manager_never_cleans_past_the_last_stable_offset(tmp_path):
    manager = LogManager(str(tmp_path), broker_properties={"log.segment.bytes": "4096"})
    manager.startup(NOW)
    manager.create_topic("t", 1, now_ms=NOW, overrides={"cleanup.policy": "compact",
                                                        "min.cleanable.dirty.ratio": "0.01"})
    log = manager.get_log("t", 0)
    d = Producer(log, 8000)
    d.send((b"k", b"open"))
    for n in range(3):
        log.roll(NOW)
        plain(log, b"k", b"%d" % n)
    assert manager.run_cleaner(NOW) == 0  # everything is at or after the open transaction
    manager.first_dirty_offsets[("t", 0)] = 10**6  # beyond the log end (a lost tail): reset to the start
    d.end(COMMIT)
    log.roll(NOW)
    assert manager.run_cleaner(NOW) == 1 and manager.first_dirty_offsets[("t", 0)] == 5
    assert uncommitted_view(log) == committed_view(log) == [(3, b"k", b"2")]
    manager.shutdown()
