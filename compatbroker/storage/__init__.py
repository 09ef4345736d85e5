"""Partition logs in Kafka's on-disk format: segments, indexes, checkpoints, recovery, retention, compaction, and
the producer state of idempotent and transactional producers with its snapshot files, and the transaction view of
a partition (open transactions, the last stable offset, the `.txnindex` of aborted transactions).

Entry points: `LogManager` (a node's log directories, several for JBOD), `Log` (one partition's replica, leader or
follower: `append_as_follower`, `update_high_watermark`), `LogConfig` (topic-level settings),
`ProducerStateManager` (a partition's producers, as `Log.producer_state`), and the `StorageError` subclasses, which
carry Kafka error codes.
"""
from .errors import (CorruptMessageError, CorruptSnapshotError, InvalidProducerEpochError, InvalidRecordError,
                     InvalidTimestampError, InvalidTxnStateError, LogDirError, MessageTooLargeError,
                     OffsetOutOfRangeError, OutOfOrderSequenceError, PolicyViolationError, RecordListTooLargeError,
                     StorageError, TransactionCoordinatorFencedError, UnexpectedAppendOffsetError,
                     UnknownProducerIdError, UnsupportedCompressionTypeError)
from .log import AppendResult, Log, ReadResult
from .log_config import ConfigError, LogConfig, StorageConfig
from .log_manager import LogManager
from .producer_state import ProducerStateEntry, ProducerStateManager

__all__ = [
    "AppendResult", "ConfigError", "CorruptMessageError", "CorruptSnapshotError", "InvalidProducerEpochError",
    "InvalidRecordError", "InvalidTimestampError", "InvalidTxnStateError", "Log", "LogConfig", "LogDirError",
    "LogManager", "MessageTooLargeError", "OffsetOutOfRangeError", "OutOfOrderSequenceError", "PolicyViolationError",
    "ProducerStateEntry", "ProducerStateManager", "ReadResult", "RecordListTooLargeError", "StorageConfig",
    "StorageError", "TransactionCoordinatorFencedError", "UnexpectedAppendOffsetError", "UnknownProducerIdError",
    "UnsupportedCompressionTypeError",
]
