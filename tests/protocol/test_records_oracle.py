"""kafka-python's record code as an independent oracle: it must read what we build, and we what it builds."""
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec as kp_codec
from kafka.record.default_records import ControlRecord, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from compatbroker.protocol.records import (Compression, ControlRecordType, LegacyMessage, Record,
                                           build_batch, build_control_batch, build_message_set, iter_batches,
                                           iter_legacy_messages, iter_records, set_log_append_time,
                                           stamp_batch, validate_batch, validate_message_set)
from compatbroker.protocol.records.compression import xxh32

MAX = 1 << 20
LEGACY_CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]
KEYS = st.none() | st.binary(max_size=16)
VALUES = st.none() | st.binary(max_size=300)
HEADERS = st.lists(st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=8)), max_size=3)
V2_RECORDS = st.lists(st.tuples(KEYS, VALUES, HEADERS, st.integers(0, 2**42)), min_size=1, max_size=8)
LEGACY_RECORDS = st.lists(st.tuples(KEYS, VALUES, st.just([]), st.integers(0, 2**42)), min_size=1, max_size=6)


@pytest.fixture(autouse=True)
def lend_xxhash(monkeypatch):
    """kafka-python needs the xxhash package for magic 0 lz4 (the pre-KIP-57 checksum); lend it our xxh32, which
    test_records_compression checks against the checksums the lz4 library writes."""
    class XXHashShim:
        @staticmethod
        def xxh32(data):
            return type("Digest", (), {"digest": lambda self: struct.pack(">I", xxh32(data))})()

    monkeypatch.setattr(kp_codec, "xxhash", XXHashShim)


def kafka_python_reads(buf):
    """[(batch, [records as (offset, timestamp, key, value, headers)])] as kafka-python decodes `buf`."""
    found = []
    for batch in MemoryRecords(bytes(buf)):
        assert batch.validate_crc()
        found.append((batch, [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]))
    return found


def our_records(buf):
    view = memoryview(buf)
    return [(r.offset, r.timestamp, r.key, r.value, r.headers)
            for pos, header in iter_batches(view)
            for r in iter_records(view[pos:pos + header.size], max_size=MAX)]


def our_legacy(buf):
    return [(m.offset, None if m.magic == 0 else m.timestamp, m.key, m.value, [])
            for m in iter_legacy_messages(buf, max_size=MAX)]


# --- v2 -----------------------------------------------------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(V2_RECORDS, st.sampled_from(list(Compression)), st.integers(0, 2**40), st.booleans())
def test_kafka_python_reads_our_batches(entries, compression, base_offset, transactional):
    batch = build_batch(entries, base_offset=base_offset, compression=compression, producer_id=77,
                        producer_epoch=3, base_sequence=10, is_transactional=transactional,
                        partition_leader_epoch=4)
    ((theirs, records),) = kafka_python_reads(batch)
    assert (theirs.base_offset, theirs.compression_type, theirs.is_transactional, theirs.is_control_batch) == (
        base_offset, compression, transactional, False)
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence, theirs.leader_epoch) == (77, 3, 10, 4)
    assert records == [(base_offset + i, ts, key, value, headers)
                       for i, (key, value, headers, ts) in enumerate(entries)]


@settings(max_examples=40, deadline=None)
@given(V2_RECORDS, st.sampled_from(list(Compression)), st.booleans())
def test_we_read_kafka_python_batches(entries, compression, transactional):
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=transactional,
                                        producer_id=500, producer_epoch=1, base_sequence=0, batch_size=MAX)
    for offset, (key, value, headers, ts) in enumerate(entries):
        assert builder.append(offset, ts, key, value, headers) is not None
    batch = bytes(builder.build())
    header = validate_batch(batch, deep=True)
    assert (header.is_transactional, header.producer_id, header.count) == (transactional, 500, len(entries))
    assert our_records(batch) == kafka_python_reads(batch)[0][1]


@pytest.mark.parametrize("compression", list(Compression))
def test_stamped_and_log_append_time_batches_read_the_same_in_kafka_python(compression):
    batch = bytearray(build_batch([(b"k", b"v", [("h", None)], 5), (None, b"w", [], 9)], compression=compression))
    stamp_batch(batch, 1000, 7)
    set_log_append_time(batch, 424242)
    ((theirs, records),) = kafka_python_reads(batch)
    assert (theirs.base_offset, theirs.leader_epoch, theirs.timestamp_type) == (1000, 7, 1)
    assert records == our_records(batch) == [(1000, 424242, b"k", b"v", [("h", None)]),
                                             (1001, 424242, None, b"w", [])]


def test_kafka_python_reads_a_log_of_data_and_control_batches():
    data = build_batch([(None, b"a", [], 1)], producer_id=8, producer_epoch=0, base_sequence=0,
                       is_transactional=True)
    control = build_control_batch(ControlRecordType.ABORT, producer_id=8, producer_epoch=0, coordinator_epoch=2,
                                  timestamp=3, base_offset=1)
    (theirs_data, _), (theirs_control, _) = kafka_python_reads(data + control)
    assert theirs_data.is_transactional and not theirs_data.is_control_batch
    assert theirs_control.is_control_batch and theirs_control.is_transactional
    assert (theirs_control.base_offset, theirs_control.producer_id) == (1, 8)
    (marker,) = list(MemoryRecords(control).next_batch())
    assert isinstance(marker, ControlRecord) and marker.abort and marker.offset == 1


# --- legacy -------------------------------------------------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(LEGACY_RECORDS, st.sampled_from([0, 1]), st.sampled_from(LEGACY_CODECS), st.integers(0, 2**40))
def test_kafka_python_reads_our_message_sets(entries, magic, compression, base_offset):
    buf = build_message_set(entries, magic, compression, base_offset)
    found = kafka_python_reads(buf)  # kafka-python sees each top-level message as a batch of its own
    assert {(theirs.magic, theirs.compression_type) for theirs, _ in found} == {(magic, compression)}
    assert [record for _, records in found for record in records] == [
        (base_offset + i, ts if magic else None, key, value, []) for i, (key, value, _, ts) in enumerate(entries)]


@settings(max_examples=40, deadline=None)
@given(LEGACY_RECORDS, st.sampled_from([0, 1]), st.sampled_from(LEGACY_CODECS))
def test_we_read_kafka_python_message_sets(entries, magic, compression):
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=compression, batch_size=MAX)
    for offset, (key, value, _, ts) in enumerate(entries):
        assert builder.append(offset, ts, key, value) is not None
    buf = bytes(builder.build())
    assert validate_message_set(buf) == len(entries)
    assert our_legacy(buf) == [record for _, records in kafka_python_reads(buf) for record in records]


@pytest.mark.parametrize("magic", [0, 1, 2])
@pytest.mark.parametrize("compression", LEGACY_CODECS)
def test_we_read_kafka_python_memory_records(magic, compression):
    builder = MemoryRecordsBuilder(magic, compression, batch_size=MAX, offset=20)
    for i in range(5):
        builder.append(timestamp=100 + i, key=b"k%d" % i, value=b"v" * i)
    builder.close()
    buf = bytes(builder.buffer())
    theirs = [record for _, records in kafka_python_reads(buf) for record in records]
    if magic == 2:
        assert our_records(buf) == theirs
    else:
        assert our_legacy(buf) == theirs
        assert all(isinstance(m, LegacyMessage) for m in iter_legacy_messages(buf, max_size=MAX))
    assert [r[0] for r in theirs] == list(range(20, 25))


def test_record_objects_compare_with_kafka_python_records():
    batch = build_batch([Record(0, 5, b"k", b"v", [("a", b"b")])])
    ((_, (theirs,)),) = kafka_python_reads(batch)
    assert Record(*theirs) == next(iter_records(batch, max_size=MAX))
