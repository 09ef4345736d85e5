"""Broker-side compression: a topic whose `compression.type` names a codec stores every batch with that codec.

`compression.type` is "producer" by default, which keeps each batch as the producer compressed it. Any other value
("uncompressed", "gzip", "snappy", "lz4", "zstd") makes the broker re-encode a batch whose codec differs, as Kafka
does. Re-encoding checks the batch first (its CRC, then every record, so that a damaged batch is refused rather
than given a fresh CRC), decompresses the records section and compresses it again with the topic's codec. The
records keep their bytes exactly: offset and timestamp deltas, keys, values and headers; the batch keeps its header
(base timestamp, max timestamp, producer id, epoch and base sequence, the transactional and timestamp-type bits)
except the codec bits, the length and the CRC. Control batches are never compressed and stay as they are.

Deviation: the codec's default level is used; `compression.gzip.level`, `compression.lz4.level` and
`compression.zstd.level` are accepted and reported but do not change the output.
"""
from __future__ import annotations

import struct

from ..protocol.records.batch import (ATTRIBUTES_OFFSET, CRC_OFFSET, LENGTH_OFFSET, LOG_OVERHEAD, RECORDS_OFFSET,
                                      BatchHeader, batch_crc, records_body, validate_batch)
from ..protocol.records.compression import CODEC_MASK, Compression, compress

PRODUCER = "producer"
_CODECS = {"uncompressed": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY,
           "lz4": Compression.LZ4, "zstd": Compression.ZSTD}

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")


def topic_codec(compression_type: str) -> Compression | None:
    """The codec a topic stores batches with; None for "producer" (keep the producer's)."""
    return _CODECS.get(compression_type)


def needs_recompression(header: BatchHeader, compression_type: str) -> bool:
    codec = topic_codec(compression_type)
    return codec is not None and not header.is_control and header.compression != codec


def recompress(batch, codec: Compression, *, max_size: int) -> bytearray:
    """The single batch in `batch` re-encoded with `codec` (see the module docstring).

    Raises the record package's CorruptRecordError (bad CRC, damaged records or compressed data),
    InvalidRecordError (records that break the batch's rules) or UnsupportedCompressionError."""
    view = memoryview(batch)
    header = validate_batch(view, deep=True, max_size=max_size)
    body = records_body(view, header, max_size=max_size)
    packed = bytes(body) if codec == Compression.NONE else compress(codec, body)
    out = bytearray(RECORDS_OFFSET + len(packed))
    out[:RECORDS_OFFSET] = view[:RECORDS_OFFSET]
    out[RECORDS_OFFSET:] = packed
    _INT32.pack_into(out, LENGTH_OFFSET, len(out) - LOG_OVERHEAD)
    _INT16.pack_into(out, ATTRIBUTES_OFFSET, (header.attributes & ~CODEC_MASK) | codec)
    _UINT32.pack_into(out, CRC_OFFSET, batch_crc(out, len(out)))
    return out
