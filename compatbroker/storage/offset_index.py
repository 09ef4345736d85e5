"""The sparse offset index of a segment (`<base offset>.index`).

Each 8-byte entry is `relative offset int32 | file position int32`, big-endian: the batch that starts at that
position of the `.log` file ends at base offset + relative offset. As in Kafka, an entry is written at most every
`index.interval.bytes` of log data, keyed by the last offset of the batch it points at; a lookup finds the nearest
entry at or below an offset and the segment scans batch headers forward from there.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from .index_file import IndexCorruptError, IndexFile


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class OffsetIndex(IndexFile):
    ENTRY = struct.Struct(">ii")

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset when empty."""
        count = self.entries
        if not count:
            return self.base_offset
        return self.base_offset + self.entry(count - 1)[0]

    def append(self, offset: int, position: int) -> None:
        """Add an entry; offsets must ascend. A full index raises IndexError (the segment should have rolled)."""
        count = self.entries
        if count >= self.max_entries:
            raise IndexError(f"offset index {self.path} is full ({count} entries)")
        if count and offset <= self.last_offset:
            raise ValueError(f"index entry for offset {offset} does not follow {self.last_offset}")
        self._append_entry(offset - self.base_offset, position)

    def lookup(self, offset: int) -> OffsetPosition:
        """The entry with the largest offset <= `offset`, or (base offset, 0) when there is none."""
        found = self._largest_at_most(offset - self.base_offset, 0)
        if found < 0:
            return OffsetPosition(self.base_offset, 0)
        relative, position = self.entry(found)
        return OffsetPosition(self.base_offset + relative, position)

    def lookup_by_position(self, position: int) -> OffsetPosition:
        """The entry with the largest position <= `position` (positions ascend like offsets), or (base, 0)."""
        found = self._largest_at_most(position, 1)
        if found < 0:
            return OffsetPosition(self.base_offset, 0)
        relative, entry_position = self.entry(found)
        return OffsetPosition(self.base_offset + relative, entry_position)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries for offsets >= `offset`."""
        self.truncate_entries(self._largest_at_most(offset - self.base_offset - 1, 0) + 1)

    def sanity_check(self, log_size: int) -> None:
        """Raise IndexCorruptError when the file cannot be a trimmed index of a log of `log_size` bytes.

        Like Kafka, only the ends are checked (a full check would read every entry of every segment at start-up).
        """
        if self.entries == 0:
            return
        relative, position = self.entry(self.entries - 1)
        if relative < 0 or position < 0 or position >= log_size:
            raise IndexCorruptError(f"{self.path}: last entry ({relative}, {position}) is out of range")
        if self.entries > 1 and self.entry(self.entries - 2) >= (relative, position):
            raise IndexCorruptError(f"{self.path}: entries do not ascend")
        first_relative, first_position = self.entry(0)
        if first_relative < 0 or first_position < 0 or (first_relative, first_position) > (relative, position):
            raise IndexCorruptError(f"{self.path}: first entry ({first_relative}, {first_position}) is out of range")
