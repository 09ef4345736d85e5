"""What each node of a three-node cluster describes of itself: DescribeLogDirs (its replicas, per log directory)
and DescribeConfigs of BROKER resources (its own id only, as a Kafka broker)."""
from __future__ import annotations

import os

from compatbroker.protocol.error_codes import ErrorCode

from .cluster_helpers import create_topic, serving_cluster
from .test_describe_configs import BROKER, BROKER_LOGGER, Resource, describe as describe_configs, entries
from .test_describe_log_dirs import describe as describe_log_dirs, listed


async def test_each_node_describes_the_replicas_it_holds_in_each_of_its_log_dirs(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    async with serving_cluster(tmp_path, **{"log.dirs": ",".join(map(str, dirs))}) as cluster:
        create_topic(cluster, "t", partitions=2, replicas=(0, 1))
        create_topic(cluster, "u", partitions=1, replicas=(1,))
        for node_id, expected in ((0, {("t", 0), ("t", 1)}), (1, {("t", 0), ("t", 1), ("u", 0)}), (2, set())):
            results = (await describe_log_dirs(cluster.nodes[node_id], None)).results
            assert [result.log_dir for result in results] == [str(path / f"node-{node_id}") for path in dirs]
            held = {}
            for result in results:
                assert result.error_code == ErrorCode.NONE
                for key in listed(result):
                    held[key] = result.log_dir
            assert set(held) == expected
            for (topic, partition), log_dir in held.items():  # each where its directory is
                assert os.path.isdir(os.path.join(log_dir, f"{topic}-{partition}"))
        node1 = (await describe_log_dirs(cluster.nodes[1], None)).results
        assert all(result.topics for result in node1)  # new partitions go to the emptier directory


async def test_a_node_describes_its_own_broker_configs_and_refuses_another_nodes_id(tmp_path):
    async with serving_cluster(tmp_path, racks=["a", "b", "c"]) as cluster:
        own = await entries(cluster.nodes[1], Resource(resource_type=BROKER, resource_name="1"))
        assert own["node.id"].value == "1" and own["broker.rack"].value == "b"
        (other,) = await describe_configs(cluster.nodes[1], Resource(resource_type=BROKER, resource_name="2"))
        assert (other.error_code, other.error_message) == (
            ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 1 or empty string, but received 2")
        (logger,) = await describe_configs(cluster.nodes[0], Resource(resource_type=BROKER_LOGGER, resource_name="1"))
        assert (logger.error_code, logger.error_message) == (
            ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 0 but received 1")
        (text,) = await describe_configs(cluster.nodes[0], Resource(resource_type=BROKER, resource_name="x"))
        assert text.error_message == "Broker id must be an integer, but it is: x"
