"""@confluentinc/kafka-javascript 1.10.1 (librdkafka 2.15.1) alone, through its KafkaJS-compatible API: what the
shared tests leave out for it.

It joins the shared flows through its catalog entry (produce, consume, list offsets, restart, metadata, committed
offsets, group members, idempotence, transactions). Here:
- produce: explicit timestamps and binary keys, values and header values, which the shared record-shapes test leaves
  out because the client sends an empty key or value as null (ConfluentKafkaJsClient);
- admin_topics: the KafkaJS admin creates a topic with a config (createTopics answers false for one that exists),
  describes it, and deletes it; the package's node-rdkafka-style AdminClient grows it (the KafkaJS admin has no
  createPartitions);
- groups: the KafkaJS admin lists, describes and deletes a group and fetches its offsets. Not the shared admin test:
  that one expects the range assignor, and this API's consumers default to roundrobin.
Not here: topic and broker configs (n/a: neither of its APIs has describeConfigs or alterConfigs).
"""
from __future__ import annotations

import pytest

from . import clients
from .checks import read_exactly
from .groups import Members, received_all
from .records import Record, assert_same, now_ms, record_shapes

pytestmark = pytest.mark.matrix(client="confluent-kafka-javascript")


@pytest.fixture
def ckjs():
    return clients.load_or_fail("confluent-kafka-javascript")


@pytest.mark.matrix(flow="produce")
def test_timestamps_and_binary_keys_values_and_headers(ckjs, reference, broker, topic):
    sent = [r for r in record_shapes(now_ms() - 60_000) if r.key != b""]  # EMPTY_IS_NULL
    assert any(r.timestamp for r in sent) and any(name == "bin" for r in sent for name, _ in r.headers)
    ckjs.produce(broker.bootstrap, topic, sent)
    assert_same(sent, read_exactly(reference, broker, topic, len(sent)))


@pytest.mark.matrix(flow="admin_topics")
def test_admin_creates_describes_grows_and_deletes_a_topic(ckjs, reference, kafka_python_admin, broker, topic):
    from kafka.admin import ConfigResource
    bootstrap = broker.bootstrap
    new = {"topic": topic, "partitions": 3, "config": {"retention.ms": "3600000"}}
    created, again, described = ckjs.admin(bootstrap, {"call": "create_topics", "topics": [new]},
                                           {"call": "create_topics", "topics": [new]},
                                           {"call": "describe_topics", "topics": [topic]})
    assert (created, again) == ({"result": True}, {"result": False}), "createTopics: false when it exists"
    assert described == {"result": [{"name": topic, "partitions": 3}]}
    configs = kafka_python_admin.describe_configs([ConfigResource("TOPIC", topic)])["topic"][topic]
    assert configs["retention.ms"]["value"] == "3600000"

    grown, listed = ckjs.admin(bootstrap, {"call": "create_partitions", "topic": topic, "partitions": 5},
                               {"call": "list_topics"})
    assert grown == {"result": True} and topic in listed["result"]
    assert reference.partitions_for(bootstrap, topic) == set(range(5))

    deleted, unknown = ckjs.admin(bootstrap, {"call": "delete_topics", "topics": [topic]},
                                  {"call": "delete_topics", "topics": [topic]})
    assert "error" not in deleted, deleted
    assert unknown["error"]["kafka"] == "UNKNOWN_TOPIC_OR_PART", unknown
    assert topic not in reference.list_topics(bootstrap)


@pytest.mark.matrix(flow="groups")
def test_admin_lists_describes_and_deletes_a_group(ckjs, reference, broker, topic, tmp_path):
    bootstrap, group = broker.bootstrap, f"group.{topic}"
    reference.produce(bootstrap, topic, [Record(None, f"v{i}".encode()) for i in range(3)])
    members = Members(tmp_path)
    try:
        member = members.start(ckjs, bootstrap, topic, group, "a")
        members.wait_until(lambda: received_all([member], {(0, f"v{i}") for i in range(3)}), "the member reads all")
        assert member.commit() == {0: 3}
        listed = ckjs.list_groups(bootstrap)[group]
        assert (listed.state, listed.protocol_type) == ("Stable", "consumer")
        described = ckjs.describe_groups(bootstrap, [group])[group]
        assert (described.state, described.protocol_type, described.protocol) == ("Stable", "consumer", "roundrobin")
        [seen] = described.members
        assert (seen.client_id, seen.assignment, seen.instance_id) == (member.client_id, {(topic, 0)}, None)
        assert ckjs.group_offsets(bootstrap, group) == {(topic, 0): 3}
        member.close()
    finally:
        members.stop_all()
    assert group in ckjs.list_groups(bootstrap, states=["Empty"])
    assert ckjs.admin(bootstrap, {"call": "delete_groups", "groups": [group]}) == [{"result": [group]}]
    assert group not in ckjs.list_groups(bootstrap)
    assert ckjs.group_offsets(bootstrap, group) == {}
