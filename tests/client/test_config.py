"""ClientConfig: bootstrap lists, Java and librdkafka property names, JAAS lines, and clear errors for bad input."""
from __future__ import annotations

import pytest

from compatbroker.client import ClientConfig, ClientConfigError

PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="a\\"b;c";'
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required username=bob password=secret;"


def test_defaults_are_kafkas():
    config = ClientConfig()
    assert config.bootstrap_servers == [("localhost", 9092)]
    assert config.client_id == "compatbroker-cli"
    assert config.security_protocol == "PLAINTEXT"
    assert config.request_timeout_s == 30.0
    assert config.connect_timeout_s == 10.0
    assert config.ssl_check_hostname is True


def test_bootstrap_list_and_ipv6():
    config = ClientConfig(bootstrap="a:1, [::1]:9093,b:2")
    assert config.bootstrap_servers == [("a", 1), ("::1", 9093), ("b", 2)]


def test_bootstrap_from_properties_when_not_given():
    config = ClientConfig(properties={"bootstrap.servers": "h:9", "client.id": "me"})
    assert config.bootstrap_servers == [("h", 9)]
    assert config.client_id == "me"


@pytest.mark.parametrize("bootstrap", ["nohost", "h:notaport", "h:0", ":9092", ",", "h:70000"])
def test_bad_bootstrap_is_refused_clearly(bootstrap):
    with pytest.raises(ClientConfigError, match="bootstrap"):
        ClientConfig(bootstrap=bootstrap)


def test_unknown_names_are_all_listed():
    with pytest.raises(ClientConfigError) as caught:
        ClientConfig(properties={"acks": "all", "sasl.mechanism": "PLAIN", "bogus.name": "1"})
    assert "acks" in str(caught.value) and "bogus.name" in str(caught.value)


def test_extra_names_are_left_to_the_caller():
    config = ClientConfig(properties={"acks": "all"}, extra_names={"acks"})
    assert config.properties["acks"] == "all"


def test_librdkafka_sasl_names():
    config = ClientConfig(properties={"security.protocol": "sasl_ssl", "sasl.mechanisms": "scram-sha-512",
                                      "sasl.username": "u", "sasl.password": "p", "ssl.ca.location": "/ca.pem"})
    assert (config.security_protocol, config.sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-512")
    assert (config.sasl_username, config.sasl_password, config.ssl_ca_location) == ("u", "p", "/ca.pem")
    assert config.uses_tls and config.uses_sasl


def test_java_jaas_config_quoted_with_escapes():
    config = ClientConfig(properties={"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                      "sasl.jaas.config": PLAIN_JAAS})
    assert (config.sasl_username, config.sasl_password) == ("alice", 'a"b;c')


def test_java_jaas_config_bare_values_and_scram():
    config = ClientConfig(properties={"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
                                      "sasl.jaas.config": SCRAM_JAAS, "ssl.truststore.type": "PEM",
                                      "ssl.truststore.location": "/t.pem", "ssl.keystore.type": "PEM",
                                      "ssl.keystore.location": "/k.pem"})
    assert (config.sasl_username, config.sasl_password) == ("bob", "secret")
    assert config.ssl_ca_location == "/t.pem"
    assert config.ssl_certificate_location == config.ssl_key_location == "/k.pem"


def test_jaas_module_must_fit_the_mechanism():
    with pytest.raises(ClientConfigError, match="does not fit"):
        ClientConfig(properties={"sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": PLAIN_JAAS})
    with pytest.raises(ClientConfigError, match="not supported"):
        ClientConfig(properties={"sasl.jaas.config": "com.example.Login required;"})


@pytest.mark.parametrize("properties, match", [
    ({"security.protocol": "TLS"}, "security.protocol"),
    ({"sasl.mechanism": "GSSAPI"}, "sasl.mechanism"),
    ({"security.protocol": "SASL_PLAINTEXT"}, "credentials"),
    ({"request.timeout.ms": "0"}, "request.timeout.ms"),
    ({"request.timeout.ms": "soon"}, "request.timeout.ms"),
    ({"ssl.truststore.type": "JKS"}, "PEM"),
    ({"ssl.endpoint.identification.algorithm": "ldap"}, "https or empty"),
    ({"enable.ssl.certificate.verification": "maybe"}, "true or false"),
])
def test_bad_values_are_refused_clearly(properties, match):
    with pytest.raises(ClientConfigError, match=match):
        ClientConfig(properties=properties)


def test_values_may_be_ints_and_bools():
    config = ClientConfig(properties={"request.timeout.ms": 1500, "enable.ssl.certificate.verification": False,
                                      "ssl.endpoint.identification.algorithm": ""})
    assert config.request_timeout_s == 1.5
    assert config.ssl_verify is False and config.ssl_check_hostname is False
