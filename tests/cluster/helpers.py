"""An in-process cluster for tests: nodes with their logs and coordinators, no sockets."""
from __future__ import annotations

import asyncio
import contextlib

from compatbroker.broker import build_cluster
from compatbroker.config import BrokerConfig


def make_cluster(data_dir, *, nodes: int = 3, racks=None, **properties):
    """A loaded (not yet serving) cluster of `nodes` brokers over `data_dir`, with Kafka-named properties."""
    cluster = build_cluster(BrokerConfig({"log.dirs": str(data_dir), **properties}), nodes=nodes, racks=racks)
    cluster.startup()
    return cluster


@contextlib.asynccontextmanager
async def started_cluster(data_dir, *, nodes: int = 3, racks=None, **properties):
    """A cluster doing its background work (replication, coordinators) on the running loop; shut down after."""
    cluster = make_cluster(data_dir, nodes=nodes, racks=racks, **properties)
    cluster.start_background_work()
    try:
        yield cluster
    finally:
        await cluster.shutdown()


async def until(condition, what: str, timeout_s: float = 20.0) -> None:
    """Wait for `condition()` to hold, checking often, failing after a generous bound."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


def create_topic(cluster, topic="t", partitions=1, replicas=(0, 1, 2), configs=None):
    """A topic whose partitions all have `replicas` (the first leads them)."""
    cluster.nodes[0].create_topic(topic, partitions, configs,
                                  assignment={partition: list(replicas) for partition in range(partitions)})
