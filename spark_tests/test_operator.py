"""Operator features through the Java client (kafka-clients, as Spark carries it): dynamic broker configs and
KIP-714 client telemetry.

- Dynamic configs: the Java admin client can name the cluster-wide default, the BROKER resource "" (librdkafka and
  kafka-python cannot: see tests/compat/test_dynamic_configs.py). It lowers `message.max.bytes` there with
  IncrementalAlterConfigs; the Java producer's next larger record fails with RecordTooLargeException
  (MESSAGE_TOO_LARGE) while a small one is written; DescribeConfigs of the broker's own id shows the value with
  source DYNAMIC_DEFAULT_BROKER_CONFIG; after a restart the limit still holds. This runs on the module's broker
  (`python -m compatbroker serve`, as the conftest's), so the conftest's check (every request of the Java client
  served, no error in the broker's log) applies to it.
- Telemetry: the Java admin client makes a client metrics subscription (the CLIENT_METRICS resource, as
  `kafka-client-metrics.sh` does), then a Java producer with `enable.metrics.push=true` sends records and pushes its
  metrics. What it pushed is read from the broker's client telemetry store (`EmbeddedBroker.telemetry_clients()`)
  and from /metrics. That broker (thread mode) writes no log file, so this test checks itself what the conftest
  checks: every request of its Java clients served, no error logged.
"""
from __future__ import annotations

import logging
import urllib.request

import pytest

from compatbroker.toolkit.embedded import EmbeddedBroker

from .java_clients import DEADLINE_S, JavaAdmin, JavaProducer, java_exception_class
from .kafka_tools import KafkaTools, wait_until

LIMIT = 5000           # the lowered message.max.bytes
BIG = b"v" * 20_000    # larger than LIMIT, far below the default limit and the producer's max.request.size
RECORD_TOO_LARGE = "org.apache.kafka.common.errors.RecordTooLargeException"
PRODUCER_METRICS = "org.apache.kafka.producer."  # the Java producer's telemetry metric names start so (KIP-714)
JAVA_SOFTWARE_NAME = "apache-kafka-java"        # what the Java client sends in ApiVersions (KIP-511)
PUSH_INTERVAL_MS = 1000


@pytest.fixture(scope="module")
def broker(connector):
    """This module's broker, standing in for the session's: the dynamic config test changes the cluster-wide
    default and restarts it."""
    with EmbeddedBroker({"num.partitions": 1}, mode="subprocess", log_level="INFO") as running:
        yield running


@pytest.fixture(scope="module")
def kafka(broker):
    tools = KafkaTools(broker.bootstrap_servers)
    yield tools
    tools.close()


def send_error(producer: JavaProducer, topic: str, value: bytes) -> str:
    """The class of the Java exception that failed sending one record ("" when it was written)."""
    try:
        producer.send(topic, [(0, None, value)])
    except Exception as exc:  # py4j's error carrying the future's ExecutionException, the producer's error its cause
        if not java_exception_class(exc):
            raise
        failure = exc.java_exception.getCause() or exc.java_exception
        return failure.getClass().getName()
    return ""


@pytest.mark.matrix(client="java", flow="admin_configs")
def test_java_admin_sets_the_cluster_wide_message_max_bytes_live_and_after_restart(broker, java, topic):
    broker.create_topic(topic, 1)
    own_id = str(broker.node_ids[0])
    producer = java.producer()
    assert send_error(producer, topic, BIG) == ""  # within every default limit
    admin = java.admin()
    admin.incremental_alter_configs("BROKER", "", [("message.max.bytes", "SET", str(LIMIT))])

    assert send_error(producer, topic, BIG) == RECORD_TOO_LARGE
    assert send_error(producer, topic, b"small") == ""
    expected = (str(LIMIT), "DYNAMIC_DEFAULT_BROKER_CONFIG")
    assert admin.describe_configs("BROKER", own_id)["message.max.bytes"] == expected
    # the restart starts the request log afresh, before the conftest looks at it
    altered = [entry for entry in broker.requests(api="IncrementalAlterConfigs") if entry.client_id == admin.client_id]
    assert altered and all(entry.served for entry in altered), altered

    broker.restart()
    assert send_error(java.producer(), topic, BIG) == RECORD_TOO_LARGE
    assert java.admin().describe_configs("BROKER", own_id)["message.max.bytes"] == expected
    assert [record.value for record in broker.records(topic)] == [BIG, b"small"]


# --- KIP-714 telemetry ----------------------------------------------------------------------------------------------

@pytest.fixture
def telemetry_broker(connector):
    with EmbeddedBroker(metrics_listen="127.0.0.1:0") as running:
        yield running


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=DEADLINE_S) as response:
        return response.read().decode()


@pytest.mark.matrix(client="java", flow="telemetry")
def test_java_producer_pushes_its_metrics(telemetry_broker, spark, topic, caplog):
    broker = telemetry_broker
    broker.create_topic(topic, 1)
    admin = JavaAdmin(spark._jvm, broker.bootstrap_servers)
    producer = None
    try:
        # the subscription exists before the producer first asks GetTelemetrySubscriptions, or it would ask again
        # only after the default push interval (5 minutes)
        admin.incremental_alter_configs("CLIENT_METRICS", "java-producers", [
            ("metrics", "SET", PRODUCER_METRICS), ("interval.ms", "SET", str(PUSH_INTERVAL_MS)),
            ("match", "SET", f"client_software_name={JAVA_SOFTWARE_NAME}")])
        described = admin.describe_configs("CLIENT_METRICS", "java-producers")
        assert described["metrics"] == (PRODUCER_METRICS, "DYNAMIC_CLIENT_METRICS_CONFIG")
        assert described["interval.ms"] == (str(PUSH_INTERVAL_MS), "DYNAMIC_CLIENT_METRICS_CONFIG")

        producer = JavaProducer(spark._jvm, broker.bootstrap_servers, **{"enable.metrics.push": "true"})
        assert [record.offset for record in producer.send(topic, [(0, b"k", b"v")] * 5)] == [0, 1, 2, 3, 4]

        def java_producer_pushed() -> dict | None:
            return next((client for client in broker.telemetry_clients() if client["client_id"] == producer.client_id
                         and any(metric["name"].startswith(PRODUCER_METRICS) for metric in client["metrics"])),
                        None)
        pushed = wait_until(java_producer_pushed, "the Java producer's metrics pushed (KIP-714)", DEADLINE_S * 2)
        assert pushed["client_software_name"] == JAVA_SOFTWARE_NAME
        assert pushed["requested_metrics"] == [PRODUCER_METRICS]
        assert pushed["push_interval_ms"] == PUSH_INTERVAL_MS
        assert all(metric["name"].startswith(PRODUCER_METRICS) for metric in pushed["metrics"]), pushed["metrics"]

        exported = scrape(broker.metrics_url)
        series = [line for line in exported.splitlines() if line.startswith("org_apache_kafka_producer_")
                  and f'client_id="{producer.client_id}"' in line]
        assert series, "no org_apache_kafka_producer_ series of the Java producer on /metrics"
        assert f'client_software_name="{JAVA_SOFTWARE_NAME}"' in exported  # kafka_client_telemetry_pushes_total
    finally:
        if producer is not None:
            producer.close()
        admin.close()

    ours = {admin.client_id, producer.client_id}
    logged = [entry for entry in broker.requests() if entry.client_id in ours]
    assert {"GetTelemetrySubscriptions", "PushTelemetry"} <= {entry.api for entry in logged}
    assert [entry for entry in logged if not entry.served] == []
    errors = [record.getMessage() for record in caplog.records
              if record.levelno >= logging.ERROR and record.name.startswith("compatbroker")]
    assert errors == [], errors
