"""Fetch from follower (KIP-392) with real clients: a three-node cluster with racks a, b and c and Kafka's
RackAwareReplicaSelector; a topic whose leader is the node of rack a; a consumer with client.rack=b.

The leader answers the consumer's first Fetch with the preferred read replica (the in-sync replica of rack b) and
the client then fetches from that node: the request log shows the consumer's Fetches served by the rack-b node,
and every record is read, once and in order. librdkafka (confluent-kafka and kcat, client.rack), kafka-python and
aiokafka (client_rack, Fetch v11+) follow the preferred read replica. sarama 1.22 predates KIP-392 (no RackID);
kafkajs's rackId is not tested yet (a gap the matrix names).
"""
from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from compatbroker import EmbeddedBroker

from . import clients
from .cluster_scenario import CLUSTER_SETTINGS, ClusterUnderTest
from .records import Record

pytestmark = pytest.mark.matrix(flow="fetch from follower")

RACKS = ["a", "b", "c"]
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
COUNT = 200
READ_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def cluster():
    settings = CLUSTER_SETTINGS | {"replica.selector.class": SELECTOR}
    with EmbeddedBroker(settings, nodes=3, racks=RACKS) as embedded:
        yield ClusterUnderTest(embedded)


def read_with_rack(rack_client: str, bootstrap: str, topic: str, rack: str, client_id: str) -> list[tuple[int, bytes]]:
    readers = {"confluent-kafka": _confluent_read, "kafka-python": _kafka_python_read, "aiokafka": _aiokafka_read,
               "kcat": _kcat_read}
    return readers[rack_client](bootstrap, topic, rack, client_id)


def _confluent_read(bootstrap, topic, rack, client_id):
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ffr-{uuid.uuid4().hex[:8]}",
                         "client.id": client_id, "client.rack": rack, "broker.address.family": "v4",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    got = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        for msg in _until(lambda: len(got) >= COUNT, lambda: consumer.consume(COUNT, 0.5)):
            assert not msg.error(), msg.error()
            got.append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    return got


def _kafka_python_read(bootstrap, topic, rack, client_id):
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, client_id=client_id, client_rack=rack,
                             enable_auto_commit=False, fetch_max_wait_ms=100, auto_offset_reset="earliest")
    got = []
    try:
        consumer.assign([TopicPartition(topic, 0)])
        for record in _until(lambda: len(got) >= COUNT,
                             lambda: [r for rs in consumer.poll(timeout_ms=500).values() for r in rs]):
            got.append((record.offset, record.value))
    finally:
        consumer.close()
    return got


def _aiokafka_read(bootstrap, topic, rack, client_id):
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def read():
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, client_id=client_id, client_rack=rack,
                                    enable_auto_commit=False, fetch_max_wait_ms=100, auto_offset_reset="earliest")
        await consumer.start()
        got = []
        try:
            consumer.assign([TopicPartition(topic, 0)])
            deadline = time.monotonic() + READ_TIMEOUT_S
            while len(got) < COUNT:
                assert time.monotonic() < deadline, f"not all {COUNT} records within {READ_TIMEOUT_S} s"
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    got.extend((record.offset, record.value) for record in records)
        finally:
            await consumer.stop()
        return got
    return asyncio.run(read())


def _kcat_read(bootstrap, topic, rack, client_id):
    kcat = clients.load("kcat")
    consumed = kcat.consume(bootstrap, topic, COUNT, timeout_s=READ_TIMEOUT_S,
                            properties={"client.rack": rack, "client.id": client_id, "fetch.wait.max.ms": 100})
    return [(record.offset, record.value) for record in consumed]


def _until(done, poll):
    """The items of successive polls until `done()`, within READ_TIMEOUT_S."""
    deadline = time.monotonic() + READ_TIMEOUT_S
    while not done():
        assert time.monotonic() < deadline, f"not all {COUNT} records within {READ_TIMEOUT_S} s"
        yield from poll()


@pytest.mark.parametrize("rack_client", ["confluent-kafka", "kafka-python", "aiokafka", "kcat"])
def test_a_consumer_with_client_rack_fetches_from_the_follower_in_its_rack(cluster, reference, topic, rack_client):
    clients.load_or_fail(rack_client)
    cluster.create_topic(topic, 1)
    leader, local = cluster.node_in_rack("a"), cluster.node_in_rack("b")
    if cluster.leader_of(topic, 0) != leader:
        cluster.move_leader(topic, 0, leader)
    sent = [f"r{i}".encode() for i in range(COUNT)]
    reference.produce(cluster.bootstrap_servers, topic, [Record(None, v, partition=0) for v in sent])
    cluster.wait_until(lambda: len(cluster.isr(topic, 0)) == 3, "every replica in sync")

    client_id = f"ffr-{rack_client}-{uuid.uuid4().hex[:6]}"
    got = read_with_rack(rack_client, cluster.bootstrap_servers, topic, "b", client_id)
    assert got == list(enumerate(sent))
    fetches = [entry for entry in cluster.requests(api="Fetch")
               if entry.client_id == client_id and topic in entry.topics]
    served_by = [entry.node_id for entry in fetches]
    assert local in served_by, f"no Fetch served by node {local} (rack b): {served_by}"
    assert set(served_by) <= {leader, local}, f"Fetches served by {served_by}: only the leader and rack b's node"
