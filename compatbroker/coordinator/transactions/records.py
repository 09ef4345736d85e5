"""Records of `__transaction_state`, laid out as Kafka lays them out (a data directory keeps its meaning for Kafka's
tools): key = version int16 0 | TransactionLogKey (the transactional id); value = version int16 | TransactionLogValue,
or null (a tombstone: the transactional id expired and compaction drops both).

The value is written as version 1 (flexible: previous/next producer id, next producer epoch and the client's
transaction version are tagged fields), as Kafka 4.x writes it; versions 0 and 1 are read, and a newer version is
read as version 1, since newer versions only add tagged fields. The partitions are null in the Empty state. Kafka
does not store the last producer epoch: after a restart it is unknown (-1), in Kafka as here.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from ...protocol import DecodeError, decode_message, encode_message
from ...protocol.messages import TransactionLogKey, TransactionLogValue
from .state import NO_PRODUCER_EPOCH, TransactionMetadata, TransactionState

KEY_VERSION = 0
VALUE_VERSION = 1

_VERSION = struct.Struct(">h")


def encode_key(transactional_id: str) -> bytes:
    return _VERSION.pack(KEY_VERSION) + encode_message(TransactionLogKey, 0,
                                                       TransactionLogKey(transactional_id=transactional_id))


def encode_value(metadata: TransactionMetadata) -> bytes:
    value = TransactionLogValue(
        producer_id=metadata.producer_id, previous_producer_id=metadata.previous_producer_id,
        next_producer_id=metadata.next_producer_id, producer_epoch=metadata.producer_epoch,
        transaction_timeout_ms=metadata.transaction_timeout_ms, transaction_status=int(metadata.state),
        transaction_partitions=_partitions_schema(metadata),
        transaction_last_update_timestamp_ms=metadata.last_update_time_ms,
        transaction_start_timestamp_ms=metadata.transaction_start_time_ms,
        client_transaction_version=metadata.client_transaction_version)
    return _VERSION.pack(VALUE_VERSION) + encode_message(TransactionLogValue, VALUE_VERSION, value)


def _partitions_schema(metadata: TransactionMetadata):
    if metadata.state is TransactionState.EMPTY:
        return None
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(metadata.partitions):
        by_topic.setdefault(topic, []).append(partition)
    return [TransactionLogValue.PartitionsSchema(topic=topic, partition_ids=ids) for topic, ids in by_topic.items()]


class TransactionRecord(NamedTuple):
    """A decoded record; `metadata` is None for a tombstone."""

    transactional_id: str
    metadata: TransactionMetadata | None


def parse_record(key: bytes | None, value: bytes | None) -> TransactionRecord:
    """Decode one record of `__transaction_state`; raises DecodeError for a malformed one."""
    if key is None or len(key) < _VERSION.size:
        raise DecodeError("a __transaction_state record needs a key with a version")
    key_version = _VERSION.unpack_from(key)[0]
    if key_version != KEY_VERSION:
        raise DecodeError(f"unknown __transaction_state key version {key_version}")
    transactional_id = decode_message(TransactionLogKey, 0, memoryview(key)[_VERSION.size:]).transactional_id
    if value is None:
        return TransactionRecord(transactional_id, None)
    return TransactionRecord(transactional_id, _metadata(transactional_id, _decode_value(value)))


def _decode_value(value: bytes) -> TransactionLogValue:
    if len(value) < _VERSION.size:
        raise DecodeError("TransactionLogValue is shorter than its version")
    version = _VERSION.unpack_from(value)[0]
    if version < 0:
        raise DecodeError(f"TransactionLogValue has negative version {version}")
    return decode_message(TransactionLogValue, min(version, VALUE_VERSION), memoryview(value)[_VERSION.size:])


def _metadata(transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
    try:
        state = TransactionState(value.transaction_status)
    except ValueError:
        raise DecodeError(f"unknown transaction state id {value.transaction_status}") from None
    partitions = frozenset((schema.topic, partition) for schema in value.transaction_partitions or ()
                           for partition in schema.partition_ids)
    return TransactionMetadata(
        transactional_id=transactional_id, producer_id=value.producer_id, producer_epoch=value.producer_epoch,
        transaction_timeout_ms=value.transaction_timeout_ms, state=state, partitions=partitions,
        transaction_start_time_ms=value.transaction_start_timestamp_ms,
        last_update_time_ms=value.transaction_last_update_timestamp_ms,
        previous_producer_id=value.previous_producer_id, next_producer_id=value.next_producer_id,
        last_producer_epoch=NO_PRODUCER_EPOCH, client_transaction_version=value.client_transaction_version)
