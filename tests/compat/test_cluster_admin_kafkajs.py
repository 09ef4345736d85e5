"""kafkajs 2.2.4's admin client against a three-node cluster (issue 16's admin evidence for kafkajs).

kafkajs' admin offers, of the calls that place replicas: createTopics with a replica assignment or a replication
factor, fetchTopicMetadata (leader, replicas, ISR per partition), describeCluster (from Metadata), and
alterPartitionReassignments / listPartitionReassignments (sent to the controller Metadata names). It has no
ElectLeaders, DescribeLogDirs, AlterReplicaLogDirs, DescribeTopicPartitions or DescribeQuorum call, so those are
tested with the clients that have them (kafka-python, confluent-kafka).

A reassignment is made observable in progress by isolating the node it adds: that node cannot copy the partition,
so ListPartitionReassignments shows it as an adding replica until the isolation ends and the copy completes.
"""
from __future__ import annotations

import time

import pytest

from compatbroker.toolkit.embedded import EmbeddedBroker

from .clients.cluster_kafkajs import KafkajsCluster

pytestmark = pytest.mark.matrix(client="kafkajs", flow="cluster admin")

NODES = [0, 1, 2]
WAIT_S = 60.0
SETTINGS = {"offsets.topic.num.partitions": 3}


@pytest.fixture(scope="module")
def cluster():
    with EmbeddedBroker(SETTINGS, nodes=len(NODES)) as running:
        yield running


@pytest.fixture
def kafkajs(cluster):
    cluster.reset()  # every node up and replicating again after a test that stopped or isolated one
    return KafkajsCluster(cluster.bootstrap_servers)


def partitions_of(kafkajs: KafkajsCluster, topic: str) -> dict[int, dict]:
    """partition -> {leader, replicas, isr} as kafkajs' fetchTopicMetadata reports it."""
    [found] = kafkajs.admin_results({"call": "fetch_topic_metadata", "topics": [topic]})
    [described] = found["topics"]
    return {p["partitionId"]: {"leader": p["leader"], "replicas": p["replicas"], "isr": sorted(p["isr"])}
            for p in described["partitions"]}


def test_create_topics_with_a_replica_assignment(kafkajs, topic):
    assignment = {0: [1, 0, 2], 1: [2, 1, 0], 2: [0, 2, 1], 3: [1, 2, 0]}
    kafkajs.admin_results({"call": "create_topics", "topics": [{
        "topic": topic, "replicaAssignment": [{"partition": p, "replicas": r} for p, r in assignment.items()]}]})
    found = partitions_of(kafkajs, topic)
    assert {p: state["replicas"] for p, state in found.items()} == assignment
    assert {p: state["leader"] for p, state in found.items()} == {p: r[0] for p, r in assignment.items()}
    assert all(state["isr"] == NODES for state in found.values()), found


def test_create_topics_spreads_leaders_and_replicas(kafkajs, topic):
    kafkajs.admin_results({"call": "create_topics", "topics": [
        {"topic": topic, "numPartitions": 6, "replicationFactor": 3}]})
    found = partitions_of(kafkajs, topic)
    assert sorted(found) == list(range(6))
    assert all(sorted(state["replicas"]) == NODES and state["leader"] == state["replicas"][0]
               for state in found.values()), found
    leaders = [state["leader"] for state in found.values()]
    assert sorted(leaders.count(node) for node in NODES) == [2, 2, 2], f"leaders not spread: {found}"


def test_replication_factor_above_the_node_count_is_refused(kafkajs, topic):
    [answer] = kafkajs.admin({"call": "create_topics", "topics": [
        {"topic": topic, "numPartitions": 1, "replicationFactor": len(NODES) + 1}]})
    assert [e["type"] for e in answer["error"].get("errors", [])] == ["INVALID_REPLICATION_FACTOR"], answer


def test_describe_cluster_names_every_node(cluster, kafkajs):
    [described] = kafkajs.admin_results({"call": "describe_cluster"})
    brokers = {b["nodeId"]: f"{b['host']}:{b['port']}" for b in described["brokers"]}
    assert sorted(brokers) == NODES
    assert sorted(brokers.values()) == sorted(cluster.bootstrap_servers.split(","))
    assert described["controller"] in NODES and described["clusterId"]


def test_reassignment_copies_the_data_and_shows_its_progress(cluster, kafkajs, topic):
    kafkajs.admin_results({"call": "create_topics", "topics": [
        {"topic": topic, "replicaAssignment": [{"partition": 0, "replicas": [0, 1]}]}]})
    values = [f"r{i}" for i in range(50)]
    assert kafkajs.produce(topic, 0, values, retries=10)["ok"]
    cluster.isolate_node(2)  # the added replica cannot copy yet: the reassignment stays in progress
    listing = {"call": "list_partition_reassignments", "topics": [{"topic": topic, "partitions": [0]}]}
    _, listed, described = kafkajs.admin_results(
        {"call": "alter_partition_reassignments", "topics": [
            {"topic": topic, "partitionAssignment": [{"partition": 0, "replicas": [1, 2]}]}]},
        listing, {"call": "fetch_topic_metadata", "topics": [topic]})
    # Kafka's view of a reassignment in progress: the target replicas, then those being removed
    assert listed["topics"] == [{"name": topic, "partitions": [
        {"partition": 0, "replicas": [1, 2, 0], "addingReplicas": [2], "removingReplicas": [0]}]}]
    assert [p["replicas"] for p in described["topics"][0]["partitions"]] == [[1, 2, 0]]

    cluster.isolate_node(2, False)
    wait_for(lambda: cluster.partition_state(topic, 0)["replicas"] == [1, 2], "the reassignment to complete")
    listed, described = kafkajs.admin_results(listing, {"call": "fetch_topic_metadata", "topics": [topic]})
    assert listed["topics"] in ([], [{"name": topic, "partitions": []}]), listed
    [found] = described["topics"][0]["partitions"]
    assert found["replicas"] == [1, 2] and sorted(found["isr"]) == [1, 2], found
    # node 2's copy is whole: with node 1 stopped it leads, and serves every record
    cluster.stop_node(1)
    assert cluster.leader_of(topic, 0) == 2
    assert [r.value.decode() for r in cluster.records(topic, 0, offset=0, limit=100)] == values


def wait_for(condition, what: str, timeout_s: float = WAIT_S):
    """Polls `condition` (the controller finishes a reassignment on its own schedule) until true, with a bound."""
    deadline = time.monotonic() + timeout_s
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        time.sleep(0.05)
    return result
