"""Connections: failures come back quickly as KafkaError subclasses with messages naming the broker (nothing
listening, a broker closing the connection, one that never answers, garbage instead of Kafka), version negotiation
against an older broker's API ranges, and a connection the broker dropped while idle being replaced."""
from __future__ import annotations

import time

import pytest

from compatbroker import EmbeddedBroker
from compatbroker.client import KafkaClient, KafkaConnectionError, KafkaError, KafkaTimeoutError
from compatbroker.client.connection import our_versions
from compatbroker.protocol.messages.metadata import MetadataRequest

GENEROUS_S = 10  # a sanity bound for "fails quickly" on a loaded machine; the point is: no 30 s hang


def free_port() -> int:
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_nothing_listening_is_waited_for_until_the_request_timeout():
    port = free_port()
    waits = []
    client = KafkaClient(bootstrap=f"127.0.0.1:{port}", properties={"request.timeout.ms": "1000"},
                         on_waiting=waits.append)
    started = time.monotonic()
    with pytest.raises(KafkaConnectionError) as caught:
        client.metadata()
    assert 0.5 <= time.monotonic() - started < GENEROUS_S
    assert waits == [f"waiting for 127.0.0.1:{port}: connection refused"]     # said once, not per retry
    assert caught.value.name == "NETWORK_EXCEPTION" and caught.value.unreachable
    assert f"127.0.0.1:{port}" in caught.value.message and "refused" in caught.value.message


def test_a_broker_starting_late_is_waited_for():
    port = free_port()
    started = []

    def start_broker(message):          # called on the first refused connection: the broker comes up now
        started.append(EmbeddedBroker(port=port))
    try:
        with KafkaClient(bootstrap=f"127.0.0.1:{port}", on_waiting=start_broker) as client:
            assert client.metadata([]).brokers
        assert len(started) == 1
    finally:
        for running in started:
            running.stop()


def test_every_bootstrap_address_is_tried_and_named(broker):
    dead = f"127.0.0.1:{free_port()}"
    with KafkaClient(bootstrap=f"{dead},{broker.bootstrap_servers}") as client:
        assert client.metadata([]).brokers       # the second address answered
    other_dead = f"127.0.0.1:{free_port()}"
    with pytest.raises(KafkaConnectionError) as caught:
        KafkaClient(bootstrap=f"{dead},{other_dead}", properties={"request.timeout.ms": "200"},
                    on_waiting=lambda message: None).metadata()
    assert dead in caught.value.message and other_dead in caught.value.message


def test_broker_closing_the_connection(fake_server):
    server = fake_server(lambda connection: connection.close())
    started = time.monotonic()
    with pytest.raises(KafkaConnectionError, match="closed the connection") as caught:
        KafkaClient(bootstrap=server.bootstrap).metadata()
    assert time.monotonic() - started < GENEROUS_S
    assert server.bootstrap in caught.value.message


def test_broker_that_never_answers_times_out(fake_server):
    server = fake_server(lambda connection: None)          # accepts, reads nothing, says nothing
    client = KafkaClient(bootstrap=server.bootstrap, properties={"request.timeout.ms": "300"})
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError) as caught:
        client.metadata()
    assert 0.25 <= time.monotonic() - started < GENEROUS_S
    assert caught.value.name == "REQUEST_TIMED_OUT" and "request.timeout.ms" in caught.value.message


def test_garbage_instead_of_kafka(fake_server):
    def answer_http(connection):
        connection.recv(1024)
        connection.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    server = fake_server(answer_http)
    with pytest.raises(KafkaConnectionError, match="not a Kafka broker"):
        KafkaClient(bootstrap=server.bootstrap).metadata()


def test_negotiates_the_newest_common_version(client):
    assert client.version_for(3) == min(our_versions(3)[1], client.connection().api_versions[3][1])
    assert client.version_for(3, max_version=5) == 5
    assert client.version_for(3, min_version=2) >= 2


def test_an_api_the_broker_lacks_is_reported_with_both_ranges(client):
    client.connection().api_versions.pop(60)                  # as a broker without DescribeCluster
    with pytest.raises(KafkaError) as caught:
        client.version_for(60)
    assert caught.value.name == "UNSUPPORTED_VERSION"
    assert "DescribeCluster" in caught.value.message and "no version" in caught.value.message
    assert client.supports(60) is False


def test_request_field_missing_from_the_negotiated_version_is_refused_clearly(client):
    request = MetadataRequest(topics=None, allow_auto_topic_creation=False)
    with pytest.raises(KafkaError) as caught:
        client.send(request, max_version=3)                  # v3 has no allow_auto_topic_creation
    assert caught.value.name == "UNSUPPORTED_VERSION" and "allow_auto_topic_creation" in caught.value.message


@pytest.fixture(scope="module")
def old_broker():
    with EmbeddedBroker({"num.partitions": 2}, emulate="2.8") as running:
        yield running


def test_older_broker_gets_older_versions(old_broker):
    # Kafka 2.8 offers ApiVersions up to v3: our v4 request is answered UNSUPPORTED_VERSION in v0 and repeated
    with KafkaClient(bootstrap=old_broker.bootstrap_servers) as client:
        connection = client.connection()
        assert connection.api_versions[18] == (0, 3)
        assert client.version_for(3) == 11                   # Metadata: 2.8's newest
        assert client.version_for(10) == 3                   # FindCoordinator: not batched yet
        assert client.coordinator("some-group") in client.brokers
        assert client.metadata().cluster_id


def test_idle_connection_closed_by_the_broker_is_replaced():
    with EmbeddedBroker() as running:
        with KafkaClient(bootstrap=running.bootstrap_servers) as client:
            client.metadata([])
            running.restart()                                # the open connection dies
            assert client.metadata([]).brokers               # resent once on a fresh connection


def test_request_timeout_does_not_leave_a_broken_connection(broker):
    with KafkaClient(bootstrap=broker.bootstrap_servers, properties={"request.timeout.ms": "300"}) as client:
        client.metadata([])
        broker.inject_latency("Metadata", 1500, count=1)
        try:
            with pytest.raises(KafkaTimeoutError):
                client.metadata([])
        finally:
            broker.clear_faults()
        assert client.metadata([]).brokers                     # answered on a new connection
        assert client.connection().requests_done == 1          # the timed-out one was closed, not reused


def test_a_value_the_protocol_cannot_carry_is_refused_before_sending(client):
    from compatbroker.protocol.messages.create_topics import CreateTopicsRequest
    request = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(name="huge", num_partitions=2 ** 40)])
    with pytest.raises(KafkaError) as caught:
        client.send(request)
    assert caught.value.name == "INVALID_REQUEST" and "num_partitions" in caught.value.message
    assert client.metadata([]).brokers                      # the connection is still usable


def test_a_huge_announced_size_costs_only_what_arrives(fake_server):
    def announce_400_mib_then_close(connection):
        connection.recv(1024)
        connection.sendall((400 * 1024 * 1024).to_bytes(4, "big") + b"\0" * 1000)
        connection.close()
    server = fake_server(announce_400_mib_then_close)
    import tracemalloc
    tracemalloc.start()
    try:
        with pytest.raises(KafkaConnectionError, match="closed the connection"):
            KafkaClient(bootstrap=server.bootstrap).metadata()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 * 1024 * 1024                          # generous: the point is not 400 MiB
