"""sarama (Debian's 1.22, protocol 2.1.0) against a three-node cluster (issue 16's evidence for sarama).

- Failover: a topic with replication factor 3, three partitions and min.insync.replicas=2; sarama's idempotent
  SyncProducer (acks=all, one request in flight) writes numbered records while a sarama consumer group reads them;
  meanwhile every partition's leader is moved twice, a node is stopped and started, and the node coordinating the
  group is stopped (the request log shows the group's requests went to it). No acknowledged record may be lost,
  none stored twice, each partition's order kept, and the group reads everything and commits it at its new
  coordinator (sarama ends its session on a coordinator error; the consume loop joins again).
- acks=all with two of the three replicas stopped: NOT_ENOUGH_REPLICAS (19) reaches sarama's caller, nothing is
  stored; with the nodes back, the same write succeeds.
sarama refreshes metadata every second here (Metadata.RefreshFrequency), and after a failed request itself. The
scenario and the checks are in clients/cluster_workload.py.
"""
from __future__ import annotations

import pytest

from compatbroker.toolkit.embedded import EmbeddedBroker

from . import clients
from .clients.cluster_sarama import load as load_sarama_cluster
from .clients.cluster_workload import check_failover, followers_stopped

pytestmark = pytest.mark.matrix(client="sarama")

NODES = [0, 1, 2]
CLIENT_ID = "sarama-cluster"  # sarama/cluster/main.go names its client so
PARTITIONS = 3
OFFSETS_PARTITIONS = 6  # offsets.topic.num.partitions: fewer than Kafka's 50 keeps the cluster quick to start
TOTAL = 1400
NOT_ENOUGH_REPLICAS = 19
SETTINGS = {"offsets.topic.num.partitions": OFFSETS_PARTITIONS, "offsets.topic.replication.factor": 3}


@pytest.fixture(scope="module")
def sarama():
    try:
        return load_sarama_cluster()
    except clients.MissingClient as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def cluster():
    with EmbeddedBroker(SETTINGS, nodes=len(NODES)) as running:
        yield running


def create_topic(cluster, topic: str, partitions: int) -> None:
    """Replication factor 3, min.insync.replicas=2."""
    cluster.create_topic(topic, partitions, {"min.insync.replicas": 2}, replication_factor=3)


@pytest.mark.matrix(flow="cluster failover")
def test_failover_loses_and_duplicates_nothing(cluster, sarama, topic, tmp_path):
    create_topic(cluster, topic, PARTITIONS)
    group = f"{topic}.group"
    workload = sarama.workload(cluster.bootstrap_servers, topic, group, partitions=PARTITIONS, chunk=21,
                               log_path=tmp_path / "sarama.log")
    check_failover(cluster, workload, topic, group, "sarama", partitions=PARTITIONS, total=TOTAL, nodes=NODES,
                   offsets_partitions=OFFSETS_PARTITIONS, client_id=CLIENT_ID)


@pytest.mark.matrix(flow="cluster acks")
def test_acks_all_with_two_replicas_stopped_is_not_enough_replicas(cluster, sarama, topic):
    create_topic(cluster, topic, 1)
    with followers_stopped(cluster, topic, 0, NODES):
        refused = sarama.produce(cluster.bootstrap_servers, topic, 0, ["refused"], retries=1)
    assert not refused["ok"], "acks=all was answered with one replica in sync of min.insync.replicas=2"
    assert refused["error"]["code"] == NOT_ENOUGH_REPLICAS, refused["error"]
    accepted = sarama.produce(cluster.bootstrap_servers, topic, 0, ["accepted"], retries=100, idempotent=True)
    assert accepted["ok"], accepted["error"]
    assert [r.value for r in cluster.records(topic, 0, offset=0)] == [b"accepted"]
