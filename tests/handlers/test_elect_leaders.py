"""ElectLeaders: Kafka's answers on a single node (nothing to elect) and on a 3-node cluster (preferred elections
after leadership moved, unclean elections of an offline partition, and the per-partition errors)."""
from __future__ import annotations

import pytest

from compatbroker.cluster import NO_LEADER
from compatbroker.handlers import elect_leaders
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import ElectLeadersRequest
from tests.cluster.helpers import started_cluster

from .helpers import call

Wanted = ElectLeadersRequest.TopicPartitions
ALL_VERSIONS = range(elect_leaders.MIN_VERSION, elect_leaders.MAX_VERSION + 1)


async def elect(broker, topic_partitions, election=elect_leaders.PREFERRED, version=2):
    return (await call(broker, version, ElectLeadersRequest(election_type=election,
                                                            topic_partitions=topic_partitions))).decoded


def outcomes(answer) -> dict[tuple[str, int], int]:
    return {(topic.topic, p.partition_id): p.error_code
            for topic in answer.replica_election_results for p in topic.partition_result}


def test_declares_every_schema_version():
    assert (elect_leaders.API_KEY, elect_leaders.MIN_VERSION, elect_leaders.MAX_VERSION) == (43, 0, 2)
    assert ElectLeadersRequest.VALID_VERSIONS == (0, 2)


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_on_a_single_node_the_only_replica_already_leads(broker, version):
    broker.create_topic("t", 2)
    answer = await elect(broker, [Wanted(topic="t", partitions=[0, 1, 5]), Wanted(topic="gone", partitions=[0])],
                         version=version)
    assert answer.error_code == 0
    assert outcomes(answer) == {("t", 0): ErrorCode.ELECTION_NOT_NEEDED, ("t", 1): ErrorCode.ELECTION_NOT_NEEDED,
                                ("t", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                ("gone", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    messages = {p.partition_id: p.error_message for p in answer.replica_election_results[0].partition_result}
    assert messages[0] == "Leader election not needed for topic partition."
    assert messages[5] == "No such partition as t-5"
    assert answer.replica_election_results[1].partition_result[0].error_message == "No such topic as gone"
    assert broker.partition_state("t", 0).leader_epoch == 0


async def test_unclean_election_of_a_partition_with_a_leader_is_not_needed(broker):
    broker.create_topic("t", 1)
    answer = await elect(broker, [Wanted(topic="t", partitions=[0])], election=elect_leaders.UNCLEAN)
    assert outcomes(answer) == {("t", 0): ErrorCode.ELECTION_NOT_NEEDED}


async def test_null_partitions_lists_every_topic_but_no_partition_that_needed_nothing(broker):
    broker.create_topic("b", 2)
    broker.create_topic("a", 1)
    answer = await elect(broker, None)
    assert [(t.topic, t.partition_result) for t in answer.replica_election_results] == [("a", []), ("b", [])]


@pytest.mark.parametrize("version", [1, 2])
async def test_an_unknown_election_type_refuses_the_request(broker, version):
    broker.create_topic("t", 1)
    answer = await elect(broker, [Wanted(topic="t", partitions=[0])], election=7, version=version)
    assert answer.error_code == ErrorCode.INVALID_REQUEST
    [result] = answer.replica_election_results[0].partition_result
    assert (result.error_code, result.error_message) == (ErrorCode.INVALID_REQUEST, "Unknown election type 7")


async def test_preferred_election_moves_leadership_back_to_the_first_replica(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        node = cluster.nodes[1]
        node.create_topic("t", 1, replication_factor=3)
        state = cluster.metadata.partition("t", 0)
        preferred = state.replicas[0]
        other = state.replicas[1]
        cluster.move_leader("t", 0, other)
        epoch = state.leader_epoch
        answer = await elect(node, [Wanted(topic="t", partitions=[0])])
        assert outcomes(answer) == {("t", 0): ErrorCode.NONE}
        assert answer.replica_election_results[0].partition_result[0].error_message is None
        assert (state.leader, state.leader_epoch) == (preferred, epoch + 1)
        again = await elect(cluster.nodes[2], [Wanted(topic="t", partitions=[0])])
        assert outcomes(again) == {("t", 0): ErrorCode.ELECTION_NOT_NEEDED}


async def test_null_partitions_reports_only_the_partitions_that_elected(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        node = cluster.nodes[0]
        node.create_topic("t", 3, replication_factor=3)
        moved = cluster.metadata.partition("t", 1)
        cluster.move_leader("t", 1, moved.replicas[2])
        answer = await elect(node, None)
        assert outcomes(answer) == {("t", 1): ErrorCode.NONE}
        assert moved.leader == moved.replicas[0]


async def test_preferred_replica_down_then_unclean_election_of_an_offline_partition(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        node = cluster.nodes[0]
        node.create_topic("t", assignment={0: [1, 2]})
        state = cluster.metadata.partition("t", 0)
        cluster.stop_node(1)
        assert (state.leader, state.isr) == (2, [2])
        wanted = [Wanted(topic="t", partitions=[0])]
        assert outcomes(await elect(node, wanted)) == {("t", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}
        cluster.stop_node(2)
        assert state.leader == NO_LEADER
        assert outcomes(await elect(node, wanted, election=elect_leaders.UNCLEAN)) == {
            ("t", 0): ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE}
        cluster.start_node(1)  # back, but out of sync: with unclean election off it stays offline
        assert state.leader == NO_LEADER
        assert outcomes(await elect(node, wanted)) == {("t", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}
        assert outcomes(await elect(node, wanted, election=elect_leaders.UNCLEAN)) == {("t", 0): ErrorCode.NONE}
        assert (state.leader, state.isr) == (1, [1])
