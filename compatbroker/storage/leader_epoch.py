"""The leader epoch cache of a partition, persisted in its `leader-epoch-checkpoint` file.

Each entry says that leader epoch E wrote its first batch at start offset S. Entries ascend in both. The file is
rewritten (atomically) only when an epoch starts or the log is truncated, which is rare.
"""
from __future__ import annotations

import os

from .checkpoints import LEADER_EPOCH_CHECKPOINT, leader_epoch_checkpoint

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, directory: str, *, exists: bool | None = None):
        """`exists`: whether the file is there, when the caller knows (False spares trying to open it)."""
        self._file = leader_epoch_checkpoint(os.path.join(directory, LEADER_EPOCH_CHECKPOINT))
        self._entries: list[tuple[int, int]] = [] if exists is False else self._file.read()

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1][0] if self._entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset`, if it is newer than the latest epoch."""
        if epoch < 0 or (self._entries and epoch <= self._entries[-1][0]):
            return
        self._entries.append((epoch, start_offset))
        self._file.write(self._entries)

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after `end_offset` (the log was truncated there)."""
        kept = [entry for entry in self._entries if entry[1] < end_offset]
        if kept != self._entries:
            self._entries = kept
            self._file.write(kept)

    def clear(self) -> None:
        """Forget every epoch (the log was emptied to continue at a new offset)."""
        if self._entries:
            self._entries = []
            self._file.write([])

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: drop epochs wholly before it and move the one holding it."""
        later = [entry for entry in self._entries if entry[1] > start_offset]
        earlier = [entry for entry in self._entries if entry[1] <= start_offset]
        kept = ([(earlier[-1][0], start_offset)] if earlier else []) + later
        if kept != self._entries:
            self._entries = kept
            self._file.write(kept)

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= `epoch`, the start offset of the epoch after it, or the log end
        offset when it is the latest); (-1, -1) when no epoch is that old."""
        if not self._entries or epoch < self._entries[0][0]:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        for index in range(len(self._entries) - 1, -1, -1):
            entry_epoch = self._entries[index][0]
            if entry_epoch <= epoch:
                if index + 1 < len(self._entries):
                    return entry_epoch, self._entries[index + 1][1]
                return entry_epoch, log_end_offset
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
