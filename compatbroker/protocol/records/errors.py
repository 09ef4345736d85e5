"""Exceptions raised while reading or checking record data.

Each class carries the Kafka error code a handler should answer with, so callers can map a failure to a response
without a lookup table of their own.
"""


class CorruptRecordError(ValueError):
    """The bytes are damaged: a checksum that does not match, a length that runs past the data, truncated input,
    a compressed stream that cannot be decoded. Kafka answers CORRUPT_MESSAGE."""

    error_code = 2


class InvalidRecordError(ValueError):
    """The bytes decode, but break a rule of the format: the header's record count or offset range disagrees with
    the records, a control batch is compressed, a legacy wrapper holds nested compression. Kafka answers
    INVALID_RECORD."""

    error_code = 87


class UnsupportedCompressionError(ValueError):
    """The compression codec id is unknown, or not allowed for this message format (zstd before magic 2).
    Kafka answers UNSUPPORTED_COMPRESSION_TYPE."""

    error_code = 76
