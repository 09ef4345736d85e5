"""A slow, simple codec that interprets the schema files at run time.

It is the reference the generated straight-line codecs are tested against (same objects, same bytes), and the
diagnosis path: when a generated decoder or encoder fails, the public API re-runs the same input through this codec,
whose errors name the exact field (`topic_data[0].partition_data[2].records`).
"""
from __future__ import annotations

import struct
from functools import lru_cache

from . import wire
from .exceptions import DecodeError, EncodeError
from .schema import FIXED_SIZE, FieldSpec, MessageSpec, StructSpec, load_schemas, snake_case

_FIXED = {"bool": "?", "int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H", "uint32": "I",
          "float64": "d"}


@lru_cache(maxsize=1)
def _specs() -> dict[str, MessageSpec]:
    return load_schemas()


def _classes(spec: MessageSpec):
    from .messages import MESSAGES
    top = MESSAGES[spec.name]
    return top, {name: getattr(top, name) for name in spec.structs}


class _Path(list):
    def text(self):
        out = ""
        for part in self:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
        return out or "(top level)"


def decode(name: str, version: int, buf, pos: int = 0):
    """Decodes message `name` at `version` from `buf` at `pos`; returns (object, new position)."""
    spec = _specs()[name]
    top, nested = _classes(spec)
    path = _Path()
    try:
        return _decode_struct(spec, spec.struct, top, nested, version, memoryview(buf), pos, path)
    except DecodeError:
        raise
    except Exception as exc:  # any failure of the primitives is malformed input at `path`
        raise DecodeError(f"{name} v{version}: field {path.text()}: {_describe(exc)}") from None


def encode(name: str, version: int, obj) -> wire.Out:
    spec = _specs()[name]
    top, nested = _classes(spec)
    out = wire.Out()
    path = _Path()
    try:
        _encode_struct(spec, spec.struct, nested, version, obj, out, path)
    except EncodeError as exc:
        raise EncodeError(f"{name} v{version}: field {path.text()}: {exc}") from None
    except Exception as exc:
        raise EncodeError(f"{name} v{version}: field {path.text()}: {_describe(exc)}") from None
    return out


def _describe(exc: Exception) -> str:
    if isinstance(exc, (IndexError, struct.error)):
        return f"truncated input ({exc})"
    return str(exc) or type(exc).__name__


def _flexible(spec: MessageSpec, version: int) -> bool:
    return version in spec.flexible


def _compact(spec: MessageSpec, f: FieldSpec, version: int) -> bool:
    if not _flexible(spec, version):
        return False
    return f.flexible_override is None or version in f.flexible_override


def _default(f: FieldSpec, nested):
    if f.default == "null":
        return None
    if f.is_array:
        return []
    if f.struct is not None:
        return nested[f.struct.name]()
    t = f.type
    if t in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        return int(f.default, 0) if f.default else 0
    if t == "bool":
        return f.default == "true"
    if t == "float64":
        return float(f.default) if f.default else 0.0
    if t == "string":
        return f.default if f.default is not None else ""
    if t in ("bytes", "records"):
        return b""
    if t == "uuid":
        return wire.ZERO_UUID
    raise ValueError(t)


# ---- decode ----------------------------------------------------------------------------------------------------

def _decode_struct(spec, st: StructSpec, cls, nested, version, b, p, path):
    obj = cls()
    obj.unknown_tagged_fields = None
    tagged = {}
    for f in st.fields:
        attr = snake_case(f.name)
        if version not in f.versions:
            continue
        if version in f.tagged:
            tagged[f.tag] = f
            continue
        path.append(attr)
        value, p = _decode_field(spec, f, nested, version, b, p, path)
        setattr(obj, attr, value)
        path.pop()
    if _flexible(spec, version):
        path.append("<tagged fields>")
        count, p = wire.read_uvarint(b, p)
        path.pop()
        for _ in range(count):
            tag, p = wire.read_uvarint(b, p)
            size, p = wire.read_uvarint(b, p)
            end = p + size
            if end > len(b):
                raise DecodeError(f"{spec.name} v{version}: field {path.text()}: tagged field {tag} overruns the "
                                  f"buffer")
            f = tagged.get(tag)
            if f is None:
                if obj.unknown_tagged_fields is None:
                    obj.unknown_tagged_fields = {}
                obj.unknown_tagged_fields[tag] = bytes(b[p:end])
            else:
                attr = snake_case(f.name)
                path.append(attr)
                value, q = _decode_field(spec, f, nested, version, b[:end], p, path)
                if q != end:
                    raise DecodeError(f"{spec.name} v{version}: field {path.text()}: tagged field declared "
                                      f"{size} bytes but used {q - p}")
                setattr(obj, attr, value)
                path.pop()
            p = end
    return obj, p


def _decode_field(spec, f: FieldSpec, nested, version, b, p, path):
    nullable = version in f.nullable
    compact = _compact(spec, f, version)
    if f.is_array:
        if compact:
            n, p = (wire.read_compact_nullable_array_len if nullable else wire.read_compact_array_len)(b, p)
        else:
            n, p = (wire.read_nullable_array_len if nullable else wire.read_array_len)(b, p)
        if n < 0:
            return None, p
        items = []
        for i in range(n):
            path.append(i)
            item, p = _decode_element(spec, f, nested, version, b, p, path, compact)
            items.append(item)
            path.pop()
        return items, p
    if f.struct is not None:
        if nullable:
            marker = wire.unpack_i8(b, p)[0]
            p += 1
            if marker < 0:
                return None, p
        return _decode_struct(spec, f.struct, nested[f.struct.name], nested, version, b, p, path)
    return _decode_primitive(f.type, b, p, nullable, compact)


def _decode_element(spec, f, nested, version, b, p, path, compact):
    if f.struct is not None:
        return _decode_struct(spec, f.struct, nested[f.struct.name], nested, version, b, p, path)
    return _decode_primitive(f.element_type, b, p, False, compact)


def _decode_primitive(t, b, p, nullable, compact):
    if t in _FIXED:
        return struct.unpack_from(">" + _FIXED[t], b, p)[0], p + FIXED_SIZE[t]
    if t == "uuid":
        return wire.read_uuid(b, p)
    name = "read_" + ("compact_" if compact else "") + ("nullable_" if nullable else "") + t
    return getattr(wire, name)(b, p)


# ---- encode ----------------------------------------------------------------------------------------------------

def _encode_struct(spec, st: StructSpec, nested, version, obj, w, path):
    tagged = []
    for f in st.fields:
        attr = snake_case(f.name)
        value = getattr(obj, attr)
        path.append(attr)
        if version not in f.versions:
            if not f.ignorable and value != _default(f, nested):
                raise EncodeError(f"version {version} does not have this field, so it must keep its default")
        elif version in f.tagged:
            if value != _default(f, nested):
                sub = wire.Out()
                _encode_field(spec, f, nested, version, value, sub, path)
                tagged.append((f.tag, bytes(sub)))
        else:
            _encode_field(spec, f, nested, version, value, w, path)
        path.pop()
    if _flexible(spec, version):
        if obj.unknown_tagged_fields:
            tagged.extend(obj.unknown_tagged_fields.items())
        wire.write_tagged_fields(w, tagged)


def _encode_field(spec, f: FieldSpec, nested, version, value, w, path):
    nullable = version in f.nullable
    compact = _compact(spec, f, version)
    if value is None and not nullable:
        raise EncodeError("null is not allowed here at this version")
    if f.is_array:
        if value is None:
            w += b"\x00" if compact else b"\xff\xff\xff\xff"
            return
        if compact:
            wire.write_uvarint(w, len(value) + 1)
        else:
            w += wire.pack_i32(len(value))
        for i, item in enumerate(value):
            path.append(i)
            if f.struct is not None:
                _encode_struct(spec, f.struct, nested, version, item, w, path)
            else:
                _encode_primitive(f.element_type, item, w, False, compact)
            path.pop()
        return
    if f.struct is not None:
        if nullable:
            if value is None:
                w += b"\xff"
                return
            w += b"\x01"
        _encode_struct(spec, f.struct, nested, version, value, w, path)
        return
    _encode_primitive(f.type, value, w, nullable, compact)


def _encode_primitive(t, value, w, nullable, compact):
    if t in _FIXED:
        w += struct.pack(">" + _FIXED[t], value)
    elif t == "uuid":
        w += value.bytes
    else:
        name = "write_" + ("compact_" if compact else "") + ("nullable_" if nullable else "") + t
        getattr(wire, name)(w, value)
