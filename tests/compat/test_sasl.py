"""kafka-python, aiokafka, confluent-kafka and kcat with SASL: PLAIN over SASL_PLAINTEXT, SCRAM-SHA-256 and
SCRAM-SHA-512, OAUTHBEARER with Kafka's unsecured validator, and OAUTHBEARER with signed tokens checked against a
JWKS file (Kafka's OAuthBearerValidatorCallbackHandler, expected issuer and audience).

Each client produces and consumes with each mechanism. Refusals, in each client's own terms (what the application
is told, then where the client states the broker's message):

- a wrong password: SASL_AUTHENTICATION_FAILED with Kafka's message, "Authentication failed: Invalid username or
  password" (PLAIN) or "Authentication failed during authentication due to invalid credentials with SASL mechanism
  SCRAM-SHA-512" (SCRAM);
- an expired token: Kafka's OAUTHBEARER server answers the token with the challenge {"status":"invalid_token"}; a
  client that answers it (%x01) gets SASL_AUTHENTICATION_FAILED with that text as the message.

kafka-python 3.0.12 retries a failed bootstrap until `bootstrap_timeout_ms`, then raises KafkaTimeoutError with the
SaslAuthenticationFailedError in its log - on some attempts only, or none: it drops bytes read together with the
end of the connection, and the broker, as Kafka, closes right after the refusal, so attempts log "socket
disconnected" instead (the broker's log line, checked too, carries the message then). aiokafka raises
KafkaConnectionError, the SaslAuthenticationFailed in its log; librdkafka reports _AUTHENTICATION through the error
callback (kcat: in its log lines, then "Failed to acquire metadata"). aiokafka 0.14 does not read the invalid_token
challenge: it takes the answer for success and sends Metadata, which the broker, still authenticating, answers as
Kafka does (Metadata's error response: ILLEGAL_SASL_STATE for each topic asked, here none) before closing the
connection; aiokafka then finds no broker ("Unable to get cluster metadata over all known brokers").

Session lifetime (KIP-368, `connections.max.reauth.ms`): a client that re-authenticates (kafka-python, librdkafka
2.2+ in confluent-kafka) sends SaslHandshake and SaslAuthenticate again on its connection before the session ends
and goes on; the broker closes the connection of one that does not (aiokafka, kcat's librdkafka 2.0.2) on its next
request after the session ended. aiokafka reconnects; kcat, whose only connection that was, exits with "All broker
connections are down".

kcat leaves out OAUTHBEARER with signed tokens and the expired token: librdkafka's built-in token source makes its
own unsecured token (`enable.sasl.oauthbearer.unsecure.jwt`) and kcat cannot be handed one; it sends that unsecured
token in the unsecured case.
"""
from __future__ import annotations

import threading
import time

import pytest

from compatbroker.toolkit.security import SecuritySetup

from .records import assert_same, numbered
from .secured_clients import BrokerLog, connect, secured_broker

ISSUER = "https://issuer.compatbroker.test"
AUDIENCE = "compatbroker"
REFUSAL_TIMEOUT_S = 10.0  # a bound on a client's retries; the refusal itself takes milliseconds
WRONG_PASSWORD = {"PLAIN": "Authentication failed: Invalid username or password",
                  "SCRAM-SHA-512": "Authentication failed during authentication due to invalid credentials with SASL "
                                   "mechanism SCRAM-SHA-512"}
INVALID_TOKEN = '{"status":"invalid_token"}'
TOKEN_CLIENTS = ("kafka-python", "aiokafka", "confluent-kafka")  # the clients that send the token they are given
SESSION_LIFETIME_MS = 6000  # long enough for clients to re-authenticate in time on a loaded machine
# client -> what happens to a consumer's connection when its session ends (module docstring)
SESSION_END = {"kafka-python": "re-authenticated", "confluent-kafka": "re-authenticated", "aiokafka": "closed",
               "kcat": "closed"}
# client -> (what the application is told, how its report of the cause starts the broker's message)
EXPECTED_REFUSALS = {
    "kafka-python": ("KafkaTimeoutError", "SaslAuthenticationFailedError: "),
    "aiokafka": ("KafkaConnectionError", "SaslAuthenticationFailed: "),
    "confluent-kafka": ("_AUTHENTICATION", "SASL authentication error: "),
    "kcat": ("Failed to acquire metadata", "SASL authentication error: "),
}


@pytest.fixture(scope="module")
def sasl_broker():
    """Kafka's unsecured OAUTHBEARER validator; PLAIN users in the listeners' JAAS, SCRAM users in the store."""
    setup = SecuritySetup(listeners=("SASL_PLAINTEXT", "SASL_SSL"),
                          mechanisms=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"))
    with secured_broker(setup) as broker:
        yield broker


@pytest.fixture(scope="module")
def jwks_broker():
    setup = SecuritySetup(listeners=("SASL_SSL",), mechanisms=("OAUTHBEARER",), oauthbearer="jwks",
                          oauth_issuer=ISSUER, oauth_audience=AUDIENCE)
    with secured_broker(setup) as broker:
        yield broker


@pytest.fixture(scope="module")
def reauth_broker():
    setup = SecuritySetup(listeners=("SASL_PLAINTEXT",), mechanisms=("PLAIN",))
    with secured_broker(setup, {"connections.max.reauth.ms": SESSION_LIFETIME_MS}) as broker:
        yield broker


@pytest.mark.parametrize("listener, mechanism", [
    ("SASL_PLAINTEXT", "PLAIN"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
    ("SASL_SSL", "SCRAM-SHA-512"),
    ("SASL_SSL", "OAUTHBEARER"),
])
def test_produce_and_consume(secured_client, sasl_broker, topic, listener, mechanism):
    client, bootstrap = connect(secured_client, sasl_broker, listener, mechanism=mechanism)
    log = BrokerLog(sasl_broker)
    sent = numbered(50, mechanism)
    client.produce(bootstrap, topic, sent)
    assert_same(sent, client.consume(bootstrap, topic, len(sent)))
    if mechanism == "OAUTHBEARER":  # the principal is the token's `sub`
        assert log.wait_for(f"Successfully validated token with principal {sasl_broker.security.default_user}")


@pytest.mark.parametrize("secured_client", TOKEN_CLIENTS, indirect=True)
def test_produce_and_consume_with_signed_token(secured_client, jwks_broker, topic):
    client, bootstrap = connect(secured_client, jwks_broker, "SASL_SSL", mechanism="OAUTHBEARER")
    sent = numbered(50, "jwks")
    client.produce(bootstrap, topic, sent)
    assert_same(sent, client.consume(bootstrap, topic, len(sent)))


@pytest.mark.parametrize("listener, mechanism", [("SASL_PLAINTEXT", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-512")])
def test_wrong_password(secured_client, sasl_broker, listener, mechanism):
    client, bootstrap = connect(secured_client, sasl_broker, listener, mechanism=mechanism, password="not-it")
    log = BrokerLog(sasl_broker)
    failure = client.connect_failure(bootstrap, timeout_s=REFUSAL_TIMEOUT_S)
    assert_refusal(client.name, failure, WRONG_PASSWORD[mechanism])
    assert f"({WRONG_PASSWORD[mechanism]}" in log.wait_for("Failed authentication with 127.0.0.1")[0]


@pytest.mark.parametrize("validator", ["unsecured", "jwks"])
@pytest.mark.parametrize("secured_client", TOKEN_CLIENTS, indirect=True)
def test_expired_token(secured_client, sasl_broker, jwks_broker, validator):
    broker = sasl_broker if validator == "unsecured" else jwks_broker
    token = broker.security.expired_token(broker.security.default_user)
    client, bootstrap = connect(secured_client, broker, "SASL_SSL", mechanism="OAUTHBEARER", token=token)
    log = BrokerLog(broker)
    failure = client.connect_failure(bootstrap, timeout_s=REFUSAL_TIMEOUT_S)
    if client.name == "aiokafka":  # it never answers the challenge (module docstring)
        assert failure.error == "KafkaError" and "Unable to get cluster metadata" in failure.detail, failure
        assert log.wait_for("Unexpected Kafka request of type METADATA during SASL authentication")
    else:
        assert_refusal(client.name, failure, INVALID_TOKEN)
        assert log.wait_for("Failed authentication with 127.0.0.1")[0].endswith(f"({INVALID_TOKEN})")


def assert_refusal(client_name: str, failure, message: str) -> None:
    """The client told the application its EXPECTED_REFUSALS error and reported the broker's `message`."""
    error, cause = EXPECTED_REFUSALS[client_name]
    assert failure.error.startswith(error), failure
    if client_name == "kafka-python" and cause + message not in failure.detail:
        # each attempt lost the answer to the connection's close (module docstring); the broker's log has it
        assert "socket disconnected" in failure.detail, failure
        return
    assert cause + message in failure.detail, failure


def test_session_lifetime(secured_client, reauth_broker, topic):
    """A consumer waiting on an empty topic outlives its session; then a record comes (module docstring)."""
    client, bootstrap = connect(secured_client, reauth_broker, "SASL_PLAINTEXT")
    reauth_broker.create_topic(topic, 1)
    since = max((entry.seq for entry in reauth_broker.requests()), default=0)
    log = BrokerLog(reauth_broker)
    got: list = []
    failed: list = []

    def consume():
        try:
            got.extend(client.consume(bootstrap, topic, 1, timeout_s=60, fetch_wait_ms=500))
        except Exception as exc:  # noqa: BLE001 - asserted below
            failed.append(exc)

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    ended = wait_for_session_end(reauth_broker, log, topic, since)
    client.produce(bootstrap, topic, numbered(1, "after the session"))
    consumer.join(timeout=90)
    assert ended == SESSION_END[client.name]
    if client.name == "kcat":
        assert "All broker connections are down" in str(failed), failed
    else:
        assert not failed and [record.value for record in got] == [b"after the session-0"], (got, failed)


def wait_for_session_end(broker, log: BrokerLog, topic: str, since: int, timeout_s: float = 60.0) -> str:
    """How the first session of a connection fetching `topic` ended: "re-authenticated" (a SaslHandshake on that
    connection after its first Fetch) or "closed" (the broker closed it: session expired)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        requests = broker.requests(since=since)
        fetched_at: dict[str, int] = {}
        for entry in requests:
            if entry.api == "Fetch" and topic in entry.topics:
                fetched_at.setdefault(entry.peer, entry.seq)
        if any(entry.api == "SaslHandshake" and entry.seq > fetched_at.get(entry.peer, entry.seq)
               for entry in requests):
            return "re-authenticated"
        if any(peer in line for line in log.containing("the SASL session expired") for peer in fetched_at):
            return "closed"
        time.sleep(0.1)  # polling the broker's request log: no event to wait on
    raise AssertionError(f"no session of a connection fetching {topic} ended within {timeout_s} s")
