"""The security settings, with Kafka's names and defaults, and their typed form per listener.

`BrokerConfig` accepts every name of `SETTINGS` and hands the properties to `security_settings`, which resolves
each listener's view:

- a setting of `LISTENER_NAMES` may be given per listener as `listener.name.<listener>.<name>` (the listener name in
  lower case, as Kafka writes it), which wins over the unprefixed `<name>`;
- the SASL login settings of `MECHANISM_NAMES` exist only per listener and mechanism:
  `listener.name.<listener>.<mechanism>.sasl.jaas.config` (e.g. `listener.name.sasl_ssl.plain.sasl.jaas.config`),
  as a Kafka broker takes them.

Kafka's defaults are kept, including `sasl.enabled.mechanisms=GSSAPI`: Kerberos is not served here, so a SASL
listener must name its mechanisms among PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER. Key and trust stores
are PEM (`ssl.keystore.type=PEM`): there is no Java key store reader. Names of Java-only tuning (key manager
algorithms, Kerberos, login refresh) are accepted and ignored (`IGNORED_NAMES`).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config_values import parse_bool as _parse_bool, parse_int as _parse_int, parse_list as _parse_list
from ..config_values import parse_optional_str as _parse_optional
from ..storage.log_config import ConfigError

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHORIZERS = (STANDARD_AUTHORIZER, "kafka.security.authorizer.AclAuthorizer")  # the ZooKeeper-era name, same rules
DEFAULT_PRINCIPAL_BUILDER = "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"
CLIENT_AUTH_VALUES = ("none", "requested", "required")
TLS_PROTOCOLS = ("TLSv1.2", "TLSv1.3")
PEM = "PEM"


def _parse_str(value: Any) -> str:
    return str(value).strip()


@dataclass(frozen=True)
class _Setting:
    name: str
    parse: Callable[[Any], Any]
    default: Any


SETTINGS = {setting.name: setting for setting in (
    # authorization
    _Setting("authorizer.class.name", _parse_str, ""),
    _Setting("super.users", _parse_str, ""),
    _Setting("allow.everyone.if.no.acl.found", _parse_bool, False),
    _Setting("principal.builder.class", _parse_str, DEFAULT_PRINCIPAL_BUILDER),
    # SASL
    _Setting("sasl.enabled.mechanisms", _parse_list, ("GSSAPI",)),
    _Setting("sasl.mechanism.inter.broker.protocol", _parse_str, "GSSAPI"),
    _Setting("sasl.server.max.receive.size", _parse_int, 524_288),
    _Setting("connections.max.reauth.ms", _parse_int, 0),
    _Setting("connection.failed.authentication.delay.ms", _parse_int, 100),
    _Setting("security.inter.broker.protocol", _parse_str, "PLAINTEXT"),
    _Setting("inter.broker.listener.name", _parse_optional, None),
    _Setting("sasl.oauthbearer.jwks.endpoint.url", _parse_optional, None),
    _Setting("sasl.oauthbearer.expected.audience", _parse_list, ()),
    _Setting("sasl.oauthbearer.expected.issuer", _parse_optional, None),
    _Setting("sasl.oauthbearer.sub.claim.name", _parse_str, "sub"),
    _Setting("sasl.oauthbearer.scope.claim.name", _parse_str, "scope"),
    _Setting("sasl.oauthbearer.clock.skew.seconds", _parse_int, 30),
    # TLS
    _Setting("ssl.protocol", _parse_str, "TLSv1.3"),
    _Setting("ssl.enabled.protocols", _parse_list, TLS_PROTOCOLS),
    _Setting("ssl.cipher.suites", _parse_list, ()),
    _Setting("ssl.client.auth", lambda value: _parse_str(value).lower(), "none"),
    _Setting("ssl.keystore.type", _parse_str, "JKS"),
    _Setting("ssl.keystore.location", _parse_optional, None),
    _Setting("ssl.keystore.password", _parse_optional, None),
    _Setting("ssl.key.password", _parse_optional, None),
    _Setting("ssl.keystore.certificate.chain", _parse_optional, None),
    _Setting("ssl.keystore.key", _parse_optional, None),
    _Setting("ssl.truststore.type", _parse_str, "JKS"),
    _Setting("ssl.truststore.location", _parse_optional, None),
    _Setting("ssl.truststore.password", _parse_optional, None),
    _Setting("ssl.truststore.certificates", _parse_optional, None),
    _Setting("ssl.principal.mapping.rules", _parse_str, "DEFAULT"),
    _Setting("ssl.endpoint.identification.algorithm", _parse_str, "https"),  # a client's check; brokers ignore it
)}
"""Every security setting the broker reads, unprefixed, with Kafka's defaults."""

LISTENER_NAMES = frozenset(name for name in SETTINGS if name.startswith(("ssl.", "sasl.")) and
                           name != "sasl.mechanism.inter.broker.protocol") | {"connections.max.reauth.ms"}
"""Settings a listener may override with `listener.name.<listener>.<name>`."""

MECHANISM_NAMES = frozenset({"sasl.jaas.config", "sasl.server.callback.handler.class",
                             "sasl.login.callback.handler.class", "sasl.login.class"})
"""Settings given per listener and mechanism: `listener.name.<listener>.<mechanism>.<name>`."""

IGNORED_NAMES = frozenset({
    "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.secure.random.implementation",
    "ssl.engine.factory.class", "ssl.allow.dn.changes", "ssl.allow.san.changes", "ssl.provider",
    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd", "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.kerberos.principal.to.local.rules", "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms", "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
})
"""Java-only tuning a server.properties may carry: accepted, without effect here."""

_PREFIX = re.compile(r"^listener\.name\.(?P<listener>[a-z0-9_]+)\.(?P<rest>.+)$", re.IGNORECASE)
_MECHANISM_PREFIX = re.compile(r"^(?P<mechanism>[a-z0-9-]+)\.(?P<name>.+)$", re.IGNORECASE)


def is_security_name(name: str) -> bool:
    """Does the broker accept this name as a security setting (prefixed or not)?"""
    if name in SETTINGS or name in IGNORED_NAMES:
        return True
    match = _PREFIX.match(name)
    if match is None:
        return False
    rest = match["rest"]
    if rest in LISTENER_NAMES or rest in IGNORED_NAMES:
        return True
    mechanism = _MECHANISM_PREFIX.match(rest)
    return mechanism is not None and (mechanism["name"] in MECHANISM_NAMES
                                      or mechanism["name"] == "connections.max.reauth.ms")


def security_names() -> frozenset[str]:
    """The unprefixed names, for `known_names()` and suggestions of close names."""
    return frozenset(SETTINGS) | IGNORED_NAMES


# --- typed results ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SslSettings:
    keystore_type: str
    keystore_location: str | None
    keystore_certificate_chain: str | None
    keystore_key: str | None
    key_password: str | None
    keystore_password: str | None
    truststore_type: str
    truststore_location: str | None
    truststore_certificates: str | None
    client_auth: str
    enabled_protocols: tuple[str, ...]
    protocol: str
    cipher_suites: tuple[str, ...]
    principal_mapping_rules: str


@dataclass(frozen=True)
class JaasConfig:
    login_module: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class OAuthBearerSettings:
    jwks_endpoint_url: str | None = None
    expected_audience: tuple[str, ...] = ()
    expected_issuer: str | None = None
    sub_claim_name: str = "sub"
    scope_claim_name: str = "scope"
    clock_skew_seconds: int = 30


@dataclass(frozen=True)
class ListenerSecurity:
    listener_name: str
    security_protocol: str
    ssl: SslSettings | None = None
    sasl_enabled_mechanisms: tuple[str, ...] = ()
    jaas: dict[str, JaasConfig] = field(default_factory=dict)
    server_callback_handlers: dict[str, str] = field(default_factory=dict)
    connections_max_reauth_ms: int = 0
    sasl_server_max_receive_size: int = 524_288
    oauthbearer: OAuthBearerSettings = OAuthBearerSettings()

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True)
class SecuritySettings:
    listeners: dict[str, ListenerSecurity]
    authorizer_class_name: str = ""
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False
    connection_failed_authentication_delay_ms: int = 100  # a refused client waits this long for its answer

    def listener(self, name: str) -> ListenerSecurity:
        return self.listeners[name.upper()]

    @property
    def authorizer_enabled(self) -> bool:
        return bool(self.authorizer_class_name)


# --- resolving ----------------------------------------------------------------------------------------------------

def security_settings(properties: Mapping[str, Any], listeners: Mapping[str, str]) -> SecuritySettings:
    """The security settings of `properties` for `listeners` (listener name -> security protocol); ConfigError
    with Kafka's wording where Kafka refuses to start."""
    values = _Values(properties)
    authorizer = values.get("authorizer.class.name")
    if authorizer and authorizer not in AUTHORIZERS:
        raise ConfigError(f"Invalid value {authorizer} for configuration authorizer.class.name: Class {authorizer} "
                          f"could not be found. The authorizer here: {STANDARD_AUTHORIZER}")
    builder = values.get("principal.builder.class")
    if builder != DEFAULT_PRINCIPAL_BUILDER:
        raise ConfigError(f"principal.builder.class: only {DEFAULT_PRINCIPAL_BUILDER} is available, got {builder}")
    inter_broker = values.get("inter.broker.listener.name")
    if inter_broker is not None and inter_broker.upper() not in listeners:
        raise ConfigError(f"inter.broker.listener.name must be a listener name defined in listeners. "
                          f"The valid options based on currently configured listeners are "
                          f"{','.join(listeners)}")
    return SecuritySettings(
        listeners={name: _listener(values, name, protocol) for name, protocol in listeners.items()},
        authorizer_class_name=authorizer,
        super_users=_super_users(values.get("super.users")),
        allow_everyone_if_no_acl_found=values.get("allow.everyone.if.no.acl.found"),
        connection_failed_authentication_delay_ms=_failed_authentication_delay(values, properties),
    )


def _failed_authentication_delay(values: _Values, properties: Mapping[str, Any]) -> int:
    """Kafka's check: the delay must be shorter than connections.max.idle.ms (when that is set)."""
    delay = values.get("connection.failed.authentication.delay.ms")
    idle = int(properties.get("connections.max.idle.ms", 600_000))
    if delay < 0:
        raise ConfigError(f"connection.failed.authentication.delay.ms={delay} is below the minimum 0")
    if idle >= 0 and delay >= idle:
        raise ConfigError(f"connection.failed.authentication.delay.ms={delay} should always be less than "
                          f"connections.max.idle.ms={idle} to prevent failed authentication responses from timing out")
    return delay


class _Values:
    """Parsed settings, looked up with or without a listener's prefix."""

    def __init__(self, properties: Mapping[str, Any]):
        self._properties = properties

    def get(self, name: str, listener: str | None = None) -> Any:
        setting = SETTINGS[name]
        if listener is not None:
            prefixed = f"listener.name.{listener.lower()}.{name}"
            if prefixed in self._properties:
                return self._parse(setting, prefixed)
        if name in self._properties:
            return self._parse(setting, name)
        return setting.default

    def per_mechanism(self, listener: str, name: str) -> dict[str, str]:
        """mechanism (upper case) -> the value of listener.name.<listener>.<mechanism>.<name>."""
        found = {}
        prefix = f"listener.name.{listener.lower()}."
        for key, value in self._properties.items():
            if not key.lower().startswith(prefix):
                continue
            mechanism = _MECHANISM_PREFIX.match(key[len(prefix):])
            if mechanism is not None and mechanism["name"] == name:
                found[mechanism["mechanism"].upper()] = str(value)
        return found

    def _parse(self, setting: _Setting, key: str) -> Any:
        try:
            return setting.parse(self._properties[key])
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"Invalid value {self._properties[key]} for configuration {key}: {exc}") from None


def _listener(values: _Values, name: str, protocol: str) -> ListenerSecurity:
    if protocol not in SECURITY_PROTOCOLS:
        raise ConfigError(f"listener {name}: unknown security protocol {protocol} "
                          f"(one of {', '.join(SECURITY_PROTOCOLS)}; see listener.security.protocol.map)")
    uses_tls, uses_sasl = protocol in ("SSL", "SASL_SSL"), protocol.startswith("SASL_")
    mechanisms = tuple(item.upper() for item in values.get("sasl.enabled.mechanisms", name)) if uses_sasl else ()
    jaas = {mechanism: parse_jaas_config(text, f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config")
            for mechanism, text in values.per_mechanism(name, "sasl.jaas.config").items()}
    if uses_sasl:
        _check_mechanisms(name, mechanisms, jaas)
    reauth_ms = values.get("connections.max.reauth.ms", name)
    max_receive = values.get("sasl.server.max.receive.size", name)
    if reauth_ms < 0 or max_receive < 1:
        raise ConfigError(f"listener {name}: connections.max.reauth.ms must be at least 0 and "
                          f"sasl.server.max.receive.size at least 1")
    return ListenerSecurity(
        listener_name=name, security_protocol=protocol,
        ssl=_ssl(values, name) if uses_tls else None,
        sasl_enabled_mechanisms=mechanisms, jaas=jaas,
        server_callback_handlers=values.per_mechanism(name, "sasl.server.callback.handler.class"),
        connections_max_reauth_ms=reauth_ms, sasl_server_max_receive_size=max_receive,
        oauthbearer=OAuthBearerSettings(
            jwks_endpoint_url=values.get("sasl.oauthbearer.jwks.endpoint.url", name),
            expected_audience=values.get("sasl.oauthbearer.expected.audience", name),
            expected_issuer=values.get("sasl.oauthbearer.expected.issuer", name),
            sub_claim_name=values.get("sasl.oauthbearer.sub.claim.name", name),
            scope_claim_name=values.get("sasl.oauthbearer.scope.claim.name", name),
            clock_skew_seconds=values.get("sasl.oauthbearer.clock.skew.seconds", name)),
    )


def _check_mechanisms(listener: str, mechanisms: tuple[str, ...], jaas: Mapping[str, JaasConfig]) -> None:
    if not mechanisms:
        raise ConfigError(f"listener {listener}: sasl.enabled.mechanisms is empty")
    for mechanism in mechanisms:
        if mechanism not in SUPPORTED_MECHANISMS:
            hint = " (Kafka's default, Kerberos, is not served here)" if mechanism == "GSSAPI" else ""
            raise ConfigError(f"listener {listener}: SASL mechanism {mechanism}{hint} is not supported; set "
                              f"sasl.enabled.mechanisms (or listener.name.{listener.lower()}.sasl.enabled.mechanisms)"
                              f" to some of {', '.join(SUPPORTED_MECHANISMS)}")
    if "PLAIN" in mechanisms and "PLAIN" not in jaas:
        raise ConfigError(f"listener {listener}: PLAIN needs its users in "
                          f"listener.name.{listener.lower()}.plain.sasl.jaas.config (PlainLoginModule with "
                          f'user_<name>="<password>" options)')


def _ssl(values: _Values, listener: str) -> SslSettings:
    def get(name: str) -> Any:
        return values.get(name, listener)

    settings = SslSettings(
        keystore_type=get("ssl.keystore.type").upper(), keystore_location=get("ssl.keystore.location"),
        keystore_certificate_chain=get("ssl.keystore.certificate.chain"), keystore_key=get("ssl.keystore.key"),
        key_password=get("ssl.key.password"), keystore_password=get("ssl.keystore.password"),
        truststore_type=get("ssl.truststore.type").upper(), truststore_location=get("ssl.truststore.location"),
        truststore_certificates=get("ssl.truststore.certificates"), client_auth=get("ssl.client.auth"),
        enabled_protocols=get("ssl.enabled.protocols"), protocol=get("ssl.protocol"),
        cipher_suites=get("ssl.cipher.suites"), principal_mapping_rules=get("ssl.principal.mapping.rules"))
    _check_ssl(listener, settings)
    return settings


def _check_ssl(listener: str, ssl: SslSettings) -> None:
    where = f"listener {listener}"
    if ssl.keystore_location is None and (ssl.keystore_certificate_chain is None or ssl.keystore_key is None):
        raise ConfigError(f"{where}: a TLS listener needs a key store: ssl.keystore.location (a PEM file with the key "
                          f"and certificate chain), or ssl.keystore.certificate.chain and ssl.keystore.key")
    if ssl.keystore_type != PEM:
        raise ConfigError(f"{where}: ssl.keystore.type={ssl.keystore_type} is not supported: compatbroker reads PEM "
                          f"key stores (set ssl.keystore.type=PEM)")
    has_truststore = ssl.truststore_location is not None or ssl.truststore_certificates is not None
    if has_truststore and ssl.truststore_type != PEM:
        raise ConfigError(f"{where}: ssl.truststore.type={ssl.truststore_type} is not supported: compatbroker reads "
                          f"PEM trust stores (set ssl.truststore.type=PEM)")
    if ssl.client_auth not in CLIENT_AUTH_VALUES:
        raise ConfigError(f"Invalid value {ssl.client_auth} for configuration ssl.client.auth: String must be one "
                          f"of: {', '.join(CLIENT_AUTH_VALUES)}")
    if ssl.client_auth != "none" and not has_truststore:
        raise ConfigError(f"{where}: ssl.client.auth={ssl.client_auth} needs a trust store of the CAs that sign "
                          f"client certificates (ssl.truststore.location or ssl.truststore.certificates)")
    unknown = [name for name in ssl.enabled_protocols if name not in TLS_PROTOCOLS]
    if unknown or not ssl.enabled_protocols:
        raise ConfigError(f"{where}: ssl.enabled.protocols may name {' and '.join(TLS_PROTOCOLS)}, got "
                          f"{', '.join(ssl.enabled_protocols) or 'none'}")


def _super_users(text: str) -> frozenset[str]:
    """`User:alice;User:bob` (Kafka separates super users with semicolons)."""
    users = frozenset(item.strip() for item in text.split(";") if item.strip())
    for user in users:
        if ":" not in user:
            raise ConfigError(f"super.users: {user!r} is not a principal of the form User:name")
    return users


# --- JAAS ---------------------------------------------------------------------------------------------------------

_JAAS_TOKEN = re.compile(r'\s*(?:(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<word>[^\s=;"]+)|(?P<symbol>[=;]))')
_CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")


def parse_jaas_config(text: str, name: str = "sasl.jaas.config") -> JaasConfig:
    """`<LoginModule> <flag> key="value" ...;`: one login module, as Kafka's sasl.jaas.config takes it."""
    tokens = _jaas_tokens(text, name)
    if len(tokens) < 3 or tokens[-1] != (";", "symbol"):
        raise ConfigError(f"{name}: expected '<LoginModule> <flag> key=\"value\" ... ;'")
    (module, module_kind), (flag, flag_kind) = tokens[0], tokens[1]
    if module_kind != "word" or flag_kind != "word" or flag.lower() not in _CONTROL_FLAGS:
        raise ConfigError(f"{name}: expected a login module class and a control flag "
                          f"({', '.join(_CONTROL_FLAGS)}), got {module} {flag}")
    options, body = {}, tokens[2:-1]
    index = 0
    while index < len(body):
        if index + 2 >= len(body):
            raise ConfigError(f"{name}: option {body[index][0]!r} has no value")
        key, equals, value = body[index], body[index + 1], body[index + 2]
        if key[1] != "word" or equals != ("=", "symbol") or value[1] == "symbol":
            raise ConfigError(f"{name}: expected key=value options, got {key[0]} {equals[0]} {value[0]}")
        options[key[0]] = value[0]
        index += 3
    if ";" in [token for token, kind in body if kind == "symbol"]:
        raise ConfigError(f"{name}: must contain exactly one login module")
    return JaasConfig(module, flag.lower(), options)


def _jaas_tokens(text: str, name: str) -> list[tuple[str, str]]:
    tokens, position, text = [], 0, text.strip()
    while position < len(text):
        match = _JAAS_TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise ConfigError(f"{name}: cannot parse near {text[position:position + 20]!r}")
        position = match.end()
        if match["quoted"] is not None:
            tokens.append((re.sub(r"\\(.)", r"\1", match["quoted"][1:-1]), "quoted"))
        elif match["word"] is not None:
            tokens.append((match["word"], "word"))
        else:
            tokens.append((match["symbol"], "symbol"))
    if tokens.count((";", "symbol")) > 1:
        raise ConfigError(f"{name}: must contain exactly one login module")
    return tokens
