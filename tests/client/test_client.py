"""KafkaClient: metadata into dataclasses, leaders and coordinators, routing to the right node of a cluster, and
refreshing stale metadata when a leader moves."""
from __future__ import annotations

import pytest

from compatbroker import EmbeddedBroker
from compatbroker.client import KafkaClient, KafkaError
from compatbroker.protocol.messages.api_versions import ApiVersionsRequest
from compatbroker.protocol.messages.metadata import MetadataRequest


def test_metadata_of_every_topic(broker, client):
    broker.create_topic("meta-all", 3)
    cluster = client.metadata()
    assert cluster.cluster_id and cluster.controller_id in cluster.brokers
    topic = cluster.topics["meta-all"]
    assert sorted(topic.partitions) == [0, 1, 2] and not topic.internal and topic.error is None
    assert topic.topic_id and len(topic.topic_id) == 36
    partition = topic.partitions[1]
    assert partition.leader in cluster.brokers and partition.replicas == partition.isr == [partition.leader]
    json = cluster.to_json()
    assert [t["name"] for t in json["topics"]] == sorted(cluster.topics)
    assert set(json["topics"][0]["partitions"][0]) == {"partition", "leader", "leader_epoch", "replicas", "isr",
                                                        "offline", "error"}


def test_metadata_of_no_topic_and_of_a_missing_one(client):
    assert client.metadata([]).topics == {}
    missing = client.metadata(["no-such-topic"]).topics["no-such-topic"]
    assert missing.error.name == "UNKNOWN_TOPIC_OR_PARTITION"
    assert client.metadata(["no-such-topic"]).topics["no-such-topic"].error is not None   # never auto-created


def test_leader_and_its_errors(broker, client):
    broker.create_topic("leaders", 2)
    assert client.leader("leaders", 1) in client.brokers
    with pytest.raises(KafkaError) as caught:
        client.leader("leaders", 5)
    assert caught.value.name == "UNKNOWN_TOPIC_OR_PARTITION" and "no partition 5" in caught.value.message
    with pytest.raises(KafkaError) as caught:
        client.leader("no-such-topic", 0)
    assert caught.value.name == "UNKNOWN_TOPIC_OR_PARTITION"


def test_send_a_request_object_and_a_function_of_the_version(client):
    response = client.send(ApiVersionsRequest(), max_version=2)
    assert any(entry.api_key == 3 for entry in response.api_keys)
    seen = []

    def build(version):
        seen.append(version)
        return MetadataRequest(topics=[], allow_auto_topic_creation=version < 4)
    version, response = client.call(build, api_key=3, max_version=6)
    assert seen == [6] and version == 6 and response.topics == []
    with pytest.raises(TypeError, match="api_key"):
        client.send(build)


def test_coordinator_of_a_group(client):
    node = client.coordinator("client-test-group")
    assert node in client.brokers
    assert client.coordinators(["a", "b"]) == {"a": node, "b": node}


@pytest.fixture(scope="module")
def cluster():
    with EmbeddedBroker({"num.partitions": 3, "default.replication.factor": 3}, nodes=3,
                        racks=["r0", "r1", "r2"]) as running:
        yield running


def test_cluster_brokers_racks_and_routing(cluster):
    cluster.create_topic("spread", 3)
    with KafkaClient(bootstrap=cluster.bootstrap_servers) as client:
        brokers = client.brokers
        assert sorted(brokers) == [0, 1, 2]
        assert {b.rack for b in brokers.values()} == {"r0", "r1", "r2"}
        leaders = {p: client.leader("spread", p) for p in range(3)}
        assert leaders == {p: cluster.leader_of("spread", p) for p in range(3)}
        for node in set(leaders.values()):
            assert client.connection(node).node_id == node


def test_moved_leader_is_found_after_refresh(cluster):
    cluster.create_topic("moving", 1)
    with KafkaClient(bootstrap=cluster.bootstrap_servers) as client:
        before = client.leader("moving", 0)
        target = next(node for node in cluster.node_ids if node != before)
        cluster.move_leader("moving", 0, target)
        assert client.leader("moving", 0) == before                 # cached
        assert client.leader("moving", 0, refresh=True) == target


def test_unknown_node_is_reported(client):
    with pytest.raises(KafkaError) as caught:
        client.connection(99)
    assert caught.value.name == "BROKER_NOT_AVAILABLE" and "node 99" in caught.value.message


def test_importing_the_client_loads_only_the_codecs():
    import subprocess
    import sys
    code = ("import sys, compatbroker.client.admin\n"
            "print(sorted(m for m in sys.modules if m.startswith('compatbroker.')\n"
            "             and not m.startswith(('compatbroker.protocol', 'compatbroker.client'))))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"       # a command line tool starts fast: no storage, server or security
