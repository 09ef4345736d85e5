"""Consumer and share group records of `__consumer_offsets` (`group_records.py`): Kafka's layout (an int16 record
type, the key; an int16 version, the value), every record type round trip, tombstones, newer value versions and
what is not ours to read."""
from __future__ import annotations

import struct

import pytest

from compatbroker.coordinator import group_records as gr
from compatbroker.coordinator.group_records import TypedRecord, make_key, tombstone, typed_record, value_class
from compatbroker.coordinator.offsets import parse_record
from compatbroker.protocol import DecodeError

# Key fields beyond the group id, per record type.
MEMBER_KEYED = {gr.CONSUMER_GROUP_MEMBER_METADATA, gr.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
                gr.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, gr.SHARE_GROUP_MEMBER_METADATA,
                gr.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, gr.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT}
ALL_TYPES = sorted(gr.CONSUMER_GROUP_RECORD_TYPES | gr.SHARE_GROUP_RECORD_TYPES)


def key_fields(record_type: int) -> dict:
    if record_type in MEMBER_KEYED:
        return {"member_id": "member-1"}
    if record_type == gr.CONSUMER_GROUP_REGULAR_EXPRESSION:
        return {"regular_expression": "orders-.*"}
    return {}


def test_record_types_are_kafkas_numbering():
    assert gr.CONSUMER_GROUP_RECORD_TYPES == {3, 4, 5, 6, 7, 8, 16}
    assert gr.SHARE_GROUP_RECORD_TYPES == {9, 10, 11, 12, 13, 14, 15}
    assert make_key(3, "g").NAME == "ConsumerGroupMetadataKey"
    assert make_key(16, "g", regular_expression="x").NAME == "ConsumerGroupRegularExpressionKey"
    assert make_key(15, "g").NAME == "ShareGroupStatePartitionMetadataKey"


def test_group_metadata_record_layout():
    value = value_class(gr.CONSUMER_GROUP_METADATA)(epoch=7)
    key, data = typed_record(gr.CONSUMER_GROUP_METADATA, make_key(gr.CONSUMER_GROUP_METADATA, "g"), value)
    assert key == b"\x00\x03" + b"\x00\x01g"  # record type 3, then the group id as a non-flexible string
    assert data[:2] == b"\x00\x00" and data[2:6] == struct.pack(">i", 7)  # value version 0, epoch


def test_member_key_layout_names_group_then_member():
    key, value = tombstone(gr.CONSUMER_GROUP_MEMBER_METADATA, "g", member_id="m")
    assert key == b"\x00\x05" + b"\x00\x01g" + b"\x00\x01m" and value is None


@pytest.mark.parametrize("record_type", ALL_TYPES)
def test_every_record_type_round_trips(record_type):
    key_message = make_key(record_type, "group-é", **key_fields(record_type))
    value_message = value_class(record_type)()
    parsed = parse_record(*typed_record(record_type, key_message, value_message))
    assert parsed == TypedRecord(record_type, "group-é", key_message, value_message)


@pytest.mark.parametrize("record_type", ALL_TYPES)
def test_a_tombstone_parses_with_no_value(record_type):
    parsed = parse_record(*tombstone(record_type, "g", **key_fields(record_type)))
    assert parsed.record_type == record_type and parsed.group_id == "g" and parsed.value is None


def test_a_newer_value_version_is_read_with_our_newest():
    _, data = typed_record(gr.CONSUMER_GROUP_METADATA, make_key(gr.CONSUMER_GROUP_METADATA, "g"),
                           value_class(gr.CONSUMER_GROUP_METADATA)(epoch=3))
    newer = struct.pack(">h", 9) + data[2:]
    assert parse_record(b"\x00\x03\x00\x01g", newer).value.epoch == 3


def test_malformed_records_raise_decode_error():
    with pytest.raises(DecodeError):
        parse_record(b"\x00\x03\x00\x01g", b"\x00\x00\x01")  # epoch cut short
    with pytest.raises(DecodeError):
        parse_record(b"\x00\x03\x00\x01g", b"\x00")  # no room for the version
    with pytest.raises(DecodeError):
        parse_record(b"\x00\x03\x00\x01g", b"\xff\xff\x00\x00\x00\x01\x00")  # negative version
    with pytest.raises(DecodeError):
        parse_record(b"\x00\x05\x00\x05group", None)  # the member id is missing


def test_record_types_not_ours_are_skipped():
    assert parse_record(b"\x00\x11\x00\x01g", b"\x00\x00streams group") is None  # 17: a streams group's
    assert parse_record(b"\x7f\xff\x00\x01g", None) is None


def test_a_key_or_value_of_another_type_is_refused():
    with pytest.raises(TypeError):
        typed_record(gr.CONSUMER_GROUP_METADATA, make_key(gr.SHARE_GROUP_METADATA, "g"))
    with pytest.raises(TypeError):
        typed_record(gr.CONSUMER_GROUP_METADATA, make_key(gr.CONSUMER_GROUP_METADATA, "g"),
                     value_class(gr.SHARE_GROUP_METADATA)())
    with pytest.raises(ValueError):
        make_key(2, "g")
