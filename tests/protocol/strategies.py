"""Hypothesis strategies that build valid message objects for any (message class, version), from the schemas.

Fields the version has get random values of their type (nulls where the version allows them, random tagged fields
and unknown tags in flexible versions); fields it lacks keep their defaults, so every value can be encoded.
"""
from __future__ import annotations

from functools import lru_cache

from hypothesis import strategies as st

from compatbroker.protocol.messages import MESSAGES
from compatbroker.protocol.schema import load_schemas, snake_case

INT_RANGES = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
MAX_LIST = 3


@lru_cache(maxsize=1)
def specs():
    return load_schemas()


def _int(t):
    if t == "uint16":
        return st.integers(0, 2**16 - 1)
    if t == "uint32":
        return st.integers(0, 2**32 - 1)
    bits = INT_RANGES[t]
    return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def _primitive(t, compact):
    if t in INT_RANGES or t in ("uint16", "uint32"):
        return _int(t)
    if t == "bool":
        return st.booleans()
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "string":
        return st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
    if t in ("bytes", "records"):
        return st.binary(max_size=24)
    if t == "uuid":
        return st.uuids()
    raise ValueError(t)


def message_strategy(name: str, version: int):
    spec = specs()[name]
    top = MESSAGES[name]
    return _struct(spec, spec.struct, top, version)


def _struct(spec, struct, cls, version):
    flexible = version in spec.flexible
    parts = {}
    max_tag = -1
    for f in struct.fields:
        if f.tag is not None:
            max_tag = max(max_tag, f.tag)
        if version not in f.versions:
            continue
        parts[snake_case(f.name)] = _field(spec, f, cls, version, flexible)
    if flexible:
        parts["unknown_tagged_fields"] = st.none() | st.dictionaries(
            st.integers(max_tag + 1, max_tag + 40), st.binary(max_size=6), min_size=1, max_size=2)
    return st.fixed_dictionaries(parts).map(lambda kw: cls(**kw))


def _field(spec, f, parent_cls, version, flexible):
    nullable = version in f.nullable
    compact = flexible and (f.flexible_override is None or version in f.flexible_override)
    top = MESSAGES[spec.name]
    if f.struct is not None:
        inner = st.deferred(lambda: _struct(spec, f.struct, getattr(top, f.struct.name), version))
    else:
        inner = _primitive(f.element_type, compact)
    if f.type == "string" and not compact:
        inner = inner.filter(lambda s: len(s.encode("utf-8")) <= 0x7FFF)
    value = st.lists(inner, max_size=MAX_LIST) if f.is_array else inner
    return (st.none() | value) if nullable else value


def versions_of(cls):
    return sorted(cls.DECODERS)


def all_message_versions():
    return [(name, v) for name, cls in sorted(MESSAGES.items()) for v in versions_of(cls)]
