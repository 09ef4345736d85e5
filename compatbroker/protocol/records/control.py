"""Control batches: the transaction markers the broker writes when a transaction commits or aborts.

A marker is a v2 batch with the control and transactional attribute bits set, the producer id and epoch of the
transaction, and exactly one record whose

    key   = version int16 (0) | type int16 (0 abort, 1 commit)
    value = version int16 (0) | coordinator epoch int32

Consumers use markers to drop aborted data (read_committed) and skip the markers themselves.
"""
import struct
from enum import IntEnum
from typing import NamedTuple

from .batch import CREATE_TIME, NO_PARTITION_LEADER_EPOCH, NO_SEQUENCE, build_batch
from .errors import InvalidRecordError

CONTROL_KEY_VERSION = 0
MARKER_VALUE_VERSION = 0

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class ControlRecordType(IntEnum):
    """Type ids of control records that mark the end of a transaction."""

    ABORT = 0
    COMMIT = 1


class TransactionMarker(NamedTuple):
    type: ControlRecordType
    coordinator_epoch: int


def encode_control_key(marker_type):
    return _KEY.pack(CONTROL_KEY_VERSION, ControlRecordType(marker_type))


def encode_marker_value(coordinator_epoch):
    return _VALUE.pack(MARKER_VALUE_VERSION, coordinator_epoch)


def build_control_batch(marker_type, *, producer_id, producer_epoch, coordinator_epoch, timestamp, base_offset=0,
                        partition_leader_epoch=NO_PARTITION_LEADER_EPOCH):
    """Bytes of a one-record control batch ending the producer's transaction with `marker_type` (abort/commit)."""
    record = (encode_control_key(marker_type), encode_marker_value(coordinator_epoch), (), timestamp)
    return build_batch([record], base_offset=base_offset, timestamp_type=CREATE_TIME, producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE, is_transactional=True,
                       is_control=True, partition_leader_epoch=partition_leader_epoch)


def parse_control_key(key):
    """Type id of a control record key: a `ControlRecordType` for markers, a plain int for other types (KRaft
    uses control records of its own). Newer key versions are read as version 0, as Kafka does."""
    if key is None or len(key) < _KEY.size:
        raise InvalidRecordError("control record key is shorter than 4 bytes")
    version, type_id = _KEY.unpack_from(key)
    if version < 0:
        raise InvalidRecordError(f"control record key has negative version {version}")
    try:
        return ControlRecordType(type_id)
    except ValueError:
        return type_id


def parse_control_record(key, value):
    """Decode a transaction marker record into a `TransactionMarker`; InvalidRecordError if it is not one."""
    marker_type = parse_control_key(key)
    if not isinstance(marker_type, ControlRecordType):
        raise InvalidRecordError(f"control record type {marker_type} is not a transaction marker")
    if value is None or len(value) < _VALUE.size:
        raise InvalidRecordError("transaction marker value is shorter than 6 bytes")
    version, coordinator_epoch = _VALUE.unpack_from(value)
    if version < 0:
        raise InvalidRecordError(f"transaction marker value has negative version {version}")
    return TransactionMarker(marker_type, coordinator_epoch)
