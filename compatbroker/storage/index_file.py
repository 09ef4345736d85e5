"""The fixed-width index files that `OffsetIndex` and `TimeIndex` share.

Kafka's layout: a flat array of big-endian entries, no header; a file on disk is exactly its entries.

An index lives in one of two places, so that it holds no file descriptor while it is not in use:
- in memory (the active segment's, and one being rebuilt by recovery): a bytearray that entries are appended to.
  `persist` writes what is new since its last call to the file (opened by path, written, closed); the segment calls
  it when it is flushed, sealed or closed. A crash loses at most entries written since the last flush: the active
  segment is always recovered after a crash, and recovery rebuilds its indexes from the log.
- mapped (a sealed segment's): the file is memory-mapped read-only on first use and its descriptor closed at once
  (CPython before 3.13 keeps a duplicate of it inside the mapping; from 3.13 none is kept). `release` drops the
  mapping; a lookup running in another thread keeps the mapping it took alive until it is done.

Lookups binary-search the bytes with `struct.unpack_from`; entries are never copied into Python lists.

Concurrency: appends and truncations run on the event loop; `persist` may run in a flush thread meanwhile. It
copies the new entries under a small lock, and a truncation that overlaps it makes it keep its bookkeeping, so the
next persist rewrites from the truncation point and no stale entry is ever counted as written.
"""
from __future__ import annotations

import mmap
import os
import struct
import sys
import threading
from collections.abc import Callable

from .checkpoints import fsync_path

_MMAP_OPTIONS = {"trackfd": False} if sys.version_info >= (3, 13) else {}


class IndexCorruptError(Exception):
    """An index file fails its sanity check; the segment's indexes must be rebuilt from the log."""


class IndexFile:
    """Shared machinery: entries in memory or mapped, append, binary search, truncate, persist, rename, delete."""

    ENTRY: struct.Struct  # set by subclasses

    def __init__(self, path: str, base_offset: int, max_index_size: int, *, in_memory: bool,
                 on_map: Callable[[], None] | None = None):
        """An index at `path`. `in_memory` reads the file (if any) into memory to append to; otherwise the file is
        mapped on first use, and `on_map` is called each time it is (the segment counts its open handles)."""
        self.path = path
        self.base_offset = base_offset
        self._entry_size = self.ENTRY.size
        self._max_size = max_index_size - max_index_size % self._entry_size
        self._on_map = on_map
        self._data: bytearray | mmap.mmap | bytes | None = None
        self._lock = threading.Lock()  # the in-memory entries against a persist running in a flush thread
        self._write_lock = threading.Lock()  # one persist at a time
        self._persisted = 0  # bytes at the front of the entries known to be in the file as they are in memory
        self._truncations = 0
        self._disk: tuple[int, int] | None = None  # (length, truncations) the file was last written with
        self._synced = False
        self._deleted = False
        if in_memory:
            self.load_in_memory()

    # --- where the entries live -----------------------------------------------------------------------------------

    def create_file(self) -> None:
        """Create the (empty) file now, as Kafka does when it creates a segment."""
        os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
        self._disk, self._synced = (0, self._truncations), False

    def load_in_memory(self) -> None:
        """Read the file's whole entries into memory to append to (a missing file is an empty index)."""
        if isinstance(self._data, bytearray):
            return
        try:
            with open(self.path, "rb") as source:
                data = bytearray(source.read())
            disk = (len(data), self._truncations)
        except FileNotFoundError:
            data, disk = bytearray(), None  # the next persist creates the file
        del data[len(data) - len(data) % self._entry_size:]
        with self._lock:
            self._data = data
            self._persisted = len(data)
            self._disk = disk

    def start_empty(self) -> None:
        """Hold no entries, in memory, without reading the file (the index of an empty log can hold none); the next
        persist empties the file."""
        with self._lock:
            self._data = bytearray()
            self._persisted = 0
            self._disk = None

    @property
    def in_memory(self) -> bool:
        return isinstance(self._data, bytearray)

    def _view(self):
        """The entries' bytes: the in-memory array, or the mapping (made now if there is none)."""
        data = self._data
        if data is None:
            data = self._map()
        return data

    def _map(self):
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return b""  # a deleted or missing index: no entries (lookups scan the log from its start)
        try:
            length = os.fstat(fd).st_size
            length -= length % self._entry_size
            data = mmap.mmap(fd, length, access=mmap.ACCESS_READ, **_MMAP_OPTIONS) if length else b""
        finally:
            os.close(fd)
        self._data = data
        if self._on_map is not None:
            self._on_map()
        return data

    def release(self) -> None:
        """Drop the mapping of a sealed index (it is mapped again on next use). In-memory entries stay."""
        if not isinstance(self._data, bytearray):
            self._data = None

    def seal(self) -> None:
        """Write the entries to the file and drop them from memory: from now on the file is mapped when used."""
        self.persist(sync=False)
        with self._lock:
            if isinstance(self._data, bytearray):
                self._data = None

    # --- entries --------------------------------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        return len(self._view()) // self._entry_size

    @property
    def max_entries(self) -> int:
        return max(self._max_size // self._entry_size, self.entries)

    @property
    def is_full(self) -> bool:
        return len(self._view()) >= self._max_size  # (appends stop there: entries never pass max_entries)

    @property
    def size_in_bytes(self) -> int:
        return self.entries * self._entry_size

    def entry(self, index: int) -> tuple:
        return self.ENTRY.unpack_from(self._view(), index * self._entry_size)

    def _append_entry(self, *fields) -> None:
        data = self._data
        if not isinstance(data, bytearray):
            raise ValueError(f"index {self.path} is sealed")
        data += self.ENTRY.pack(*fields)

    def _largest_at_most(self, target: int, field: int) -> int:
        """Index of the last entry whose `field` is <= target (entries ascend in that field); -1 if none.

        Offsets and positions grow nearly linearly through a segment, so the search first guesses by
        interpolation, gallops from the guess to bracket the answer, then bisects the bracket: a handful of probes
        whatever the index size, and never worse than about twice a plain binary search.
        """
        unpack, size, mm = self.ENTRY.unpack_from, self._entry_size, self._view()
        lo, hi = 0, len(mm) // size - 1
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
        """Keep only the first `count` entries of an in-memory index."""
        keep = max(count, 0) * self._entry_size
        with self._lock:
            data = self._data
            if not isinstance(data, bytearray):
                raise ValueError(f"index {self.path} is sealed")
            if keep < len(data):
                del data[keep:]
                self._persisted = min(self._persisted, keep)
                self._truncations += 1

    def reset(self) -> None:
        """Drop every entry and keep the index in memory (recovery rebuilds it)."""
        with self._lock:
            self._data = bytearray()
            self._persisted = 0
            self._truncations += 1

    # --- the file -------------------------------------------------------------------------------------------------

    def persist(self, *, sync: bool) -> None:
        """Make the file hold exactly the in-memory entries (and fsync it with `sync`). Of a sealed index, the file
        is already complete: `sync` fsyncs it once. Safe in a flush thread while the loop appends or truncates."""
        with self._write_lock:
            if self._deleted:
                return
            with self._lock:
                data = self._data
                if not isinstance(data, bytearray):
                    tail = None
                else:
                    start, generation = self._persisted, self._truncations
                    tail = bytes(data[start:])
            try:
                if tail is None:
                    if sync and not self._synced:
                        fsync_path(self.path)
                        self._synced = True
                    return
                self._write(start, tail, generation, sync)
            except FileNotFoundError:
                pass  # the partition directory was renamed for deletion or removed meanwhile

    def _write(self, start: int, tail: bytes, generation: int, sync: bool) -> None:
        length = start + len(tail)
        changed = bool(tail) or self._disk != (length, generation)
        if changed or (sync and not self._synced):
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                if changed:
                    _pwrite_all(fd, tail, start)
                    os.ftruncate(fd, length)
                if sync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            self._synced = sync or (self._synced and not changed)
        self._disk = (length, generation)
        with self._lock:
            if generation == self._truncations:
                self._persisted = max(self._persisted, length)

    def close(self) -> None:
        """Persist in-memory entries (without fsync: the caller flushed first if it wanted) and drop them."""
        self.seal()
        self.release()

    def rename(self, new_path: str) -> None:
        with self._write_lock:
            os.rename(self.path, new_path)
            self.path = new_path

    def delete(self) -> None:
        with self._write_lock:
            self._deleted = True
            self._data = b""
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass


def _pwrite_all(fd: int, data: bytes, position: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view, position = view[written:], position + written


