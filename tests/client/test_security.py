"""TLS and SASL against a secured broker: SASL_SSL with SCRAM-SHA-256/512 and PLAIN, SASL_PLAINTEXT, TLS and mTLS,
configured with librdkafka's names (as kcat's -X) and with the Java client's (sasl.jaas.config, PEM trust and key
stores); and clear refusals: wrong password, a mechanism the listener lacks, an untrusted CA, the wrong protocol."""
from __future__ import annotations

import pytest

from compatbroker import EmbeddedBroker, SecuritySetup
from compatbroker.client import ClientConfig, KafkaClient, KafkaConnectionError, KafkaError

from .helpers import wait_for

LISTENERS = {"SASL_SSL": "SASL_SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SSL": "SSL", "MTLS": "SSL"}


@pytest.fixture(scope="module")
def setup():
    made = SecuritySetup(listeners=LISTENERS, mechanisms=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
                         client_auth={"MTLS": "required"})
    yield made
    made.cleanup()


@pytest.fixture(scope="module")
def secured(setup):
    with EmbeddedBroker(security=setup) as running:
        yield running


def client_for(secured, family: str, listener: str, **options) -> KafkaClient:
    return KafkaClient(ClientConfig(properties=secured.client_config(family, listener, **options)))


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("listener", ["SASL_SSL", "SASL_PLAINTEXT"])
def test_sasl_with_librdkafka_names(secured, listener, mechanism):
    with client_for(secured, "kcat", listener, user="alice", mechanism=mechanism) as client:
        assert client.metadata([]).cluster_id
        assert client.connection().config.sasl_mechanism == mechanism


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_sasl_ssl_with_java_names(secured, mechanism):
    with client_for(secured, "java", "SASL_SSL", user="bob", mechanism=mechanism) as client:
        assert "sasl.jaas.config" in client.config.properties
        assert client.metadata([]).brokers


def test_mtls_with_java_pem_keystore(secured):
    with client_for(secured, "java", "MTLS", user="alice") as client:
        assert client.config.ssl_certificate_location
        assert client.metadata([]).brokers


def test_mtls_without_a_client_certificate_is_refused(secured):
    with client_for(secured, "kcat", "MTLS", user="alice", certificate=False) as client:
        with pytest.raises(KafkaConnectionError):
            client.metadata([])


def test_wrong_password(secured):
    with client_for(secured, "kcat", "SASL_SSL", user="alice", password="wrong",
                    mechanism="SCRAM-SHA-256") as client:
        with pytest.raises(KafkaError) as caught:
            client.metadata([])
    assert caught.value.name == "SASL_AUTHENTICATION_FAILED"
    assert not isinstance(caught.value, KafkaConnectionError)


def test_mechanism_the_listener_lacks(setup):
    only_plain = SecuritySetup(listeners=("SASL_PLAINTEXT",), mechanisms=("PLAIN",))
    try:
        with EmbeddedBroker(security=only_plain) as running:
            properties = running.client_config("kcat", "SASL_PLAINTEXT", user="alice")
            properties["sasl.mechanisms"] = "SCRAM-SHA-256"
            with pytest.raises(KafkaError) as caught:
                KafkaClient(ClientConfig(properties=properties)).metadata([])
    finally:
        only_plain.cleanup()
    assert caught.value.name == "UNSUPPORTED_SASL_MECHANISM"
    assert "SCRAM-SHA-256" in caught.value.message and "PLAIN" in caught.value.message


def test_untrusted_broker_certificate(secured, setup):
    with client_for(secured, "kcat", "SSL", ca_file=setup.certificates.untrusted_ca_file) as client:
        with pytest.raises(KafkaConnectionError, match="TLS handshake") as caught:
            client.metadata([])
    assert "certificate" in caught.value.message


def test_plaintext_client_on_a_tls_listener_gets_a_hint(secured):
    bootstrap = secured.bootstrap_servers_for("SSL")
    with KafkaClient(ClientConfig(bootstrap=bootstrap, properties={"request.timeout.ms": "5000"})) as client:
        with pytest.raises(KafkaError) as caught:
            client.metadata([])
    assert isinstance(caught.value, KafkaConnectionError)
    assert "security.protocol=PLAINTEXT" in caught.value.message


def test_session_lifetime_is_honoured_by_reconnecting():
    short = SecuritySetup(listeners=("SASL_PLAINTEXT",), mechanisms=("SCRAM-SHA-256",),
                          settings={"connections.max.reauth.ms": "1000"})
    try:
        with EmbeddedBroker(security=short) as running:
            properties = running.client_config("kcat", "SASL_PLAINTEXT", user="alice", mechanism="SCRAM-SHA-256")
            with KafkaClient(ClientConfig(properties=properties)) as client:
                client.metadata([])
                first = client.connection()
                assert not first.expired
                wait_for(lambda: first.expired, "85% of the 1 s session lifetime")
                assert client.metadata([]).brokers                       # on a new, freshly authenticated one
                assert client.connection() is not first and not first.connected
    finally:
        short.cleanup()
