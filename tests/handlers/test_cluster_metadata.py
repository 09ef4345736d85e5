"""Metadata and DescribeCluster on a three-node cluster: every node describes the whole cluster, with leaders,
replicas, ISR, offline replicas, racks, and the partitions that lost their leader."""
from __future__ import annotations

import pytest

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import DescribeClusterRequest, MetadataRequest

from .cluster_helpers import PORT, create_topic, host_of, serving_cluster
from .helpers import call

RACKS = ["rack-a", "rack-b", "rack-c"]


def metadata_request(*topics, allow_auto_topic_creation=False) -> MetadataRequest:
    wanted = None if not topics else [MetadataRequest.MetadataRequestTopic(name=name) for name in topics]
    return MetadataRequest(topics=wanted, allow_auto_topic_creation=allow_auto_topic_creation)


async def describe(node, *topics, version=12, **options):
    if version < 4:
        options["allow_auto_topic_creation"] = True  # the field's value before v4, which cannot say no
    return (await call(node, version, metadata_request(*topics, **options))).decoded


def endpoints(answer) -> dict:
    return {b.node_id: (b.host, b.port, b.rack) for b in answer.brokers}


async def test_every_node_describes_every_broker_with_its_rack_and_the_whole_topic(tmp_path):
    async with serving_cluster(tmp_path, racks=RACKS) as cluster:
        create_topic(cluster, partitions=2, replicas=(1, 2, 0))
        for node_id, node in cluster.nodes.items():
            answer = await describe(node, "t")
            hosts = {other: ("localhost" if other == node_id else host_of(other), PORT, RACKS[other])
                     for other in range(3)}  # the node answering: the address the client used
            assert endpoints(answer) == hosts
            assert answer.controller_id == node_id  # a live broker, as a KRaft broker names one
            (topic,) = answer.topics
            assert [(p.partition_index, p.error_code, p.leader_id, p.replica_nodes, p.isr_nodes, p.offline_replicas)
                    for p in topic.partitions] == [(0, 0, 1, [1, 2, 0], [1, 2, 0], []),
                                                   (1, 0, 1, [1, 2, 0], [1, 2, 0], [])]


async def test_a_stopped_node_leaves_the_broker_list_its_partitions_elect_and_its_replicas_are_offline(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        create_topic(cluster, replicas=(0, 1, 2))
        epoch = cluster.metadata.partition("t", 0).leader_epoch
        cluster.stop_node(0)
        answer = await describe(cluster.nodes[2], "t")
        assert sorted(endpoints(answer)) == [1, 2]
        (partition,) = answer.topics[0].partitions
        assert (partition.error_code, partition.leader_id, partition.leader_epoch) == (0, 1, epoch + 1)
        assert (partition.replica_nodes, partition.isr_nodes, partition.offline_replicas) == ([0, 1, 2], [1, 2], [0])


async def test_a_partition_without_a_live_in_sync_replica_answers_leader_not_available(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        create_topic(cluster, replicas=(0,))
        cluster.stop_node(0)
        (partition,) = (await describe(cluster.nodes[1], "t")).topics[0].partitions
        state = cluster.metadata.partition("t", 0)
        assert (partition.error_code, partition.leader_id) == (ErrorCode.LEADER_NOT_AVAILABLE, -1)
        assert partition.leader_epoch == state.leader_epoch  # the epoch stays known
        assert (partition.replica_nodes, partition.isr_nodes, partition.offline_replicas) == ([0], [0], [0])


async def test_version_0_lists_only_live_replicas_and_says_some_are_missing(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        create_topic(cluster, replicas=(0, 1, 2))
        cluster.stop_node(2)
        (partition,) = (await describe(cluster.nodes[0], "t", version=0)).topics[0].partitions
        assert (partition.error_code, partition.leader_id) == (ErrorCode.REPLICA_NOT_AVAILABLE, 0)
        assert (partition.replica_nodes, partition.isr_nodes) == ([0, 1], [0, 1])


async def test_auto_creation_uses_the_default_replication_factor(tmp_path):
    async with serving_cluster(tmp_path, **{"default.replication.factor": 3}) as cluster:
        first = await describe(cluster.nodes[1], "auto", allow_auto_topic_creation=True)
        assert first.topics[0].error_code == ErrorCode.LEADER_NOT_AVAILABLE
        (partition,) = (await describe(cluster.nodes[1], "auto")).topics[0].partitions
        assert sorted(partition.replica_nodes) == [0, 1, 2] and partition.error_code == 0


async def test_auto_creation_beyond_the_registered_nodes_creates_nothing_and_answers_unknown(tmp_path, caplog):
    async with serving_cluster(tmp_path, **{"default.replication.factor": 4}) as cluster:
        answer = await describe(cluster.nodes[0], "auto", allow_auto_topic_creation=True)
        assert answer.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert cluster.metadata.topic("auto") is None
        assert "INVALID_REPLICATION_FACTOR" in caplog.text


@pytest.mark.parametrize("include_fenced", [False, True])
async def test_describe_cluster_lists_live_brokers_and_on_request_the_fenced_ones(tmp_path, include_fenced):
    async with serving_cluster(tmp_path, racks=RACKS) as cluster:
        cluster.stop_node(1)
        answer = (await call(cluster.nodes[2], 2, DescribeClusterRequest(
            include_cluster_authorized_operations=False, endpoint_type=1,
            include_fenced_brokers=include_fenced))).decoded
        listed = {b.broker_id: (b.host, b.rack, b.is_fenced) for b in answer.brokers}
        expected = {0: (host_of(0), "rack-a", False), 2: ("localhost", "rack-c", False)}
        if include_fenced:
            expected[1] = (host_of(1), "rack-b", True)
        assert listed == expected
        assert answer.controller_id == 2 and answer.cluster_id == cluster.metadata.cluster_id
