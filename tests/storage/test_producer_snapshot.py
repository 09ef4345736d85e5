"""Producer snapshot files: Kafka's version 1 layout byte for byte, round trips, and every kind of damage caught."""
import os
import struct

import pytest
from crc32c import crc32c
from hypothesis import given
from hypothesis import strategies as st

from compatbroker.storage.errors import CorruptSnapshotError
from compatbroker.storage.producer_snapshot import (SnapshotEntry, decode_snapshot, encode_snapshot, read_snapshot,
                                                    snapshot_offsets, snapshot_path, write_snapshot)

ENTRY = SnapshotEntry(producer_id=4000, producer_epoch=3, last_sequence=41, last_offset=1234, offset_delta=9,
                      timestamp=1_700_000_000_123, coordinator_epoch=7, current_txn_first_offset=1200)

INT64 = st.integers(-2**63, 2**63 - 1)
INT32 = st.integers(-2**31, 2**31 - 1)
ENTRIES = st.lists(st.builds(SnapshotEntry, INT64, st.integers(-2**15, 2**15 - 1), INT32, INT64, INT32, INT64,
                             INT32, INT64), max_size=20)


def test_the_checksum_is_crc32c():
    assert crc32c(b"123456789") == 0xE3069283  # the Castagnoli check value; CRC-32 would give 0xCBF43926


def test_layout_is_kafkas_version_1():
    """Fields in the order of Kafka's snapshot schema, each written out by hand here."""
    body = (struct.pack(">i", 1)  # one entry
            + struct.pack(">q", 4000) + struct.pack(">h", 3) + struct.pack(">i", 41) + struct.pack(">q", 1234)
            + struct.pack(">i", 9) + struct.pack(">q", 1_700_000_000_123) + struct.pack(">i", 7)
            + struct.pack(">q", 1200))
    expected = struct.pack(">h", 1) + struct.pack(">I", crc32c(body)) + body
    assert encode_snapshot([ENTRY]) == expected
    assert len(expected) == 2 + 4 + 4 + 46


def test_an_empty_snapshot_is_ten_bytes():
    data = encode_snapshot([])
    assert data == b"\x00\x01" + struct.pack(">I", crc32c(b"\x00\x00\x00\x00")) + b"\x00\x00\x00\x00"
    assert decode_snapshot(data) == []


@given(ENTRIES)
def test_round_trip(entries):
    assert decode_snapshot(encode_snapshot(entries)) == entries


@given(ENTRIES.filter(bool), st.data())
def test_any_flipped_byte_is_caught(entries, data):
    encoded = bytearray(encode_snapshot(entries))
    position = data.draw(st.integers(0, len(encoded) - 1))
    encoded[position] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(encoded))


@pytest.mark.parametrize("damage", [
    lambda data: data[:-1],  # torn write
    lambda data: data + b"\x00",  # bytes after the entries
    lambda data: b"",  # created, never written
    lambda data: data[:5],  # shorter than the header
    lambda data: b"\x00" * len(data),  # blocks allocated, never written
    lambda data: b"\x00\x02" + data[2:],  # a version this broker does not know
    lambda data: data[:6] + struct.pack(">i", -1) + data[10:],  # negative count
])
def test_damaged_files_are_refused(damage):
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(damage(encode_snapshot([ENTRY, ENTRY._replace(producer_id=5)])))


def test_files_are_named_by_offset_and_written_whole(tmp_path):
    directory = str(tmp_path)
    write_snapshot(snapshot_path(directory, 300), [ENTRY], sync=True)
    write_snapshot(snapshot_path(directory, 25), [], sync=False)
    for stray in ("123.snapshot", "00000000000000000300.snapshot.deleted", "00000000000000000300.log"):
        open(os.path.join(directory, stray), "wb").close()
    assert sorted(os.listdir(directory)) == sorted(["00000000000000000025.snapshot", "00000000000000000300.snapshot",
                                                    "123.snapshot", "00000000000000000300.snapshot.deleted",
                                                    "00000000000000000300.log"])  # no .tmp left behind
    assert snapshot_offsets(directory) == [25, 300]
    assert read_snapshot(snapshot_path(directory, 300)) == [ENTRY]
    write_snapshot(snapshot_path(directory, 300), [], sync=True)  # a rewrite replaces the file
    assert read_snapshot(snapshot_path(directory, 300)) == []
