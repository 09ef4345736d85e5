"""kafkajs with SASL: PLAIN and SCRAM-SHA-256 over SASL_PLAINTEXT, SCRAM-SHA-512 and OAUTHBEARER over SASL_SSL, the
token (from kafkajs' oauthBearerProvider) checked by Kafka's unsecured validator or, on a second broker, signed and
checked against a JWKS file with an expected issuer and audience. kafkajs asks ApiVersions, then SaslHandshake v1
and SaslAuthenticate (v0/v1) on every connection; on a third broker, whose sessions last REAUTH_MS (KIP-368), it
re-authenticates a long-lived connection.

Refusals, in kafkajs' terms: a wrong password is KafkaJSSASLAuthenticationError "SASL <MECHANISM> authentication
failed: <the broker's message>", Kafka's messages being "Authentication failed: Invalid username or password"
(PLAIN) and "Authentication failed during authentication due to invalid credentials with SASL mechanism
SCRAM-SHA-512". An expired token is refused the way Kafka's OAuthBearerSaslServer refuses it: the SaslAuthenticate
answer carries no error but the challenge {"status":"invalid_token"}, to which the client should answer %x01 to
get SASL_AUTHENTICATION_FAILED. kafkajs does not read that challenge: it takes the answer as success and sends its
next request (Metadata), which the broker, still authenticating, refuses with "Unexpected Kafka request of type
METADATA during SASL authentication." and closes the connection - so kafkajs' producer fails on a closed connection
(retriable: it retries, then gives up), and nothing is written. A signed token that expired or names another
audience goes the same way, the broker logging why as Kafka does.
"""
from __future__ import annotations

import collections
import concurrent.futures
import time

import pytest

from compatbroker.toolkit.security import SecuritySetup

from . import clients
from .clients.kafkajs_client import KafkajsError
from .records import assert_same, numbered
from .secured_clients import BrokerLog, secured_broker, stored_values

pytestmark = pytest.mark.matrix(client="kafkajs", flow="sasl")
ISSUER = "https://issuer.compatbroker.test"
AUDIENCE = "compatbroker"
REAUTH_MS = 12_000
WAIT_S = 60.0  # a bound for what happens within seconds


@pytest.fixture(scope="module")
def broker():
    setup = SecuritySetup(listeners=("SASL_PLAINTEXT", "SASL_SSL"),
                          mechanisms=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"))
    with secured_broker(setup) as running:
        yield running


@pytest.fixture(scope="module")
def jwks_broker():
    """OAUTHBEARER with signed tokens: Kafka's OAuthBearerValidatorCallbackHandler against a JWKS file, an expected
    issuer and audience."""
    setup = SecuritySetup(listeners=("SASL_SSL",), mechanisms=("OAUTHBEARER",), oauthbearer="jwks",
                          oauth_issuer=ISSUER, oauth_audience=AUDIENCE)
    with secured_broker(setup) as running:
        yield running


@pytest.fixture(scope="module")
def reauth_broker():
    """KIP-368: sessions of REAUTH_MS; kafkajs re-authenticates a connection once less than its
    reauthenticationThreshold (10 s by default) of the session is left, so here 2 s after each authentication."""
    setup = SecuritySetup(listeners=("SASL_PLAINTEXT",), mechanisms=("PLAIN",),
                          settings={"connections.max.reauth.ms": REAUTH_MS})
    with secured_broker(setup) as running:
        yield running


@pytest.fixture(scope="module")
def kafkajs():
    return clients.load_or_fail("kafkajs")


@pytest.mark.parametrize("listener, mechanism", [
    ("SASL_PLAINTEXT", "PLAIN"),
    ("SASL_SSL", "SCRAM-SHA-512"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
    ("SASL_SSL", "OAUTHBEARER"),
])
def test_produces_and_consumes(broker, kafkajs, topic, listener, mechanism):
    secured = kafkajs.secured(broker.client_config("kafkajs", listener, mechanism=mechanism))
    bootstrap = broker.bootstrap_servers_for(listener)
    since = max((entry.seq for entry in broker.requests()), default=0)
    sent = numbered(5, mechanism)
    secured.produce(bootstrap, topic, sent)
    assert_same(sent, secured.consume(bootstrap, topic, len(sent)))
    assert stored_values(broker, topic) == [record.value for record in sent]
    exchange = {(entry.api, entry.api_version) for entry in broker.requests(since) if entry.api.startswith("Sasl")}
    assert exchange == {("SaslHandshake", 1), ("SaslAuthenticate", 1)}  # kafkajs' highest versions


@pytest.mark.parametrize("listener, mechanism, message", [
    ("SASL_PLAINTEXT", "PLAIN",
     "SASL PLAIN authentication failed: Authentication failed: Invalid username or password"),
    ("SASL_SSL", "SCRAM-SHA-512", "SASL SCRAM SHA512 authentication failed: Authentication failed during "
                                  "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"),
])
def test_wrong_password_is_a_sasl_authentication_error(broker, kafkajs, topic, listener, mechanism, message):
    secured = kafkajs.secured(broker.client_config("kafkajs", listener, mechanism=mechanism, password="wrong"))
    with pytest.raises(KafkajsError) as refused:
        secured.produce(broker.bootstrap_servers_for(listener), topic, numbered(1))
    assert refused.value.detail["name"] == "KafkaJSSASLAuthenticationError", refused.value.chain()
    assert refused.value.detail["message"] == message
    assert stored_values(broker, topic) == []


def test_expired_token_writes_nothing(broker, kafkajs, topic):
    log = BrokerLog(broker)
    token = broker.security.expired_token("alice")
    secured = kafkajs.secured(broker.client_config("kafkajs", "SASL_SSL", mechanism="OAUTHBEARER", token=token))
    with pytest.raises(KafkajsError) as refused:
        secured.produce(broker.bootstrap_servers_for("SASL_SSL"), topic, numbered(1))
    names = {detail["name"] for detail in refused.value.chain()}
    # a closed connection (or, where the broker answers the request first as Kafka does, its ILLEGAL_SASL_STATE)
    assert "KafkaJSConnectionClosedError" in names or "ILLEGAL_SASL_STATE" in refused.value.types(), \
        refused.value.chain()
    assert stored_values(broker, topic) == []
    # the broker saw the client go on as if authenticated (Kafka's message)
    log.wait_for("Unexpected Kafka request of type METADATA during SASL authentication.")


def test_signed_token_produces_and_consumes(jwks_broker, kafkajs, topic):
    secured = kafkajs.secured(jwks_broker.client_config("kafkajs", "SASL_SSL", mechanism="OAUTHBEARER"))
    bootstrap = jwks_broker.bootstrap_servers_for("SASL_SSL")
    sent = numbered(3, "signed")
    secured.produce(bootstrap, topic, sent)
    assert_same(sent, secured.consume(bootstrap, topic, len(sent)))


@pytest.mark.parametrize("refusal, reason", [
    ("expired", "The JWT is no longer valid"),
    ("wrong audience", "doesn't contain an acceptable identifier"),
])
def test_refused_signed_token_writes_nothing(jwks_broker, kafkajs, topic, refusal, reason):
    log = BrokerLog(jwks_broker)
    setup = jwks_broker.security
    token = setup.expired_token("alice") if refusal == "expired" else \
        setup.mint_token("alice", claims={"aud": "someone-else"})
    secured = kafkajs.secured(jwks_broker.client_config("kafkajs", "SASL_SSL", mechanism="OAUTHBEARER", token=token))
    with pytest.raises(KafkajsError):
        secured.produce(jwks_broker.bootstrap_servers_for("SASL_SSL"), topic, numbered(1))
    assert stored_values(jwks_broker, topic) == []
    log.wait_for(reason)  # Kafka logs why; the client only hears invalid_token


def test_long_lived_connection_reauthenticates(reauth_broker, kafkajs, topic):
    """A consumer that keeps fetching past the point where kafkajs re-authenticates: SaslHandshake and
    SaslAuthenticate again on the same connection (KIP-368), which the broker accepts - the connection is not
    closed as an expired session, and the consumer reads a record sent after it."""
    log = BrokerLog(reauth_broker)
    secured = kafkajs.secured(reauth_broker.client_config("kafkajs", "SASL_PLAINTEXT"))
    bootstrap = reauth_broker.bootstrap_servers_for("SASL_PLAINTEXT")
    secured.produce(bootstrap, topic, numbered(1, "before"))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        reading = pool.submit(secured.consume, bootstrap, topic, 2, timeout_s=WAIT_S)
        deadline = time.monotonic() + WAIT_S
        while not _reauthenticated(reauth_broker, "compat-kafkajs-c"):
            assert time.monotonic() < deadline and not reading.done(), "no re-authentication within the bound"
            time.sleep(0.2)  # polling the request log for the condition, not a wait for it
        secured.produce(bootstrap, topic, numbered(1, "after"))
        assert [record.value for record in reading.result()] == [b"before-0", b"after-0"]
    assert not log.containing("SASL session expired")


def _reauthenticated(broker, client_id: str) -> bool:
    """Whether a connection of that client sent a second SaslHandshake (the first is its authentication)."""
    handshakes = collections.Counter(entry.peer for entry in broker.requests(api="SaslHandshake")
                                     if entry.client_id == client_id)
    return any(count >= 2 for count in handshakes.values())
