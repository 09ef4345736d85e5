"""Legacy message sets (magic 0 and 1): round trips, wrapper offset rules, timestamps, and errors."""
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compatbroker.protocol.records import (Compression, CorruptRecordError, InvalidRecordError, LegacyMessage,
                                           Record, UnsupportedCompressionError, build_message_set, compress,
                                           encode_messages, iter_legacy_messages, validate_message_set)
from compatbroker.protocol.records.compression import xxh32

LEGACY_CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]
ENTRIES = st.lists(st.tuples(st.none() | st.binary(max_size=16), st.none() | st.binary(max_size=200),
                             st.just([]), st.integers(-1, 2**42)), min_size=1, max_size=6)
MAX = 1 << 20


def messages(buf, **options):
    return list(iter_legacy_messages(buf, max_size=MAX, **options))


def fix_crc(buf, pos=0):
    struct.pack_into(">I", buf, pos + 12, zlib.crc32(buf[pos + 16:]))


@settings(max_examples=50, deadline=None)
@given(ENTRIES, st.sampled_from([0, 1]), st.sampled_from(LEGACY_CODECS), st.integers(0, 2**40))
def test_round_trip(entries, magic, compression, base_offset):
    buf = build_message_set(entries, magic, compression, base_offset)
    assert validate_message_set(buf) == len(entries)
    assert messages(buf) == [
        LegacyMessage(base_offset + i, magic, ts if magic else -1, 0 if magic else None, key, value)
        for i, (key, value, _, ts) in enumerate(entries)]


def test_layout_of_an_uncompressed_v1_message():
    buf = build_message_set([(b"k", b"value", [], 1234)], 1, base_offset=7)
    offset, size, crc, magic, attributes, timestamp = struct.unpack_from(">qiIbbq", buf)
    assert (offset, size, magic, attributes, timestamp) == (7, 22 + 1 + 5, 1, 0, 1234)
    assert buf[26:] == b"\x00\x00\x00\x01k\x00\x00\x00\x05value"
    assert crc == zlib.crc32(buf[16:])


def test_layout_of_a_v0_message_with_null_key():
    buf = build_message_set([(None, b"v", [], None)], 0)
    assert buf == struct.pack(">qiIbb", 0, 15, zlib.crc32(b"\x00\x00" + b"\xff" * 4 + b"\x00\x00\x00\x01v"), 0, 0) + (
        b"\xff\xff\xff\xff\x00\x00\x00\x01v")


@pytest.mark.parametrize("compression", LEGACY_CODECS[1:])
def test_v1_wrapper_carries_the_last_offset_and_inner_offsets_are_relative(compression):
    buf = build_message_set([(None, b"a", [], 10), (None, b"b", [], 30), (None, b"c", [], 20)], 1, compression, 100)
    wrapper_offset, _, _, _, attributes, wrapper_timestamp = struct.unpack_from(">qiIbbq", buf)
    assert (wrapper_offset, attributes, wrapper_timestamp) == (102, compression, 30)
    assert [m.offset for m in messages(buf)] == [100, 101, 102]


def test_v1_wrapper_offset_below_the_inner_ones_is_ignored():
    # kafka-python's producer writes wrapper offset 0 around inner offsets 0..n-1 (or higher); Java then keeps the
    # inner offsets rather than computing negative ones.
    inner = encode_messages([(5, 1, None, b"a"), (6, 1, None, b"b")], 1)
    wrapper = bytearray(encode_messages([(0, 1, None, compress(Compression.GZIP, inner))], 1))
    wrapper[17] = Compression.GZIP
    fix_crc(wrapper)
    assert [m.offset for m in messages(wrapper)] == [5, 6]


@pytest.mark.parametrize("compression", LEGACY_CODECS[1:])
def test_v0_wrapper_inner_offsets_are_absolute(compression):
    buf = build_message_set([(None, b"a", [], None), (None, b"b", [], None)], 0, compression, 100)
    assert struct.unpack_from(">q", buf)[0] == 101
    assert [m.offset for m in messages(buf)] == [100, 101]


def test_v0_lz4_wrapper_uses_the_legacy_frame_checksum():
    buf = build_message_set([(None, b"x" * 100, [], None)], 0, Compression.LZ4)
    frame = buf[12 + 6 + 4 + 4:]  # after entry head, crc/magic/attributes, null key, value length
    assert frame[:4] == b"\x04\x22\x4d\x18"
    assert frame[6] == (xxh32(frame[:6]) >> 8) & 0xFF


def test_log_append_time_wrapper_timestamp_applies_to_inner_messages():
    buf = encode_messages([(5, 10, None, b"a"), (6, 20, None, b"b")], 1, Compression.GZIP, timestamp_type=1)
    assert struct.unpack_from(">b", buf, 17)[0] == Compression.GZIP | 0x08
    assert [(m.timestamp, m.timestamp_type) for m in messages(buf)] == [(20, 1), (20, 1)]


def test_encode_messages_keeps_gaps_in_offsets():
    for compression in (Compression.NONE, Compression.SNAPPY):
        for magic in (0, 1):
            buf = encode_messages([(3, 1, b"k", b"a"), (7, 2, None, b"b")], magic, compression)
            assert [m.offset for m in messages(buf)] == [3, 7]


def test_build_accepts_record_objects_and_drops_headers():
    buf = build_message_set([Record(50, 9, b"k", b"v", [("h", b"x")])], 1, base_offset=2)
    assert messages(buf) == [LegacyMessage(2, 1, 9, 0, b"k", b"v")]


def test_zstd_needs_magic_2():
    with pytest.raises(UnsupportedCompressionError):
        build_message_set([(None, b"v", [], 0)], 1, Compression.ZSTD)
    wrapper = encode_messages([(0, 0, None, compress(Compression.ZSTD, b"whatever"))], 1)
    wrapper = bytearray(wrapper)
    wrapper[17] = Compression.ZSTD
    fix_crc(wrapper)
    with pytest.raises(UnsupportedCompressionError):
        validate_message_set(wrapper)


def test_crc_mismatch_is_corrupt():
    buf = bytearray(build_message_set([(b"k", b"v", [], 1)], 1))
    buf[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC"):
        validate_message_set(buf)


@pytest.mark.parametrize("compression", LEGACY_CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_truncated_sets_are_corrupt_unless_a_partial_tail_is_allowed(compression, magic):
    first = build_message_set([(b"k", b"v" * 20, [], 1)], magic, compression)
    second = build_message_set([(b"k", b"w" * 20, [], 2)], magic, compression, 1)
    for cut in range(len(second)):
        buf = first + second[:cut]
        if cut:
            with pytest.raises(CorruptRecordError):
                messages(buf)
        assert [m.value for m in messages(buf, allow_partial_tail=True)] == [b"v" * 20]


def test_nested_compression_is_invalid():
    inner = build_message_set([(None, b"v", [], 1)], 1, Compression.GZIP)
    outer = encode_messages([(0, 1, None, compress(Compression.GZIP, inner))], 1)
    outer = bytearray(outer)
    outer[17] = Compression.GZIP
    fix_crc(outer)
    with pytest.raises(InvalidRecordError):
        validate_message_set(outer)


def test_inner_magic_must_match_the_wrapper():
    inner = build_message_set([(None, b"v", [], None)], 0)
    outer = bytearray(encode_messages([(0, 1, None, compress(Compression.GZIP, inner))], 1))
    outer[17] = Compression.GZIP
    fix_crc(outer)
    with pytest.raises(InvalidRecordError):
        validate_message_set(outer)


def test_wrapper_with_null_value_is_corrupt():
    outer = bytearray(encode_messages([(0, 1, None, None)], 1))
    outer[17] = Compression.GZIP
    fix_crc(outer)
    with pytest.raises(CorruptRecordError):
        validate_message_set(outer)


def test_wrapper_decompression_is_bounded():
    buf = build_message_set([(None, bytes(200_000), [], 1)], 1, Compression.GZIP)
    with pytest.raises(CorruptRecordError):
        validate_message_set(buf, max_size=100_000)


@pytest.mark.parametrize("patch", [
    (12 + 4, 5),  # unknown magic byte
    (8, struct.pack(">i", 3)),  # message size below the minimum
])
def test_malformed_entries_are_corrupt(patch):
    buf = bytearray(build_message_set([(b"k", b"v", [], 1)], 1))
    pos, value = patch
    if isinstance(value, int):
        buf[pos] = value
    else:
        buf[pos:pos + len(value)] = value
    with pytest.raises(CorruptRecordError):
        validate_message_set(buf)


def test_key_length_not_matching_the_message_size_is_corrupt():
    buf = bytearray(build_message_set([(b"key", b"v", [], 1)], 1))
    struct.pack_into(">i", buf, 26, 2)  # key length 2 instead of 3
    fix_crc(buf)
    with pytest.raises(CorruptRecordError):
        validate_message_set(buf)


@pytest.mark.parametrize("size", [14, 22, 24, 26])
def test_message_size_ending_inside_a_length_field_is_corrupt(size):
    buf = bytearray(build_message_set([(b"key", b"value", [], 1)], 1))
    struct.pack_into(">i", buf, 8, size)
    del buf[12 + size:]
    fix_crc(buf)
    with pytest.raises(CorruptRecordError):
        validate_message_set(buf)
