"""Recovery keeps exactly the valid prefix of a damaged tail segment: garbage appended, random truncation, and
flipped bytes. The expected prefix is computed from the batches we wrote, independently of the recovery code."""
import os
import random

import pytest

from compatbroker.protocol.records.compression import Compression

from .helpers import NOW, abandon, all_bytes, batch, batches_of, open_log, records_of


def _write_log(tmp_path, rng):
    log = open_log(tmp_path)
    for n in range(rng.randrange(20, 60)):
        values = [bytes([rng.randrange(256)]) * rng.randrange(1, 400) for _ in range(rng.randrange(1, 4))]
        codec = rng.choice([Compression.NONE, Compression.NONE, Compression.GZIP, Compression.LZ4])
        log.append(batch(values, timestamp=NOW + n, compression=codec), leader_epoch=0, now_ms=NOW + n)
    log.flush()
    tail = log.active_segment
    layout = [(h.size, raw) for h, raw in batches_of(tail.read_bytes(0, tail.size))]
    before_tail = b"".join(s.read_bytes(0, s.size) for s in log.segments[:-1])
    path = tail.file.path
    recovery_point = tail.base_offset
    abandon(log)
    return path, layout, before_tail, recovery_point


def _prefix(layout, cut):
    """The batches that end at or before byte `cut` of the tail segment."""
    kept, end = [], 0
    for size, raw in layout:
        if end + size > cut:
            break
        kept.append(raw)
        end += size
    return b"".join(kept)


def _check(tmp_path, expected, recovery_point):
    log = open_log(tmp_path, recovery_point=recovery_point)
    assert all_bytes(log) == expected
    next_offset = records_of(expected)[-1][0] + 1 if expected else 0
    assert log.log_end_offset == next_offset
    assert log.append(batch([b"after recovery"]), leader_epoch=1, now_ms=NOW).base_offset == next_offset
    if expected:
        assert records_of(log.read_bytes(next_offset - 1, 1))[-1][0] == next_offset - 1
    log.close()
    reopened = open_log(tmp_path, recovery_point=0)
    assert all_bytes(reopened)[:len(expected)] == expected and reopened.log_end_offset == next_offset + 1
    reopened.close()


@pytest.mark.parametrize("seed", range(12))
def test_garbage_after_the_last_batch_is_cut(tmp_path, seed):
    rng = random.Random(seed)
    path, layout, before_tail, recovery_point = _write_log(tmp_path, rng)
    garbage = bytes(rng.randrange(1, 5000)) if seed % 2 else rng.randbytes(rng.randrange(1, 5000))
    with open(path, "ab") as out:
        out.write(garbage)
    _check(tmp_path, before_tail + _prefix(layout, 10**9), recovery_point)


@pytest.mark.parametrize("seed", range(12))
def test_random_truncation_keeps_the_whole_batches_before_the_cut(tmp_path, seed):
    rng = random.Random(100 + seed)
    path, layout, before_tail, recovery_point = _write_log(tmp_path, rng)
    cut = rng.randrange(0, os.path.getsize(path) + 1)
    os.truncate(path, cut)
    _check(tmp_path, before_tail + _prefix(layout, cut), recovery_point)


@pytest.mark.parametrize("seed", range(12))
def test_a_flipped_byte_ends_the_log_at_the_damaged_batch(tmp_path, seed):
    rng = random.Random(200 + seed)
    path, layout, before_tail, recovery_point = _write_log(tmp_path, rng)
    index = rng.randrange(len(layout))
    start = sum(size for size, _ in layout[:index])
    # Bytes the CRC or the length checks cover: not baseOffset (0-8) or the leader epoch (12-16), which Kafka's
    # format leaves unprotected so that the broker can stamp them.
    relative = rng.choice([r for r in range(8, layout[index][0]) if not 12 <= r < 16])
    with open(path, "r+b") as out:
        out.seek(start + relative)
        byte = out.read(1)[0]
        out.seek(start + relative)
        out.write(bytes([byte ^ (1 << rng.randrange(8))]))
    _check(tmp_path, before_tail + _prefix(layout, start), recovery_point)
