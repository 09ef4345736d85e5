"""The SASL state of one connection on a SASL_PLAINTEXT or SASL_SSL listener (Kafka's SaslServerAuthenticator).

States, as Kafka names them:

    INITIAL_REQUEST / HANDSHAKE_OR_VERSIONS_REQUEST --ApiVersions--> HANDSHAKE_REQUEST
    (any of those) --SaslHandshake(mechanism enabled)--> AUTHENTICATE --tokens...--> COMPLETE
    COMPLETE --SaslHandshake, once the session has a lifetime (KIP-368)--> REAUTH_PROCESS_HANDSHAKE
    REAUTH_PROCESS_HANDSHAKE --same mechanism--> AUTHENTICATE, --another mechanism--> REAUTH_BAD_MECHANISM
    anything failed --> FAILED (the connection closes)

Before authentication only ApiVersions (once, before the handshake), SaslHandshake and then the mechanism's tokens
are allowed; any other request closes the connection ("Unexpected Kafka request of type METADATA during SASL
handshake."). SaslHandshake v0 means the tokens that follow are raw frames (a 4-byte size and the token, both
ways); v1 means they come in SaslAuthenticate requests. Refusals are answered as Kafka answers them and then the
connection closes: UNSUPPORTED_SASL_MECHANISM with the enabled mechanisms; SASL_AUTHENTICATION_FAILED with the
mechanism's message (a v0 token failure just closes). While authenticating, a frame over
`sasl.server.max.receive.size` closes the connection.

Re-authentication (KIP-368): when authentication completes, the session lifetime is
min(`connections.max.reauth.ms` when > 0, the credential's remaining lifetime (OAUTHBEARER)), sent to the client in
SaslAuthenticate v1+. Once a session has a lifetime, a SaslHandshake on the authenticated connection (at most one per
second) starts re-authentication, which must keep the mechanism and the principal; a connection whose session has
expired is closed on its next request that does not start re-authentication. After authentication (or on a
connection with no lifetime) SaslHandshake and SaslAuthenticate get ILLEGAL_SASL_STATE, as KafkaApis answers them.

The server calls `admit` at dispatch, the SaslHandshake and SaslAuthenticate handlers call `handshake` and
`authenticate`, and the connection hands raw v0 tokens to `raw_token`. Messages are Kafka's.

Between SaslHandshake and completion, a request other than SaslAuthenticate is answered with that API's error
response (ILLEGAL_SASL_STATE, `answer_refused_request` tells the server so) before the close, as Kafka does.

Deviation: an ApiVersions request answered with INVALID_REQUEST (a v3+
client software name Kafka refuses) counts as the one ApiVersions allowed; Kafka allows another.
"""
from __future__ import annotations

import enum
import logging
import re
import time
from collections.abc import Callable

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import SaslAuthenticateResponse, SaslHandshakeResponse

log = logging.getLogger(__name__)

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
MIN_REAUTH_INTERVAL_S = 1.0  # Kafka refuses to start re-authenticating more often than once a second


class SaslState(enum.Enum):
    INITIAL_REQUEST = enum.auto()
    HANDSHAKE_OR_VERSIONS_REQUEST = enum.auto()
    HANDSHAKE_REQUEST = enum.auto()
    AUTHENTICATE = enum.auto()
    COMPLETE = enum.auto()
    FAILED = enum.auto()
    REAUTH_PROCESS_HANDSHAKE = enum.auto()
    REAUTH_BAD_MECHANISM = enum.auto()


class AuthenticationFailed(Exception):
    """Send `response` (None: nothing) and close the connection; str() is the reason for the log line."""

    def __init__(self, response, message: str):
        super().__init__(message)
        self.response = response


class SaslAuthenticator:
    def __init__(self, listener, session, new_server: Callable[[str], object], *,
                 clock: Callable[[], float] = time.monotonic):
        """`listener`: the ListenerSecurity; `session`: the connection's Session (its principal and
        sasl_mechanism are set on completion); `new_server(mechanism)`: a fresh SaslServer."""
        self._mechanisms = list(listener.sasl_enabled_mechanisms)
        self._max_reauth_ms = listener.connections_max_reauth_ms
        self.max_receive_size = listener.sasl_server_max_receive_size
        self._session = session
        self._new_server = new_server
        self._clock = clock
        self.state = SaslState.INITIAL_REQUEST
        self._server = None
        self._mechanism: str | None = None
        self._kafka_headers = False          # SaslHandshake v1+: tokens come in SaslAuthenticate requests
        self._reauthenticating = False
        self._bad_mechanism_message = ""
        self.answer_refused_request = False  # the last refusal of `admit` is answered before the close
        self._expires_at: float | None = None    # clock time the session ends; None: never
        self._last_reauth_start: float | None = None

    @property
    def complete(self) -> bool:
        return self.state is SaslState.COMPLETE

    @property
    def failed(self) -> bool:
        """The exchange failed: the connection closes once the refusal (if any) is sent."""
        return self.state is SaslState.FAILED

    @property
    def raw_tokens(self) -> bool:
        """The next frame is a raw token (after SaslHandshake v0), not a Kafka request."""
        return self.state is SaslState.AUTHENTICATE and not self._kafka_headers

    @property
    def session_expires_at(self) -> float | None:
        return self._expires_at

    @property
    def _text(self) -> str:
        return "re-authentication" if self._reauthenticating else "authentication"

    # --- the gate -------------------------------------------------------------------------------------------------

    def admit(self, api_key: int, api_name: str) -> str | None:
        """At dispatch: None to serve the request (its handler runs), else why the connection must close."""
        state = self.state
        if state is SaslState.COMPLETE:
            return self._admit_authenticated(api_key)
        if state in (SaslState.INITIAL_REQUEST, SaslState.HANDSHAKE_OR_VERSIONS_REQUEST,
                     SaslState.HANDSHAKE_REQUEST):
            return self._admit_handshake(api_key, api_name)
        if state is SaslState.AUTHENTICATE and api_key == SASL_AUTHENTICATE:
            return None
        self.state = SaslState.FAILED
        if state is SaslState.REAUTH_BAD_MECHANISM:
            return self._bad_mechanism_message
        if state is SaslState.AUTHENTICATE:
            self.answer_refused_request = True  # Kafka answers it with its API's ILLEGAL_SASL_STATE error first
            return f"Unexpected Kafka request of type {_kafka_name(api_name)} during SASL authentication."
        return f"Unexpected Kafka request of type {_kafka_name(api_name)} in SASL state {state.name}"

    def _admit_handshake(self, api_key: int, api_name: str) -> str | None:
        if api_key == SASL_HANDSHAKE:
            return None
        if api_key == API_VERSIONS and self.state is not SaslState.HANDSHAKE_REQUEST:
            self.state = SaslState.HANDSHAKE_REQUEST
            return None
        state, self.state = self.state, SaslState.FAILED
        if api_key == API_VERSIONS:
            return f"Unexpected ApiVersions request received during SASL authentication state {state.name}"
        return f"Unexpected Kafka request of type {_kafka_name(api_name)} during SASL handshake."

    def _admit_authenticated(self, api_key: int) -> str | None:
        if self._expires_at is None:
            return None
        now = self._clock()
        if api_key == SASL_HANDSHAKE and (self._last_reauth_start is None
                                          or now - self._last_reauth_start >= MIN_REAUTH_INTERVAL_S):
            self._last_reauth_start = now
            self._reauthenticating = True
            self.state = SaslState.REAUTH_PROCESS_HANDSHAKE
            return None
        if now > self._expires_at:
            self.state = SaslState.FAILED
            return "the SASL session expired (the client did not re-authenticate in time)"
        return None

    # --- SaslHandshake --------------------------------------------------------------------------------------------

    def handshake(self, version: int, mechanism: str) -> SaslHandshakeResponse:
        if self.state is SaslState.COMPLETE:  # no re-authentication due: KafkaApis' answer
            return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
        if mechanism not in self._mechanisms:
            self.state = SaslState.FAILED
            raise AuthenticationFailed(
                SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=self._mechanisms),
                f"Unsupported SASL mechanism {mechanism}")
        response = SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=self._mechanisms)
        self._kafka_headers = version >= 1
        if self._reauthenticating and mechanism != self._mechanism:
            self._bad_mechanism_message = (f"SASL mechanism '{mechanism}' requested by client is not supported for "
                                           f"re-authentication of mechanism '{self._mechanism}'")
            self.state = SaslState.REAUTH_BAD_MECHANISM
            return response
        self._mechanism = mechanism
        self._server = self._new_server(mechanism)
        self.state = SaslState.AUTHENTICATE
        return response

    # --- tokens ---------------------------------------------------------------------------------------------------

    def authenticate(self, version: int, auth_bytes: bytes) -> SaslAuthenticateResponse:
        """A SaslAuthenticate request (v1 handshake)."""
        if self.state is SaslState.COMPLETE:
            return SaslAuthenticateResponse(
                error_code=ErrorCode.ILLEGAL_SASL_STATE, auth_bytes=b"",
                error_message="SaslAuthenticate request received after successful authentication")
        try:
            challenge = self._evaluate(bytes(auth_bytes))
        except _TokenRefused as exc:
            raise AuthenticationFailed(SaslAuthenticateResponse(
                error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=exc.client_message, auth_bytes=b""),
                exc.log_message) from None
        lifetime_ms = self._complete() if self._server.complete else 0
        return SaslAuthenticateResponse(error_code=ErrorCode.NONE, error_message=None, auth_bytes=challenge,
                                        session_lifetime_ms=lifetime_ms)

    def raw_token(self, token: bytes) -> bytes:
        """A raw token (v0 handshake): the challenge to send back as a size-prefixed frame."""
        try:
            challenge = self._evaluate(token)
        except _TokenRefused as exc:
            raise AuthenticationFailed(None, exc.log_message) from None
        if self._server.complete:
            self._complete()
        return challenge

    def _evaluate(self, token: bytes) -> bytes:
        from .sasl.mechanism import SaslAuthenticationError  # needed only once a client authenticates

        try:
            challenge = self._server.evaluate(token) or b""
        except SaslAuthenticationError as exc:
            self.state = SaslState.FAILED
            message = exc.client_message(self._reauthenticating)
            reason = getattr(exc, "reason", None)  # details kept from the client (Kafka's SaslException)
            raise _TokenRefused(message, f"{message}: {reason}" if reason else message) from None
        if self._server.complete and self._reauthenticating:
            self._ensure_principal_unchanged(self._server.principal)
        return challenge

    def _ensure_principal_unchanged(self, principal) -> None:
        previous = self._session.principal
        if principal != previous:
            self.state = SaslState.FAILED
            raise _TokenRefused(f"Cannot change principals during re-authentication from "
                                f"{previous.principal_type}.{previous.name}: "
                                f"{principal.principal_type}.{principal.name}")

    def _complete(self) -> int:
        """Authentication done: set the session's principal; the session lifetime in ms (0: none)."""
        self._session.principal = self._server.principal
        self._session.sasl_mechanism = self._mechanism
        lifetime_ms = self._session_lifetime_ms()
        log.debug("%s complete for %s with %s; session lifetime %d ms", self._text, self._server.principal,
                  self._mechanism, lifetime_ms)
        self.state = SaslState.COMPLETE
        self._reauthenticating = False
        return lifetime_ms

    def _session_lifetime_ms(self) -> int:
        credential_ms = getattr(self._server, "lifetime_ms", None)
        max_reauth_ms = self._max_reauth_ms if self._max_reauth_ms and self._max_reauth_ms > 0 else None
        if credential_ms is None and max_reauth_ms is None:
            self._expires_at = None
            return 0
        candidates = [value for value in (credential_ms, max_reauth_ms) if value is not None]
        lifetime_ms = max(0, min(candidates))
        self._expires_at = self._clock() + lifetime_ms / 1000
        return lifetime_ms


class _TokenRefused(Exception):
    def __init__(self, client_message: str, log_message: str | None = None):
        super().__init__(client_message)
        self.client_message = client_message
        self.log_message = log_message or client_message


def _kafka_name(api_name: str) -> str:
    """Kafka's ApiKeys name of an API: Metadata -> METADATA, ApiVersions -> API_VERSIONS."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", api_name).upper()
