"""Compaction: the latest record per key survives at its original offset; batch metadata is kept."""
import dataclasses

from compatbroker.protocol.records.batch import batch_crc, iter_records
from compatbroker.protocol.records.compression import Compression
from compatbroker.storage.cleaner import clean, commit_clean, dirty_ratio, needs_cleaning, prepare_clean
from compatbroker.storage.validator import COORDINATOR as UNCHECKED  # appends whose producer state is not checked

from .helpers import NOW, SMALL, all_bytes, batch, batches_of, open_log, records_of

COMPACT = dataclasses.replace(SMALL, cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.01)


def _latest_per_key(records, below):
    latest = {}
    for offset, key, value in records:
        if offset < below:
            latest[key] = (offset, key, value)
    return latest


def test_compaction_keeps_the_latest_record_per_key_at_its_offset(tmp_path):
    log = open_log(tmp_path, COMPACT)
    for n in range(300):
        log.append(batch([b"value-%d" % n], keys=[b"key-%d" % (n % 7)]), leader_epoch=0, now_ms=NOW)
    before = records_of(all_bytes(log))
    limit = log.active_segment.base_offset
    assert needs_cleaning(log, 0, NOW) and dirty_ratio(log, 0, NOW) == 1.0
    assert clean(log, 0, NOW) == limit
    after = records_of(all_bytes(log))
    expected = sorted(_latest_per_key(before, limit).values()) + [r for r in before if r[0] >= limit]
    assert after == expected
    assert log.log_end_offset == 300 and records_of(log.read_bytes(0, 10**6))[0] == expected[0]
    assert not needs_cleaning(log, limit, NOW)
    log.close()
    reopened = open_log(tmp_path, COMPACT, recovery_point=0)
    assert records_of(all_bytes(reopened)) == expected
    reopened.close()


def test_compaction_keeps_batch_metadata_and_codec_and_offsets_inside_batches(tmp_path):
    log = open_log(tmp_path, COMPACT)
    log.append(batch([b"a1", b"b1", b"a2"], keys=[b"a", b"b", b"a"], compression=Compression.ZSTD,
                     producer_id=77, producer_epoch=3, base_sequence=10), leader_epoch=4, now_ms=NOW,
               origin=UNCHECKED)  # a producer the log has no state for would have to start at sequence 0
    log.append(batch([b"b2"], keys=[b"b"], producer_id=77, producer_epoch=3, base_sequence=13), leader_epoch=4,
               now_ms=NOW)
    log.roll(NOW)
    log.append(batch([b"c"], keys=[b"c"]), leader_epoch=4, now_ms=NOW)
    assert clean(log, 0, NOW) == 4
    (first, raw), (second, _), _ = batches_of(all_bytes(log))
    assert batch_crc(raw, len(raw)) == first.crc
    assert (first.base_offset, first.last_offset_delta, first.count) == (0, 2, 1)
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (77, 3, 10)
    assert first.compression == Compression.ZSTD and first.partition_leader_epoch == 4
    assert [(r.offset, r.key) for r in iter_records(raw, max_size=1 << 20)] == [(2, b"a")]
    assert (second.base_offset, second.count) == (3, 1)
    log.close()


def test_tombstones_go_after_delete_retention(tmp_path):
    config = dataclasses.replace(COMPACT, delete_retention_ms=1000)
    log = open_log(tmp_path, config)
    log.append(batch([b"v"], keys=[b"k"], timestamp=NOW), leader_epoch=0, now_ms=NOW)
    log.append(batch([None], keys=[b"k"], timestamp=NOW + 1), leader_epoch=0, now_ms=NOW)
    log.roll(NOW)
    log.append(batch([b"x"], keys=[b"x"], timestamp=NOW + 2), leader_epoch=0, now_ms=NOW)
    clean(log, 0, NOW + 2)
    assert records_of(all_bytes(log)) == [(1, b"k", None), (2, b"x", b"x")]  # tombstone kept for now
    log.roll(NOW)
    log.append(batch([b"y"], keys=[b"y"], timestamp=NOW + 3), leader_epoch=0, now_ms=NOW)
    clean(log, 0, NOW + 5000)
    assert records_of(all_bytes(log)) == [(2, b"x", b"x"), (3, b"y", b"y")]
    log.close()


def _tombstone_batch(log):
    return next((h, raw) for h, raw in batches_of(all_bytes(log)) if any(r[2] is None for r in records_of(raw)))


def test_tombstones_live_delete_retention_ms_from_the_first_pass_that_keeps_them(tmp_path):
    """Kafka's delete horizon: however old a tombstone is, the first cleaning stamps its batch with now +
    delete.retention.ms, and only a pass at or after that time drops it."""
    log = open_log(tmp_path, dataclasses.replace(COMPACT, delete_retention_ms=1000))
    old = NOW - 10**9  # written long before delete.retention.ms
    log.append(batch([b"v"], keys=[b"k"], timestamp=old), leader_epoch=0, now_ms=NOW)
    log.append(batch([b"other", None], keys=[b"o", b"k"], timestamp=old + 1), leader_epoch=0, now_ms=NOW)
    log.roll(NOW)
    log.append(batch([b"x"], keys=[b"x"], timestamp=NOW), leader_epoch=0, now_ms=NOW)
    assert clean(log, 0, NOW) is not None
    header, raw = _tombstone_batch(log)
    assert header.has_delete_horizon and header.base_timestamp == NOW + 1000
    assert batch_crc(raw, len(raw)) == header.crc and header.max_timestamp == old + 2
    assert [(r.offset, r.timestamp, r.value) for r in iter_records(raw, max_size=1 << 20)] == [
        (1, old + 1, b"other"), (2, old + 2, None)]  # record timestamps survive the new base timestamp
    log.roll(NOW)
    log.append(batch([b"y"], keys=[b"y"], timestamp=NOW), leader_epoch=0, now_ms=NOW)
    clean(log, 0, NOW + 999)
    assert _tombstone_batch(log)[0].base_timestamp == NOW + 1000  # not yet, and the horizon is not moved
    log.roll(NOW)
    log.append(batch([b"z"], keys=[b"z"], timestamp=NOW), leader_epoch=0, now_ms=NOW)
    clean(log, 0, NOW + 1000)
    assert records_of(all_bytes(log)) == [(1, b"o", b"other"), (3, b"x", b"x"), (4, b"y", b"y"), (5, b"z", b"z")]
    log.close()


def test_a_fully_cleaned_batch_with_a_producer_id_stays_as_kafkas_empty_batch(tmp_path):
    log = open_log(tmp_path, COMPACT)
    log.append(batch([b"a1", b"b1"], keys=[b"a", b"b"], compression=Compression.GZIP, producer_id=5,
                     producer_epoch=2, base_sequence=7), leader_epoch=3, now_ms=NOW, origin=UNCHECKED)
    log.append(batch([b"a2", b"b2"], keys=[b"a", b"b"], timestamp=NOW + 9), leader_epoch=3, now_ms=NOW)
    log.roll(NOW)
    log.append(batch([b"c"], keys=[b"c"]), leader_epoch=3, now_ms=NOW)
    clean(log, 0, NOW)
    (empty, raw), _, _ = batches_of(all_bytes(log))
    assert (empty.base_offset, empty.last_offset_delta, empty.count, len(raw)) == (0, 1, 0, 61)
    assert (empty.producer_id, empty.producer_epoch, empty.base_sequence) == (5, 2, 7)
    assert empty.compression == Compression.NONE and empty.base_timestamp == -1 and empty.max_timestamp == NOW + 1
    assert batch_crc(raw, len(raw)) == empty.crc and empty.partition_leader_epoch == 3
    log.close()


def test_a_pass_is_discarded_when_the_log_changed_meanwhile(tmp_path):
    log = open_log(tmp_path, dataclasses.replace(COMPACT, file_delete_delay_ms=0))
    for n in range(100):
        log.append(batch([b"v" * 100], keys=[b"k%d" % (n % 3)]), leader_epoch=0, now_ms=NOW)
    plan = prepare_clean(log, 0, NOW)
    log.advance_log_start_offset(log.segments[1].base_offset)  # retention ran while the plan was built
    assert log.delete_segments_below_start(NOW) == 1
    before = all_bytes(log)
    assert not commit_clean(log, plan, NOW)
    assert all_bytes(log) == before
    log.close()


def test_a_crash_after_the_swap_files_were_written_is_finished_on_load(tmp_path):
    log = open_log(tmp_path, COMPACT)
    for n in range(120):
        log.append(batch([b"v%d" % n], keys=[b"k%d" % (n % 5)]), leader_epoch=0, now_ms=NOW)
    plan = prepare_clean(log, 0, NOW)
    expected = sorted(_latest_per_key(records_of(all_bytes(log)), plan.first_dirty_offset).values())
    log.close()
    for segment in plan.new:
        segment.close()
    open(f"{log.directory}/00000000000000000000.log.cleaned", "wb").close()  # an unfinished pass
    reopened = open_log(tmp_path, COMPACT, clean_shutdown=True)
    names = __import__("os").listdir(reopened.directory)
    assert not any(name.endswith((".swap", ".cleaned", ".deleted")) for name in names)
    assert [r for r in records_of(all_bytes(reopened)) if r[0] < plan.first_dirty_offset] == expected
    assert reopened.log_end_offset == 120
    reopened.close()
