"""The server-side TLS context of an SSL or SASL_SSL listener, from its `ssl.*` settings (Kafka's
DefaultSslEngineFactory rules, PEM stores only).

- Key store: `ssl.keystore.type=PEM` with either `ssl.keystore.location` (a PEM file holding the private key and
  the certificate chain) or `ssl.keystore.certificate.chain` + `ssl.keystore.key` (PEM text); the key may be
  encrypted with `ssl.key.password`. A key store password is refused for PEM, as Kafka refuses it.
- Trust store (client certificates): `ssl.truststore.location` (PEM file of CA certificates) or
  `ssl.truststore.certificates` (PEM text); without one, the system's CA certificates.
- `ssl.client.auth`: none, requested (a certificate is asked for and verified when sent) or required.
- `ssl.enabled.protocols` (TLSv1.2, TLSv1.3) bound the versions; `ssl.cipher.suites` takes IANA names
  (`TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`, as Kafka does) or OpenSSL ones, and applies to TLS 1.2 (Python cannot
  restrict TLS 1.3 suites).
- `ssl.principal.mapping.rules` are parsed here too, so that a bad rule stops the start (security.principal_mapping).
Every mistake is a ConfigError naming the setting.
"""
from __future__ import annotations

import os
import ssl
import tempfile

from ..config import ConfigError

_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_TLS13_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                 "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def build_server_context(settings) -> ssl.SSLContext:
    """An SSLContext for the listener's SslSettings (ConfigError when they cannot make one)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_protocols(context, settings.enabled_protocols)
    _load_keystore(context, settings)
    client_auth = (settings.client_auth or "none").lower()
    if client_auth not in _CLIENT_AUTH:
        raise ConfigError(f"ssl.client.auth: {settings.client_auth!r} is not one of required, requested, none")
    context.verify_mode = _CLIENT_AUTH[client_auth]
    if client_auth != "none":
        _load_truststore(context, settings)
    if settings.cipher_suites:
        _set_ciphers(context, settings.cipher_suites)
    _check_mapping_rules(settings.principal_mapping_rules)
    return context


def _check_mapping_rules(rules: str | None) -> None:
    """Refuse bad `ssl.principal.mapping.rules` at start-up rather than at each client's handshake."""
    from .principal_mapping import mapper_for
    try:
        mapper_for(rules)
    except ValueError as exc:
        raise ConfigError(f"Invalid value {rules} for configuration ssl.principal.mapping.rules: {exc}") from None


def _set_protocols(context: ssl.SSLContext, protocols) -> None:
    unknown = [name for name in protocols if name not in _PROTOCOLS]
    versions = [_PROTOCOLS[name] for name in protocols if name in _PROTOCOLS]
    if unknown and not versions or not protocols:
        raise ConfigError(f"ssl.enabled.protocols: none of {', '.join(protocols) or '(empty)'} is supported "
                          f"(TLSv1.2, TLSv1.3)")
    context.minimum_version = min(versions)
    context.maximum_version = max(versions)


def _load_keystore(context: ssl.SSLContext, settings) -> None:
    if settings.keystore_key is not None or settings.keystore_certificate_chain is not None:
        _check_pem_keystore(settings)
        with _pem_file(settings.keystore_certificate_chain + "\n" + settings.keystore_key) as path:
            _load_chain(context, path, settings.key_password, "ssl.keystore.key")
        return
    if settings.keystore_location is None:
        raise ConfigError("ssl.keystore.location: an SSL listener needs a key store (or ssl.keystore.key and "
                          "ssl.keystore.certificate.chain)")
    if (settings.keystore_type or "").upper() != "PEM":
        raise ConfigError(f"ssl.keystore.type: only PEM key stores are supported, got {settings.keystore_type}")
    if settings.keystore_password is not None:
        raise ConfigError("SSL key store password cannot be specified with PEM format, only key password may be "
                          "specified")
    _load_chain(context, settings.keystore_location, settings.key_password, "ssl.keystore.location")


def _check_pem_keystore(settings) -> None:
    """Kafka's rules for a key given as PEM text."""
    if (settings.keystore_type or "").upper() != "PEM":
        raise ConfigError(f"SSL private key can be specified only for PEM, but key store type is "
                          f"{settings.keystore_type}.")
    if settings.keystore_key is None:
        raise ConfigError("SSL certificate chain is specified, but private key is not specified")
    if settings.keystore_certificate_chain is None:
        raise ConfigError("SSL private key is specified, but certificate chain is not specified.")
    if settings.keystore_location is not None:
        raise ConfigError("Both SSL key store location and separate private key are specified.")
    if settings.keystore_password is not None:
        raise ConfigError("SSL key store password cannot be specified with PEM format, only key password may be "
                          "specified.")


def _load_chain(context: ssl.SSLContext, path: str, key_password: str | None, setting: str) -> None:
    try:
        context.load_cert_chain(path, password=key_password if key_password is not None else _no_password)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{setting}: cannot load the PEM key and certificate chain: {_reason(exc)}") from None


def _no_password() -> str:
    raise ssl.SSLError("the private key is encrypted and ssl.key.password is not set")


def _load_truststore(context: ssl.SSLContext, settings) -> None:
    if settings.truststore_certificates is not None and settings.truststore_location is not None:
        raise ConfigError("Both SSL trust store location and separate trust certificates are specified.")
    store = settings.truststore_location or settings.truststore_certificates
    if store is None:
        context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        return
    if (settings.truststore_type or "").upper() != "PEM":
        raise ConfigError(f"ssl.truststore.type: only PEM trust stores are supported, got "
                          f"{settings.truststore_type}")
    try:
        if settings.truststore_location is not None:
            context.load_verify_locations(cafile=settings.truststore_location)
        else:
            context.load_verify_locations(cadata=settings.truststore_certificates)
    except (OSError, ssl.SSLError, ValueError) as exc:
        setting = "ssl.truststore.location" if settings.truststore_location else "ssl.truststore.certificates"
        raise ConfigError(f"{setting}: cannot load the PEM trust store: {_reason(exc)}") from None


def _set_ciphers(context: ssl.SSLContext, suites) -> None:
    names = [openssl_cipher_name(suite) for suite in suites if suite not in _TLS13_SUITES]
    if not names:
        return
    try:
        context.set_ciphers(":".join(names))
    except ssl.SSLError:
        raise ConfigError(f"ssl.cipher.suites: none of {', '.join(suites)} is available") from None


def openssl_cipher_name(suite: str) -> str:
    """OpenSSL's name of a TLS 1.2 suite given by its IANA name (other names pass unchanged):
    TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 -> ECDHE-RSA-AES128-GCM-SHA256, TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256 ->
    ECDHE-RSA-AES128-SHA256, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256 -> ECDHE-ECDSA-CHACHA20-POLY1305."""
    if not suite.startswith("TLS_") or "_WITH_" not in suite:
        return suite
    exchange, cipher = suite[4:].split("_WITH_", 1)
    cipher = (cipher.replace("CHACHA20_POLY1305_SHA256", "CHACHA20_POLY1305").replace("_CBC", "")
              .replace("AES_128", "AES128").replace("AES_256", "AES256").replace("_", "-"))
    exchange = exchange.replace("_", "-")
    if exchange == "RSA":  # plain RSA key exchange has no prefix in OpenSSL's names
        return cipher
    return f"{exchange}-{cipher}"


class _pem_file:
    """PEM text in a private temporary file for the length of a `with` (ssl loads key pairs only from files)."""

    def __init__(self, text: str):
        self._text = text
        self._path = ""

    def __enter__(self) -> str:
        descriptor, self._path = tempfile.mkstemp(suffix=".pem")
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(self._text)
        return self._path

    def __exit__(self, *exc_info) -> None:
        os.unlink(self._path)


def _reason(exc: Exception) -> str:
    return getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)
