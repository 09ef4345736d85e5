"""Malformed input is refused with DecodeError, and nothing else, at every message and version.

A broker reads bytes from anyone: whatever arrives, decoding must either produce a message or raise
`compatbroker.protocol.DecodeError`; any other exception escaping the decoder is a bug, and so is a decode whose
memory or time grows with a length field the sender forged rather than with the bytes it sent. This file proves:
- every truncation of valid encodings (default objects and hypothesis-generated ones; request and response frames
  with their headers as well as bare bodies) decodes or raises DecodeError, at every byte position for encodings up
  to a few hundred bytes and at a sample of positions beyond;
- hundreds of random byte changes, insertions, deletions and forged lengths per message and version do the same;
  when such input does decode, the result encodes again, and that encoding is stable, and the reference codec
  reaches the same verdict on the body;
- huge array counts, string lengths, bytes/records lengths and tagged-field sizes in tiny frames raise DecodeError
  at once, with peak memory (tracemalloc) in kilobytes;
- an unknown API key or version raises UnsupportedVersionError carrying the api key, version and correlation id;
- trailing bytes after a complete message are a DecodeError, except after a request frame, where the broker ignores
  them as Apache Kafka does (librdkafka's all-topics Metadata v9+ request carries 3 stray bytes).
"""
from __future__ import annotations

import random
import struct
import time
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compatbroker.protocol import (API_KEYS, MESSAGES, DecodeError, EncodeError, RequestHeader,
                                   UnsupportedVersionError, decode_message, decode_request, decode_response,
                                   encode_message, encode_request, encode_response, reference)
from compatbroker.protocol.wire import uvarint_bytes

from .strategies import all_message_versions, message_strategy

PAIRS = all_message_versions()
MAX_ALL_POSITIONS = 256  # longer encodings are truncated at their first and last 64 bytes and 128 spread between
MUTATIONS_PER_ENCODING = 30
GENERATED = settings(max_examples=3, deadline=None, database=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
CORRELATION_ID = 0x0BADCAFE


def request_header(cls, version):
    return RequestHeader(request_api_key=cls.API_KEY, request_api_version=version, correlation_id=CORRELATION_ID,
                         client_id="malformed")


class Target:
    """One valid encoding and the decoder that must accept it, plus how to re-encode what that decoder returns."""

    def __init__(self, label, data, decode, encode):
        self.label, self.data, self.decode, self.encode = label, data, decode, encode


def targets(name, version, obj):
    cls = MESSAGES[name]
    found = [Target("body", encode_message(cls, version, obj), lambda d: decode_message(cls, version, d),
                    lambda decoded: encode_message(cls, version, decoded))]
    if cls.TYPE == "request":
        frame = encode_request(request_header(cls, version), obj)
        found.append(Target("request frame", frame, decode_request, lambda pair: encode_request(*pair)))
    elif cls.TYPE == "response":
        frame = encode_response(cls.API_KEY, version, CORRELATION_ID, obj)
        found.append(Target("response frame", frame, lambda d: decode_response(cls.API_KEY, version, d),
                            lambda pair: encode_response(cls.API_KEY, version, *pair)))
    return found


def decodes_or_refuses(target: Target, data: bytes):
    """The property: DecodeError, or a decoded value that encodes again, stably. Other exceptions propagate."""
    try:
        decoded = target.decode(data)
    except DecodeError:
        return False
    try:
        again = target.encode(decoded)
    except EncodeError as exc:
        raise AssertionError(f"{target.label} {data.hex()} decoded to a value that cannot be encoded: {exc}") from exc
    assert target.encode(target.decode(again)) == again, f"{target.label} {data.hex()}: re-encoding is not stable"
    return True


def positions(length: int) -> list[int]:
    if length <= MAX_ALL_POSITIONS:
        return list(range(length))
    step = (length - 128) / 128
    middle = {64 + int(i * step) for i in range(128)}
    return sorted(set(range(64)) | middle | set(range(length - 64, length)))


def check_truncations(name, version, obj):
    for target in targets(name, version, obj):
        for end in positions(len(target.data)):
            decodes_or_refuses(target, target.data[:end])


@pytest.mark.parametrize(("name", "version"), PAIRS)
def test_truncated_default_objects(name, version):
    check_truncations(name, version, MESSAGES[name]())


@pytest.mark.parametrize(("name", "version"), PAIRS)
@GENERATED
@given(data=st.data())
def test_truncated_generated_objects(name, version, data):
    check_truncations(name, version, data.draw(message_strategy(name, version)))


# ---- random damage ---------------------------------------------------------------------------------------------

FORGED = [b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\x80\x00\x00\x00", b"\x7f\xff", b"\xff\xff\xff\xff\x07",
          b"\xfe", b"\x00"]


def mutate(data: bytes, rnd) -> bytes:
    out = bytearray(data)
    for _ in range(rnd.randint(1, 3)):
        pos = rnd.randint(0, len(out))
        kind = rnd.randrange(4)
        if kind == 0 and pos < len(out):
            out[pos] = rnd.randrange(256)
        elif kind == 1:
            out[pos:pos] = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 4)))
        elif kind == 2:
            del out[pos:pos + rnd.randint(1, 4)]
        else:
            forged = rnd.choice(FORGED)  # a length or count field overwritten with an extreme value
            out[pos:pos + len(forged)] = forged
    return bytes(out)


def reference_verdict(name, version, data):
    """The reference codec's reading of a body: the decoded object, or None when it refuses the bytes."""
    try:
        obj, end = reference.decode(name, version, memoryview(data))
    except DecodeError:
        return None
    return obj if end == len(data) else None


def check_mutations(name, version, obj, rnd):
    for target in targets(name, version, obj):
        for _ in range(MUTATIONS_PER_ENCODING):
            damaged = mutate(target.data, rnd)
            accepted = decodes_or_refuses(target, damaged)
            if target.label == "body":
                verdict = reference_verdict(name, version, damaged)
                assert (verdict is not None) == accepted, f"codecs disagree on {damaged.hex()}"
                if accepted:
                    assert verdict == target.decode(damaged)


@pytest.mark.parametrize(("name", "version"), PAIRS)
@GENERATED
@given(data=st.data(), rnd=st.randoms(use_true_random=False))
def test_random_damage(name, version, data, rnd):
    check_mutations(name, version, MESSAGES[name](), rnd)
    check_mutations(name, version, data.draw(message_strategy(name, version)), rnd)


def test_mutations_cover_every_kind_of_damage():
    rnd = random.Random(7)
    original = bytes(range(1, 41))
    damaged = [mutate(original, rnd) for _ in range(200)]
    assert any(len(d) > len(original) for d in damaged) and any(len(d) < len(original) for d in damaged)
    assert any(b"\x7f\xff\xff\xff" in d for d in damaged)
    assert any(len(d) == len(original) and d != original for d in damaged)
    assert sum(d != original for d in damaged) > 180


# ---- forged lengths in tiny frames -----------------------------------------------------------------------------

HUGE = 2**31 - 1


def _i16(n):
    return struct.pack(">h", n)


def _i32(n):
    return struct.pack(">i", n)


def _compact_string(s: str) -> bytes:
    return uvarint_bytes(len(s) + 1) + s.encode()


# (case, message, version, body): each body is a few bytes whose first length field claims ~2 GiB.
FORGED_BODIES = [
    ("array count", "MetadataRequest", 4, _i32(HUGE) + b"\x01"),
    ("compact array count", "MetadataRequest", 9, uvarint_bytes(HUGE + 1) + b"\x01\x00\x00\x00"),
    ("nullable array count", "MetadataRequest", 1, _i32(HUGE)),
    ("array of int32 count", "DescribeLogDirsRequest", 1, _i32(1) + _i16(1) + b"t" + _i32(HUGE)),
    ("compact array of int32 count", "DescribeLogDirsRequest", 2,
     uvarint_bytes(2) + _compact_string("t") + uvarint_bytes(HUGE + 1) + b"\x00\x00"),
    ("string length", "FindCoordinatorRequest", 0, _i16(0x7FFF) + b"ab"),
    ("compact string length", "FindCoordinatorRequest", 3, uvarint_bytes(HUGE + 1) + b"ab\x00\x00"),
    ("bytes length", "SaslAuthenticateRequest", 0, _i32(HUGE) + b"x"),
    ("compact bytes length", "SaslAuthenticateRequest", 2, uvarint_bytes(HUGE + 1) + b"x\x00"),
    ("records length", "ProduceRequest", 3,
     _i16(-1) + _i16(1) + _i32(1000) + _i32(1) + _i16(1) + b"t" + _i32(1) + _i32(0) + _i32(HUGE) + b"xyz"),
    ("compact records length", "ProduceRequest", 9,
     uvarint_bytes(0) + _i16(1) + _i32(1000) + uvarint_bytes(2) + _compact_string("t") + uvarint_bytes(2)
     + _i32(0) + uvarint_bytes(HUGE + 1) + b"xyz\x00\x00\x00"),
    ("tagged field size", "ApiVersionsRequest", 3,
     _compact_string("a") + _compact_string("b") + b"\x01\x00" + uvarint_bytes(HUGE) + b"zz"),
    ("tagged field count", "ApiVersionsRequest", 3,
     _compact_string("a") + _compact_string("b") + uvarint_bytes(HUGE) + b"\x05\x01z"),
]


def _measure(call):
    """Runs `call`, which must raise DecodeError; returns (seconds, peak bytes allocated meanwhile)."""
    tracemalloc.start()
    try:
        started = time.perf_counter()
        with pytest.raises(DecodeError):
            call()
        return time.perf_counter() - started, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(("case", "name", "version", "body"), FORGED_BODIES, ids=[c[0] for c in FORGED_BODIES])
def test_forged_lengths_fail_fast_without_allocating(case, name, version, body):
    cls = MESSAGES[name]
    frame = encode_request(request_header(cls, version), cls())[:-len(encode_message(cls, version, cls()))] + body
    for call in (lambda: decode_message(cls, version, body), lambda: decode_request(frame)):
        with pytest.raises(DecodeError):
            call()  # warm-up: the reference codec loads its schemas on first use, which is not the decode's cost
        seconds, peak = _measure(call)
        assert seconds < 0.5, f"{case}: {seconds:.3f}s"
        assert peak < 256 * 1024, f"{case}: peak {peak} bytes for a {len(body)}-byte body"


def test_forged_bodies_are_valid_once_the_length_is_honest():
    """The cases above fail because of the forged length alone: with an honest length they decode."""
    honest = {
        "array count": _i32(0) + b"\x01",
        "string length": _i16(2) + b"ab",
        "bytes length": _i32(1) + b"x",
        "compact bytes length": uvarint_bytes(2) + b"x\x00",
        "tagged field size": _compact_string("a") + _compact_string("b") + b"\x01\x00\x02zz",
        "records length": _i16(-1) + _i16(1) + _i32(1000) + _i32(1) + _i16(1) + b"t" + _i32(1) + _i32(0) + _i32(3)
        + b"xyz",
        "compact records length": uvarint_bytes(0) + _i16(1) + _i32(1000) + uvarint_bytes(2) + _compact_string("t")
        + uvarint_bytes(2) + _i32(0) + uvarint_bytes(4) + b"xyz\x00\x00\x00",
    }
    for case, name, version, _ in FORGED_BODIES:
        if case in honest:
            decode_message(MESSAGES[name], version, honest[case])


# ---- unknown API keys and versions, trailing bytes -------------------------------------------------------------

def _frame(api_key: int, version: int, correlation_id: int) -> bytes:
    return _i16(api_key) + _i16(version) + _i32(correlation_id) + _i16(1) + b"c" + b"\x00" * 8


@pytest.mark.parametrize("api_key", [4, 5, 6, 7, 39, 38, 52, 67, 70, 999, 32767, -1])
def test_unknown_api_key_is_unsupported_with_the_header_read(api_key):
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(_frame(api_key, 3, 0x01020304))
    header = info.value.header
    assert (header.request_api_key, header.request_api_version, header.correlation_id) == (api_key, 3, 0x01020304)
    with pytest.raises(UnsupportedVersionError):
        decode_response(api_key, 0, _i32(0x01020304))


@pytest.mark.parametrize("api_key", sorted(API_KEYS))
def test_unknown_version_is_unsupported_with_the_header_read(api_key):
    request_cls, response_cls = API_KEYS[api_key]
    top = max(request_cls.DECODERS)
    frame = encode_request(request_header(request_cls, top), request_cls())
    for version in (top + 1, top + 100, -1, -32768):
        forged = frame[:2] + _i16(version) + frame[4:]
        with pytest.raises(UnsupportedVersionError) as info:
            decode_request(forged)
        header = info.value.header
        assert (header.request_api_key, header.request_api_version, header.correlation_id) == (
            api_key, version, CORRELATION_ID)
        assert header.client_id == "malformed"
        with pytest.raises(UnsupportedVersionError):
            decode_response(api_key, version, encode_response(api_key, top, CORRELATION_ID, response_cls()))


@pytest.mark.parametrize(("name", "version"), PAIRS)
def test_trailing_bytes_are_a_decode_error(name, version):
    for target in targets(name, version, MESSAGES[name]()):
        for garbage in (b"\x00", b"\xff\xff\xff\xff", b"trailing"):
            if target.label == "request frame":
                assert target.decode(target.data + garbage) == target.decode(target.data), target.label
                continue
            with pytest.raises(DecodeError) as info:
                target.decode(target.data + garbage)
            assert not isinstance(info.value, UnsupportedVersionError), target.label
