"""Up-conversion (v0/v1 -> v2) and down-conversion (v2 -> v0/v1)."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compatbroker.protocol.records import (Compression, ControlRecordType, LegacyMessage, Record,
                                           UnsupportedCompressionError, batches_to_legacy, build_batch,
                                           build_control_batch, build_message_set, encode_messages, iter_batches,
                                           iter_legacy_messages, iter_records, legacy_to_batches,
                                           set_log_append_time, validate_batch)

MAX = 1 << 20
LEGACY_CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]


def batches(buf):
    view = memoryview(buf)
    return [(header, list(iter_records(view[pos:pos + header.size], max_size=MAX)))
            for pos, header in iter_batches(view)]


def legacy(buf):
    return list(iter_legacy_messages(buf, max_size=MAX))


@pytest.mark.parametrize("compression", LEGACY_CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_set_becomes_one_batch_with_the_same_codec(compression, magic):
    message_set = build_message_set([(b"k", b"a", [], 10), (None, b"b", [], 20)], magic, compression, 40)
    converted = legacy_to_batches(message_set, max_size=MAX)
    ((header, records),) = batches(converted)
    validate_batch(converted, deep=True)
    assert (header.compression, header.base_offset, header.timestamp_type) == (compression, 40, 0)
    timestamps = [10, 20] if magic else [-1, -1]
    assert records == [Record(40, timestamps[0], b"k", b"a"), Record(41, timestamps[1], None, b"b")]


def test_log_append_time_is_kept():
    message_set = encode_messages([(0, 10, None, b"a"), (1, 20, None, b"b")], 1, Compression.GZIP,
                                  timestamp_type=1)
    ((header, records),) = batches(legacy_to_batches(message_set, max_size=MAX))
    assert (header.timestamp_type, header.max_timestamp) == (1, 20)
    assert [r.timestamp for r in records] == [20, 20]


def test_runs_split_on_gaps_wrappers_and_timestamp_types():
    message_set = b"".join([
        encode_messages([(0, 1, None, b"a"), (1, 1, None, b"b")], 1),  # run 1
        encode_messages([(5, 1, None, b"c")], 1),  # gap: run 2
        encode_messages([(6, 1, None, b"d")], 1, timestamp_type=1),  # timestamp type changes: run 3
        encode_messages([(7, 1, None, b"e"), (8, 1, None, b"f")], 1, Compression.LZ4),  # a wrapper: run 4
        encode_messages([(9, 1, None, b"g")], 1, Compression.LZ4),  # the next wrapper: run 5
        encode_messages([(10, 1, None, b"h")], 1),  # uncompressed again: run 6
    ])
    converted = batches(legacy_to_batches(message_set, max_size=MAX))
    assert [(h.base_offset, h.count, h.compression, h.timestamp_type) for h, _ in converted] == [
        (0, 2, 0, 0), (5, 1, 0, 0), (6, 1, 0, 1), (7, 2, 3, 0), (9, 1, 3, 0), (10, 1, 0, 0)]
    assert b"".join(r.value for _, records in converted for r in records) == b"abcdefgh"


@pytest.mark.parametrize("compression", [Compression.GZIP, Compression.SNAPPY])
def test_a_wrapper_whose_inner_offsets_are_all_zero_is_one_batch(compression):
    """sarama's magic 0 wrappers number every inner message 0; Kafka ignores inner offsets and stores one batch."""
    wrapper = encode_messages([(0, None, None, value) for value in (b"a", b"b", b"c", b"d", b"e")], 0, compression)
    converted = batches(legacy_to_batches(wrapper, max_size=MAX))
    assert [(h.count, h.compression) for h, _ in converted] == [(5, compression)]
    assert [(r.offset, r.value) for r in converted[0][1]] == list(enumerate([b"a", b"b", b"c", b"d", b"e"]))


@pytest.mark.parametrize("compression", LEGACY_CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_down_conversion(compression, magic):
    records = [(b"k", b"a", [("dropped", b"x")], 100), (None, None, [], 90)]
    log = (build_batch(records, base_offset=10, compression=compression)
           + build_control_batch(ControlRecordType.COMMIT, producer_id=1, producer_epoch=0, coordinator_epoch=0,
                                 timestamp=5, base_offset=12)
           + build_batch([(None, b"c", [], 200)], base_offset=13, compression=compression))
    converted = batches_to_legacy(log, magic, max_size=MAX)
    timestamp_type = 0 if magic else None
    stamp = (lambda ts: ts) if magic else (lambda ts: -1)
    assert legacy(converted) == [
        LegacyMessage(10, magic, stamp(100), timestamp_type, b"k", b"a"),
        LegacyMessage(11, magic, stamp(90), timestamp_type, None, None),
        LegacyMessage(13, magic, stamp(200), timestamp_type, None, b"c")]


def test_down_conversion_keeps_log_append_time_for_magic_1():
    log = bytearray(build_batch([(None, b"a", [], 1), (None, b"b", [], 2)], compression=Compression.SNAPPY))
    set_log_append_time(log, 999)
    assert [(m.timestamp, m.timestamp_type) for m in legacy(batches_to_legacy(log, 1, max_size=MAX))] == [
        (999, 1), (999, 1)]


def test_down_conversion_of_zstd_is_unsupported():
    with pytest.raises(UnsupportedCompressionError):
        batches_to_legacy(build_batch([(None, b"a", [], 1)], compression=Compression.ZSTD), 1, max_size=MAX)


def test_down_conversion_of_a_partial_tail():
    log = build_batch([(None, b"a", [], 1)]) + build_batch([(None, b"b", [], 1)], base_offset=1)[:30]
    assert [m.value for m in legacy(batches_to_legacy(log, 1, max_size=MAX, allow_partial_tail=True))] == [b"a"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.none() | st.binary(max_size=10), st.none() | st.binary(max_size=50),
                          st.just([]), st.integers(0, 2**42)), min_size=1, max_size=5),
       st.sampled_from(LEGACY_CODECS), st.integers(0, 2**40))
def test_v1_round_trip_through_v2(entries, compression, base_offset):
    message_set = build_message_set(entries, 1, compression, base_offset)
    assert batches_to_legacy(legacy_to_batches(message_set, max_size=MAX), 1, max_size=MAX) == message_set
