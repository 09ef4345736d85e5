"""`/metrics` scraped while real clients (kafka-python, confluent-kafka) produce, consume and commit: the counters
move by exactly what the clients did, and the gauges say what the broker holds."""
from __future__ import annotations

import os
import socket

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition

from compatbroker import EmbeddedBroker

from .helpers import scrape, wait_for

TOPIC = "orders"
PER_PARTITION = 10


@pytest.fixture
def broker():
    with EmbeddedBroker(metrics_listen="127.0.0.1:0") as broker:
        yield broker


def _segment_files(broker, partition: int) -> list[str]:
    directory = os.path.join(broker.data_dir, f"{TOPIC}-{partition}")
    return [os.path.join(directory, name) for name in os.listdir(directory) if name.endswith(".log")]


def _last_seq(broker) -> int:
    logged = broker.requests()
    return logged[-1].seq if logged else 0


def test_counters_follow_what_clients_produce_consume_and_commit(broker):
    url = broker.metrics_url
    assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics")
    broker.create_topic(TOPIC, partitions=2)
    before = scrape(url)
    seq = _last_seq(broker)

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=0, request_timeout_ms=10000)
    for index in range(2 * PER_PARTITION):
        producer.send(TOPIC, value=b"order-%02d" % index, partition=index % 2)
    producer.flush()
    producer.close()

    produced = scrape(url)
    assert produced.value("kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) - \
        before.value("kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == 2 * PER_PARTITION
    stored = sum(os.path.getsize(path) for partition in (0, 1) for path in _segment_files(broker, partition))
    assert produced.value("kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC) == stored > 0
    assert produced.total("kafka_log_log_size", topic=TOPIC) == stored
    produce_requests = broker.requests(since=seq, api="Produce")
    assert produce_requests
    for name in ("kafka_network_requestmetrics_requests_total", "kafka_network_requestmetrics_totaltimems_count"):
        assert produced.total(name, request="Produce") - before.total(name, request="Produce") == \
            len(produce_requests)
    version = produce_requests[0].api_version
    assert produced.value("kafka_network_requestmetrics_requests_total", request="Produce", version=version) >= 1
    assert produced.value("kafka_network_requestmetrics_totaltimems_bucket", request="Produce", version=version,
                          le="+Inf") == produced.value("kafka_network_requestmetrics_totaltimems_count",
                                                       request="Produce", version=version)
    for partition in (0, 1):
        assert produced.value("kafka_log_log_logendoffset", topic=TOPIC, partition=partition) == PER_PARTITION
        assert produced.value("kafka_log_log_logstartoffset", topic=TOPIC, partition=partition) == 0
        assert produced.value("kafka_log_log_numlogsegments", topic=TOPIC, partition=partition) == \
            len(_segment_files(broker, partition)) == 1

    # An injected NOT_LEADER_OR_FOLLOWER: counted once in the errors, and the retry appends the record once.
    broker.inject_error(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=1)
    retrying = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0, "log_level": 3})
    retrying.produce(TOPIC, b"retried", partition=0)
    assert retrying.flush(30) == 0
    after_error = scrape(url)
    assert after_error.value("kafka_network_requestmetrics_errors_total", request="Produce",
                             error="NOT_LEADER_OR_FOLLOWER") - \
        produced.value("kafka_network_requestmetrics_errors_total", request="Produce",
                       error="NOT_LEADER_OR_FOLLOWER") == 1
    assert after_error.value("kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) - \
        produced.value("kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == 1

    # A consumer reads everything: the bytes sent cover every stored byte.
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, consumer_timeout_ms=20000,
                             enable_auto_commit=False, auto_offset_reset="earliest")
    consumer.assign([KafkaTopicPartition(TOPIC, 0), KafkaTopicPartition(TOPIC, 1)])
    received = 0
    for _ in consumer:
        received += 1
        if received == 2 * PER_PARTITION + 1:
            break
    consumer.close()
    assert received == 2 * PER_PARTITION + 1
    consumed = scrape(url)
    stored = consumed.total("kafka_log_log_size", topic=TOPIC)
    assert consumed.value("kafka_server_brokertopicmetrics_bytesout_total", topic=TOPIC) >= stored
    assert consumed.value("kafka_server_brokertopicmetrics_totalfetchrequests_total", topic=TOPIC) >= 2
    assert consumed.total("kafka_network_requestmetrics_requests_total", request="Fetch") >= 1

    # A group commits part of the way: lag = end offset - committed offset.
    committer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "billing", "log_level": 3})
    committer.commit(offsets=[TopicPartition(TOPIC, 0, 7), TopicPartition(TOPIC, 1, 3)], asynchronous=False)
    committer.close()
    lagging = scrape(url)
    assert broker.committed_offsets("billing") == {(TOPIC, 0): 7, (TOPIC, 1): 3}
    for partition, committed, lag in ((0, 7, PER_PARTITION + 1 - 7), (1, 3, PER_PARTITION - 3)):
        labels = {"consumergroup": "billing", "topic": TOPIC, "partition": partition}
        end = lagging.value("kafka_log_log_logendoffset", topic=TOPIC, partition=partition)
        assert lagging.value("kafka_consumergroup_current_offset", **labels) == committed
        assert lagging.value("kafka_consumergroup_lag", **labels) == end - committed == lag
    assert lagging.value("kafka_consumergroup_lag_sum", consumergroup="billing", topic=TOPIC) == \
        2 * PER_PARTITION + 1 - 10
    assert lagging.value("kafka_server_group_coordinator_metrics_group_count", protocol="classic") >= 1
    assert lagging.value("kafka_coordinator_group_groupmetadatamanager_numgroupsempty") >= 1


def test_connections_opened_and_closed_are_counted(broker):
    url = broker.metrics_url
    gauge = "kafka_server_socket_server_metrics_connection_count"
    idle = wait_for(url, lambda found: found.value(gauge, listener="PLAINTEXT") == 0, "no connection open")
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    client = socket.create_connection((host, int(port)))
    try:
        opened = wait_for(url, lambda found: found.value(gauge, listener="PLAINTEXT") == 1, "the connection open")
        created = "kafka_server_socket_server_metrics_connection_creation_total"
        assert opened.value(created, listener="PLAINTEXT") - idle.value(created, listener="PLAINTEXT") == 1
    finally:
        client.close()
    closed = "kafka_server_socket_server_metrics_connection_close_total"
    gone = wait_for(url, lambda found: found.value(gauge, listener="PLAINTEXT") == 0, "the connection closed")
    assert gone.value(closed, listener="PLAINTEXT") - idle.value(closed, listener="PLAINTEXT") == 1
    assert gone.value("kafka_server_socket_server_metrics_incoming_byte_total", listener="PLAINTEXT") >= \
        idle.value("kafka_server_socket_server_metrics_incoming_byte_total", listener="PLAINTEXT")


def test_process_metrics_are_served(broker):
    found = scrape(broker.metrics_url)
    assert found.value("process_open_fds") > 0
    assert found.value("process_resident_memory_bytes") > 1024 * 1024


def test_a_cluster_labels_each_node():
    with EmbeddedBroker(nodes=2, metrics_listen="127.0.0.1:0") as cluster:
        cluster.create_topic(TOPIC, partitions=2, replication_factor=2)
        found = scrape(cluster.metrics_url)
        nodes = {labels["node"] for labels in found.labels_of("kafka_log_log_size") if labels["topic"] == TOPIC}
        assert nodes == {str(node) for node in cluster.node_ids}
        purgatory = found.labels_of("kafka_server_delayedoperationpurgatory_purgatorysize")
        assert purgatory and all("node" in labels for labels in purgatory)
        assert {labels["node"] for labels in found.labels_of("kafka_server_socket_server_metrics_connection_count")} \
            <= nodes
    with EmbeddedBroker(metrics_listen="127.0.0.1:0") as single:
        assert all("node" not in labels for labels in scrape(single.metrics_url).labels_of("kafka_log_log_size"))


def test_the_endpoint_keeps_its_port_across_a_restart(broker):
    url = broker.metrics_url
    broker.create_topic(TOPIC, partitions=1)
    broker.restart()
    assert broker.metrics_url == url
    assert scrape(url).value("kafka_log_log_logendoffset", topic=TOPIC, partition=0) == 0


def test_a_subprocess_broker_serves_metrics():
    with EmbeddedBroker(mode="subprocess", metrics_listen="127.0.0.1:0") as broker:
        broker.create_topic(TOPIC, partitions=1)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "log_level": 3})
        for index in range(3):
            producer.produce(TOPIC, b"%d" % index, partition=0)
        assert producer.flush(30) == 0
        found = scrape(broker.metrics_url)
        assert found.value("kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == 3
        assert found.value("kafka_log_log_logendoffset", topic=TOPIC, partition=0) == 3


def test_an_acks_all_produce_waits_in_the_produce_purgatory():
    with EmbeddedBroker(nodes=2, metrics_listen="127.0.0.1:0") as cluster:
        cluster.create_topic(TOPIC, partitions=1, replication_factor=2)
        leader = cluster.leader_of(TOPIC, 0)
        follower = next(node for node in cluster.node_ids if node != leader)
        cluster.delay_follower(follower, 5000)  # the ISR catches up 5 s late: the produce waits that long
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 0,
                             "log_level": 3})
        producer.produce(TOPIC, b"waits", partition=0)
        name = "kafka_server_delayedoperationpurgatory_purgatorysize"
        wait_for(cluster.metrics_url, lambda found: found.value(name, node=leader, delayedOperation="Produce") == 1,
                 "the produce waiting for its ISR")
        cluster.delay_follower(follower, 0)
        assert producer.flush(30) == 0
        assert scrape(cluster.metrics_url).value(name, node=leader, delayedOperation="Produce") == 0
