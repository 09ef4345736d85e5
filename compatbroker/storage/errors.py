"""Errors of the storage layer, each carrying the Kafka error code a handler answers with."""


class StorageError(Exception):
    """Base class; `error_code` is Kafka's code for the failure."""

    error_code = -1  # UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(StorageError):
    error_code = 1


class UnexpectedAppendOffsetError(StorageError):
    """A follower append whose batches do not continue the log: the first starts below the log end offset, or
    offsets go backwards (Kafka's UnexpectedAppendOffsetException and OffsetsOutOfOrderException, internal to the
    broker: the replica fetcher truncates and fetches again)."""


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


class OutOfOrderSequenceError(StorageError):
    """An idempotent producer's batch does not follow the last sequence the partition holds for it (a gap, a new
    epoch that does not start at 0, or a retry too old to be among the batches still remembered)."""

    error_code = 45


class InvalidProducerEpochError(StorageError):
    """A batch carries an epoch older than the producer's current one: a zombie of a fenced producer."""

    error_code = 47


class InvalidTxnStateError(StorageError):
    """A non-transactional batch from a producer whose transaction on this partition is still open."""

    error_code = 48


class TransactionCoordinatorFencedError(StorageError):
    """A transaction marker carries a coordinator epoch older than that of the last marker the partition holds for
    the producer: it comes from a coordinator that has been replaced."""

    error_code = 52


class UnknownProducerIdError(StorageError):
    """The partition holds no state for the producer (never seen, or expired) and the batch does not start a
    sequence at 0, so a gap cannot be ruled out."""

    error_code = 59


class CorruptSnapshotError(StorageError):
    """A producer snapshot file fails its checks; the loader deletes it and falls back to an older one."""
