"""Security settings: Kafka's names, defaults, listener prefixes and the refusals of what cannot be served."""
import pytest

from compatbroker.config import BrokerConfig, ConfigError
from compatbroker.security.settings import STANDARD_AUTHORIZER, parse_jaas_config

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice \\"quoted\\" secret";')


def _sasl(**extra):
    return BrokerConfig({"listeners": "PLAINTEXT://:9092,SASL_PLAINTEXT://:9093", **extra})


def test_defaults_are_kafkas():
    security = BrokerConfig({}).security
    assert not security.authorizer_enabled and security.super_users == frozenset()
    assert security.allow_everyone_if_no_acl_found is False
    plain = security.listener("PLAINTEXT")
    assert (plain.security_protocol, plain.ssl, plain.sasl_enabled_mechanisms) == ("PLAINTEXT", None, ())
    assert plain.connections_max_reauth_ms == 0 and plain.sasl_server_max_receive_size == 524288


def test_listener_prefix_wins_over_the_plain_name_and_jaas_is_per_mechanism():
    config = _sasl(**{"sasl.enabled.mechanisms": "SCRAM-SHA-256",
                      "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "plain,SCRAM-SHA-512",
                      "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
                      "listener.name.sasl_plaintext.connections.max.reauth.ms": "60000"})
    listener = config.security.listener("SASL_PLAINTEXT")
    assert listener.sasl_enabled_mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert listener.connections_max_reauth_ms == 60000
    jaas = listener.jaas["PLAIN"]
    assert jaas.login_module.endswith("PlainLoginModule") and jaas.control_flag == "required"
    assert jaas.options["user_alice"] == 'alice "quoted" secret'


@pytest.mark.parametrize("extra, message", [
    ({}, "GSSAPI (Kafka's default, Kerberos, is not served here) is not supported"),
    ({"sasl.enabled.mechanisms": "PLAIN"}, "PLAIN needs its users in listener.name.sasl_plaintext.plain"),
    ({"sasl.enabled.mechanisms": "DIGEST-MD5"}, "SASL mechanism DIGEST-MD5 is not supported"),
    ({"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": PLAIN_JAAS},
     "listener.name.<listener>.<mechanism>.sasl.jaas.config"),
    ({"sasl.enabled.mechanisms": "PLAIN",
      "listener.name.sasl_plaintext.plain.sasl.jaas.config": "PlainLoginModule maybe;"}, "control flag"),
    ({"sasl.enabled.mechanisms": "PLAIN",
      "listener.name.sasl_plaintext.plain.sasl.jaas.config": "a required x=\"1\"; b required;"},
     "exactly one login module"),
    ({"sasl.enabled.mechanisms": "SCRAM-SHA-512", "authorizer.class.name": "my.Authorizer"},
     "Class my.Authorizer could not be found"),
    ({"sasl.enabled.mechanisms": "SCRAM-SHA-512", "super.users": "alice"}, "not a principal of the form User:name"),
    ({"sasl.enabled.mechanisms": "SCRAM-SHA-512", "inter.broker.listener.name": "INTERNAL"},
     "inter.broker.listener.name must be a listener name defined in listeners"),
])
def test_what_cannot_be_served_is_refused_at_start(extra, message):
    with pytest.raises(ConfigError) as error:
        _sasl(**extra)
    assert message in str(error.value)


@pytest.mark.parametrize("extra, message", [
    ({}, "a TLS listener needs a key store"),
    ({"ssl.keystore.location": "/k.jks"}, "ssl.keystore.type=JKS is not supported"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/k.pem", "ssl.client.auth": "required"},
     "needs a trust store"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/k.pem", "ssl.client.auth": "sometimes"},
     "String must be one of: none, requested, required"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/k.pem", "ssl.enabled.protocols": "TLSv1.1"},
     "ssl.enabled.protocols may name TLSv1.2 and TLSv1.3"),
])
def test_tls_listeners_need_a_pem_key_store(extra, message):
    with pytest.raises(ConfigError) as error:
        BrokerConfig({"listeners": "SSL://:9093", **extra})
    assert message in str(error.value)


def test_tls_settings_per_listener_and_the_authorizer():
    config = BrokerConfig({
        "listeners": "SSL://:9093,INTERNAL://:9094", "listener.security.protocol.map": "SSL:SSL,INTERNAL:SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": "/k.pem",
        "listener.name.internal.ssl.client.auth": "required", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/ca.pem", "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:admin;User:CN=broker", "ssl.keymanager.algorithm": "SunX509"})
    assert config.security.listener("SSL").ssl.client_auth == "none"
    assert config.security.listener("INTERNAL").ssl.client_auth == "required"
    assert config.security.authorizer_enabled
    assert config.security.super_users == {"User:admin", "User:CN=broker"}


def test_jaas_options_may_be_bare_words():
    jaas = parse_jaas_config("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                             "unsecuredLoginStringClaim_sub=admin ;")
    assert jaas.options == {"unsecuredLoginStringClaim_sub": "admin"}


@pytest.mark.parametrize("address, written", [
    ("127.0.0.1", "127.0.0.1"), ("::1", "0:0:0:0:0:0:0:1"), ("fe80::1%eth0", "fe80:0:0:0:0:0:0:1"),
    ("2001:db8::ab:0", "2001:db8:0:0:0:0:ab:0"), ("::ffff:10.0.0.1", "10.0.0.1"), ("not-an-ip", "not-an-ip")])
def test_client_hosts_are_written_as_kafka_matches_acl_hosts(address, written):
    from compatbroker.security.session import host_address
    assert host_address(address) == written


def test_the_failed_authentication_delay_must_be_below_the_idle_limit():
    assert BrokerConfig({}).security.connection_failed_authentication_delay_ms == 100
    with pytest.raises(ConfigError) as error:
        BrokerConfig({"connection.failed.authentication.delay.ms": "1000", "connections.max.idle.ms": "1000"})
    assert "should always be less than connections.max.idle.ms=1000" in str(error.value)
