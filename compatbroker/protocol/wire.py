"""Wire primitives shared by the generated codecs: varints, strings, bytes, array lengths, file regions.

Readers take a memoryview and a position and return `(value, new_position)`. They check every declared length
against the bytes that are left before slicing or allocating, and raise `ValueError` subclasses only; the public
entry points in `compatbroker.protocol.api` turn any failure into a `DecodeError` that names the field.
Writers append to an `Out` buffer.
"""
from __future__ import annotations

import struct
import uuid

from .exceptions import EncodeError

_i16 = struct.Struct(">h")
_i32 = struct.Struct(">i")
_unpack_i16 = _i16.unpack_from
_unpack_i32 = _i32.unpack_from
pack_i16 = _i16.pack
pack_i32 = _i32.pack
unpack_i8 = struct.Struct(">b").unpack_from

ZERO_UUID = uuid.UUID(int=0)


class _Short(ValueError):
    pass


class FileRegion:
    """`length` bytes of an open file starting at `position`: a records value that is sent with `os.sendfile`
    instead of being read into Python."""
    __slots__ = ("file", "position", "length")

    def __init__(self, file, position: int, length: int):
        self.file = file
        self.position = position
        self.length = length

    def __len__(self):
        return self.length

    def __eq__(self, other):
        return (isinstance(other, FileRegion) and self.file == other.file and self.position == other.position
                and self.length == other.length)

    def __repr__(self):
        return f"FileRegion({self.file!r}, position={self.position}, length={self.length})"


class Out(bytearray):
    """The encoder's output: bytes, plus the file regions to splice in at given byte positions."""
    __slots__ = ("regions",)

    def __init__(self):
        super().__init__()
        self.regions = []


# ---- varints -------------------------------------------------------------------------------------------------

def read_uvarint(b, p):
    x = b[p]
    if x < 0x80:
        return x, p + 1
    result = x & 0x7F
    shift = 7
    while True:
        p += 1
        x = b[p]
        result |= (x & 0x7F) << shift
        if x < 0x80:
            if result > 0xFFFFFFFF:
                raise _Short("unsigned varint does not fit 32 bits")
            return result, p + 1
        shift += 7
        if shift > 28:
            raise _Short("unsigned varint longer than 5 bytes")


def write_uvarint(w, value):
    if value < 0:
        raise EncodeError(f"unsigned varint cannot hold {value}")
    while value >= 0x80:
        w.append((value & 0x7F) | 0x80)
        value >>= 7
    w.append(value)


def uvarint_bytes(value):
    out = bytearray()
    write_uvarint(out, value)
    return bytes(out)


# ---- lengths -------------------------------------------------------------------------------------------------

def _check_fits(b, p, n):
    if n > len(b) - p:
        raise _Short(f"declared length {n} exceeds the {len(b) - p} bytes left")


def read_array_len(b, p):
    n = _unpack_i32(b, p)[0]
    p += 4
    if n < 0:
        raise _Short(f"array length {n} in a non-nullable array")
    _check_fits(b, p, n)
    return n, p


def read_nullable_array_len(b, p):
    n = _unpack_i32(b, p)[0]
    p += 4
    if n < -1:
        raise _Short(f"bad array length {n}")
    _check_fits(b, p, n)
    return n, p


def read_compact_array_len(b, p):
    n, p = read_uvarint(b, p)
    if n == 0:
        raise _Short("null in a non-nullable compact array")
    _check_fits(b, p, n - 1)
    return n - 1, p


def read_compact_nullable_array_len(b, p):
    n, p = read_uvarint(b, p)
    _check_fits(b, p, n - 1)
    return n - 1, p


# ---- strings -------------------------------------------------------------------------------------------------

def read_string(b, p):
    n = _unpack_i16(b, p)[0]
    p += 2
    if n < 0:
        raise _Short(f"string length {n} in a non-nullable string")
    _check_fits(b, p, n)
    return str(b[p:p + n], "utf-8"), p + n


def read_nullable_string(b, p):
    n = _unpack_i16(b, p)[0]
    p += 2
    if n < 0:
        if n == -1:
            return None, p
        raise _Short(f"bad string length {n}")
    _check_fits(b, p, n)
    return str(b[p:p + n], "utf-8"), p + n


def read_compact_string(b, p):
    n, p = read_uvarint(b, p)
    if n == 0:
        raise _Short("null in a non-nullable compact string")
    n -= 1
    _check_fits(b, p, n)
    return str(b[p:p + n], "utf-8"), p + n


def read_compact_nullable_string(b, p):
    n, p = read_uvarint(b, p)
    if n == 0:
        return None, p
    n -= 1
    _check_fits(b, p, n)
    return str(b[p:p + n], "utf-8"), p + n


def write_string(w, s):
    data = s.encode("utf-8")
    if len(data) > 0x7FFF:
        raise EncodeError(f"string of {len(data)} bytes is too long")
    w += pack_i16(len(data))
    w += data


def write_nullable_string(w, s):
    if s is None:
        w += b"\xff\xff"
    else:
        write_string(w, s)


def write_compact_string(w, s):
    data = s.encode("utf-8")
    write_uvarint(w, len(data) + 1)
    w += data


def write_compact_nullable_string(w, s):
    if s is None:
        w.append(0)
    else:
        write_compact_string(w, s)


# ---- bytes and records ---------------------------------------------------------------------------------------
# bytes values decode to `bytes`; records values decode to a memoryview over the frame (no copy).

def read_bytes(b, p):
    n = _unpack_i32(b, p)[0]
    p += 4
    if n < 0:
        raise _Short(f"bytes length {n} in a non-nullable field")
    _check_fits(b, p, n)
    return bytes(b[p:p + n]), p + n


def read_nullable_bytes(b, p):
    n = _unpack_i32(b, p)[0]
    p += 4
    if n < 0:
        if n == -1:
            return None, p
        raise _Short(f"bad bytes length {n}")
    _check_fits(b, p, n)
    return bytes(b[p:p + n]), p + n


def read_compact_bytes(b, p):
    n, p = read_uvarint(b, p)
    if n == 0:
        raise _Short("null in non-nullable compact bytes")
    n -= 1
    _check_fits(b, p, n)
    return bytes(b[p:p + n]), p + n


def read_compact_nullable_bytes(b, p):
    n, p = read_uvarint(b, p)
    if n == 0:
        return None, p
    n -= 1
    _check_fits(b, p, n)
    return bytes(b[p:p + n]), p + n


def read_records(b, p):
    n = _unpack_i32(b, p)[0]
    p += 4
    if n < 0:
        raise _Short(f"records length {n} in a non-nullable field")
    _check_fits(b, p, n)
    return b[p:p + n], p + n


def read_nullable_records(b, p):
    n = _unpack_i32(b, p)[0]
    p += 4
    if n < 0:
        if n == -1:
            return None, p
        raise _Short(f"bad records length {n}")
    _check_fits(b, p, n)
    return b[p:p + n], p + n


def read_compact_records(b, p):
    n, p = read_uvarint(b, p)
    if n == 0:
        raise _Short("null in non-nullable compact records")
    n -= 1
    _check_fits(b, p, n)
    return b[p:p + n], p + n


def read_compact_nullable_records(b, p):
    n, p = read_uvarint(b, p)
    if n == 0:
        return None, p
    n -= 1
    _check_fits(b, p, n)
    return b[p:p + n], p + n


def write_bytes(w, v):
    w += pack_i32(len(v))
    w += v


def write_nullable_bytes(w, v):
    if v is None:
        w += b"\xff\xff\xff\xff"
    else:
        w += pack_i32(len(v))
        w += v


def write_compact_bytes(w, v):
    write_uvarint(w, len(v) + 1)
    w += v


def write_compact_nullable_bytes(w, v):
    if v is None:
        w.append(0)
    else:
        write_uvarint(w, len(v) + 1)
        w += v


def write_records(w, v):
    if v.__class__ is FileRegion:
        w += pack_i32(v.length)
        w.regions.append((len(w), v))
    else:
        w += pack_i32(len(v))
        w += v


def write_nullable_records(w, v):
    if v is None:
        w += b"\xff\xff\xff\xff"
    else:
        write_records(w, v)


def write_compact_records(w, v):
    if v.__class__ is FileRegion:
        write_uvarint(w, v.length + 1)
        w.regions.append((len(w), v))
    else:
        write_uvarint(w, len(v) + 1)
        w += v


def write_compact_nullable_records(w, v):
    if v is None:
        w.append(0)
    else:
        write_compact_records(w, v)


# ---- uuids and arrays of primitives -----------------------------------------------------------------------------

def read_uuid(b, p):
    _check_fits(b, p, 16)
    return uuid.UUID(bytes=bytes(b[p:p + 16])), p + 16


def write_uuid(w, u):
    w += u.bytes


def read_fixed_array(b, p, n, code, size):
    """`n` fixed-size values of struct code `code` (e.g. 'i' for int32)."""
    _check_fits(b, p, n * size)
    return list(struct.unpack_from(">%d%s" % (n, code), b, p)), p + n * size


def write_fixed_array(w, values, code):
    w += struct.pack(">%d%s" % (len(values), code), *values)


def read_tagged_value(b, p, end, reader):
    """Reads one known tagged field, which must fill its declared size exactly."""
    value, q = reader(b[:end], p)
    if q != end:
        raise _Short(f"tagged field declared {end - p} bytes but used {q - p}")
    return value


def write_tagged_fields(w, tags):
    """`tags`: (tag, encoded bytes) pairs, written in ascending tag order."""
    if not tags:
        w.append(0)
        return
    tags.sort(key=lambda t: t[0])
    write_uvarint(w, len(tags))
    for tag, data in tags:
        write_uvarint(w, tag)
        write_uvarint(w, len(data))
        w += data


def encode_tagged_value(writer, value):
    out = Out()
    writer(out, value)
    if out.regions:
        raise EncodeError("file regions cannot be written inside tagged fields")
    return bytes(out)
