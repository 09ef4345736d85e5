"""The data directory: meta.properties, partition directories and their metadata, checkpoints, persisted topic
configs, clean shutdown, deletion."""
import os
import uuid

import pytest

from compatbroker.storage.checkpoints import read_offsets, read_partition_metadata, read_properties
from compatbroker.storage.errors import LogDirError
from compatbroker.storage.log_config import ConfigError
from compatbroker.storage.log_manager import LogManager, parse_partition_dir

from .helpers import NOW, batch, records_of

PROPS = {"log.segment.bytes": "4096", "log.index.interval.bytes": "256", "log.index.size.max.bytes": "4096"}


def _manager(path, **kwargs):
    manager = LogManager(str(path), broker_properties=PROPS, **kwargs)
    manager.startup(NOW)
    return manager


def test_partition_dir_names():
    assert parse_partition_dir("my-topic-12") == ("my-topic", 12)
    assert parse_partition_dir("t-0.abc-delete") is None and parse_partition_dir("notapartition") is None


def test_layout_and_restart(tmp_path):
    manager = _manager(tmp_path, cluster_id="cluster-A", node_id=3)
    topic_id = manager.create_topic("orders", 2, now_ms=NOW, overrides={"retention.ms": "1234"})
    for n in range(30):
        manager.get_log("orders", n % 2).append(batch([b"v%d" % n]), leader_epoch=2, now_ms=NOW)
    meta = read_properties(str(tmp_path / "meta.properties"))
    assert (meta["cluster.id"], meta["node.id"], meta["version"]) == ("cluster-A", "3", "1")
    assert read_partition_metadata(str(tmp_path / "orders-1" / "partition.metadata")) == topic_id
    assert (tmp_path / "orders-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n2 0\n"
    manager.shutdown()
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    assert read_offsets(str(tmp_path / "recovery-point-offset-checkpoint")) == {("orders", 0): 15, ("orders", 1): 15}

    again = _manager(tmp_path, cluster_id="cluster-A", node_id=3)
    assert again.clean_shutdown and not (tmp_path / ".kafka_cleanshutdown").exists()
    assert again.topic_ids["orders"] == topic_id
    assert again.log_config("orders").retention_ms == 1234 and again.get_log("orders", 0).config.retention_ms == 1234
    assert [r[2] for r in records_of(again.get_log("orders", 1).read_bytes(0, 10**6))][:2] == [b"v1", b"v3"]
    again.shutdown()


def test_other_clusters_directories_are_refused(tmp_path):
    _manager(tmp_path, cluster_id="one").shutdown()
    with pytest.raises(LogDirError):
        _manager(tmp_path, cluster_id="two")


def test_topic_config_changes_persist_and_bad_ones_are_refused(tmp_path):
    manager = _manager(tmp_path)
    with pytest.raises(ConfigError):
        manager.create_topic("bad", 1, now_ms=NOW, overrides={"segment.bytes": "big"})
    assert not (tmp_path / "bad-0").exists()
    manager.create_topic("t", 1, now_ms=NOW)
    manager.set_topic_config("t", {"cleanup.policy": "compact"})
    assert manager.get_log("t", 0).config.compact
    manager.close_unclean()
    assert _manager(tmp_path).log_config("t").compact


def test_unclean_restart_recovers_and_delete_removes_directories(tmp_path):
    manager = _manager(tmp_path)
    manager.create_topic("t", 1, now_ms=NOW, topic_id=uuid.UUID(int=5))
    for n in range(50):
        manager.get_log("t", 0).append(batch([b"x" * 100]), leader_epoch=0, now_ms=NOW)
    manager.close_unclean()
    os.makedirs(tmp_path / "t-1.0123abcd-delete")  # a deletion interrupted by the crash
    again = _manager(tmp_path)
    assert not again.clean_shutdown and again.get_log("t", 0).log_end_offset == 50
    assert not (tmp_path / "t-1.0123abcd-delete").exists()
    again.delete_topic("t")
    assert again.get_log("t", 0) is None and not any(name.startswith("t-") for name in os.listdir(tmp_path))
    again.shutdown()


def test_periodic_retention_and_cleaner(tmp_path):
    manager = _manager(tmp_path)
    manager.create_topic("c", 1, now_ms=NOW, overrides={"cleanup.policy": "compact",
                                                        "min.cleanable.dirty.ratio": "0.1"})
    manager.create_topic("d", 1, now_ms=NOW, overrides={"retention.bytes": "5000"})
    for n in range(100):
        manager.get_log("c", 0).append(batch([b"v" * 100], keys=[b"k%d" % (n % 4)]), leader_epoch=0, now_ms=NOW)
        manager.get_log("d", 0).append(batch([b"v" * 100]), leader_epoch=0, now_ms=NOW)
    assert manager.run_cleaner(NOW) == 1 and manager.run_cleaner(NOW) == 0
    assert manager.run_retention(NOW) > 0
    assert read_offsets(str(tmp_path / "log-start-offset-checkpoint"))[("d", 0)] > 0
    assert ("c", 0) in read_offsets(str(tmp_path / "cleaner-offset-checkpoint"))
    manager.shutdown()


def test_flush_due_syncs_rolled_segments_and_the_checkpoint_follows(tmp_path):
    manager = _manager(tmp_path)
    manager.create_topic("t", 1, now_ms=NOW)
    log = manager.get_log("t", 0)
    for n in range(60):
        log.append(batch([b"x" * 100]), leader_epoch=0, now_ms=NOW)
    assert len(log.segments) > 2 and log.recovery_point == 0
    assert manager.flush_due(NOW) == 1 and manager.flush_due(NOW) == 0
    manager.checkpoint()
    rolled_up_to = log.active_segment.base_offset
    assert read_offsets(str(tmp_path / "recovery-point-offset-checkpoint")) == {("t", 0): rolled_up_to}
    manager.close_unclean()
    again = _manager(tmp_path)  # recovery scans the active segment only, and keeps everything
    assert again.get_log("t", 0).log_end_offset == 60
    again.shutdown()


def test_delete_records_is_checkpointed_at_once(tmp_path):
    manager = _manager(tmp_path)
    manager.create_topic("t", 1, now_ms=NOW)
    for n in range(10):
        manager.get_log("t", 0).append(batch([b"v%d" % n]), leader_epoch=0, now_ms=NOW)
    assert manager.delete_records("t", 0, 7, now_ms=NOW) == 7
    assert read_offsets(str(tmp_path / "log-start-offset-checkpoint")) == {("t", 0): 7}
    manager.close_unclean()  # a crash right after DeleteRecords: the records stay deleted
    again = _manager(tmp_path)
    assert again.get_log("t", 0).log_start_offset == 7
    assert [r[2] for r in records_of(again.get_log("t", 0).read_bytes(7, 10**6))][-3:] == [b"v7", b"v8", b"v9"]
    again.shutdown()


def test_large_appends_through_the_manager(tmp_path):
    manager = LogManager(str(tmp_path), broker_properties={"log.message.timestamp.after.max.ms": str(2**62)})
    manager.startup(NOW)
    log = manager.create_log("big", 0, now_ms=NOW)
    payload = batch([b"p" * 1000] * 600)
    assert log.append(payload, leader_epoch=0, now_ms=NOW).last_offset == 599
    assert log.read_bytes(0, 1 << 20)[16:] == payload[16:]
    manager.shutdown()


def test_a_flush_of_a_partition_deleted_meanwhile_is_harmless(tmp_path):
    manager = _manager(tmp_path)
    manager.create_topic("t", 1, now_ms=NOW)
    log = manager.get_log("t", 0)
    log.append(batch([b"v"]), leader_epoch=0, now_ms=NOW)
    manager.delete_topic("t")  # the broker's executor may still hold the log and flush it
    log.flush()
    assert log.recovery_point == 0 and not any(name.startswith("t-") for name in os.listdir(tmp_path))
    manager.shutdown()
