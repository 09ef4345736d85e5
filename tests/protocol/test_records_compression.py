"""Codecs: round trips, kafka-python's codec module as oracle, the xerial and lz4 (KIP-57) quirks, and bounds."""
import gzip
import struct
import tracemalloc

import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec as kp_codec

from compatbroker.protocol.records import (Compression, CorruptRecordError, UnsupportedCompressionError, compress,
                                           decompress)
from compatbroker.protocol.records.compression import xxh32

CODECS = [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
SAMPLE = b"".join(b"record %d with a value that repeats, " % i for i in range(3000))  # ~100 KiB, several blocks


def header_checksum_pos(frame):
    flags = frame[4]
    return 6 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0)


def with_broken_checksum(frame):
    """The frame as a pre-KIP-57 Kafka writer would emit it: HC hashed over the magic bytes too."""
    frame = bytearray(frame)
    pos = header_checksum_pos(frame)
    frame[pos] = (xxh32(frame[:pos]) >> 8) & 0xFF
    return bytes(frame)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(list(Compression)), st.binary(max_size=3000), st.sampled_from([0, 1, 2]))
def test_round_trip(kind, data, magic):
    packed = compress(kind, data, magic=magic)
    assert decompress(kind, packed, max_size=len(data), magic=magic) == data


@pytest.mark.parametrize("kind", CODECS)
def test_round_trip_of_several_blocks_from_a_memoryview(kind):
    source = memoryview(bytearray(b"..." + SAMPLE))[3:]
    packed = compress(kind, source)
    assert decompress(kind, memoryview(bytearray(packed)), max_size=len(SAMPLE)) == SAMPLE


@pytest.mark.parametrize("kind, theirs", [
    (Compression.GZIP, kp_codec.gzip_decode), (Compression.SNAPPY, kp_codec.snappy_decode),
    (Compression.LZ4, kp_codec.lz4_decode), (Compression.ZSTD, kp_codec.zstd_decode)])
def test_kafka_python_reads_what_we_compress(kind, theirs):
    assert theirs(compress(kind, SAMPLE)) == SAMPLE


@pytest.mark.parametrize("kind, encoded", [
    (Compression.GZIP, lambda: kp_codec.gzip_encode(SAMPLE)),
    (Compression.SNAPPY, lambda: kp_codec.snappy_encode(SAMPLE)),
    (Compression.SNAPPY, lambda: kp_codec.snappy_encode(SAMPLE, xerial_compatible=False)),
    (Compression.LZ4, lambda: kp_codec.lz4_encode(SAMPLE)),
    (Compression.ZSTD, lambda: kp_codec.zstd_encode(SAMPLE))])
def test_we_read_what_kafka_python_compresses(kind, encoded):
    assert decompress(kind, encoded(), max_size=len(SAMPLE)) == SAMPLE


def test_snappy_writes_xerial_framing_in_32k_blocks():
    packed = compress(Compression.SNAPPY, SAMPLE)
    magic, version, compatible = struct.unpack_from(">8sii", packed)
    assert (magic, version, compatible) == (b"\x82SNAPPY\x00", 1, 1)
    pos, blocks = 16, []
    while pos < len(packed):
        (length,) = struct.unpack_from(">i", packed, pos)
        blocks.append(snappy.decompress(packed[pos + 4:pos + 4 + length]))
        pos += 4 + length
    assert b"".join(blocks) == SAMPLE
    assert [len(block) for block in blocks[:-1]] == [32 * 1024] * (len(blocks) - 1)


def test_xerial_version_fields_are_not_checked():
    little_endian_header = b"\x82SNAPPY\x00" + struct.pack("<ii", 1, 1)
    block = snappy.compress(b"hello")
    assert decompress(Compression.SNAPPY, little_endian_header + struct.pack(">i", len(block)) + block,
                      max_size=5) == b"hello"


def test_gzip_reads_concatenated_members():
    data = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(Compression.GZIP, data, max_size=100) == b"first second"


def test_zstd_reads_several_frames_and_skippable_frames():
    skippable = struct.pack("<II", 0x184D2A50, 3) + b"abc"
    data = compress(Compression.ZSTD, b"one ") + skippable + compress(Compression.ZSTD, b"two")
    assert decompress(Compression.ZSTD, data, max_size=100) == b"one two"
    with pytest.raises(CorruptRecordError):
        decompress(Compression.ZSTD, data + b"junk", max_size=100)


# --- lz4 and KIP-57 -----------------------------------------------------------------------------------------------

def test_xxh32_known_values():
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456


@pytest.mark.parametrize("options", [
    {}, {"store_size": False}, {"block_linked": False, "content_checksum": True},
    {"block_size": lz4.frame.BLOCKSIZE_MAX4MB, "store_size": True}])
def test_xxh32_reproduces_the_header_checksum_lz4_writes(options):
    frame = lz4.frame.compress(b"some data", **options)
    pos = header_checksum_pos(frame)
    assert frame[pos] == (xxh32(frame[4:pos]) >> 8) & 0xFF


def test_magic_0_lz4_uses_the_legacy_header_checksum():
    frame = compress(Compression.LZ4, SAMPLE, magic=0)
    pos = header_checksum_pos(frame)
    assert frame[pos] == (xxh32(frame[:pos]) >> 8) & 0xFF
    assert frame[pos] != (xxh32(frame[4:pos]) >> 8) & 0xFF  # true for this header: the variants differ
    with pytest.raises(RuntimeError):  # a standard decoder refuses it...
        lz4.frame.decompress(frame)
    assert decompress(Compression.LZ4, frame, max_size=len(SAMPLE), magic=0) == SAMPLE  # ...Kafka's does not


def test_magic_1_and_2_lz4_use_the_standard_header_checksum():
    for magic in (1, 2):
        frame = compress(Compression.LZ4, SAMPLE, magic=magic)
        assert lz4.frame.decompress(frame) == SAMPLE


@pytest.mark.parametrize("store_size", [False, True])
def test_broken_checksum_frame_decodes_for_magic_0_and_1_only(store_size):
    frame = with_broken_checksum(lz4.frame.compress(SAMPLE, store_size=store_size))
    for magic in (0, 1):
        assert decompress(Compression.LZ4, frame, max_size=len(SAMPLE), magic=magic) == SAMPLE
    with pytest.raises(CorruptRecordError):
        decompress(Compression.LZ4, frame, max_size=len(SAMPLE), magic=2)


def test_kafka_python_legacy_lz4_interoperates(monkeypatch):
    class XXHashShim:  # kafka-python needs the xxhash package for this path; lend it our hash
        @staticmethod
        def xxh32(data):
            return type("Digest", (), {"digest": lambda self: struct.pack(">I", xxh32(data))})()

    monkeypatch.setattr(kp_codec, "xxhash", XXHashShim)
    assert kp_codec.lz4_decode_old_kafka(compress(Compression.LZ4, SAMPLE, magic=0)) == SAMPLE
    assert decompress(Compression.LZ4, kp_codec.lz4_encode_old_kafka(SAMPLE), max_size=len(SAMPLE),
                      magic=0) == SAMPLE


def test_lz4_header_checksum_matching_neither_variant_is_corrupt():
    frame = bytearray(lz4.frame.compress(SAMPLE))
    pos = header_checksum_pos(frame)
    good, broken = (xxh32(frame[4:pos]) >> 8) & 0xFF, (xxh32(frame[:pos]) >> 8) & 0xFF
    frame[pos] = next(value for value in range(256) if value not in (good, broken))
    for magic in (0, 1, 2):
        with pytest.raises(CorruptRecordError):
            decompress(Compression.LZ4, frame, max_size=len(SAMPLE), magic=magic)


# --- errors and bounds --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", CODECS)
@pytest.mark.parametrize("magic", [0, 2])
def test_truncated_streams_are_corrupt(kind, magic):
    packed = compress(kind, SAMPLE, magic=magic)
    for cut in sorted({0, 1, 5, 10, 17, len(packed) // 2, len(packed) - 4, len(packed) - 1}):
        with pytest.raises(CorruptRecordError):
            decompress(kind, packed[:cut], max_size=len(SAMPLE), magic=magic)


@pytest.mark.parametrize("kind", CODECS)
def test_output_over_max_size_is_refused(kind):
    packed = compress(kind, SAMPLE)
    assert decompress(kind, packed, max_size=len(SAMPLE)) == SAMPLE
    with pytest.raises(CorruptRecordError):
        decompress(kind, packed, max_size=len(SAMPLE) - 1)


@pytest.mark.parametrize("kind", CODECS)
def test_decompression_bomb_stops_early_without_allocating_the_output(kind):
    bomb = compress(kind, bytes(16 * 1024 * 1024))
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError):
            decompress(kind, bomb, max_size=256 * 1024)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024


def test_raw_snappy_declaring_a_huge_length_is_refused_before_decoding():
    claim = bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F])  # 4 GiB - 1, as a varint
    with pytest.raises(CorruptRecordError):
        decompress(Compression.SNAPPY, claim + b"\x00" * 10, max_size=1024)


def test_zstd_frame_claiming_a_huge_content_size_is_refused():
    frame = zstandard.ZstdCompressor().compress(bytes(2 * 1024 * 1024))
    assert zstandard.frame_content_size(frame) == 2 * 1024 * 1024
    with pytest.raises(CorruptRecordError):
        decompress(Compression.ZSTD, frame, max_size=1024)


@pytest.mark.parametrize("codec_id", [5, 6, 7, -1])
def test_unknown_codecs_are_unsupported(codec_id):
    with pytest.raises(UnsupportedCompressionError):
        compress(codec_id, b"x")
    with pytest.raises(UnsupportedCompressionError):
        decompress(codec_id, b"x", max_size=10)


@pytest.mark.parametrize("kind", CODECS)
@pytest.mark.parametrize("garbage", [b"", b"\x05\x00", b"\x82SNAPPY\x00" + b"\x00" * 8 + b"\x00\x00\x00\x09abc",
                                     b"\x04\x22\x4d\x18\x40\x40\xc0", b"\x28\xb5\x2f\xfd\x00", bytes(range(64))])
def test_garbage_is_corrupt(kind, garbage):
    with pytest.raises(CorruptRecordError):
        decompress(kind, garbage, max_size=1000)
