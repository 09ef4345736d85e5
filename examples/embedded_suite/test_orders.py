"""Tests a user might write: an order service's producer and consumer against compatbroker's fixtures."""
from __future__ import annotations

import uuid

from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def send_orders(bootstrap: str, topic: str, *orders: bytes) -> list[int]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0, retry_backoff_ms=50)
    try:
        futures = [producer.send(topic, key=b"order", value=order, partition=0) for order in orders]
        return [future.get(timeout=30).offset for future in futures]
    finally:
        producer.close(timeout=5)


def read_orders(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=10000)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        values = []
        for record in consumer:
            values.append(record.value)
            if len(values) == count:
                break
        return values
    finally:
        consumer.close()


def new_topic() -> str:
    return f"orders-{uuid.uuid4().hex[:8]}"


def test_orders_round_trip(compatbroker):
    topic = new_topic()
    compatbroker.create_topic(topic)
    assert send_orders(compatbroker.bootstrap_servers, topic, b"apple", b"pear") == [0, 1]
    assert read_orders(compatbroker.bootstrap_servers, topic, 2) == [b"apple", b"pear"]
    assert [record.value for record in compatbroker.records(topic)] == [b"apple", b"pear"]


def test_settings_from_pytest_ini_apply(compatbroker):
    assert compatbroker.create_topic(new_topic()).partitions == 3


def test_the_producer_retries_a_leader_change(compatbroker):
    topic = new_topic()
    compatbroker.create_topic(topic)
    compatbroker.inject_error("Produce", "NOT_LEADER_OR_FOLLOWER", count=2)
    assert send_orders(compatbroker.bootstrap_servers, topic, b"kiwi") == [0]
    assert [record.value for record in compatbroker.records(topic)] == [b"kiwi"]
    attempts = compatbroker.requests(api="Produce")
    assert [entry.injected_error for entry in attempts] == ["NOT_LEADER_OR_FOLLOWER"] * 2 + [None]
    compatbroker.inject_error("Metadata", "LEADER_NOT_AVAILABLE", count=None)  # left for the plugin to clear


def test_faults_of_an_earlier_test_are_gone(compatbroker):
    assert compatbroker.faults() == {"errors": [], "latency": [], "drops": []}
    assert compatbroker.requests(api="Produce") == []


def test_a_fresh_broker_is_empty_and_survives_a_restart(compatbroker_fresh):
    assert compatbroker_fresh.topics() == {}
    topic = new_topic()
    compatbroker_fresh.create_topic(topic, 1)
    send_orders(compatbroker_fresh.bootstrap_servers, topic, b"plum")
    compatbroker_fresh.restart()
    assert read_orders(compatbroker_fresh.bootstrap_servers, topic, 1) == [b"plum"]


def test_consumers_see_the_broker_come_back(compatbroker_fresh):
    topic = new_topic()
    compatbroker_fresh.create_topic(topic, 1)
    send_orders(compatbroker_fresh.bootstrap_servers, topic, b"fig")
    compatbroker_fresh.down()
    compatbroker_fresh.up()
    assert read_orders(compatbroker_fresh.bootstrap_servers, topic, 1) == [b"fig"]
