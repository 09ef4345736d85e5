"""The partition log: append (validation, stamping, errors that leave the log untouched), reads, rolls, offsets
for ListOffsets, flush policy, truncation and DeleteRecords."""
import dataclasses
import os
import struct
from concurrent.futures import ThreadPoolExecutor

import pytest

from compatbroker.protocol.records.batch import (ATTRIBUTES_OFFSET, CRC_OFFSET, LOG_APPEND_TIME, batch_crc,
                                                 build_batch, iter_batches, read_batch_header, validate_batch)
from compatbroker.protocol.records.compression import Compression
from compatbroker.protocol.records.control import ControlRecordType, build_control_batch
from compatbroker.protocol.records.legacy import build_message_set
from compatbroker.storage.errors import (CorruptMessageError, InvalidRecordError, InvalidTimestampError,
                                         MessageTooLargeError, OffsetOutOfRangeError, PolicyViolationError,
                                         RecordListTooLargeError, UnsupportedCompressionTypeError)
from compatbroker.storage.log_config import LogConfig
from compatbroker.storage.time_index import TimestampOffset

from .helpers import (NOW, SMALL, all_bytes, batch, batches_of, corrupt_crc, directory_snapshot, open_log,
                      records_of)


def test_append_assigns_offsets_and_stamps_base_offset_and_leader_epoch(tmp_path):
    log = open_log(tmp_path)
    first = log.append(batch([b"a", b"b", b"c"]), leader_epoch=5, now_ms=NOW)
    second = log.append(batch([b"d"]), leader_epoch=5, now_ms=NOW)
    assert (first.base_offset, first.last_offset, first.log_append_time_ms, first.log_start_offset) == (0, 2, -1, 0)
    assert (second.base_offset, second.last_offset) == (3, 3)
    stored = batches_of(all_bytes(log))
    assert [(h.base_offset, h.partition_leader_epoch) for h, _ in stored] == [(0, 5), (3, 5)]
    for _, raw in stored:
        validate_batch(raw)  # the CRC still holds: only fields outside it were stamped
    assert records_of(all_bytes(log)) == [(0, None, b"a"), (1, None, b"b"), (2, None, b"c"), (3, None, b"d")]
    assert log.epochs.entries == [(5, 0)]
    log.close()


def test_record_bytes_are_not_reencoded(tmp_path):
    log = open_log(tmp_path)
    payload = batch([b"x" * 100, b"y" * 50], compression=Compression.LZ4, base_offset=999)
    log.append(memoryview(payload), leader_epoch=1, now_ms=NOW)  # read-only input: stamped via a new prefix
    stored = all_bytes(log)
    assert stored[16:] == payload[16:] and stored[:8] == struct.pack(">q", 0)
    log.close()


def test_log_append_time_sets_max_timestamp_and_crc(tmp_path):
    config = dataclasses.replace(SMALL, message_timestamp_type="LogAppendTime")
    log = open_log(tmp_path, config)
    result = log.append(batch([b"a", b"b"], timestamp=5), leader_epoch=0, now_ms=NOW + 7)
    assert result.log_append_time_ms == NOW + 7
    (header, raw), = batches_of(all_bytes(log))
    validate_batch(raw)
    assert header.timestamp_type == LOG_APPEND_TIME and header.max_timestamp == NOW + 7
    log.close()


def test_legacy_message_sets_are_converted_to_v2(tmp_path):
    log = open_log(tmp_path)
    legacy = build_message_set([(b"k1", b"v1", (), NOW), (b"k2", b"v2", (), NOW + 1)], magic=1)
    result = log.append(legacy, leader_epoch=0, now_ms=NOW)
    assert (result.base_offset, result.last_offset) == (0, 1)
    assert records_of(all_bytes(log)) == [(0, b"k1", b"v1"), (1, b"k2", b"v2")]
    assert all(h.magic == 2 for h, _ in batches_of(all_bytes(log)))
    log.close()


@pytest.mark.parametrize("make_payload, error, code", [
    (lambda: corrupt_crc(batch([b"a"])), CorruptMessageError, 2),
    (lambda: batch([b"a"])[:-3], CorruptMessageError, 2),
    (lambda: b"\x00" * 10, CorruptMessageError, 2),
    (lambda: batch([b"a"]) + batch([b"b"])[:30], CorruptMessageError, 2),
    (lambda: batch([b"a" * 3000]), MessageTooLargeError, 10),
    (lambda: b"".join(batch([b"z" * 900]) for _ in range(5)), RecordListTooLargeError, 18),
    (lambda: batch([b"a"], timestamp=NOW + 10**12), InvalidTimestampError, 32),
    (lambda: batch([b"a"], compression=Compression.GZIP) + batch([b"b"], compression=Compression.GZIP),
     InvalidRecordError, 87),
    (lambda: build_control_batch(ControlRecordType.COMMIT, producer_id=1, producer_epoch=0, coordinator_epoch=0,
                                 timestamp=NOW), InvalidRecordError, 87),
])
def test_rejected_appends_raise_kafka_errors_and_change_nothing(tmp_path, make_payload, error, code):
    config = dataclasses.replace(SMALL, max_message_bytes=2048, message_timestamp_after_max_ms=3_600_000)
    log = open_log(tmp_path, config)
    log.append(batch([b"before"]), leader_epoch=0, now_ms=NOW)
    log.flush()
    before = directory_snapshot(tmp_path)
    with pytest.raises(error) as info:
        log.append(make_payload(), leader_epoch=0, now_ms=NOW)
    assert info.value.error_code == code
    assert directory_snapshot(tmp_path) == before and log.log_end_offset == 1
    assert log.append(batch([b"after"]), leader_epoch=0, now_ms=NOW).base_offset == 1
    log.close()


def test_compacted_topics_refuse_keyless_records(tmp_path):
    log = open_log(tmp_path, dataclasses.replace(SMALL, cleanup_policy=("compact",)))
    with pytest.raises(InvalidRecordError):
        log.append(batch([b"v"]), leader_epoch=0, now_ms=NOW)
    assert log.append(batch([b"v"], keys=[b"k"]), leader_epoch=0, now_ms=NOW).base_offset == 0
    log.close()


def test_empty_payload_appends_nothing(tmp_path):
    log = open_log(tmp_path)
    assert log.append(b"", leader_epoch=0, now_ms=NOW).base_offset == -1
    assert log.log_end_offset == 0
    log.close()


def _fill(log, count, size=100, start_ts=NOW):
    results = []
    for n in range(count):
        results.append(log.append(batch([bytes([n % 256]) * size, b"x"], timestamp=start_ts + n), leader_epoch=0,
                                  now_ms=start_ts + n))
    return results


def test_reads_return_whole_batches_from_the_one_holding_the_offset(tmp_path):
    log = open_log(tmp_path)
    _fill(log, 200)
    assert len(log.segments) > 5
    for offset in (0, 1, 2, 57, 58, 201, 398, 399):
        result = log.read(offset, 1)
        (header, _), = batches_of(log.read_bytes(offset, 1))
        assert header.base_offset <= offset <= header.last_offset  # one whole batch despite max_bytes=1
        assert result.high_watermark == result.log_end_offset == 400
    everything = log.read_bytes(0, 10**9)
    assert everything == all_bytes(log) and len(records_of(everything)) == 400
    assert log.read(400, 100).regions == []
    with pytest.raises(OffsetOutOfRangeError) as info:
        log.read(401, 100)
    assert info.value.error_code == 1
    log.close()


def test_read_limits_max_bytes_min_one_batch_and_max_offset(tmp_path):
    log = open_log(tmp_path)
    _fill(log, 50)
    size = read_batch_header(all_bytes(log)).size
    assert len(log.read_bytes(0, size * 3 + size // 2)) == size * 3
    assert log.read(0, size - 1, min_one_batch=False).regions == []
    assert records_of(log.read_bytes(10, 10**6, max_offset=20))[-1][0] == 19
    assert log.read(10, 10**6, max_offset=10).regions == []
    log.close()


def _expected_read(log, offset: int, max_bytes: int, min_one_batch: bool) -> bytes:
    """What a read must return, worked out from the log's bytes alone: whole batches from the one holding
    `offset`, as many as fit `max_bytes` (at least one with `min_one_batch`)."""
    out = b""
    for header, data in batches_of(all_bytes(log)):
        if header.last_offset < offset:
            continue
        if len(out) + len(data) > max_bytes and (out or not min_one_batch):
            break
        out += data
    return out


def test_repeated_and_sequential_reads_match_the_log_after_truncations(tmp_path):
    """Reads remember the batch they found and where they ended (a fetch that did not fit asks again at the same
    offset; a consumer asks right after its last batch); after a truncation and new batches of other sizes, the
    answers must still be the log's bytes."""
    config = dataclasses.replace(SMALL, segment_bytes=1 << 20)
    log = open_log(tmp_path, config)
    for n in range(60):
        log.append(batch([b"v" * (20 + 37 * (n % 7))] * (1 + n % 3)), leader_epoch=0, now_ms=NOW)
    assert len(log.segments) == 1

    def check(offset, max_bytes, min_one_batch=True):
        got = log.read_bytes(offset, max_bytes, min_one_batch=min_one_batch)
        assert got == _expected_read(log, offset, max_bytes, min_one_batch), (offset, max_bytes, min_one_batch)
        return got

    for round_ in range(2):
        offset, last_asked = 0, []
        while offset < log.log_end_offset:  # a consumer: each read starts right after the last one
            got = check(offset, 300 + 250 * (offset % 4))
            check(offset, 10, min_one_batch=False)  # does not fit: asked again, same offset
            check(offset, 10, min_one_batch=False)
            last_asked = [offset, batches_of(got)[-1][0].last_offset + 1]
            offset = last_asked[-1]
        log.truncate_to(log.log_end_offset // 2 + round_)
        for n in range(30):  # new batches of other sizes where the old ones were
            log.append(batch([b"w" * (400 - 11 * n)] * (2 + n % 2)), leader_epoch=0, now_ms=NOW)
        for offset in last_asked:  # where the last reads before the truncation left off
            check(offset, 700)
            check(offset, 50, min_one_batch=False)
        for offset in range(log.log_end_offset - 1, -1, -3):
            check(offset, 700)
            check(offset, 50, min_one_batch=False)
    log.close()


def test_reads_cross_segments_and_regions_are_file_ranges(tmp_path):
    log = open_log(tmp_path)
    _fill(log, 100)
    result = log.read(0, 10**9)
    assert len(result.regions) == len(log.segments)
    assert sum(r.length for r in result.regions) == log.size
    region = result.regions[1]
    assert os.pread(region.file.fileno(), 8, region.position) == struct.pack(">q", log.segments[1].base_offset)
    log.close()


def test_a_reader_holding_a_deleted_segment_still_reads_its_bytes(tmp_path):
    log = open_log(tmp_path, dataclasses.replace(SMALL, file_delete_delay_ms=0))
    _fill(log, 100)
    region = log.read(0, 10**6).regions[0]
    expected = os.pread(region.file.fileno(), region.length, region.position)
    log.delete_records(log.segments[2].base_offset, now_ms=NOW)
    assert not os.path.exists(os.path.join(log.directory, "00000000000000000000.log"))
    assert os.pread(region.file.fileno(), region.length, region.position) == expected
    log.close()


def test_roll_by_size_by_time_and_index_entries(tmp_path):
    log = open_log(tmp_path)
    _fill(log, 30)
    assert all(s.size <= SMALL.segment_bytes for s in log.segments)
    assert log.segments[0].offset_index.entries >= 1  # one every index.interval.bytes
    assert log.segments[0].time_index.entries >= 1
    timed = open_log(tmp_path / "timed", dataclasses.replace(SMALL, segment_ms=1000, segment_bytes=10**6))
    timed.append(batch([b"a"], timestamp=NOW), leader_epoch=0, now_ms=NOW)
    timed.append(batch([b"b"], timestamp=NOW + 500), leader_epoch=0, now_ms=NOW + 500)
    assert len(timed.segments) == 1
    timed.append(batch([b"c"], timestamp=NOW + 1001), leader_epoch=0, now_ms=NOW + 1001)
    assert [s.base_offset for s in timed.segments] == [0, 2]
    log.close()
    timed.close()


def test_sealed_segment_files_have_kafkas_names_and_trimmed_indexes(tmp_path):
    log = open_log(tmp_path)
    _fill(log, 30)
    sealed = log.segments[0]
    names = sorted(os.listdir(log.directory))
    assert "00000000000000000000.log" in names and f"{sealed.next_offset:020d}.index" in names
    assert os.path.getsize(sealed.offset_index.path) == 8 * sealed.offset_index.entries
    active = log.active_segment.offset_index
    assert os.path.getsize(active.path) == 0 < active.entries  # the active index lives in memory until a flush
    log.flush()
    assert os.path.getsize(active.path) == 8 * active.entries
    log.close()


def test_offsets_for_list_offsets(tmp_path):
    log = open_log(tmp_path)
    assert log.max_timestamp() is None and log.offset_for_timestamp(NOW) is None
    _fill(log, 100, start_ts=NOW)  # batch n: timestamps NOW+n, NOW+n+1 at offsets 2n, 2n+1
    assert (log.earliest(), log.latest()) == (0, 200)
    assert log.offset_for_timestamp(0) == TimestampOffset(NOW, 0)
    assert log.offset_for_timestamp(NOW + 40) == TimestampOffset(NOW + 40, 79)
    assert log.offset_for_timestamp(NOW + 100) == TimestampOffset(NOW + 100, 199)
    assert log.offset_for_timestamp(NOW + 101) is None
    assert log.max_timestamp() == TimestampOffset(NOW + 100, 199)
    log.close()


def _record_fsyncs(monkeypatch) -> list[str]:
    """Patch os.fsync to note the path of every file or directory it syncs (then sync it as usual)."""
    synced = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


def test_flush_messages_is_left_to_the_caller_and_flush_ms_to_maybe_flush(tmp_path, monkeypatch):
    log = open_log(tmp_path, dataclasses.replace(SMALL, flush_messages=3))
    assert not log.append(batch([b"a", b"b"]), leader_epoch=0, now_ms=NOW).flush_needed  # also starts epoch 0
    synced = _record_fsyncs(monkeypatch)
    result = log.append(batch([b"c"]), leader_epoch=0, now_ms=NOW)
    assert result.flush_needed and log.recovery_point == 0 and synced == []  # append never fsyncs
    log.flush()
    assert log.recovery_point == 3 and os.path.join(log.directory, "00000000000000000000.log") in synced
    assert log.directory in synced  # the segment is new since the last flush: its directory entry too
    assert not log.append(batch([b"d"]), leader_epoch=0, now_ms=NOW).flush_needed
    synced.clear()
    log.flush(up_to=3)
    assert synced == [] and log.recovery_point == 3  # already durable: no fsync at all
    timed = open_log(tmp_path / "t", dataclasses.replace(SMALL, flush_ms=1000))
    timed.append(batch([b"a"]), leader_epoch=0, now_ms=NOW)
    assert not timed.flush_due(NOW + 999) and not timed.maybe_flush(NOW + 999) and timed.recovery_point == 0
    assert timed.flush_due(NOW + 1000) and timed.maybe_flush(NOW + 1000) and timed.recovery_point == 1
    assert not timed.flush_due(NOW + 5000)  # nothing left to flush
    log.close()
    timed.close()


def test_rolled_segments_await_an_fsync_that_maybe_flush_runs(tmp_path, monkeypatch):
    log = open_log(tmp_path)  # Kafka's default policy: never flush for messages or time
    _fill(log, 100)
    assert len(log.segments) > 3 and log.recovery_point == 0
    assert log.flush_due(NOW)
    synced = _record_fsyncs(monkeypatch)
    assert log.maybe_flush(NOW)
    active = log.active_segment
    assert log.recovery_point == active.base_offset < log.log_end_offset
    assert {s.file.path for s in log.segments[:-1]} <= set(synced) and active.file.path not in synced
    assert not log.flush_due(NOW) and not log.maybe_flush(NOW)
    log.roll(NOW)
    assert log.flush_due(NOW) and log.maybe_flush(NOW) and log.recovery_point == log.log_end_offset
    log.append(batch([b"more"]), leader_epoch=0, now_ms=NOW)
    log.flush()
    log.delete_records(-1, now_ms=NOW)  # rolls a segment whose offsets are all durable already
    assert log.flush_due(NOW) and log.maybe_flush(NOW) and not log.flush_due(NOW)
    log.close()


def test_a_flush_that_overlaps_a_truncation_leaves_the_recovery_point_alone(tmp_path, monkeypatch):
    log = open_log(tmp_path)
    _fill(log, 30)
    target = log.log_end_offset
    real_flush = type(log.active_segment).flush

    def flush_while_truncating(segment):
        if log.log_end_offset == target:
            log.truncate_to(10)  # the loop truncates while the flush thread is inside fsync
        real_flush(segment)

    monkeypatch.setattr(type(log.active_segment), "flush", flush_while_truncating)
    log.flush()
    assert log.log_end_offset == 10 and log.recovery_point == 0
    log.close()


def test_flush_in_a_thread_while_appending_only_claims_what_it_synced(tmp_path):
    log = open_log(tmp_path)
    with ThreadPoolExecutor(max_workers=1) as executor:
        for n in range(40):
            result = log.append(batch([b"v" * 300]), leader_epoch=0, now_ms=NOW)
            flushed = executor.submit(log.flush)
            log.append(batch([b"w"]), leader_epoch=0, now_ms=NOW)  # may land before or after the flush's start
            flushed.result()
            assert result.last_offset < log.recovery_point <= log.log_end_offset
    log.flush()
    assert log.recovery_point == log.log_end_offset == 80
    log.close()


def test_truncate_to_removes_later_batches_and_segments(tmp_path):
    log = open_log(tmp_path)
    _fill(log, 100)
    before = len(log.segments)
    log.truncate_to(51)  # inside batch 50-51: the whole batch goes
    assert log.log_end_offset == 50 and len(log.segments) < before
    assert records_of(log.read_bytes(0, 10**9))[-1][0] == 49
    assert log.append(batch([b"new"]), leader_epoch=1, now_ms=NOW).base_offset == 50
    assert log.epochs.entries == [(0, 0), (1, 50)]
    log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (0, 0, 1)
    log.close()


def test_delete_records_moves_the_log_start_offset(tmp_path):
    log = open_log(tmp_path)
    _fill(log, 100)
    first_segments = len(log.segments)
    assert log.delete_records(77, now_ms=NOW) == 77
    assert log.log_start_offset == 77 and len(log.segments) < first_segments
    with pytest.raises(OffsetOutOfRangeError):
        log.read(76, 100)
    assert records_of(log.read_bytes(77, 1))[0][0] == 76  # the batch holding 77 starts at 76
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(201, now_ms=NOW)
    assert log.delete_records(-1, now_ms=NOW) == 200
    # Up to the log end: the active segment is rolled and goes too, as in Kafka.
    assert [(s.base_offset, s.size) for s in log.segments] == [(200, 0)] and log.size == 0
    assert log.append(batch([b"next"]), leader_epoch=0, now_ms=NOW).base_offset == 200
    log.close()


@pytest.mark.parametrize("policy, allowed", [(("compact",), False), (("compact", "delete"), True)])
def test_delete_records_needs_the_delete_policy(tmp_path, policy, allowed):
    log = open_log(tmp_path, dataclasses.replace(SMALL, cleanup_policy=policy))
    log.append(batch([b"v", b"w"], keys=[b"k", b"l"]), leader_epoch=0, now_ms=NOW)
    if allowed:
        assert log.delete_records(1, now_ms=NOW) == 1
    else:
        with pytest.raises(PolicyViolationError) as info:
            log.delete_records(1, now_ms=NOW)
        assert info.value.error_code == 44 and log.log_start_offset == 0
    log.close()


def test_reopen_after_clean_close_and_after_crash_keeps_everything(tmp_path):
    log = open_log(tmp_path)
    _fill(log, 60)
    expected = all_bytes(log)
    log.flush()
    log.close()
    clean = open_log(tmp_path, clean_shutdown=True, recovery_point=120)
    assert all_bytes(clean) == expected and clean.log_end_offset == 120
    assert clean.offset_for_timestamp(NOW + 30) == TimestampOffset(NOW + 30, 59)
    clean.close()
    crashed = open_log(tmp_path, recovery_point=0)
    assert all_bytes(crashed) == expected and crashed.log_end_offset == 120
    assert crashed.append(batch([b"more"]), leader_epoch=0, now_ms=NOW).base_offset == 120
    crashed.close()


def test_missing_or_corrupt_indexes_are_rebuilt(tmp_path):
    log = open_log(tmp_path)
    _fill(log, 60)
    expected = all_bytes(log)
    entries = log.segments[0].offset_index.entries
    log.flush()
    log.close()
    os.unlink(os.path.join(log.directory, "00000000000000000000.index"))
    with open(os.path.join(log.directory, f"{log.segments[1].base_offset:020d}.index"), "r+b") as index:
        index.write(b"\xff" * 16)
    second_entries = log.segments[1].offset_index.entries
    reopened = open_log(tmp_path, clean_shutdown=True, recovery_point=120)
    assert reopened.segments[0].offset_index.entries == entries
    assert second_entries > 2 and reopened.segments[1].offset_index.entry(0)[0] > 0  # rebuilt, not trusted
    assert reopened.segments[1].offset_index.entries == second_entries
    assert all_bytes(reopened) == expected
    second = reopened.segments[1].base_offset
    assert records_of(reopened.read_bytes(37, 1))[-1][0] == 37
    assert records_of(reopened.read_bytes(second + 5, 1))[-1][0] == second + 5
    reopened.close()


def test_control_batches_from_the_coordinator_are_accepted(tmp_path):
    log = open_log(tmp_path)
    marker = build_control_batch(ControlRecordType.ABORT, producer_id=9, producer_epoch=1, coordinator_epoch=0,
                                 timestamp=NOW)
    assert log.append(marker, leader_epoch=0, now_ms=NOW, origin="coordinator").base_offset == 0
    assert next(iter_batches(all_bytes(log)))[1].is_control
    log.close()


def test_default_segment_config_accepts_a_batch(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_index_bytes=4096))
    log.append(build_batch([(None, b"v", (), NOW)]), leader_epoch=0, now_ms=NOW)
    assert log.log_end_offset == 1
    log.close()


LARGE = dataclasses.replace(SMALL, segment_bytes=1 << 20, max_message_bytes=1 << 20, segment_index_bytes=1 << 16)


def _large_batch(fill: int, *, timestamp=NOW) -> bytes:
    return batch([bytes([fill]) * 1000] * 700, timestamp=timestamp)  # about 700 KiB


def test_a_payload_is_written_as_given_with_its_offsets(tmp_path):
    """The request frame is only lent to the append: a new 16-byte prefix (base offset, length, leader epoch) is
    written before the frame's own bytes, the frame is left unchanged, and the stored CRC still holds."""
    log = open_log(tmp_path, LARGE)
    log.append(batch([b"small"]), leader_epoch=0, now_ms=NOW)
    payload = bytearray(_large_batch(1))  # writable, as a large frame's buffer is
    result = log.append(memoryview(payload), leader_epoch=3, now_ms=NOW)
    assert (result.base_offset, result.last_offset) == (1, 700)
    _, (header, stored) = batches_of(all_bytes(log))
    validate_batch(stored)
    assert stored[16:] == payload[16:] and (header.base_offset, header.partition_leader_epoch) == (1, 3)
    assert bytes(payload[:8]) == bytes(8)  # the caller's buffer is left as it was
    log.close()


@pytest.mark.parametrize("needs_roll", [False, True])
def test_a_large_append_with_a_bad_crc_leaves_the_log_as_it_was(tmp_path, needs_roll):
    log = open_log(tmp_path, LARGE)
    log.append(_large_batch(1) if needs_roll else batch([b"before"]), leader_epoch=0, now_ms=NOW)
    log.flush()
    before, end = directory_snapshot(tmp_path), log.log_end_offset
    with pytest.raises(CorruptMessageError):
        log.append(corrupt_crc(_large_batch(2)), leader_epoch=0, now_ms=NOW)
    assert directory_snapshot(tmp_path) == before  # nothing written, no segment rolled
    assert log.log_end_offset == end and len(log.segments) == 1
    assert log.append(_large_batch(3), leader_epoch=0, now_ms=NOW).base_offset == end
    assert records_of(all_bytes(log))[-1] == (end + 699, None, bytes([3]) * 1000)
    assert len(log.segments) == 1 + needs_roll  # a second large batch does not fit the first's segment
    log.close()


def test_a_short_write_is_resumed(tmp_path, monkeypatch):
    """pwritev may write less than asked: the append writes the rest, and the log holds what one write would."""
    log = open_log(tmp_path, LARGE)
    real, calls = os.pwritev, []

    def short_first(fd, buffers, position):
        calls.append(position)
        if len(calls) == 1:  # the first write stops inside the second buffer
            return real(fd, [b"".join(bytes(buffer) for buffer in buffers)[:20]], position)
        return real(fd, buffers, position)

    monkeypatch.setattr(os, "pwritev", short_first)
    result = log.append(memoryview(_large_batch(4)), leader_epoch=0, now_ms=NOW)
    monkeypatch.undo()
    assert len(calls) >= 2 and (result.base_offset, result.last_offset) == (0, 699)
    [(header, stored)] = batches_of(all_bytes(log))
    validate_batch(stored)
    assert stored[16:] == _large_batch(4)[16:] and header.base_offset == 0 and log.size == len(stored)
    log.close()


def test_an_unknown_codec_is_refused(tmp_path):
    """Codec ids 5-7 are none of Kafka's: UNSUPPORTED_COMPRESSION_TYPE, even with a CRC that matches."""
    log = open_log(tmp_path)
    data = bytearray(batch([b"v"]))
    data[ATTRIBUTES_OFFSET + 1] |= 5
    struct.pack_into(">I", data, CRC_OFFSET, batch_crc(data, len(data)))
    with pytest.raises(UnsupportedCompressionTypeError):
        log.append(bytes(data), leader_epoch=0, now_ms=NOW)
    assert log.log_end_offset == 0 and log.size == 0
    log.close()


def test_a_bad_crc_comes_before_a_bad_timestamp(tmp_path):
    """A batch that is both corrupt and too far in the future is CORRUPT_MESSAGE (Kafka checks the CRC first): a
    client retries the first and gives up on the second."""
    log = open_log(tmp_path, dataclasses.replace(LARGE, message_timestamp_after_max_ms=1000))
    with pytest.raises(CorruptMessageError):
        log.append(corrupt_crc(_large_batch(1, timestamp=NOW + 10**9)), leader_epoch=0, now_ms=NOW)
    with pytest.raises(InvalidTimestampError):
        log.append(_large_batch(1, timestamp=NOW + 10**9), leader_epoch=0, now_ms=NOW)
    assert log.log_end_offset == 0 and log.size == 0
    log.close()
