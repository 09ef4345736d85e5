"""The time index of a segment (`<base offset>.timeindex`).

Each 12-byte entry is `timestamp int64 | relative offset int32`, big-endian: up to that offset, no batch of the
segment has a larger timestamp. Entries are added with the offset index when the segment's largest timestamp has
grown, so timestamps and offsets both ascend. A lookup finds the last entry at or below a timestamp; the segment
then scans forward for the first batch whose max timestamp reaches it.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from .index_file import IndexCorruptError, IndexFile

NO_TIMESTAMP = -1


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class TimeIndex(IndexFile):
    ENTRY = struct.Struct(">qi")

    @property
    def is_full(self) -> bool:
        """Full one slot early: the last slot is kept for the entry written when the segment is sealed."""
        return len(self._view()) >= self._max_size - self._entry_size

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or (-1, base offset) when empty."""
        count = self.entries
        if not count:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        timestamp, relative = self.entry(count - 1)
        return TimestampOffset(timestamp, self.base_offset + relative)

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp exceeds the last entry's; an equal offset replaces nothing.

        `skip_full_check` is for the final entry written as the segment is sealed, which Kafka lets use the last
        slot even when the regular appends have been stopped by a full index.
        """
        if not skip_full_check and self.is_full:
            raise IndexError(f"time index {self.path} is full ({self.entries} entries)")
        count = self.entries
        if count >= self.max_entries:
            return
        last = self.last_entry
        if count and offset < last.offset:
            raise ValueError(f"time index entry for offset {offset} precedes {last.offset}")
        if timestamp > last.timestamp:
            self._append_entry(timestamp, offset - self.base_offset)

    def lookup(self, timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= `timestamp`, or (-1, base offset) when there is none."""
        found = self._largest_at_most(timestamp, 0)
        if found < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        entry_timestamp, relative = self.entry(found)
        return TimestampOffset(entry_timestamp, self.base_offset + relative)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries for offsets >= `offset` (a linear scan from the end: truncation is rare and short)."""
        count = self.entries
        while count and self.base_offset + self.entry(count - 1)[1] >= offset:
            count -= 1
        self.truncate_entries(count)

    def sanity_check(self, next_offset: int) -> None:
        """Raise IndexCorruptError when entries point at or past `next_offset` or do not ascend."""
        if self.entries == 0:
            return
        timestamp, relative = self.entry(self.entries - 1)
        if relative < 0 or self.base_offset + relative >= next_offset:
            raise IndexCorruptError(f"{self.path}: last entry ({timestamp}, {relative}) is out of range")
        if self.entries > 1:
            prev_timestamp, prev_relative = self.entry(self.entries - 2)
            if prev_timestamp >= timestamp or prev_relative > relative:
                raise IndexCorruptError(f"{self.path}: entries do not ascend")
        first_timestamp, first_relative = self.entry(0)
        if first_relative < 0 or first_relative > relative or first_timestamp > timestamp:
            raise IndexCorruptError(f"{self.path}: first entry ({first_timestamp}, {first_relative}) is out of range")
