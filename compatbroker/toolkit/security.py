"""A secured test broker in one object: `SecuritySetup` says which listeners, mechanisms, users, certificates,
tokens and ACLs; it writes the files (CA, certificates, JWKS), gives the broker's settings, and gives every client
family a ready configuration.

    setup = SecuritySetup(listeners=("PLAINTEXT", "SSL", "SASL_SSL"), mechanisms=("PLAIN", "SCRAM-SHA-512"),
                          users={"admin": "admin-secret", "alice": "alice-secret"}, acls=True)
    with EmbeddedBroker(security=setup) as broker:
        broker.bootstrap_servers_for("SASL_SSL")              # host:port of that listener
        KafkaProducer(**broker.client_config("kafka-python", "SASL_SSL", user="alice",
                                             mechanism="SCRAM-SHA-512"))

Listeners are named by their security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) or given as
{name: protocol}, e.g. {"SSL": "SSL", "MTLS": "SSL"} with client_auth={"MTLS": "required"} for TLS and mTLS side by
side. PLAIN users go into `listener.name.<l>.plain.sasl.jaas.config` (`user_<name>="<password>"`); SCRAM users
into the broker's credential store once it runs (`EmbeddedBroker` does that; or `scram_users()` with
`broker.security.scram.set_password`, or the control API's `add_user`). OAUTHBEARER is Kafka's unsecured
validator (`oauthbearer="unsecured"`, tokens `alg: none`) or JWKS validation (`oauthbearer="jwks"`: a generated RSA
key published as `<directory>/jwks.json`, tokens from `mint_token`). `acls=True` turns on Kafka's
StandardAuthorizer with `super_users` (default: admin).

`client_config(family, listener, ...)` (also `EmbeddedBroker.client_config`, which fills in the bootstrap
address) answers, per FAMILY:

- "kafka-python": KafkaProducer/KafkaConsumer/KafkaAdminClient kwargs: `security_protocol`, `ssl_cafile`,
  `ssl_certfile`, `ssl_keyfile`, `ssl_check_hostname`; `sasl_mechanism`, `sasl_plain_username`,
  `sasl_plain_password` (PLAIN and SCRAM), `sasl_oauth_token_provider` (an object whose `token()` gives the token);
- "aiokafka": AIOKafkaProducer/Consumer/AdminClient kwargs: `security_protocol`, `ssl_context` (an
  `ssl.SSLContext` trusting the CA, with the client certificate for mTLS), the same `sasl_*` names,
  `sasl_oauth_token_provider` (an aiokafka AbstractTokenProvider);
- "confluent-kafka": librdkafka properties: `security.protocol`, `ssl.ca.location`, `ssl.certificate.location`,
  `ssl.key.location`, `sasl.mechanisms`, `sasl.username`, `sasl.password`; OAUTHBEARER: `oauth_cb` (a Python
  callable giving the token and its `exp`; confluent-kafka only; for an expired token it says a minute ahead, as
  librdkafka would not send it otherwise and the broker's refusal is what tests look at);
- "kcat": the same librdkafka properties as strings (for `-X name=value`); OAUTHBEARER only with the unsecured
  validator: `enable.sasl.oauthbearer.unsecure.jwt=true`, `sasl.oauthbearer.config=principal=<user>` (librdkafka
  makes the token; it cannot send a given one, so JWKS listeners raise ValueError);
- "kafkajs": JSON-able options for `new Kafka(...)`: `brokers` (a list), `ssl` {`ca`: [PEM], `cert`, `key`,
  `rejectUnauthorized`} (PEM texts, so the Node side reads no file), `sasl` {`mechanism`: "plain" | "scram-sha-256"
  | "scram-sha-512", `username`, `password`}; OAUTHBEARER: `sasl` {`mechanism`: "oauthbearer",
  `oauthBearerToken`: the token} - NOT a kafkajs option: the JS side must turn it into
  `oauthBearerProvider: async () => ({ value: token })`;
- "sarama": JSON for tests/compat/clients/sarama/main.go, under the command's `"security"` key:
  {"bootstrap": "h:p", "security": {"tls": {"enable": true, "ca_file": PATH, "cert_file": PATH|"", "key_file":
  PATH|"", "server_name": ""}, "sasl": {"enable": true, "mechanism": "PLAIN"|"SCRAM-SHA-256"|"SCRAM-SHA-512"|
  "OAUTHBEARER", "user": NAME, "password": PW, "token": JWT|""}}}; `tls`/`sasl` are absent when the listener has
  none. tests/compat/clients/sarama/security.go maps them onto Net.TLS.Config (RootCAs from ca_file,
  Certificates from cert/key) and Net.SASL (Mechanism, User, Password, SCRAMClientGeneratorFunc, TokenProvider
  returning `token`);
- "java": Java client properties (strings): `security.protocol`, `ssl.truststore.type=PEM`,
  `ssl.truststore.location`, for mTLS `ssl.keystore.type=PEM` + `ssl.keystore.location` (key and chain in one
  file); `sasl.mechanism`, `sasl.jaas.config` (PlainLoginModule / ScramLoginModule with username and password;
  OAuthBearerLoginModule with `unsecuredLoginStringClaim_sub` for the unsecured validator; for JWKS the token is
  written to a file and read through `sasl.login.callback.handler.class=` Kafka's OAuthBearerLoginCallbackHandler
  with `sasl.oauthbearer.token.endpoint.url=file:...` - Kafka 4 JVMs also need the system property
  `org.apache.kafka.sasl.oauthbearer.allowed.urls` to allow that URL). Spark takes them prefixed with `kafka.`.

Arguments of `client_config`: `user` (default: the first user) and `password` (default: the user's; give a wrong
one for negative tests); `mechanism` on SASL listeners (default PLAIN when enabled, else the first); `certificate`
for listeners asking client certificates (default: the client certificate CN=<user>; an `IssuedCertificate` such as
`setup.certificates.expired_client` / `.untrusted_client`, or False for none); `ca_file` the CA the client trusts
(default the setup's CA; `setup.certificates.untrusted_ca_file` makes the broker's certificate untrusted); `token`
for OAUTHBEARER (default: a fresh token for `user`; `setup.expired_token(user)` for negative tests).
"""
from __future__ import annotations

import os
import shutil
import ssl
import tempfile
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .certificates import IssuedCertificate, TestCertificates
from .tokens import JwksIssuer, expired_unsecured_token, token_claims, unsecured_token

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
FAMILIES = ("kafka-python", "aiokafka", "confluent-kafka", "kcat", "kafkajs", "sarama", "java")
OAUTHBEARER_MODES = ("unsecured", "jwks")
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
DEFAULT_USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
DEFAULT_LISTENERS = PROTOCOLS

PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
OAUTHBEARER_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
OAUTHBEARER_LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"


@dataclass
class SecuritySetup:
    """What a secured test broker has; see the module docstring. Files go to `directory` (default: a temporary
    directory removed by `cleanup()` or when the setup is garbage-collected)."""

    listeners: Sequence[str] | Mapping[str, str] = DEFAULT_LISTENERS
    mechanisms: Sequence[str] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
    users: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_USERS))
    client_auth: str | Mapping[str, str] = "none"   # SSL listeners' ssl.client.auth (one value, or per listener)
    oauthbearer: str = "unsecured"                   # "unsecured" or "jwks"
    oauth_issuer: str | None = None                  # JWKS: sasl.oauthbearer.expected.issuer and the tokens' iss
    oauth_audience: str | None = None                # JWKS: sasl.oauthbearer.expected.audience and the tokens' aud
    acls: bool = False                               # authorizer.class.name = StandardAuthorizer
    super_users: Sequence[str] = ("admin",)          # names (User:<name>) or principals ("User:CN=admin")
    allow_everyone_if_no_acl_found: bool = False
    principal_mapping_rules: str | None = None       # ssl.principal.mapping.rules (None: Kafka's DEFAULT)
    settings: Mapping[str, object] = field(default_factory=dict)   # more broker settings, winning over ours
    directory: str | os.PathLike | None = None

    def __post_init__(self):
        self.listener_protocols = _listener_protocols(self.listeners)
        self.mechanisms = tuple(mechanism.upper() for mechanism in self.mechanisms)
        for mechanism in self.mechanisms:
            if mechanism not in MECHANISMS:
                raise ValueError(f"unknown SASL mechanism {mechanism!r}; known: {', '.join(MECHANISMS)}")
        if self.oauthbearer not in OAUTHBEARER_MODES:
            raise ValueError(f"oauthbearer is one of {', '.join(OAUTHBEARER_MODES)}, got {self.oauthbearer!r}")
        self.users = dict(self.users)
        if not isinstance(self.client_auth, str):
            self.client_auth = {name.upper(): value for name, value in self.client_auth.items()}
        for listener in self.listener_protocols:
            _check_client_auth(self._client_auth(listener))
        self._owned_directory = self.directory is None
        self.directory = os.fspath(self.directory) if self.directory is not None else \
            tempfile.mkdtemp(prefix="compatbroker-security-")
        if self._owned_directory:
            self._finalizer = weakref.finalize(self, shutil.rmtree, self.directory, True)
        self._certificates: TestCertificates | None = None
        self._jwks: JwksIssuer | None = None

    # --- files ----------------------------------------------------------------------------------------------------

    @property
    def uses_tls(self) -> bool:
        return any(protocol in ("SSL", "SASL_SSL") for protocol in self.listener_protocols.values())

    @property
    def uses_sasl(self) -> bool:
        return any(protocol.startswith("SASL_") for protocol in self.listener_protocols.values())

    @property
    def certificates(self) -> TestCertificates:
        """The CA, the broker's certificate and client certificates (generated on first use, under
        `<directory>/certs`)."""
        if self._certificates is None:
            self._certificates = TestCertificates.generate(os.path.join(self.directory, "certs"))
        return self._certificates

    @property
    def ca_file(self) -> str:
        return self.certificates.ca_file

    @property
    def jwks(self) -> JwksIssuer:
        """The token signer of `oauthbearer="jwks"` (its public key: `<directory>/oauth/jwks.json`)."""
        if self._jwks is None:
            self._jwks = JwksIssuer(os.path.join(self.directory, "oauth"), issuer=self.oauth_issuer,
                                    audience=self.oauth_audience)
        return self._jwks

    def cleanup(self) -> None:
        """Remove the generated files (a directory given by the caller is left)."""
        if self._owned_directory:
            self._finalizer()

    # --- tokens ---------------------------------------------------------------------------------------------------

    def mint_token(self, sub: str, lifetime_s: float = 3600, *, scope: str | Sequence[str] | None = None,
                   claims: dict | None = None) -> str:
        """A token the broker accepts for `sub`: signed by the JWKS key (oauthbearer="jwks") or unsecured."""
        if self.oauthbearer == "jwks":
            return self.jwks.mint_token(sub, lifetime_s, scope=scope, claims=claims)
        return unsecured_token(sub, lifetime_s, scope=scope, claims=claims)

    def expired_token(self, sub: str) -> str:
        """A token for `sub`, otherwise valid, that expired an hour ago."""
        if self.oauthbearer == "jwks":
            return self.jwks.expired_token(sub)
        return expired_unsecured_token(sub)

    # --- the broker's side ----------------------------------------------------------------------------------------

    def listeners_setting(self, host: str = "127.0.0.1", ports: Mapping[str, int] | None = None) -> str:
        """`listeners` for one broker: every listener on `host`, at `ports[name]` (default 0: a free port)."""
        host = f"[{host}]" if ":" in host else host
        return ",".join(f"{name}://{host}:{(ports or {}).get(name, 0)}" for name in self.listener_protocols)

    def broker_settings(self) -> dict[str, str]:
        """Every broker setting of this setup except `listeners` (see `listeners_setting`), by Kafka name."""
        settings = {"listener.security.protocol.map": ",".join(f"{name}:{protocol}" for name, protocol
                                                               in self._protocol_map().items())}
        if self.uses_tls:
            settings.update(self._tls_settings())
        if self.uses_sasl:
            settings["sasl.enabled.mechanisms"] = ",".join(self.mechanisms)
            for listener, protocol in self.listener_protocols.items():
                if protocol.startswith("SASL_"):
                    settings.update(self._sasl_settings(listener))
            if "OAUTHBEARER" in self.mechanisms and self.oauthbearer == "jwks":
                settings["sasl.oauthbearer.jwks.endpoint.url"] = self.jwks.jwks_url
                if self.oauth_issuer is not None:
                    settings["sasl.oauthbearer.expected.issuer"] = self.oauth_issuer
                if self.oauth_audience is not None:
                    settings["sasl.oauthbearer.expected.audience"] = self.oauth_audience
        if self.acls:
            settings["authorizer.class.name"] = STANDARD_AUTHORIZER
            settings["allow.everyone.if.no.acl.found"] = str(self.allow_everyone_if_no_acl_found).lower()
            if self.super_users:
                settings["super.users"] = ";".join(self.principal(user) for user in self.super_users)
        settings.update({str(name): str(value) for name, value in self.settings.items()})
        return settings

    def scram_users(self) -> list[tuple[str, str, str]]:
        """(user, mechanism, password) for each user and enabled SCRAM mechanism: what goes into the broker's
        credential store once it runs."""
        if not self.uses_sasl:
            return []
        return [(user, mechanism, password) for user, password in self.users.items()
                for mechanism in self.mechanisms if mechanism in SCRAM_MECHANISMS]

    @staticmethod
    def principal(user: str) -> str:
        """`User:<user>` for a name; a principal ("User:CN=alice") as it is."""
        return user if ":" in user else f"User:{user}"

    def _protocol_map(self) -> dict[str, str]:
        protocols = {protocol: protocol for protocol in PROTOCOLS}  # Kafka's default map, kept for other listeners
        protocols.update(self.listener_protocols)
        return protocols

    def _client_auth(self, listener: str) -> str:
        if isinstance(self.client_auth, str):
            return self.client_auth if self.listener_protocols[listener] == "SSL" else "none"
        return self.client_auth.get(listener, "none")

    def _tls_settings(self) -> dict[str, str]:
        certificates = self.certificates
        settings = {"ssl.keystore.type": "PEM", "ssl.keystore.location": certificates.broker.keystore_file,
                    "ssl.truststore.type": "PEM", "ssl.truststore.location": certificates.ca_file}
        for listener in self.listener_protocols:
            client_auth = self._client_auth(listener)
            if client_auth != "none":
                settings[f"listener.name.{listener.lower()}.ssl.client.auth"] = client_auth
        if self.principal_mapping_rules is not None:
            settings["ssl.principal.mapping.rules"] = self.principal_mapping_rules
        return settings

    def _sasl_settings(self, listener: str) -> dict[str, str]:
        prefix = f"listener.name.{listener.lower()}."
        settings = {}
        for mechanism in self.mechanisms:
            settings[f"{prefix}{mechanism.lower()}.sasl.jaas.config"] = self._server_jaas(mechanism)
        if "OAUTHBEARER" in self.mechanisms and self.oauthbearer == "jwks":
            settings[f"{prefix}oauthbearer.sasl.server.callback.handler.class"] = OAUTHBEARER_VALIDATOR
        return settings

    def _server_jaas(self, mechanism: str) -> str:
        """The broker's JAAS line for a mechanism: PLAIN lists the users (`user_<name>="<password>"`)."""
        if mechanism == "PLAIN":
            users = " ".join(f"user_{name}={_quoted(password)}" for name, password in self.users.items())
            return f"{PLAIN_LOGIN} required {users};" if users else f"{PLAIN_LOGIN} required;"
        if mechanism in SCRAM_MECHANISMS:
            return f"{SCRAM_LOGIN} required;"
        return f"{OAUTHBEARER_LOGIN} required;"

    # --- the clients' side ----------------------------------------------------------------------------------------

    def client_config(self, family: str, listener: str, *, bootstrap: str | None = None, user: str | None = None,
                      password: str | None = None, mechanism: str | None = None,
                      certificate: IssuedCertificate | str | bool | None = None, ca_file: str | None = None,
                      token: str | None = None) -> dict:
        """A ready configuration of `family` for `listener` (see the module docstring), with the bootstrap
        address when `bootstrap` is given."""
        if family not in _FAMILY_BUILDERS:
            raise ValueError(f"unknown client family {family!r}; known: {', '.join(FAMILIES)}")
        return _FAMILY_BUILDERS[family](self.connection(listener, bootstrap=bootstrap, user=user, password=password,
                                                        mechanism=mechanism, certificate=certificate,
                                                        ca_file=ca_file, token=token))

    def connection(self, listener: str, *, bootstrap: str | None = None, user: str | None = None,
                   password: str | None = None, mechanism: str | None = None,
                   certificate: IssuedCertificate | str | bool | None = None, ca_file: str | None = None,
                   token: str | None = None) -> ClientConnection:
        """What a client needs for `listener`, independent of any client library (`client_config` turns it into
        one family's configuration)."""
        protocol = self._protocol_of(listener)
        user = user if user is not None else self.default_user
        tls = sasl = None
        if protocol in ("SSL", "SASL_SSL"):
            tls = TlsClientSettings(ca_file=ca_file or self.ca_file,
                                    certificate=self._client_certificate(listener, certificate, user))
        if protocol.startswith("SASL_"):
            sasl = self._sasl_client(mechanism, user, password, token)
        return ClientConnection(listener.upper(), protocol, bootstrap, tls, sasl)

    @property
    def default_user(self) -> str:
        """The user clients authenticate as when none is named: the first user that is no super user (else the
        first user; "alice" when there are none)."""
        supers = {self.principal(user) for user in self.super_users}
        ordinary = [name for name in self.users if self.principal(name) not in supers]
        return (ordinary or list(self.users) or ["alice"])[0]

    def _protocol_of(self, listener: str) -> str:
        protocol = self.listener_protocols.get(listener.upper())
        if protocol is None:
            raise ValueError(f"no listener {listener!r}; the listeners are {', '.join(self.listener_protocols)}")
        return protocol

    def _client_certificate(self, listener: str, certificate, user: str) -> IssuedCertificate | None:
        if certificate is False:
            return None
        if isinstance(certificate, IssuedCertificate):
            return certificate
        if isinstance(certificate, str):
            return self.certificates.client(certificate)
        if certificate is True or self._client_auth(listener.upper()) != "none":
            return self.certificates.client(user)
        return None

    def _sasl_client(self, mechanism: str | None, user: str, password: str | None, token: str | None
                     ) -> SaslClientSettings:
        if mechanism is None:
            mechanism = "PLAIN" if "PLAIN" in self.mechanisms else self.mechanisms[0]
        mechanism = mechanism.upper()
        if mechanism not in self.mechanisms:
            raise ValueError(f"SASL mechanism {mechanism} is not enabled; enabled: {', '.join(self.mechanisms)}")
        if mechanism == "OAUTHBEARER":
            return SaslClientSettings(mechanism, user, None, token or self.mint_token(user),
                                      unsecured=self.oauthbearer == "unsecured",
                                      token_file=None if self.oauthbearer == "unsecured" else self._token_file)
        if password is None:
            if user not in self.users:
                raise ValueError(f"no user {user!r} in this setup; give its password")
            password = self.users[user]
        return SaslClientSettings(mechanism, user, password, None)

    def _token_file(self, token: str) -> str:
        """A file holding `token` (for the Java client's file-based token endpoint)."""
        directory = os.path.join(self.directory, "oauth", "tokens")
        os.makedirs(directory, exist_ok=True)
        descriptor, path = tempfile.mkstemp(suffix=".jwt", dir=directory)
        with os.fdopen(descriptor, "w", encoding="ascii") as file:
            file.write(token)
        return path


@dataclass(frozen=True)
class TlsClientSettings:
    ca_file: str                              # the CA the client trusts
    certificate: IssuedCertificate | None     # the client certificate it presents (mTLS), if any

    def ssl_context(self) -> ssl.SSLContext:
        """A client context trusting `ca_file`, checking host names, presenting the certificate when there is one."""
        context = ssl.create_default_context(cafile=self.ca_file)
        if self.certificate is not None:
            context.load_cert_chain(self.certificate.chain_file, self.certificate.key_file)
        return context


@dataclass(frozen=True)
class SaslClientSettings:
    mechanism: str
    user: str
    password: str | None             # PLAIN and SCRAM
    token: str | None                # OAUTHBEARER
    unsecured: bool = False          # OAUTHBEARER: the broker runs Kafka's unsecured validator
    token_file: object = None        # OAUTHBEARER with JWKS: token -> a file holding it (Java's token endpoint)

    @property
    def token_expiry_s(self) -> float:
        """The token's `exp` (seconds since the epoch)."""
        return float(token_claims(self.token).get("exp", time.time()))


@dataclass(frozen=True)
class ClientConnection:
    """How a client reaches one listener, whatever its library: protocol, TLS and SASL settings."""

    listener: str
    security_protocol: str
    bootstrap: str | None
    tls: TlsClientSettings | None
    sasl: SaslClientSettings | None


# --- per client family --------------------------------------------------------------------------------------------

def _kafka_python(connection: ClientConnection) -> dict:
    config: dict = {"security_protocol": connection.security_protocol}
    if connection.bootstrap:
        config["bootstrap_servers"] = connection.bootstrap
    if connection.tls is not None:
        config.update(ssl_cafile=connection.tls.ca_file, ssl_check_hostname=True)
        if connection.tls.certificate is not None:
            config.update(ssl_certfile=connection.tls.certificate.chain_file,
                          ssl_keyfile=connection.tls.certificate.key_file)
    sasl = connection.sasl
    if sasl is not None:
        config["sasl_mechanism"] = sasl.mechanism
        if sasl.mechanism == "OAUTHBEARER":
            config["sasl_oauth_token_provider"] = _kafka_python_token_provider(sasl.token)
        else:
            config.update(sasl_plain_username=sasl.user, sasl_plain_password=sasl.password)
    return config


def _aiokafka(connection: ClientConnection) -> dict:
    config: dict = {"security_protocol": connection.security_protocol}
    if connection.bootstrap:
        config["bootstrap_servers"] = connection.bootstrap
    if connection.tls is not None:
        config["ssl_context"] = connection.tls.ssl_context()
    sasl = connection.sasl
    if sasl is not None:
        config["sasl_mechanism"] = sasl.mechanism
        if sasl.mechanism == "OAUTHBEARER":
            config["sasl_oauth_token_provider"] = _aiokafka_token_provider(sasl.token)
        else:
            config.update(sasl_plain_username=sasl.user, sasl_plain_password=sasl.password)
    return config


def _librdkafka(connection: ClientConnection, *, python: bool) -> dict:
    config: dict = {"security.protocol": connection.security_protocol.lower()}
    if connection.bootstrap:
        config["bootstrap.servers"] = connection.bootstrap
    if connection.tls is not None:
        config["ssl.ca.location"] = connection.tls.ca_file
        if connection.tls.certificate is not None:
            config.update({"ssl.certificate.location": connection.tls.certificate.chain_file,
                           "ssl.key.location": connection.tls.certificate.key_file})
    sasl = connection.sasl
    if sasl is not None:
        config["sasl.mechanisms"] = sasl.mechanism
        if sasl.mechanism != "OAUTHBEARER":
            config.update({"sasl.username": sasl.user, "sasl.password": sasl.password})
        elif python:
            # librdkafka refuses to send a token it sees expired: report a minute ahead then, so that the broker
            # (whose refusal is under test) is the one deciding
            token, expiry = sasl.token, max(sasl.token_expiry_s, time.time() + 60)
            config["oauth_cb"] = lambda _config: (token, expiry)
        elif sasl.unsecured:
            config.update({"enable.sasl.oauthbearer.unsecure.jwt": "true",
                           "sasl.oauthbearer.config": f"principal={sasl.user}"})
        else:
            raise ValueError("kcat cannot send a given OAUTHBEARER token (librdkafka makes unsecured tokens itself "
                             "or fetches them over HTTPS): use oauthbearer='unsecured' for kcat")
    return config


def _kafkajs(connection: ClientConnection) -> dict:
    config: dict = {}
    if connection.bootstrap:
        config["brokers"] = connection.bootstrap.split(",")
    if connection.tls is not None:
        tls: dict = {"ca": [_read(connection.tls.ca_file)], "rejectUnauthorized": True}
        if connection.tls.certificate is not None:
            tls.update(cert=connection.tls.certificate.chain_pem, key=connection.tls.certificate.key_pem)
        config["ssl"] = tls
    sasl = connection.sasl
    if sasl is not None:
        if sasl.mechanism == "OAUTHBEARER":
            config["sasl"] = {"mechanism": "oauthbearer", "oauthBearerToken": sasl.token}
        else:
            config["sasl"] = {"mechanism": sasl.mechanism.lower(), "username": sasl.user, "password": sasl.password}
    return config


def _sarama(connection: ClientConnection) -> dict:
    security: dict = {}
    if connection.tls is not None:
        certificate = connection.tls.certificate
        security["tls"] = {"enable": True, "ca_file": connection.tls.ca_file,
                           "cert_file": certificate.chain_file if certificate else "",
                           "key_file": certificate.key_file if certificate else "", "server_name": ""}
    sasl = connection.sasl
    if sasl is not None:
        security["sasl"] = {"enable": True, "mechanism": sasl.mechanism, "user": sasl.user,
                            "password": sasl.password or "", "token": sasl.token or ""}
    config: dict = {"security": security}
    if connection.bootstrap:
        config["bootstrap"] = connection.bootstrap
    return config


def _java(connection: ClientConnection) -> dict:
    config = {"security.protocol": connection.security_protocol}
    if connection.bootstrap:
        config["bootstrap.servers"] = connection.bootstrap
    if connection.tls is not None:
        config.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": connection.tls.ca_file})
        if connection.tls.certificate is not None:
            config.update({"ssl.keystore.type": "PEM",
                           "ssl.keystore.location": connection.tls.certificate.keystore_file})
    sasl = connection.sasl
    if sasl is not None:
        config["sasl.mechanism"] = sasl.mechanism
        config.update(_java_sasl(sasl))
    return config


def _java_sasl(sasl: SaslClientSettings) -> dict[str, str]:
    if sasl.mechanism == "PLAIN":
        module = PLAIN_LOGIN
    elif sasl.mechanism in SCRAM_MECHANISMS:
        module = SCRAM_LOGIN
    elif sasl.unsecured:
        claims = token_claims(sasl.token)
        lifetime = int(claims.get("exp", time.time() + 3600) - time.time())
        return {"sasl.jaas.config": f"{OAUTHBEARER_LOGIN} required unsecuredLoginStringClaim_sub="
                                    f"{_quoted(claims.get('sub', sasl.user))} "
                                    f"unsecuredLoginLifetimeSeconds=\"{lifetime}\";"}
    else:
        return {"sasl.jaas.config": f"{OAUTHBEARER_LOGIN} required;",
                "sasl.login.callback.handler.class": OAUTHBEARER_LOGIN_HANDLER,
                "sasl.oauthbearer.token.endpoint.url": "file://" + sasl.token_file(sasl.token)}
    return {"sasl.jaas.config": f"{module} required username={_quoted(sasl.user)} "
                                f"password={_quoted(sasl.password)};"}


_FAMILY_BUILDERS = {
    "kafka-python": _kafka_python,
    "aiokafka": _aiokafka,
    "confluent-kafka": lambda connection: _librdkafka(connection, python=True),
    "kcat": lambda connection: _librdkafka(connection, python=False),
    "kafkajs": _kafkajs,
    "sarama": _sarama,
    "java": _java,
}


def _kafka_python_token_provider(token: str):
    try:
        from kafka.net.sasl.oauth import AbstractTokenProvider  # kafka-python 3
    except ImportError:
        from kafka.sasl.oauth import AbstractTokenProvider  # kafka-python 2

    class StaticTokenProvider(AbstractTokenProvider):
        def token(self):
            return token

    return StaticTokenProvider()


def _aiokafka_token_provider(token: str):
    from aiokafka.abc import AbstractTokenProvider

    class StaticTokenProvider(AbstractTokenProvider):
        async def token(self):
            return token

    return StaticTokenProvider()


# --- helpers ------------------------------------------------------------------------------------------------------

def _listener_protocols(listeners: Sequence[str] | Mapping[str, str]) -> dict[str, str]:
    if isinstance(listeners, str):
        listeners = [listeners]
    if isinstance(listeners, Mapping):
        protocols = {name.upper(): protocol.upper() for name, protocol in listeners.items()}
    else:
        protocols = {name.upper(): name.upper() for name in listeners}
    if not protocols:
        raise ValueError("a security setup needs at least one listener")
    for name, protocol in protocols.items():
        if protocol not in PROTOCOLS:
            raise ValueError(f"listener {name}: unknown security protocol {protocol!r}; known: {', '.join(PROTOCOLS)}"
                             f" (name other listeners as {{name: protocol}})")
    return protocols


def _check_client_auth(value: str) -> None:
    if value not in ("none", "requested", "required"):
        raise ValueError(f"client_auth is none, requested or required, got {value!r}")


def _quoted(value: str) -> str:
    """A JAAS option value in double quotes (backslash and quote escaped)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _read(path: str) -> str:
    with open(path, encoding="ascii") as file:
        return file.read()
