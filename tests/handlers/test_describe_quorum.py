"""DescribeQuorum: the controller quorum of a single node and of a 3-node cluster, as Kafka's controller describes
its metadata log, and the answer to a request for another partition."""
from __future__ import annotations

import time

import pytest

from compatbroker.handlers import describe_quorum
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import DescribeQuorumRequest
from compatbroker.protocol.wire import ZERO_UUID
from tests.cluster.helpers import started_cluster

from .helpers import call

Topic = DescribeQuorumRequest.TopicData
Partition = DescribeQuorumRequest.PartitionData
ALL_VERSIONS = range(describe_quorum.MIN_VERSION, describe_quorum.MAX_VERSION + 1)


def metadata_log(*partitions, topic="__cluster_metadata"):
    return [Topic(topic_name=topic, partitions=[Partition(partition_index=p) for p in partitions or (0,)])]


async def describe(broker, topics, version=2):
    return (await call(broker, version, DescribeQuorumRequest(topics=topics))).decoded


def test_declares_every_schema_version():
    assert (describe_quorum.API_KEY, describe_quorum.MIN_VERSION, describe_quorum.MAX_VERSION) == (55, 0, 2)


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_a_single_node_is_the_only_voter_and_leads(broker, version):
    broker.create_topic("t", 1)
    before_ms = int(time.time() * 1000)
    answer = await describe(broker, metadata_log(), version)
    assert answer.error_code == 0
    [topic] = answer.topics
    [partition] = topic.partitions
    node, offset = broker.node_id, broker.metadata.metadata_offset
    assert (topic.topic_name, partition.partition_index, partition.error_code) == ("__cluster_metadata", 0, 0)
    assert (partition.leader_id, partition.leader_epoch, partition.high_watermark) == (node, 1, offset)
    [voter] = partition.current_voters
    assert (voter.replica_id, voter.log_end_offset, partition.observers) == (node, offset, [])
    if version >= 1:
        assert voter.last_fetch_timestamp >= before_ms and voter.last_caught_up_timestamp >= before_ms
    if version >= 2:
        assert voter.replica_directory_id == ZERO_UUID
        [entry] = answer.nodes
        assert entry.node_id == node
        # its endpoint as the client reached it (the handler tests' requests come in on localhost:9092)
        listeners = [(listener.name, listener.host, listener.port) for listener in entry.listeners]
        assert listeners == [("PLAINTEXT", "localhost", 9092)]


async def test_the_high_watermark_follows_metadata_changes(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        first = (await describe(cluster.nodes[1], metadata_log())).topics[0].partitions[0].high_watermark
        cluster.nodes[1].create_topic("t", 2, replication_factor=2)
        second = (await describe(cluster.nodes[2], metadata_log())).topics[0].partitions[0].high_watermark
        assert second > first and second == cluster.metadata.metadata_offset


async def test_a_cluster_has_the_lowest_node_as_voter_and_the_running_others_as_observers(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        cluster.stop_node(2)
        for node_id in (0, 1):
            [partition] = (await describe(cluster.nodes[node_id], metadata_log())).topics[0].partitions
            assert partition.leader_id == 0
            assert [voter.replica_id for voter in partition.current_voters] == [0]
            assert [observer.replica_id for observer in partition.observers] == [1]


@pytest.mark.parametrize("topics", [metadata_log(1), metadata_log(0, 0), metadata_log(topic="other"),
                                    metadata_log() + metadata_log(topic="x")])
async def test_anything_but_the_metadata_partition_is_unknown(broker, topics):
    answer = await describe(broker, topics)
    assert (answer.error_code, answer.nodes) == (0, [])
    asked = [(t.topic_name, p.partition_index) for t in topics for p in t.partitions]
    assert [(t.topic_name, p.partition_index) for t in answer.topics for p in t.partitions] == asked
    for partition in (p for t in answer.topics for p in t.partitions):
        assert partition.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert partition.error_message == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.message
        assert (partition.current_voters, partition.observers) == ([], [])
