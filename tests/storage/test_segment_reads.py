"""The read side of a segment: `LogSegment.read` answers the same whole batches whatever it remembers of earlier
reads (the batch found last, where the last read ended, the header of the batch that did not fit), and a consumer
reading on needs at most one header read per fetch."""
from __future__ import annotations

import os
import random

import pytest

from compatbroker.storage import segment as segment_module
from compatbroker.storage.log_config import LogConfig

from .helpers import NOW, batch, open_log

# Batches of very different sizes, indexed every 256 bytes, in one segment.
CONFIG = LogConfig(segment_bytes=1 << 20, index_interval_bytes=256, segment_index_bytes=1 << 16,
                   message_timestamp_after_max_ms=2**62)


def _fill(log, count: int, rng: random.Random) -> None:
    for i in range(count):
        records = [os.urandom(rng.choice((10, 100, 700))) for _ in range(rng.randint(1, 4))]
        log.append(batch(records, timestamp=NOW + i), leader_epoch=0, now_ms=NOW)


def _expected(segment, offset: int, max_bytes: int, max_position: int | None, min_one_batch: bool):
    """`LogSegment.read`'s answer from a plain scan of every header, remembering nothing."""
    end_limit = segment.size if max_position is None else min(max_position, segment.size)
    entries = list(segment.iter_batches(0))
    first = next((entry for entry in entries if entry.last_offset >= offset), None)
    if first is None or first.position + first.size > end_limit:
        return None
    if first.size > max_bytes:
        return (first.position, first.size) if min_one_batch else (first.position, 0)
    end = first.position + first.size
    for entry in entries[entries.index(first) + 1:]:
        if entry.position + entry.size > min(end_limit, first.position + max_bytes):
            break
        end = entry.position + entry.size
    return first.position, end - first.position


def test_reads_answer_as_a_plain_scan_whatever_came_before(tmp_path):
    rng = random.Random(21)
    log = open_log(tmp_path, CONFIG)
    _fill(log, 300, rng)
    segment = log.active_segment
    offset = 0
    for _ in range(1000):
        if rng.random() < 0.2:  # a seek, or a fetch again at the same offset, else the offset after the last read
            offset = rng.randrange(segment.next_offset)
        max_bytes = rng.choice((1, 60, 61, 200, 500, 1000, 3000, 1 << 20))
        max_position = rng.choice((None, None, rng.randrange(segment.size + 1)))
        min_one_batch = rng.random() < 0.8
        found = segment.read(offset, max_bytes, max_position=max_position, min_one_batch=min_one_batch)
        assert found == _expected(segment, offset, max_bytes, max_position, min_one_batch), \
            (offset, max_bytes, max_position, min_one_batch)
        if found and found[1]:
            offset = segment.offset_at_position(found[0] + found[1])
            if offset >= segment.next_offset:
                offset = 0
    log.close()


def test_reads_stay_right_after_appends_and_truncation(tmp_path):
    rng = random.Random(7)
    log = open_log(tmp_path, CONFIG)
    _fill(log, 50, rng)
    segment = log.active_segment
    first = segment.read(0, 1000)
    after = segment.offset_at_position(first[0] + first[1])
    log.truncate_to(after)  # the batch whose header the read kept is gone
    _fill(log, 20, rng)  # other batches take its place
    for max_bytes in (1000, 1 << 20):
        assert segment.read(after, max_bytes) == _expected(segment, after, max_bytes, None, True)
    log.close()


@pytest.mark.parametrize("max_bytes", [1, 4096, 32 * 1024])
def test_a_consumer_reading_on_reads_at_most_one_header_per_fetch(tmp_path, monkeypatch, max_bytes):
    """One header read per fetch, and no index search when no further batch can fit: O(1) whatever the index
    holds. (`max_bytes` 1: one batch per fetch, which is larger than the limit.)"""
    log = open_log(tmp_path, CONFIG)
    for i in range(200):
        log.append(batch([os.urandom(900)] * 3, timestamp=NOW + i), leader_epoch=0, now_ms=NOW)
    segment = log.active_segment
    preads = []
    real_pread = os.pread
    monkeypatch.setattr(segment_module.os, "pread", lambda *args: preads.append(args) or real_pread(*args))
    offset, fetches = 0, 0
    while offset < segment.next_offset:
        before = len(preads)
        position, length = segment.read(offset, max_bytes)
        assert fetches == 0 or len(preads) - before <= 1  # the first fetch finds its batch: more
        offset = segment.offset_at_position(position + length)
        fetches += 1
    assert fetches > 10
    log.close()
