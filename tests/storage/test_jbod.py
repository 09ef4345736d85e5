"""Several log directories per node (JBOD): meta.properties in each, placement of new partitions, per-directory
checkpoints, moving a replica between directories (AlterReplicaLogDirs) and the moves a crash interrupted."""
import os
import shutil
import uuid

import pytest

from compatbroker.storage import log_manager as log_manager_module
from compatbroker.storage.checkpoints import read_offsets, read_properties, write_properties
from compatbroker.storage.errors import LogDirError
from compatbroker.storage.log_manager import LogManager, write_checkpoints

from .helpers import NOW, batch, records_of

PROPS = {"log.segment.bytes": "4096", "log.index.interval.bytes": "256", "log.index.size.max.bytes": "4096"}


def _dirs(tmp_path, count=2):
    return [str(tmp_path / f"d{n}") for n in range(count)]


def _manager(dirs, **kwargs):
    manager = LogManager(dirs, broker_properties=PROPS, **kwargs)
    manager.startup(NOW)
    return manager


def _fill(log, count, *, epoch=0, **kwargs):
    for n in range(count):
        log.append(batch([b"r%03d" % n + b"." * 60], **kwargs), leader_epoch=epoch, now_ms=NOW)


def _held(manager):
    return {log_dir: sorted(tp for tp in manager.logs if manager.log_dir_of(*tp) == log_dir)
            for log_dir in manager.log_dirs}


def test_each_directory_has_the_nodes_meta_properties(tmp_path):
    dirs = _dirs(tmp_path, 3)
    manager = _manager(dirs, cluster_id="cluster-J", node_id=4)
    assert manager.log_dirs == dirs and manager.data_dir == dirs[0]
    metas = [read_properties(os.path.join(path, "meta.properties")) for path in dirs]
    assert {(meta["cluster.id"], meta["node.id"]) for meta in metas} == {("cluster-J", "4")}
    assert len({meta["directory.id"] for meta in metas}) == 3
    manager.shutdown()
    assert all(os.path.exists(os.path.join(path, ".kafka_cleanshutdown")) for path in dirs)
    assert _manager(dirs, node_id=4).cluster_id == "cluster-J"  # found again, from every directory


def test_a_directory_of_another_node_or_cluster_is_refused(tmp_path):
    dirs = _dirs(tmp_path)
    _manager(dirs, cluster_id="cluster-J", node_id=4).shutdown()
    meta = read_properties(os.path.join(dirs[1], "meta.properties"))
    write_properties(os.path.join(dirs[1], "meta.properties"), {**meta, "node.id": "5"})
    with pytest.raises(LogDirError, match="node 5"):
        _manager(dirs, node_id=4)
    write_properties(os.path.join(dirs[1], "meta.properties"), {**meta, "cluster.id": "other"})
    with pytest.raises(LogDirError, match="cluster"):
        _manager(dirs, node_id=4)


def test_new_partitions_go_to_the_directory_holding_the_fewest(tmp_path):
    dirs = _dirs(tmp_path, 3)
    manager = _manager(dirs)
    manager.create_topic("a", 4, now_ms=NOW)
    assert {d: len(tps) for d, tps in _held(manager).items()} == {dirs[0]: 2, dirs[1]: 1, dirs[2]: 1}
    assert manager.log_dir_of("a", 0) == dirs[0] and manager.log_dir_of("a", 3) == dirs[0]
    manager.move_log("a", 0, dirs[2])  # now 1 / 1 / 2
    manager.create_topic("b", 2, now_ms=NOW)
    assert [manager.log_dir_of("b", p) for p in (0, 1)] == [dirs[0], dirs[1]]
    assert manager.log_dir_of("b", 9) is None
    assert os.path.isdir(os.path.join(dirs[1], "b-1"))


def test_checkpoints_are_written_per_directory_and_reloaded(tmp_path):
    dirs = _dirs(tmp_path)
    manager = _manager(dirs)
    manager.create_topic("t", 2, now_ms=NOW)
    for partition in (0, 1):
        _fill(manager.get_log("t", partition), 30 + partition)
    manager.get_log("t", 1).update_high_watermark(20)
    manager.delete_records("t", 1, 10, now_ms=NOW)
    assert read_offsets(os.path.join(dirs[1], "log-start-offset-checkpoint")) == {("t", 1): 10}
    manager.shutdown()
    assert read_offsets(os.path.join(dirs[0], "recovery-point-offset-checkpoint")) == {("t", 0): 30}
    assert read_offsets(os.path.join(dirs[1], "recovery-point-offset-checkpoint")) == {("t", 1): 31}
    assert read_offsets(os.path.join(dirs[1], "replication-offset-checkpoint")) == {("t", 1): 20}
    assert not os.path.exists(os.path.join(dirs[0], "replication-offset-checkpoint"))
    reopened = _manager(dirs)
    assert reopened.log_dir_of("t", 1) == dirs[1]
    log = reopened.get_log("t", 1)
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (10, 20, 31)
    assert len(records_of(reopened.get_log("t", 0).read_bytes(0, 1 << 20))) == 30


def test_the_brokers_single_directory_checkpoint_call_still_covers_every_directory(tmp_path):
    dirs = _dirs(tmp_path)
    manager = _manager(dirs)
    manager.create_topic("t", 2, now_ms=NOW)
    _fill(manager.get_log("t", 1), 5)
    manager.get_log("t", 1).flush()
    write_checkpoints(manager.data_dir, dict(manager.logs), dict(manager.first_dirty_offsets))
    assert read_offsets(os.path.join(dirs[1], "recovery-point-offset-checkpoint")) == {("t", 1): 5}
    assert read_offsets(os.path.join(dirs[0], "recovery-point-offset-checkpoint")) == {("t", 0): 0}


def test_a_partition_in_two_directories_is_refused(tmp_path):
    dirs = _dirs(tmp_path)
    _manager(dirs).create_topic("t", 1, now_ms=NOW)
    shutil.copytree(os.path.join(dirs[0], "t-0"), os.path.join(dirs[1], "t-0"))
    with pytest.raises(LogDirError, match="two log directories"):
        _manager(dirs)


def test_a_single_directory_given_as_a_list_or_a_string_is_the_same_layout(tmp_path):
    manager = _manager([str(tmp_path)])
    manager.create_topic("t", 1, now_ms=NOW)
    assert manager.log_dirs == [str(tmp_path)] and os.path.isdir(tmp_path / "t-0")
    with pytest.raises(LogDirError):
        LogManager([])
    with pytest.raises(LogDirError):
        LogManager([str(tmp_path), str(tmp_path) + "/"])


# --- moving a replica (AlterReplicaLogDirs) -----------------------------------------------------------------------

def _replicated_partition(manager):
    """A partition with rolled segments, two leader epochs, an idempotent producer, a deleted prefix and a high
    watermark of its own."""
    manager.create_topic("t", 1, now_ms=NOW)
    log = manager.get_log("t", 0)
    _fill(log, 40)
    for sequence in range(20):
        log.append(batch([b"p" * 60], producer_id=11, producer_epoch=0, base_sequence=sequence), leader_epoch=3,
                   now_ms=NOW)
    log.update_high_watermark(50)
    manager.delete_records("t", 0, 10, now_ms=NOW)
    return log


def _state(log):
    entry = log.producer_state.entry(11)
    return (log.log_start_offset, log.log_end_offset, log.high_watermark, log.epochs.entries,
            [s.base_offset for s in log.segments], (entry.last_sequence, entry.last_offset),
            log.read_bytes(log.log_start_offset, 1 << 20))


def test_move_log_keeps_offsets_epochs_producers_and_high_watermark(tmp_path):
    dirs = _dirs(tmp_path)
    manager = _manager(dirs)
    old = _replicated_partition(manager)
    assert len(old.segments) > 1
    before = _state(old)
    moved = manager.move_log("t", 0, dirs[1])
    assert old.closed and manager.get_log("t", 0) is moved
    assert manager.log_dir_of("t", 0) == dirs[1] and moved.directory == os.path.join(dirs[1], "t-0")
    assert sorted(os.listdir(dirs[0])) == ["cleaner-offset-checkpoint", "log-start-offset-checkpoint",
                                           "meta.properties", "recovery-point-offset-checkpoint"]
    assert _state(moved) == before
    assert read_offsets(os.path.join(dirs[1], "replication-offset-checkpoint")) == {("t", 0): 50}
    moved.append(batch([b"p"], producer_id=11, producer_epoch=0, base_sequence=20), leader_epoch=3, now_ms=NOW)
    assert manager.move_log("t", 0, dirs[1]) is moved  # already there: nothing to do
    manager.shutdown()
    reopened = _manager(dirs)
    assert reopened.log_dir_of("t", 0) == dirs[1]
    log = reopened.get_log("t", 0)
    assert (log.log_start_offset, log.high_watermark, log.producer_state.entry(11).last_sequence) == (10, 50, 20)


def test_move_log_refuses_unknown_directories_and_partitions(tmp_path):
    dirs = _dirs(tmp_path)
    manager = _manager(dirs)
    manager.create_topic("t", 1, now_ms=NOW)
    with pytest.raises(LogDirError):
        manager.move_log("t", 0, str(tmp_path / "elsewhere"))
    with pytest.raises(LogDirError):
        manager.move_log("t", 7, dirs[1])


def test_a_failed_copy_leaves_the_replica_where_it_was(tmp_path, monkeypatch):
    dirs = _dirs(tmp_path)
    manager = _manager(dirs)
    before = _state(_replicated_partition(manager))
    copies = []

    def failing_copy(source, destination):
        copies.append(destination)
        if len(copies) == 3:
            raise OSError(28, "No space left on device")
        return shutil.copyfile(source, destination)

    monkeypatch.setattr(log_manager_module.shutil, "copyfile", failing_copy)
    with pytest.raises(OSError):
        manager.move_log("t", 0, dirs[1])
    monkeypatch.undo()
    log = manager.get_log("t", 0)
    assert not log.closed and manager.log_dir_of("t", 0) == dirs[0]
    assert _state(log) == before
    assert not any(name.startswith("t-0") for name in os.listdir(dirs[1]))
    log.append(batch([b"p"], producer_id=11, producer_epoch=0, base_sequence=20), leader_epoch=3, now_ms=NOW)


class _Crash(BaseException):
    """The process dies here."""


def test_a_move_that_had_not_swapped_is_undone_at_start_up(tmp_path):
    dirs = _dirs(tmp_path)
    manager = _manager(dirs)
    before = _state(_replicated_partition(manager))
    manager.shutdown()
    shutil.copytree(os.path.join(dirs[0], "t-0"), os.path.join(dirs[1], f"t-0.{uuid.uuid4().hex}-future"))
    reopened = _manager(dirs)
    assert reopened.log_dir_of("t", 0) == dirs[0]
    assert os.listdir(dirs[1]).count("t-0") == 0 and not any(n.endswith("-future") for n in os.listdir(dirs[1]))
    assert _state(reopened.get_log("t", 0)) == before


def test_a_move_whose_source_was_renamed_is_finished_at_start_up(tmp_path, monkeypatch):
    dirs = _dirs(tmp_path)
    manager = _manager(dirs)
    before = _state(_replicated_partition(manager))
    real_rename = os.rename

    def crash_on_the_swap(source, destination):
        if source.endswith("-future"):
            raise _Crash()
        real_rename(source, destination)

    monkeypatch.setattr(log_manager_module.os, "rename", crash_on_the_swap)
    with pytest.raises(_Crash):
        manager.move_log("t", 0, dirs[1])
    monkeypatch.undo()
    assert any(name.endswith("-delete") for name in os.listdir(dirs[0]))
    reopened = _manager(dirs)  # the process restarts: the future replica takes the partition's name
    assert reopened.log_dir_of("t", 0) == dirs[1]
    for log_dir in dirs:
        assert [name for name in os.listdir(log_dir) if name.startswith("t-0")] == (
            ["t-0"] if log_dir == dirs[1] else [])
    assert _state(reopened.get_log("t", 0)) == before  # start offset and high watermark from its checkpoints
