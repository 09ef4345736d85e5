"""The security toolkit without a running broker: certificates that real TLS stacks accept (handshakes between
two in-process `ssl` contexts), OAUTHBEARER tokens the broker's validators accept, the broker settings a
SecuritySetup gives (parsed by the broker's own configuration), and each client family's configuration."""
from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import stat
import threading
import time

import pytest

from compatbroker.config import BrokerConfig
from compatbroker.security.settings import parse_jaas_config
from compatbroker.toolkit.certificates import TestCertificates
from compatbroker.toolkit.security import FAMILIES, STANDARD_AUTHORIZER, SecuritySetup
from compatbroker.toolkit.tokens import JwksIssuer, token_claims, unsecured_token

HANDSHAKE_TIMEOUT_S = 30


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return TestCertificates.generate(tmp_path_factory.mktemp("certs"), clients=["alice"])


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    return SecuritySetup(listeners={"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "MTLS": "SSL",
                                    "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL"},
                         client_auth={"mtls": "required"},
                         users={"admin": "admin-secret", "alice": 'a"quote\\and backslash'},
                         directory=tmp_path_factory.mktemp("security"))


def handshake(server_context: ssl.SSLContext, client_context: ssl.SSLContext, server_hostname: str):
    """Run a TLS handshake over a socket pair: (what the server saw of the client certificate or its error,
    the client's error or None)."""
    server_sock, client_sock = socket.socketpair()
    server_sock.settimeout(HANDSHAKE_TIMEOUT_S)
    client_sock.settimeout(HANDSHAKE_TIMEOUT_S)
    seen = {}

    def serve():
        try:
            with server_context.wrap_socket(server_sock, server_side=True) as tls:
                seen["peer"] = tls.getpeercert() or {}  # {}: no client certificate
                tls.recv(1)  # until the client closes: the client's own checks run to the end
        except (ssl.SSLError, OSError) as exc:
            seen["error"] = exc

    thread = threading.Thread(target=serve)
    thread.start()
    client_error = None
    try:
        with client_context.wrap_socket(client_sock, server_hostname=server_hostname) as tls:
            tls.sendall(b"x")
    except (ssl.SSLError, OSError) as exc:
        client_error = exc
    finally:
        client_sock.close()
    thread.join(HANDSHAKE_TIMEOUT_S)
    assert not thread.is_alive()
    return seen.get("peer", seen.get("error")), client_error


def server_context(certs, *, require_client_certificate: bool) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs.broker.keystore_file)
    if require_client_certificate:
        context.load_verify_locations(certs.ca_file)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def client_context(ca_file: str, certificate=None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca_file)
    if certificate is not None:
        context.load_cert_chain(certificate.chain_file, certificate.key_file)
    return context


# --- certificates ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "::1"])
def test_clients_verifying_host_names_accept_the_broker_certificate_on_every_loopback_name(certs, host):
    peer, client_error = handshake(server_context(certs, require_client_certificate=False),
                                   client_context(certs.ca_file), host)
    assert client_error is None
    assert peer == {}  # no client certificate asked for


def test_mtls_presents_the_client_certificate_whose_subject_is_the_principal(certs):
    alice = certs.client("alice")
    peer, client_error = handshake(server_context(certs, require_client_certificate=True),
                                   client_context(certs.ca_file, alice), "localhost")
    assert client_error is None
    assert peer["subject"] == ((("commonName", "alice"),),)
    assert (alice.subject, alice.principal) == ("CN=alice", "User:CN=alice")


@pytest.mark.parametrize("which, reason", [("expired_client", "certificate has expired"),
                                           ("untrusted_client", "self-signed certificate in certificate chain")])
def test_a_broker_requiring_client_certificates_refuses_expired_and_untrusted_ones(certs, which, reason):
    certificate = getattr(certs, which)
    server_result, _ = handshake(server_context(certs, require_client_certificate=True),
                                 client_context(certs.ca_file, certificate), "localhost")
    assert isinstance(server_result, ssl.SSLError)
    assert "certificate verify failed" in str(server_result) and reason in str(server_result)


def test_a_client_trusting_another_ca_refuses_the_broker_certificate(certs):
    _, client_error = handshake(server_context(certs, require_client_certificate=False),
                                client_context(certs.untrusted_ca_file), "localhost")
    assert isinstance(client_error, ssl.SSLCertVerificationError)


def test_the_pem_files_have_kafkas_layout_and_keys_are_private(certs):
    keystore = open(certs.broker.keystore_file).read()
    assert keystore.startswith("-----BEGIN PRIVATE KEY-----")  # unencrypted PKCS#8, as Kafka's PEM keystore reads
    assert keystore.count("-----BEGIN CERTIFICATE-----") == 2  # the certificate, then the CA
    assert open(certs.broker.chain_file).read().startswith(certs.broker.cert_pem)
    for path in (certs.broker.key_file, certs.broker.keystore_file, certs.client("alice").key_file):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert certs.expired_client.not_after.timestamp() < time.time()
    assert certs.client("alice") is certs.client("alice")  # issued once


# --- tokens ---------------------------------------------------------------------------------------------------------

def test_unsecured_tokens_have_kafkas_shape():
    token = unsecured_token("alice", 60, scope=["read", "write"], now=1000)
    header, payload, signature = token.split(".")
    assert json.loads(base64.urlsafe_b64decode(header + "==")) == {"alg": "none"}
    assert signature == ""
    assert token_claims(token) == {"sub": "alice", "iat": 1000, "exp": 1060, "scope": ["read", "write"]}


def test_jwks_tokens_are_rs256_signed_by_the_published_key(tmp_path):
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    issuer = JwksIssuer(tmp_path, issuer="https://issuer.test", audience="kafka")
    token = issuer.mint_token("alice", 300, scope="produce")
    [jwk] = json.load(open(issuer.jwks_file))["keys"]
    header_text, payload_text, signature_text = token.split(".")
    header = json.loads(base64.urlsafe_b64decode(header_text + "=="))
    assert header == {"alg": "RS256", "typ": "JWT", "kid": jwk["kid"]}
    numbers = rsa.RSAPublicNumbers(_b64_int(jwk["e"]), _b64_int(jwk["n"]))
    numbers.public_key().verify(base64.urlsafe_b64decode(signature_text + "=="),
                                f"{header_text}.{payload_text}".encode(), padding.PKCS1v15(), hashes.SHA256())
    claims = token_claims(token)
    assert (claims["sub"], claims["iss"], claims["aud"], claims["scope"]) == ("alice", "https://issuer.test",
                                                                              "kafka", "produce")
    assert claims["exp"] - claims["iat"] == 300
    assert token_claims(issuer.expired_token("alice"))["exp"] < time.time()
    assert issuer.jwks_url == "file://" + str(tmp_path / "jwks.json")


def _b64_int(text: str) -> int:
    return int.from_bytes(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)), "big")


@pytest.mark.parametrize("mode", ["unsecured", "jwks"])
def test_the_brokers_oauthbearer_validator_takes_minted_tokens_and_refuses_expired_ones(tmp_path, mode):
    from compatbroker.security.sasl import new_sasl_server

    setup = SecuritySetup(listeners=["SASL_PLAINTEXT"], mechanisms=["OAUTHBEARER"], oauthbearer=mode,
                          oauth_issuer="https://issuer.test", oauth_audience="kafka", directory=tmp_path)
    listener = broker_config(setup).security.listener("SASL_PLAINTEXT")

    def authenticate(token: str):
        server = new_sasl_server("OAUTHBEARER", listener, None)
        challenge = server.evaluate(f"n,,\x01auth=Bearer {token}\x01\x01".encode())
        return server, challenge

    server, challenge = authenticate(setup.mint_token("alice"))
    assert challenge == b"" and server.complete and str(server.principal) == "User:alice"
    server, challenge = authenticate(setup.expired_token("alice"))
    assert not server.complete and json.loads(challenge)["status"] == "invalid_token"


# --- broker settings ------------------------------------------------------------------------------------------------

def broker_config(setup: SecuritySetup) -> BrokerConfig:
    return BrokerConfig({**setup.broker_settings(), "listeners": setup.listeners_setting(),
                         "log.dirs": os.path.join(setup.directory, "data")})


def test_the_broker_takes_the_settings_listener_by_listener(setup):
    security = broker_config(setup).security
    assert {name: listener.security_protocol for name, listener in security.listeners.items()} == {
        "PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "MTLS": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT",
        "SASL_SSL": "SASL_SSL"}
    assert security.listener("MTLS").ssl.client_auth == "required"
    assert security.listener("SSL").ssl.client_auth == "none"
    assert security.listener("SSL").ssl.keystore_location == setup.certificates.broker.keystore_file
    assert security.listener("SASL_SSL").sasl_enabled_mechanisms == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512",
                                                                     "OAUTHBEARER")
    # PLAIN users, passwords with quotes and backslashes included, as the broker reads them back
    assert security.listener("SASL_SSL").jaas["PLAIN"].options == {
        "user_admin": "admin-secret", "user_alice": 'a"quote\\and backslash'}
    assert not security.authorizer_enabled


def test_acls_turn_on_kafkas_standard_authorizer_with_super_users(tmp_path):
    setup = SecuritySetup(listeners=["SASL_PLAINTEXT"], mechanisms=["PLAIN"], acls=True,
                          super_users=["admin", "User:CN=ops"], directory=tmp_path)
    security = broker_config(setup).security
    assert security.authorizer_class_name == STANDARD_AUTHORIZER
    assert security.super_users == frozenset({"User:admin", "User:CN=ops"})
    assert security.allow_everyone_if_no_acl_found is False
    assert not os.path.exists(os.path.join(tmp_path, "certs"))  # no TLS listener: no certificates made


def test_jwks_validation_points_the_broker_at_the_generated_key_set(tmp_path):
    setup = SecuritySetup(listeners=["SASL_SSL"], mechanisms=["OAUTHBEARER"], oauthbearer="jwks",
                          oauth_audience="kafka", directory=tmp_path)
    listener = broker_config(setup).security.listener("SASL_SSL")
    assert listener.server_callback_handlers["OAUTHBEARER"] == \
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
    assert listener.oauthbearer.jwks_endpoint_url == setup.jwks.jwks_url
    assert listener.oauthbearer.expected_audience == ("kafka",)


def test_scram_users_are_every_user_for_every_enabled_scram_mechanism(tmp_path):
    setup = SecuritySetup(listeners=["SASL_SSL"], mechanisms=["PLAIN", "SCRAM-SHA-512"],
                          users={"alice": "a", "bob": "b"}, directory=tmp_path)
    assert setup.scram_users() == [("alice", "SCRAM-SHA-512", "a"), ("bob", "SCRAM-SHA-512", "b")]
    assert SecuritySetup(listeners=["SSL"], directory=tmp_path).scram_users() == []


@pytest.mark.parametrize("arguments, message", [
    ({"listeners": ["TLS"]}, "unknown security protocol"),
    ({"listeners": {"X": "KERBEROS"}}, "unknown security protocol"),
    ({"mechanisms": ["GSSAPI"]}, "unknown SASL mechanism"),
    ({"client_auth": "always"}, "client_auth is none, requested or required"),
    ({"oauthbearer": "magic"}, "oauthbearer is one of"),
    ({"listeners": []}, "at least one listener"),
])
def test_a_setup_kafka_would_refuse_is_refused_with_a_reason(tmp_path, arguments, message):
    with pytest.raises(ValueError, match=message):
        SecuritySetup(directory=tmp_path, **arguments)


def test_a_temporary_directory_goes_with_cleanup():
    setup = SecuritySetup(listeners=["SSL"])
    directory = setup.directory
    assert os.path.exists(setup.ca_file)
    setup.cleanup()
    assert not os.path.exists(directory)


# --- client configurations ------------------------------------------------------------------------------------------

def test_kafka_python_gets_files_for_tls_and_a_token_provider_for_oauthbearer(setup):
    mtls = setup.client_config("kafka-python", "MTLS", bootstrap="127.0.0.1:1", user="alice")
    alice = setup.certificates.client("alice")
    assert mtls == {"security_protocol": "SSL", "bootstrap_servers": "127.0.0.1:1",
                    "ssl_cafile": setup.ca_file, "ssl_check_hostname": True,
                    "ssl_certfile": alice.chain_file, "ssl_keyfile": alice.key_file}
    scram = setup.client_config("kafka-python", "SASL_SSL", user="admin", mechanism="SCRAM-SHA-512")
    assert (scram["security_protocol"], scram["sasl_mechanism"], scram["sasl_plain_username"],
            scram["sasl_plain_password"], "ssl_certfile" in scram) == ("SASL_SSL", "SCRAM-SHA-512", "admin",
                                                                     "admin-secret", False)
    oauth = setup.client_config("kafka-python", "SASL_PLAINTEXT", user="alice", mechanism="OAUTHBEARER")
    assert token_claims(oauth["sasl_oauth_token_provider"].token())["sub"] == "alice"


def test_aiokafka_gets_a_verifying_ssl_context_and_an_async_token_provider(setup):
    import asyncio

    config = setup.client_config("aiokafka", "MTLS", user="alice")
    context = config["ssl_context"]
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    peer, client_error = handshake(server_context(setup.certificates, require_client_certificate=True), context,
                                   "127.0.0.1")
    assert client_error is None and peer["subject"] == ((("commonName", "alice"),),)
    oauth = setup.client_config("aiokafka", "SASL_SSL", mechanism="OAUTHBEARER", token="given.token.")
    assert asyncio.run(oauth["sasl_oauth_token_provider"].token()) == "given.token."


def test_librdkafka_families_get_its_property_names(setup):
    config = setup.client_config("confluent-kafka", "SASL_SSL", bootstrap="h:1", user="alice", password="wrong")
    assert config == {"security.protocol": "sasl_ssl", "bootstrap.servers": "h:1", "ssl.ca.location": setup.ca_file,
                      "sasl.mechanisms": "PLAIN", "sasl.username": "alice", "sasl.password": "wrong"}
    token = setup.mint_token("alice", 120)
    oauth = setup.client_config("confluent-kafka", "SASL_SSL", mechanism="OAUTHBEARER", token=token)
    assert oauth["oauth_cb"]("ignored") == (token, float(token_claims(token)["exp"]))
    kcat = setup.client_config("kcat", "SASL_PLAINTEXT", user="bob", mechanism="OAUTHBEARER")
    assert (kcat["enable.sasl.oauthbearer.unsecure.jwt"], kcat["sasl.oauthbearer.config"]) == ("true",
                                                                                               "principal=bob")
    mtls = setup.client_config("kcat", "MTLS", certificate=setup.certificates.expired_client)
    assert mtls["ssl.certificate.location"] == setup.certificates.expired_client.chain_file
    assert all(isinstance(value, str) for value in mtls.values())


def test_kcat_cannot_send_jwks_tokens(tmp_path):
    setup = SecuritySetup(listeners=["SASL_SSL"], mechanisms=["OAUTHBEARER"], oauthbearer="jwks",
                          directory=tmp_path)
    with pytest.raises(ValueError, match="kcat cannot send a given OAUTHBEARER token"):
        setup.client_config("kcat", "SASL_SSL")


def test_kafkajs_gets_json_with_pem_texts(setup):
    config = setup.client_config("kafkajs", "MTLS", bootstrap="a:1,b:2", user="alice",
                                 ca_file=setup.certificates.untrusted_ca_file)
    alice = setup.certificates.client("alice")
    assert config == {"brokers": ["a:1", "b:2"],
                      "ssl": {"ca": [open(setup.certificates.untrusted_ca_file).read()], "rejectUnauthorized": True,
                              "cert": alice.chain_pem, "key": alice.key_pem}}
    sasl = setup.client_config("kafkajs", "SASL_PLAINTEXT", mechanism="SCRAM-SHA-256", user="admin")
    assert sasl == {"sasl": {"mechanism": "scram-sha-256", "username": "admin", "password": "admin-secret"}}
    oauth = setup.client_config("kafkajs", "SASL_PLAINTEXT", mechanism="OAUTHBEARER", token="t.t.")
    assert oauth["sasl"] == {"mechanism": "oauthbearer", "oauthBearerToken": "t.t."}
    json.dumps([config, sasl, oauth])


def test_sarama_gets_the_json_main_go_reads(setup):
    config = setup.client_config("sarama", "SASL_SSL", bootstrap="h:1", mechanism="SCRAM-SHA-512", user="admin")
    assert config == {"bootstrap": "h:1", "security": {
        "tls": {"enable": True, "ca_file": setup.ca_file, "cert_file": "", "key_file": "", "server_name": ""},
        "sasl": {"enable": True, "mechanism": "SCRAM-SHA-512", "user": "admin", "password": "admin-secret",
                 "token": ""}}}
    assert setup.client_config("sarama", "PLAINTEXT") == {"security": {}}


def test_java_properties_carry_pem_stores_and_a_jaas_config_kafka_can_parse(setup):
    mtls = setup.client_config("java", "MTLS", user="alice")
    assert mtls == {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                    "ssl.truststore.location": setup.ca_file, "ssl.keystore.type": "PEM",
                    "ssl.keystore.location": setup.certificates.client("alice").keystore_file}
    plain = setup.client_config("java", "SASL_SSL", user="alice")
    jaas = parse_jaas_config(plain["sasl.jaas.config"])
    assert (jaas.login_module, jaas.options) == ("org.apache.kafka.common.security.plain.PlainLoginModule",
                                                 {"username": "alice", "password": 'a"quote\\and backslash'})
    oauth = setup.client_config("java", "SASL_SSL", user="bob", mechanism="OAUTHBEARER")
    assert parse_jaas_config(oauth["sasl.jaas.config"]).options["unsecuredLoginStringClaim_sub"] == "bob"


def test_java_reads_a_jwks_token_from_a_file(tmp_path):
    setup = SecuritySetup(listeners=["SASL_SSL"], mechanisms=["OAUTHBEARER"], oauthbearer="jwks",
                          directory=tmp_path)
    config = setup.client_config("java", "SASL_SSL", user="alice")
    assert config["sasl.login.callback.handler.class"] == \
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
    token = open(config["sasl.oauthbearer.token.endpoint.url"].removeprefix("file://")).read()
    assert token_claims(token)["sub"] == "alice"


@pytest.mark.parametrize("family", FAMILIES)
def test_plaintext_needs_nothing_but_the_protocol_and_address(setup, family):
    config = setup.client_config(family, "PLAINTEXT", bootstrap="h:1")
    assert not any("ssl" in key or "sasl" in key for key in config)
    assert "h:1" in json.dumps(config, default=str)


@pytest.mark.parametrize("call, message", [
    (lambda s: s.client_config("librdkafka", "SSL"), "unknown client family"),
    (lambda s: s.client_config("java", "SASL_SSL_2"), "no listener"),
    (lambda s: s.client_config("java", "SASL_SSL", user="carol"), "no user 'carol'"),
    (lambda s: s.client_config("java", "SASL_SSL", mechanism="GSSAPI"), "not enabled"),
])
def test_a_configuration_that_cannot_work_is_refused(setup, call, message):
    with pytest.raises(ValueError, match=message):
        call(setup)


def test_client_certificates_never_share_files(certs):
    names = [certs.client(cn) for cn in ("a b", "a_b", "expired", "untrusted")]
    names += [certs.expired_client, certs.untrusted_client]
    assert len({certificate.cert_file for certificate in names}) == len(names)
    assert [certificate.subject for certificate in names] == ["CN=a b", "CN=a_b", "CN=expired", "CN=untrusted",
                                                              "CN=expired", "CN=untrusted"]
