"""node-rdkafka 3.6.1 (librdkafka 2.12.0) alone: what the shared tests leave out for it.

It joins the shared flows through its catalog entry (produce, consume, list offsets, restart, metadata, committed
offsets, group members, idempotence, transactions). Here:
- produce: explicit timestamps and binary keys and values, which the shared record-shapes test leaves out because
  the client cannot send all of its shapes (binary header values and empty keys or values: NodeRdkafkaClient);
- admin_topics: its AdminClient (createTopic, createPartitions, deleteTopic: all the admin it has) creates a topic
  with a config, is told TOPIC_ALREADY_EXISTS the second time, grows it, and deletes it.
Not here: topic and broker configs (n/a: its AdminClient has no config calls), and the admin view of groups (it
has no group calls either).
"""
from __future__ import annotations

import pytest

from . import clients
from .checks import read_exactly
from .records import assert_same, now_ms, record_shapes

pytestmark = pytest.mark.matrix(client="node-rdkafka")


@pytest.fixture
def node_rdkafka():
    return clients.load_or_fail("node-rdkafka")


@pytest.mark.matrix(flow="produce")
def test_timestamps_and_binary_keys_and_values(node_rdkafka, reference, broker, topic):
    # No empty key or value (sent as null on node 20, EMPTY_IS_NULL), and text header values only.
    sent = [r for r in record_shapes(now_ms() - 60_000, binary_headers=False) if r.key != b""]
    assert any(r.timestamp for r in sent) and any(b"\x00" in (r.key or b"") for r in sent)
    reported = node_rdkafka.produce(broker.bootstrap, topic, sent)
    assert_same(sent, read_exactly(reference, broker, topic, len(sent)))
    assert reported == [(0, offset) for offset in range(len(sent))]


@pytest.mark.matrix(flow="admin_topics")
def test_admin_client_creates_grows_and_deletes_a_topic(node_rdkafka, reference, kafka_python_admin, broker, topic):
    from kafka.admin import ConfigResource
    bootstrap = broker.bootstrap
    first, again = node_rdkafka.admin(
        bootstrap, {"call": "create_topic", "topic": topic, "partitions": 3, "config": {"retention.ms": "3600000"}},
        {"call": "create_topic", "topic": topic, "partitions": 3})
    assert first == {"ok": True}
    assert again["error"]["kafka"] == "TOPIC_ALREADY_EXISTS", again
    assert reference.partitions_for(bootstrap, topic) == {0, 1, 2}
    configs = kafka_python_admin.describe_configs([ConfigResource("TOPIC", topic)])["topic"][topic]
    assert configs["retention.ms"]["value"] == "3600000"

    grown = node_rdkafka.admin(bootstrap, {"call": "create_partitions", "topic": topic, "partitions": 5})
    assert grown == [{"ok": True}]
    assert reference.partitions_for(bootstrap, topic) == set(range(5))

    deleted, unknown = node_rdkafka.admin(bootstrap, {"call": "delete_topic", "topic": topic},
                                          {"call": "delete_topic", "topic": topic})
    assert deleted == {"ok": True}
    assert unknown["error"]["kafka"] == "UNKNOWN_TOPIC_OR_PART", unknown
    assert topic not in reference.list_topics(bootstrap)
