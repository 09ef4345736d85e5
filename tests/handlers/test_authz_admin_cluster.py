"""Authorization of the cluster-wide admin APIs with Kafka's StandardAuthorizer on: DescribeCluster (no check, and
its cluster authorized operations), DescribeLogDirs (cluster DESCRIBE), AlterReplicaLogDirs (cluster ALTER), and the
controller's ElectLeaders, AlterPartitionReassignments (cluster ALTER), ListPartitionReassignments and DescribeQuorum
(cluster DESCRIBE): Kafka's error answer when denied, and that nothing changes.

Set-up runs as the anonymous super user; the principal under test is ALICE (`authz_helpers.call_as`).
"""
from __future__ import annotations

import os

import pytest

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import (AlterPartitionReassignmentsRequest, AlterReplicaLogDirsRequest,
                                            DescribeClusterRequest, DescribeLogDirsRequest, DescribeQuorumRequest,
                                            ElectLeadersRequest, ListPartitionReassignmentsRequest)
from compatbroker.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from tests.cluster.helpers import started_cluster

from .authz_helpers import AUTHORIZER_ON, INT32_MIN, allow, call_as

Op = AclOperation
CLUSTER, TOPIC = ResourceType.CLUSTER, ResourceType.TOPIC
DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
E = ErrorCode


@pytest.fixture
def secured(broker_factory):
    """A broker with the authorizer on and a topic "t" (1 partition)."""
    broker = broker_factory(**AUTHORIZER_ON)
    broker.create_topic("t", 1)
    return broker


def allow_on_cluster(broker, operation: AclOperation) -> None:
    allow(broker, operation, CLUSTER, CLUSTER_NAME)


# --- DescribeCluster ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 2])
async def test_describe_cluster_needs_no_acl(secured, version):
    answer = (await call_as(secured, version, DescribeClusterRequest())).decoded
    assert (answer.error_code, answer.cluster_id, answer.cluster_authorized_operations) == (
        E.NONE, secured.cluster_id, INT32_MIN)


@pytest.mark.parametrize("version", [0, 2])
async def test_cluster_authorized_operations_need_describe_on_the_cluster(secured, version):
    request = DescribeClusterRequest(include_cluster_authorized_operations=True)
    allow_on_cluster(secured, Op.ALTER)  # ALTER implies DESCRIBE; ALTER_CONFIGS does not
    allow_on_cluster(secured, Op.ALTER_CONFIGS)
    answer = (await call_as(secured, version, request)).decoded
    assert answer.cluster_authorized_operations == sum(1 << op for op in (
        Op.ALTER, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS))


async def test_without_describe_on_the_cluster_its_operations_are_none(secured):
    allow_on_cluster(secured, Op.ALTER_CONFIGS)  # no DESCRIBE: Kafka answers no operation at all
    answer = (await call_as(secured, 2, DescribeClusterRequest(include_cluster_authorized_operations=True))).decoded
    assert (answer.error_code, answer.cluster_authorized_operations) == (E.NONE, 0)


# --- DescribeLogDirs ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 3, 5])
async def test_describe_log_dirs_needs_describe_on_the_cluster(secured, version):
    allow(secured, Op.DESCRIBE, TOPIC, "t")  # a topic ACL does not count
    denied = (await call_as(secured, version, DescribeLogDirsRequest(topics=None))).decoded
    assert denied.results == []
    assert denied.error_code == (DENIED if version >= 3 else E.NONE)  # v0-2 have no top-level error
    allow_on_cluster(secured, Op.DESCRIBE)
    described = (await call_as(secured, version, DescribeLogDirsRequest(topics=None))).decoded
    assert [[t.name for t in result.topics] for result in described.results] == [["t"]]


# --- AlterReplicaLogDirs --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 2])
async def test_alter_replica_log_dirs_needs_alter_on_the_cluster(broker_factory, tmp_path, version):
    jbod = broker_factory(**AUTHORIZER_ON, **{"log.dirs": f"{tmp_path / 'd1'},{tmp_path / 'd2'}"})
    jbod.create_topic("t", 2)
    source = os.path.dirname(jbod.get_log("t", 0).directory)
    [target] = [path for path in jbod.logs.log_dirs if path != source]
    Dir, Topic = AlterReplicaLogDirsRequest.AlterReplicaLogDir, AlterReplicaLogDirsRequest.AlterReplicaLogDirTopic
    request = AlterReplicaLogDirsRequest(dirs=[Dir(path=target, topics=[Topic(name="t", partitions=[0])]),
                                               Dir(path=source, topics=[Topic(name="t", partitions=[1])])])
    denied = (await call_as(jbod, version, request)).decoded
    # Kafka's error answer: one result per directory and topic, every partition refused
    assert [(t.topic_name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in denied.results] == [
        ("t", [(0, DENIED)]), ("t", [(1, DENIED)])]
    assert os.path.dirname(jbod.get_log("t", 0).directory) == source
    allow_on_cluster(jbod, Op.ALTER)
    moved = (await call_as(jbod, version, request)).decoded
    assert {(t.topic_name, p.partition_index): p.error_code for t in moved.results for p in t.partitions} == {
        ("t", 0): E.NONE, ("t", 1): E.NONE}
    assert os.path.dirname(jbod.get_log("t", 0).directory) == target


# --- ElectLeaders ---------------------------------------------------------------------------------------------------

def elect_request(topic_partitions) -> ElectLeadersRequest:
    return ElectLeadersRequest(election_type=0, topic_partitions=topic_partitions, timeout_ms=5000)


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_elect_leaders_is_refused_without_alter_on_the_cluster(secured, version):
    allow_on_cluster(secured, Op.DESCRIBE)
    wanted = [ElectLeadersRequest.TopicPartitions(topic="t", partitions=[0, 5])]
    answer = (await call_as(secured, version, elect_request(wanted))).decoded
    assert answer.error_code == (DENIED if version >= 1 else E.NONE)  # v0 has no top-level error
    [topic] = answer.replica_election_results
    assert [(p.partition_id, p.error_code) for p in topic.partition_result] == [(0, DENIED), (5, DENIED)]
    assert all(p.error_message for p in topic.partition_result)
    every = (await call_as(secured, version, elect_request(None))).decoded
    assert (every.error_code, every.replica_election_results) == (DENIED if version >= 1 else E.NONE, [])


async def test_a_denied_election_moves_no_leader(tmp_path):
    async with started_cluster(tmp_path / "data", **AUTHORIZER_ON) as cluster:
        node = cluster.nodes[0]
        node.create_topic("t", 1, replication_factor=3)
        state = cluster.metadata.partition("t", 0)
        cluster.move_leader("t", 0, state.replicas[1])
        wanted = [ElectLeadersRequest.TopicPartitions(topic="t", partitions=[0])]
        denied = (await call_as(node, 2, elect_request(wanted))).decoded
        assert denied.error_code == DENIED
        assert state.leader == state.replicas[1]
        allow_on_cluster(node, Op.ALTER)
        elected = (await call_as(node, 2, elect_request(wanted))).decoded
        assert elected.replica_election_results[0].partition_result[0].error_code == E.NONE
        assert state.leader == state.replicas[0]


# --- AlterPartitionReassignments, ListPartitionReassignments --------------------------------------------------------

def reassign_request(replicas) -> AlterPartitionReassignmentsRequest:
    return AlterPartitionReassignmentsRequest(timeout_ms=5000, allow_replication_factor_change=True, topics=[
        AlterPartitionReassignmentsRequest.ReassignableTopic(name="t", partitions=[
            AlterPartitionReassignmentsRequest.ReassignablePartition(partition_index=0, replicas=replicas)])])


@pytest.mark.parametrize("version", [0, 1])
async def test_alter_partition_reassignments_needs_alter_on_the_cluster(secured, version):
    allow_on_cluster(secured, Op.DESCRIBE)
    denied = (await call_as(secured, version, reassign_request([secured.node_id]))).decoded
    assert (denied.error_code, bool(denied.error_message)) == (DENIED, True)
    [topic] = denied.responses
    assert [(p.partition_index, p.error_code, bool(p.error_message)) for p in topic.partitions] == [(0, DENIED, True)]
    allow_on_cluster(secured, Op.ALTER)
    done = (await call_as(secured, version, reassign_request([secured.node_id]))).decoded
    assert (done.error_code, done.responses[0].partitions[0].error_code) == (E.NONE, E.NONE)


async def test_a_denied_reassignment_moves_nothing(tmp_path):
    async with started_cluster(tmp_path / "data", **AUTHORIZER_ON) as cluster:
        node = cluster.nodes[0]
        node.create_topic("t", assignment={0: [0, 1]})
        answer = (await call_as(node, 1, reassign_request([1, 2]))).decoded
        assert answer.error_code == DENIED
        state = cluster.metadata.partition("t", 0)
        assert (state.replicas, state.adding_replicas, state.removing_replicas) == ([0, 1], [], [])


async def test_list_partition_reassignments_needs_describe_on_the_cluster(secured):
    Listed = ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics
    request = ListPartitionReassignmentsRequest(timeout_ms=5000,
                                                topics=[Listed(name="t", partition_indexes=[0, 3])])
    denied = (await call_as(secured, 0, request)).decoded
    assert (denied.error_code, bool(denied.error_message)) == (DENIED, True)
    # Kafka's error answer lists each asked partition bare
    assert [(t.name, [(p.partition_index, p.replicas) for p in t.partitions]) for t in denied.topics] == [
        ("t", [(0, []), (3, [])])]
    every = (await call_as(secured, 0, ListPartitionReassignmentsRequest(timeout_ms=5000, topics=None))).decoded
    assert (every.error_code, every.topics) == (DENIED, [])
    allow_on_cluster(secured, Op.DESCRIBE)
    listed = (await call_as(secured, 0, request)).decoded
    assert (listed.error_code, listed.error_message, listed.topics) == (E.NONE, None, [])


# --- DescribeQuorum -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 2])
async def test_describe_quorum_needs_describe_on_the_cluster(secured, version):
    request = DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
        topic_name="__cluster_metadata", partitions=[DescribeQuorumRequest.PartitionData(partition_index=0)])])
    denied = (await call_as(secured, version, request)).decoded
    assert (denied.error_code, denied.topics, denied.nodes) == (DENIED, [], [])
    if version >= 2:
        assert denied.error_message
    allow_on_cluster(secured, Op.DESCRIBE)
    described = (await call_as(secured, version, request)).decoded
    assert described.error_code == E.NONE
    assert described.topics[0].partitions[0].leader_id == secured.node_id
