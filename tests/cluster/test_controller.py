"""The controller's rules on an in-process cluster: placement, elections when nodes stop and start, ISR changes,
reassignments, and the metadata surviving a restart."""
from __future__ import annotations

import os

import pytest

from compatbroker.cluster import NO_LEADER, PREFERRED, UNCLEAN, ControllerError
from compatbroker.cluster.placement import assign_replicas
from compatbroker.protocol.error_codes import ErrorCode

from .helpers import make_cluster


def test_placement_spreads_leaders_and_replicas_evenly():
    nodes = [(0, None), (1, None), (2, None)]
    assignment = assign_replicas("orders", 6, 3, nodes)
    assert sorted(replicas[0] for replicas in assignment) == [0, 0, 1, 1, 2, 2]
    assert all(sorted(replicas) == [0, 1, 2] for replicas in assignment)
    assert assign_replicas("orders", 6, 3, nodes) == assignment  # the same on every run


def test_placement_puts_each_replica_of_a_partition_in_another_rack():
    nodes = [(0, "a"), (1, "a"), (2, "b"), (3, "b")]
    racks = dict(nodes)
    for replicas in assign_replicas("t", 8, 2, nodes):
        assert {racks[node] for node in replicas} == {"a", "b"}


def test_a_topic_gets_replica_logs_on_the_nodes_it_is_placed_on(tmp_path):
    cluster = make_cluster(tmp_path)
    node = cluster.nodes[0]
    info = node.create_topic("orders", 3, replication_factor=2)
    for state in cluster.metadata.partitions("orders"):
        assert len(state.replicas) == 2 and state.isr == state.replicas and state.leader == state.replicas[0]
        for node_id, member in cluster.nodes.items():
            assert (member.get_log("orders", state.partition) is not None) == (node_id in state.replicas)
            assert member.is_leader("orders", state.partition) == (node_id == state.leader)
    assert os.path.isdir(tmp_path / "node-1")
    assert all(member.topic("orders") == info for member in cluster.nodes.values())


def test_a_replication_factor_beyond_the_nodes_is_refused_with_kafkas_message(tmp_path):
    cluster = make_cluster(tmp_path)
    with pytest.raises(ControllerError) as refused:
        cluster.nodes[0].create_topic("orders", 1, replication_factor=4)
    assert refused.value.code is ErrorCode.INVALID_REPLICATION_FACTOR
    assert "only 3 broker(s) are registered" in refused.value.message
    assert cluster.nodes[0].topic("orders") is None
    assert all(member.get_log("orders", 0) is None for member in cluster.nodes.values())


def test_a_manual_assignment_is_checked_and_honoured(tmp_path):
    cluster = make_cluster(tmp_path)
    node = cluster.nodes[0]
    with pytest.raises(ControllerError) as refused:
        node.create_topic("bad", assignment={0: [1, 1]})
    assert refused.value.code is ErrorCode.INVALID_REPLICA_ASSIGNMENT
    with pytest.raises(ControllerError):
        node.create_topic("bad", assignment={0: [7]})
    node.create_topic("good", assignment={0: [2, 0], 1: [1, 2]})
    assert [state.replicas for state in cluster.metadata.partitions("good")] == [[2, 0], [1, 2]]
    assert cluster.nodes[2].get_log("good", 0) is not None and cluster.nodes[1].get_log("good", 0) is None


def test_stopping_the_leader_elects_the_next_in_sync_replica_and_bumps_the_epoch(tmp_path):
    cluster = make_cluster(tmp_path)
    cluster.nodes[0].create_topic("t", assignment={0: [0, 1, 2]})
    cluster.stop_node(0)
    state = cluster.metadata.partition("t", 0)
    assert (state.leader, state.isr, state.leader_epoch) == (1, [1, 2], 1)
    cluster.start_node(0)
    assert cluster.metadata.partition("t", 0).leader == 1  # back as a follower; it rejoins the ISR by catching up


def test_the_last_in_sync_replica_stopping_takes_the_partition_offline_until_it_returns(tmp_path):
    cluster = make_cluster(tmp_path)
    cluster.nodes[0].create_topic("t", assignment={0: [0, 1]})
    cluster.controller.shrink_isr("t", 0, 1)
    cluster.stop_node(0)
    state = cluster.metadata.partition("t", 0)
    assert (state.leader, state.isr) == (NO_LEADER, [0])
    with pytest.raises(ControllerError) as refused:
        cluster.controller.elect_leader("t", 0, PREFERRED)
    assert refused.value.code is ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    cluster.start_node(0)
    assert cluster.metadata.partition("t", 0).leader == 0


def test_an_unclean_election_makes_an_out_of_sync_replica_the_whole_isr(tmp_path):
    cluster = make_cluster(tmp_path)
    cluster.nodes[0].create_topic("t", assignment={0: [0, 1]})
    cluster.controller.shrink_isr("t", 0, 1)
    cluster.stop_node(0)
    cluster.controller.elect_leader("t", 0, UNCLEAN)
    state = cluster.metadata.partition("t", 0)
    assert (state.leader, state.isr) == (1, [1])


def test_unclean_leader_election_enable_lets_the_controller_elect_by_itself(tmp_path):
    cluster = make_cluster(tmp_path)
    cluster.nodes[0].create_topic("t", assignment={0: [0, 1]}, configs={"unclean.leader.election.enable": "true"})
    cluster.controller.shrink_isr("t", 0, 1)
    cluster.stop_node(0)
    assert cluster.metadata.partition("t", 0).leader == 1


def test_preferred_election_moves_leadership_back(tmp_path):
    cluster = make_cluster(tmp_path)
    cluster.nodes[0].create_topic("t", assignment={0: [0, 1, 2]})
    cluster.move_leader("t", 0, 2)
    assert cluster.leader_of("t", 0) == 2
    cluster.controller.elect_leader("t", 0, PREFERRED)
    assert cluster.leader_of("t", 0) == 0
    with pytest.raises(ControllerError) as refused:
        cluster.controller.elect_leader("t", 0, PREFERRED)
    assert refused.value.code is ErrorCode.ELECTION_NOT_NEEDED


def test_a_reassignment_completes_when_the_new_replicas_are_in_sync(tmp_path):
    cluster = make_cluster(tmp_path)
    cluster.nodes[0].create_topic("t", assignment={0: [0, 1]})
    cluster.controller.reassign("t", 0, [2, 1])
    state = cluster.metadata.partition("t", 0)
    assert (state.adding_replicas, state.removing_replicas) == ([2], [0])
    assert [s.partition for s in cluster.controller.reassignments()] == [0]
    cluster.controller.expand_isr("t", 0, 2)
    state = cluster.metadata.partition("t", 0)
    assert state.replicas == [2, 1] and state.leader in (2, 1) and not state.adding_replicas
    with pytest.raises(ControllerError) as refused:
        cluster.controller.reassign("t", 0, None)
    assert refused.value.code is ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


def test_the_metadata_survives_a_restart(tmp_path):
    cluster = make_cluster(tmp_path)
    info = cluster.nodes[0].create_topic("t", 2, replication_factor=3)
    cluster.move_leader("t", 1, 2)
    expected = [(s.replicas, s.isr, s.leader, s.leader_epoch) for s in cluster.metadata.partitions("t")]
    for node in cluster.nodes.values():
        node.logs.shutdown()
    again = make_cluster(tmp_path)
    assert again.nodes[1].topic("t") == info
    assert [(s.replicas, s.isr, s.leader, s.leader_epoch) for s in again.metadata.partitions("t")] == expected
    assert again.metadata.cluster_id == cluster.metadata.cluster_id


def test_a_leader_rebalance_moves_leadership_back_to_preferred_replicas(tmp_path):
    cluster = make_cluster(tmp_path)
    cluster.nodes[0].create_topic("t", assignment={0: [0, 1], 1: [1, 2]})
    cluster.move_leader("t", 0, 1)
    cluster.stop_node(2)
    cluster.controller.shrink_isr("t", 1, 2)
    assert cluster.controller.rebalance_leaders() == 1
    assert [cluster.leader_of("t", partition) for partition in (0, 1)] == [0, 1]


def test_a_cluster_restarted_before_any_change_keeps_its_id(tmp_path):
    cluster = make_cluster(tmp_path)  # no topic, no election: nothing has changed the metadata yet
    for node in cluster.nodes.values():
        node.logs.shutdown()
    again = make_cluster(tmp_path)  # failed with "meta.properties belongs to cluster X" when the id was not kept
    assert again.metadata.cluster_id == cluster.metadata.cluster_id
