"""The aborted-transaction index of a segment: `<20-digit base offset>.txnindex`, in Kafka's on-disk format.

One 34-byte entry per transaction aborted by a marker in the segment, in marker order, big-endian:

    version int16 (0) | producer id int64 | first offset int64 | last offset int64 | last stable offset int64

`first offset` is where the aborted transaction began (possibly in an earlier segment), `last offset` the offset of
its ABORT marker, and `last stable offset` the partition's LSO once the abort completed (the first offset of the
earliest other open transaction, else the marker's offset + 1). A read_committed fetch lists the entries that
overlap the range it returns (`collect_aborted_txns`, Kafka's rule), so consumers can drop aborted data without the
broker reading any record.

The file exists only once an abort lands in the segment, as in Kafka. Appends open the file, write one entry and
close it again: aborts are rare, and a partition keeps no extra descriptor for them. A trailing partial entry (a
crash mid-write) is ignored, as Kafka's reader does; recovery rewrites the entries of recovered segments anyway.
"""
from __future__ import annotations

import os
import struct
from typing import NamedTuple

TXN_INDEX_SUFFIX = ".txnindex"
VERSION = 0

_ENTRY = struct.Struct(">hqqqq")  # 34 bytes
ENTRY_SIZE = _ENTRY.size


class AbortedTxn(NamedTuple):
    """One entry of a `.txnindex` file."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def encode_entry(entry: AbortedTxn) -> bytes:
    return _ENTRY.pack(VERSION, *entry)


def decode_transaction_index(data: bytes) -> list[AbortedTxn]:
    """The entries of an index file's bytes. Reading stops at a partial entry or one of an unknown version (Kafka
    rejects the latter; here the entries before it stay usable and the caller's rebuild fixes the rest)."""
    entries = []
    for position in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        version, *fields = _ENTRY.unpack_from(data, position)
        if version != VERSION:
            break
        entries.append(AbortedTxn(*fields))
    return entries


def read_transaction_index(path: str) -> list[AbortedTxn]:
    """The entries of the index at `path`; [] when the file does not exist."""
    try:
        with open(path, "rb") as source:
            return decode_transaction_index(source.read())
    except FileNotFoundError:
        return []


def write_transaction_index(path: str, entries: list[AbortedTxn]) -> None:
    """Write the whole file (the cleaner's output segments), fsynced."""
    with open(path, "wb") as target:
        target.write(b"".join(encode_entry(entry) for entry in entries))
        target.flush()
        os.fsync(target.fileno())


def append_transaction_index(path: str, entry: AbortedTxn) -> bool:
    """Append one entry, creating the file if needed; returns whether the file was created. Not fsynced: the
    segment's flush does that."""
    created = not os.path.exists(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, encode_entry(entry))
    finally:
        os.close(fd)
    return created


def truncate_transaction_index(path: str, entries: int) -> None:
    """Keep the first `entries` entries of the file (a missing file stays missing)."""
    try:
        os.truncate(path, entries * ENTRY_SIZE)
    except FileNotFoundError:
        pass


def collect_aborted_txns(entries: list[AbortedTxn], fetch_offset: int,
                         upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
    """Kafka's search of one index: the entries overlapping [fetch_offset, upper_bound_offset), and whether the
    search is complete (an entry's last stable offset reached the upper bound: no later segment can hold an abort
    of a transaction that began below it)."""
    found = []
    for entry in entries:
        if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound_offset:
            found.append(entry)
        if entry.last_stable_offset >= upper_bound_offset:
            return found, True
    return found, False
