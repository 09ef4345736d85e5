"""EmbeddedBroker in both modes: start, topics, restart with data kept, down and up, clean-up, errors; the same
helpers answer alike in a thread and in a subprocess."""
from __future__ import annotations

import os
import time
import socket

import pytest

from compatbroker import EmbeddedBroker
from compatbroker.toolkit.embedded import EmbeddedBrokerError, StoredRecord

MODES = ("thread", "subprocess")


def produce(bootstrap: str, topic: str, *values: bytes, partition: int = 0) -> list[int]:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0, request_timeout_ms=10000, max_block_ms=10000)
    try:
        futures = [producer.send(topic, key=b"k", value=value, partition=partition, headers=[("h", b"v")])
                   for value in values]
        return [future.get(timeout=30).offset for future in futures]
    finally:
        producer.close(timeout=5)


def refuses_connections(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.parametrize("mode", MODES)
def test_a_broker_starts_on_a_free_port_takes_records_and_removes_its_directory(mode):
    with EmbeddedBroker(mode=mode) as broker:
        assert broker.running and broker.port > 0
        assert broker.bootstrap_servers == f"127.0.0.1:{broker.port}"
        data_dir = broker.data_dir
        assert os.path.isdir(data_dir)
        topic = broker.create_topic("orders", 3, {"cleanup.policy": "compact"})
        assert (topic.name, topic.partitions, topic.internal) == ("orders", 3, False)
        assert produce(broker.bootstrap_servers, "orders", b"a", b"b", partition=2) == [0, 1]
        assert broker.records("orders", 2) == [
            StoredRecord("orders", 2, 0, broker.records("orders", 2)[0].timestamp, b"k", b"a", [("h", b"v")]),
            StoredRecord("orders", 2, 1, broker.records("orders", 2)[1].timestamp, b"k", b"b", [("h", b"v")])]
        assert [r.value for r in broker.records("orders", 2, offset=1)] == [b"b"]
        assert list(broker.topics()) == ["orders"]
        port = broker.port
    assert not broker.running
    assert not os.path.exists(data_dir)
    assert refuses_connections(port)
    broker.stop()  # a second stop does nothing
    with pytest.raises(EmbeddedBrokerError):
        broker.topics()


@pytest.mark.parametrize("mode", MODES)
def test_restart_keeps_the_port_and_the_data_but_resets_faults(mode):
    with EmbeddedBroker(mode=mode) as broker:
        broker.create_topic("kept", 1)
        produce(broker.bootstrap_servers, "kept", b"before")
        broker.inject_error("Produce", "NOT_LEADER_OR_FOLLOWER", count=None)
        port = broker.port
        broker.restart()
        assert broker.port == port
        assert broker.faults() == {"errors": [], "latency": [], "drops": []}
        assert broker.requests() == []
        assert produce(broker.bootstrap_servers, "kept", b"after") == [1]
        assert [r.value for r in broker.records("kept")] == [b"before", b"after"]


@pytest.mark.parametrize("mode", MODES)
def test_down_refuses_connections_until_up(mode):
    with EmbeddedBroker(mode=mode) as broker:
        broker.down()
        assert not broker.is_up
        assert refuses_connections(broker.port)
        broker.up()
        assert broker.is_up
        assert produce(broker.bootstrap_servers, "back", b"x") == [0]


@pytest.mark.parametrize("mode", MODES)
def test_both_modes_log_requests_and_inject_the_same_way(mode):
    with EmbeddedBroker(mode=mode) as broker:
        broker.create_topic("t", 1)
        rule = broker.inject_error("Produce", "NOT_LEADER_OR_FOLLOWER", count=2, topic="t")
        assert rule == {"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "remaining": 2, "topic": "t"}
        assert broker.inject_latency(None, 5) == {"api": None, "ms": 5, "remaining": None}
        assert broker.drop_connections_after(100, api="Fetch", count=None)["after"] == 100
        assert produce(broker.bootstrap_servers, "t", b"x") == [0]
        produce_log = broker.requests(api="Produce")
        assert [e.injected_error for e in produce_log] == ["NOT_LEADER_OR_FOLLOWER"] * 2 + [None]
        assert all(e.delay_ms == 5 for e in produce_log)
        assert {e.api for e in broker.requests()} >= {"ApiVersions", "Metadata", "Produce"}
        assert {e.node_id for e in broker.requests()} == {1}, "a single broker is node.id 1"
        assert broker.faults()["errors"] == []
        broker.reset()
        assert broker.faults() == {"errors": [], "latency": [], "drops": []}


def test_settings_use_kafka_names(tmp_path):
    with EmbeddedBroker({"num.partitions": 4}) as broker:
        assert broker.create_topic("defaulted").partitions == 4


def test_a_data_dir_of_the_callers_is_kept(tmp_path):
    data_dir = tmp_path / "mine"
    with EmbeddedBroker(data_dir=data_dir) as broker:
        broker.create_topic("t", 1)
    assert (data_dir / "t-0").is_dir()
    with EmbeddedBroker(data_dir=data_dir) as again:  # a later broker finds the topic
        assert list(again.topics()) == ["t"]


def test_subprocess_mode_has_a_control_url_thread_mode_only_when_asked():
    with EmbeddedBroker() as plain:
        assert plain.control_url is None
    with EmbeddedBroker(control_listen="127.0.0.1:0") as controlled:
        from compatbroker.toolkit.control.client import ControlClient
        assert ControlClient(controlled.control_url).status()["bootstrap_servers"] == controlled.bootstrap_servers


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("settings,message", [({"no.such.setting": 1}, "no.such.setting"),
                                              ({"num.partitions": 0}, "num.partitions")])
def test_bad_settings_fail_with_the_reason(mode, settings, message):
    with pytest.raises(EmbeddedBrokerError, match=message.replace(".", r"\.")):
        EmbeddedBroker(settings, mode=mode)


def test_a_port_in_use_fails_with_the_reason():
    with EmbeddedBroker() as first, pytest.raises(EmbeddedBrokerError, match="cannot listen"):
        EmbeddedBroker(port=first.port)


def test_an_unknown_emulated_release_fails_with_the_reason():
    with pytest.raises(EmbeddedBrokerError, match="unknown Kafka release"):
        EmbeddedBroker(emulate="0.0.0-none")


@pytest.mark.parametrize("mode", MODES)
def test_an_emulated_release_caps_the_versions_clients_use(mode):
    from compatbroker.toolkit.emulation import advertised
    api_versions_max, metadata_max = advertised("2.8")[18][1], advertised("2.8")[3][1]
    assert (api_versions_max, metadata_max) < (4, 13)  # below what kafka-python 3.0.12 uses otherwise
    with EmbeddedBroker(mode=mode, emulate="2.8") as broker:
        broker.create_topic("old", 1)
        produce(broker.bootstrap_servers, "old", b"x")
        log = broker.requests()
    # kafka-python tries ApiVersions v4 first, is told the range, and comes back with the release's newest
    assert [(e.api_version, e.served) for e in log if e.api == "ApiVersions"][:2] == [(4, False),
                                                                                       (api_versions_max, True)]
    assert {e.api_version for e in log if e.api == "Metadata"} == {metadata_max}


def test_unknown_modes_are_refused():
    with pytest.raises(ValueError, match="mode"):
        EmbeddedBroker(mode="fork")


@pytest.mark.parametrize("mode", MODES)
def test_both_modes_show_the_metrics_clients_push(mode):
    """KIP-714: once a client-metrics subscription matches it, a librdkafka producer's pushes show in
    `telemetry_clients()` (the control API's GET /clients in subprocess mode)."""
    from confluent_kafka import Producer

    from compatbroker.client import ClientConfig, KafkaClient
    from compatbroker.client.admin import Admin

    with EmbeddedBroker(mode=mode) as broker:
        assert broker.telemetry_clients() == []
        with KafkaClient(ClientConfig(bootstrap=broker.bootstrap_servers)) as client:
            Admin(client).incremental_alter_configs("CLIENT_METRICS", "all", [("metrics", "SET", "*"),
                                                                              ("interval.ms", "SET", "100")])
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": f"pushing-{mode}",
                             "enable.metrics.push": True})
        try:
            deadline = time.monotonic() + 60
            while not any(c["client_id"] == f"pushing-{mode}" and c["metrics"] for c in broker.telemetry_clients()):
                assert time.monotonic() < deadline, "no push within 60 s"
                producer.poll(0.2)
        finally:
            producer.flush(10)
        [pushed] = broker.telemetry_clients()
        assert pushed["client_software_name"] == "confluent-kafka-python" and pushed["pushes"] >= 1
