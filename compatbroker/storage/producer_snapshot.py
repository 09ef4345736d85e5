"""Producer snapshot files: the producer state of a partition as of an offset, in Kafka's on-disk format.

`<20-digit offset>.snapshot` in the partition directory holds the state built from every batch below that offset,
so loading it and replaying the batches from the offset on rebuilds the state without reading the whole log.
Version 1 of the format, big-endian:

    version int16 (1) | crc uint32 | entry count int32 | entries...

    entry = producer id int64 | producer epoch int16 | last sequence int32 | last offset int64 |
            offset delta int32 | timestamp int64 | coordinator epoch int32 | current txn first offset int64

The CRC-32C covers everything after itself (the count and the entries). `last offset` is the last offset of the
producer's newest batch (-1 when it has none), `offset delta` that batch's last offset minus its first, `timestamp`
the producer's last timestamp, `current txn first offset` -1 outside a transaction. Kafka's own tools read and
write the same bytes, so a data directory can move between the two brokers.

Files are written under a `.tmp` name and renamed into place, so a snapshot is never seen half-written; a file that
fails its checks all the same (a crash before the fsync) raises CorruptSnapshotError, and the caller falls back to
an older snapshot.
"""
from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from typing import NamedTuple

from crc32c import crc32c

from . import checkpoints
from .checkpoints import write_atomically
from .errors import CorruptSnapshotError

VERSION = 1
SNAPSHOT_SUFFIX = ".snapshot"

_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_CRC_START = 6  # the CRC covers the bytes from the entry count on
_CRC = struct.Struct(">I")
_ENTRY = struct.Struct(">qhiqiqiq")


class SnapshotEntry(NamedTuple):
    """One producer as a snapshot stores it."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


def snapshot_path(directory: str, offset: int) -> str:
    return os.path.join(directory, f"{offset:020d}{SNAPSHOT_SUFFIX}")


def snapshot_offsets(directory: str, names: Iterable[str] | None = None) -> list[int]:
    """Offsets of the snapshot files in `directory` (whose file `names` the caller may give), ascending (names that
    are not 20 digits are ignored)."""
    offsets = []
    for name in os.listdir(directory) if names is None else names:
        stem = name[:-len(SNAPSHOT_SUFFIX)]
        if name.endswith(SNAPSHOT_SUFFIX) and len(stem) == 20 and stem.isdigit():
            offsets.append(int(stem))
    return sorted(offsets)


def encode_snapshot(entries: list[SnapshotEntry]) -> bytes:
    body = bytearray(_HEADER.pack(VERSION, 0, len(entries)))
    for entry in entries:
        body += _ENTRY.pack(*entry)
    _CRC.pack_into(body, 2, crc32c(memoryview(body)[_CRC_START:]))
    return bytes(body)


def decode_snapshot(data: bytes) -> list[SnapshotEntry]:
    """The entries of a snapshot; CorruptSnapshotError unless version, length and CRC all check out."""
    if len(data) < _HEADER.size:
        raise CorruptSnapshotError(f"a snapshot needs {_HEADER.size} bytes, found {len(data)}")
    version, crc, count = _HEADER.unpack_from(data)
    if version != VERSION:
        raise CorruptSnapshotError(f"unknown snapshot version {version}")
    if count < 0 or len(data) != _HEADER.size + count * _ENTRY.size:
        raise CorruptSnapshotError(f"{len(data)} bytes cannot hold {count} snapshot entries")
    computed = crc32c(memoryview(data)[_CRC_START:])
    if computed != crc:
        raise CorruptSnapshotError(f"snapshot CRC is {crc:#010x}, computed {computed:#010x}")
    return [SnapshotEntry(*fields) for fields in _ENTRY.iter_unpack(memoryview(data)[_HEADER.size:])]


def read_snapshot(path: str) -> list[SnapshotEntry]:
    with open(path, "rb") as source:
        return decode_snapshot(source.read())


def write_snapshot(path: str, entries: list[SnapshotEntry], *, sync: bool) -> None:
    """Write a snapshot file. With `sync`, the file and its directory entry are durable on return; without, the
    caller fsyncs the file later (see `fsync_path`) and a crash before that at worst leaves a file that fails
    its CRC or is missing."""
    write_atomically(path, encode_snapshot(entries), sync=sync)


def fsync_path(path: str) -> None:
    """fsync a file written earlier without `sync`; a file deleted meanwhile is skipped."""
    try:
        checkpoints.fsync_path(path)
    except FileNotFoundError:
        pass


def delete_snapshot(directory: str, offset: int) -> None:
    try:
        os.unlink(snapshot_path(directory, offset))
    except FileNotFoundError:
        pass
