"""Zigzag variable-length integers, as used inside v2 records.

A varint stores 7 bits per byte, low bits first, with the high bit of each byte saying "more follows". Zigzag maps
signed values onto unsigned ones (0, -1, 1, -2, ... -> 0, 1, 2, 3, ...) so small negative numbers stay short.
Readers take any indexable byte buffer (bytes, bytearray, memoryview) and a position, and return the value with the
position after it; they never read more than 5 bytes for an int32 or 10 for an int64.
"""
from .errors import CorruptRecordError

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _read_long(buf, pos, max_shift, mask):
    """Decode a varint of two or more bytes. `max_shift` is 7 times the byte limit, `mask` the width the value is
    truncated to (as Java does when the last byte carries extra bits)."""
    raw, shift = 0, 0
    try:
        while True:
            byte = buf[pos]
            pos += 1
            raw |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
            if shift >= max_shift:
                raise CorruptRecordError(f"varint longer than {max_shift // 7} bytes")
    except IndexError:
        raise CorruptRecordError("varint runs past the end of the data") from None
    raw &= mask
    return (raw >> 1) ^ -(raw & 1), pos


def read_varint(buf, pos):
    """Read a zigzag int32 at `pos`; return (value, next position)."""
    if pos < len(buf):
        byte = buf[pos]
        if byte < 0x80:  # one-byte values are the common case: keep them to one call
            return (byte >> 1) ^ -(byte & 1), pos + 1
    return _read_long(buf, pos, 35, 0xFFFFFFFF)


def read_varlong(buf, pos):
    """Read a zigzag int64 at `pos`; return (value, next position)."""
    if pos < len(buf):
        byte = buf[pos]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), pos + 1
    return _read_long(buf, pos, 70, 0xFFFFFFFFFFFFFFFF)


def _append(out, zigzag):
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)


def write_varint(out, value):
    """Append `value` (an int32) to the bytearray `out` as a zigzag varint."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"{value} does not fit a varint (int32)")
    _append(out, (value << 1) ^ (value >> 63))


def write_varlong(out, value):
    """Append `value` (an int64) to the bytearray `out` as a zigzag varint."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"{value} does not fit a varlong (int64)")
    _append(out, (value << 1) ^ (value >> 63))


def varint_size(value):
    """Number of bytes `value` takes as a zigzag varint (int32 or int64)."""
    zigzag = (value << 1) ^ (value >> 63)
    size = 1
    while zigzag >= 0x80:
        zigzag >>= 7
        size += 1
    return size
