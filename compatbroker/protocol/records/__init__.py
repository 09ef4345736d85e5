"""Kafka's record formats: v2 record batches, the legacy v0/v1 message sets, compression, control batches.

Pure functions over bytes-like buffers (no I/O). Validation and in-place stamping work on memoryviews of the
caller's buffer without copying record bytes; see `batch` for the v2 layout and `legacy` for v0/v1.
"""
from .batch import (ATTRIBUTES_OFFSET, BASE_OFFSET_OFFSET, BASE_SEQUENCE_OFFSET, BASE_TIMESTAMP_OFFSET,
                    CONTROL_MASK, CRC_OFFSET, CREATE_TIME, DELETE_HORIZON_MASK, HEADER, LAST_OFFSET_DELTA_OFFSET,
                    LENGTH_OFFSET, LOG_APPEND_TIME, LOG_OVERHEAD, MAGIC_OFFSET, MAX_TIMESTAMP_OFFSET,
                    MIN_BATCH_LENGTH, NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE,
                    NO_TIMESTAMP, PARTITION_LEADER_EPOCH_OFFSET, PRODUCER_EPOCH_OFFSET, PRODUCER_ID_OFFSET,
                    RECORD_BATCH_OVERHEAD, RECORDS_COUNT_OFFSET, RECORDS_OFFSET, TIMESTAMP_TYPE_MASK,
                    TRANSACTIONAL_MASK, BatchHeader, Record, batch_crc, build_batch, check_batch_fields, check_magic,
                    iter_batches,
                    iter_records, read_batch_header, records_body, set_log_append_time, stamp_batch,
                    validate_batch)
from .compression import DEFAULT_MAX_UNCOMPRESSED_SIZE, Compression, compress, decompress
from .control import (ControlRecordType, TransactionMarker, build_control_batch, encode_control_key,
                      encode_marker_value, parse_control_key, parse_control_record)
from .convert import batches_to_legacy, legacy_to_batches
from .errors import CorruptRecordError, InvalidRecordError, UnsupportedCompressionError
from .legacy import (LegacyMessage, build_message_set, encode_messages, iter_legacy_entries, iter_legacy_messages,
                     validate_message_set)
from .varint import read_varint, read_varlong, varint_size, write_varint, write_varlong

__all__ = [
    "ATTRIBUTES_OFFSET", "BASE_OFFSET_OFFSET", "BASE_SEQUENCE_OFFSET", "BASE_TIMESTAMP_OFFSET", "CONTROL_MASK",
    "CRC_OFFSET", "CREATE_TIME", "DEFAULT_MAX_UNCOMPRESSED_SIZE", "DELETE_HORIZON_MASK", "HEADER",
    "LAST_OFFSET_DELTA_OFFSET", "LENGTH_OFFSET", "LOG_APPEND_TIME", "LOG_OVERHEAD", "MAGIC_OFFSET",
    "MAX_TIMESTAMP_OFFSET", "MIN_BATCH_LENGTH", "NO_PARTITION_LEADER_EPOCH", "NO_PRODUCER_EPOCH", "NO_PRODUCER_ID",
    "NO_SEQUENCE", "NO_TIMESTAMP", "PARTITION_LEADER_EPOCH_OFFSET", "PRODUCER_EPOCH_OFFSET", "PRODUCER_ID_OFFSET",
    "RECORD_BATCH_OVERHEAD", "RECORDS_COUNT_OFFSET", "RECORDS_OFFSET", "TIMESTAMP_TYPE_MASK", "TRANSACTIONAL_MASK",
    "BatchHeader", "Compression", "ControlRecordType", "CorruptRecordError", "InvalidRecordError", "LegacyMessage",
    "Record", "TransactionMarker", "UnsupportedCompressionError",
    "batch_crc", "batches_to_legacy", "build_batch", "build_control_batch", "build_message_set", "check_batch_fields",
    "check_magic",
    "compress", "decompress", "encode_control_key", "encode_marker_value", "encode_messages", "iter_batches",
    "iter_legacy_entries", "iter_legacy_messages", "iter_records", "legacy_to_batches", "parse_control_key",
    "parse_control_record", "read_batch_header", "read_varint", "read_varlong", "records_body",
    "set_log_append_time", "stamp_batch", "validate_batch", "validate_message_set", "varint_size", "write_varint",
    "write_varlong",
]
