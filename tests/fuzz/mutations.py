"""Mutations of recorded client frames (tests/data/client_frames), for the protocol fuzzer.

A case is the bytes one connection sends: usually one mutated request with an honest 4-byte size prefix, sometimes a
size prefix that lies about the body (longer, shorter, negative, huge), sometimes a well-formed request with a
boundary value in one of its integer fields (decoded, changed, encoded again: any value the schema admits must get a
Kafka answer). Mutations are chosen by a `random.Random`,
so a seed replays the same cases. Frames are stored without their size prefix; `frame_bytes` adds it.
"""
from __future__ import annotations

import random
import struct
from dataclasses import dataclass
from pathlib import Path

from compatbroker.protocol import DecodeError, EncodeError, decode_request, encode_request
from compatbroker.protocol.data import Data

FRAMES = Path(__file__).resolve().parents[1] / "data" / "client_frames"
HEADER_BYTES = 8  # api_key int16, api_version int16, correlation_id int32: what every request header starts with

# Values at the edges of Kafka's integer types, written over whatever field sits at the chosen offset.
BOUNDARIES = {
    ">b": (0, -1, 0x7F, -0x80),
    ">h": (0, -1, 1, 0x7FFF, -0x8000),
    ">i": (0, -1, 1, 0x7FFFFFFF, -0x80000000, 0x7FFFFFFE),
    ">q": (0, -1, 0x7FFFFFFFFFFFFFFF, -0x8000000000000000, 0x7FFFFFFFFFFFFFFE),
}
INTERESTING_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF)
HUGE_SIZES = (0x7FFFFFFF, 104857600, 104857601, -1, -0x80000000)


@dataclass(frozen=True)
class Case:
    """What one connection sends; `what` names the mutations, for failure messages and the findings file."""
    source: str
    what: str
    data: bytes

    def describe(self) -> str:
        return f"{self.source} [{self.what}] {len(self.data)} bytes: {self.data[:400].hex()}"


def load_frames() -> list[tuple[str, bytes]]:
    """Every recorded frame as (client/file name, frame without its size prefix), in a stable order."""
    return [(f"{path.parent.name}/{path.name}", path.read_bytes()) for path in sorted(FRAMES.glob("*/*.bin"))]


def frame_bytes(frame: bytes) -> bytes:
    return struct.pack(">i", len(frame)) + frame


def mutate(rng: random.Random, frame: bytes) -> tuple[str, bytes]:
    """One to three mutations of a frame's body; the header's first bytes are fair game too."""
    names = []
    data = bytearray(frame)
    for _ in range(rng.randint(1, 3)):
        if not data:  # truncated to nothing: an empty frame is a case of its own
            break
        name, data = rng.choice(_BODY_MUTATIONS)(rng, data)
        names.append(name)
    return "+".join(names), bytes(data)


def make_case(rng: random.Random, corpus: list[tuple[str, bytes]]) -> Case:
    source, frame = rng.choice(corpus)
    if rng.random() < 0.35:
        what, body = boundary_field(rng, frame)
        return Case(source, what, frame_bytes(body))
    if rng.random() < 0.15:
        what, data = rng.choice(_SIZE_LIES)(rng, frame)
        return Case(source, what, data)
    what, body = mutate(rng, frame)
    return Case(source, what, frame_bytes(body))


# --- body mutations: each returns (name, new bytearray) ---------------------------------------------------------

def _flip_bits(rng, data):
    for _ in range(rng.randint(1, 8)):
        position = rng.randrange(len(data) * 8)
        data[position // 8] ^= 1 << (position % 8)
    return "bitflip", data


def _replace_bytes(rng, data):
    for _ in range(rng.randint(1, 4)):
        data[rng.randrange(len(data))] = rng.choice(INTERESTING_BYTES) if rng.random() < 0.5 else rng.randrange(256)
    return "bytes", data


def _truncate(rng, data):
    return "truncate", data[:rng.randrange(len(data))]


def _extend(rng, data):
    return "extend", data + bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))


def _boundary_int(rng, data):
    """A boundary value of an int8/16/32/64 written at a random offset (sometimes over the api version)."""
    fmt = rng.choice(tuple(BOUNDARIES))
    width = struct.calcsize(fmt)
    if len(data) < width:
        return "boundary(short)", data
    offset = 2 if fmt == ">h" and rng.random() < 0.1 else rng.randrange(len(data) - width + 1)
    data[offset:offset + width] = struct.pack(fmt, rng.choice(BOUNDARIES[fmt]))
    return f"boundary{fmt[1]}@{offset}", data


_BODY_MUTATIONS = (_flip_bits, _replace_bytes, _truncate, _extend, _boundary_int, _boundary_int)


# --- size-prefix lies: each returns (name, bytes to send) -------------------------------------------------------

def _declares_more(rng, frame):
    return "size>body", struct.pack(">i", len(frame) + rng.randint(1, 4096)) + frame


def _declares_less(rng, frame):
    return "size<body", struct.pack(">i", rng.randrange(len(frame))) + frame


def _declares_huge(rng, frame):
    return "size-huge", struct.pack(">i", rng.choice(HUGE_SIZES)) + frame[:rng.randrange(len(frame) + 1)]


def _two_frames_one_write(rng, frame):
    _name, body = mutate(rng, frame)
    return "frame+mutated", frame_bytes(frame) + frame_bytes(body)


_SIZE_LIES = (_declares_more, _declares_less, _declares_huge, _two_frames_one_write)


# --- well-formed requests with a boundary value in one integer field ----------------------------------------------

def boundary_field(rng: random.Random, frame: bytes) -> tuple[str, bytes]:
    """The frame decoded, one or two integer fields (at any depth) set to boundary values their types admit (two, so
    that e.g. a generation of -1 lets a retention of int64 max reach the code that uses it), re-encoded."""
    try:
        header, body = decode_request(frame)
    except DecodeError:
        return "field(undecodable)", frame
    fields = list(_int_fields(body, "body"))
    if not fields:
        return "field(none)", frame
    changed = [_set_boundary(rng, header, body, *rng.choice(fields)) for _ in range(rng.randint(1, 2))]
    try:
        return "field " + ",".join(changed), encode_request(header, body)
    except (EncodeError, OverflowError, ValueError):
        return "field(unencodable)", frame


def _set_boundary(rng: random.Random, header, body, path: str, owner: Data, name: str) -> str:
    """Sets the widest boundary value the field's type can encode (tried int64 first, down to int8)."""
    for fmt in (">q", ">i", ">h", ">b"):
        value = rng.choice(BOUNDARIES[fmt])
        previous = getattr(owner, name)
        setattr(owner, name, value)
        try:
            encode_request(header, body)
            return f"{path}={value}"
        except (EncodeError, OverflowError, ValueError):
            setattr(owner, name, previous)
    return f"{path}(unchanged)"


def _int_fields(data: Data, path: str):
    """(path, object, field name) of every integer field under `data`, lists included."""
    for name in data.__slots__:
        value = getattr(data, name)
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            yield f"{path}.{name}", data, name
        elif isinstance(value, Data):
            yield from _int_fields(value, f"{path}.{name}")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, Data):
                    yield from _int_fields(item, f"{path}.{name}[{index}]")
