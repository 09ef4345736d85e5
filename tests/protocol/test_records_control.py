"""Control batches (transaction markers): layout, parsing, and kafka-python reading them."""
import struct

import pytest
from kafka.record.default_records import ControlRecord, DefaultRecordBatch

from compatbroker.protocol.records import (ControlRecordType, InvalidRecordError, TransactionMarker,
                                           build_control_batch, encode_control_key, encode_marker_value,
                                           iter_records, parse_control_key, parse_control_record, validate_batch)


@pytest.mark.parametrize("marker", list(ControlRecordType))
def test_control_batch_layout(marker):
    batch = build_control_batch(marker, producer_id=4000, producer_epoch=3, coordinator_epoch=17, timestamp=123,
                                base_offset=50, partition_leader_epoch=2)
    header = validate_batch(batch)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence, header.count) == (4000, 3, -1, 1)
    assert (header.base_offset, header.partition_leader_epoch, header.max_timestamp) == (50, 2, 123)
    (record,) = iter_records(batch, max_size=1024)
    assert record.key == struct.pack(">hh", 0, marker) and record.value == struct.pack(">hi", 0, 17)
    assert record.offset == 50 and record.headers == []
    assert parse_control_record(record.key, record.value) == TransactionMarker(marker, 17)


@pytest.mark.parametrize("marker", list(ControlRecordType))
def test_kafka_python_reads_our_markers(marker):
    batch = DefaultRecordBatch(bytearray(build_control_batch(
        marker, producer_id=9, producer_epoch=1, coordinator_epoch=5, timestamp=1)))
    assert batch.validate_crc()
    assert batch.is_control_batch and batch.is_transactional and batch.producer_id == 9
    (record,) = list(batch)
    assert isinstance(record, ControlRecord)
    assert (record.type, record.version, record.commit) == (marker, 0, marker == ControlRecordType.COMMIT)


def test_newer_versions_are_read_and_other_types_passed_through():
    assert parse_control_key(struct.pack(">hh", 3, 1)) is ControlRecordType.COMMIT
    assert parse_control_record(struct.pack(">hh", 1, 0) + b"extra", struct.pack(">hi", 2, 8) + b"x") == (
        ControlRecordType.ABORT, 8)
    assert parse_control_key(struct.pack(">hh", 0, 2)) == 2  # KRaft's leader change type: not a marker
    with pytest.raises(InvalidRecordError):
        parse_control_record(struct.pack(">hh", 0, 2), encode_marker_value(1))


@pytest.mark.parametrize("key, value", [
    (None, b"\x00" * 6), (b"\x00\x00\x00", b"\x00" * 6), (struct.pack(">hh", -1, 0), b"\x00" * 6),
    (encode_control_key(ControlRecordType.ABORT), None), (encode_control_key(ControlRecordType.ABORT), b"\x00" * 5),
    (encode_control_key(ControlRecordType.ABORT), struct.pack(">hi", -1, 0))])
def test_malformed_markers_are_invalid(key, value):
    with pytest.raises(InvalidRecordError):
        parse_control_record(key, value)
