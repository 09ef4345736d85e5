"""The consumer's embedded protocol, as Kafka's ConsumerProtocol writes and reads it: the ConsumerProtocolSubscription
a classic member puts in JoinGroup and the ConsumerProtocolAssignment the leader hands out in SyncGroup, each opening
with an int16 version. Used by the group member (group_member.py) and by the admin client to describe members.
"""
from __future__ import annotations

import struct
from collections.abc import Iterable

from compatbroker.protocol import encode_message
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from .errors import KafkaError

__all__ = ["assignment_bytes", "parse_assignment", "parse_subscription", "read_consumer_protocol",
           "subscription_bytes"]

_VERSION = struct.Struct(">h")


def subscription_bytes(topics: Iterable[str], owned: Iterable[tuple[str, int]] = (), generation: int = -1) -> bytes:
    """ConsumerProtocolSubscription (our newest version, prefixed by it) of `topics`, with the partitions owned
    now and the generation they come from."""
    version = ConsumerProtocolSubscription.VALID_VERSIONS[1]
    by_topic: dict[str, list[int]] = {}
    for topic, partition in owned:
        by_topic.setdefault(topic, []).append(partition)
    body = ConsumerProtocolSubscription(
        topics=sorted(set(topics)), user_data=None, generation_id=generation, rack_id=None,
        owned_partitions=[ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=sorted(p))
                          for t, p in sorted(by_topic.items())])
    return _VERSION.pack(version) + encode_message(ConsumerProtocolSubscription, version, body)


def read_consumer_protocol(message_cls, data: bytes):
    """(version, message) of ConsumerProtocolSubscription/Assignment bytes: an int16 version, then the body; newer
    versions are read with our newest (they only add fields at the end), so the bytes after it are ignored. Raises
    KafkaError(INCONSISTENT_GROUP_PROTOCOL) for bytes that cannot be read."""
    if data is None or len(data) < _VERSION.size:
        raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"{message_cls.NAME} bytes are too short")
    version = _VERSION.unpack_from(data)[0]
    if version < 0:
        raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"{message_cls.NAME} version {version}")
    version = min(version, message_cls.VALID_VERSIONS[1])
    try:
        message, _ = message_cls.DECODERS[version](memoryview(bytes(data)), _VERSION.size)
    except Exception as exc:  # noqa: BLE001 - a generated decoder fails in many ways on bad bytes
        raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"malformed {message_cls.NAME}: {exc}") from None
    return version, message


def parse_subscription(data: bytes):
    """(version, ConsumerProtocolSubscription) of JoinGroup member metadata."""
    return read_consumer_protocol(ConsumerProtocolSubscription, data)


def parse_assignment(data: bytes) -> list[tuple[str, int]]:
    """The (topic, partition) pairs of ConsumerProtocolAssignment bytes (empty bytes: nothing assigned)."""
    if not data:
        return []
    _, message = read_consumer_protocol(ConsumerProtocolAssignment, data)
    return [(entry.topic, partition) for entry in message.assigned_partitions for partition in entry.partitions]


def assignment_bytes(partitions: Iterable[tuple[str, int]], version: int) -> bytes:
    version = min(max(version, 0), ConsumerProtocolAssignment.VALID_VERSIONS[1])
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    body = ConsumerProtocolAssignment(user_data=None, assigned_partitions=[
        ConsumerProtocolAssignment.TopicPartition(topic=topic, partitions=sorted(parts))
        for topic, parts in sorted(by_topic.items())])
    return _VERSION.pack(version) + encode_message(ConsumerProtocolAssignment, version, body)
