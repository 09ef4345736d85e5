"""Offset and time indexes: Kafka's byte layout, in-memory entries written to files that are exactly them, mapped
sealed indexes, binary search, sanity checks, and a persist that overlaps truncations."""
import bisect
import os
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compatbroker.storage.index_file import IndexCorruptError
from compatbroker.storage.offset_index import OffsetIndex, OffsetPosition
from compatbroker.storage.time_index import TimeIndex, TimestampOffset


def test_offset_index_layout_and_file_of_exactly_its_entries(tmp_path):
    path = str(tmp_path / "00000000000000000100.index")
    index = OffsetIndex(path, 100, 85, in_memory=True)
    assert not os.path.exists(path) and index.max_entries == 10  # rounded down to whole entries
    index.append(105, 4200)
    index.append(130, 9000)
    index.close()
    with open(path, "rb") as source:
        assert source.read() == struct.pack(">iiii", 5, 4200, 30, 9000)  # trimmed, big-endian, relative
    reopened = OffsetIndex(path, 100, 85, in_memory=False)  # mapped on first use
    assert reopened.entries == 2 and reopened.last_offset == 130
    reopened.close()


def test_offset_index_lookup_is_the_floor_entry(tmp_path):
    index = OffsetIndex(str(tmp_path / "0.index"), 0, 8 * 1000, in_memory=True)
    for n in range(1, 1000):
        index.append(n * 10, n * 100)
    assert index.lookup(5) == OffsetPosition(0, 0)  # before the first entry: the segment start
    assert index.lookup(10) == OffsetPosition(10, 100)
    assert index.lookup(4567) == OffsetPosition(4560, 45600)
    assert index.lookup(10**9) == OffsetPosition(9990, 99900)
    assert index.lookup_by_position(45650) == OffsetPosition(4560, 45600)
    assert index.is_full is False
    index.append(10**4, 10**5)
    assert index.is_full
    with pytest.raises(IndexError):
        index.append(10**4 + 1, 10**5 + 1)
    other = OffsetIndex(str(tmp_path / "1.index"), 0, 80, in_memory=True)
    other.append(5, 50)
    with pytest.raises(ValueError):
        other.append(5, 60)  # offsets must ascend
    other.close()
    index.truncate_to(4560)
    assert index.last_offset == 4550
    index.close()


def test_offset_index_sanity_check_catches_garbage(tmp_path):
    path = str(tmp_path / "0.index")
    with open(path, "wb") as out:
        out.write(struct.pack(">iiii", 50, 500, 40, 400))  # descending
    index = OffsetIndex(path, 0, 1024, in_memory=False)
    with pytest.raises(IndexCorruptError):
        index.sanity_check(10_000)
    with pytest.raises(IndexCorruptError):
        OffsetIndex(path, 0, 1024, in_memory=False).sanity_check(450)  # points past the log
    index.close()


def test_time_index_layout_monotonic_entries_and_reserved_last_slot(tmp_path):
    path = str(tmp_path / "00000000000000000007.timeindex")
    index = TimeIndex(path, 7, 36, in_memory=True)
    assert index.max_entries == 3
    index.maybe_append(1000, 8)
    index.maybe_append(1000, 9)  # not newer: ignored
    index.maybe_append(900, 10)  # older: ignored
    index.maybe_append(2000, 12)
    assert index.entries == 2 and index.is_full  # the last slot is kept for sealing
    with pytest.raises(IndexError):
        index.maybe_append(3000, 13)
    index.maybe_append(3000, 13, skip_full_check=True)
    assert index.last_entry == TimestampOffset(3000, 13)
    assert index.lookup(999) == TimestampOffset(-1, 7)
    assert index.lookup(2500) == TimestampOffset(2000, 12)
    index.close()
    with open(path, "rb") as source:
        assert source.read() == struct.pack(">qiqiqi", 1000, 1, 2000, 5, 3000, 6)


def test_time_index_truncate_and_sanity(tmp_path):
    index = TimeIndex(str(tmp_path / "0.timeindex"), 0, 120, in_memory=True)
    for n in range(1, 6):
        index.maybe_append(n * 100, n * 10)
    index.truncate_to(30)
    assert index.last_entry == TimestampOffset(200, 20)
    index.sanity_check(21)
    with pytest.raises(IndexCorruptError):
        index.sanity_check(20)
    index.close()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=st.lists(st.integers(1, 2**31 - 1), max_size=300, unique=True).map(sorted),
       targets=st.lists(st.integers(-5, 2**31 - 1), min_size=1, max_size=20))
def test_index_search_agrees_with_bisect_on_any_ascending_keys(tmp_path, keys, targets):
    path = str(tmp_path / "search.index")
    if os.path.exists(path):
        os.unlink(path)
    index = OffsetIndex(path, 0, 8 * max(len(keys), 1), in_memory=True)
    for key in keys:
        index.append(key, key)
    for target in targets + keys[:3] + [k - 1 for k in keys[-3:]]:
        assert index._largest_at_most(target, 0) == bisect.bisect_right(keys, target) - 1
    index.close()


def test_persist_writes_new_entries_and_a_truncation_during_it_is_rewritten(tmp_path, monkeypatch):
    path = str(tmp_path / "0.index")
    index = OffsetIndex(path, 0, 8 * 100, in_memory=True)
    for n in range(1, 6):
        index.append(n * 10, n * 100)
    index.persist(sync=True)
    with open(path, "rb") as source:
        assert source.read() == b"".join(struct.pack(">ii", n * 10, n * 100) for n in range(1, 6))
    # A truncation and new appends land while a persist (in a flush thread) is writing its older copy.
    import compatbroker.storage.index_file as index_file
    real_pwrite_all = index_file._pwrite_all

    def pwrite_all_racing_the_loop(fd, data, position):
        real_pwrite_all(fd, data, position)
        index.truncate_to(30)
        index.append(31, 333)

    for n in range(6, 8):
        index.append(n * 10, n * 100)
    monkeypatch.setattr(index_file, "_pwrite_all", pwrite_all_racing_the_loop)
    index.persist(sync=False)
    monkeypatch.setattr(index_file, "_pwrite_all", real_pwrite_all)
    index.persist(sync=False)
    with open(path, "rb") as source:
        assert source.read() == struct.pack(">iiiiii", 10, 100, 20, 200, 31, 333)
    index.close()


def test_a_sealed_index_holds_no_descriptor_and_its_mapping_survives_a_release(tmp_path):
    path = str(tmp_path / "0.index")
    index = OffsetIndex(path, 0, 8 * 100, in_memory=True)
    for n in range(1, 50):
        index.append(n * 10, n * 100)
    index.seal()
    fds = len(os.listdir("/proc/self/fd"))
    sealed = OffsetIndex(path, 0, 8 * 100, in_memory=False)
    assert len(os.listdir("/proc/self/fd")) == fds  # nothing opened until used
    assert sealed.lookup(255) == OffsetPosition(250, 2500)
    view = sealed._view()
    sealed.release()  # what an eviction does while another thread is still searching
    assert index.ENTRY.unpack_from(view, 8) == (20, 200) and sealed.lookup(495) == OffsetPosition(490, 4900)
