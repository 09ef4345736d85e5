"""Conversion between the legacy message sets (magic 0/1) and v2 record batches.

Up-conversion lets the log keep a single format when old producers write; down-conversion serves old fetchers
that cannot read v2. A v2 batch needs consecutive offsets and one timestamp type, so legacy messages are grouped
into runs with both; each compressed wrapper starts its own run and keeps its codec.
"""
from .batch import CREATE_TIME, build_batch, iter_batches, iter_records
from .compression import Compression
from .legacy import encode_messages, iter_legacy_entries


def _follows(previous, message):
    return message.offset == previous.offset + 1 and message.timestamp_type == previous.timestamp_type


def _runs(message_set_buf, max_size):
    """Yield (compression, [LegacyMessage]) runs that can each become one v2 batch."""
    run, run_codec = [], Compression.NONE
    for kind, messages in iter_legacy_entries(message_set_buf, max_size=max_size):
        wrapped = kind != Compression.NONE
        starts_batch = wrapped  # each wrapper gets its own batch, whatever its inner offsets say
        for message in messages:
            if run and (starts_batch or kind != run_codec or not (wrapped or _follows(run[-1], message))):
                yield run_codec, run
                run = []
            starts_batch = False
            run.append(message)
            run_codec = kind
    if run:
        yield run_codec, run


def legacy_to_batches(message_set_buf, *, max_size):
    """Convert a v0/v1 message set into v2 batches, returned back to back as bytes.

    Uncompressed messages become one batch per run of consecutive offsets; a compressed wrapper becomes exactly one
    batch with the same codec: Kafka ignores the offsets inside a wrapper a client sends (sarama gives every inner
    message of a magic 0 wrapper offset 0), so the records get consecutive offsets from the first one. Magic 0 has
    no timestamps, so they become -1 with CreateTime; magic 1 keeps its timestamps and timestamp type. Offsets are
    kept; the broker restamps them.
    """
    out = bytearray()
    for kind, run in _runs(message_set_buf, max_size):
        timestamp_type = run[0].timestamp_type or CREATE_TIME
        out += build_batch([(m.key, m.value, (), m.timestamp) for m in run], base_offset=run[0].offset,
                           compression=kind, timestamp_type=timestamp_type)
    return bytes(out)


def batches_to_legacy(records_buf, magic, *, max_size, allow_partial_tail=False):
    """Convert v2 batches into a v0/v1 message set for fetchers that predate v2.

    Offsets and compression are kept (one wrapper per compressed batch; zstd cannot be expressed and raises
    UnsupportedCompressionError), record headers are dropped, and control batches are left out, as Kafka does.
    Magic 1 keeps timestamps and the batch's timestamp type; magic 0 drops both.
    """
    view = memoryview(records_buf)
    out = bytearray()
    for pos, header in iter_batches(view, allow_partial_tail=allow_partial_tail):
        if header.is_control:
            continue
        batch = view[pos:pos + header.size]
        messages = [(r.offset, r.timestamp, r.key, r.value) for r in iter_records(batch, max_size=max_size)]
        if messages:
            out += encode_messages(messages, magic, header.compression, timestamp_type=header.timestamp_type)
    return bytes(out)
