"""Zigzag varints: known encodings, round trips, kafka-python as oracle, and bounded decoding."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.util import decode_varint as kp_decode_varint
from kafka.record.util import encode_varint as kp_encode_varint

from compatbroker.protocol.records import (CorruptRecordError, read_varint, read_varlong, varint_size, write_varint,
                                           write_varlong)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


@pytest.mark.parametrize("value, encoded", [
    (0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (63, b"\x7e"), (-64, b"\x7f"), (64, b"\x80\x01"),
    (2**31 - 1, b"\xfe\xff\xff\xff\x0f"), (-(2**31), b"\xff\xff\xff\xff\x0f"),
])
def test_known_encodings(value, encoded):
    out = bytearray()
    write_varint(out, value)
    assert bytes(out) == encoded
    assert read_varint(encoded, 0) == (value, len(encoded))
    assert varint_size(value) == len(encoded)


@settings(max_examples=200, deadline=None)
@given(INT64, st.binary(max_size=3))
def test_varlong_round_trip_at_an_offset(value, prefix):
    out = bytearray(prefix)
    write_varlong(out, value)
    assert read_varlong(memoryview(out), len(prefix)) == (value, len(out))
    assert varint_size(value) == len(out) - len(prefix)


@settings(max_examples=200, deadline=None)
@given(INT32)
def test_varint_matches_kafka_python(value):
    ours = bytearray()
    write_varint(ours, value)
    theirs = bytearray()
    kp_encode_varint(value, theirs.append)
    assert ours == theirs
    assert kp_decode_varint(bytes(ours), 0) == (value, len(ours))


def test_out_of_range_values_are_refused():
    with pytest.raises(ValueError):
        write_varint(bytearray(), 2**31)
    with pytest.raises(ValueError):
        write_varlong(bytearray(), -(2**63) - 1)


def test_overlong_varints_are_corrupt():
    with pytest.raises(CorruptRecordError):
        read_varint(b"\x80\x80\x80\x80\x80\x00", 0)  # 6 bytes for an int32
    with pytest.raises(CorruptRecordError):
        read_varlong(b"\x80" * 10 + b"\x00", 0)  # 11 bytes for an int64
    assert read_varlong(b"\x80" * 9 + b"\x00", 0) == (0, 10)


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xff\xff", b"\x02\x80"])
def test_truncated_varints_are_corrupt(data):
    with pytest.raises(CorruptRecordError):
        read_varint(data, 1 if data == b"\x02\x80" else 0)
    with pytest.raises(CorruptRecordError):
        read_varlong(memoryview(data), 1 if data == b"\x02\x80" else 0)
