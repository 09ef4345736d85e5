"""Admin against an older broker's API ranges (compatbroker emulating Apache Kafka 2.8: no batched FindCoordinator
or OffsetFetch, ListGroups without types, no KIP-848 APIs, ApiVersions up to v3) and against a cluster of three
(requests routed to leaders, the controller and the described broker). The broker's request log shows which
version and node each request used."""
from __future__ import annotations

import pytest

from compatbroker import EmbeddedBroker
from compatbroker.client import KafkaClient
from compatbroker.client.admin import Admin, NewTopic

from .helpers import produce


@pytest.fixture(scope="module")
def old_broker():
    with EmbeddedBroker({"num.partitions": 1}, emulate="2.8") as running:
        yield running


@pytest.fixture
def old_admin(old_broker):
    with KafkaClient(bootstrap=old_broker.bootstrap_servers, client_id="old-versions") as client:
        yield Admin(client)


def versions_used(broker, api: str) -> set[int]:
    return {entry.api_version for entry in broker.requests(api=api) if entry.client_id == "old-versions"}


def test_topics_configs_and_offsets_on_kafka_2_8(old_broker, old_admin):
    results = old_admin.create_topics([NewTopic("old-topic", 2), NewTopic("old-topic-2", 1, 1)])
    assert [r.error for r in results] == [None, None]
    assert {t.name for t in old_admin.list_topics()} >= {"old-topic", "old-topic-2"}
    produce(old_admin.client, "old-topic", 1, [b"a", b"b"])
    assert [r.offset for r in old_admin.list_offsets("old-topic", None, "latest")] == [0, 2]
    old_admin.incremental_alter_configs("topic", "old-topic", [("retention.ms", "set", "4321")])
    assert old_admin.describe_configs("topic", "old-topic", ["retention.ms"])[0].value == "4321"
    assert old_admin.delete_topics(["old-topic-2"])[0].error is None
    assert versions_used(old_broker, "CreateTopics") == {7}
    assert versions_used(old_broker, "ListOffsets") == {6}
    assert versions_used(old_broker, "Metadata") == {11}
    assert versions_used(old_broker, "ApiVersions") == {3, 4}      # v4 refused in a v0 answer, then v3


def test_groups_on_kafka_2_8(old_broker, old_admin):
    old_admin.create_topics([NewTopic("old-grouped", 1, 1)])
    assert old_admin.commit_offsets("old-group", {("old-grouped", 0): 3})[0].error is None
    assert [(o.partition, o.offset) for o in old_admin.committed_offsets("old-group")] == [(0, 3)]
    listed = {g.group_id: g for g in old_admin.list_groups()}
    assert listed["old-group"].type == "classic" and listed["old-group"].state == "Empty"
    assert "old-group" in {g.group_id for g in old_admin.list_groups(types=["classic"])}
    assert old_admin.list_groups(types=["consumer"]) == []             # 2.8 has no consumer groups
    group = old_admin.describe_groups(["old-group"])[0]
    assert (group.type, group.state, group.error) == ("classic", "Empty", None)
    assert old_admin.delete_offsets("old-group", [("old-grouped", 0)])[0].error is None
    assert old_admin.delete_groups(["old-group"])[0].error is None
    assert versions_used(old_broker, "FindCoordinator") == {3}
    assert versions_used(old_broker, "OffsetFetch") == {7}
    assert versions_used(old_broker, "ListGroups") == {4}
    assert not versions_used(old_broker, "ConsumerGroupDescribe")


def test_cluster_info_on_kafka_2_8(old_admin):
    info = old_admin.cluster_info()
    assert info.source == "DescribeCluster" and info.cluster_id and info.brokers


@pytest.fixture(scope="module")
def cluster():
    with EmbeddedBroker({"num.partitions": 3, "default.replication.factor": 2}, nodes=3) as running:
        yield running


def nodes_asked(cluster, api: str) -> list[int]:
    return sorted(e.node_id for e in cluster.requests(api=api) if e.client_id == "router")


def test_requests_are_routed_as_kafkas_admin_client_routes_them(cluster):
    with KafkaClient(bootstrap=cluster.bootstrap_servers, client_id="router") as client:
        admin = Admin(client)
        assert admin.create_topics([NewTopic("routed", 3, 2)])[0].error is None
        controller = client.metadata([]).controller_id
        assert nodes_asked(cluster, "CreateTopics") == [controller]
        for partition in range(3):
            produce(client, "routed", partition, [b"x"] * (partition + 1))
        assert [r.offset for r in admin.list_offsets("routed", None, "latest")] == [1, 2, 3]
        leaders = sorted({cluster.leader_of("routed", p) for p in range(3)})
        assert nodes_asked(cluster, "ListOffsets") == leaders         # one request per leader, to the leader
        assert nodes_asked(cluster, "Produce") == sorted(cluster.leader_of("routed", p) for p in range(3))
        admin.describe_configs("broker", "2", ["log.retention.ms"])
        assert nodes_asked(cluster, "DescribeConfigs") == [2]
        info = admin.cluster_info()
        assert [b.node_id for b in info.brokers] == [0, 1, 2] and info.controller_id == controller


def test_list_offsets_follows_a_moved_leader(cluster):
    cluster.create_topic("relocated", 1)
    with KafkaClient(bootstrap=cluster.bootstrap_servers, client_id="router") as client:
        admin = Admin(client)
        produce(client, "relocated", 0, [b"a", b"b"])
        before = client.leader("relocated", 0)
        target = next(node for node in cluster.node_ids if node != before and
                      node in client.topic("relocated").partitions[0].isr)
        cluster.move_leader("relocated", 0, target)
        assert client.leader("relocated", 0) == before                    # the client's view is stale
        [result] = admin.list_offsets("relocated", [0], "latest")
        assert (result.offset, result.error) == (2, None)                 # NOT_LEADER_OR_FOLLOWER, refresh, retry
        assert client.leader("relocated", 0) == target
