"""AlterPartitionReassignments and ListPartitionReassignments: starting, listing and cancelling reassignments, and
the per-partition errors, on a single node and on a 3-node cluster."""
from __future__ import annotations

import asyncio

import pytest

from compatbroker.handlers import alter_partition_reassignments, list_partition_reassignments
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import AlterPartitionReassignmentsRequest, ListPartitionReassignmentsRequest
from tests.cluster.helpers import started_cluster

from .helpers import call

Topic = AlterPartitionReassignmentsRequest.ReassignableTopic
Partition = AlterPartitionReassignmentsRequest.ReassignablePartition
Listed = ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics
WAIT_S = 20


async def alter(broker, moves: dict[tuple[str, int], list[int] | None], *, version=1, allow_rf_change=True):
    topics: dict[str, list] = {}
    for (topic, partition), replicas in moves.items():
        topics.setdefault(topic, []).append(Partition(partition_index=partition, replicas=replicas))
    request = AlterPartitionReassignmentsRequest(allow_replication_factor_change=allow_rf_change,
                                                 topics=[Topic(name=t, partitions=p) for t, p in topics.items()])
    return (await call(broker, version, request)).decoded


def errors(answer) -> dict[tuple[str, int], tuple[int, str | None]]:
    return {(topic.name, p.partition_index): (p.error_code, p.error_message)
            for topic in answer.responses for p in topic.partitions}


async def listed(broker, topics=None) -> dict[tuple[str, int], tuple[list, list, list]]:
    answer = (await call(broker, 0, ListPartitionReassignmentsRequest(topics=topics))).decoded
    assert (answer.error_code, answer.error_message) == (0, None)
    return {(topic.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
            for topic in answer.topics for p in topic.partitions}


def test_declares_every_schema_version():
    assert (alter_partition_reassignments.API_KEY, alter_partition_reassignments.MIN_VERSION,
            alter_partition_reassignments.MAX_VERSION) == (45, 0, 1)
    assert (list_partition_reassignments.API_KEY, list_partition_reassignments.MIN_VERSION,
            list_partition_reassignments.MAX_VERSION) == (46, 0, 0)


@pytest.mark.parametrize("version", [0, 1])
async def test_single_node_errors_as_kafka(broker, version):
    broker.create_topic("t", 1)
    node = broker.node_id
    answer = await alter(broker, {("t", 0): None, ("t", 3): [node], ("gone", 0): [node], ("u", 0): [node, node]},
                         version=version)
    assert (answer.error_code, answer.error_message) == (0, None)
    assert answer.allow_replication_factor_change is True
    found = errors(answer)
    assert found[("t", 0)] == (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
    assert found[("t", 3)] == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition t:3.")
    assert found[("gone", 0)] == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named gone.")
    assert found[("u", 0)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_single_node_refuses_an_unknown_node_and_an_empty_list(broker):
    broker.create_topic("t", 2)
    found = errors(await alter(broker, {("t", 0): [broker.node_id + 5], ("t", 1): []}))
    assert found[("t", 0)][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "no such broker is registered" in found[("t", 0)][1]
    assert found[("t", 1)][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert await listed(broker) == {}


async def test_single_node_reassignment_onto_itself_completes_at_once(broker):
    broker.create_topic("t", 1)
    assert errors(await alter(broker, {("t", 0): [broker.node_id]})) == {("t", 0): (0, None)}
    assert await listed(broker) == {}
    assert broker.partition_state("t", 0).replicas == [broker.node_id]


async def test_v1_can_refuse_a_replication_factor_change(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        node = cluster.nodes[0]
        node.create_topic("t", assignment={0: [0, 1], 1: [1, 2]})
        answer = await alter(node, {("t", 0): [0, 1, 2], ("t", 1): [2, 0]}, allow_rf_change=False)
        assert answer.allow_replication_factor_change is False
        found = errors(answer)
        assert found[("t", 0)] == (ErrorCode.INVALID_REPLICATION_FACTOR,
                                   "The replication factor is changed from 2 to 3")
        assert found[("t", 1)] == (0, None)
        assert cluster.metadata.partition("t", 0).replicas == [0, 1]


async def test_a_reassignment_in_progress_is_listed_then_cancelled(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        node = cluster.nodes[0]
        node.create_topic("t", assignment={0: [0, 1], 1: [1, 2]})
        node.create_topic("other", assignment={0: [2, 0]})
        cluster.stop_node(2)  # an added replica on a stopped node cannot catch up: the move stays in progress
        assert errors(await alter(node, {("t", 0): [1, 2]})) == {("t", 0): (0, None)}
        expected = {("t", 0): ([1, 2, 0], [2], [0])}
        for member in cluster.nodes.values():  # any node answers with the controller's view
            assert await listed(member) == expected
        assert await listed(node, [Listed(name="t", partition_indexes=[0, 1, 9]), Listed(name="other",
                                                                                        partition_indexes=[0]),
                                   Listed(name="gone", partition_indexes=[0])]) == expected
        assert await listed(node, [Listed(name="t", partition_indexes=[1])]) == {}
        assert errors(await alter(cluster.nodes[1], {("t", 0): None})) == {("t", 0): (0, None)}
        assert await listed(node) == {}
        state = cluster.metadata.partition("t", 0)
        # Kafka's revert keeps the replica list of the move minus the replicas it added, in that order
        assert (state.replicas, state.adding_replicas, state.removing_replicas) == ([1, 0], [], [])
        assert errors(await alter(node, {("t", 0): None}))[("t", 0)][0] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


async def test_a_reassignment_copies_the_data_and_completes(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        node = cluster.nodes[0]
        node.create_topic("t", assignment={0: [0, 1]})
        assert errors(await alter(node, {("t", 0): [2, 1]})) == {("t", 0): (0, None)}
        state = cluster.metadata.partition("t", 0)
        async with asyncio.timeout(WAIT_S):
            while await listed(node):
                await asyncio.sleep(0.05)
        assert (state.replicas, state.adding_replicas, state.removing_replicas) == ([2, 1], [], [])
        assert state.leader in (2, 1) and sorted(state.isr) == [1, 2]
        assert cluster.nodes[2].get_log("t", 0) is not None
