"""Retention: time, size and log-start-offset rules delete whole sealed segments, never the active one."""
import dataclasses
import os

from compatbroker.storage.retention import apply_retention, expired_segment_count, oversize_segment_count

from .helpers import NOW, SMALL, batch, open_log, records_of


def _fill(log, count, start_ts=NOW):
    for n in range(count):
        log.append(batch([b"v" * 200], timestamp=start_ts + n * 1000), leader_epoch=0, now_ms=start_ts + n * 1000)


def test_time_retention_uses_the_largest_timestamp_of_each_segment(tmp_path):
    log = open_log(tmp_path, dataclasses.replace(SMALL, retention_ms=10_000, file_delete_delay_ms=5))
    _fill(log, 60)
    sealed = log.segments[:-1]
    now = sealed[1].max_timestamp_so_far + 10_001  # the first two segments have expired, the third not yet
    assert expired_segment_count(log, now) == 2
    assert apply_retention(log, now) == 2
    assert log.log_start_offset == sealed[2].base_offset == log.segments[0].base_offset
    names = os.listdir(log.directory)
    assert f"{sealed[0].base_offset:020d}.log.deleted" in names  # renamed now, unlinked after the delay
    log.remove_deleted_segments(now + 5)
    assert not any(name.endswith(".deleted") for name in os.listdir(log.directory))
    log.close()


def test_the_active_segment_is_never_deleted(tmp_path):
    log = open_log(tmp_path, dataclasses.replace(SMALL, retention_ms=0))
    _fill(log, 40)
    apply_retention(log, NOW + 10**9)
    assert len(log.segments) == 1 and log.active_segment.size > 0
    assert records_of(log.read_bytes(log.log_start_offset, 10**6))[-1][0] == 39
    log.close()


def test_size_retention_keeps_at_least_retention_bytes(tmp_path):
    log = open_log(tmp_path, dataclasses.replace(SMALL, retention_bytes=5000))
    _fill(log, 80)
    count = oversize_segment_count(log)
    assert count > 0
    apply_retention(log, NOW)
    assert log.size >= 5000 and log.size - log.segments[0].size < 5000
    log.close()


def test_compact_only_topics_skip_time_and_size_rules(tmp_path):
    config = dataclasses.replace(SMALL, retention_ms=0, retention_bytes=0, cleanup_policy=("compact",))
    log = open_log(tmp_path, config)
    for n in range(40):
        log.append(batch([b"v" * 200], keys=[b"k%d" % n]), leader_epoch=0, now_ms=NOW)
    assert apply_retention(log, NOW + 10**9) == 0
    log.close()


def test_log_start_offset_rule_applies_to_every_policy(tmp_path):
    log = open_log(tmp_path, dataclasses.replace(SMALL, cleanup_policy=("compact",)))
    for n in range(40):
        log.append(batch([b"v" * 200], keys=[b"k%d" % n]), leader_epoch=0, now_ms=NOW)
    log.advance_log_start_offset(log.segments[2].base_offset)
    assert apply_retention(log, NOW) == 2
    log.close()
