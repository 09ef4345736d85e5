"""The memory-mapped, fixed-width index file that `OffsetIndex` and `TimeIndex` share.

Kafka's layout: a flat array of big-endian entries, no header. The index of the active segment is preallocated to
`segment.index.bytes` (rounded down to whole entries) and memory-mapped; entries fill it from the front. When the
segment stops being active (roll, close), the file is trimmed to the entries it holds, which is how a reader
tells used entries from preallocated zeros: a sealed index file is exactly its entries.

Lookups binary-search the mapping with `struct.unpack_from`; entries are never copied into Python lists, so an open
segment costs a mapping, not memory proportional to its entries.
"""
from __future__ import annotations

import mmap
import os
import struct


class IndexCorruptError(Exception):
    """An index file fails its sanity check; the segment's indexes must be rebuilt from the log."""


class IndexFile:
    """Shared machinery: open or create, map, append raw entries, binary search, resize, trim, close."""

    ENTRY: struct.Struct  # set by subclasses

    def __init__(self, path: str, base_offset: int, max_index_size: int, *, preallocate: bool):
        """Open `path` (creating it when missing). With `preallocate`, the file is grown to `max_index_size` so
        entries can be appended; an existing file counts as holding `len // entry size` entries."""
        self.path = path
        self.base_offset = base_offset
        self._entry_size = self.ENTRY.size
        self._max_size = max_index_size - max_index_size % self._entry_size
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        length = os.fstat(self._fd).st_size
        self._entries = length // self._entry_size
        self._mmap: mmap.mmap | None = None
        if preallocate:
            self.resize(max(self._max_size, self._entries * self._entry_size))
        else:
            self._map(length)

    # --- mapping --------------------------------------------------------------------------------------------------

    def _map(self, length: int) -> None:
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None
        self._length = length
        self._max_entries = length // self._entry_size
        if length:
            self._mmap = mmap.mmap(self._fd, length, access=mmap.ACCESS_WRITE)

    def resize(self, new_size: int) -> None:
        """Set the file to `new_size` bytes (whole entries), keeping the entries that still fit."""
        new_size -= new_size % self._entry_size
        os.ftruncate(self._fd, new_size)
        self._entries = min(self._entries, new_size // self._entry_size)
        self._map(new_size)

    def trim_to_valid_size(self) -> None:
        """Shrink the file to the entries it holds: what Kafka does when a segment stops being active."""
        self.resize(self._entries * self._entry_size)

    # --- entries --------------------------------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    @property
    def size_in_bytes(self) -> int:
        """Bytes of the file in use (not the preallocated length)."""
        return self._entries * self._entry_size

    def entry(self, index: int) -> tuple:
        return self.ENTRY.unpack_from(self._mmap, index * self._entry_size)

    def _append_entry(self, *fields) -> None:
        self.ENTRY.pack_into(self._mmap, self._entries * self._entry_size, *fields)
        self._entries += 1

    def _largest_at_most(self, target: int, field: int) -> int:
        """Index of the last entry whose `field` is <= target (entries ascend in that field); -1 if none.

        Offsets and positions grow nearly linearly through a segment, so the search first guesses by
        interpolation, gallops from the guess to bracket the answer, then bisects the bracket: a handful of probes
        whatever the index size, and never worse than about twice a plain binary search.
        """
        unpack, size, mm = self.ENTRY.unpack_from, self._entry_size, self._mmap
        lo, hi = 0, self._entries - 1
        if hi < 0 or unpack(mm, 0)[field] > target:
            return -1
        low_key, high_key = unpack(mm, 0)[field], unpack(mm, hi * size)[field]
        if high_key <= target:
            return hi
        # Invariant from here: key(lo) <= target < key(hi).
        guess = lo + (target - low_key) * (hi - lo) // (high_key - low_key)
        guess = min(max(guess, lo + 1), hi - 1) if hi - lo > 1 else lo
        step = 1
        if unpack(mm, guess * size)[field] <= target:
            while guess + step < hi and unpack(mm, (guess + step) * size)[field] <= target:
                guess += step
                step <<= 1
            lo, hi = guess, min(guess + step, hi)
        else:
            while guess - step > lo and unpack(mm, (guess - step) * size)[field] > target:
                guess -= step
                step <<= 1
            lo, hi = max(guess - step, lo), guess
        while hi - lo > 1:
            mid = (lo + hi) >> 1
            if unpack(mm, mid * size)[field] <= target:
                lo = mid
            else:
                hi = mid
        return lo

    def truncate_entries(self, count: int) -> None:
        """Keep only the first `count` entries (the rest become free space to append into)."""
        self._entries = min(self._entries, count)

    def reset(self) -> None:
        """Drop every entry; the file keeps its length (the active segment's preallocation)."""
        self._entries = 0
        self.resize(max(self._length, self._max_size))

    # --- life cycle -----------------------------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync the file: on Linux this also writes pages dirtied through the mapping. It uses the descriptor,
        not the mapping, so that it can run in a thread while the loop remaps the index (roll, trim)."""
        fd = self._fd
        if fd >= 0:
            try:
                os.fsync(fd)
            except OSError:
                pass  # closed meanwhile: the segment was deleted or the log closed

    def close(self) -> None:
        """Trim and release the mapping and the descriptor."""
        if self._fd < 0:
            return
        self.trim_to_valid_size()
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None
        os.close(self._fd)
        self._fd = -1

    def rename(self, new_path: str) -> None:
        os.rename(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
