"""sarama 1.22 (Debian's package) with SASL: PLAIN and SCRAM-SHA-256 over SASL_PLAINTEXT, SCRAM-SHA-512 and
OAUTHBEARER over SASL_SSL, the token checked by Kafka's unsecured validator or, on a second broker, signed and
checked against a JWKS file. (sarama 1.22 predates KIP-368: it never re-authenticates, so that is not tested here.)

sarama's PLAIN sends SaslHandshake v0 and the raw token (no SaslAuthenticate) under its default protocol (0.8.2),
SaslHandshake v1 and SaslAuthenticate v0 from 1.0 on; SCRAM and OAUTHBEARER always use v1 + SaslAuthenticate v0.
sarama 1.22 ships no SCRAM implementation: the test program brings one (sarama/security.go, RFC 5802 over Go's
crypto), and its OAUTHBEARER token provider hands out the test's token.

Refusals as sarama's Broker.Open reports them: a wrong password is ErrSASLAuthenticationFailed ("kafka server: SASL
Authentication failed.") over SaslAuthenticate; after a raw v0 token Kafka just closes the connection, which sarama
reports as EOF. An expired token is refused as Kafka's OAuthBearerSaslServer refuses it - a challenge
{"status":"invalid_token"} with no error - which sarama 1.22 takes for success; its next request, sent while the
broker still waits for the end of the exchange, is refused ("Unexpected Kafka request of type METADATA during SASL
authentication.") and the connection closed, so its producer fails and nothing is written. A signed token that
expired or names another audience goes the same way, the broker logging why.
"""
from __future__ import annotations

import pytest

from compatbroker.toolkit.security import SecuritySetup

from . import clients
from .clients.base import ClientError
from .records import assert_same, numbered
from .secured_clients import BrokerLog, secured_broker, stored_values

pytestmark = pytest.mark.matrix(client="sarama", flow="sasl")
ISSUER = "https://issuer.compatbroker.test"
AUDIENCE = "compatbroker"
AUTHENTICATION_FAILED = "kafka server: SASL Authentication failed."


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
def sarama():
    return clients.load_or_fail("sarama")


RAW_TOKEN = {("SaslHandshake", 0)}  # the token follows as a bare frame
WRAPPED_TOKENS = {("SaslHandshake", 1), ("SaslAuthenticate", 0)}


@pytest.mark.parametrize("listener, mechanism, protocol, exchange", [
    ("SASL_PLAINTEXT", "PLAIN", None, RAW_TOKEN),
    ("SASL_PLAINTEXT", "PLAIN", "2.1.0", WRAPPED_TOKENS),
    ("SASL_SSL", "SCRAM-SHA-512", None, WRAPPED_TOKENS),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", None, WRAPPED_TOKENS),
    ("SASL_SSL", "OAUTHBEARER", None, WRAPPED_TOKENS),
])
def test_produces_and_consumes(broker, sarama, topic, listener, mechanism, protocol, exchange):
    secured = sarama.with_protocol(protocol).secured(broker.client_config("sarama", listener, mechanism=mechanism))
    bootstrap = broker.bootstrap_servers_for(listener)
    since = max((entry.seq for entry in broker.requests()), default=0)
    sent = numbered(5, mechanism)
    secured.produce(bootstrap, topic, sent)
    assert_same(sent, secured.consume(bootstrap, topic, len(sent)))
    assert stored_values(broker, topic) == [record.value for record in sent]
    sasl_requests = {(entry.api, entry.api_version) for entry in broker.requests(since)
                     if entry.api.startswith("Sasl") and entry.client_id == "sarama-compat"}
    assert sasl_requests == exchange


@pytest.mark.parametrize("listener, mechanism, protocol, error", [
    ("SASL_PLAINTEXT", "PLAIN", None, "EOF"),  # the raw v0 token: Kafka closes the connection
    ("SASL_PLAINTEXT", "PLAIN", "2.1.0", AUTHENTICATION_FAILED),
    ("SASL_SSL", "SCRAM-SHA-512", None, AUTHENTICATION_FAILED),
])
def test_wrong_password_is_refused(broker, sarama, topic, listener, mechanism, protocol, error):
    secured = sarama.with_protocol(protocol).secured(
        broker.client_config("sarama", listener, mechanism=mechanism, password="wrong"))
    bootstrap = broker.bootstrap_servers_for(listener)
    with pytest.raises(ClientError) as refused:
        secured.connect(bootstrap)
    assert str(refused.value).rstrip().endswith(f"sarama-compat: {error}"), refused.value
    with pytest.raises(ClientError):
        secured.produce(bootstrap, topic, numbered(1))
    assert stored_values(broker, topic) == []


def test_expired_token_writes_nothing(broker, sarama, topic):
    log = BrokerLog(broker)
    token = broker.security.expired_token("alice")
    secured = sarama.secured(broker.client_config("sarama", "SASL_SSL", mechanism="OAUTHBEARER", token=token))
    with pytest.raises(ClientError):
        secured.produce(broker.bootstrap_servers_for("SASL_SSL"), topic, numbered(1))
    assert stored_values(broker, topic) == []
    log.wait_for("Unexpected Kafka request of type METADATA during SASL authentication.")


def test_signed_token_produces_and_consumes(jwks_broker, sarama, topic):
    secured = sarama.secured(jwks_broker.client_config("sarama", "SASL_SSL", mechanism="OAUTHBEARER"))
    bootstrap = jwks_broker.bootstrap_servers_for("SASL_SSL")
    sent = numbered(3, "signed")
    secured.produce(bootstrap, topic, sent)
    assert_same(sent, secured.consume(bootstrap, topic, len(sent)))


@pytest.mark.parametrize("refusal, reason", [
    ("expired", "The JWT is no longer valid"),
    ("wrong audience", "doesn't contain an acceptable identifier"),
])
def test_refused_signed_token_writes_nothing(jwks_broker, sarama, topic, refusal, reason):
    log = BrokerLog(jwks_broker)
    setup = jwks_broker.security
    token = setup.expired_token("alice") if refusal == "expired" else \
        setup.mint_token("alice", claims={"aud": "someone-else"})
    secured = sarama.secured(jwks_broker.client_config("sarama", "SASL_SSL", mechanism="OAUTHBEARER", token=token))
    with pytest.raises(ClientError):
        secured.produce(jwks_broker.bootstrap_servers_for("SASL_SSL"), topic, numbered(1))
    assert stored_values(jwks_broker, topic) == []
    log.wait_for(reason)  # Kafka logs why; the client only hears invalid_token
