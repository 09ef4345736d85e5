"""The legacy MessageSet formats, magic 0 (Kafka 0.8) and magic 1 (0.10, adds timestamps).

A message set is a sequence of entries:

    offset int64 | messageSize int32 | crc uint32 | magic int8 | attributes int8 | [timestamp int64, magic 1] |
    key bytes | value bytes

with bytes = int32 length (-1 for null) + data, messageSize counting from crc to the end, and the CRC-32 (zlib's)
covering magic to the end. The low 3 attribute bits are the codec, bit 3 (magic 1) the timestamp type.

A compressed entry is a wrapper: its value holds a whole inner message set, compressed. Inner offsets are absolute
for magic 0; for magic 1 they are relative (0..n-1) and the wrapper carries the absolute offset of the last inner
message (when that would make offsets negative, inner offsets are taken as they are). A LogAppendTime wrapper's
timestamp applies to all its inner messages.
"""
import struct
import zlib
from typing import NamedTuple

from .compression import CODEC_MASK, DEFAULT_MAX_UNCOMPRESSED_SIZE, Compression, codec, compress, decompress
from .errors import CorruptRecordError, InvalidRecordError, UnsupportedCompressionError

LOG_OVERHEAD = 12  # offset and messageSize
CRC_OFFSET = 12
MAGIC_OFFSET = 16
MESSAGE_OVERHEAD = {0: 14, 1: 22}  # messageSize of a message with empty key and value
TIMESTAMP_TYPE_MASK = 0x08
NO_TIMESTAMP = -1

_ENTRY_HEAD = struct.Struct(">qi")
_MESSAGE_HEAD = struct.Struct(">Ibb")  # crc, magic, attributes
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")


class LegacyMessage(NamedTuple):
    """One message of a v0/v1 set. Magic 0 has no timestamp (-1) and no timestamp type (None)."""

    offset: int
    magic: int
    timestamp: int
    timestamp_type: int | None
    key: bytes | None
    value: bytes | None


class _Parsed(NamedTuple):
    magic: int
    attributes: int
    timestamp: int
    key: memoryview | None
    value: memoryview | None


def _read_bytes(message, pos):
    if pos + 4 > len(message):
        raise CorruptRecordError("message ends inside a length field")
    (length,) = _INT32.unpack_from(message, pos)
    pos += 4
    if length == -1:
        return None, pos
    if length < 0 or pos + length > len(message):
        raise CorruptRecordError(f"field of length {length} does not fit the message")
    return message[pos:pos + length], pos + length


def _parse_message(message):
    """Check and split one message (crc..end, as a memoryview)."""
    crc, magic, attributes = _MESSAGE_HEAD.unpack_from(message)
    if magic not in MESSAGE_OVERHEAD:
        raise CorruptRecordError(f"unknown magic byte {magic} in a message set")
    if len(message) < MESSAGE_OVERHEAD[magic]:
        raise CorruptRecordError(f"magic {magic} message of {len(message)} bytes is too short")
    computed = zlib.crc32(message[4:])
    if computed != crc:
        raise CorruptRecordError(f"message CRC is {crc:#010x}, computed {computed:#010x}")
    pos = 6
    timestamp = NO_TIMESTAMP
    if magic == 1:
        (timestamp,) = _INT64.unpack_from(message, pos)
        pos += 8
    key, pos = _read_bytes(message, pos)
    value, pos = _read_bytes(message, pos)
    if pos != len(message):
        raise CorruptRecordError("message size does not match its key and value")
    return _Parsed(magic, attributes, timestamp, key, value)


def _message_codec(parsed):
    kind = codec(parsed.attributes & CODEC_MASK)
    if kind == Compression.ZSTD:
        raise UnsupportedCompressionError(f"zstd is not allowed in magic {parsed.magic} messages")
    return kind


def _iter_raw(view, allow_partial_tail):
    """Yield (offset, parsed message) for each top-level entry of the set in `view`."""
    end, pos = len(view), 0
    while pos < end:
        if end - pos >= LOG_OVERHEAD:
            offset, size = _ENTRY_HEAD.unpack_from(view, pos)
            if size < MESSAGE_OVERHEAD[0]:
                raise CorruptRecordError(f"message size {size} at position {pos} is below the minimum")
            if pos + LOG_OVERHEAD + size <= end:
                yield offset, _parse_message(view[pos + LOG_OVERHEAD:pos + LOG_OVERHEAD + size])
                pos += LOG_OVERHEAD + size
                continue
        if allow_partial_tail:
            return
        raise CorruptRecordError(f"partial message of {end - pos} bytes at the end of the message set")


def _timestamp_type(parsed):
    if parsed.magic == 0:
        return None
    return 1 if parsed.attributes & TIMESTAMP_TYPE_MASK else 0


def _plain(offset, parsed, timestamp=None, timestamp_type=None):
    return LegacyMessage(
        offset, parsed.magic, parsed.timestamp if timestamp is None else timestamp,
        _timestamp_type(parsed) if timestamp_type is None else timestamp_type,
        None if parsed.key is None else bytes(parsed.key), None if parsed.value is None else bytes(parsed.value))


def _unwrap(offset, wrapper, kind, max_size):
    """The inner messages of a compressed wrapper, with absolute offsets and the wrapper's timestamp rules."""
    if wrapper.value is None:
        raise CorruptRecordError("compressed wrapper message has a null value")
    inner_set = decompress(kind, wrapper.value, max_size=max_size, magic=wrapper.magic)
    inner = list(_iter_raw(memoryview(inner_set), False))
    if not inner:
        raise InvalidRecordError("compressed wrapper message holds no messages")
    base = offset - inner[-1][0] if wrapper.magic == 1 else 0
    if base < 0:  # as Java reads it: a wrapper offset below the relative ones (some producers write 0) is ignored
        base = 0
    timestamp_type = _timestamp_type(wrapper)  # inner messages follow the wrapper's type
    timestamp = wrapper.timestamp if timestamp_type == 1 else None
    messages = []
    for inner_offset, parsed in inner:
        if parsed.attributes & CODEC_MASK:
            raise InvalidRecordError("compressed wrapper holds another compressed message")
        if parsed.magic != wrapper.magic:
            raise InvalidRecordError(f"magic {parsed.magic} message inside a magic {wrapper.magic} wrapper")
        messages.append(_plain(base + inner_offset, parsed, timestamp, timestamp_type))
    return messages


def iter_legacy_entries(buf, *, max_size, allow_partial_tail=False):
    """Yield (compression, [LegacyMessage]) per top-level entry: a plain message alone, or a wrapper's inner
    messages. CRCs are checked; `max_size` bounds each wrapper's decompressed size."""
    for offset, parsed in _iter_raw(memoryview(buf), allow_partial_tail):
        kind = _message_codec(parsed)
        if kind == Compression.NONE:
            yield kind, [_plain(offset, parsed)]
        else:
            yield kind, _unwrap(offset, parsed, kind, max_size)


def iter_legacy_messages(buf, *, max_size, allow_partial_tail=False):
    """Yield every `LegacyMessage` of a v0/v1 message set, wrappers flattened into their inner messages.

    CRCs and sizes are checked (CorruptRecordError). A message cut short at the end raises too, unless
    `allow_partial_tail` (a Fetch response may end with one).
    """
    for _, messages in iter_legacy_entries(buf, max_size=max_size, allow_partial_tail=allow_partial_tail):
        yield from messages


def validate_message_set(buf, *, max_size=DEFAULT_MAX_UNCOMPRESSED_SIZE):
    """Check a complete v0/v1 message set, decompressing wrappers (bounded), and return its number of messages."""
    return sum(len(messages) for _, messages in iter_legacy_entries(buf, max_size=max_size))


# --- building -----------------------------------------------------------------------------------------------------

def _length(data):
    return 0 if data is None else len(data)


def _append_message(out, offset, magic, attributes, timestamp, key, value):
    size = MESSAGE_OVERHEAD[magic] + _length(key) + _length(value)
    start = len(out)
    out += _ENTRY_HEAD.pack(offset, size)
    out += _MESSAGE_HEAD.pack(0, magic, attributes)  # crc filled in below
    if magic == 1:
        out += _INT64.pack(timestamp)
    for data in (key, value):
        out += _INT32.pack(-1 if data is None else len(data))
        if data is not None:
            out += data
    with memoryview(out) as view:
        crc = zlib.crc32(view[start + MAGIC_OFFSET:])
    _UINT32.pack_into(out, start + CRC_OFFSET, crc)


def encode_messages(messages, magic, compression=Compression.NONE, *, timestamp_type=0):
    """Encode (offset, timestamp, key, value) tuples as a v0/v1 message set with their own offsets.

    Uncompressed, each becomes an entry. Compressed, they go into one wrapper whose offset is the last message's;
    inner offsets are absolute for magic 0 and relative to the first message for magic 1. `timestamp_type` 1
    (LogAppendTime, magic 1 only) sets the attribute bit; the wrapper's timestamp is the largest inner one.
    """
    if magic not in MESSAGE_OVERHEAD:
        raise ValueError(f"legacy message sets have magic 0 or 1, not {magic}")
    kind = codec(compression)
    if kind == Compression.ZSTD:
        raise UnsupportedCompressionError(f"zstd is not allowed in magic {magic} messages")
    type_bit = TIMESTAMP_TYPE_MASK if magic == 1 and timestamp_type == 1 else 0
    messages = [(offset, NO_TIMESTAMP if timestamp is None else timestamp, key, value)
                for offset, timestamp, key, value in messages]
    out = bytearray()
    if kind == Compression.NONE:
        for offset, timestamp, key, value in messages:
            _append_message(out, offset, magic, type_bit, timestamp, key, value)
        return bytes(out)
    if not messages:
        raise ValueError("a compressed wrapper needs at least one message")
    first = messages[0][0] if magic == 1 else 0
    for offset, timestamp, key, value in messages:
        _append_message(out, offset - first, magic, type_bit, timestamp, key, value)
    wrapped = compress(kind, out, magic=magic)
    out = bytearray()
    max_timestamp = max(timestamp for _, timestamp, _, _ in messages)
    _append_message(out, messages[-1][0], magic, kind | type_bit, max_timestamp, None, wrapped)
    return bytes(out)


def build_message_set(records, magic, compression=Compression.NONE, base_offset=0, *, timestamp_type=0):
    """Encode records as a v0/v1 message set; record i gets offset base_offset + i.

    `records` are `Record`-like objects or (key, value, headers, timestamp) tuples. These formats have no headers,
    so headers are dropped; magic 0 has no timestamps either. With a codec, all records share one wrapper.
    """
    messages = []
    for index, record in enumerate(records):
        if isinstance(record, tuple):
            key, value, _, timestamp = record
        else:
            key, value, timestamp = record.key, record.value, record.timestamp
        messages.append((base_offset + index, timestamp, key, value))
    return encode_messages(messages, magic, compression, timestamp_type=timestamp_type)
