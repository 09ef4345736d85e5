"""Whatever a client sends, a SASL server answers a challenge or raises SaslAuthenticationError: never another
exception. Inputs are random bytes and mutations of valid messages, fed as first and as later tokens."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compatbroker.security.sasl import SaslAuthenticationError, new_sasl_server
from compatbroker.security.scram_credentials import ScramCredentialStore

from .sasl_helpers import ScramClient, SigningKey, listener, oauth_first_message, unsecured_jwt, write_jwks

NOW_MS = 1_700_000_000_000
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
STORE = ScramCredentialStore()
STORE.set_password("alice", "SCRAM-SHA-256", "secret")
STORE.set_password("alice", "SCRAM-SHA-512", "secret")
VALID_FIRST = {
    "PLAIN": b"\0alice\0secret",
    "SCRAM-SHA-256": ScramClient("SCRAM-SHA-256", "alice", "secret").first(),
    "SCRAM-SHA-512": ScramClient("SCRAM-SHA-512", "alice", "secret", extensions=",x=y").first(),
    "OAUTHBEARER": oauth_first_message(unsecured_jwt({"sub": "alice", "exp": NOW_MS // 1000 + 60,
                                                      "scope": ["a"]})),
}
LISTENER = listener(plain_users={"alice": "secret"})
INTERESTING = st.sampled_from([b"\0", b"\x01", b",", b"=", b"=2C", b"n,,", b"r=", b"p=", b"c=biws", b".", b"e30",
                               b"\xff", b"auth=Bearer ", "\u00e9".encode()])


def mutated(seed: bytes):
    """A valid message with pieces replaced, cut or inserted."""
    pieces = st.lists(INTERESTING | st.binary(max_size=6), max_size=3)
    return st.tuples(st.integers(0, 400), st.integers(0, 8), pieces).map(
        lambda cut: seed[:min(cut[0], len(seed))] + b"".join(cut[2]) + seed[min(cut[0], len(seed)) + cut[1]:])


def evaluate_all(server, tokens) -> None:
    for token in tokens:
        try:
            challenge = server.evaluate(token)
        except SaslAuthenticationError as failure:
            assert str(failure)  # a message for the client
            return
        assert isinstance(challenge, bytes)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_tokens_never_raise_anything_else(data):
    mechanism = data.draw(st.sampled_from(MECHANISMS))
    first = data.draw(mutated(VALID_FIRST[mechanism]) | st.binary(max_size=64))
    later = data.draw(st.lists(mutated(b"c=biws,r=abc,p=AAAA") | st.binary(max_size=32), max_size=2))
    evaluate_all(new_sasl_server(mechanism, LISTENER, STORE, now_ms=NOW_MS), [first, *later])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_scram_final_messages_never_raise_anything_else(data):
    server = new_sasl_server("SCRAM-SHA-256", LISTENER, STORE)
    client = ScramClient("SCRAM-SHA-256", "alice", "secret")
    final = client.final(server.evaluate(client.first()))
    evaluate_all(server, [data.draw(mutated(final))])


@pytest.fixture(scope="module")
def jwks_listener(tmp_path_factory):
    key = SigningKey("EC", "k")
    url = write_jwks(tmp_path_factory.mktemp("jwks") / "jwks.json", key)
    return key, listener(jwks_url=url)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(st.data())
def test_signed_token_mutations_never_raise_anything_else(jwks_listener, data):
    key, secured = jwks_listener
    token = key.sign({"sub": "alice", "iat": NOW_MS // 1000, "exp": NOW_MS // 1000 + 60}).encode()
    message = oauth_first_message(data.draw(mutated(token)).decode("latin-1"))
    evaluate_all(new_sasl_server("OAUTHBEARER", secured, STORE, now_ms=NOW_MS), [message, b"\x01"])
