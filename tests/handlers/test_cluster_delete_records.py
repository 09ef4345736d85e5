"""DeleteRecords on a three-node cluster: the leader deletes, its followers follow, and the answer waits for them."""
from __future__ import annotations

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import DeleteRecordsRequest

from .cluster_helpers import create_topic, in_sync, serving_cluster
from .helpers import batch, call
from .test_delete_records import below

E = ErrorCode


async def delete(node, offset: int, timeout_ms: int = 20_000) -> tuple[int, int]:
    answer = await call(node, 2, DeleteRecordsRequest(topics=[below("t", (0, offset))], timeout_ms=timeout_ms))
    partition = answer.decoded.topics[0].partitions[0]
    return partition.error_code, partition.low_watermark


def fill(cluster, count: int) -> None:
    leader = cluster.nodes[cluster.metadata.partition("t", 0).leader]
    for index in range(count):
        leader.get_log("t", 0).append(batch(b"v%d" % index), leader_epoch=0, now_ms=leader.now_ms())
    leader.notify_appended("t", 0)


async def test_the_answer_comes_once_every_live_replica_has_moved_its_log_start(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        create_topic(cluster)
        fill(cluster, 10)
        await in_sync(cluster)
        assert await delete(cluster.nodes[0], 6) == (E.NONE, 6)
        assert [cluster.nodes[node_id].get_log("t", 0).log_start_offset for node_id in (0, 1, 2)] == [6, 6, 6]
        assert await delete(cluster.nodes[0], -1) == (E.NONE, 10)  # the high watermark


async def test_only_the_leader_deletes(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        create_topic(cluster, replicas=(0, 1))
        fill(cluster, 4)
        await in_sync(cluster)
        assert await delete(cluster.nodes[1], 2) == (E.NOT_LEADER_OR_FOLLOWER, -1)
        assert await delete(cluster.nodes[2], 2) == (E.NOT_LEADER_OR_FOLLOWER, -1)
        assert cluster.nodes[0].get_log("t", 0).log_start_offset == 0


async def test_a_follower_that_does_not_copy_times_the_request_out_and_a_stopped_one_is_not_waited_for(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        create_topic(cluster)
        fill(cluster, 4)
        await in_sync(cluster)
        cluster.isolate_node(2)  # alive: its log start offset counts, and it stays at 0
        assert await delete(cluster.nodes[0], 2, timeout_ms=200) == (E.REQUEST_TIMED_OUT, 0)
        assert cluster.nodes[0].get_log("t", 0).log_start_offset == 2  # deleted on the leader all the same
        cluster.stop_node(2)
        assert await delete(cluster.nodes[0], 3) == (E.NONE, 3)
