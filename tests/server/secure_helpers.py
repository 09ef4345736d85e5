"""Servers with TLS and SASL listeners for the server tests, and raw clients over TLS.

`secure_server(tmp_path, settings)` starts a broker with the full handler registry and yields (server, ports by
listener name). Settings are Kafka-named properties given as a dict (listener-prefixed names hold underscores,
which `helpers.make_config`'s keyword arguments would turn into dots). Certificates come from the toolkit's
throwaway CA (`compatbroker.toolkit.certificates`).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl

from compatbroker.broker import Broker
from compatbroker.config import BrokerConfig
from compatbroker.handlers import default_registry
from compatbroker.protocol.messages import (ApiVersionsRequest, SaslAuthenticateRequest, SaslHandshakeRequest)
from compatbroker.server import Server

from .helpers import RawClient

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="alice-secret" user_bob="bob-secret";')
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
API_VERSIONS = 18
CONNECTION_LOG = "compatbroker.server.connection"


@contextlib.asynccontextmanager
async def secure_server(tmp_path, settings: dict, handlers=None):
    config = BrokerConfig({"log.dirs": str(tmp_path / "data"), **settings})
    broker = Broker(config)
    broker.startup()
    server = Server(broker, handlers if handlers is not None else default_registry())
    await server.start()
    try:
        yield server, {bound.endpoint.name: bound.port for bound in server.listeners}
    finally:
        await server.stop()
        await broker.shutdown()


def tls_listener_settings(certs, name: str = "SSL", *, client_auth: str = "none", **extra) -> dict:
    """Settings of one TLS listener (SSL or SASL_SSL) on a free port, with the broker certificate of `certs`."""
    settings = {
        "listeners": f"{name}://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": certs.broker.keystore_file,
        "ssl.client.auth": client_auth,
    }
    if client_auth != "none":
        settings["ssl.truststore.type"] = "PEM"
        settings["ssl.truststore.location"] = certs.ca_file
    settings.update(extra)
    return settings


def plain_sasl_settings(listener: str = "SASL_PLAINTEXT", **extra) -> dict:
    settings = {
        "listeners": f"{listener}://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        f"listener.name.{listener.lower()}.plain.sasl.jaas.config": PLAIN_JAAS,
    }
    settings.update(extra)
    return settings


def client_context(certs, client=None) -> ssl.SSLContext:
    """A client's TLS context trusting the test CA, presenting `client` (an IssuedCertificate) when given."""
    context = ssl.create_default_context(cafile=certs.ca_file)
    if client is not None:
        context.load_cert_chain(client.chain_file, client.key_file)
    return context


async def connect_tls(port: int, context: ssl.SSLContext) -> RawClient:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname="localhost")
    return RawClient(reader, writer)


async def sasl_plain_login(client: RawClient, user: str, password: str, *, authenticate_version: int = 2):
    """ApiVersions, SaslHandshake v1 PLAIN and one SaslAuthenticate; the SaslAuthenticate response."""
    await client.send(ApiVersionsRequest(client_software_name="tests", client_software_version="1"), version=3,
                      correlation_id=1)
    await client.read_response(API_VERSIONS, 3)
    await client.send(SaslHandshakeRequest(mechanism="PLAIN"), version=1, correlation_id=2)
    _, handshake = await client.read_response(SASL_HANDSHAKE, 1)
    assert handshake.error_code == 0, handshake
    token = f"\0{user}\0{password}".encode()
    await client.send(SaslAuthenticateRequest(auth_bytes=token), version=authenticate_version, correlation_id=3)
    _, response = await client.read_response(SASL_AUTHENTICATE, authenticate_version)
    return response


def connection_lines(caplog, level: int = logging.INFO) -> list[str]:
    return [record.getMessage() for record in caplog.records
            if record.name == CONNECTION_LOG and record.levelno >= level]
