"""`compatbroker serve --dev-tls`: TLS for a development broker without making certificates by hand.

A CA and a broker certificate (for localhost, 127.0.0.1, ::1 and the listener's host) are generated under
`<data dir>/dev-tls/` on first use and kept there (valid a year), so clients configured to trust
`<data dir>/dev-tls/ca.pem` keep working across restarts; they are made again when the broker certificate is
about to expire or lacks the listener's host. Unless the configuration has an SSL listener already, one named SSL
is added on the first listener's host, port + 1 (Kafka's habit: 9092 plain, 9093 TLS; port 0 stays 0; with
`--nodes N`, port + N). The
broker's ssl.keystore.* settings point at the generated files unless set; after the listening lines `serve`
prints `compatbroker dev TLS: CA certificate <path> (listener SSL on <host:port>)`.
"""
from __future__ import annotations

import datetime
import ipaddress
import os

from .certificates import DEFAULT_HOSTS, CertificateAuthority

DIRECTORY = "dev-tls"
VALID_DAYS = 365
RENEW_BEFORE = datetime.timedelta(days=1)
LISTENER = "SSL"


def dev_tls_overrides(config, nodes: int = 1) -> list[str]:
    """`--set` overrides that give the broker of `config` (a BrokerConfig) its SSL listener and generated
    keystore; the certificates are made (or reused) now. In a cluster of `nodes` the SSL ports start after the
    first listener's (which count up per node)."""
    ssl_listener = _ssl_listener(config)
    first = config.listeners[0]
    host = first.host if ssl_listener is None else ssl_listener.host
    directory = os.path.join(config.data_dir, DIRECTORY)
    keystore, _ca = ensure_certificates(directory, _hosts(host))
    overrides = []
    if ssl_listener is None:
        port = first.port + nodes if first.port else 0
        listeners = [f"{e.name}://{e.host_port()}" for e in config.listeners]
        host_text = f"[{first.host}]" if ":" in first.host else first.host
        overrides.append("listeners=" + ",".join([*listeners, f"{LISTENER}://{host_text}:{port}"]))
        overrides.append(f"listener.security.protocol.map={_protocol_map(config)},{LISTENER}:SSL")
    if config.get("ssl.keystore.location") is None and config.get("ssl.keystore.key") is None:
        overrides += ["ssl.keystore.type=PEM", f"ssl.keystore.location={keystore}"]
    return overrides


def ensure_certificates(directory: str, hosts: tuple[str, ...]) -> tuple[str, str]:
    """(broker keystore file, CA file) under `directory`, generated unless a usable pair is there."""
    keystore, ca_file = os.path.join(directory, "broker-keystore.pem"), os.path.join(directory, "ca.pem")
    if not _usable(os.path.join(directory, "broker.pem"), hosts) or not os.path.exists(keystore) \
            or not os.path.exists(ca_file):
        ca = CertificateAuthority(directory, "ca", common_name="compatbroker dev CA", valid_days=VALID_DAYS)
        ca.issue("broker", common_name="localhost", hosts=hosts, valid_days=VALID_DAYS)
    return keystore, ca_file


class DevTlsNotice:
    """A runtime service that only prints where the CA is, after the listening lines."""

    def __init__(self, ca_file: str):
        self.ca_file = ca_file

    async def start(self, runtime) -> str:
        where = []
        for bound in runtime.server.listeners:
            if runtime.config.security_protocol(bound.endpoint) in ("SSL", "SASL_SSL"):
                where.append(f"listener {bound.endpoint.name} on {bound.display()}")
        return f"compatbroker dev TLS: CA certificate {self.ca_file} ({', '.join(where)})"

    async def stop(self) -> None:
        pass


def ca_file_of(config) -> str:
    return os.path.join(config.data_dir, DIRECTORY, "ca.pem")


def _ssl_listener(config):
    for endpoint in config.listeners:
        if config.security_protocol(endpoint) == "SSL":
            return endpoint
    return None


def _protocol_map(config) -> str:
    protocols = config.get("listener.security.protocol.map")
    return ",".join(f"{name}:{protocol}" for name, protocol in protocols.items())


def _hosts(host: str) -> tuple[str, ...]:
    if host in ("", "0.0.0.0", "::") or host in DEFAULT_HOSTS:
        return DEFAULT_HOSTS
    return (*DEFAULT_HOSTS, host)


def _usable(cert_file: str, hosts: tuple[str, ...]) -> bool:
    """Does the certificate exist, stay valid more than a day and name every host?"""
    from cryptography import x509

    try:
        with open(cert_file, "rb") as file:
            certificate = x509.load_pem_x509_certificate(file.read())
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (OSError, ValueError, x509.ExtensionNotFound):
        return False
    if certificate.not_valid_after_utc - RENEW_BEFORE < datetime.datetime.now(datetime.timezone.utc):
        return False
    present = {str(name) for name in names.get_values_for_type(x509.DNSName)}
    present |= {str(address) for address in names.get_values_for_type(x509.IPAddress)}
    return all(_normalized(host) in present for host in hosts)


def _normalized(host: str) -> str:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host
