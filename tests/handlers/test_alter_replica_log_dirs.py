"""AlterReplicaLogDirs: moving a replica between the log directories of its node (JBOD), a moved follower that goes on
replicating, and Kafka's per-partition errors for unknown directories, replicas the node does not hold and names too
long for a move."""
from __future__ import annotations

import asyncio
import os

import pytest

from compatbroker.handlers import alter_replica_log_dirs
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import AlterReplicaLogDirsRequest
from tests.cluster.helpers import started_cluster

from .helpers import batch, call, records_of

Dir = AlterReplicaLogDirsRequest.AlterReplicaLogDir
Topic = AlterReplicaLogDirsRequest.AlterReplicaLogDirTopic
ALL_VERSIONS = range(alter_replica_log_dirs.MIN_VERSION, alter_replica_log_dirs.MAX_VERSION + 1)
WAIT_S = 20


async def move(broker, moves: list[tuple[str, str, list[int]]], version=2) -> dict[tuple[str, int], int]:
    dirs: dict[str, list] = {}
    for path, topic, partitions in moves:
        dirs.setdefault(path, []).append(Topic(name=topic, partitions=partitions))
    request = AlterReplicaLogDirsRequest(dirs=[Dir(path=path, topics=topics) for path, topics in dirs.items()])
    answer = (await call(broker, version, request)).decoded
    return {(topic.topic_name, p.partition_index): p.error_code for topic in answer.results for p in topic.partitions}


def dir_of(broker, topic: str, partition: int) -> str:
    return os.path.dirname(broker.get_log(topic, partition).directory)


@pytest.fixture
def jbod(broker_factory, tmp_path):
    dirs = [str(tmp_path / "d1"), str(tmp_path / "d2")]
    return broker_factory(**{"log.dirs": ",".join(dirs)})


def test_declares_every_schema_version():
    assert (alter_replica_log_dirs.API_KEY, alter_replica_log_dirs.MIN_VERSION,
            alter_replica_log_dirs.MAX_VERSION) == (34, 0, 2)


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_a_replica_moves_to_another_log_dir_with_its_records(jbod, version):
    jbod.create_topic("t", 1)
    log = jbod.get_log("t", 0)
    log.append(batch(b"a", b"b"), leader_epoch=0, now_ms=jbod.now_ms())
    source = dir_of(jbod, "t", 0)
    [target] = [path for path in jbod.logs.log_dirs if path != source]
    assert await move(jbod, [(target, "t", [0])], version) == {("t", 0): 0}
    assert dir_of(jbod, "t", 0) == target
    assert not os.path.exists(os.path.join(source, "t-0"))
    moved = jbod.get_log("t", 0)
    assert moved.log_end_offset == 2
    assert [r.value for r in records_of(moved.read_bytes(0, 1 << 20))] == [b"a", b"b"]
    assert await move(jbod, [(target, "t", [0])], version) == {("t", 0): 0}  # already there


async def test_kafkas_errors_per_partition(jbod, tmp_path):
    jbod.create_topic("t", 1)
    here = dir_of(jbod, "t", 0)
    long_name = "x" * 220
    assert await move(jbod, [(str(tmp_path / "elsewhere"), "t", [0]), (here, "t", [7]), (here, "gone", [0]),
                             (here, long_name, [0]), (os.path.relpath(here), "u", [0])]) == {
        ("t", 0): ErrorCode.LOG_DIR_NOT_FOUND, ("t", 7): ErrorCode.REPLICA_NOT_AVAILABLE,
        ("gone", 0): ErrorCode.REPLICA_NOT_AVAILABLE, (long_name, 0): ErrorCode.INVALID_TOPIC_EXCEPTION,
        ("u", 0): ErrorCode.LOG_DIR_NOT_FOUND}
    assert dir_of(jbod, "t", 0) == here


async def test_the_last_mention_of_a_partition_decides(jbod):
    jbod.create_topic("t", 1)
    source = dir_of(jbod, "t", 0)
    [target] = [path for path in jbod.logs.log_dirs if path != source]
    assert await move(jbod, [(target, "t", [0]), (source, "t", [0])]) == {("t", 0): 0}
    assert dir_of(jbod, "t", 0) == source


async def test_a_failed_move_is_a_storage_error(jbod, monkeypatch):
    jbod.create_topic("t", 1)
    source = dir_of(jbod, "t", 0)
    [target] = [path for path in jbod.logs.log_dirs if path != source]

    def no_space(*args, **kwargs):
        raise OSError(28, os.strerror(28))

    monkeypatch.setattr(jbod.logs, "move_log", no_space)
    assert await move(jbod, [(target, "t", [0])]) == {("t", 0): ErrorCode.KAFKA_STORAGE_ERROR}


async def test_each_node_moves_only_the_replicas_it_holds(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        cluster.nodes[0].create_topic("t", assignment={0: [1]})
        for node_id, expected in ((0, ErrorCode.REPLICA_NOT_AVAILABLE), (1, ErrorCode.NONE)):
            node = cluster.nodes[node_id]
            assert await move(node, [(node.logs.log_dirs[0], "t", [0])]) == {("t", 0): expected}


async def test_a_moved_follower_replica_keeps_replicating(tmp_path):
    dirs = ",".join(str(tmp_path / name) for name in ("d1", "d2"))
    async with started_cluster(tmp_path / "cluster", **{"log.dirs": dirs}) as cluster:
        leader, follower = cluster.nodes[0], cluster.nodes[1]
        leader.create_topic("t", assignment={0: [0, 1]})

        async def appended_and_copied(*values):
            leader.get_log("t", 0).append(batch(*values), leader_epoch=leader.leader_epoch("t", 0),
                                          now_ms=leader.now_ms())
            leader.notify_appended("t", 0)
            end = leader.get_log("t", 0).log_end_offset
            async with asyncio.timeout(WAIT_S):
                while follower.get_log("t", 0).log_end_offset < end:
                    await asyncio.sleep(0.02)

        await appended_and_copied(b"a", b"b")
        source = dir_of(follower, "t", 0)
        [target] = [path for path in follower.logs.log_dirs if path != source]
        assert await move(follower, [(target, "t", [0])]) == {("t", 0): 0}
        assert dir_of(follower, "t", 0) == target
        await appended_and_copied(b"c")
        assert [r.value for r in records_of(follower.get_log("t", 0).read_bytes(0, 1 << 20))] == [b"a", b"b", b"c"]
        assert cluster.metadata.partition("t", 0).isr == [0, 1]
