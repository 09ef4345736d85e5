"""Handler tests against a real in-process cluster (tests/cluster/helpers.py) whose nodes look as they do to clients:
node i listens on 127.0.0.(i+1):9092, the port the handler tests' requests arrive on (`helpers.context`)."""
from __future__ import annotations

import contextlib

from compatbroker.config import Endpoint

from ..cluster.helpers import create_topic, started_cluster, until  # noqa: F401 - the handler tests' helpers

PORT = 9092


def host_of(node_id: int) -> str:
    return f"127.0.0.{node_id + 1}"


@contextlib.asynccontextmanager
async def serving_cluster(tmp_path, *, nodes: int = 3, racks=None, **properties):
    """A started cluster whose nodes have registered their listeners (as the server does once bound)."""
    async with started_cluster(tmp_path / "data", nodes=nodes, racks=racks, **properties) as cluster:
        for node_id, node in cluster.nodes.items():
            node.register_listener(Endpoint("PLAINTEXT", host_of(node_id), PORT), PORT)
        yield cluster


async def in_sync(cluster, topic="t", partition=0) -> None:
    """Every replica of the partition has all its leader has, and the leader's high watermark is there too."""
    def synced():
        state = cluster.metadata.partition(topic, partition)
        leader_log = cluster.nodes[state.leader].get_log(topic, partition)
        return all(node_id in state.isr
                   and cluster.nodes[node_id].get_log(topic, partition).high_watermark == leader_log.log_end_offset
                   for node_id in state.replicas)
    await until(synced, f"every replica of {topic}-{partition} in sync")
