"""File descriptors: about one per partition (the active segment's `.log`; its indexes live in memory), sealed
segments opened on demand through a small LRU that never closes a file a reader still holds, and a topic whose
creation fails leaves nothing behind."""
import gc
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from compatbroker.storage import log_manager as log_manager_module
from compatbroker.storage.segment import open_segments

from .helpers import NOW, ROOT, batch, open_log, records_of

PROPS = {"log.segment.bytes": "4096", "log.index.interval.bytes": "256", "log.index.size.max.bytes": "4096"}


@pytest.fixture(autouse=True)
def _no_descriptors_of_earlier_tests():
    """Counts here compare descriptors before and after: files that earlier tests left to the garbage collector, or
    to the process-wide LRU, must not close in the middle of a count."""
    open_segments.release_all()
    gc.collect()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _manager(path):
    manager = log_manager_module.LogManager(str(path), broker_properties=PROPS)
    manager.startup(NOW)
    return manager


def _fill(log, count):
    for n in range(count):
        log.append(batch([bytes([n % 256]) * 100, b"x"], timestamp=NOW + n), leader_epoch=0, now_ms=NOW + n)


def test_a_partition_holds_one_descriptor_created_written_and_reloaded(tmp_path):
    partitions = 200
    before = _open_fds()
    manager = _manager(tmp_path)
    manager.create_topic("many", partitions, now_ms=NOW)
    assert _open_fds() - before <= partitions + 2  # was 5 per partition: .log, and each index's fd and mapping
    for partition in range(partitions):
        _fill(manager.get_log("many", partition), 3)  # index entries, in memory
    assert _open_fds() - before <= partitions + 2
    manager.shutdown()
    assert _open_fds() == before
    again = _manager(tmp_path)
    assert _open_fds() - before <= partitions + 2
    assert records_of(again.get_log("many", 7).read_bytes(2, 10**6))[0][0] == 2
    again.shutdown()


def test_sealed_segments_open_on_demand_and_the_lru_bounds_open_files(tmp_path, monkeypatch):
    log = open_log(tmp_path)
    _fill(log, 300)
    expected = log.read_bytes(0, 10**8)
    sealed = len(log.segments) - 1
    assert sealed > 10
    log.close()
    before = _open_fds()
    reopened = open_log(tmp_path, clean_shutdown=True, recovery_point=log.log_end_offset)
    assert _open_fds() - before == 1  # the active segment's .log: no sealed segment was opened
    monkeypatch.setattr(open_segments, "capacity", 4)
    assert reopened.read_bytes(0, 10**8) == expected  # every segment, through the LRU
    for segment in reopened.segments[:-1]:  # lookups through every sealed segment's (mapped) indexes
        offset = segment.base_offset + 1
        assert records_of(reopened.read_bytes(offset, 1))[-1][0] == offset
    # At most 4 sealed segments hold files: their .log and, before Python 3.13, one fd in each index mapping.
    assert _open_fds() - before <= 1 + 4 * 3
    assert len(open_segments) <= 4
    reopened.close()
    assert _open_fds() == before


def test_a_file_region_taken_before_an_eviction_reads_the_right_bytes(tmp_path, monkeypatch):
    log = open_log(tmp_path)
    _fill(log, 100)
    monkeypatch.setattr(open_segments, "capacity", 1)
    region = log.read(0, 10**6).regions[0]
    expected = log.segments[0].read_bytes(region.position, region.length)
    fds = _open_fds()
    for segment in log.segments[1:-1]:
        log.read(segment.base_offset, 1)  # evicts segment 0
    assert log.segments[0]._file is None  # evicted: the segment let go of it, the region still holds it
    assert os.pread(region.file.fileno(), region.length, region.position) == expected
    del region
    assert _open_fds() < fds  # the last holder let go: the descriptor closed
    log.close()


def test_a_flush_in_a_thread_fsyncs_evicted_segments_by_path_without_touching_the_lru(tmp_path, monkeypatch):
    log = open_log(tmp_path)
    _fill(log, 200)
    assert len(log.segments) > 3 and log.recovery_point == 0
    monkeypatch.setattr(open_segments, "capacity", 1)
    log.read(log.segments[0].base_offset, 1)  # evicts the other sealed segments
    evicted = [segment for segment in log.segments[1:-1] if segment._file is None]
    assert evicted
    callers = []
    real_add = open_segments.add
    monkeypatch.setattr(open_segments, "add", lambda segment: (callers.append(threading.current_thread()),
                                                               real_add(segment)))
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real_fsync(fd)))
    with ThreadPoolExecutor(max_workers=1) as executor:
        executor.submit(log.flush).result()
    assert callers == []  # the LRU is the loop's (and the cleaner's, under its lock): a flush never opens through it
    assert {segment.log_path for segment in evicted} <= set(synced)
    assert log.recovery_point == log.log_end_offset
    log.close()


def _failing_open(monkeypatch, fail_at: int):
    """Make the `fail_at`-th Log.open of the manager raise EMFILE, as a process out of descriptors would."""
    real_open = log_manager_module.Log.open
    calls = []

    def open_or_fail(*args, **kwargs):
        calls.append(1)
        if len(calls) == fail_at:
            raise OSError(24, "Too many open files")
        return real_open(*args, **kwargs)

    monkeypatch.setattr(log_manager_module.Log, "open", open_or_fail)


def test_a_failed_create_topic_leaves_nothing_behind(tmp_path, monkeypatch):
    manager = _manager(tmp_path)
    before = _open_fds()
    _failing_open(monkeypatch, 7)
    with pytest.raises(OSError) as failure:
        manager.create_topic("half", 10, now_ms=NOW, overrides={"retention.ms": "1000"})
    assert failure.value.errno == 24
    assert not [name for name in os.listdir(tmp_path) if name.startswith("half")]
    assert not [tp for tp in manager.logs if tp[0] == "half"]
    assert "half" not in manager.topic_ids and "half" not in manager.topic_overrides
    assert "half" not in (tmp_path / log_manager_module.TOPIC_CONFIGS_FILE).read_text()
    assert _open_fds() == before
    monkeypatch.undo()
    manager.create_topic("half", 10, now_ms=NOW)  # nothing in the way of trying again
    assert len([tp for tp in manager.logs if tp[0] == "half"]) == 10
    manager.shutdown()


def test_failed_added_partitions_leave_the_existing_ones_alone(tmp_path, monkeypatch):
    manager = _manager(tmp_path)
    topic_id = manager.create_topic("grow", 2, now_ms=NOW)
    manager.get_log("grow", 1).append(batch([b"kept"]), leader_epoch=0, now_ms=NOW)
    before = _open_fds()
    _failing_open(monkeypatch, 3)
    with pytest.raises(OSError):
        manager.create_partitions("grow", range(2, 6), now_ms=NOW)
    assert sorted(tp for tp in manager.logs if tp[0] == "grow") == [("grow", 0), ("grow", 1)]
    assert sorted(name for name in os.listdir(tmp_path) if name.startswith("grow")) == ["grow-0", "grow-1"]
    assert manager.topic_ids["grow"] == topic_id and _open_fds() == before
    assert records_of(manager.get_log("grow", 1).read_bytes(0, 10**6))[0][2] == b"kept"
    manager.shutdown()


_UNDER_A_LIMIT = textwrap.dedent("""
    import resource, sys
    from compatbroker.storage.log_manager import LogManager
    from tests.storage.helpers import NOW, batch, records_of
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (4096, 4096)
    data_dir, partitions = sys.argv[1], int(sys.argv[2])
    manager = LogManager(data_dir)
    manager.startup(NOW)
    manager.create_topic("__consumer_offsets", 50, now_ms=NOW)
    manager.create_topic("wide", partitions, now_ms=NOW)
    for partition in range(partitions):
        manager.get_log("wide", partition).append(batch([b"%d" % partition]), leader_epoch=0, now_ms=NOW)
    regions = [manager.get_log("wide", partition).read(0, 1024) for partition in range(partitions)]
    assert all(result.regions for result in regions)
    manager.shutdown()
    again = LogManager(data_dir)
    again.startup(NOW)
    for partition in range(partitions):
        assert records_of(again.get_log("wide", partition).read_bytes(0, 1024))[0][2] == b"%d" % partition
    again.shutdown()
    print("ok")
""")


def _limit_descriptors():
    resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))


def test_two_thousand_partitions_under_a_limit_of_4096_descriptors(tmp_path):
    if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 4096:
        pytest.skip("the hard limit is below 4096")
    # Descriptors are the point, not the disk: in memory when possible, since creating 2,000 partitions fsyncs
    # thousands of files and directories, which takes minutes on a disk other tests keep busy.
    parent = tempfile.mkdtemp(dir="/dev/shm") if os.path.isdir("/dev/shm") else str(tmp_path)
    try:
        child = subprocess.run([sys.executable, "-c", _UNDER_A_LIMIT, os.path.join(parent, "data"), "2000"],
                               cwd=ROOT, preexec_fn=_limit_descriptors, capture_output=True, text=True, timeout=600)
    finally:
        shutil.rmtree(parent, ignore_errors=True)
    assert child.returncode == 0 and child.stdout.strip() == "ok", child.stderr[-3000:]
