"""kafkajs 2.2.4 against a three-node cluster (issue 16's evidence for kafkajs).

- Failover: a topic with replication factor 3, three partitions and min.insync.replicas=2; kafkajs' idempotent
  producer (acks=all, one request in flight) writes numbered records while a kafkajs consumer group reads them;
  meanwhile every partition's leader is moved twice, a node is stopped and started, and the node coordinating the
  group is stopped (the request log shows the group's requests went to it). No acknowledged record may be lost,
  none stored twice, each partition's order kept, and the group reads everything and commits it at its new
  coordinator. kafkajs keeps reconnecting to a coordinator that is gone until its retries run out, then restarts
  the consumer (its restartOnFailure), which finds the new coordinator and re-reads from the last commit: records
  read after a failed commit come again (at-least-once, as the checks allow), never out of order.
- acks=all with two of the three replicas stopped: NOT_ENOUGH_REPLICAS reaches kafkajs' caller, nothing is stored;
  with the nodes back, the same write succeeds.
kafkajs refreshes metadata every second here (metadataMaxAge), and on NOT_LEADER_OR_FOLLOWER / NOT_COORDINATOR. The
scenario and the checks are in clients/cluster_workload.py.
"""
from __future__ import annotations

import pytest

from compatbroker.toolkit.embedded import EmbeddedBroker

from .clients.cluster_kafkajs import KafkajsCluster
from .clients.cluster_workload import check_failover, followers_stopped

pytestmark = pytest.mark.matrix(client="kafkajs")

NODES = [0, 1, 2]
CLIENT_ID = "cluster-kafkajs-"  # cluster_kafkajs.js names its clients so
PARTITIONS = 3
OFFSETS_PARTITIONS = 6  # offsets.topic.num.partitions: fewer than Kafka's 50 keeps the cluster quick to start
TOTAL = 1400
SETTINGS = {"offsets.topic.num.partitions": OFFSETS_PARTITIONS, "offsets.topic.replication.factor": 3}


@pytest.fixture
def cluster():
    with EmbeddedBroker(SETTINGS, nodes=len(NODES)) as running:
        yield running


@pytest.fixture
def kafkajs(cluster):
    return KafkajsCluster(cluster.bootstrap_servers)


def create_topic(cluster, topic: str, partitions: int) -> None:
    """Replication factor 3, min.insync.replicas=2 (kafkajs' createTopics: test_cluster_admin_kafkajs.py)."""
    cluster.create_topic(topic, partitions, {"min.insync.replicas": 2}, replication_factor=3)


@pytest.mark.matrix(flow="cluster failover")
def test_failover_loses_and_duplicates_nothing(cluster, kafkajs, topic, tmp_path):
    create_topic(cluster, topic, PARTITIONS)
    group = f"{topic}.group"
    workload = kafkajs.workload(topic, group, partitions=PARTITIONS, chunk=20, log_path=tmp_path / "kafkajs.log")
    check_failover(cluster, workload, topic, group, "kafkajs", partitions=PARTITIONS, total=TOTAL, nodes=NODES,
                   offsets_partitions=OFFSETS_PARTITIONS, client_id=CLIENT_ID)


@pytest.mark.matrix(flow="cluster acks")
def test_acks_all_with_two_replicas_stopped_is_not_enough_replicas(cluster, kafkajs, topic):
    create_topic(cluster, topic, 1)
    with followers_stopped(cluster, topic, 0, NODES):
        refused = kafkajs.produce(topic, 0, ["refused"], retries=1)
    assert not refused["ok"], "acks=all was answered with one replica in sync of min.insync.replicas=2"
    assert refused["error"]["type"] == "NOT_ENOUGH_REPLICAS", refused["error"]
    # retried until a follower is back in sync
    accepted = kafkajs.produce(topic, 0, ["accepted"], retries=40, idempotent=True)
    assert accepted["ok"], accepted["error"]
    assert [r.value for r in cluster.records(topic, 0, offset=0)] == [b"accepted"]
