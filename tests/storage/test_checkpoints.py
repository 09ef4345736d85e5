"""Checkpoint files, partition.metadata and meta.properties in Kafka's text formats, written atomically."""
import os
import uuid

import pytest

from compatbroker.storage.checkpoints import (CheckpointError, leader_epoch_checkpoint, read_offsets,
                                              read_partition_metadata, read_properties, uuid_from_string,
                                              uuid_to_string, write_offsets, write_partition_metadata,
                                              write_properties)


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
