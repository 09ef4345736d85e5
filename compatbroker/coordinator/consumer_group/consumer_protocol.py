"""The consumer's embedded protocol as a KIP-848 coordinator reads and writes it for classic-protocol members:
JoinGroup metadata (ConsumerProtocolSubscription) in, SyncGroup assignments (ConsumerProtocolAssignment) out.

Both open with an int16 version (Kafka's ConsumerProtocol). A version above ours is read with our newest, and bytes
after the message are ignored, since newer versions only append fields; a negative version, or bytes that end
early, make the metadata malformed (`MalformedProtocol`). An assignment is written in the version of the member's
subscription (capped at ours), as Kafka answers a classic member.

Topics are named in these messages and identified by id in a consumer group: names the cluster does not know are
left out of both conversions, as Kafka's coordinator leaves them out.
"""
from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Mapping

from ...protocol import encode_message
from ...protocol.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription

__all__ = ["MalformedProtocol", "assignment_bytes", "metadata_version", "parse_assignment", "parse_subscription",
           "partitions_by_id"]

_VERSION = struct.Struct(">h")


class MalformedProtocol(ValueError):
    """Embedded consumer protocol bytes that cannot be read (Kafka's SchemaException)."""


def metadata_version(data: bytes) -> int:
    """The int16 version a subscription or an assignment opens with."""
    if len(data) < _VERSION.size:
        raise MalformedProtocol("consumer protocol bytes shorter than their version")
    version = _VERSION.unpack_from(data)[0]
    if version < 0:
        raise MalformedProtocol(f"unsupported consumer protocol version {version}")
    return version


def _parse(message_cls, data: bytes):
    version = min(metadata_version(data), message_cls.VALID_VERSIONS[1])
    try:
        message, _ = message_cls.DECODERS[version](memoryview(data), _VERSION.size)
    except Exception as exc:  # noqa: BLE001 - the generated decoder fails in many ways on short or bad input
        raise MalformedProtocol(f"malformed {message_cls.NAME} v{version}: {exc}") from None
    return message


def parse_subscription(metadata: bytes) -> ConsumerProtocolSubscription:
    return _parse(ConsumerProtocolSubscription, metadata)


def parse_assignment(data: bytes) -> ConsumerProtocolAssignment:
    return _parse(ConsumerProtocolAssignment, data)


def assignment_bytes(partitions: Mapping[str, frozenset[int] | set[int]], version: int) -> bytes:
    """ConsumerProtocolAssignment bytes (version prefix included) of partitions by topic name, without user
    data; topics in name order, partitions ascending."""
    version = min(max(version, 0), ConsumerProtocolAssignment.VALID_VERSIONS[1])
    body = ConsumerProtocolAssignment(assigned_partitions=[
        ConsumerProtocolAssignment.TopicPartition(topic=topic, partitions=sorted(partitions[topic]))
        for topic in sorted(partitions) if partitions[topic]], user_data=None)
    return _VERSION.pack(version) + encode_message(ConsumerProtocolAssignment, version, body)


def partitions_by_id(topic_partitions,
                     topic_id_of: Callable[[str], uuid.UUID | None]) -> dict[uuid.UUID, frozenset[int]]:
    """`[(topic name, partitions)]` (or messages with `.topic` and `.partitions`) as partitions by topic id; topics
    `topic_id_of` does not know are dropped."""
    merged: dict[uuid.UUID, set[int]] = {}
    for entry in topic_partitions:
        topic, partitions = (entry.topic, entry.partitions) if hasattr(entry, "topic") else entry
        topic_id = topic_id_of(topic)
        if topic_id is not None and partitions:
            merged.setdefault(topic_id, set()).update(partitions)
    return {topic_id: frozenset(partitions) for topic_id, partitions in merged.items()}
