"""KIP-714 client telemetry with a real client: confluent-kafka (librdkafka 2.16) with `enable.metrics.push=true`
pushes its metrics once a client metrics subscription matches it, and they show on the console's /clients page and
on /metrics.

The subscription is made as an operator makes it with Kafka's tools: IncrementalAlterConfigs on a CLIENT_METRICS
resource, here as a raw request (confluent-kafka's AdminClient has no CLIENT_METRICS resource type), then listed with
ListConfigResources v0 (what `kafka-client-metrics.sh --list` sends). The other matrix clients cannot push: see
matrix.NOT_APPLICABLE.
"""
from __future__ import annotations

import threading
import time
import types
import urllib.request

import pytest

from compatbroker import EmbeddedBroker
from compatbroker.protocol.messages import IncrementalAlterConfigsRequest, ListConfigResourcesRequest

from .raw_client import RawClient

pytestmark = pytest.mark.matrix(client="confluent-kafka", flow="telemetry")

WAIT_S = 60.0
CLIENT_METRICS = 16
SET = 0


@pytest.fixture
def telemetry_broker():
    with EmbeddedBroker(metrics_listen="127.0.0.1:0", control_listen="127.0.0.1:0") as broker:
        yield broker


def raw(broker: EmbeddedBroker) -> RawClient:
    host, port = broker.bootstrap_servers.split(",")[0].rsplit(":", 1)
    return RawClient(types.SimpleNamespace(host=host, port=int(port)), "telemetry-admin")


def subscribe(broker: EmbeddedBroker, name: str, **configs: str) -> None:
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=CLIENT_METRICS, resource_name=name,
        configs=[IncrementalAlterConfigsRequest.AlterableConfig(name=key.replace("_", "."), config_operation=SET,
                                                                value=value) for key, value in configs.items()])
    with raw(broker) as client:
        answer = client.call(IncrementalAlterConfigsRequest(resources=[resource]), 1)
        listed = client.call(ListConfigResourcesRequest(), 0)
    assert [(r.error_code, r.error_message) for r in answer.responses] == [(0, None)]
    assert name in [resource.resource_name for resource in listed.config_resources]


def fetch(url: str, *, html: bool = False) -> str:
    headers = {"Accept": "text/html"} if html else {}  # a browser's Accept gets the console's page
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as response:
        return response.read().decode()


def wait_for(condition, what: str, poll=None) -> None:
    deadline = time.monotonic() + WAIT_S
    pause = threading.Event()  # never set: its wait() is the pause between two looks
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {WAIT_S} s: {what}")
        if poll is not None:
            poll()
        pause.wait(0.1)


def test_confluent_kafka_pushes_metrics_that_show_on_the_console_and_on_metrics(telemetry_broker):
    from confluent_kafka import Consumer, Producer
    broker = telemetry_broker
    broker.create_topic("telemetry", 1)
    subscribe(broker, "librdkafka-all", metrics="org.apache.kafka.producer.,org.apache.kafka.consumer.",
              interval_ms="100", match="client_software_name=confluent-kafka-python")
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "telemetry-producer",
                         "enable.metrics.push": True})
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "telemetry-consumer",
                         "group.id": "telemetry-group", "auto.offset.reset": "earliest",
                         "enable.metrics.push": True})
    try:
        for n in range(20):
            producer.produce("telemetry", f"value-{n}".encode())
        assert producer.flush(30) == 0
        consumer.subscribe(["telemetry"])
        received = []

        def poll_both():
            producer.poll(0)
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                received.append(message.value())

        def both_pushed() -> bool:
            text = fetch(broker.metrics_url)
            return ('org_apache_kafka_producer_node_request_latency_avg{client_id="telemetry-producer"' in text
                    and 'client_id="telemetry-consumer"' in text)
        wait_for(both_pushed, "both clients' pushed metrics on /metrics", poll=poll_both)
        wait_for(lambda: len(received) == 20, "the consumer reading the 20 records", poll=poll_both)
    finally:
        consumer.close()
        producer.flush(10)
        producer.close()

    metrics = fetch(broker.metrics_url)
    assert "# TYPE org_apache_kafka_producer_connection_creation_total counter" in metrics
    assert 'org_apache_kafka_consumer_coordinator_assigned_partitions{client_id="telemetry-consumer"' in metrics
    assert 'client_software_name="confluent-kafka-python"' in metrics  # kafka_client_telemetry_pushes_total
    page = fetch(broker.control_url + "/clients", html=True)
    for text in ("telemetry-producer", "telemetry-consumer", "org.apache.kafka.producer.node.request.latency.avg",
                 "confluent-kafka-python"):
        assert text in page, f"{text} not on the console's /clients page"
    pushed = {client["client_id"]: client for client in broker.telemetry_clients()}  # the JSON twin of the page
    assert pushed["telemetry-producer"]["client_software_name"] == "confluent-kafka-python"
    assert any(metric["name"] == "org.apache.kafka.producer.node.request.latency.avg"
               for metric in pushed["telemetry-producer"]["metrics"])


def test_a_client_no_subscription_matches_pushes_nothing(telemetry_broker):
    from confluent_kafka import Producer
    broker = telemetry_broker
    broker.create_topic("quiet", 1)
    subscribe(broker, "java-only", metrics="*", interval_ms="100", match="client_software_name=apache-kafka-java")
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "quiet-producer",
                         "enable.metrics.push": True})
    try:
        producer.produce("quiet", b"v")
        assert producer.flush(30) == 0
        # the client has asked for its subscription (and got none) once GetTelemetrySubscriptions is logged
        wait_for(lambda: any(entry.client_id == "quiet-producer" for entry in
                             broker.requests(api="GetTelemetrySubscriptions")),
                 "the producer's GetTelemetrySubscriptions", poll=lambda: producer.poll(0))
    finally:
        producer.flush(10)
        producer.close()
    assert not broker.requests(api="PushTelemetry")
    assert 'client_id="quiet-producer"' not in fetch(broker.metrics_url)
