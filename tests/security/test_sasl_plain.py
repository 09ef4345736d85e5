"""SASL/PLAIN as Kafka's PlainSaslServer: message format, users from the listener's JAAS options, messages."""
from __future__ import annotations

import pytest

from compatbroker.security.principal import KafkaPrincipal
from compatbroker.security.sasl import SaslAuthenticationError, new_sasl_server
from compatbroker.security.scram_credentials import ScramCredentialStore

from .sasl_helpers import listener

USERS = {"alice": "alice-secret", "bob": "b\u00f6b"}


def plain_server():
    return new_sasl_server("PLAIN", listener(plain_users=USERS), ScramCredentialStore())


@pytest.mark.parametrize("authzid", ["", "alice"])
def test_valid_credentials_authenticate_the_user(authzid):
    server = plain_server()
    assert server.evaluate(f"{authzid}\0alice\0alice-secret".encode()) == b""
    assert server.complete
    assert server.principal == KafkaPrincipal("User", "alice")
    assert server.lifetime_ms is None


def test_passwords_are_utf8():
    server = plain_server()
    server.evaluate("\0bob\0b\u00f6b".encode())
    assert server.principal.name == "bob"


@pytest.mark.parametrize("message, error", [
    (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
    (b"\0mallory\0alice-secret", "Authentication failed: Invalid username or password"),
    (b"\0\0alice-secret", "Authentication failed: username not specified"),
    (b"\0alice\0", "Authentication failed: password not specified"),
    (b"bob\0alice\0alice-secret",
     "Authentication failed: Client requested an authorization id that is different from username"),
    (b"alice\0alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    (b"", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    (b"\0alice\0alice-secret\0extra\0more", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
])
def test_failures_tell_the_client_kafkas_message(message, error):
    server = plain_server()
    with pytest.raises(SaslAuthenticationError) as failure:
        server.evaluate(message)
    assert str(failure.value) == error
    assert failure.value.client_message(reauthenticating=True) == error
    assert not server.complete and server.principal is None


def test_a_listener_without_plain_users_accepts_nobody():
    server = new_sasl_server("PLAIN", listener(), ScramCredentialStore())
    with pytest.raises(SaslAuthenticationError, match="Invalid username or password"):
        server.evaluate(b"\0alice\0alice-secret")


def test_unknown_mechanism_is_refused():
    with pytest.raises(ValueError, match="GSSAPI"):
        new_sasl_server("GSSAPI", listener(), ScramCredentialStore())
