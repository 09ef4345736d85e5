"""Checkpoint files, partition.metadata and meta.properties in Kafka's text formats, written atomically; writers of
one file take turns, and an older snapshot never replaces a newer one."""
import os
import threading
import uuid

import pytest

from compatbroker.storage.checkpoints import (CheckpointError, WriteTicket, leader_epoch_checkpoint, read_offsets,
                                              read_partition_metadata, read_properties, uuid_from_string,
                                              uuid_to_string, write_offsets, write_partition_metadata,
                                              write_properties)
from compatbroker.storage.log_manager import LogManager, write_checkpoints

from .helpers import NOW, batch


def test_offset_checkpoint_format_and_round_trip(tmp_path):
    path = str(tmp_path / "recovery-point-offset-checkpoint")
    write_offsets(path, {("orders", 1): 42, ("a-b", 0): 7})
    with open(path) as source:
        assert source.read() == "0\n2\na-b 0 7\norders 1 42\n"
    assert read_offsets(path) == {("orders", 1): 42, ("a-b", 0): 7}
    assert not any(name.endswith(".tmp") for name in os.listdir(tmp_path))
    assert read_offsets(str(tmp_path / "absent")) == {}


@pytest.mark.parametrize("text", ["1\n0\n", "0\n2\nt 0 1\n", "0\n1\nt x 1\n", "zero\n"])
def test_malformed_checkpoints_raise(tmp_path, text):
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CheckpointError):
        read_offsets(str(path))


def test_leader_epoch_checkpoint(tmp_path):
    file = leader_epoch_checkpoint(str(tmp_path / "leader-epoch-checkpoint"))
    file.write([(0, 0), (3, 120)])
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n3 120\n"
    assert file.read() == [(0, 0), (3, 120)]


def test_partition_metadata_and_kafka_uuid_text(tmp_path):
    topic_id = uuid.UUID("00000000-0000-0000-0000-000000000001")
    assert uuid_to_string(topic_id) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert uuid_from_string("AAAAAAAAAAAAAAAAAAAAAQ") == topic_id
    path = str(tmp_path / "partition.metadata")
    write_partition_metadata(path, topic_id)
    assert (tmp_path / "partition.metadata").read_text() == "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ"
    assert read_partition_metadata(path) == topic_id
    assert read_partition_metadata(str(tmp_path / "none")) is None


def test_meta_properties(tmp_path):
    path = str(tmp_path / "meta.properties")
    write_properties(path, {"cluster.id": "abc", "node.id": "1", "version": "1"})
    text = (tmp_path / "meta.properties").read_text()
    assert text.startswith("#\n#") and "cluster.id=abc\n" in text
    assert read_properties(path) == {"cluster.id": "abc", "node.id": "1", "version": "1"}


def test_concurrent_writes_of_one_file_take_turns_and_leave_no_temp_file(tmp_path):
    path = str(tmp_path / "recovery-point-offset-checkpoint")
    failures = []

    def writer(n):
        try:
            for round_ in range(30):
                write_offsets(path, {("t", n): round_})
        except Exception as exc:  # noqa: BLE001 - collected for the assertion below
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []  # one shared temp name made the loser's os.replace raise FileNotFoundError
    assert list(read_offsets(path).values()) == [29]
    assert os.listdir(tmp_path) == ["recovery-point-offset-checkpoint"]


def test_a_write_of_an_older_snapshot_never_replaces_a_newer_one(tmp_path):
    path = str(tmp_path / "log-start-offset-checkpoint")
    older, newer = WriteTicket(path), WriteTicket(path)  # taken as each writer snapshots its state
    write_offsets(path, {("t", 0): 20}, ticket=newer)
    write_offsets(path, {("t", 0): 10}, ticket=older)  # finishes last
    assert read_offsets(path) == {("t", 0): 20}


def test_write_checkpoints_running_concurrently_write_the_newest_state(tmp_path):
    manager = LogManager(str(tmp_path))
    manager.startup(NOW)
    manager.create_topic("t", 4, now_ms=NOW)
    failures = []

    def checkpoint_loop():
        try:
            for _ in range(25):
                write_checkpoints(manager.data_dir, dict(manager.logs), dict(manager.first_dirty_offsets))
        except Exception as exc:  # noqa: BLE001 - collected for the assertion below
            failures.append(exc)

    threads = [threading.Thread(target=checkpoint_loop) for _ in range(6)]
    for thread in threads:
        thread.start()
    for partition in range(4):
        log = manager.get_log("t", partition)
        log.append(batch([b"a", b"b"]), leader_epoch=0, now_ms=NOW)
        log.flush()
    for thread in threads:
        thread.join()
    assert failures == []
    manager.checkpoint()
    assert read_offsets(str(tmp_path / "recovery-point-offset-checkpoint")) == {("t", p): 2 for p in range(4)}
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".tmp")]
    manager.shutdown()


def test_temp_files_left_by_a_crash_are_removed_at_start_up(tmp_path):
    LogManager(str(tmp_path)).startup(NOW)
    stray = tmp_path / "recovery-point-offset-checkpoint.1234-5.tmp"
    stray.write_text("0\n")
    manager = LogManager(str(tmp_path))
    manager.startup(NOW)
    assert not stray.exists()
    manager.shutdown()
