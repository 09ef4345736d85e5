"""Partition logs in Kafka's on-disk format: segments, indexes, checkpoints, recovery, retention, compaction.

Entry points: `LogManager` (a data directory), `Log` (one partition), `LogConfig` (topic-level settings), and the
`StorageError` subclasses, which carry Kafka error codes.
"""
from .errors import (CorruptMessageError, InvalidRecordError, InvalidTimestampError, LogDirError,
                     MessageTooLargeError, OffsetOutOfRangeError, PolicyViolationError, RecordListTooLargeError,
                     StorageError, UnsupportedCompressionTypeError)
from .log import AppendResult, Log, ReadResult
from .log_config import ConfigError, LogConfig, StorageConfig
from .log_manager import LogManager

__all__ = [
    "AppendResult", "ConfigError", "CorruptMessageError", "InvalidRecordError", "InvalidTimestampError", "Log",
    "LogConfig", "LogDirError", "LogManager", "MessageTooLargeError", "OffsetOutOfRangeError", "PolicyViolationError",
    "ReadResult", "RecordListTooLargeError", "StorageConfig", "StorageError", "UnsupportedCompressionTypeError",
]
