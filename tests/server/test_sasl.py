"""SASL listeners end to end over raw sockets (Kafka's SaslServerAuthenticator behaviour): the exchange with
SaslHandshake v1 + SaslAuthenticate and with v0 raw tokens, the refusals (wrong password, unsupported mechanism,
requests before authentication, oversized frames) answered as Kafka answers them and followed by a close and one
log line, and KIP-368 re-authentication and session expiry."""
from __future__ import annotations

import asyncio
import logging
import time

import pytest

from compatbroker.handlers import build_registry
from compatbroker.protocol.messages import (ApiVersionsRequest, MetadataRequest, MetadataResponse,
                                            SaslAuthenticateRequest, SaslHandshakeRequest)
from compatbroker.security.principal import KafkaPrincipal
from compatbroker.toolkit.certificates import TestCertificates

from .helpers import RawClient, handler_module
from .secure_helpers import (API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE, client_context, connect_tls,
                             connection_lines, plain_sasl_settings, sasl_plain_login, secure_server,
                             tls_listener_settings)

METADATA = 3
SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE = 58, 33, 34


@pytest.fixture(autouse=True)
def _info_logs(caplog):
    caplog.set_level(logging.INFO)


def _registry(sessions: list):
    """The SASL handlers and a Metadata handler that records the session it is served with."""
    async def metadata(ctx, request):
        sessions.append(ctx.session)
        return MetadataResponse()
    return build_registry(["api_versions", "sasl_handshake", "sasl_authenticate",
                           handler_module(METADATA, metadata, max_version=12)])


async def _metadata(client: RawClient, correlation_id: int = 50) -> None:
    await client.send(MetadataRequest(topics=[]), version=12, correlation_id=correlation_id)
    header, _ = await client.read_response(METADATA, 12)
    assert header.correlation_id == correlation_id


async def test_plain_authentication_sets_the_session_principal(tmp_path):
    sessions = []
    async with secure_server(tmp_path, plain_sasl_settings(), _registry(sessions)) as (_, ports):
        client = await RawClient.connect(ports["SASL_PLAINTEXT"])
        response = await sasl_plain_login(client, "alice", "alice-secret")
        assert (response.error_code, response.error_message, response.session_lifetime_ms) == (0, None, 0)
        await _metadata(client)
        await client.close()
    session = sessions[0]
    assert session.principal == KafkaPrincipal("User", "alice")
    assert (session.sasl_mechanism, session.security_protocol, session.listener_name) == \
        ("PLAIN", "SASL_PLAINTEXT", "SASL_PLAINTEXT")


async def test_wrong_password_gets_kafkas_error_then_a_close_and_one_line(tmp_path, caplog):
    async with secure_server(tmp_path, plain_sasl_settings(), _registry([])) as (_, ports):
        client = await RawClient.connect(ports["SASL_PLAINTEXT"])
        response = await sasl_plain_login(client, "alice", "wrong")
        assert response.error_code == SASL_AUTHENTICATION_FAILED
        assert response.error_message == "Authentication failed: Invalid username or password"
        assert await client.closed_by_server()
        await client.close()
    lines = connection_lines(caplog)
    assert len(lines) == 1 and "Failed authentication with 127.0.0.1" in lines[0], lines


@pytest.mark.parametrize("delay_ms", [1500, 0])
async def test_a_failed_authentication_is_answered_after_the_configured_delay(tmp_path, delay_ms):
    settings = plain_sasl_settings(**{"connection.failed.authentication.delay.ms": str(delay_ms)})
    async with secure_server(tmp_path, settings, _registry([])) as (_, ports):
        client = await RawClient.connect(ports["SASL_PLAINTEXT"])
        began = time.monotonic()
        response = await sasl_plain_login(client, "alice", "wrong")
        waited = time.monotonic() - began
        assert response.error_code == SASL_AUTHENTICATION_FAILED and await client.closed_by_server()
        await client.close()
    if delay_ms:
        assert waited >= delay_ms / 1000  # Kafka's KIP-306 delay: no earlier than configured
    else:
        assert waited < 1.5  # answered without the delay (a generous bound for a loaded machine)


async def test_requests_pipelined_behind_a_failed_authentication_are_not_read(tmp_path, caplog):
    sessions = []
    async with secure_server(tmp_path, plain_sasl_settings(), _registry(sessions)) as (_, ports):
        client = await RawClient.connect(ports["SASL_PLAINTEXT"])
        await client.send(SaslHandshakeRequest(mechanism="PLAIN"), version=1, correlation_id=1)
        await client.read_response(SASL_HANDSHAKE, 1)
        await client.send(SaslAuthenticateRequest(auth_bytes=b"\0alice\0wrong"), version=2, correlation_id=2)
        await client.send(MetadataRequest(topics=[]), version=12, correlation_id=3)
        _, response = await client.read_response(SASL_AUTHENTICATE, 2)
        assert response.error_code == SASL_AUTHENTICATION_FAILED
        assert await client.closed_by_server()
        await client.close()
    assert sessions == []
    lines = connection_lines(caplog)
    assert len(lines) == 1 and "Invalid username or password" in lines[0], lines


async def test_unsupported_mechanism_lists_the_enabled_ones_then_closes(tmp_path, caplog):
    async with secure_server(tmp_path, plain_sasl_settings(), _registry([])) as (_, ports):
        client = await RawClient.connect(ports["SASL_PLAINTEXT"])
        await client.send(SaslHandshakeRequest(mechanism="GSSAPI"), version=1, correlation_id=1)
        _, response = await client.read_response(SASL_HANDSHAKE, 1)
        assert (response.error_code, response.mechanisms) == (UNSUPPORTED_SASL_MECHANISM, ["PLAIN"])
        assert await client.closed_by_server()
        await client.close()
    lines = connection_lines(caplog)
    assert len(lines) == 1 and "Unsupported SASL mechanism GSSAPI" in lines[0], lines


async def test_a_request_before_authentication_closes_the_connection(tmp_path, caplog):
    sessions = []
    async with secure_server(tmp_path, plain_sasl_settings(), _registry(sessions)) as (_, ports):
        client = await RawClient.connect(ports["SASL_PLAINTEXT"])
        await client.send(MetadataRequest(topics=[]), version=12, correlation_id=1)
        assert await client.closed_by_server()
        await client.close()
    assert sessions == []
    lines = connection_lines(caplog)
    assert len(lines) == 1 and "Unexpected Kafka request of type METADATA during SASL handshake." in lines[0], lines


async def test_a_second_api_versions_before_the_handshake_closes_the_connection(tmp_path):
    async with secure_server(tmp_path, plain_sasl_settings(), _registry([])) as (_, ports):
        client = await RawClient.connect(ports["SASL_PLAINTEXT"])
        for correlation_id in (1, 2):
            await client.send(ApiVersionsRequest(client_software_name="t", client_software_version="1"), version=3,
                              correlation_id=correlation_id)
        header, _ = await client.read_response(API_VERSIONS, 3)
        assert header.correlation_id == 1
        assert await client.closed_by_server()
        await client.close()


async def test_authenticate_request_during_the_exchange_only(tmp_path):
    """Between the handshake and completion only SaslAuthenticate is allowed: another request gets its own error
    response with ILLEGAL_SASL_STATE, then the close (Kafka's SaslServerAuthenticator)."""
    async with secure_server(tmp_path, plain_sasl_settings(), _registry([])) as (_, ports):
        client = await RawClient.connect(ports["SASL_PLAINTEXT"])
        await client.send(SaslHandshakeRequest(mechanism="PLAIN"), version=1, correlation_id=1)
        await client.read_response(SASL_HANDSHAKE, 1)
        await client.send(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")]), version=12,
                          correlation_id=2)
        header, response = await client.read_response(METADATA, 12)
        assert header.correlation_id == 2
        assert [(topic.name, topic.error_code) for topic in response.topics] == [("t", ILLEGAL_SASL_STATE)]
        assert await client.closed_by_server()
        await client.close()


async def test_v0_handshake_exchanges_raw_tokens(tmp_path):
    sessions = []
    async with secure_server(tmp_path, plain_sasl_settings(), _registry(sessions)) as (_, ports):
        client = await RawClient.connect(ports["SASL_PLAINTEXT"])
        await client.send(SaslHandshakeRequest(mechanism="PLAIN"), version=0, correlation_id=1)
        _, response = await client.read_response(SASL_HANDSHAKE, 0)
        assert response.error_code == 0
        await client.send_frame(b"\0alice\0alice-secret")  # no request header: the token alone
        assert await client.read_frame() == b""            # PLAIN's empty challenge, size-prefixed
        await _metadata(client)
        await client.close()
    assert sessions[0].principal == KafkaPrincipal("User", "alice")


async def test_v0_raw_token_with_a_wrong_password_just_closes(tmp_path, caplog):
    async with secure_server(tmp_path, plain_sasl_settings(), _registry([])) as (_, ports):
        client = await RawClient.connect(ports["SASL_PLAINTEXT"])
        await client.send(SaslHandshakeRequest(mechanism="PLAIN"), version=0, correlation_id=1)
        await client.read_response(SASL_HANDSHAKE, 0)
        await client.send_frame(b"\0alice\0wrong")
        assert await client.closed_by_server()
        await client.close()
    lines = connection_lines(caplog)
    assert len(lines) == 1 and "Invalid username or password" in lines[0], lines


async def test_frames_over_sasl_server_max_receive_size_are_refused_while_authenticating(tmp_path, caplog):
    settings = plain_sasl_settings(**{"sasl.server.max.receive.size": 1000})
    async with secure_server(tmp_path, settings, _registry([])) as (_, ports):
        client = await RawClient.connect(ports["SASL_PLAINTEXT"])
        await client.send(SaslHandshakeRequest(mechanism="PLAIN"), version=1, correlation_id=1)
        await client.read_response(SASL_HANDSHAKE, 1)
        await client.send(SaslAuthenticateRequest(auth_bytes=b"\0alice\0" + b"x" * 2000), version=2,
                          correlation_id=2)
        assert await client.closed_by_server()
        await client.close()

        client = await RawClient.connect(ports["SASL_PLAINTEXT"])  # the limit ends with authentication
        assert (await sasl_plain_login(client, "alice", "alice-secret")).error_code == 0
        await client.send(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t" * 200)
                                                  for _ in range(10)]), version=12, correlation_id=9)
        header, _ = await client.read_response(METADATA, 12)
        assert header.correlation_id == 9
        await client.close()
    lines = connection_lines(caplog)
    assert len(lines) == 1 and "sasl.server.max.receive.size=1000" in lines[0], lines


async def test_sasl_requests_after_authentication_get_illegal_sasl_state(tmp_path):
    async with secure_server(tmp_path, plain_sasl_settings(), _registry([])) as (_, ports):
        client = await RawClient.connect(ports["SASL_PLAINTEXT"])
        assert (await sasl_plain_login(client, "alice", "alice-secret")).error_code == 0
        await client.send(SaslHandshakeRequest(mechanism="PLAIN"), version=1, correlation_id=10)
        _, handshake = await client.read_response(SASL_HANDSHAKE, 1)
        assert handshake.error_code == ILLEGAL_SASL_STATE
        await client.send(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), version=2, correlation_id=11)
        _, authenticate = await client.read_response(SASL_AUTHENTICATE, 2)
        assert authenticate.error_code == ILLEGAL_SASL_STATE
        assert authenticate.error_message == "SaslAuthenticate request received after successful authentication"
        await _metadata(client)  # still open
        await client.close()


async def test_sasl_requests_on_a_plaintext_listener_get_illegal_sasl_state(tmp_path):
    async with secure_server(tmp_path, {"listeners": "PLAINTEXT://127.0.0.1:0"}, _registry([])) as (_, ports):
        client = await RawClient.connect(ports["PLAINTEXT"])
        await client.send(SaslHandshakeRequest(mechanism="PLAIN"), version=1, correlation_id=1)
        _, handshake = await client.read_response(SASL_HANDSHAKE, 1)
        assert (handshake.error_code, handshake.mechanisms) == (ILLEGAL_SASL_STATE, [])
        await _metadata(client)
        await client.close()


async def test_reauthentication_keeps_the_principal(tmp_path, caplog):
    settings = plain_sasl_settings(**{"connections.max.reauth.ms": 60_000})
    sessions = []
    async with secure_server(tmp_path, settings, _registry(sessions)) as (_, ports):
        client = await RawClient.connect(ports["SASL_PLAINTEXT"])
        first = await sasl_plain_login(client, "alice", "alice-secret")
        assert 0 < first.session_lifetime_ms <= 60_000
        again = await _reauthenticate(client, "alice", "alice-secret")
        assert (again.error_code, again.error_message) == (0, None)
        assert 0 < again.session_lifetime_ms <= 60_000
        await _metadata(client)
        await client.close()

        client = await RawClient.connect(ports["SASL_PLAINTEXT"])  # (at most one re-authentication a second)
        assert (await sasl_plain_login(client, "alice", "alice-secret")).error_code == 0
        other = await _reauthenticate(client, "bob", "bob-secret")
        assert other.error_code == SASL_AUTHENTICATION_FAILED
        assert other.error_message == "Cannot change principals during re-authentication from User.alice: User.bob"
        assert await client.closed_by_server()
        await client.close()
    assert sessions[0].principal == KafkaPrincipal("User", "alice")


async def test_reauthentication_with_another_mechanism_closes_the_connection(tmp_path, caplog):
    settings = plain_sasl_settings(**{"connections.max.reauth.ms": 60_000,
                                      "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256"})
    async with secure_server(tmp_path, settings, _registry([])) as (_, ports):
        client = await RawClient.connect(ports["SASL_PLAINTEXT"])
        assert (await sasl_plain_login(client, "alice", "alice-secret")).error_code == 0
        await client.send(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), version=1, correlation_id=20)
        _, handshake = await client.read_response(SASL_HANDSHAKE, 1)
        assert handshake.error_code == 0  # Kafka accepts the handshake, then refuses the token
        await client.send(SaslAuthenticateRequest(auth_bytes=b"n,,n=alice,r=abc"), version=2, correlation_id=21)
        assert await client.closed_by_server()
        await client.close()
    assert any("SASL mechanism 'SCRAM-SHA-256' requested by client is not supported for re-authentication of "
               "mechanism 'PLAIN'" in line for line in connection_lines(caplog))


async def test_an_expired_session_is_closed_on_its_next_request(tmp_path, caplog):
    settings = plain_sasl_settings(**{"connections.max.reauth.ms": 1})
    async with secure_server(tmp_path, settings, _registry([])) as (_, ports):
        client = await RawClient.connect(ports["SASL_PLAINTEXT"])
        response = await sasl_plain_login(client, "alice", "alice-secret")
        authenticated_at = time.monotonic()
        assert response.session_lifetime_ms == 1
        while time.monotonic() < authenticated_at + 0.005:  # the 1 ms session is over
            await asyncio.sleep(0.001)
        await client.send(MetadataRequest(topics=[]), version=12, correlation_id=40)
        assert await client.closed_by_server()
        await client.close()
    lines = connection_lines(caplog)
    assert len(lines) == 1 and "SASL session expired" in lines[0], lines


async def _reauthenticate(client: RawClient, user: str, password: str, correlation_id: int = 20):
    await client.send(SaslHandshakeRequest(mechanism="PLAIN"), version=1, correlation_id=correlation_id)
    _, handshake = await client.read_response(SASL_HANDSHAKE, 1)
    assert handshake.error_code == 0, handshake
    await client.send(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()), version=2,
                      correlation_id=correlation_id + 1)
    _, response = await client.read_response(SASL_AUTHENTICATE, 2)
    return response


async def test_sasl_ssl_authenticates_over_tls(tmp_path, tmp_path_factory):
    certs = TestCertificates.generate(tmp_path_factory.mktemp("certs"))
    settings = {**tls_listener_settings(certs, "SASL_SSL"), **plain_sasl_settings("SASL_SSL")}
    sessions = []
    async with secure_server(tmp_path, settings, _registry(sessions)) as (_, ports):
        client = await connect_tls(ports["SASL_SSL"], client_context(certs))
        assert (await sasl_plain_login(client, "bob", "bob-secret")).error_code == 0
        await _metadata(client)
        await client.close()
    assert sessions[0].principal == KafkaPrincipal("User", "bob")
    assert sessions[0].security_protocol == "SASL_SSL"

