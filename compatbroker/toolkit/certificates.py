"""Throwaway certificates for tests: a CA, a broker certificate and client certificates, as PEM files.

    certs = TestCertificates.generate(directory, clients=["alice"])
    certs.ca_file                 # the CA clients trust (ssl.truststore.location, ssl.ca.location, ssl_cafile)
    certs.broker.keystore_file    # key + chain in one file: the broker's ssl.keystore.location (ssl.keystore.type=PEM)
    certs.client("alice")         # a client certificate, subject CN=alice (mTLS principal User:CN=alice)
    certs.expired_client          # CN=expired, issued by the CA, expired yesterday
    certs.untrusted_client        # CN=untrusted, issued by another CA the broker does not trust
    certs.untrusted_ca_file       # that other CA: a client trusting only it rejects the broker's certificate

Every certificate is written as `<name>.pem` (the certificate), `<name>.key` (its private key, unencrypted PKCS#8,
mode 0600: what Kafka's PEM keystore, librdkafka, Go and Node read), `<name>-chain.pem` (certificate then CA) and
`<name>-keystore.pem` (key then chain: Kafka's `ssl.keystore.location` with `ssl.keystore.type=PEM`).

The broker certificate names localhost, 127.0.0.1 and ::1 in its subjectAltName, so that clients verifying host
names accept it whichever loopback address they dial. Keys are RSA 2048 (every client of the matrix takes them).
`cryptography` is imported here only, when certificates are generated.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
import re
from dataclasses import dataclass, field

DEFAULT_HOSTS = ("localhost", "127.0.0.1", "::1")
CA_VALID_DAYS = 30
LEAF_VALID_DAYS = 7
RSA_KEY_BITS = 2048
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class IssuedCertificate:
    """One certificate and its key on disk. `subject` is its RFC 4514 DN ("CN=alice"), which Kafka's DEFAULT
    `ssl.principal.mapping.rules` turn into the principal `User:CN=alice`."""

    name: str
    subject: str
    cert_file: str
    key_file: str
    chain_file: str
    keystore_file: str
    ca_file: str
    not_after: datetime.datetime

    @property
    def principal(self) -> str:
        """The mTLS principal Kafka's DEFAULT mapping rule gives this certificate."""
        return f"User:{self.subject}"

    @property
    def cert_pem(self) -> str:
        return _read(self.cert_file)

    @property
    def key_pem(self) -> str:
        return _read(self.key_file)

    @property
    def chain_pem(self) -> str:
        return _read(self.chain_file)


class CertificateAuthority:
    """A self-signed CA whose certificate is `ca_file` (`<directory>/<name>.pem`); it issues leaf certificates
    into the same directory."""

    def __init__(self, directory: str | os.PathLike, name: str = "ca", *,
                 common_name: str = "compatbroker test CA", valid_days: int = CA_VALID_DAYS):
        from cryptography import x509
        from cryptography.x509.oid import NameOID

        self.directory = os.fspath(directory)
        os.makedirs(self.directory, exist_ok=True)
        self.name = _checked_name(name)
        self._key = _new_key()
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        now = _now()
        builder = (_builder(subject, subject, self._key.public_key(), now - datetime.timedelta(hours=1),
                            now + datetime.timedelta(days=valid_days))
                   .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                   .add_extension(_key_usage(ca=True), critical=True)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                                  critical=False))
        self.certificate = _sign(builder, self._key)
        self.ca_file = os.path.join(self.directory, f"{self.name}.pem")
        _write(self.ca_file, _cert_pem(self.certificate))
        _write(os.path.join(self.directory, f"{self.name}.key"), _key_pem(self._key), private=True)

    @property
    def ca_pem(self) -> str:
        return _read(self.ca_file)

    def issue(self, name: str, *, common_name: str | None = None, hosts: tuple[str, ...] = (),
              valid_days: int = LEAF_VALID_DAYS, expired: bool = False) -> IssuedCertificate:
        """A leaf certificate for servers and clients alike (extended key usage serverAuth and clientAuth), with
        subject CN=`common_name` (default: `name`) and `hosts` (names and IP addresses) in its subjectAltName.
        `expired`: valid from three days ago until yesterday."""
        from cryptography import x509
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        name = _checked_name(name)
        key = _new_key()
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name or name)])
        now = _now()
        if expired:
            not_before, not_after = now - datetime.timedelta(days=3), now - datetime.timedelta(days=1)
        else:
            not_before, not_after = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=valid_days)
        builder = (_builder(subject, self.certificate.subject, key.public_key(), not_before, not_after)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(_key_usage(ca=False), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                         ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                                  critical=False))
        if hosts:
            builder = builder.add_extension(x509.SubjectAlternativeName([_general_name(h) for h in hosts]),
                                            critical=False)
        certificate = _sign(builder, self._key)
        return self._write_leaf(name, certificate, key)

    def _write_leaf(self, name: str, certificate, key) -> IssuedCertificate:
        base = os.path.join(self.directory, name)
        cert_pem, key_pem, ca_pem = _cert_pem(certificate), _key_pem(key), _cert_pem(self.certificate)
        _write(f"{base}.pem", cert_pem)
        _write(f"{base}.key", key_pem, private=True)
        _write(f"{base}-chain.pem", cert_pem + ca_pem)
        _write(f"{base}-keystore.pem", key_pem + cert_pem + ca_pem, private=True)
        return IssuedCertificate(name=name, subject=certificate.subject.rfc4514_string(), cert_file=f"{base}.pem",
                                 key_file=f"{base}.key", chain_file=f"{base}-chain.pem",
                                 keystore_file=f"{base}-keystore.pem", ca_file=self.ca_file,
                                 not_after=certificate.not_valid_after_utc)


@dataclass
class TestCertificates:
    """The certificates of one secured test broker: `ca`, `broker` (for `hosts`), client certificates issued on
    demand by `client(cn)`, and for negative tests `expired_client`, `untrusted_client` and `untrusted_ca_file`."""

    __test__ = False  # not a pytest test class, whatever its name

    directory: str
    ca: CertificateAuthority
    broker: IssuedCertificate
    untrusted_ca: CertificateAuthority
    _clients: dict[str, IssuedCertificate] = field(default_factory=dict)

    @classmethod
    def generate(cls, directory: str | os.PathLike, *, clients: tuple[str, ...] | list[str] = (),
                 hosts: tuple[str, ...] = DEFAULT_HOSTS) -> TestCertificates:
        directory = os.fspath(directory)
        ca = CertificateAuthority(directory, "ca")
        broker = ca.issue("broker", common_name="localhost", hosts=tuple(hosts))
        untrusted = CertificateAuthority(os.path.join(directory, "untrusted"), "untrusted-ca",
                                         common_name="compatbroker untrusted CA")
        certificates = cls(directory, ca, broker, untrusted)
        for cn in clients:
            certificates.client(cn)
        return certificates

    @property
    def ca_file(self) -> str:
        return self.ca.ca_file

    @property
    def untrusted_ca_file(self) -> str:
        return self.untrusted_ca.ca_file

    def client(self, cn: str) -> IssuedCertificate:
        """The client certificate with subject CN=`cn` (issued on first use, file names `client-<cn>*`)."""
        if cn not in self._clients:
            taken = {issued.name for issued in self._clients.values()}
            name, number = f"client-{_file_part(cn)}", 1
            while name in taken:  # two names alike once made safe for a file name ("a b", "a_b")
                number += 1
                name = f"client-{_file_part(cn)}-{number}"
            self._clients[cn] = self.ca.issue(name, common_name=cn)
        return self._clients[cn]

    @property
    def expired_client(self) -> IssuedCertificate:
        """CN=expired, issued by the trusted CA, expired since yesterday: the broker refuses it."""
        if "\0expired" not in self._clients:
            self._clients["\0expired"] = self.ca.issue("expired-client", common_name="expired", expired=True)
        return self._clients["\0expired"]

    @property
    def untrusted_client(self) -> IssuedCertificate:
        """CN=untrusted, issued by the untrusted CA: the broker refuses it."""
        if "\0untrusted" not in self._clients:
            self._clients["\0untrusted"] = self.untrusted_ca.issue("untrusted-client", common_name="untrusted")
        return self._clients["\0untrusted"]


# --- cryptography helpers ---------------------------------------------------------------------------------------

def _new_key():
    from cryptography.hazmat.primitives.asymmetric import rsa

    return rsa.generate_private_key(public_exponent=65537, key_size=RSA_KEY_BITS)


def _builder(subject, issuer, public_key, not_before, not_after):
    from cryptography import x509

    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
            .serial_number(x509.random_serial_number()).not_valid_before(not_before).not_valid_after(not_after)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False))


def _key_usage(*, ca: bool):
    from cryptography import x509

    return x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=not ca,
                         data_encipherment=False, key_agreement=False, key_cert_sign=ca, crl_sign=ca,
                         encipher_only=False, decipher_only=False)


def _sign(builder, key):
    from cryptography.hazmat.primitives import hashes

    return builder.sign(key, hashes.SHA256())


def _general_name(host: str):
    from cryptography import x509

    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _cert_pem(certificate) -> str:
    from cryptography.hazmat.primitives import serialization

    return certificate.public_bytes(serialization.Encoding.PEM).decode("ascii")


def _key_pem(key) -> str:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode("ascii")


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _checked_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ValueError(f"a certificate file name is letters, digits, '.', '_' and '-', got {name!r}")
    return name


def _file_part(cn: str) -> str:
    """A common name made safe for a file name (other characters become '_')."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", cn).lstrip(".-_") or "client"


def _write(path: str, text: str, *, private: bool = False) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    with os.fdopen(os.open(path, flags, 0o600 if private else 0o644), "w", encoding="ascii") as file:
        file.write(text)


def _read(path: str) -> str:
    with open(path, encoding="ascii") as file:
        return file.read()
