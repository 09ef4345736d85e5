"""A partition's log as a replica: the high watermark (default, settable, clamped, truncated, reported by reads,
checkpointed), a follower's byte-for-byte append of the leader's batches (offsets, epochs, producer state and the
`.txnindex` as on the leader, segments rolled alike), and truncation of a follower by leader epoch."""
import os

import pytest

from compatbroker.protocol.records.batch import read_batch_header
from compatbroker.protocol.records.control import ControlRecordType, build_control_batch
from compatbroker.storage.errors import CorruptMessageError, StorageError, UnexpectedAppendOffsetError
from compatbroker.storage.log_config import LogConfig
from compatbroker.storage.log_manager import LogManager
from compatbroker.storage.retention import apply_retention
from compatbroker.storage.transaction_index import AbortedTxn
from compatbroker.storage.validator import COORDINATOR

from .helpers import NOW, SMALL, batch, batches_of, corrupt_crc, directory_snapshot, open_log, records_of
from .test_transactions_log import Producer, all_aborted

ABORT, COMMIT = ControlRecordType.ABORT, ControlRecordType.COMMIT


def _append(log, count=1, *, epoch=0, size=40, **kwargs):
    return log.append(batch([b"v" * size] * count, **kwargs), leader_epoch=epoch, now_ms=NOW)


def _follower(tmp_path, config=SMALL):
    return open_log(tmp_path / "follower", config)


def _copy(leader, follower, *, max_bytes=3000):
    """What a replica fetcher does: read from the follower's log end and append it as it is, until caught up."""
    while follower.log_end_offset < leader.log_end_offset:
        data = leader.read_bytes(follower.log_end_offset, max_bytes)
        result = follower.append_as_follower(data, now_ms=NOW)
        assert result.base_offset == read_batch_header(data).base_offset


def _producer_state(log):
    return {entry.producer_id: (entry.producer_epoch, entry.last_sequence, entry.last_offset,
                                entry.current_txn_start_offset, entry.coordinator_epoch)
            for entry in log.producer_state.active_producers()}


def _send(log, producer_id, sequence, count, *, epoch):
    payload = batch([b"t" * 20] * count, producer_id=producer_id, producer_epoch=0, base_sequence=sequence,
                    is_transactional=True)
    return log.append(payload, leader_epoch=epoch, now_ms=NOW).base_offset


def _end(log, producer_id, marker_type, *, epoch):
    marker = build_control_batch(marker_type, producer_id=producer_id, producer_epoch=0, coordinator_epoch=0,
                                 timestamp=NOW)
    return log.append(marker, leader_epoch=epoch, now_ms=NOW, origin=COORDINATOR).base_offset


def _leader_with_history(tmp_path):
    """Leader epochs 0..3, an idempotent producer, a committed and an aborted transaction, an open one, rolls."""
    leader = open_log(tmp_path / "leader")
    _append(leader, 3)  # 0-2
    for sequence in range(0, 12, 3):  # 3-14
        _append(leader, 3, epoch=1, producer_id=5, producer_epoch=0, base_sequence=sequence)
    _send(leader, 7, 0, 2, epoch=1)  # 15-16
    _send(leader, 8, 0, 3, epoch=1)  # 17-19
    _end(leader, 7, COMMIT, epoch=1)  # 20
    _end(leader, 8, ABORT, epoch=1)  # 21
    for _ in range(20):  # 22-101
        _append(leader, 4, epoch=2, size=100)
    _send(leader, 9, 0, 1, epoch=2)  # 102, left open
    _append(leader, 2, epoch=3)  # 103-104
    return leader


# --- high watermark -----------------------------------------------------------------------------------------------

def test_the_high_watermark_follows_the_log_end_until_set(tmp_path):
    log = open_log(tmp_path)
    _append(log, 5)
    assert not log.high_watermark_set
    assert log.high_watermark == log.log_end_offset == 5
    assert log.read(0, 1000).high_watermark == 5


def test_a_set_high_watermark_is_clamped_reported_and_bounds_the_lso(tmp_path):
    log = open_log(tmp_path)
    _append(log, 10)
    assert log.update_high_watermark(4) == 4
    _append(log, 5)
    assert log.high_watermark == 4 and log.log_end_offset == 15  # no longer follows the end
    result = log.read(0, 100_000)
    assert (result.high_watermark, result.log_end_offset, result.last_stable_offset) == (4, 15, 4)
    assert len(records_of(log.read_bytes(0, 100_000))) == 15  # a follower still reads to the end
    assert log.update_high_watermark(99) == 15
    assert log.update_high_watermark(-3) == 0
    log.delete_records(0, now_ms=NOW)
    Producer(log, 3).send(1)
    log.update_high_watermark(16)
    assert log.last_stable_offset == 15 and log.high_watermark == 16


def test_truncation_pulls_the_high_watermark_down(tmp_path):
    log = open_log(tmp_path)
    for _ in range(6):
        _append(log, 2)
    log.update_high_watermark(10)
    log.truncate_to(6)
    assert log.high_watermark == log.log_end_offset == 6
    log.truncate_fully_and_start_at(20, now_ms=NOW)
    assert log.high_watermark == 20


def test_truncating_fully_forgets_every_epoch_and_producer(tmp_path):
    log = open_log(tmp_path)
    _append(log, 2, epoch=1, producer_id=4, producer_epoch=0, base_sequence=0)
    _append(log, 2, epoch=2)
    log.truncate_fully_and_start_at(50, now_ms=NOW)  # a follower behind the leader's log start offset
    assert (log.log_start_offset, log.log_end_offset, log.epochs.entries) == (50, 50, [])
    assert log.producer_state.entry(4) is None
    log.append_as_follower(batch([b"n"], base_offset=50, partition_leader_epoch=3), now_ms=NOW)
    assert log.epochs.entries == [(3, 50)]
    log.close()
    assert open_log(tmp_path).epochs.entries == [(3, 50)]


def test_delete_records_stops_at_a_set_high_watermark(tmp_path):
    log = open_log(tmp_path)
    for _ in range(6):
        _append(log, 2)
    log.update_high_watermark(4)
    assert log.delete_records(-1, now_ms=NOW) == 4
    with pytest.raises(StorageError):
        log.delete_records(8, now_ms=NOW)


def test_retention_keeps_segments_above_a_set_high_watermark(tmp_path):
    log = open_log(tmp_path, SMALL.with_overrides({"retention.bytes": "1"}))
    for _ in range(60):
        _append(log, 2, size=100)
    assert len(log.segments) > 3
    second_base = log.segments[1].base_offset
    log.update_high_watermark(second_base)
    apply_retention(log, NOW)
    assert log.log_start_offset == second_base  # only the segment wholly below the high watermark went
    log.update_high_watermark(log.log_end_offset)
    apply_retention(log, NOW)
    assert len(log.segments) == 1


def test_high_watermarks_are_checkpointed_and_loaded_only_where_set(tmp_path):
    manager = LogManager(str(tmp_path))
    manager.startup(NOW)
    manager.create_topic("t", 2, now_ms=NOW)
    path = tmp_path / "replication-offset-checkpoint"
    for partition in (0, 1):
        manager.get_log("t", partition).append(batch([b"x"] * 6), leader_epoch=0, now_ms=NOW)
    manager.checkpoint()
    assert not path.exists()  # nothing replicated: a single node writes no such file
    manager.get_log("t", 1).update_high_watermark(4)
    manager.checkpoint()
    assert path.read_text() == "0\n1\nt 1 4\n"
    manager.shutdown()
    reopened = LogManager(str(tmp_path))
    reopened.startup(NOW)
    assert reopened.get_log("t", 1).high_watermark == 4
    assert not reopened.get_log("t", 0).high_watermark_set and reopened.get_log("t", 0).high_watermark == 6
    reopened.shutdown()


# --- append as follower -------------------------------------------------------------------------------------------

def test_a_follower_copy_equals_the_leader_files_and_producer_state(tmp_path):
    leader = _leader_with_history(tmp_path)
    follower = _follower(tmp_path)
    _copy(leader, follower)
    assert len(leader.segments) > 2
    assert follower.log_end_offset == leader.log_end_offset
    assert [s.base_offset for s in follower.segments] == [s.base_offset for s in leader.segments]
    assert follower.epochs.entries == leader.epochs.entries == [(0, 0), (1, 3), (2, 22), (3, 103)]
    assert _producer_state(follower) == _producer_state(leader)
    assert follower.ongoing_transactions() == leader.ongoing_transactions() != {}
    assert follower.last_stable_offset == leader.last_stable_offset
    assert all_aborted(follower) == all_aborted(leader) != []
    assert follower.read_bytes(0, 1 << 20) == leader.read_bytes(0, 1 << 20)
    leader.close()
    follower.close()
    assert directory_snapshot(follower.directory) == directory_snapshot(leader.directory)


def test_a_follower_reopens_with_the_copied_state(tmp_path):
    leader = _leader_with_history(tmp_path)
    follower = _follower(tmp_path)
    _copy(leader, follower, max_bytes=1 << 20)  # one append holding several segments' worth
    expected = _producer_state(leader)
    follower.close()
    reopened = _follower(tmp_path)
    assert _producer_state(reopened) == expected
    assert reopened.epochs.entries == leader.epochs.entries
    assert [s.base_offset for s in reopened.segments] == [s.base_offset for s in leader.segments]


def test_follower_appends_keep_offsets_and_epochs_unstamped(tmp_path):
    follower = _follower(tmp_path)
    payload = batch([b"a", b"b"], base_offset=0, partition_leader_epoch=4) + \
        batch([b"c"], base_offset=7, partition_leader_epoch=6)  # a gap, as a compacted leader's log has
    result = follower.append_as_follower(payload, now_ms=NOW)
    assert (result.base_offset, result.last_offset, result.duplicate) == (0, 7, False)
    assert follower.log_end_offset == 8
    assert follower.read_bytes(0, 10_000) == payload
    assert follower.epochs.entries == [(4, 0), (6, 7)]
    assert follower.append_as_follower(b"", now_ms=NOW).base_offset == -1


@pytest.mark.parametrize("payload, error", [
    (lambda: batch([b"a"], base_offset=2), UnexpectedAppendOffsetError),  # below the log end offset
    (lambda: batch([b"a"], base_offset=5) + batch([b"b"], base_offset=4), UnexpectedAppendOffsetError),
    (lambda: corrupt_crc(batch([b"a"], base_offset=3)), CorruptMessageError),
    (lambda: batch([b"a"], base_offset=3) + corrupt_crc(batch([b"b"], base_offset=4)), CorruptMessageError),
    (lambda: batch([b"a"], base_offset=3)[:-2], CorruptMessageError),
])
def test_bad_follower_appends_raise_and_change_nothing(tmp_path, payload, error):
    follower = _follower(tmp_path)
    follower.append_as_follower(batch([b"x"] * 3), now_ms=NOW)
    before = directory_snapshot(follower.directory)
    with pytest.raises(error) as raised:
        follower.append_as_follower(payload(), now_ms=NOW)
    assert isinstance(raised.value, StorageError)
    assert follower.log_end_offset == 3
    assert directory_snapshot(follower.directory) == before


def test_follower_appends_honour_flush_messages(tmp_path):
    follower = _follower(tmp_path, SMALL.with_overrides({"flush.messages": "4"}))
    assert not follower.append_as_follower(batch([b"x"] * 3), now_ms=NOW).flush_needed
    assert follower.append_as_follower(batch([b"x"], base_offset=3), now_ms=NOW).flush_needed
    follower.flush()
    assert follower.recovery_point == 4


def test_follower_appends_do_not_check_producer_sequences(tmp_path):
    follower = _follower(tmp_path)
    # The leader decided these were fine (here: a sequence gap the leader's own rules would refuse).
    follower.append_as_follower(batch([b"a"], producer_id=3, producer_epoch=0, base_sequence=0), now_ms=NOW)
    follower.append_as_follower(batch([b"b"], base_offset=1, producer_id=3, producer_epoch=0, base_sequence=9),
                                now_ms=NOW)
    assert follower.producer_state.entry(3).last_sequence == 9


def test_a_follower_rolls_at_the_first_offset_after_a_gap(tmp_path):
    follower = _follower(tmp_path, LogConfig(segment_bytes=200, index_interval_bytes=64, segment_index_bytes=4096,
                                             message_timestamp_after_max_ms=2**62))
    payload = batch([b"x" * 100]) + batch([b"y" * 100], base_offset=50)
    follower.append_as_follower(payload, now_ms=NOW)
    assert [s.base_offset for s in follower.segments] == [0, 50]
    assert records_of(follower.read_bytes(50, 1000))[0][0] == 50


# --- truncation of a follower -------------------------------------------------------------------------------------

def test_truncation_after_a_leader_change_restores_epochs_producers_and_txn_index(tmp_path):
    leader = _leader_with_history(tmp_path)
    follower = _follower(tmp_path)
    _copy(leader, follower)
    follower.update_high_watermark(follower.log_end_offset)
    # The new leader's epoch 3 starts where the follower's epoch 2 ends: everything from epoch 3 on diverged.
    end_of_epoch_2 = follower.epochs.end_offset_for(2, follower.log_end_offset)[1]
    follower.truncate_to(end_of_epoch_2)
    assert follower.log_end_offset == end_of_epoch_2 == 103
    assert follower.high_watermark == 103
    assert follower.epochs.entries == [(0, 0), (1, 3), (2, 22)]
    assert follower.ongoing_transactions() == {9: 102}
    follower.truncate_to(102)
    assert follower.ongoing_transactions() == {}  # the open transaction began at 102
    assert 9 not in _producer_state(follower)
    assert follower.last_stable_offset == 102
    # Truncating into the aborted transaction drops its `.txnindex` entry and reopens it.
    marker = all_aborted(follower)[0]
    assert marker == AbortedTxn(8, marker.first_offset, marker.last_offset, marker.last_stable_offset)
    follower.truncate_to(marker.last_offset)
    assert all_aborted(follower) == []
    assert follower.ongoing_transactions() == {8: marker.first_offset}
    assert _producer_state(follower)[5][1] == 11  # the idempotent producer's sequence survives
    # Then the new leader's batches continue the log.
    follower.append_as_follower(batch([b"n"], base_offset=marker.last_offset, partition_leader_epoch=4),
                                now_ms=NOW)
    assert follower.epochs.entries[-1] == (4, marker.last_offset)
    assert batches_of(follower.read_bytes(marker.last_offset, 1000))[0][0].partition_leader_epoch == 4


def test_truncation_survives_a_reopen(tmp_path):
    leader = _leader_with_history(tmp_path)
    follower = _follower(tmp_path)
    _copy(leader, follower)
    follower.truncate_to(50)
    expected = (_producer_state(follower), follower.epochs.entries, follower.log_end_offset)
    follower.close()
    reopened = _follower(tmp_path)
    assert (_producer_state(reopened), reopened.epochs.entries, reopened.log_end_offset) == expected
    assert not any(name.endswith(".snapshot") and int(name.split(".")[0]) > 50
                   for name in os.listdir(reopened.directory))
