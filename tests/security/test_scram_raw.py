"""SCRAM and OAUTHBEARER over the wire: a broker with a SASL_PLAINTEXT listener, credentials created with
AlterUserScramCredentials on its PLAINTEXT listener, and raw SaslHandshake v1 + SaslAuthenticate exchanges: success,
a wrong password, a bad nonce, a replayed final message, an expired token (Kafka's answers, then a close)."""
from __future__ import annotations

import time

from compatbroker.protocol.messages import (AlterUserScramCredentialsRequest, ApiVersionsRequest, MetadataRequest,
                                            SaslAuthenticateRequest, SaslHandshakeRequest)
from compatbroker.security.scram_credentials import SCRAM_SHA_512
from tests.async_tests import async_test
from tests.server.helpers import RawClient
from tests.server.secure_helpers import API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE, secure_server

from .sasl_helpers import ScramClient, oauth_first_message, unsecured_jwt

SASL_AUTHENTICATION_FAILED = 58
ALTER_USER_SCRAM_CREDENTIALS, METADATA = 51, 3
SETTINGS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "SCRAM-SHA-512,OAUTHBEARER",
    "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
}
GENERIC = ("Authentication failed during authentication due to invalid credentials with SASL mechanism "
           "SCRAM-SHA-512")


async def create_user(port: int, user: str, password: str) -> None:
    client = await RawClient.connect(port)
    salt, iterations = b"raw-test-salt", 4096
    upsertion = AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
        name=user, mechanism=SCRAM_SHA_512.type, iterations=iterations, salt=salt,
        salted_password=SCRAM_SHA_512.salted_password(password, salt, iterations))
    await client.send(AlterUserScramCredentialsRequest(deletions=[], upsertions=[upsertion]), version=0,
                      correlation_id=7)
    _, response = await client.read_response(ALTER_USER_SCRAM_CREDENTIALS, 0)
    assert [(r.user, r.error_code) for r in response.results] == [(user, 0)]
    await client.close()


async def handshake(port: int, mechanism: str) -> RawClient:
    client = await RawClient.connect(port)
    await client.send(ApiVersionsRequest(client_software_name="tests", client_software_version="1"), version=3,
                      correlation_id=1)
    await client.read_response(API_VERSIONS, 3)
    await client.send(SaslHandshakeRequest(mechanism=mechanism), version=1, correlation_id=2)
    _, response = await client.read_response(SASL_HANDSHAKE, 1)
    assert response.error_code == 0, response
    return client


async def authenticate(client: RawClient, token: bytes, correlation_id: int):
    await client.send(SaslAuthenticateRequest(auth_bytes=token), version=2, correlation_id=correlation_id)
    return (await client.read_response(SASL_AUTHENTICATE, 2))[1]


async def refused_then_closed(client: RawClient, token: bytes, message: str) -> None:
    response = await authenticate(client, token, 4)
    assert (response.error_code, response.error_message) == (SASL_AUTHENTICATION_FAILED, message)
    assert await client.closed_by_server()
    await client.close()


@async_test
async def test_scram_exchanges_over_the_wire(tmp_path):
    async with secure_server(tmp_path, SETTINGS) as (_, ports):
        await create_user(ports["PLAINTEXT"], "alice", "alice-secret")
        sasl_port = ports["SASL_PLAINTEXT"]

        # success: the server proves itself, then requests are served
        client, scram = await handshake(sasl_port, "SCRAM-SHA-512"), ScramClient("SCRAM-SHA-512", "alice",
                                                                                  "alice-secret")
        first = await authenticate(client, scram.first(), 3)
        final = await authenticate(client, scram.final(first.auth_bytes), 4)
        assert (final.error_code, final.session_lifetime_ms) == (0, 0) and scram.verifies(final.auth_bytes)
        await client.send(MetadataRequest(topics=[]), version=12, correlation_id=5)
        header, _ = await client.read_response(METADATA, 12)
        assert header.correlation_id == 5
        await client.close()
        recorded_first, recorded_final = scram.first(), scram.final(first.auth_bytes)

        # a wrong password
        client, wrong = await handshake(sasl_port, "SCRAM-SHA-512"), ScramClient("SCRAM-SHA-512", "alice", "nope")
        server_first = (await authenticate(client, wrong.first(), 3)).auth_bytes
        await refused_then_closed(client, wrong.final(server_first), GENERIC)

        # a bad nonce: the right password, but not the nonce the server chose
        client, forger = await handshake(sasl_port, "SCRAM-SHA-512"), ScramClient("SCRAM-SHA-512", "alice",
                                                                                  "alice-secret")
        server_first = (await authenticate(client, forger.first(), 3)).auth_bytes
        await refused_then_closed(client, forger.final(server_first, nonce=forger.nonce + "x"), GENERIC)

        # a replayed exchange: the recorded messages, on a new connection
        client = await handshake(sasl_port, "SCRAM-SHA-512")
        assert (await authenticate(client, recorded_first, 3)).error_code == 0
        await refused_then_closed(client, recorded_final, GENERIC)


@async_test
async def test_oauthbearer_over_the_wire(tmp_path):
    now = int(time.time())
    async with secure_server(tmp_path, SETTINGS) as (_, ports):
        client = await handshake(ports["SASL_PLAINTEXT"], "OAUTHBEARER")
        good = unsecured_jwt({"sub": "svc", "iat": now, "exp": now + 600})
        response = await authenticate(client, oauth_first_message(good), 3)
        assert response.error_code == 0 and response.auth_bytes == b""
        assert 500_000 < response.session_lifetime_ms <= 600_000  # the token's remaining lifetime (KIP-368)
        await client.close()

        client = await handshake(ports["SASL_PLAINTEXT"], "OAUTHBEARER")
        expired = unsecured_jwt({"sub": "svc", "iat": now - 600, "exp": now - 300})
        challenge = await authenticate(client, oauth_first_message(expired), 3)
        assert (challenge.error_code, challenge.auth_bytes) == (0, b'{"status":"invalid_token"}')
        await refused_then_closed(client, b"\x01", '{"status":"invalid_token"}')
