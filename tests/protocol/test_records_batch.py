"""RecordBatch v2: layout, round trips, validation rules, stamping, batch framing and the no-copy hot path."""
import struct
import tracemalloc

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from compatbroker.protocol.records import (ATTRIBUTES_OFFSET, CRC_OFFSET, LAST_OFFSET_DELTA_OFFSET, MAGIC_OFFSET,
                                           RECORD_BATCH_OVERHEAD, RECORDS_COUNT_OFFSET, BatchHeader, Compression,
                                           CorruptRecordError, InvalidRecordError, Record, build_batch,
                                           iter_batches, iter_records, read_batch_header, set_log_append_time,
                                           stamp_batch, validate_batch)
from compatbroker.protocol.records.varint import write_varint, write_varlong

KEYS = st.none() | st.binary(max_size=16)
VALUES = st.none() | st.binary(max_size=300)
HEADERS = st.lists(st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=8)), max_size=3)
TIMESTAMPS = st.integers(-1, 2**42)
RECORDS = st.lists(st.tuples(KEYS, VALUES, HEADERS, TIMESTAMPS), min_size=1, max_size=8)
CODECS = st.sampled_from(list(Compression))
MAX = 1 << 20


def fix_crc(buf):
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c(bytes(buf[ATTRIBUTES_OFFSET:])))


def records_of(batch):
    return list(iter_records(batch, max_size=MAX))


def sample_batch(compression=Compression.NONE, count=3, **options):
    return bytearray(build_batch([(b"k%d" % i, b"value %d" % i, [("h", b"%d" % i)], 1000 + i)
                                  for i in range(count)], compression=compression, **options))


def test_header_layout_constants():
    assert RECORD_BATCH_OVERHEAD == 61
    assert (MAGIC_OFFSET, CRC_OFFSET, ATTRIBUTES_OFFSET, LAST_OFFSET_DELTA_OFFSET, RECORDS_COUNT_OFFSET) == (
        16, 17, 21, 23, 57)


@settings(max_examples=60, deadline=None)
@given(RECORDS, CODECS, st.integers(0, 2**40), st.sampled_from([0, 1]))
def test_round_trip(entries, compression, base_offset, timestamp_type):
    batch = build_batch(entries, base_offset=base_offset, compression=compression, timestamp_type=timestamp_type)
    header = validate_batch(batch, deep=True)
    max_timestamp = max(entry[3] for entry in entries)
    assert (header.base_offset, header.count, header.last_offset, header.size) == (
        base_offset, len(entries), base_offset + len(entries) - 1, len(batch))
    assert (header.compression, header.timestamp_type, header.max_timestamp, header.base_timestamp) == (
        compression, timestamp_type, max_timestamp, entries[0][3])
    expected = [Record(base_offset + i, max_timestamp if timestamp_type else ts, key, value, headers)
                for i, (key, value, headers, ts) in enumerate(entries)]
    assert records_of(memoryview(batch)) == expected


def test_header_properties():
    batch = build_batch([(None, b"v", [], 5)] * 4, base_offset=100, producer_id=7, producer_epoch=2,
                        base_sequence=2**31 - 2, is_transactional=True, partition_leader_epoch=9)
    header = read_batch_header(batch)
    assert isinstance(header, BatchHeader)
    assert (header.producer_id, header.producer_epoch, header.base_sequence, header.partition_leader_epoch) == (
        7, 2, 2**31 - 2, 9)
    assert header.is_transactional and not header.is_control and not header.has_delete_horizon
    assert (header.last_offset, header.next_offset) == (103, 104)
    assert header.last_sequence == 1  # sequences wrap past int32 max to 0
    assert "producer_id=7" in repr(header)


def test_record_equality_and_repr():
    record = Record(1, 2, b"k", None, [("a", b"b")])
    assert record == Record(1, 2, b"k", None, [("a", b"b")])
    assert record != Record(1, 2, b"k", b"", [("a", b"b")])
    assert repr(record) == "Record(offset=1, timestamp=2, key=b'k', value=None, headers=[('a', b'b')])"


def test_build_accepts_record_objects_and_ignores_their_offsets():
    batch = build_batch([Record(99, 10, b"a", b"b", []), Record(5, None, None, b"c")], base_offset=40)
    assert records_of(batch) == [Record(40, 10, b"a", b"b"), Record(41, -1, None, b"c")]


def test_build_refuses_empty_and_compressed_control_batches():
    with pytest.raises(ValueError):
        build_batch([])
    with pytest.raises(InvalidRecordError):
        build_batch([(b"k", b"v", [], 0)], is_control=True, compression=Compression.GZIP)


# --- stamping -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("compression", list(Compression))
def test_stamp_batch_keeps_the_crc_valid(compression):
    batch = sample_batch(compression)
    crc_before = read_batch_header(batch).crc
    stamp_batch(memoryview(batch), 5000, 12)
    header = validate_batch(batch, deep=True)
    assert (header.base_offset, header.partition_leader_epoch, header.crc) == (5000, 12, crc_before)
    assert [r.offset for r in records_of(batch)] == [5000, 5001, 5002]


@pytest.mark.parametrize("compression", list(Compression))
def test_set_log_append_time_recomputes_the_crc(compression):
    batch = sample_batch(compression)
    set_log_append_time(batch, 77777)
    header = validate_batch(batch, deep=True)
    assert (header.timestamp_type, header.max_timestamp, header.base_timestamp) == (1, 77777, 1000)
    assert [r.timestamp for r in records_of(batch)] == [77777] * 3


def test_stamping_a_slice_of_a_larger_buffer():
    first, second = sample_batch(), sample_batch(Compression.LZ4)
    log = bytearray(first + second)
    view = memoryview(log)[len(first):]
    stamp_batch(view, 3, 1)
    set_log_append_time(view, 10)
    assert log[:len(first)] == first
    assert validate_batch(view).base_offset == 3


# --- validation rules ---------------------------------------------------------------------------------------------

def test_crc_mismatch_is_corrupt():
    batch = sample_batch()
    batch[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        validate_batch(batch)


@pytest.mark.parametrize("compression", list(Compression))
def test_truncation_at_every_byte_is_corrupt(compression):
    batch = bytes(sample_batch(compression))
    for cut in range(len(batch)):
        for check in (validate_batch, records_of):
            with pytest.raises(CorruptRecordError):
                check(batch[:cut])


def test_trailing_bytes_after_the_batch_are_corrupt():
    with pytest.raises(CorruptRecordError):
        validate_batch(sample_batch() + b"\x00")


@pytest.mark.parametrize("count", [2, 4, 0])
def test_record_count_disagreeing_with_the_records_is_invalid(count):
    batch = sample_batch()
    struct.pack_into(">i", batch, RECORDS_COUNT_OFFSET, count)
    struct.pack_into(">i", batch, LAST_OFFSET_DELTA_OFFSET, count - 1)
    fix_crc(batch)
    with pytest.raises(InvalidRecordError):
        validate_batch(batch)


def test_last_offset_delta_disagreeing_with_the_count_is_invalid():
    batch = sample_batch()
    struct.pack_into(">i", batch, LAST_OFFSET_DELTA_OFFSET, 5)
    fix_crc(batch)
    with pytest.raises(InvalidRecordError):
        validate_batch(batch)


def test_negative_count_is_corrupt():
    batch = sample_batch()
    struct.pack_into(">i", batch, RECORDS_COUNT_OFFSET, -1)
    fix_crc(batch)
    with pytest.raises(CorruptRecordError):
        validate_batch(batch)


def hand_built_batch(deltas):
    """An uncompressed batch whose records carry the given offset deltas (build_batch writes 0..n-1)."""
    body = bytearray()
    for delta in deltas:
        record = bytearray(b"\x00")  # attributes
        write_varlong(record, 0)  # timestamp delta
        write_varint(record, delta)
        record += b"\x01\x01\x00"  # null key, null value, no headers
        write_varint(body, len(record))
        body += record
    batch = bytearray(build_batch([(None, None, [], 0)] * len(deltas)))
    assert len(batch) == RECORD_BATCH_OVERHEAD + len(body)  # same record sizes: only the deltas differ
    batch[RECORD_BATCH_OVERHEAD:] = body
    fix_crc(batch)
    return batch


@pytest.mark.parametrize("deltas", [[0, 2, 3], [1, 2, 3], [0, 0, 1], [0, 2, 1]])
def test_offset_deltas_out_of_sequence_are_invalid(deltas):
    with pytest.raises(InvalidRecordError, match="offset delta"):
        validate_batch(hand_built_batch(deltas))
    validate_batch(hand_built_batch([0, 1, 2]))


@pytest.mark.parametrize("compression", [c for c in Compression if c != Compression.NONE])
def test_deep_validation_checks_compressed_records(compression):
    batch = sample_batch(compression)
    struct.pack_into(">i", batch, RECORDS_COUNT_OFFSET, 4)
    struct.pack_into(">i", batch, LAST_OFFSET_DELTA_OFFSET, 3)
    fix_crc(batch)
    validate_batch(batch)  # the shallow check trusts the compressed body
    with pytest.raises(InvalidRecordError):
        validate_batch(batch, deep=True)


@pytest.mark.parametrize("compression", [c for c in Compression if c != Compression.NONE])
def test_deep_validation_bounds_decompression(compression):
    batch = build_batch([(None, bytes(300_000), [], 0)], compression=compression)
    assert validate_batch(batch, deep=True, max_size=400_000).count == 1
    with pytest.raises(CorruptRecordError):
        validate_batch(batch, deep=True, max_size=100_000)
    with pytest.raises(CorruptRecordError):
        list(iter_records(batch, max_size=100_000))


def test_compressed_control_batch_is_invalid():
    batch = sample_batch(Compression.GZIP, count=1)
    struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, 0x20 | 0x10 | Compression.GZIP)
    fix_crc(batch)
    with pytest.raises(InvalidRecordError, match="control"):
        validate_batch(batch)


@pytest.mark.parametrize("magic, error", [(0, InvalidRecordError), (1, InvalidRecordError),
                                          (3, CorruptRecordError), (-1, CorruptRecordError)])
def test_other_magic_bytes_are_refused(magic, error):
    batch = sample_batch()
    batch[MAGIC_OFFSET] = magic & 0xFF
    with pytest.raises(error):
        validate_batch(batch)


def test_batch_length_shorter_than_the_header_is_corrupt():
    batch = sample_batch()
    struct.pack_into(">i", batch, 8, 10)
    with pytest.raises(CorruptRecordError):
        read_batch_header(batch)


def test_read_batch_header_of_a_header_only_buffer():
    batch = sample_batch()
    with pytest.raises(CorruptRecordError):
        read_batch_header(batch[:RECORD_BATCH_OVERHEAD])
    assert read_batch_header(batch[:RECORD_BATCH_OVERHEAD], whole=False).size == len(batch)


def test_record_length_running_past_the_batch_is_corrupt():
    batch = hand_built_batch([0])
    batch[RECORD_BATCH_OVERHEAD] = 0x7E  # record length 63, the batch holds 7
    fix_crc(batch)
    with pytest.raises(CorruptRecordError):
        validate_batch(batch)


# --- framing several batches --------------------------------------------------------------------------------------

def test_iter_batches_frames_back_to_back_batches():
    batches = [sample_batch(Compression.NONE, base_offset=0), sample_batch(Compression.ZSTD, base_offset=3),
               sample_batch(Compression.GZIP, count=1, base_offset=6)]
    log = b"".join(batches)
    found = list(iter_batches(log))
    assert [pos for pos, _ in found] == [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    assert [header.base_offset for _, header in found] == [0, 3, 6]
    assert [validate_batch(memoryview(log)[pos:pos + h.size]).count for pos, h in found] == [3, 3, 1]


@pytest.mark.parametrize("tail", [1, 11, 12, 60, 61, -1])
def test_partial_tail_batches(tail):
    first, second = sample_batch(), sample_batch()
    log = first + second[:tail]
    with pytest.raises(CorruptRecordError):
        list(iter_batches(log))
    assert [pos for pos, _ in iter_batches(log, allow_partial_tail=True)] == [0]


def test_iter_batches_of_nothing():
    assert list(iter_batches(b"")) == []


# --- no copy ------------------------------------------------------------------------------------------------------

def test_validate_batch_of_a_1mib_batch_does_not_copy_it():
    entries = [(b"key-%05d" % i, bytes(1000), [], 1_700_000_000_000 + i) for i in range(1040)]
    buffer = bytearray(build_batch(entries))
    assert len(buffer) > 1 << 20
    view = memoryview(buffer)
    tracemalloc.start()
    try:
        header = validate_batch(view)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert header.count == 1040
    assert peak < 64 * 1024, f"validate_batch allocated {peak} bytes for a {len(buffer)}-byte batch"
