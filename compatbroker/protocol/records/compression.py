"""The compression codecs of Kafka record data, with bounded decompression.

Codec ids are those of the batch/message attributes. Every decoder stops as soon as the output would pass
`max_size`, so a small hostile input cannot make the broker allocate gigabytes (a decompression bomb).

Format details clients rely on:
- gzip: a gzip stream (several members are read, as Java's GZIPInputStream does).
- snappy: the Java client writes the xerial block framing (a 16-byte header starting b"\\x82SNAPPY\\x00", then
  blocks of big-endian int32 length + raw snappy); some clients send raw snappy. Both are read; xerial is written.
- lz4: the lz4 frame format with independent blocks. Kafka before KIP-57 (message format 0) computed the frame
  header checksum over the 4 magic bytes plus the descriptor, instead of the descriptor alone; messages of magic 0
  are still written that way, and readers of magic 0 and 1 accept either checksum.
- zstd: one or more zstd frames.
"""
import struct
import zlib
from enum import IntEnum

import lz4.frame
import snappy
import zstandard

from .errors import CorruptRecordError, UnsupportedCompressionError

DEFAULT_MAX_UNCOMPRESSED_SIZE = 32 * 1024 * 1024
"""Default bound on the decompressed size of one batch or wrapper message, for callers without a better one."""

CODEC_MASK = 0x07


class Compression(IntEnum):
    """Codec ids as stored in the low 3 bits of the attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


def codec(value):
    """Return the `Compression` for a codec id; UnsupportedCompressionError when it is not one Kafka defines."""
    try:
        return Compression(value)
    except ValueError:
        raise UnsupportedCompressionError(f"unknown compression codec id {value}") from None


def compress(codec_id, data, *, magic=2):
    """Compress `data` (any bytes-like) with the given codec; `magic` selects the legacy lz4 variant for 0."""
    kind = codec(codec_id)
    if kind == Compression.NONE:
        return bytes(data)
    return _COMPRESSORS[kind](data, magic)


def decompress(codec_id, data, *, max_size, magic=2):
    """Decompress `data` (any bytes-like); CorruptRecordError if it is damaged or would exceed `max_size` bytes.

    `magic` is the message format the data came from: for 0 and 1 the legacy lz4 header checksum is accepted.
    """
    kind = codec(codec_id)
    view = memoryview(data)
    if kind == Compression.NONE:
        if len(view) > max_size:
            raise CorruptRecordError(f"data of {len(view)} bytes is over the limit of {max_size}")
        return bytes(view)
    try:
        return _DECOMPRESSORS[kind](view, max_size, magic)
    except CorruptRecordError:
        raise
    except (zlib.error, RuntimeError, ValueError, zstandard.ZstdError, snappy.UncompressError) as err:
        # lz4 reports frame errors as RuntimeError; snappy (cramjam) and zstd have their own types.
        raise CorruptRecordError(f"cannot decompress {kind.name} data: {err}") from None


def _too_big(max_size):
    return CorruptRecordError(f"decompressed data is over the limit of {max_size} bytes")


# --- gzip ---------------------------------------------------------------------------------------------------------

_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # gzip header and trailer, not a raw zlib stream


def _gzip_compress(data, magic):
    # Level 6 is the default of Java's Deflater, which the Java client uses.
    packer = zlib.compressobj(6, zlib.DEFLATED, _GZIP_WBITS)
    return packer.compress(data) + packer.flush()


def _gzip_decompress(view, max_size, magic):
    parts, total, rest = [], 0, view
    while True:
        unpacker = zlib.decompressobj(_GZIP_WBITS)
        part = unpacker.decompress(rest, max_size + 1 - total)
        total += len(part)
        if total > max_size:
            raise _too_big(max_size)
        if not unpacker.eof:
            raise CorruptRecordError("gzip stream is truncated")
        parts.append(part)
        rest = unpacker.unused_data
        # Like Java's GZIPInputStream: continue into a following member, ignore anything else after the end.
        if rest[:2] != _GZIP_MAGIC:
            return b"".join(parts)


# --- snappy -------------------------------------------------------------------------------------------------------

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")  # magic, version, minimum compatible version
_XERIAL_VERSION = 1
_XERIAL_BLOCK_SIZE = 32 * 1024  # input bytes per block, the xerial library default
_INT32 = struct.Struct(">i")


def _snappy_compress(data, magic):
    view = memoryview(data)
    parts = [_XERIAL_HEADER.pack(_XERIAL_MAGIC, _XERIAL_VERSION, _XERIAL_VERSION)]
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = snappy.compress(view[start:start + _XERIAL_BLOCK_SIZE])
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _raw_snappy_length(view):
    """The uncompressed length a raw snappy block declares up front (an unsigned little-endian base-128 int32)."""
    value = shift = 0
    for pos in range(min(len(view), 5)):
        byte = view[pos]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value
        shift += 7
    raise CorruptRecordError("snappy block has no valid length prefix")


def _raw_snappy_decompress(view, budget, max_size):
    if _raw_snappy_length(view) > budget:
        raise _too_big(max_size)
    return snappy.decompress(view)


def _snappy_decompress(view, max_size, magic):
    if view[:len(_XERIAL_MAGIC)] != _XERIAL_MAGIC or len(view) < _XERIAL_HEADER.size:
        return _raw_snappy_decompress(view, max_size, max_size)
    # The version fields are ignored: some producers write them little-endian, and only version 1 exists.
    parts, total, pos = [], 0, _XERIAL_HEADER.size
    while pos < len(view):
        if pos + 4 > len(view):
            raise CorruptRecordError("xerial snappy block length is truncated")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > len(view):
            raise CorruptRecordError(f"xerial snappy block of {length} bytes does not fit the data")
        part = _raw_snappy_decompress(view[pos:pos + length], max_size - total, max_size)
        total += len(part)
        parts.append(part)
        pos += length
    return b"".join(parts)


# --- lz4 ----------------------------------------------------------------------------------------------------------

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_FLG_CONTENT_SIZE = 0x08
_LZ4_FLG_DICT_ID = 0x01


def _lz4_compress(data, magic):
    # What Kafka's own lz4 writer produces: 64 KiB independent blocks, no checksums, no content size.
    frame = lz4.frame.compress(data, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False,
                               content_checksum=False, block_checksum=False, store_size=False)
    if magic != 0:
        return frame
    frame = bytearray(frame)
    checksum_pos = _lz4_checksum_pos(frame)
    frame[checksum_pos] = _lz4_header_checksum(frame[:checksum_pos])
    return bytes(frame)


def _lz4_checksum_pos(view):
    """Position of the header checksum byte (HC): after magic, FLG, BD and the optional descriptor fields."""
    if len(view) < 7 or view[:4] != _LZ4_MAGIC:
        raise CorruptRecordError("not an lz4 frame")
    flags = view[4]
    pos = 6
    if flags & _LZ4_FLG_CONTENT_SIZE:
        pos += 8
    if flags & _LZ4_FLG_DICT_ID:
        pos += 4
    if pos >= len(view):
        raise CorruptRecordError("lz4 frame header is truncated")
    return pos


def _lz4_header_checksum(covered):
    """The HC byte: the second byte of the xxHash32 (seed 0) of the covered bytes."""
    return (xxh32(covered) >> 8) & 0xFF


def _lz4_decompress(view, max_size, magic):
    decoder = lz4.frame.LZ4FrameDecompressor()
    limit = max_size + 1
    rest = view
    if magic < 2:
        checksum_pos = _lz4_checksum_pos(view)
        correct = _lz4_header_checksum(view[4:checksum_pos])
        if view[checksum_pos] != correct:
            if view[checksum_pos] != _lz4_header_checksum(view[:checksum_pos]):
                raise CorruptRecordError("lz4 frame header checksum matches neither variant")
            # A pre-KIP-57 frame: hand the decoder the header with the checksum it expects, then the rest as is.
            decoder.decompress(bytes(view[:checksum_pos]) + bytes((correct,)), max_length=limit)
            rest = view[checksum_pos + 1:]
    out = decoder.decompress(rest, max_length=limit)
    if len(out) > max_size:
        raise _too_big(max_size)
    if not decoder.eof:
        raise CorruptRecordError("lz4 frame is truncated")
    return out


_XXH_PRIME1, _XXH_PRIME2, _XXH_PRIME3 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D
_XXH_PRIME4, _XXH_PRIME5 = 0x27D4EB2F, 0x165667B1
_U32 = 0xFFFFFFFF
_LE_WORD = struct.Struct("<I")


def _rotl(value, bits):
    return ((value << bits) | (value >> (32 - bits))) & _U32


def xxh32(data, seed=0):
    """xxHash32 of `data`. Only needed for lz4 frame header checksums (at most 18 bytes), so plain Python will do."""
    data = bytes(data)
    size, pos = len(data), 0
    if size >= 16:
        lanes = [(seed + _XXH_PRIME1 + _XXH_PRIME2) & _U32, (seed + _XXH_PRIME2) & _U32, seed & _U32,
                 (seed - _XXH_PRIME1) & _U32]
        while pos + 16 <= size:
            for lane in range(4):
                word = _LE_WORD.unpack_from(data, pos + 4 * lane)[0]
                lanes[lane] = (_rotl((lanes[lane] + word * _XXH_PRIME2) & _U32, 13) * _XXH_PRIME1) & _U32
            pos += 16
        acc = _rotl(lanes[0], 1) + _rotl(lanes[1], 7) + _rotl(lanes[2], 12) + _rotl(lanes[3], 18)
    else:
        acc = seed + _XXH_PRIME5
    acc = (acc + size) & _U32
    while pos + 4 <= size:
        word = _LE_WORD.unpack_from(data, pos)[0]
        acc = (_rotl((acc + word * _XXH_PRIME3) & _U32, 17) * _XXH_PRIME4) & _U32
        pos += 4
    while pos < size:
        acc = (_rotl((acc + data[pos] * _XXH_PRIME5) & _U32, 11) * _XXH_PRIME1) & _U32
        pos += 1
    acc ^= acc >> 15
    acc = (acc * _XXH_PRIME2) & _U32
    acc ^= acc >> 13
    acc = (acc * _XXH_PRIME3) & _U32
    return acc ^ (acc >> 16)


# --- zstd ---------------------------------------------------------------------------------------------------------

_ZSTD_FRAME_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE_MIN, _ZSTD_SKIPPABLE_MAX = 0x184D2A50, 0x184D2A5F
_ZSTD_DICT_ID_SIZES = (0, 1, 2, 4)
_ZSTD_CONTENT_SIZE_SIZES = (0, 2, 4, 8)  # for flag 0 the size is 1 byte when the frame is single-segment
_LE_U32 = struct.Struct("<I")
_ZSTD_READ_CHUNK = 1024 * 1024


def _zstd_compress(data, magic):
    return zstandard.ZstdCompressor(level=3).compress(data)


def _check_zstd_frames(view):
    """Walk the frame and block headers so truncated or trailing data is caught (the stream reader used for
    bounded output stops silently at the end of its input)."""
    end, pos = len(view), 0
    if end == 0:
        raise CorruptRecordError("empty zstd data")
    while pos < end:
        if pos + 4 > end:
            raise CorruptRecordError("zstd frame magic is truncated")
        (magic,) = _LE_U32.unpack_from(view, pos)
        if _ZSTD_SKIPPABLE_MIN <= magic <= _ZSTD_SKIPPABLE_MAX:
            if pos + 8 > end:
                raise CorruptRecordError("zstd skippable frame is truncated")
            pos += 8 + _LE_U32.unpack_from(view, pos + 4)[0]
            continue
        if magic != _ZSTD_FRAME_MAGIC:
            raise CorruptRecordError("data is not a zstd frame")
        pos = _skip_zstd_frame(view, pos + 4)
    if pos > end:
        raise CorruptRecordError("zstd frame is truncated")


def _skip_zstd_frame(view, pos):
    """Return the position after the frame whose header descriptor is at `pos`."""
    end = len(view)
    if pos >= end:
        raise CorruptRecordError("zstd frame header is truncated")
    descriptor = view[pos]
    single_segment = (descriptor >> 5) & 1
    pos += 1 + (0 if single_segment else 1) + _ZSTD_DICT_ID_SIZES[descriptor & 3]
    content_size_flag = descriptor >> 6
    pos += _ZSTD_CONTENT_SIZE_SIZES[content_size_flag] or single_segment
    while True:
        if pos + 3 > end:
            raise CorruptRecordError("zstd block header is truncated")
        block = view[pos] | (view[pos + 1] << 8) | (view[pos + 2] << 16)
        pos += 3
        block_type = (block >> 1) & 3
        if block_type == 3:
            raise CorruptRecordError("zstd block has the reserved type")
        pos += 1 if block_type == 1 else block >> 3  # an RLE block stores one byte
        if block & 1:  # last block of the frame
            break
    return pos + (4 if descriptor & 0x04 else 0)  # optional content checksum


def _zstd_decompress(view, max_size, magic):
    _check_zstd_frames(view)
    parts, total = [], 0
    with zstandard.ZstdDecompressor().stream_reader(view, read_across_frames=True) as reader:
        while True:
            part = reader.read(min(_ZSTD_READ_CHUNK, max_size + 1 - total))
            if not part:
                return b"".join(parts)
            total += len(part)
            if total > max_size:
                raise _too_big(max_size)
            parts.append(part)


_COMPRESSORS = {
    Compression.GZIP: _gzip_compress,
    Compression.SNAPPY: _snappy_compress,
    Compression.LZ4: _lz4_compress,
    Compression.ZSTD: _zstd_compress,
}
_DECOMPRESSORS = {
    Compression.GZIP: _gzip_decompress,
    Compression.SNAPPY: _snappy_decompress,
    Compression.LZ4: _lz4_decompress,
    Compression.ZSTD: _zstd_decompress,
}
