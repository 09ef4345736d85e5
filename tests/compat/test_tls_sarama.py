"""sarama 1.22 (Debian's package) over TLS: a listener with server authentication only (SSL) and one asking client
certificates (MTLS, `ssl.client.auth=required`), with sarama's default protocol (Kafka 0.8.2: Metadata v0, Produce
v0, Fetch v0 over the TLS connection) and with 2.1.0. sarama takes a Go tls.Config (Net.TLS): the CA as RootCAs,
the client certificate for mTLS; Go verifies the broker's certificate and its IP subjectAltName.

Refusals are Go's TLS errors, as sarama's Broker.Open reports them (its Client would only say it ran out of
brokers): "x509: certificate signed by unknown authority" for a broker certificate from another CA, and the alert
the broker sent for a client certificate it refuses ("remote error: tls: certificate required", "... unknown
certificate authority", "... expired certificate"). Nothing is written by a refused producer.
"""
from __future__ import annotations

import pytest

from compatbroker.toolkit.security import SecuritySetup

from . import clients
from .clients.base import ClientError
from .records import assert_same, numbered
from .secured_clients import secured_broker, stored_values

pytestmark = pytest.mark.matrix(client="sarama", flow="tls")


@pytest.fixture(scope="module")
def broker():
    setup = SecuritySetup(listeners={"SSL": "SSL", "MTLS": "SSL"}, client_auth={"MTLS": "required"})
    with secured_broker(setup) as running:
        yield running


@pytest.fixture(scope="module")
def sarama():
    return clients.load_or_fail("sarama")


@pytest.mark.parametrize("protocol", [None, "2.1.0"])
@pytest.mark.parametrize("listener", ["SSL", "MTLS"])
def test_produces_and_consumes(broker, sarama, topic, listener, protocol):
    secured = sarama.with_protocol(protocol).secured(broker.client_config("sarama", listener))
    bootstrap = broker.bootstrap_servers_for(listener)
    sent = numbered(5, listener)
    secured.produce(bootstrap, topic, sent)
    assert_same(sent, secured.consume(bootstrap, topic, len(sent)))
    assert stored_values(broker, topic) == [record.value for record in sent]


def refused(broker, sarama, topic, listener, **options) -> str:
    """sarama's error connecting with these options; checks that its producer writes nothing either."""
    secured = sarama.secured(broker.client_config("sarama", listener, **options))
    bootstrap = broker.bootstrap_servers_for(listener)
    with pytest.raises(ClientError) as connecting:
        secured.connect(bootstrap)
    with pytest.raises(ClientError):
        secured.produce(bootstrap, topic, numbered(1))
    assert stored_values(broker, topic) == []
    return str(connecting.value)


def test_untrusted_broker_certificate_is_refused(broker, sarama, topic):
    error = refused(broker, sarama, topic, "SSL", ca_file=broker.security.certificates.untrusted_ca_file)
    assert "x509: certificate signed by unknown authority" in error


@pytest.mark.parametrize("certificate, alert", [
    (False, "remote error: tls: certificate required"),
    ("untrusted_client", "remote error: tls: unknown certificate authority"),
    ("expired_client", "remote error: tls: expired certificate"),
])
def test_mtls_refuses_a_client_without_a_trusted_certificate(broker, sarama, topic, certificate, alert):
    if certificate:
        certificate = getattr(broker.security.certificates, certificate)
    assert alert in refused(broker, sarama, topic, "MTLS", certificate=certificate)
