"""ListOffsets, OffsetForLeaderEpoch and DescribeProducers on a three-node cluster: which node answers, the leader
epoch checks against the partition's epoch, and the answers after a leader change."""
from __future__ import annotations

import pytest

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.records.batch import build_batch

from .cluster_helpers import create_topic, in_sync, serving_cluster, until
from .test_describe_producers import describe
from .test_list_offsets import ask as list_offsets
from .test_offset_for_leader_epoch import ask as epoch_end

LATEST, EARLIEST = -1, -2


def append(cluster, *batches):
    """Append at the leader as Produce does (acks=1)."""
    state = cluster.metadata.partition("t", 0)
    leader = cluster.nodes[state.leader]
    for records in batches:
        leader.get_log("t", 0).append(records, leader_epoch=state.leader_epoch, now_ms=leader.now_ms())
    leader.notify_appended("t", 0)


def values(*items: bytes) -> bytes:
    return build_batch([(b"k", value, (), 1000) for value in items])


async def test_only_the_leader_lists_offsets_unless_asked_by_the_debugging_replica_id(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        create_topic(cluster, replicas=(0, 1))
        append(cluster, values(b"a", b"b"))
        await in_sync(cluster)
        assert (await list_offsets(cluster.nodes[0], 7, LATEST)).offset == 2
        for node_id in (1, 2):  # a follower, a node without a replica
            answer = await list_offsets(cluster.nodes[node_id], 7, LATEST)
            assert (answer.error_code, answer.offset) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)
        debugging = await list_offsets(cluster.nodes[1], 7, LATEST, replica_id=-2)
        assert (debugging.error_code, debugging.offset) == (ErrorCode.NONE, 2)  # a follower's log end
        v0 = (await list_offsets(cluster.nodes[1], 0, LATEST))
        assert v0.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_leader_epochs_are_those_of_the_partition_after_a_leader_change(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        create_topic(cluster)
        append(cluster, values(b"a"))
        await in_sync(cluster)
        first_epoch = cluster.metadata.partition("t", 0).leader_epoch
        cluster.move_leader("t", 0, 1)
        append(cluster, values(b"b"))
        await in_sync(cluster)
        new_leader = cluster.nodes[1]
        stale = await list_offsets(new_leader, 7, LATEST, current_leader_epoch=first_epoch)
        assert stale.error_code == ErrorCode.FENCED_LEADER_EPOCH
        ahead = await list_offsets(new_leader, 7, LATEST, current_leader_epoch=first_epoch + 5)
        assert ahead.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
        latest = await list_offsets(new_leader, 7, LATEST, current_leader_epoch=first_epoch + 1)
        assert (latest.error_code, latest.offset, latest.leader_epoch) == (ErrorCode.NONE, 2, first_epoch + 1)
        found = await list_offsets(new_leader, 7, 1000)  # the first record: written in the first epoch
        assert (found.offset, found.leader_epoch) == (0, first_epoch)
        # OffsetForLeaderEpoch: the first epoch ended where the new leader's began
        assert await epoch_end(new_leader, first_epoch) == (ErrorCode.NONE, first_epoch, 1)
        assert await epoch_end(new_leader, first_epoch + 1) == (ErrorCode.NONE, first_epoch + 1, 2)
        assert (await epoch_end(cluster.nodes[0], first_epoch))[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (await epoch_end(new_leader, 0, current_leader_epoch=first_epoch))[0] == ErrorCode.FENCED_LEADER_EPOCH


@pytest.mark.parametrize("version, code", [(5, ErrorCode.OFFSET_NOT_AVAILABLE), (4, ErrorCode.LEADER_NOT_AVAILABLE)])
async def test_a_new_leader_whose_high_watermark_lags_its_epoch_start_cannot_answer_latest(tmp_path, version, code):
    async with serving_cluster(tmp_path) as cluster:
        create_topic(cluster)
        cluster.isolate_node(2)  # in the ISR but copying nothing: the high watermark stays at 0
        append(cluster, values(b"a"))
        await until(lambda: cluster.nodes[1].get_log("t", 0).log_end_offset == 1, "node 1 copying offset 0")
        cluster.move_leader("t", 0, 1)  # its epoch starts at 1, its high watermark is 0
        answer = await list_offsets(cluster.nodes[1], version, LATEST)
        assert (answer.error_code, answer.offset) == (code, -1)
        earliest = await list_offsets(cluster.nodes[1], version, EARLIEST)
        assert (earliest.error_code, earliest.offset) == (ErrorCode.NONE, 0)
        cluster.isolate_node(2, False)
        await in_sync(cluster)
        assert (await list_offsets(cluster.nodes[1], version, LATEST)).offset == 1


async def test_any_replica_describes_its_producers_and_others_answer_not_leader(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        create_topic(cluster, replicas=(0, 1))
        append(cluster, build_batch([(b"k", b"v", (), 1000)], producer_id=7, producer_epoch=0, base_sequence=0))
        await in_sync(cluster)
        for node_id in (0, 1):
            (partition,) = (await describe(cluster.nodes[node_id], ("t", [0]))).topics[0].partitions
            assert [p.producer_id for p in partition.active_producers] == [7]
        (elsewhere,) = (await describe(cluster.nodes[2], ("t", [0]))).topics[0].partitions
        assert (elsewhere.error_code, elsewhere.active_producers) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, [])
