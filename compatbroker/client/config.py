"""The client's settings: a bootstrap list, a client id, and properties under the Java client's names (librdkafka's
where those differ: `sasl.username`, `ssl.ca.location`), as `--command-config FILE` and `-X name=value` give them.

    ClientConfig(bootstrap="localhost:9092", properties={"security.protocol": "SASL_SSL",
                                                         "sasl.mechanism": "SCRAM-SHA-512",
                                                         "sasl.username": "alice", "sasl.password": "secret",
                                                         "ssl.ca.location": "ca.pem"})

Known names (values are strings as a properties file has them; ints and bools are accepted too):

| name | meaning |
| --- | --- |
| `bootstrap.servers` | used when `bootstrap` is not given |
| `client.id` | used when `client_id` is not given |
| `security.protocol` | PLAINTEXT (default), SSL, SASL_PLAINTEXT, SASL_SSL |
| `sasl.mechanism` (librdkafka: `sasl.mechanisms`) | PLAIN (default), SCRAM-SHA-256, SCRAM-SHA-512 |
| `sasl.username`, `sasl.password` | librdkafka's credentials |
| `sasl.jaas.config` | the Java client's: `...PlainLoginModule required username="u" password="p";` (or Scram...) |
| `ssl.ca.location`, `ssl.truststore.location` | PEM file of the CA(s) to trust (default: the system's) |
| `ssl.truststore.type`, `ssl.keystore.type` | PEM only (JKS/PKCS12 stores cannot be read here) |
| `ssl.certificate.location`, `ssl.key.location` | the client certificate and its key (PEM), for mTLS |
| `ssl.keystore.location` | PEM file holding the client's key and certificate chain (the Java client's PEM keystore) |
| `ssl.key.password` | password of an encrypted private key |
| `ssl.endpoint.identification.algorithm` | `https` (default: check the broker's host name) or empty (do not) |
| `enable.ssl.certificate.verification` | librdkafka's: `false` skips verifying the broker's certificate |
| `request.timeout.ms` | how long to wait for an answer (default 30000, as Kafka) |
| `socket.connection.setup.timeout.ms` | how long to wait for a connection (default 10000, as Kafka) |

Any other name is an error listing every unknown one, unless the caller reads it itself and says so through
`extra_names` (the producer and consumer pass their own settings, `acks`, `group.id`, ...).
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .errors import ClientConfigError

DEFAULT_BOOTSTRAP = "localhost:9092"
DEFAULT_CLIENT_ID = "compatbroker-cli"
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
KNOWN_NAMES = frozenset({
    "bootstrap.servers", "client.id", "security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username",
    "sasl.password", "sasl.jaas.config", "ssl.ca.location", "ssl.truststore.location", "ssl.truststore.type",
    "ssl.keystore.type", "ssl.certificate.location", "ssl.key.location", "ssl.keystore.location",
    "ssl.key.password", "ssl.endpoint.identification.algorithm", "enable.ssl.certificate.verification",
    "request.timeout.ms", "socket.connection.setup.timeout.ms",
})
_LOGIN_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": ("PLAIN",),
    "org.apache.kafka.common.security.scram.ScramLoginModule": ("SCRAM-SHA-256", "SCRAM-SHA-512"),
}
# JAAS options: name=value with the value double-quoted (backslash escapes) or a bare token
_JAAS_OPTION = re.compile(r'([A-Za-z_][\w.]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


@dataclass
class ClientConfig:
    """Where the cluster is and how to talk to it. `bootstrap` is "HOST:PORT[,HOST:PORT...]" (None: the
    `bootstrap.servers` property, else localhost:9092). Parsed settings are attributes (below); `properties`
    keeps every property as given, for the producer and consumer to read their own."""

    bootstrap: str | None = None
    client_id: str | None = None
    properties: Mapping[str, object] = field(default_factory=dict)
    extra_names: Iterable[str] = ()

    def __post_init__(self):
        props = {str(name).strip(): _text(value) for name, value in dict(self.properties).items()}
        self.properties = props
        unknown = sorted(set(props) - KNOWN_NAMES - set(self.extra_names))
        if unknown:
            raise ClientConfigError(f"unknown client propert{'y' if len(unknown) == 1 else 'ies'}: "
                                    f"{', '.join(unknown)}")
        self.bootstrap = self.bootstrap or props.get("bootstrap.servers") or DEFAULT_BOOTSTRAP
        self.bootstrap_servers = parse_bootstrap(self.bootstrap)
        self.client_id = self.client_id if self.client_id is not None else props.get("client.id", DEFAULT_CLIENT_ID)
        self.security_protocol = _choice(props, "security.protocol", SECURITY_PROTOCOLS, "PLAINTEXT")
        self.request_timeout_s = _positive_ms(props, "request.timeout.ms", 30000) / 1000
        self.connect_timeout_s = _positive_ms(props, "socket.connection.setup.timeout.ms", 10000) / 1000
        self._parse_sasl(props)
        self._parse_ssl(props)

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def _parse_sasl(self, props: dict[str, str]) -> None:
        mechanism = props.get("sasl.mechanism") or props.get("sasl.mechanisms") or "PLAIN"
        self.sasl_mechanism = mechanism.strip().upper()
        if self.sasl_mechanism not in SASL_MECHANISMS:
            raise ClientConfigError(f"sasl.mechanism {mechanism!r} is not supported; use one of "
                                    f"{', '.join(SASL_MECHANISMS)}")
        self.sasl_username = props.get("sasl.username")
        self.sasl_password = props.get("sasl.password")
        jaas = props.get("sasl.jaas.config")
        if jaas:
            username, password = parse_jaas_config(jaas, self.sasl_mechanism)
            self.sasl_username = self.sasl_username or username
            self.sasl_password = self.sasl_password or password
        if self.uses_sasl and (self.sasl_username is None or self.sasl_password is None):
            raise ClientConfigError(f"security.protocol {self.security_protocol} needs credentials: set "
                                    "sasl.username and sasl.password, or sasl.jaas.config")

    def _parse_ssl(self, props: dict[str, str]) -> None:
        for name in ("ssl.truststore.type", "ssl.keystore.type"):
            if props.get(name, "PEM").upper() != "PEM":
                raise ClientConfigError(f"{name}={props[name]} cannot be read here: only PEM files are supported")
        self.ssl_ca_location = props.get("ssl.ca.location") or props.get("ssl.truststore.location")
        self.ssl_certificate_location = props.get("ssl.certificate.location") or props.get("ssl.keystore.location")
        self.ssl_key_location = props.get("ssl.key.location") or (
            props.get("ssl.keystore.location") if "ssl.certificate.location" not in props else None)
        self.ssl_key_password = props.get("ssl.key.password")
        algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
        if algorithm not in ("https", ""):
            raise ClientConfigError(f"ssl.endpoint.identification.algorithm must be https or empty, got {algorithm!r}")
        self.ssl_check_hostname = algorithm == "https"
        self.ssl_verify = _bool(props, "enable.ssl.certificate.verification", True)


def parse_bootstrap(text: str) -> list[tuple[str, int]]:
    """"HOST:PORT[,HOST:PORT...]" -> [(host, port)] (IPv6 hosts in brackets; a `NAME://` prefix is ignored, as
    Kafka's clients ignore it); a ClientConfigError names the bad entry."""
    servers = [_host_port(item.strip()) for item in str(text).split(",") if item.strip()]
    if not servers:
        raise ClientConfigError("no bootstrap server given: use HOST:PORT[,HOST:PORT...]")
    return servers


def _host_port(item: str) -> tuple[str, int]:
    address = item.partition("://")[2] or item
    host, sep, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ClientConfigError(f"bad bootstrap server {item!r}: put an IPv6 address in brackets, as in [::1]:9092")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise ClientConfigError(f"bad bootstrap server {item!r}: use HOST:PORT with a port from 1 to 65535")
    return host, int(port)


def parse_jaas_config(text: str, mechanism: str) -> tuple[str | None, str | None]:
    """(username, password) of a `sasl.jaas.config` naming Kafka's PlainLoginModule or ScramLoginModule."""
    module, _, rest = text.strip().partition(" ")
    accepted = _LOGIN_MODULES.get(module)
    if accepted is None:
        raise ClientConfigError(f"sasl.jaas.config: login module {module!r} is not supported; use "
                                f"{' or '.join(_LOGIN_MODULES)}")
    if mechanism not in accepted:
        raise ClientConfigError(f"sasl.jaas.config: {module.rsplit('.', 1)[-1]} does not fit sasl.mechanism "
                                f"{mechanism}")
    options = {}
    for match in _JAAS_OPTION.finditer(rest):
        quoted, bare = match.group(2), match.group(3)
        options[match.group(1)] = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare
    return options.get("username"), options.get("password")


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _choice(props: dict[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    value = props.get(name, default).strip().upper()
    if value not in choices:
        raise ClientConfigError(f"{name} must be one of {', '.join(choices)}, got {props[name]!r}")
    return value


def _positive_ms(props: dict[str, str], name: str, default: int) -> int:
    text = props.get(name, str(default)).strip()
    if not text.isdigit() or int(text) <= 0:
        raise ClientConfigError(f"{name} must be a positive number of milliseconds, got {text!r}")
    return int(text)


def _bool(props: dict[str, str], name: str, default: bool) -> bool:
    text = props.get(name)
    if text is None:
        return default
    if text.strip().lower() not in ("true", "false"):
        raise ClientConfigError(f"{name} must be true or false, got {text!r}")
    return text.strip().lower() == "true"
