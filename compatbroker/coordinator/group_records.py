"""The records of KIP-848 consumer groups and KIP-932 share groups in `__consumer_offsets`, laid out as Kafka lays
them out: a key opening with an int16 record type (Kafka's CoordinatorRecordType, 3..16 here; 0-2 are the offset
commits and classic group metadata of `offsets.py`) followed by the key message, and a value opening with an int16
version followed by the value message, or a null value (a tombstone: the key is deleted, compaction drops both).

Each type's key and value are generated message classes (`compatbroker.protocol.messages`, from `schemas/`).
Values are written with our newest version; a value version newer than ours is read with our newest, since newer
versions only add tagged fields (as `offsets._decode_value` does). Record types this table does not know (Kafka's
streams groups, 17 and up) are not ours to read: `parse_typed` returns None for them and the loader skips them.

`TypedRecord` is what the loader hands to the coordinator (`Coordinator.replay_typed`), and what the consumer and
share group packages replay.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from ..protocol import DecodeError, decode_message, encode_message
from ..protocol import messages

__all__ = ["CONSUMER_GROUP_RECORD_TYPES", "SHARE_GROUP_RECORD_TYPES", "TypedRecord", "key_class", "make_key",
           "parse_typed", "tombstone", "typed_record", "value_class"]

# Kafka's CoordinatorRecordType numbering: the int16 that opens the key.
CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4          # no longer written from Kafka 4.1 (KIP-1101); still read
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
SHARE_GROUP_PARTITION_METADATA = 9             # no longer written from Kafka 4.1; still read
SHARE_GROUP_MEMBER_METADATA = 10
SHARE_GROUP_METADATA = 11
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA = 12
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER = 13
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT = 14
SHARE_GROUP_STATE_PARTITION_METADATA = 15
CONSUMER_GROUP_REGULAR_EXPRESSION = 16

# record type -> the name of its messages (key: name + "Key", value: name + "Value")
_NAMES = {
    CONSUMER_GROUP_METADATA: "ConsumerGroupMetadata",
    CONSUMER_GROUP_PARTITION_METADATA: "ConsumerGroupPartitionMetadata",
    CONSUMER_GROUP_MEMBER_METADATA: "ConsumerGroupMemberMetadata",
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: "ConsumerGroupTargetAssignmentMetadata",
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: "ConsumerGroupTargetAssignmentMember",
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: "ConsumerGroupCurrentMemberAssignment",
    SHARE_GROUP_PARTITION_METADATA: "ShareGroupPartitionMetadata",
    SHARE_GROUP_MEMBER_METADATA: "ShareGroupMemberMetadata",
    SHARE_GROUP_METADATA: "ShareGroupMetadata",
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA: "ShareGroupTargetAssignmentMetadata",
    SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER: "ShareGroupTargetAssignmentMember",
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT: "ShareGroupCurrentMemberAssignment",
    SHARE_GROUP_STATE_PARTITION_METADATA: "ShareGroupStatePartitionMetadata",
    CONSUMER_GROUP_REGULAR_EXPRESSION: "ConsumerGroupRegularExpression",
}
CONSUMER_GROUP_RECORD_TYPES = frozenset((*range(CONSUMER_GROUP_METADATA, CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT + 1),
                                         CONSUMER_GROUP_REGULAR_EXPRESSION))
SHARE_GROUP_RECORD_TYPES = frozenset(range(SHARE_GROUP_PARTITION_METADATA, SHARE_GROUP_STATE_PARTITION_METADATA + 1))

_SHORT = struct.Struct(">h")


class TypedRecord(NamedTuple):
    """One consumer or share group record of `__consumer_offsets`, decoded."""

    record_type: int        # the key's int16: 3..8 and 16 consumer group, 9..15 share group
    group_id: str
    key: object             # the key message, e.g. ConsumerGroupMemberMetadataKey
    value: object | None    # the value message; None for a tombstone


def _message_class(record_type: int, suffix: str):
    name = _NAMES.get(record_type)
    if name is None:
        raise ValueError(f"{record_type} is not a consumer or share group record type")
    return getattr(messages, name + suffix)


def key_class(record_type: int):
    """The generated key class of a record type (ValueError for a type not in the table)."""
    return _message_class(record_type, "Key")


def value_class(record_type: int):
    """The generated value class of a record type (ValueError for a type not in the table)."""
    return _message_class(record_type, "Value")


def make_key(record_type: int, group_id: str, **fields):
    """The key message of a record type: the group id plus the type's other key fields (`member_id`,
    `regular_expression`)."""
    return key_class(record_type)(group_id=group_id, **fields)


def typed_record(record_type: int, key_message, value_message=None) -> tuple[bytes, bytes | None]:
    """Encode a record as (key, value) bytes for `OffsetStore.store_records`; no value: a tombstone."""
    key_cls = key_class(record_type)
    if not isinstance(key_message, key_cls):
        raise TypeError(f"record type {record_type} needs a {key_cls.NAME}, not {type(key_message).__name__}")
    key = _SHORT.pack(record_type) + encode_message(key_cls, key_cls.VALID_VERSIONS[0], key_message)
    if value_message is None:
        return key, None
    value_cls = value_class(record_type)
    if not isinstance(value_message, value_cls):
        raise TypeError(f"record type {record_type} needs a {value_cls.NAME}, not {type(value_message).__name__}")
    version = value_cls.VALID_VERSIONS[1]
    return key, _SHORT.pack(version) + encode_message(value_cls, version, value_message)


def tombstone(record_type: int, group_id: str, **key_fields) -> tuple[bytes, None]:
    """The tombstone of a record: its key and a null value."""
    return typed_record(record_type, make_key(record_type, group_id, **key_fields))


def parse_typed(record_type: int, key_body, value: bytes | None) -> TypedRecord | None:
    """Decode a record whose key opened with `record_type` (`key_body`: the key after that int16); None for a type
    this broker does not keep, or whose classes are not generated. Raises DecodeError for a malformed record."""
    try:
        key_cls, value_cls = key_class(record_type), value_class(record_type)
    except (ValueError, AttributeError):
        return None
    key = decode_message(key_cls, key_cls.VALID_VERSIONS[0], key_body)
    return TypedRecord(record_type, key.group_id, key, None if value is None else _decode_value(value_cls, value))


def _decode_value(cls, value: bytes):
    if len(value) < _SHORT.size:
        raise DecodeError(f"{cls.NAME} value is shorter than its version")
    version = _SHORT.unpack_from(value)[0]
    if version < 0:
        raise DecodeError(f"{cls.NAME} value has negative version {version}")
    return decode_message(cls, min(version, cls.VALID_VERSIONS[1]), memoryview(value)[_SHORT.size:])
