"""SSL listeners end to end over raw sockets: the handshake, the principal of a client certificate, refusals with
one log line (untrusted or missing certificate, plaintext to a TLS listener, TLS to a plaintext one), record bytes
of a Fetch sent from the segment files over TLS, the idle limit during the handshake and an orderly TLS close."""
from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl

import pytest

from compatbroker.handlers import build_registry
from compatbroker.protocol.messages import (ApiVersionsRequest, FetchRequest, MetadataRequest, MetadataResponse,
                                            ProduceRequest)
from compatbroker.protocol.records.batch import build_batch
from compatbroker.security.principal import ANONYMOUS, KafkaPrincipal
from compatbroker.toolkit.certificates import TestCertificates

from .helpers import RawClient, handler_module
from .secure_helpers import (API_VERSIONS, client_context, connect_tls, connection_lines, plain_sasl_settings,
                             secure_server, tls_listener_settings)

METADATA, PRODUCE, FETCH = 3, 0, 1


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return TestCertificates.generate(tmp_path_factory.mktemp("certs"), clients=["alice"])


@pytest.fixture(autouse=True)
def _info_logs(caplog):
    caplog.set_level(logging.INFO)


def _recording_registry(sessions: list):
    async def metadata(ctx, request):
        sessions.append(ctx.session)
        return MetadataResponse()
    return build_registry(["api_versions", handler_module(METADATA, metadata, max_version=12)])


async def _metadata_session(port, context, sessions):
    client = await connect_tls(port, context)
    await client.send(MetadataRequest(topics=[]), version=12, correlation_id=7)
    header, _ = await client.read_response(METADATA, 12)
    assert header.correlation_id == 7
    await client.close()
    return sessions[-1]


async def test_requests_are_served_over_tls(tmp_path, certs):
    async with secure_server(tmp_path, tls_listener_settings(certs)) as (_, ports):
        client = await connect_tls(ports["SSL"], client_context(certs))
        await client.send(ApiVersionsRequest(client_software_name="tests", client_software_version="1"), version=3,
                          correlation_id=5)
        header, body = await client.read_response(API_VERSIONS, 3)
        assert (header.correlation_id, body.error_code) == (5, 0)
        assert {17, 36} <= {entry.api_key for entry in body.api_keys}  # SaslHandshake, SaslAuthenticate
        await client.close()


async def test_a_client_without_certificate_is_anonymous(tmp_path, certs):
    sessions = []
    settings = tls_listener_settings(certs, client_auth="requested")
    async with secure_server(tmp_path, settings, _recording_registry(sessions)) as (_, ports):
        session = await _metadata_session(ports["SSL"], client_context(certs), sessions)
    assert session.principal == ANONYMOUS
    assert (session.listener_name, session.security_protocol, session.client_host) == ("SSL", "SSL", "127.0.0.1")


async def test_mtls_principal_is_the_certificate_subject_mapped_by_the_rules(tmp_path, certs):
    sessions = []
    for rules, expected in (("DEFAULT", "CN=alice"), ("RULE:^CN=(.*?)$/$1/U,DEFAULT", "ALICE")):
        settings = tls_listener_settings(certs, client_auth="required", **{"ssl.principal.mapping.rules": rules})
        async with secure_server(tmp_path, settings, _recording_registry(sessions)) as (_, ports):
            session = await _metadata_session(ports["SSL"], client_context(certs, certs.client("alice")), sessions)
        assert session.principal == KafkaPrincipal("User", expected)


async def test_a_certificate_no_rule_maps_closes_the_connection_with_one_line(tmp_path, certs, caplog):
    settings = tls_listener_settings(certs, client_auth="required",
                                     **{"ssl.principal.mapping.rules": "RULE:^CN=bob$/bob/"})
    async with secure_server(tmp_path, settings, _recording_registry([])) as (_, ports):
        await _refused(ports["SSL"], client_context(certs, certs.client("alice")))
    lines = connection_lines(caplog)
    assert len(lines) == 1 and "Failed to map name for 'CN=alice'" in lines[0], lines


@pytest.mark.parametrize("which", ["none", "untrusted", "expired"])
async def test_required_client_auth_refuses_a_missing_or_bad_certificate_with_one_line(tmp_path, certs, caplog,
                                                                                       which):
    client = {"none": None, "untrusted": certs.untrusted_client, "expired": certs.expired_client}[which]
    async with secure_server(tmp_path, tls_listener_settings(certs, client_auth="required")) as (_, ports):
        await _refused(ports["SSL"], client_context(certs, client))
    lines = connection_lines(caplog)
    assert len(lines) == 1 and "SSL handshake failed" in lines[0], lines


async def _refused(port: int, context: ssl.SSLContext) -> None:
    """The server ends the connection: at the handshake, or (TLS 1.3, where the client finishes first) on the
    first read."""
    try:
        client = await connect_tls(port, context)
    except (ssl.SSLError, ConnectionError):
        return
    try:
        await client.send(MetadataRequest(topics=[]), version=12, correlation_id=1)
        assert await client.reader.read(1) == b""
    except (ssl.SSLError, ConnectionError):
        pass
    finally:
        await client.close()


async def test_plaintext_kafka_to_a_tls_listener_is_closed_with_one_line(tmp_path, certs, caplog):
    async with secure_server(tmp_path, tls_listener_settings(certs)) as (_, ports):
        client = await RawClient.connect(ports["SSL"])
        await client.send(ApiVersionsRequest(client_software_name="tests", client_software_version="1"), version=3,
                          correlation_id=1)
        assert await client.closed_by_server()
        await client.close()
    lines = connection_lines(caplog)
    assert len(lines) == 1 and "plaintext, not a TLS handshake, to listener SSL" in lines[0], lines


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SASL_PLAINTEXT"])
async def test_tls_to_a_listener_without_tls_is_closed_with_one_line(tmp_path, certs, caplog, protocol):
    settings = plain_sasl_settings() if protocol == "SASL_PLAINTEXT" else {"listeners": "PLAINTEXT://127.0.0.1:0"}
    async with secure_server(tmp_path, settings) as (_, ports):
        with pytest.raises((ssl.SSLError, ConnectionError)):
            await connect_tls(ports[protocol], client_context(certs))
    lines = connection_lines(caplog, level=0)
    assert len(lines) == 1, lines
    assert f"sent a TLS handshake to a {protocol} listener" in lines[0]


async def test_fetch_over_tls_sends_the_record_bytes_of_the_segment(tmp_path, certs):
    """Record bytes leave as file regions; over TLS they are read from the file and encrypted, in chunks smaller
    than the response, and must arrive exactly as produced."""
    batches = [build_batch([(None, os.urandom(700_000), (), 1_700_000_000_000)]) for _ in range(3)]
    async with secure_server(tmp_path, tls_listener_settings(certs)) as (server, ports):
        server.broker.create_topic("t", 1)
        client = await connect_tls(ports["SSL"], client_context(certs))
        for correlation_id, batch in enumerate(batches, start=1):
            await client.send(ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
                name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])]),
                version=7, correlation_id=correlation_id)
            _, produced = await client.read_response(PRODUCE, 7)
            assert produced.responses[0].partition_responses[0].error_code == 0
        fetch = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=16 << 20, topics=[
            FetchRequest.FetchTopic(topic="t", partitions=[FetchRequest.FetchPartition(
                partition=0, fetch_offset=0, partition_max_bytes=16 << 20)])])
        await client.send(fetch, version=4, correlation_id=10)
        header, body = await client.read_response(FETCH, 4)
        await client.close()
    assert header.correlation_id == 10
    records = bytes(body.responses[0].partitions[0].records)
    assert len(records) == sum(map(len, batches))
    # the base offset and leader epoch are set on append: compare from the magic byte on (CRC included)
    position = 0
    for batch in batches:
        assert records[position + 16:position + len(batch)] == batch[16:]
        position += len(batch)


async def test_a_client_silent_after_connecting_is_closed_when_idle(tmp_path, certs):
    """The handshake runs under the connection's idle limit: a client that never starts it does not hold the
    connection open."""
    settings = tls_listener_settings(certs, **{"connections.max.idle.ms": 200})
    async with secure_server(tmp_path, settings) as (server, ports):
        sock = socket.create_connection(("127.0.0.1", ports["SSL"]))
        sock.settimeout(20)
        try:
            assert await asyncio.get_running_loop().run_in_executor(None, sock.recv, 1) == b""
        finally:
            sock.close()


async def test_the_server_closes_tls_connections_with_close_notify(tmp_path, certs):
    """A client sees an orderly TLS close (close_notify), not a truncated stream."""
    settings = tls_listener_settings(certs, **{"connections.max.idle.ms": 300})

    def idle_client(port: int) -> bytes:
        raw = socket.create_connection(("127.0.0.1", port), timeout=20)
        with client_context(certs).wrap_socket(raw, server_hostname="localhost",
                                               suppress_ragged_eofs=False) as sock:
            return sock.recv(1)  # SSLEOFError without close_notify

    async with secure_server(tmp_path, settings) as (_, ports):
        assert await asyncio.get_running_loop().run_in_executor(None, idle_client, ports["SSL"]) == b""
