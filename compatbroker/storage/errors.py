"""Errors of the storage layer, each carrying the Kafka error code a handler answers with."""


class StorageError(Exception):
    """Base class; `error_code` is Kafka's code for the failure."""

    error_code = -1  # UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(StorageError):
    error_code = 1


class CorruptMessageError(StorageError):
    error_code = 2


class MessageTooLargeError(StorageError):
    """A batch is larger than `max.message.bytes`."""

    error_code = 10


class RecordListTooLargeError(StorageError):
    """The records of one append do not fit in a segment (`segment.bytes`)."""

    error_code = 18


class InvalidTimestampError(StorageError):
    error_code = 32


class UnsupportedCompressionTypeError(StorageError):
    error_code = 76


class InvalidRecordError(StorageError):
    error_code = 87


class PolicyViolationError(StorageError):
    """DeleteRecords on a partition whose `cleanup.policy` does not include delete."""

    error_code = 44


class LogDirError(StorageError):
    """The data directory is unusable or belongs to another cluster; Kafka answers KAFKA_STORAGE_ERROR."""

    error_code = 56
