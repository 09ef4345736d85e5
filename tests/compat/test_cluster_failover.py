"""Issue 16's failover evidence with real clients: a three-node cluster in this process, a topic of three partitions
with replication factor 3 and min.insync.replicas=2, an idempotent producer (acks=all) and a consumer group of the
same client, while every leader moves twice, a node stops and starts, and the group's coordinator node stops.
No acknowledged record is lost or duplicated, order is kept within each partition, and the group commits through
its new coordinator, which takes the group over without a rebalance (cluster_scenario.py has the scenario and the
checks).

kcat takes part as producer and group consumer (kcat -P, kcat -G); its producer reports no offsets, so the log
check for it is that every record is stored once and in order.
"""
from __future__ import annotations

import pytest

from compatbroker import EmbeddedBroker

from . import clients
from .cluster_scenario import CLUSTER_SETTINGS, ClusterUnderTest, check, run_scenario

pytestmark = pytest.mark.matrix(flow="cluster failover")

CLIENTS = ("kafka-python", "aiokafka", "confluent-kafka", "kcat")


@pytest.fixture
def cluster():
    with EmbeddedBroker(CLUSTER_SETTINGS, nodes=3) as embedded:
        yield ClusterUnderTest(embedded)


@pytest.mark.parametrize("failover_client", CLIENTS)
def test_no_record_lost_or_duplicated_through_leader_moves_and_node_failures(cluster, failover_client, topic):
    clients.load_or_fail(failover_client)  # a missing client fails with its install command
    group = f"group.{topic}"
    run, faults = run_scenario(cluster, failover_client, failover_client, topic, group)
    check(cluster, run, faults, topic, group, failover_client, failover_client)
