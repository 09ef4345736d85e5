"""SASL/SCRAM-SHA-256/512 exchanges against Kafka's ScramSaslServer behaviour: RFC 7677's example, proofs, nonces,
replays, Kafka's messages."""
from __future__ import annotations

import base64

import pytest

from compatbroker.security.principal import KafkaPrincipal
from compatbroker.security.sasl import SaslAuthenticationError, SaslCredentialsError, new_sasl_server
from compatbroker.security.sasl import scram as scram_module
from compatbroker.security.scram_credentials import SCRAM_SHA_256, ScramCredentialStore, credential_from_password

from .sasl_helpers import ScramClient, listener

GENERIC_256 = ("Authentication failed during authentication due to invalid credentials with SASL mechanism "
               "SCRAM-SHA-256")


@pytest.fixture
def store():
    store = ScramCredentialStore()
    store.set_password("alice", "SCRAM-SHA-256", "alice-secret")
    store.set_password("alice", "SCRAM-SHA-512", "alice-512", iterations=8192)
    store.set_password("odd,na=me", "SCRAM-SHA-256", "odd-secret")
    return store


def server(store, mechanism="SCRAM-SHA-256"):
    return new_sasl_server(mechanism, listener(), store)


def authenticate(store, mechanism, user, password, **client_options):
    srv, client = server(store, mechanism), ScramClient(mechanism, user, password, **client_options)
    server_first = srv.evaluate(client.first())
    assert not srv.complete
    server_final = srv.evaluate(client.final(server_first))
    return srv, client, server_final


def test_rfc7677_example(monkeypatch):
    """RFC 7677 section 3: user "user", password "pencil", with the example's salt and nonces."""
    store = ScramCredentialStore()
    store.put("user", SCRAM_SHA_256, credential_from_password(
        SCRAM_SHA_256, "pencil", 4096, salt=base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")))
    monkeypatch.setattr(scram_module, "server_nonce", lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    srv = server(store)
    assert srv.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO") == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = srv.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                         b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert srv.complete and srv.principal == KafkaPrincipal("User", "user") and srv.lifetime_ms is None


@pytest.mark.parametrize("mechanism, password, iterations", [("SCRAM-SHA-256", "alice-secret", 4096),
                                                             ("SCRAM-SHA-512", "alice-512", 8192)])
def test_both_mechanisms_authenticate_and_prove_the_server(store, mechanism, password, iterations):
    srv, client = server(store, mechanism), ScramClient(mechanism, "alice", password)
    server_first = srv.evaluate(client.first())
    assert server_first.decode().endswith(f",i={iterations}")
    assert server_first.startswith(f"r={client.nonce}".encode())
    assert client.verifies(srv.evaluate(client.final(server_first)))
    assert srv.complete and srv.principal == KafkaPrincipal("User", "alice")


def test_user_names_with_escaped_characters(store):
    srv, client, final = authenticate(store, "SCRAM-SHA-256", "odd,na=me", "odd-secret")
    assert client.verifies(final) and srv.principal.name == "odd,na=me"


def test_authorization_id_equal_to_the_user_is_accepted(store):
    srv, client, final = authenticate(store, "SCRAM-SHA-256", "alice", "alice-secret", authzid="alice")
    assert srv.complete


def test_authorization_id_of_another_user_is_refused_with_kafkas_message(store):
    client = ScramClient("SCRAM-SHA-256", "alice", "alice-secret", authzid="bob")
    with pytest.raises(SaslAuthenticationError) as failure:
        server(store).evaluate(client.first())
    assert not isinstance(failure.value, SaslCredentialsError)
    assert str(failure.value) == ("Authentication failed: Client requested an authorization id that is different "
                                  "from username")


def test_wrong_password_fails_with_the_generic_message(store):
    srv, client = server(store), ScramClient("SCRAM-SHA-256", "alice", "wrong")
    with pytest.raises(SaslCredentialsError) as failure:
        srv.evaluate(client.final(srv.evaluate(client.first())))
    assert str(failure.value) == GENERIC_256
    assert failure.value.reason == "Invalid client credentials"
    assert failure.value.client_message(reauthenticating=True) == GENERIC_256.replace(
        "during authentication", "during re-authentication")
    assert not srv.complete and srv.principal is None


def test_unknown_user_fails_like_a_wrong_password(store):
    with pytest.raises(SaslCredentialsError) as failure:
        server(store).evaluate(ScramClient("SCRAM-SHA-256", "mallory", "x").first())
    assert str(failure.value) == GENERIC_256
    assert failure.value.reason == "Authentication failed: Invalid user credentials"


def test_a_user_without_a_credential_for_the_mechanism_is_unknown(store):
    with pytest.raises(SaslCredentialsError, match="SCRAM-SHA-512"):
        server(store, "SCRAM-SHA-512").evaluate(ScramClient("SCRAM-SHA-512", "odd,na=me", "odd-secret").first())


def test_bad_nonce_in_the_final_message_fails(store):
    srv, client = server(store), ScramClient("SCRAM-SHA-256", "alice", "alice-secret")
    server_first = srv.evaluate(client.first())
    forged = client.final(server_first, nonce=client.nonce + "not-the-servers-nonce")
    with pytest.raises(SaslCredentialsError) as failure:
        srv.evaluate(forged)
    assert failure.value.reason == "Invalid client nonce in the final client message."
    assert not srv.complete


def test_replayed_final_message_on_the_same_server_fails(store):
    srv, client = server(store), ScramClient("SCRAM-SHA-256", "alice", "alice-secret")
    final = client.final(srv.evaluate(client.first()))
    srv.evaluate(final)
    assert srv.complete
    with pytest.raises(SaslAuthenticationError, match="Unexpected challenge in Sasl server state COMPLETE"):
        srv.evaluate(final)


def test_replayed_final_message_in_a_new_exchange_fails(store):
    """A recorded final message is bound to the old server nonce: a new exchange by the same client name, or a
    new server fed the final message first, refuses it."""
    old_server, client = server(store), ScramClient("SCRAM-SHA-256", "alice", "alice-secret")
    recorded_final = client.final(old_server.evaluate(client.first()))
    old_server.evaluate(recorded_final)

    new_server = server(store)
    new_server.evaluate(client.first())  # the attacker replays the recorded first message too
    with pytest.raises(SaslCredentialsError) as failure:
        new_server.evaluate(recorded_final)
    assert failure.value.reason == "Invalid client nonce in the final client message."

    fresh = server(store)
    with pytest.raises(SaslCredentialsError) as failure:
        fresh.evaluate(recorded_final)
    assert failure.value.reason.startswith("Invalid SCRAM client first message format")


def test_a_failed_exchange_stays_failed(store):
    srv = server(store)
    with pytest.raises(SaslCredentialsError):
        srv.evaluate(b"garbage")
    with pytest.raises(SaslAuthenticationError, match="state FAILED"):
        srv.evaluate(ScramClient("SCRAM-SHA-256", "alice", "alice-secret").first())


def test_unknown_extensions_are_ignored_and_signed(store):
    srv, client, final = authenticate(store, "SCRAM-SHA-256", "alice", "alice-secret", extensions=",foo=bar")
    assert client.verifies(final)


def test_token_authentication_is_refused_without_delegation_tokens(store):
    client = ScramClient("SCRAM-SHA-256", "alice", "alice-secret", extensions=",tokenauth=true")
    with pytest.raises(SaslCredentialsError) as failure:
        server(store).evaluate(client.first())
    assert failure.value.reason == "Token Authentication failed: Invalid tokenId : alice"


@pytest.mark.parametrize("first", [
    b"y,,n=alice,r=abc",          # channel binding flag this server does not do
    b"n,,n=alice",                 # no nonce
    b"n,,n=al=ice,r=abc",          # "=" not escaped
    b"n,,n=alice,r=a,b",           # comma in the nonce
    b"n,,n=,r=abc",                # empty user name
    "n,,n=\u00e4lice,r=abc".encode(),  # Kafka's grammar is ASCII
    b"\xff\xfe",
])
def test_malformed_first_messages_fail(store, first):
    with pytest.raises(SaslCredentialsError) as failure:
        server(store).evaluate(first)
    assert failure.value.reason.startswith("Invalid SCRAM client first message format")


@pytest.mark.parametrize("final", [b"c=biws,r=x", b"c=biws,p=AAAA", b"c=b!ws,r=x,p=AAAA", b"c=biws,r=x,p=AAA"])
def test_malformed_final_messages_fail(store, final):
    srv = server(store)
    srv.evaluate(ScramClient("SCRAM-SHA-256", "alice", "alice-secret").first())
    with pytest.raises(SaslCredentialsError) as failure:
        srv.evaluate(final)
    assert failure.value.reason.startswith("Invalid SCRAM client final message format")


def test_a_proof_of_the_wrong_length_fails(store):
    srv, client = server(store), ScramClient("SCRAM-SHA-256", "alice", "alice-secret")
    server_first = srv.evaluate(client.first())
    final = client.final(server_first).rsplit(b",p=", 1)[0] + b",p=" + base64.b64encode(b"short")
    with pytest.raises(SaslCredentialsError) as failure:
        srv.evaluate(final)
    assert failure.value.reason == "Invalid client credentials"
