"""Fuzzing: damaged or arbitrary input may only ever raise the package's own record errors.

Mutations are applied both with the CRC left stale (the checksum must catch them) and with the CRC recomputed, so
the record parser and the decompressors see the damage too.
"""
import struct
import zlib

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compatbroker.protocol.records import (ATTRIBUTES_OFFSET, CRC_OFFSET, RECORD_BATCH_OVERHEAD, Compression,
                                           CorruptRecordError, InvalidRecordError, UnsupportedCompressionError,
                                           batches_to_legacy, build_batch, build_message_set, compress,
                                           decompress, iter_batches, iter_legacy_messages, iter_records,
                                           legacy_to_batches, read_varint, read_varlong, validate_batch,
                                           validate_message_set)

RECORD_ERRORS = (CorruptRecordError, InvalidRecordError, UnsupportedCompressionError)
SMALL = 64 * 1024
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ENTRIES = [(b"key", b"value" * 5, [("h1", b"x"), ("h2", None)], 1000), (None, None, [], 1001),
           (b"", b"v" * 40, [], 999)]


def run_quietly(action, *args, **kwargs):
    """Run `action`, returning True if it succeeded and False if it raised one of the record errors."""
    try:
        result = action(*args, **kwargs)
        if hasattr(result, "__next__"):
            list(result)
        return True
    except RECORD_ERRORS:
        return False


def fix_batch_crc(buf):
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c(bytes(buf[ATTRIBUTES_OFFSET:])))


def read_all_ways(buf):
    """Push `buf` through every reader of v2 data; only record errors may escape."""
    run_quietly(validate_batch, buf, deep=True, max_size=SMALL)
    run_quietly(iter_records, buf, max_size=SMALL)
    run_quietly(iter_batches, buf)
    run_quietly(iter_batches, buf, allow_partial_tail=True)
    run_quietly(batches_to_legacy, buf, 1, max_size=SMALL)
    run_quietly(batches_to_legacy, buf, 0, max_size=SMALL, allow_partial_tail=True)


FLIPS = st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), min_size=1, max_size=4,
                 unique_by=lambda flip: flip[0])


@FUZZ
@given(st.sampled_from(list(Compression)), FLIPS, st.booleans())
def test_flipped_bytes_in_a_batch(compression, flips, recompute_crc):
    batch = bytearray(build_batch(ENTRIES, compression=compression, base_offset=5))
    positions = set()
    for pos, mask in flips:
        positions.add(pos % len(batch))
        batch[pos % len(batch)] ^= mask
    if recompute_crc:
        fix_batch_crc(batch)
    read_all_ways(batch)
    stamped_fields_only = positions <= set(range(8)) | set(range(12, 16))
    if not recompute_crc and not stamped_fields_only:
        with pytest.raises((CorruptRecordError, InvalidRecordError)):
            validate_batch(batch)


@FUZZ
@given(st.sampled_from([c for c in Compression if c != Compression.NONE]), FLIPS)
def test_damaged_records_inside_a_compressed_batch(compression, flips):
    """Damage the uncompressed records, then compress them validly: the record parser must cope."""
    plain = bytearray(build_batch(ENTRIES))
    body = bytearray(plain[RECORD_BATCH_OVERHEAD:])
    for pos, mask in flips:
        body[pos % len(body)] ^= mask
    batch = plain[:RECORD_BATCH_OVERHEAD] + compress(compression, body)
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, compression)
    fix_batch_crc(batch)
    read_all_ways(batch)


@FUZZ
@given(st.sampled_from([Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]),
       st.sampled_from([0, 1]), FLIPS, st.booleans())
def test_flipped_bytes_in_a_message_set(compression, magic, flips, recompute_crc):
    buf = bytearray(build_message_set([(k, v, [], ts) for k, v, _, ts in ENTRIES], magic, compression, 7))
    for pos, mask in flips:
        buf[pos % len(buf)] ^= mask
    if recompute_crc and len(buf) > 16:
        struct.pack_into(">I", buf, 12, zlib.crc32(buf[16:16 + struct.unpack_from(">i", buf, 8)[0] - 4]))
    for options in ({}, {"allow_partial_tail": True}):
        run_quietly(iter_legacy_messages, buf, max_size=SMALL, **options)
    run_quietly(validate_message_set, buf, max_size=SMALL)
    run_quietly(legacy_to_batches, buf, max_size=SMALL)


@FUZZ
@given(st.binary(max_size=400))
def test_arbitrary_bytes(data):
    read_all_ways(data)
    run_quietly(iter_legacy_messages, data, max_size=SMALL, allow_partial_tail=True)
    run_quietly(validate_message_set, data, max_size=SMALL)
    run_quietly(legacy_to_batches, data, max_size=SMALL)
    run_quietly(read_varint, data, 0)
    run_quietly(read_varlong, data, 0)
    for kind in list(Compression) + [5, 7]:
        for magic in (0, 2):
            run_quietly(decompress, kind, data, max_size=SMALL, magic=magic)


@FUZZ
@given(st.sampled_from([c for c in Compression if c != Compression.NONE]), st.sampled_from([0, 1, 2]),
       st.integers(0, 10_000), st.binary(min_size=1, max_size=8))
def test_overwritten_compressed_streams(compression, magic, pos, patch):
    packed = bytearray(compress(compression, b"some records " * 200, magic=magic))
    pos %= len(packed)
    packed[pos:pos + len(patch)] = patch
    run_quietly(decompress, compression, packed, max_size=SMALL, magic=magic)


def test_a_header_with_a_huge_record_count_stays_bounded():
    batch = bytearray(build_batch(ENTRIES))
    struct.pack_into(">i", batch, 57, 2**31 - 1)
    struct.pack_into(">i", batch, 23, 2**31 - 2)
    fix_batch_crc(batch)
    with pytest.raises(InvalidRecordError):
        validate_batch(batch)
    with pytest.raises(InvalidRecordError):
        list(iter_records(batch, max_size=SMALL))
