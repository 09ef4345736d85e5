"""Retention of `cleanup.policy=delete` logs: whole sealed segments go when they are too old or the log too big.

Kafka's three rules, applied in this order by `apply_retention`:

- time (`retention.ms`, -1 = forever): a segment expires when its largest timestamp (or, when no batch carries a
  timestamp, its file's modification time) is more than `retention.ms` before now;
- size (`retention.bytes`, -1 = unlimited): the oldest segments go while the log stays at or above the limit
  without them;
- log start offset (always, whatever the policy): segments wholly below it (moved by DeleteRecords) go.

Only a prefix of the segment list is ever deleted, never the active segment, and only segments wholly below the
high watermark (Kafka's rule for replicated partitions). Deleted segments are renamed
`.deleted` and unlinked after `file.delete.delay.ms`; the log start offset moves up to the first remaining segment,
and the producer snapshots below it are deleted. Producer state itself outlives its batches, as in Kafka since
KIP-360: a producer whose records retention removed keeps its sequence until `producer.id.expiration.ms`
(`Log.expire_producers`), so its next batch is not refused.
The broker calls `apply_retention` every `log.retention.check.interval.ms`.
"""
from __future__ import annotations

import os

from .log import Log
from .segment import LogSegment


def _largest_timestamp(segment: LogSegment) -> int:
    if segment.max_timestamp_so_far >= 0:
        return segment.max_timestamp_so_far
    return int(os.stat(segment.log_path).st_mtime * 1000)  # by path: no need to open a sealed segment


def expired_segment_count(log: Log, now_ms: int) -> int:
    """How many of the oldest sealed segments are past `retention.ms`."""
    retention_ms = log.config.retention_ms
    if retention_ms < 0:
        return 0
    count = 0
    for segment in log.segments[:-1]:
        if now_ms - _largest_timestamp(segment) <= retention_ms:
            break
        count += 1
    return count


def oversize_segment_count(log: Log) -> int:
    """How many of the oldest sealed segments can go while the log keeps at least `retention.bytes`."""
    retention_bytes = log.config.retention_bytes
    if retention_bytes < 0:
        return 0
    excess = log.size - retention_bytes
    count = 0
    for segment in log.segments[:-1]:
        if excess < segment.size:
            break
        excess -= segment.size
        count += 1
    return count


def below_high_watermark(log: Log, count: int) -> int:
    """`count`, cut to the segments that lie wholly below the high watermark (Kafka deletes nothing that some
    in-sync replica may still lack; with one replica the high watermark is the log end: no cut)."""
    high_watermark, segments = log.high_watermark, log.segments
    while count and segments[count].base_offset > high_watermark:
        count -= 1
    return count


def apply_retention(log: Log, now_ms: int) -> int:
    """Delete what the rules allow; returns the number of segments deleted."""
    deleted = 0
    if log.config.delete:
        deleted += log.delete_oldest_segments(below_high_watermark(log, expired_segment_count(log, now_ms)), now_ms)
        deleted += log.delete_oldest_segments(below_high_watermark(log, oversize_segment_count(log)), now_ms)
    deleted += log.delete_segments_below_start(now_ms)
    log.remove_deleted_segments(now_ms)
    return deleted
