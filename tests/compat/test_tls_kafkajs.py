"""kafkajs over TLS: a listener with server authentication only (SSL) and one asking client certificates (MTLS,
`ssl.client.auth=required`). kafkajs takes Node's tls options (`ssl`: the CA, its certificate and key) and always
verifies the broker's certificate and host name (127.0.0.1 is in the certificate's subjectAltName).

What a client gets for a certificate the other side does not trust is Node's TLS error, which kafkajs wraps in
KafkaJSConnectionError (retriable: it retries, then gives up with KafkaJSNumberOfRetriesExceeded): its `code` is
Node's (SELF_SIGNED_CERT_IN_CHAIN when the broker's chain ends in a CA it does not know) or, when the broker refuses
the client's certificate, the TLS alert the broker sent (ERR_SSL_TLSV1_ALERT_UNKNOWN_CA, ..._CERTIFICATE_REQUIRED,
..._CERTIFICATE_EXPIRED; TLS 1.3 sends the alert after the client's Finished, so it comes with the first read).
"""
from __future__ import annotations

import pytest

from compatbroker.toolkit.security import SecuritySetup

from . import clients
from .clients.kafkajs_client import KafkajsError
from .records import assert_same, numbered
from .secured_clients import secured_broker, stored_values

pytestmark = pytest.mark.matrix(client="kafkajs", flow="tls")


@pytest.fixture(scope="module")
def broker():
    setup = SecuritySetup(listeners={"SSL": "SSL", "MTLS": "SSL"}, client_auth={"MTLS": "required"})
    with secured_broker(setup) as running:
        yield running


@pytest.fixture(scope="module")
def kafkajs():
    return clients.load_or_fail("kafkajs")


@pytest.mark.parametrize("listener", ["SSL", "MTLS"])
def test_produces_and_consumes(broker, kafkajs, topic, listener):
    secured = kafkajs.secured(broker.client_config("kafkajs", listener))
    bootstrap = broker.bootstrap_servers_for(listener)
    sent = numbered(5, listener)
    secured.produce(bootstrap, topic, sent)
    assert_same(sent, secured.consume(bootstrap, topic, len(sent)))
    assert stored_values(broker, topic) == [record.value for record in sent]


def test_untrusted_broker_certificate_is_refused(broker, kafkajs, topic):
    setup = broker.security
    secured = kafkajs.secured(broker.client_config("kafkajs", "SSL", ca_file=setup.certificates.untrusted_ca_file))
    with pytest.raises(KafkajsError) as refused:
        secured.produce(broker.bootstrap_servers_for("SSL"), topic, numbered(1))
    codes = {detail.get("code") for detail in refused.value.chain()}
    assert "SELF_SIGNED_CERT_IN_CHAIN" in codes, refused.value.chain()
    assert stored_values(broker, topic) == []


@pytest.mark.parametrize("certificate, alert", [
    (False, "CERTIFICATE_REQUIRED"),
    ("untrusted_client", "UNKNOWN_CA"),
    ("expired_client", "CERTIFICATE_EXPIRED"),
])
def test_mtls_refuses_a_client_without_a_trusted_certificate(broker, kafkajs, topic, certificate, alert):
    if certificate:
        certificate = getattr(broker.security.certificates, certificate)
    secured = kafkajs.secured(broker.client_config("kafkajs", "MTLS", certificate=certificate))
    with pytest.raises(KafkajsError) as refused:
        secured.produce(broker.bootstrap_servers_for("MTLS"), topic, numbered(1))
    codes = [detail.get("code") or "" for detail in refused.value.chain()]
    assert any(code.startswith("ERR_SSL_") and code.endswith(f"_ALERT_{alert}") for code in codes), \
        refused.value.chain()
    assert stored_values(broker, topic) == []
