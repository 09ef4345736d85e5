"""Broker-side compression: a topic's compression.type re-encodes batches of another codec, records unchanged."""
from __future__ import annotations

import dataclasses

import pytest

from compatbroker.protocol.records.batch import build_batch, iter_records, read_batch_header, validate_batch
from compatbroker.protocol.records.compression import Compression
from compatbroker.protocol.records.control import ControlRecordType, build_control_batch
from compatbroker.storage.errors import CorruptMessageError, MessageTooLargeError
from compatbroker.storage.recompress import recompress, topic_codec
from compatbroker.storage.validator import COORDINATOR, validate_records

from .helpers import NOW, SMALL, batches_of, corrupt_crc, open_log

CODECS = {"uncompressed": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY,
          "lz4": Compression.LZ4, "zstd": Compression.ZSTD}
RECORDS = [(b"k%d" % i, b"value-%d " % i * 20, [("h", b"x%d" % i)], NOW + 3 * i) for i in range(10)]
RECORDS[3] = (None, None, [], NOW + 9)  # a tombstone without a key, out of timestamp order


def producer_batch(codec: Compression) -> bytes:
    return build_batch(RECORDS, compression=codec, producer_id=77, producer_epoch=3, base_sequence=0,
                       is_transactional=True)


def decoded(raw) -> list:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in iter_records(raw, max_size=1 << 26)]


@pytest.mark.parametrize("source", list(CODECS.values()), ids=list(CODECS))
@pytest.mark.parametrize("target", list(CODECS))
def test_every_codec_pair_keeps_records_and_header_fields(source, target):
    original = producer_batch(source)
    stored = bytes(recompress(original, topic_codec(target), max_size=1 << 26))
    header, before = validate_batch(stored, deep=True), read_batch_header(original)  # a valid CRC, sound records
    assert header.compression == CODECS[target]
    assert decoded(stored) == decoded(original)
    for field in ("base_offset", "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id",
                  "producer_epoch", "base_sequence", "count", "is_transactional", "timestamp_type"):
        assert getattr(header, field) == getattr(before, field), field


@pytest.mark.parametrize("source", list(CODECS.values()), ids=list(CODECS))
@pytest.mark.parametrize("target", list(CODECS))
def test_appends_store_the_topics_codec_and_read_back_unchanged(tmp_path, source, target):
    log = open_log(tmp_path, dataclasses.replace(SMALL, compression_type=target, segment_bytes=1 << 20))
    first, second = producer_batch(source), build_batch([(b"a", b"b", [], NOW)], compression=source)
    log.append(first, leader_epoch=0, now_ms=NOW)
    log.append(second, leader_epoch=0, now_ms=NOW)
    stored = batches_of(log.read_bytes(0, 1 << 20))
    assert [header.compression for header, _ in stored] == [CODECS[target]] * 2
    assert [header.base_offset for header, _ in stored] == [0, 10]
    assert decoded(stored[0][1]) == decoded(first)
    assert [(r[0], r[2], r[3]) for r in decoded(stored[1][1])] == [(10, b"a", b"b")]
    log.close()


def test_producer_keeps_the_producers_bytes(tmp_path):
    log = open_log(tmp_path, dataclasses.replace(SMALL, segment_bytes=1 << 20))
    original = producer_batch(Compression.SNAPPY)
    log.append(original, leader_epoch=0, now_ms=NOW)
    assert log.read_bytes(0, 1 << 20)[16:] == original[16:]  # all but the stamped base offset and leader epoch
    log.close()


def test_several_uncompressed_batches_of_one_payload_are_each_compressed():
    payload = build_batch([(b"a", b"1", [], NOW)]) + build_batch([(b"b", b"2", [], NOW)], base_offset=1)
    checked = validate_records(payload, dataclasses.replace(SMALL, compression_type="lz4"), NOW)
    assert [batch.header.compression for batch in checked] == [Compression.LZ4, Compression.LZ4]
    assert all(batch.owned for batch in checked)
    assert [decoded(bytes(batch.view))[0][3] for batch in checked] == [b"1", b"2"]


def test_a_bad_crc_is_refused_before_recompression():
    config = dataclasses.replace(SMALL, compression_type="gzip", segment_bytes=1 << 20)
    with pytest.raises(CorruptMessageError):
        validate_records(corrupt_crc(producer_batch(Compression.NONE)), config, NOW)


def test_a_batch_too_large_once_decompressed_is_refused():
    packed = build_batch([(b"k", b"z" * 5000, [], NOW)], compression=Compression.GZIP)
    config = dataclasses.replace(SMALL, compression_type="uncompressed", max_message_bytes=2000,
                                 segment_bytes=1 << 20)
    assert len(packed) < 2000
    with pytest.raises(MessageTooLargeError):
        validate_records(packed, config, NOW)


def test_log_append_time_applies_to_the_recompressed_batch(tmp_path):
    config = dataclasses.replace(SMALL, compression_type="zstd", message_timestamp_type="LogAppendTime",
                                 segment_bytes=1 << 20)
    log = open_log(tmp_path, config)
    result = log.append(producer_batch(Compression.NONE), leader_epoch=0, now_ms=NOW + 500)
    (header, raw), = batches_of(log.read_bytes(0, 1 << 20))
    assert (header.compression, header.timestamp_type, header.max_timestamp) == (Compression.ZSTD, 1, NOW + 500)
    assert result.log_append_time_ms == NOW + 500
    assert {timestamp for _, timestamp, *_ in decoded(raw)} == {NOW + 500}
    log.close()


def test_control_batches_are_left_uncompressed(tmp_path):
    log = open_log(tmp_path, dataclasses.replace(SMALL, compression_type="gzip", segment_bytes=1 << 20))
    marker = build_control_batch(ControlRecordType.COMMIT, producer_id=5, producer_epoch=0, coordinator_epoch=0,
                                 timestamp=NOW)
    log.append(marker, leader_epoch=0, now_ms=NOW, origin=COORDINATOR)
    (header, _), = batches_of(log.read_bytes(0, 1 << 20))
    assert (header.is_control, header.compression) == (True, Compression.NONE)
    log.close()
