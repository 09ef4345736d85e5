"""Checks of a produce payload before it is appended, in the order Kafka applies them.

For each batch: size against `max.message.bytes` (MESSAGE_TOO_LARGE), then the batch itself (length fields, magic,
CRC-32C, record count against offset deltas: CORRUPT_MESSAGE or INVALID_RECORD), control batches from clients and
keyless records in compacted topics (INVALID_RECORD), then timestamps under CreateTime (INVALID_TIMESTAMP). A
compressed v2 payload must be a single batch, as in Kafka. The whole payload must fit in a segment
(RECORD_LIST_TOO_LARGE).

v0/v1 message sets are converted to v2 batches first. A topic whose `compression.type` names a codec gets every
batch of another codec re-encoded with it, after all the checks above (see `recompress`, which also checks the
producer's CRC and every record first); `max.message.bytes` is then checked again, and the segment bound applied,
on the re-encoded batches. These are the only cases where bytes are re-encoded.

Following the design's produce hot path, a v2 batch is checked at the batch level only: header fields, CRC-32C over
the whole batch, record count against the last offset delta, no compressed control batch. Records are not walked one
by one (Kafka's validator does walk them): the CRC already proves the bytes are the producer's, and a Python walk
over a 1 MiB batch of 1 KiB records costs about ten times the write itself. Records are decoded only where Kafka's
rules need their contents: keys of compacted topics, conversion of legacy message sets, and recompression.

The CRC pass is the one check whose cost grows with the payload: it runs here, inline, once per batch over the
request's own buffer (see `storage.log` for why it is not handed to a second core).

A follower's append (`validate_follower_records`) gets Kafka's replication checks only: each v2 batch whole, its
CRC-32C, a sane last offset delta, offsets increasing from the log end offset on. The leader applied the rest.

Deviation: the timestamp bounds are checked on each batch's base and max timestamps rather than on every record of
a compressed batch, so a compressed batch could smuggle a record older than `message.timestamp.before.max.ms`
(whose default, Long.MAX, accepts everything anyway).
"""
from __future__ import annotations

from typing import NamedTuple

from ..protocol.records.batch import (CONTROL_MASK, LOG_OVERHEAD, MAGIC_OFFSET, NO_TIMESTAMP, RECORDS_OFFSET,
                                      BatchHeader, check_batch_crc, check_batch_fields, iter_batches, iter_records,
                                      read_batch_header)
from ..protocol.records.compression import CODEC_MASK, DEFAULT_MAX_UNCOMPRESSED_SIZE, Compression
from ..protocol.records.convert import legacy_to_batches
from ..protocol.records.errors import CorruptRecordError
from ..protocol.records.errors import InvalidRecordError as RecordRuleError
from ..protocol.records.errors import UnsupportedCompressionError
from .errors import (CorruptMessageError, InvalidRecordError, InvalidTimestampError, MessageTooLargeError,
                     RecordListTooLargeError, UnexpectedAppendOffsetError,
                     UnsupportedCompressionTypeError)
from .log_config import COMPACT, LOG_APPEND_TIME, LogConfig
from .recompress import PRODUCER, needs_recompression, recompress, topic_codec

CLIENT = "client"
_MIN_RECORD_SIZE = 7  # length, attributes, timestamp delta, offset delta, null key, null value, header count
COORDINATOR = "coordinator"


class CheckedBatch(NamedTuple):
    """A batch that passed validation: a view of its bytes (writable when `owned`) and its header."""

    view: memoryview
    header: BatchHeader
    owned: bool


def _records_error(exc: Exception) -> Exception:
    if isinstance(exc, UnsupportedCompressionError):
        return UnsupportedCompressionTypeError(str(exc))
    if isinstance(exc, RecordRuleError):
        return InvalidRecordError(str(exc))
    return CorruptMessageError(str(exc))


def validate_records(records, config: LogConfig, now_ms: int, *, origin: str = CLIENT) -> list[CheckedBatch]:
    """The batches of a produce payload, validated; raises a StorageError subclass on the first failure."""
    view = memoryview(records).cast("B")
    size = len(view)
    if size == 0:
        return []
    if size <= MAGIC_OFFSET:
        raise CorruptMessageError(f"{size} bytes are too short for a batch or message")
    owned = False
    try:
        if view[MAGIC_OFFSET] in (0, 1):
            view, owned = memoryview(bytearray(legacy_to_batches(view, max_size=DEFAULT_MAX_UNCOMPRESSED_SIZE))), True
        positions = list(iter_batches(view))
    except (CorruptRecordError, RecordRuleError, UnsupportedCompressionError) as exc:
        raise _records_error(exc) from None
    checked = [_check_batch(view[pos:pos + header.batch_length + LOG_OVERHEAD], header, owned, config, now_ms,
                            origin) for pos, header in positions]
    if len(checked) > 1:
        if any(batch.header.attributes & CODEC_MASK for batch in checked):
            raise InvalidRecordError("a compressed produce payload must hold exactly one batch")
        size = sum(batch.header.batch_length + LOG_OVERHEAD for batch in checked)
    if config.compression_type != PRODUCER:
        checked = [_recompressed(batch, config) for batch in checked]
        size = sum(batch.header.batch_length + LOG_OVERHEAD for batch in checked)
    if size > config.segment_bytes:
        raise RecordListTooLargeError(f"{size} bytes of records exceed segment.bytes={config.segment_bytes}")
    return checked


def validate_follower_records(records, log_end_offset: int) -> list[CheckedBatch]:
    """The batches of a follower's append, as the leader wrote them (Kafka's checks with origin REPLICATION:
    no size or timestamp rules, the leader applied them). Offsets may leave gaps (a compacted leader) but must
    start at or after `log_end_offset` and increase: UnexpectedAppendOffsetError otherwise."""
    view = memoryview(records).cast("B")
    try:
        checked = [CheckedBatch(view[pos:pos + header.size], header, False) for pos, header in iter_batches(view)]
    except (CorruptRecordError, RecordRuleError) as exc:
        raise CorruptMessageError(str(exc)) from None
    next_offset = log_end_offset
    for batch in checked:
        header = batch.header
        if header.last_offset_delta < 0:
            raise CorruptMessageError(f"batch at offset {header.base_offset} has last offset delta "
                                      f"{header.last_offset_delta}")
        if header.base_offset < next_offset:
            raise UnexpectedAppendOffsetError(
                f"batch at offset {header.base_offset} does not follow offset {next_offset - 1} "
                f"(log end offset {log_end_offset})")
        next_offset = header.last_offset + 1
    try:
        for batch in checked:
            check_batch_crc(batch.view, batch.header)
    except CorruptRecordError as exc:
        raise CorruptMessageError(str(exc)) from None
    return checked


def _check_batch(view: memoryview, header: BatchHeader, owned: bool, config: LogConfig, now_ms: int,
                 origin: str) -> CheckedBatch:
    if len(view) > config.max_message_bytes:
        raise MessageTooLargeError(f"batch of {len(view)} bytes exceeds max.message.bytes={config.max_message_bytes}")
    control = header.attributes & CONTROL_MASK
    try:
        _check_batch_level(view, header)
        if control and origin == CLIENT:
            raise RecordRuleError("clients may not write control batches")
        if not control and COMPACT in config.cleanup_policy:
            _check_keys(view)
    except (CorruptRecordError, RecordRuleError, UnsupportedCompressionError) as exc:
        raise _records_error(exc) from None
    if config.message_timestamp_type != LOG_APPEND_TIME:
        _check_timestamps(header, config, now_ms)
    return CheckedBatch(view, header, owned)


def _recompressed(batch: CheckedBatch, config: LogConfig) -> CheckedBatch:
    """The batch re-encoded with the topic's codec when it differs (checking the original's CRC and records)."""
    if not needs_recompression(batch.header, config.compression_type):
        return batch
    try:
        view = memoryview(recompress(batch.view, topic_codec(config.compression_type),
                                     max_size=DEFAULT_MAX_UNCOMPRESSED_SIZE))
        header = read_batch_header(view)
    except (CorruptRecordError, RecordRuleError, UnsupportedCompressionError) as exc:
        raise _records_error(exc) from None
    if len(view) > config.max_message_bytes:
        raise MessageTooLargeError(f"batch of {len(view)} bytes after recompression with {config.compression_type} "
                                   f"exceeds max.message.bytes={config.max_message_bytes}")
    return CheckedBatch(view, header, True)


def _check_batch_level(view: memoryview, header: BatchHeader) -> None:
    """`validate_batch` without its record-by-record walk (`iter_batches` already checked magic and length), plus a
    cheap bound: the declared records must be able to fit in the bytes there are. A codec id Kafka does not define
    is UnsupportedCompressionError here (from `compression`)."""
    check_batch_fields(view, header)
    if header.compression == Compression.NONE and header.count * _MIN_RECORD_SIZE > len(view) - RECORDS_OFFSET:
        raise RecordRuleError(f"{header.count} records cannot fit in {len(view) - RECORDS_OFFSET} bytes")


def _check_keys(view: memoryview) -> None:
    for record in iter_records(view, max_size=DEFAULT_MAX_UNCOMPRESSED_SIZE):
        if record.key is None:
            raise RecordRuleError(f"compacted topics need a key on every record (offset delta "
                                  f"{record.offset - int.from_bytes(view[:8], 'big', signed=True)})")


def _check_timestamps(header: BatchHeader, config: LogConfig, now_ms: int) -> None:
    earliest = now_ms - config.message_timestamp_before_max_ms
    latest = now_ms + config.message_timestamp_after_max_ms
    base, largest = header.base_timestamp, header.max_timestamp
    if earliest <= base <= latest and earliest <= largest <= latest:
        return  # the common case, decided without a loop
    for timestamp in (base, largest):
        if timestamp == NO_TIMESTAMP:
            continue
        if timestamp < earliest:
            raise InvalidTimestampError(f"timestamp {timestamp} is more than message.timestamp.before.max.ms "
                                        f"before the broker's time {now_ms}")
        if timestamp > latest:
            raise InvalidTimestampError(f"timestamp {timestamp} is more than message.timestamp.after.max.ms "
                                        f"after the broker's time {now_ms}")
