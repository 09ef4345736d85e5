"""What the compat tests send and what they expect back: records, start positions, comparisons, and a reader of
the batch headers the broker stored (to see which codec and format a client really used)."""
from __future__ import annotations

import dataclasses
import struct
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

ONE_MIB = 1024 * 1024
# The broker and clients are configured above Kafka's default limit (1 MiB + 12 bytes), which a 1 MiB value plus its
# record and batch overhead would exceed.
MAX_MESSAGE_BYTES = 4 * ONE_MIB
CODECS = ("gzip", "snappy", "lz4", "zstd")
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}  # attributes & 0x07 of a v2 batch


@dataclasses.dataclass(frozen=True)
class Record:
    """A record as a producer is asked to send it."""
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int | None = None  # ms; None: the client stamps it
    partition: int | None = None  # None: the client's partitioner picks


@dataclasses.dataclass(frozen=True)
class Consumed:
    """A record as a consumer received it."""
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int

    def short(self) -> str:
        value = self.value if self.value is None or len(self.value) <= 40 else self.value[:40] + b"..."
        return f"p{self.partition}@{self.offset} key={self.key!r} value={value!r} h={self.headers} ts={self.timestamp}"


# --- where a consumer starts ---------------------------------------------------------------------------------------

EARLIEST = "earliest"
LATEST = "latest"


@dataclasses.dataclass(frozen=True)
class AtOffset:
    offset: int


@dataclasses.dataclass(frozen=True)
class AtTimestamp:
    """Start at the first record with a timestamp >= `timestamp` (ListOffsets by timestamp)."""
    timestamp: int


# --- record sets ---------------------------------------------------------------------------------------------------

def now_ms() -> int:
    return int(time.time() * 1000)


def record_shapes(base_ts: int, *, timestamps: bool = True, binary: bool = True, binary_headers: bool = True,
                  null_header: bool = False) -> list[Record]:
    """Keys, a null key, an empty key and value, a null value, headers (a repeated name, an empty value, binary and
    null values) and explicit timestamps.

    Timestamps sit in the recent past: Kafka refuses timestamps too far in the future, and old ones would make the
    log eligible for time-based retention. Repeated header names are adjacent because kafkajs passes headers as an
    object. The flags drop what a client cannot express: `timestamps` (kcat stamps records itself), `binary` (kcat
    reads text lines, where an empty key or value means null), `binary_headers` (kcat prints headers as
    `name=value` text) and `null_header` (only aiokafka and confluent-kafka can send a null header value)."""
    headers = [("trace-id", b"abc123"), ("trace-id", b"second"), ("empty", b"")]
    if binary_headers:
        headers.append(("bin", b"\x00\x01,=|\n\xfe\xff"))
    if null_header:
        headers.append(("null-value", None))
    records = [
        Record(b"key-1", b"value-1"),
        Record(None, b"a record without a key"),
        Record(b"tombstone", None),
        Record(b"key-4", b"with headers", tuple(headers)),
        Record(b"key-5", b"compatbroker " * 50),
    ]
    if binary:
        records += [Record(b"", b""), Record(b"binary\x00\xff\n", bytes(range(256)))]
    if timestamps:
        offsets = [0, 1, 2, 3, 1000, 1001, 1002]
        records = [dataclasses.replace(r, timestamp=base_ts + d) for r, d in zip(records, offsets)]
    return records


def shapes_for_producer(client, base_ts: int) -> list[Record]:
    """record_shapes() with everything the producing client can express."""
    return record_shapes(base_ts, timestamps=client.expressive, binary=client.expressive,
                         binary_headers=client.expressive, null_header=client.sends_null_header)


def numbered(count: int, prefix: str = "r", *, key_every: int = 0, size: int = 0) -> list[Record]:
    """`count` simple records: values `<prefix>-<i>` (padded to `size`), keys `k-<i % key_every>` if asked."""
    records = []
    for i in range(count):
        value = f"{prefix}-{i}".encode()
        value += b"." * max(0, size - len(value))
        key = f"k-{i % key_every}".encode() if key_every else None
        records.append(Record(key, value))
    return records


# --- comparing -----------------------------------------------------------------------------------------------------

def assert_same(sent: Sequence[Record], got: Sequence[Consumed], *, stamped_between: tuple[int, int] | None = None):
    """`got` holds exactly `sent`, in order: keys, values, headers, and timestamps (explicit ones exactly; client
    stamped ones within `stamped_between`, widened by a second for clock granularity)."""
    assert len(got) == len(sent), f"sent {len(sent)} records, got {len(got)}: {[g.short() for g in got][:10]}"
    for i, (want, have) in enumerate(zip(sent, got)):
        where = f"record {i} ({have.short()})"
        assert have.key == want.key, f"{where}: key {have.key!r} != {want.key!r}"
        assert have.value == want.value, f"{where}: value differs (len {_len(have.value)} != {_len(want.value)})"
        assert have.headers == want.headers, f"{where}: headers {have.headers} != {want.headers}"
        if want.timestamp is not None:
            assert have.timestamp == want.timestamp, f"{where}: timestamp {have.timestamp} != {want.timestamp}"
        elif stamped_between is not None:
            low, high = stamped_between
            assert low - 1000 <= have.timestamp <= high + 1000, f"{where}: timestamp not in [{low}, {high}]"


def _len(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def by_partition(got: Iterable[Consumed]) -> dict[int, list[Consumed]]:
    """Records per partition in offset order; asserts offsets never repeat."""
    result: dict[int, list[Consumed]] = {}
    for record in sorted(got, key=lambda r: (r.partition, r.offset)):
        result.setdefault(record.partition, []).append(record)
    for partition, records in result.items():
        offsets = [r.offset for r in records]
        assert len(set(offsets)) == len(offsets), f"partition {partition}: repeated offsets {offsets}"
    return result


def java_partition(key: bytes, partitions: int) -> int:
    """The partition Kafka's Java client (and every murmur2 partitioner) picks for a key."""
    from kafka.partitioner.default import murmur2
    return (murmur2(key) & 0x7FFFFFFF) % partitions


# --- what the broker stored ----------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class StoredBatch:
    base_offset: int
    magic: int
    codec: int
    records: int
    producer_id: int
    control: bool = False  # a transaction marker (attributes bit 5)


_BATCH_HEADER = struct.Struct(">qiib")  # base offset, length, leader epoch (v2) or crc (v0/1), magic
_ATTRIBUTES = struct.Struct(">h")  # at byte 21 of a v2 batch
_PRODUCER_ID = struct.Struct(">q")  # at byte 43
_RECORD_COUNT = struct.Struct(">i")  # at byte 57


def stored_batches(segment_files: Sequence[Path]) -> list[StoredBatch]:
    """Headers of the batches in a partition's segment files, read straight from disk (Kafka's v2 layout)."""
    batches = []
    for path in segment_files:
        data = path.read_bytes()
        position = 0
        while position + 61 <= len(data):
            base_offset, length, _epoch, magic = _BATCH_HEADER.unpack_from(data, position)
            if length <= 0:
                break  # preallocated tail
            if magic == 2:
                attributes = _ATTRIBUTES.unpack_from(data, position + 21)[0]
                batches.append(StoredBatch(base_offset, magic, attributes & 0x07,
                                           _RECORD_COUNT.unpack_from(data, position + 57)[0],
                                           _PRODUCER_ID.unpack_from(data, position + 43)[0],
                                           bool(attributes & 0x20)))
            else:
                batches.append(StoredBatch(base_offset, magic, data[position + 17] & 0x07, 1, -1))  # magic 0/1 message
            position += 12 + length
    return batches
