"""The server TLS context of a listener (security.tls.build_server_context): PEM key stores as a file or as text,
encrypted keys, trust stores, client authentication, protocol versions and cipher suites, and Kafka's refusals."""
from __future__ import annotations

import dataclasses
import ssl

import pytest

from compatbroker.config import ConfigError
from compatbroker.security.settings import SslSettings
from compatbroker.security.tls import build_server_context, openssl_cipher_name
from compatbroker.toolkit.certificates import TestCertificates


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return TestCertificates.generate(tmp_path_factory.mktemp("certs"))


def _settings(**changes) -> SslSettings:
    base = SslSettings(keystore_type="PEM", keystore_location=None, keystore_certificate_chain=None,
                       keystore_key=None, key_password=None, keystore_password=None, truststore_type="PEM",
                       truststore_location=None, truststore_certificates=None, client_auth="none",
                       enabled_protocols=("TLSv1.2", "TLSv1.3"), protocol="TLSv1.3", cipher_suites=(),
                       principal_mapping_rules="DEFAULT")
    return dataclasses.replace(base, **changes)


def _encrypted_key_pem(certs, password: bytes) -> str:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(certs.broker.key_pem.encode(), password=None)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.BestAvailableEncryption(password)).decode()


def test_keystore_file_and_keystore_text_both_load(certs):
    by_file = build_server_context(_settings(keystore_location=certs.broker.keystore_file))
    by_text = build_server_context(_settings(keystore_certificate_chain=certs.broker.chain_pem,
                                             keystore_key=certs.broker.key_pem))
    for context in (by_file, by_text):
        assert context.verify_mode == ssl.CERT_NONE
        assert (context.minimum_version, context.maximum_version) == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)


def test_an_encrypted_key_needs_its_key_password(certs):
    key = _encrypted_key_pem(certs, b"s3cret")
    chain = certs.broker.chain_pem
    build_server_context(_settings(keystore_certificate_chain=chain, keystore_key=key, key_password="s3cret"))
    with pytest.raises(ConfigError, match="ssl.keystore.key: cannot load"):
        build_server_context(_settings(keystore_certificate_chain=chain, keystore_key=key, key_password="wrong"))
    with pytest.raises(ConfigError, match="ssl.keystore.key: cannot load"):
        build_server_context(_settings(keystore_certificate_chain=chain, keystore_key=key))


@pytest.mark.parametrize("changes, message", [
    ({"keystore_key": "KEY"}, "SSL private key is specified, but certificate chain is not specified."),
    ({"keystore_certificate_chain": "CHAIN"}, "SSL certificate chain is specified, but private key is not specified"),
    ({"keystore_key": "KEY", "keystore_certificate_chain": "CHAIN", "keystore_location": "/x"},
     "Both SSL key store location and separate private key are specified."),
    ({"keystore_location": "/x", "keystore_password": "p"},
     "SSL key store password cannot be specified with PEM format"),
    ({"keystore_location": "/x", "keystore_type": "JKS"}, "only PEM key stores are supported"),
    ({"keystore_location": "/no/such/file.pem"}, "ssl.keystore.location: cannot load"),
    ({}, "needs a key store"),
])
def test_keystore_mistakes_are_config_errors(changes, message):
    with pytest.raises(ConfigError, match=message):
        build_server_context(_settings(**changes))


@pytest.mark.parametrize("client_auth, mode", [("none", ssl.CERT_NONE), ("requested", ssl.CERT_OPTIONAL),
                                               ("required", ssl.CERT_REQUIRED)])
def test_client_auth(certs, client_auth, mode):
    context = build_server_context(_settings(keystore_location=certs.broker.keystore_file, client_auth=client_auth,
                                             truststore_location=certs.ca_file))
    assert context.verify_mode == mode
    if client_auth != "none":
        assert [ca["subject"] for ca in context.get_ca_certs()] == [((("commonName", "compatbroker test CA"),),)]


def test_trust_store_as_text(certs):
    context = build_server_context(_settings(keystore_location=certs.broker.keystore_file, client_auth="required",
                                             truststore_certificates=certs.ca.ca_pem))
    assert len(context.get_ca_certs()) == 1
    with pytest.raises(ConfigError, match="Both SSL trust store location and separate trust certificates"):
        build_server_context(_settings(keystore_location=certs.broker.keystore_file, client_auth="required",
                                       truststore_certificates=certs.ca.ca_pem, truststore_location=certs.ca_file))


def test_enabled_protocols_bound_the_versions(certs):
    context = build_server_context(_settings(keystore_location=certs.broker.keystore_file,
                                             enabled_protocols=("TLSv1.3",)))
    assert (context.minimum_version, context.maximum_version) == (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_3)
    with pytest.raises(ConfigError, match="ssl.enabled.protocols"):
        build_server_context(_settings(keystore_location=certs.broker.keystore_file, enabled_protocols=("SSLv3",)))


def test_cipher_suites_take_kafkas_iana_names(certs):
    assert openssl_cipher_name("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") == "ECDHE-RSA-AES128-GCM-SHA256"
    assert openssl_cipher_name("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256") == "ECDHE-ECDSA-CHACHA20-POLY1305"
    assert openssl_cipher_name("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256") == "ECDHE-RSA-AES128-SHA256"
    assert openssl_cipher_name("TLS_RSA_WITH_AES_256_GCM_SHA384") == "AES256-GCM-SHA384"
    names = {cipher["name"] for cipher in ssl.create_default_context().get_ciphers()}
    assert {openssl_cipher_name("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"),
            openssl_cipher_name("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256")} <= names
    assert openssl_cipher_name("ECDHE-RSA-AES256-GCM-SHA384") == "ECDHE-RSA-AES256-GCM-SHA384"
    context = build_server_context(_settings(keystore_location=certs.broker.keystore_file,
                                             cipher_suites=("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
                                                            "TLS_AES_128_GCM_SHA256")))
    tls12 = [cipher["name"] for cipher in context.get_ciphers() if cipher["protocol"] == "TLSv1.2"]
    assert tls12 == ["ECDHE-RSA-AES256-GCM-SHA384"]
    with pytest.raises(ConfigError, match="ssl.cipher.suites"):
        build_server_context(_settings(keystore_location=certs.broker.keystore_file, cipher_suites=("NOPE",)))


def test_bad_principal_mapping_rules_are_a_config_error(certs):
    with pytest.raises(ConfigError, match="ssl.principal.mapping.rules: Invalid rule: `DEFAUL`"):
        build_server_context(_settings(keystore_location=certs.broker.keystore_file,
                                       principal_mapping_rules="DEFAUL"))
