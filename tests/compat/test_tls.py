"""kafka-python, aiokafka, confluent-kafka and kcat over TLS: an SSL listener (server certificate only) and an mTLS
one (`ssl.client.auth=required`), PEM keystore and truststore from the toolkit's throwaway CA.

Each client produces and consumes on both, and is told the address of the listener it came through. Refusals, in
each client's own terms (what the application is told, then where the client states the cause):

- the client does not trust the broker's certificate (it trusts another CA): the client's TLS library refuses the
  handshake ("certificate verify failed");
- on the mTLS listener the client presents a certificate of a CA the broker does not trust, or an expired one: the
  broker refuses the handshake with a TLS alert (unknown_ca, certificate_expired) and logs one line.

kafka-python 3.0.12 retries a failed bootstrap until `bootstrap_timeout_ms` and then raises KafkaTimeoutError
("Unable to bootstrap"), the cause only in its log; aiokafka tries each bootstrap address once and raises
KafkaConnectionError, the cause in its log (for a refused client certificate only "Connection ... closed": asyncio's
TLS sees the alert as a closed connection); librdkafka (confluent-kafka, kcat) reports _SSL or _TRANSPORT with
OpenSSL's words through the error callback, kcat -L exits on "Failed to acquire metadata".
"""
from __future__ import annotations

import pytest

from compatbroker.toolkit.security import SecuritySetup

from .records import assert_same, numbered
from .secured_clients import BrokerLog, connect, secured_broker

LISTENERS = {"SSL": "SSL", "MTLS": "SSL"}
REFUSAL_TIMEOUT_S = 10.0  # a bound on a client's retries; the refusal itself takes milliseconds

# client -> case -> (what the application is told (or either of two), words its report of the cause contains)
EXPECTED_REFUSALS = {
    "kafka-python": {"untrusted broker": ("KafkaTimeoutError", "CERTIFICATE_VERIFY_FAILED"),
                     "untrusted client": ("KafkaTimeoutError", "TLSV1_ALERT_UNKNOWN_CA"),
                     "expired client": ("KafkaTimeoutError", "CERTIFICATE_EXPIRED")},
    "aiokafka": {"untrusted broker": ("KafkaConnectionError", "CERTIFICATE_VERIFY_FAILED"),
                 "untrusted client": ("KafkaConnectionError", "closed"),
                 "expired client": ("KafkaConnectionError", "closed")},
    # librdkafka calls a failed verification _SSL, or _TRANSPORT when it notices it after the handshake's send
    "confluent-kafka": {"untrusted broker": (("_SSL", "_TRANSPORT"), "certificate verify failed"),
                        "untrusted client": ("_TRANSPORT", "alert unknown ca"),
                        "expired client": ("_TRANSPORT", "certificate expired")},
    "kcat": {"untrusted broker": ("Failed to acquire metadata", "certificate verify failed"),
             "untrusted client": ("Failed to acquire metadata", "alert unknown ca"),
             "expired client": ("Failed to acquire metadata", "certificate expired")},
}


@pytest.fixture(scope="module")
def tls_broker():
    with secured_broker(SecuritySetup(listeners=LISTENERS, client_auth={"MTLS": "required"})) as broker:
        yield broker


@pytest.mark.parametrize("listener", ["SSL", "MTLS"])
def test_produce_and_consume(secured_client, tls_broker, topic, listener):
    client, bootstrap = connect(secured_client, tls_broker, listener)
    sent = numbered(50, listener)
    client.produce(bootstrap, topic, sent)
    assert_same(sent, client.consume(bootstrap, topic, len(sent)))
    # Metadata advertises the listener the client came through
    assert {f"{host}:{port}" for _, host, port in client.metadata(bootstrap, [topic]).brokers} == {bootstrap}


def _refusal_options(broker, case: str) -> tuple[str, dict]:
    certificates = broker.security.certificates
    if case == "untrusted broker":
        return "SSL", {"ca_file": certificates.untrusted_ca_file}
    if case == "untrusted client":
        return "MTLS", {"certificate": certificates.untrusted_client}
    return "MTLS", {"certificate": certificates.expired_client}


@pytest.mark.parametrize("case", ["untrusted broker", "untrusted client", "expired client"])
def test_refused_certificate(secured_client, tls_broker, case):
    listener, options = _refusal_options(tls_broker, case)
    client, bootstrap = connect(secured_client, tls_broker, listener, **options)
    log = BrokerLog(tls_broker)
    failure = client.connect_failure(bootstrap, timeout_s=REFUSAL_TIMEOUT_S)
    error, cause = EXPECTED_REFUSALS[client.name][case]
    assert failure.error.startswith(error if isinstance(error, tuple) else (error,)), failure
    assert cause.lower() in failure.detail.lower(), failure
    if case != "untrusted broker":  # the broker refused: one line per refused handshake, with OpenSSL's reason
        refused = log.wait_for("Failed authentication with 127.0.0.1")
        assert all("SSL handshake failed: CERTIFICATE_VERIFY_FAILED" in line for line in refused), refused
