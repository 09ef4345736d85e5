"""CreateTopics and CreatePartitions on a three-node cluster: replication factors up to the nodes registered,
placement by the controller, manual assignments checked as Kafka's controller checks them, validate_only."""
from __future__ import annotations

from compatbroker.protocol.error_codes import ErrorCode

from .cluster_helpers import serving_cluster
from .test_create_partitions import grow
from .test_create_partitions import request as create_partitions
from .test_create_topics import create, refused, topic

E = ErrorCode


def replicas(cluster, name: str) -> list[list[int]]:
    return [state.replicas for state in cluster.metadata.partitions(name)]


async def test_a_replication_factor_up_to_the_nodes_places_replicas_on_distinct_nodes(tmp_path):
    async with serving_cluster(tmp_path, **{"default.replication.factor": 2}) as cluster:
        results = await create(cluster.nodes[1], topic("three", 3, 3), topic("default", 2, -1))
        assert (results["three"].error_code, results["three"].replication_factor) == (E.NONE, 3)
        assert all(sorted(nodes) == [0, 1, 2] for nodes in replicas(cluster, "three"))
        assert sorted(nodes[0] for nodes in replicas(cluster, "three")) == [0, 1, 2]  # leaders spread
        assert (results["default"].replication_factor, [len(nodes) for nodes in replicas(cluster, "default")]) == (
            2, [2, 2])
        for nodes, state in zip(replicas(cluster, "three"), cluster.metadata.partitions("three")):
            assert all(cluster.nodes[node_id].get_log("three", state.partition) is not None for node_id in nodes)


async def test_a_replication_factor_beyond_the_registered_nodes_is_refused_with_kafkas_message(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        await refused(cluster.nodes[0], topic("four", 1, 4), E.INVALID_REPLICATION_FACTOR,
                      "Unable to replicate the partition 4 time(s): The target replication factor of 4 cannot be "
                      "reached because only 3 broker(s) are registered.")
        result = (await create(cluster.nodes[0], topic("four", 1, 4), validate_only=True))["four"]
        assert result.error_code == E.INVALID_REPLICATION_FACTOR


async def test_a_stopped_node_stays_registered_and_counts(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        cluster.stop_node(2)
        result = (await create(cluster.nodes[0], topic("t", 1, 3)))["t"]
        assert result.error_code == E.NONE
        (state,) = cluster.metadata.partitions("t")
        assert sorted(state.replicas) == [0, 1, 2] and 2 not in state.isr


async def test_manual_assignments_keep_their_order_and_are_checked_against_the_nodes(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        node = cluster.nodes[0]
        result = (await create(node, topic("placed", -1, -1, assignments={0: [2, 0], 1: [1, 2]})))["placed"]
        assert (result.error_code, result.num_partitions, result.replication_factor) == (E.NONE, 2, 2)
        assert replicas(cluster, "placed") == [[2, 0], [1, 2]]
        assert [state.leader for state in cluster.metadata.partitions("placed")] == [2, 1]
        await refused(node, topic("unknown", -1, -1, assignments={0: [0, 7]}), E.INVALID_REPLICA_ASSIGNMENT,
                      "The manual partition assignment includes broker 7, but no such broker is registered.")
        await refused(node, topic("uneven", -1, -1, assignments={0: [0, 1], 1: [2]}), E.INVALID_REPLICA_ASSIGNMENT,
                      "The manual partition assignment includes a partition with 1 replica(s), but this is not "
                      "consistent with previous partitions, which have 2 replica(s).")
        cluster.stop_node(1)
        cluster.stop_node(2)
        await refused(node, topic("fenced", -1, -1, assignments={0: [0], 1: [1], 2: [2]}),
                      E.INVALID_REPLICA_ASSIGNMENT, "All brokers specified in the manual partition assignment for "
                                                    "partition 1 are fenced or in controlled shutdown.")


async def test_validate_only_places_nothing(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        result = (await create(cluster.nodes[0], topic("t", 3, 3), validate_only=True))["t"]
        assert (result.error_code, result.replication_factor) == (E.NONE, 3)
        assert cluster.metadata.topic("t") is None
        assert all(not node.logs.logs for node in cluster.nodes.values())


async def test_create_partitions_places_new_partitions_with_the_topics_replication_factor(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        node = cluster.nodes[2]
        await create(node, topic("t", 1, 2))
        assert await create_partitions(node, grow("t", 3)) == [("t", E.NONE, None)]
        assert [len(nodes) for nodes in replicas(cluster, "t")] == [2, 2, 2]
        assert await create_partitions(node, grow("t", 4, [[2, 1]])) == [("t", E.NONE, None)]
        assert replicas(cluster, "t")[3] == [2, 1]
        assert await create_partitions(node, grow("t", 5, [[2]])) == [(
            "t", E.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes a partition with 1 "
            "replica(s), but this is not consistent with previous partitions, which have 2 replica(s).")]
        assert await create_partitions(node, grow("t", 5, [[0, 1]]), validate_only=True) == [("t", E.NONE, None)]
        assert cluster.metadata.topic("t").partitions == 4
