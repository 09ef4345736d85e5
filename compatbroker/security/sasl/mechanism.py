"""The server side of one SASL authentication exchange, whatever the mechanism, and the choice of mechanism.

A `SaslServer` is made fresh for every authentication (and re-authentication, KIP-368) of a connection. The
connection's authenticator feeds it each token the client sends (SaslAuthenticate's auth_bytes, or a raw token
after SaslHandshake v0) and sends back what `evaluate` returns, until `complete`. Then `principal` is who the
client is, and `lifetime_ms` how long the credential remains valid (OAUTHBEARER: ms until the token expires; None
for PLAIN and SCRAM, which Kafka gives no lifetime).

`evaluate` raises nothing but `SaslAuthenticationError`, whatever the client sends. Kafka distinguishes two kinds:
- SaslAuthenticationException: the message goes to the client as is (e.g. PLAIN's "Authentication failed: Invalid
  username or password") -> `SaslAuthenticationError(message)`;
- SaslException: the client gets a generic message (`Authentication failed during authentication due to invalid
  credentials with SASL mechanism SCRAM-SHA-256`) so that nothing leaks, e.g. whether a user exists ->
  `SaslCredentialsError(mechanism, reason)`, whose `reason` is for the broker's log only.
`client_message(reauthenticating)` gives the text for the response either way (Kafka words the generic one
"during re-authentication" when the connection re-authenticates).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..principal import KafkaPrincipal
    from ..scram_credentials import ScramCredentialStore

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
OAUTHBEARER = "OAUTHBEARER"
SUPPORTED_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER)


class SaslAuthenticationError(Exception):
    """Authentication failed; str(exc) is the message the client gets with SASL_AUTHENTICATION_FAILED."""

    def client_message(self, reauthenticating: bool = False) -> str:
        return str(self)


class SaslCredentialsError(SaslAuthenticationError):
    """A failure whose details stay on the broker (Kafka's SaslException): the client gets the generic text."""

    def __init__(self, mechanism: str, reason: str):
        self.mechanism = mechanism
        self.reason = reason  # for the broker's log line
        super().__init__(self.client_message())

    def client_message(self, reauthenticating: bool = False) -> str:
        which = "re-authentication" if reauthenticating else "authentication"
        return f"Authentication failed during {which} due to invalid credentials with SASL mechanism {self.mechanism}"


class SaslServer(Protocol):
    mechanism: str
    principal: KafkaPrincipal | None   # once complete
    lifetime_ms: int | None            # once complete: OAUTHBEARER's remaining token lifetime, else None

    def evaluate(self, token: bytes) -> bytes:
        """The challenge to send back (b"" for none); SaslAuthenticationError when the exchange fails."""

    @property
    def complete(self) -> bool:
        """The exchange has succeeded: `principal` is set."""


Clock = Callable[[], int]


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def as_clock(now_ms: int | Clock | None) -> Clock:
    """A clock from what callers give: None (wall clock), a fixed time in ms (tests), or a function."""
    if now_ms is None:
        return wall_clock_ms
    if callable(now_ms):
        return now_ms
    fixed = int(now_ms)
    return lambda: fixed


def new_sasl_server(mechanism: str, listener, scram: ScramCredentialStore, *,
                    now_ms: int | Clock | None = None) -> SaslServer:
    """A fresh server for `mechanism` on `listener` (a settings.ListenerSecurity: its jaas options, server callback
    handlers and sasl.oauthbearer.* settings). ValueError for a mechanism this broker does not implement (the
    authenticator answers UNSUPPORTED_SASL_MECHANISM before getting here for mechanisms the listener does not
    enable)."""
    from . import oauthbearer, plain, scram as scram_module  # the mechanisms import this module
    if mechanism == PLAIN:
        return plain.PlainSaslServer.for_listener(listener)
    if mechanism in (SCRAM_SHA_256, SCRAM_SHA_512):
        return scram_module.ScramSaslServer(mechanism, scram)
    if mechanism == OAUTHBEARER:
        return oauthbearer.OAuthBearerSaslServer.for_listener(listener, now_ms=as_clock(now_ms))
    raise ValueError(f"Unsupported SASL mechanism {mechanism}")


def check_listener(listener) -> None:
    """ValueError, with the setting to fix, when a mechanism the listener enables cannot work with its settings
    (today: OAUTHBEARER's JWKS file or unsecured validator options). Meant for broker start-up, so that a bad
    setting stops the start instead of failing every authentication."""
    if OAUTHBEARER in getattr(listener, "sasl_enabled_mechanisms", ()):
        from . import oauthbearer
        oauthbearer.check_listener(listener)
