"""Produce on a three-node cluster: only the leader appends (KIP-951 leader hints for the others), acks=all waits
for the ISR, min.insync.replicas refuses writes the ISR is too small for."""
from __future__ import annotations

import asyncio

import pytest

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import ProduceRequest
from compatbroker.protocol.records.batch import build_batch

from .cluster_helpers import PORT, create_topic, host_of, in_sync, serving_cluster, until
from .helpers import batch, call

TopicData = ProduceRequest.TopicProduceData
PartitionData = ProduceRequest.PartitionProduceData


def request(records, *, acks=-1, timeout_ms=30_000, topic="t") -> ProduceRequest:
    return ProduceRequest(acks=acks, timeout_ms=timeout_ms, transactional_id=None, topic_data=[
        TopicData(name=topic, partition_data=[PartitionData(index=0, records=records)])])


async def produce(node, version=11, **options):
    answer = (await call(node, version, request(batch(b"v"), **options))).decoded
    return answer, answer.responses[0].partition_responses[0]


@pytest.mark.parametrize("version", [9, 10, 11])
async def test_a_follower_answers_not_leader_and_from_v10_names_the_leader(tmp_path, version):
    async with serving_cluster(tmp_path, racks=["a", "b", "c"]) as cluster:
        create_topic(cluster, replicas=(1, 2, 0))
        epoch = cluster.metadata.partition("t", 0).leader_epoch
        answer, partition = await produce(cluster.nodes[2], version)
        assert (partition.error_code, partition.base_offset, partition.log_start_offset) == (
            ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1)
        assert cluster.nodes[2].get_log("t", 0).log_end_offset == 0
        if version >= 10:
            assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (1, epoch)
            assert [(e.node_id, e.host, e.port, e.rack) for e in answer.node_endpoints] == [(1, host_of(1), PORT,
                                                                                             "b")]
        else:
            assert partition.current_leader.leader_id == -1 and answer.node_endpoints == []


async def test_a_node_without_a_replica_answers_not_leader(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        create_topic(cluster, replicas=(0, 1))
        _, partition = await produce(cluster.nodes[2])
        assert partition.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert partition.current_leader.leader_id == 0


async def test_acks_all_answers_once_every_in_sync_replica_has_the_batch(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        create_topic(cluster)
        _, partition = await produce(cluster.nodes[0])
        assert (partition.error_code, partition.base_offset) == (ErrorCode.NONE, 0)
        assert cluster.nodes[0].get_log("t", 0).high_watermark == 1  # committed before the answer
        assert all(cluster.nodes[node_id].get_log("t", 0).log_end_offset == 1 for node_id in (1, 2))


async def test_acks_all_below_min_insync_replicas_appends_nothing(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        create_topic(cluster, configs={"min.insync.replicas": "2"})
        await in_sync(cluster)
        cluster.stop_node(1)
        cluster.stop_node(2)
        _, partition = await produce(cluster.nodes[0])
        assert (partition.error_code, partition.base_offset) == (ErrorCode.NOT_ENOUGH_REPLICAS, -1)
        assert partition.log_start_offset == 0  # Kafka gives the log's start with this error
        assert cluster.nodes[0].get_log("t", 0).log_end_offset == 0
        _, acks_one = await produce(cluster.nodes[0], acks=1)  # acks=1 does not care
        assert (acks_one.error_code, acks_one.base_offset) == (ErrorCode.NONE, 0)
        cluster.start_node(1)
        await until(lambda: 1 in cluster.metadata.partition("t", 0).isr, "node 1 back in the ISR")
        _, resumed = await produce(cluster.nodes[0])
        assert (resumed.error_code, resumed.base_offset) == (ErrorCode.NONE, 1)


async def test_acks_all_times_out_when_an_in_sync_follower_does_not_copy(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        create_topic(cluster)
        cluster.isolate_node(2)  # still in the ISR until replica.lag.time.max.ms (30 s) has passed
        _, partition = await produce(cluster.nodes[0], timeout_ms=200)
        assert (partition.error_code, partition.base_offset) == (ErrorCode.REQUEST_TIMED_OUT, 0)
        assert cluster.nodes[0].get_log("t", 0).log_end_offset == 1  # appended all the same, as in Kafka


async def test_acks_all_on_a_partition_of_one_replica_does_not_wait_for_replication(tmp_path, monkeypatch):
    async with serving_cluster(tmp_path, **{"min.insync.replicas": 2}) as cluster:
        create_topic(cluster, replicas=(1,))

        async def never(*args):
            raise AssertionError("wait_for_isr called for a partition of one replica")
        monkeypatch.setattr(cluster.replication, "wait_for_isr", never)
        _, partition = await produce(cluster.nodes[1])
        assert (partition.error_code, partition.base_offset) == (ErrorCode.NONE, 0)  # effective min ISR: 1


async def test_leadership_moving_during_an_acks_all_wait_answers_not_leader_with_the_new_leader(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        create_topic(cluster)
        await in_sync(cluster)
        cluster.isolate_node(2)  # the high watermark cannot pass the new batch
        waiting = asyncio.ensure_future(produce(cluster.nodes[0], 11))
        await until(lambda: cluster.nodes[1].get_log("t", 0).log_end_offset == 1, "node 1 copying the batch")
        cluster.move_leader("t", 0, 1)
        answer, partition = await waiting
        assert (partition.error_code, partition.base_offset) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, 0)
        assert partition.current_leader.leader_id == 1
        assert [endpoint.node_id for endpoint in answer.node_endpoints] == [1]


async def test_a_transactional_batch_sent_to_a_follower_is_refused_before_the_coordinator_is_asked(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        create_topic(cluster)
        records = build_batch([(b"k", b"v", (), 1000)], producer_id=5, producer_epoch=0, base_sequence=0,
                              is_transactional=True)
        produce_request = request(records)
        produce_request.transactional_id = "txn"
        partition = (await call(cluster.nodes[1], 11, produce_request)).decoded.responses[0].partition_responses[0]
        assert (partition.error_code, partition.current_leader.leader_id) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, 0)
        assert cluster.metadata.topic("__transaction_state") is None  # no coordinator was involved
