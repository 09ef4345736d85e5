"""RecordBatch, the message format of magic 2 (Kafka 0.11 and later).

A batch is a fixed 61-byte header followed by its records, which may be compressed as one block:

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 | crc uint32 |
    attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 | maxTimestamp int64 | producerId int64 |
    producerEpoch int16 | baseSequence int32 | recordsCount int32 | records...

batchLength counts the bytes after itself. The CRC-32C covers attributes to the end of the batch, so the broker can
rewrite baseOffset and partitionLeaderEpoch in place without touching it. Each record is:

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint | key bytes | value bytes |
    headerCount varint | (headerKey string, headerValue bytes)...

where bytes/string are a varint length (-1 for null) and the data. Validation and stamping work on memoryviews of
the caller's buffer and never copy the batch; only decoding records into `Record` objects copies keys and values.
"""
import struct

from crc32c import crc32c

from .compression import CODEC_MASK, DEFAULT_MAX_UNCOMPRESSED_SIZE, Compression, codec, compress, decompress
from .errors import CorruptRecordError, InvalidRecordError
from .varint import read_varint, read_varlong, varint_size, write_varint, write_varlong

MAGIC = 2

BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61

LOG_OVERHEAD = 12  # baseOffset and batchLength: the bytes batchLength does not count
RECORD_BATCH_OVERHEAD = RECORDS_OFFSET
MIN_BATCH_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD

HEADER = struct.Struct(">qiibIhiqqqhii")
assert HEADER.size == RECORD_BATCH_OVERHEAD

TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

CREATE_TIME = 0
LOG_APPEND_TIME = 1
NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")
_INT32_MAX = 2**31 - 1
_CODECS = tuple(Compression)  # by id: a tuple index is cheaper than the enum's lookup, once per batch per append
assert all(kind == index for index, kind in enumerate(_CODECS))


class BatchHeader:
    """The 61-byte header of a v2 batch, field by field."""

    __slots__ = ("base_offset", "batch_length", "partition_leader_epoch", "magic", "crc", "attributes",
                 "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
                 "base_sequence", "count")

    def __init__(self, base_offset, batch_length, partition_leader_epoch, magic, crc, attributes,
                 last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence,
                 count):
        self.base_offset = base_offset
        self.batch_length = batch_length
        self.partition_leader_epoch = partition_leader_epoch
        self.magic = magic
        self.crc = crc
        self.attributes = attributes
        self.last_offset_delta = last_offset_delta
        self.base_timestamp = base_timestamp
        self.max_timestamp = max_timestamp
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.count = count

    @property
    def compression(self):
        kind = self.attributes & CODEC_MASK
        return _CODECS[kind] if kind < len(_CODECS) else codec(kind)  # codec() raises for an unknown id

    @property
    def timestamp_type(self):
        """CREATE_TIME (0) or LOG_APPEND_TIME (1)."""
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self):
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self):
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self):
        """True when compaction has stored its delete horizon in baseTimestamp."""
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def last_offset(self):
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self):
        return self.last_offset + 1

    @property
    def size(self):
        """Bytes the whole batch takes, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_sequence(self):
        """Sequence number of the last record; sequences wrap from int32 max back to 0."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (_INT32_MAX + 1)

    def __repr__(self):
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"BatchHeader({fields})"


class Record:
    """One record as clients see it: absolute offset and timestamp, key, value, headers [(str, bytes|None)]."""

    __slots__ = ("offset", "timestamp", "key", "value", "headers")

    def __init__(self, offset, timestamp, key, value, headers=()):
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = list(headers)

    def _fields(self):
        return self.offset, self.timestamp, self.key, self.value, self.headers

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # mutable, like a list

    def __repr__(self):
        return (f"Record(offset={self.offset!r}, timestamp={self.timestamp!r}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r})")


# --- reading ------------------------------------------------------------------------------------------------------

def check_magic(magic):
    """Raise unless `magic` is 2: InvalidRecordError for a legacy format (0/1), CorruptRecordError otherwise."""
    if magic == MAGIC:
        return
    if magic in (0, 1):
        raise InvalidRecordError(f"found a magic {magic} message set where a v2 record batch was expected")
    raise CorruptRecordError(f"unknown magic byte {magic}")


def read_batch_header(buf, pos=0, *, whole=True):
    """Parse the header of the batch starting at `pos` of `buf`.

    CorruptRecordError when fewer than 61 bytes remain, when batchLength is shorter than the header, or (with
    `whole`, the default) when the batch runs past the end of `buf`. `whole=False` suits a reader that has fetched
    only the header so far. Checks the magic byte (see `check_magic`), not the CRC.
    """
    available = len(buf) - pos
    if available < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(f"record batch header needs {RECORD_BATCH_OVERHEAD} bytes, found {available}")
    header = BatchHeader(*HEADER.unpack_from(buf, pos))
    check_magic(header.magic)
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"batch length {header.batch_length} is shorter than the batch header")
    if whole and header.size > available:
        raise CorruptRecordError(f"batch of {header.size} bytes runs past the end of the data ({available})")
    return header


def batch_crc(buf, end):
    """CRC-32C of attributes..end of the batch at the start of `buf` (computed on a view, not a copy)."""
    with memoryview(buf) as view:
        return crc32c(view[ATTRIBUTES_OFFSET:end])


def validate_batch(buf, *, deep=False, max_size=DEFAULT_MAX_UNCOMPRESSED_SIZE):
    """Check that `buf` holds exactly one sound v2 batch and return its header.

    Checks magic, batchLength against the buffer, the CRC, and that recordsCount is at least 1 and agrees with
    lastOffsetDelta (Kafka refuses empty batches on produce). Uncompressed records are then walked: each must parse
    and carry offset delta 0, 1, ... in order, and their number must equal recordsCount. Compressed records are only
    walked with `deep=True`, after bounded decompression (`max_size`). A compressed control batch is invalid.
    Raises CorruptRecordError for damaged bytes and InvalidRecordError for rule violations.
    """
    view = memoryview(buf)
    header = read_batch_header(view)
    if header.size != len(view):
        raise CorruptRecordError(f"batch length says {header.size} bytes, the buffer holds {len(view)}")
    check_batch_fields(view, header)
    kind = header.compression
    if kind == Compression.NONE:
        _check_records(view[RECORDS_OFFSET:], header.count)
    elif deep:
        body = decompress(kind, view[RECORDS_OFFSET:], max_size=max_size)
        _check_records(memoryview(body), header.count)
    return header


def check_batch_crc(view, header: BatchHeader) -> None:
    """Raise CorruptRecordError unless the CRC-32C over the batch's bytes matches its header: one pass over the
    bytes, the only one on the produce path. `view` is a memoryview of the whole batch."""
    crc = crc32c(view[ATTRIBUTES_OFFSET:header.batch_length + LOG_OVERHEAD])
    if crc != header.crc:
        raise CorruptRecordError(f"batch CRC is {header.crc:#010x}, computed {crc:#010x}")


def check_batch_fields(view, header: BatchHeader) -> None:
    """The batch-level checks of `validate_batch`, without walking the records: the CRC, recordsCount at least 1
    and agreeing with lastOffsetDelta, and no compressed control batch. `view` is a memoryview of the whole batch."""
    check_batch_crc(view, header)
    count = header.count
    if count < 0:
        raise CorruptRecordError(f"negative record count {count}")
    if count == 0 or header.last_offset_delta != count - 1:
        raise InvalidRecordError(f"record count {count} disagrees with last offset delta {header.last_offset_delta}")
    if header.attributes & CONTROL_MASK and header.compression != Compression.NONE:
        raise InvalidRecordError("control batches must not be compressed")


def _skip_bytes(data, pos):
    """Skip a varint-length-prefixed byte field (length -1 is null)."""
    length, pos = read_varint(data, pos)
    if length < -1:
        raise CorruptRecordError(f"negative field length {length}")
    return pos + max(length, 0)


def _check_records(data, count):
    """Walk `count` records in `data` without copying them; offset deltas must run 0..count-1."""
    end, pos = len(data), 0
    for index in range(count):
        if pos >= end:
            raise InvalidRecordError(f"batch says {count} records, holds {index}")
        length, pos = read_varint(data, pos)
        record_end = pos + length
        if length <= 0 or record_end > end:
            raise CorruptRecordError(f"record length {length} does not fit the batch")
        _, pos = read_varlong(data, pos + 1)  # past attributes: the timestamp delta
        delta, pos = read_varint(data, pos)
        if delta != index:
            raise InvalidRecordError(f"record {index} has offset delta {delta}")
        pos = _skip_bytes(data, _skip_bytes(data, pos))  # key, value
        header_count, pos = read_varint(data, pos)
        if header_count < 0:
            raise CorruptRecordError(f"negative header count {header_count}")
        for _ in range(header_count):
            key_length, pos = read_varint(data, pos)
            if key_length < 0:
                raise CorruptRecordError("null header key")
            pos = _skip_bytes(data, pos + key_length)
            if pos > record_end:
                break
        if pos != record_end:
            raise CorruptRecordError(f"record {index} fields do not add up to its length {length}")
    if pos != end:
        raise InvalidRecordError(f"bytes left after the {count} records the batch declares")


def iter_batches(records_buf, *, allow_partial_tail=False):
    """Yield (position, BatchHeader) for each v2 batch in a buffer holding several back to back.

    Only headers are read: use `validate_batch` on a slice to check a batch. A batch cut short at the end of the
    buffer raises CorruptRecordError, or ends the iteration with `allow_partial_tail` (Fetch responses may end with
    a partial batch, which clients skip).
    """
    view = memoryview(records_buf)
    end, pos = len(view), 0
    while pos < end:
        if end - pos >= LOG_OVERHEAD:
            (length,) = _INT32.unpack_from(view, pos + LENGTH_OFFSET)
            if length < MIN_BATCH_LENGTH:
                raise CorruptRecordError(f"batch length {length} at position {pos} is shorter than its header")
            if pos + LOG_OVERHEAD + length <= end:
                header = read_batch_header(view, pos)
                yield pos, header
                pos += header.size
                continue
        if allow_partial_tail:
            return
        raise CorruptRecordError(f"partial batch of {end - pos} bytes at the end of the data")


# --- in-place updates ---------------------------------------------------------------------------------------------

def stamp_batch(buf, base_offset, partition_leader_epoch):
    """Write baseOffset and partitionLeaderEpoch into the batch at the start of the writable `buf`.

    Both lie before the CRC range, so the CRC stays valid.
    """
    if len(buf) < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(f"record batch header needs {RECORD_BATCH_OVERHEAD} bytes, found {len(buf)}")
    _INT64.pack_into(buf, BASE_OFFSET_OFFSET, base_offset)
    _INT32.pack_into(buf, PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)


def set_log_append_time(buf, timestamp_ms):
    """Mark the batch at the start of the writable `buf` as LogAppendTime at `timestamp_ms`, and fix its CRC.

    As Kafka does, maxTimestamp becomes the append time and baseTimestamp and the record deltas stay; readers then
    report maxTimestamp for every record.
    """
    header = read_batch_header(buf)
    _INT16.pack_into(buf, ATTRIBUTES_OFFSET, header.attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, MAX_TIMESTAMP_OFFSET, timestamp_ms)
    _UINT32.pack_into(buf, CRC_OFFSET, batch_crc(buf, header.size))


# --- decoding records ---------------------------------------------------------------------------------------------

def records_body(batch_buf, header, *, max_size):
    """The records section of a batch, decompressed (bounded by `max_size`) when needed; a memoryview or bytes."""
    body = memoryview(batch_buf)[RECORDS_OFFSET:header.size]
    kind = header.compression
    if kind == Compression.NONE:
        return body
    return decompress(kind, body, max_size=max_size)


def iter_records(batch_buf, *, max_size):
    """Yield the `Record`s of the single batch in `batch_buf`, decompressing (bounded by `max_size`) if needed.

    Does not check the CRC (see `validate_batch`) but does check that every record parses and that the record
    count holds; offsets are baseOffset + offset delta, timestamps are baseTimestamp + delta, or maxTimestamp for
    every record of a LogAppendTime batch.
    """
    view = memoryview(batch_buf)
    header = read_batch_header(view)
    if header.size != len(view):
        raise CorruptRecordError(f"batch length says {header.size} bytes, the buffer holds {len(view)}")
    if header.count < 0:
        raise CorruptRecordError(f"negative record count {header.count}")
    data = memoryview(records_body(view, header, max_size=max_size))
    end, pos = len(data), 0
    for index in range(header.count):
        if pos >= end:
            raise InvalidRecordError(f"batch says {header.count} records, holds {index}")
        record, pos = _decode_record(data, pos, header)
        yield record
    if pos != end:
        raise InvalidRecordError(f"bytes left after the {header.count} records the batch declares")


def _read_bytes(data, pos):
    length, pos = read_varint(data, pos)
    if length < 0:
        if length != -1:
            raise CorruptRecordError(f"negative field length {length}")
        return None, pos
    end = pos + length
    if end > len(data):
        raise CorruptRecordError("field runs past the end of the records")
    return bytes(data[pos:end]), end


def _decode_record(data, pos, header):
    length, pos = read_varint(data, pos)
    record_end = pos + length
    if length <= 0 or record_end > len(data):
        raise CorruptRecordError(f"record length {length} does not fit the batch")
    timestamp_delta, pos = read_varlong(data, pos + 1)  # past attributes
    offset_delta, pos = read_varint(data, pos)
    key, pos = _read_bytes(data, pos)
    value, pos = _read_bytes(data, pos)
    header_count, pos = read_varint(data, pos)
    if header_count < 0:
        raise CorruptRecordError(f"negative header count {header_count}")
    headers = []
    for _ in range(header_count):
        header_key, pos = _read_bytes(data, pos)
        if header_key is None:
            raise CorruptRecordError("null header key")
        header_value, pos = _read_bytes(data, pos)
        try:
            headers.append((header_key.decode("utf-8"), header_value))
        except UnicodeDecodeError:
            raise CorruptRecordError("header key is not UTF-8") from None
        if pos > record_end:
            break
    if pos != record_end:
        raise CorruptRecordError(f"record fields do not add up to its length {length}")
    if header.timestamp_type == LOG_APPEND_TIME:
        timestamp = header.max_timestamp
    else:
        timestamp = header.base_timestamp + timestamp_delta
    return Record(header.base_offset + offset_delta, timestamp, key, value, headers), pos


# --- building -----------------------------------------------------------------------------------------------------

def record_fields(record):
    """(key, value, headers, timestamp) of a `Record`-like object or of such a tuple; a None timestamp is -1."""
    if isinstance(record, tuple):
        key, value, headers, timestamp = record
    else:
        key, value, headers, timestamp = record.key, record.value, record.headers, record.timestamp
    return key, value, headers or (), NO_TIMESTAMP if timestamp is None else timestamp


def _bytes_size(data):
    return 1 if data is None else varint_size(len(data)) + len(data)


def _write_bytes(out, data):
    if data is None:
        write_varint(out, -1)
    else:
        write_varint(out, len(data))
        out += data


def _write_record(out, offset_delta, timestamp_delta, key, value, headers):
    encoded = [(k.encode("utf-8") if isinstance(k, str) else bytes(k), v) for k, v in headers]
    size = (1 + varint_size(timestamp_delta) + varint_size(offset_delta) + _bytes_size(key) + _bytes_size(value)
            + varint_size(len(encoded)) + sum(_bytes_size(k) + _bytes_size(v) for k, v in encoded))
    write_varint(out, size)
    out.append(0)  # record attributes: unused
    write_varlong(out, timestamp_delta)
    write_varint(out, offset_delta)
    _write_bytes(out, key)
    _write_bytes(out, value)
    write_varint(out, len(encoded))
    for header_key, header_value in encoded:
        _write_bytes(out, header_key)
        _write_bytes(out, header_value)


def build_batch(records, *, base_offset=0, compression=Compression.NONE, timestamp_type=CREATE_TIME,
                producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH, base_sequence=NO_SEQUENCE,
                is_transactional=False, is_control=False, partition_leader_epoch=NO_PARTITION_LEADER_EPOCH):
    """Encode records into one v2 batch with a valid CRC and return its bytes.

    `records` are `Record`-like objects or (key, value, headers, timestamp) tuples; record i gets offset
    base_offset + i (a `Record`'s own offset is ignored). baseTimestamp is the first record's timestamp and
    maxTimestamp the largest. The records are compressed as one block with `compression`, even if that does not
    make them smaller.
    """
    entries = [record_fields(record) for record in records]
    if not entries:
        raise ValueError("a record batch needs at least one record")
    kind = codec(compression)
    if is_control and kind != Compression.NONE:
        raise InvalidRecordError("control batches must not be compressed")
    base_timestamp = entries[0][3]
    max_timestamp = max(entry[3] for entry in entries)
    body = bytearray(RECORD_BATCH_OVERHEAD)
    for index, (key, value, headers, timestamp) in enumerate(entries):
        _write_record(body, index, timestamp - base_timestamp, key, value, headers)
    if kind != Compression.NONE:
        with memoryview(body) as view:
            packed = compress(kind, view[RECORDS_OFFSET:])
        body = bytearray(RECORD_BATCH_OVERHEAD) + packed
    attributes = (kind | (TIMESTAMP_TYPE_MASK if timestamp_type == LOG_APPEND_TIME else 0)
                  | (TRANSACTIONAL_MASK if is_transactional else 0) | (CONTROL_MASK if is_control else 0))
    HEADER.pack_into(body, 0, base_offset, len(body) - LOG_OVERHEAD, partition_leader_epoch, MAGIC, 0, attributes,
                     len(entries) - 1, base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence,
                     len(entries))
    _UINT32.pack_into(body, CRC_OFFSET, batch_crc(body, len(body)))
    return bytes(body)
