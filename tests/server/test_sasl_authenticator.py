"""The SASL state machine of a connection (security.authenticator) with a stand-in mechanism and a clock the test
moves: Kafka's states, refusals and messages, and KIP-368 session lifetimes and re-authentication."""
from __future__ import annotations

import pytest

from compatbroker.security.authenticator import AuthenticationFailed, SaslAuthenticator, SaslState
from compatbroker.security.principal import KafkaPrincipal
from compatbroker.security.sasl import SaslAuthenticationError, SaslCredentialsError
from compatbroker.security.session import Session
from compatbroker.security.settings import ListenerSecurity

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 18, 17, 36, 3


class TwoStepServer:
    """Answers b"challenge" to the first token and completes on the second, as `name`."""

    def __init__(self, mechanism: str, name: str = "alice", lifetime_ms: int | None = None, error=None):
        self.mechanism = mechanism
        self.principal = None
        self.lifetime_ms = lifetime_ms
        self._name, self._error, self._steps = name, error, 0

    @property
    def complete(self) -> bool:
        return self.principal is not None

    def evaluate(self, token: bytes) -> bytes:
        if self._error is not None:
            raise self._error
        self._steps += 1
        if self._steps == 2:
            self.principal = KafkaPrincipal("User", self._name)
            return b""
        return b"challenge"


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _authenticator(*, reauth_ms: int = 0, servers=None, mechanisms=("PLAIN", "SCRAM-SHA-256")):
    listener = ListenerSecurity(listener_name="SASL_PLAINTEXT", security_protocol="SASL_PLAINTEXT",
                                sasl_enabled_mechanisms=mechanisms, connections_max_reauth_ms=reauth_ms)
    servers = servers if servers is not None else {}
    clock = Clock()
    session = Session(listener_name="SASL_PLAINTEXT", security_protocol="SASL_PLAINTEXT")
    authenticator = SaslAuthenticator(listener, session,
                                      lambda mechanism: servers.get(mechanism) or TwoStepServer(mechanism),
                                      clock=clock)
    return authenticator, session, clock


def _login(authenticator, mechanism: str = "PLAIN"):
    assert authenticator.admit(SASL_HANDSHAKE, "SaslHandshake") is None
    assert authenticator.handshake(1, mechanism).error_code == 0
    assert authenticator.admit(SASL_AUTHENTICATE, "SaslAuthenticate") is None
    first = authenticator.authenticate(2, b"one")
    assert (first.auth_bytes, first.session_lifetime_ms) == (b"challenge", 0)
    return authenticator.authenticate(2, b"two")


def test_the_exchange_moves_through_kafkas_states():
    authenticator, session, _ = _authenticator()
    assert authenticator.state is SaslState.INITIAL_REQUEST
    assert authenticator.admit(API_VERSIONS, "ApiVersions") is None
    assert authenticator.state is SaslState.HANDSHAKE_REQUEST
    response = _login(authenticator)
    assert (response.error_code, response.session_lifetime_ms) == (0, 0)
    assert authenticator.complete and authenticator.session_expires_at is None
    assert (session.principal, session.sasl_mechanism) == (KafkaPrincipal("User", "alice"), "PLAIN")
    assert authenticator.admit(METADATA, "Metadata") is None


@pytest.mark.parametrize("state_setup, api_key, api_name, message", [
    (lambda a: None, METADATA, "Metadata", "Unexpected Kafka request of type METADATA during SASL handshake."),
    (lambda a: a.admit(API_VERSIONS, "ApiVersions"), API_VERSIONS, "ApiVersions",
     "Unexpected ApiVersions request received during SASL authentication state HANDSHAKE_REQUEST"),
    (lambda a: a.handshake(1, "PLAIN"), API_VERSIONS, "ApiVersions",
     "Unexpected Kafka request of type API_VERSIONS during SASL authentication."),
    (lambda a: a.handshake(1, "PLAIN"), SASL_HANDSHAKE, "SaslHandshake",
     "Unexpected Kafka request of type SASL_HANDSHAKE during SASL authentication."),
])
def test_requests_out_of_turn_are_refused_with_kafkas_message(state_setup, api_key, api_name, message):
    authenticator, _, _ = _authenticator()
    state_setup(authenticator)
    assert authenticator.admit(api_key, api_name) == message
    assert authenticator.state is SaslState.FAILED


def test_unsupported_mechanism_answers_the_enabled_ones():
    authenticator, _, _ = _authenticator()
    with pytest.raises(AuthenticationFailed, match="Unsupported SASL mechanism GSSAPI") as failure:
        authenticator.handshake(1, "GSSAPI")
    assert (failure.value.response.error_code, failure.value.response.mechanisms) == (33, ["PLAIN", "SCRAM-SHA-256"])


def test_a_refused_token_answers_the_mechanisms_message():
    authenticator, _, _ = _authenticator(
        servers={"PLAIN": TwoStepServer("PLAIN", error=SaslAuthenticationError("Authentication failed: nope"))})
    authenticator.handshake(1, "PLAIN")
    with pytest.raises(AuthenticationFailed) as failure:
        authenticator.authenticate(2, b"x")
    assert (failure.value.response.error_code, failure.value.response.error_message) == \
        (58, "Authentication failed: nope")


def test_credential_errors_keep_their_details_from_the_client():
    error = SaslCredentialsError("SCRAM-SHA-256", "no such user alice")
    authenticator, _, _ = _authenticator(servers={"SCRAM-SHA-256": TwoStepServer("SCRAM-SHA-256", error=error)})
    authenticator.handshake(1, "SCRAM-SHA-256")
    with pytest.raises(AuthenticationFailed) as failure:
        authenticator.authenticate(2, b"x")
    assert failure.value.response.error_message == \
        "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
    assert "no such user alice" in str(failure.value)  # the broker's log line has them


@pytest.mark.parametrize("reauth_ms, credential_ms, expected", [
    (0, None, 0), (60_000, None, 60_000), (0, 5_000, 5_000), (60_000, 5_000, 5_000), (3_000, 5_000, 3_000),
    (60_000, -10, 0),
])
def test_session_lifetime_is_the_smaller_of_max_reauth_and_the_credential(reauth_ms, credential_ms, expected):
    authenticator, _, clock = _authenticator(
        reauth_ms=reauth_ms, servers={"PLAIN": TwoStepServer("PLAIN", lifetime_ms=credential_ms)})
    assert _login(authenticator).session_lifetime_ms == expected
    expires = authenticator.session_expires_at
    assert (expires is None) == (reauth_ms == 0 and credential_ms is None)
    if expires is not None:
        assert expires == pytest.approx(clock.now + expected / 1000)


def test_an_expired_session_closes_on_its_next_request_unless_it_reauthenticates():
    authenticator, _, clock = _authenticator(reauth_ms=10_000)
    _login(authenticator)
    clock.now += 9.9
    assert authenticator.admit(METADATA, "Metadata") is None
    clock.now += 0.2
    assert authenticator.admit(SASL_HANDSHAKE, "SaslHandshake") is None  # re-authentication may still begin
    assert authenticator.state is SaslState.REAUTH_PROCESS_HANDSHAKE

    authenticator, _, clock = _authenticator(reauth_ms=10_000)
    _login(authenticator)
    clock.now += 10.1
    assert "expired" in authenticator.admit(METADATA, "Metadata")


def test_reauthentication_starts_at_most_once_a_second():
    authenticator, _, clock = _authenticator(reauth_ms=60_000)
    _login(authenticator)
    assert authenticator.admit(SASL_HANDSHAKE, "SaslHandshake") is None
    _reauthenticate(authenticator)
    clock.now += 0.5
    assert authenticator.admit(SASL_HANDSHAKE, "SaslHandshake") is None
    assert authenticator.complete  # not re-authenticating: the handler answers ILLEGAL_SASL_STATE
    assert authenticator.handshake(1, "PLAIN").error_code == 34
    clock.now += 0.5
    assert authenticator.admit(SASL_HANDSHAKE, "SaslHandshake") is None
    assert authenticator.state is SaslState.REAUTH_PROCESS_HANDSHAKE


def test_no_reauthentication_without_a_session_lifetime():
    authenticator, _, _ = _authenticator(reauth_ms=0)
    _login(authenticator)
    assert authenticator.admit(SASL_HANDSHAKE, "SaslHandshake") is None
    assert authenticator.handshake(1, "PLAIN").error_code == 34
    assert authenticator.complete


def test_reauthentication_must_keep_the_principal():
    servers = {}
    authenticator, session, _ = _authenticator(reauth_ms=60_000, servers=servers)
    _login(authenticator)
    servers["PLAIN"] = TwoStepServer("PLAIN", name="mallory")
    authenticator.admit(SASL_HANDSHAKE, "SaslHandshake")
    authenticator.handshake(1, "PLAIN")
    authenticator.authenticate(2, b"one")
    with pytest.raises(AuthenticationFailed) as failure:
        authenticator.authenticate(2, b"two")
    assert failure.value.response.error_message == \
        "Cannot change principals during re-authentication from User.alice: User.mallory"
    assert session.principal == KafkaPrincipal("User", "alice")


def test_reauthentication_must_keep_the_mechanism():
    authenticator, _, _ = _authenticator(reauth_ms=60_000)
    _login(authenticator, "PLAIN")
    authenticator.admit(SASL_HANDSHAKE, "SaslHandshake")
    assert authenticator.handshake(1, "SCRAM-SHA-256").error_code == 0
    assert authenticator.admit(SASL_AUTHENTICATE, "SaslAuthenticate") == (
        "SASL mechanism 'SCRAM-SHA-256' requested by client is not supported for re-authentication of mechanism "
        "'PLAIN'")


def test_reauthentication_errors_say_re_authentication():
    error = SaslCredentialsError("PLAIN", "bad")
    servers = {}
    authenticator, _, _ = _authenticator(reauth_ms=60_000, servers=servers)
    _login(authenticator)
    servers["PLAIN"] = TwoStepServer("PLAIN", error=error)
    authenticator.admit(SASL_HANDSHAKE, "SaslHandshake")
    authenticator.handshake(1, "PLAIN")
    with pytest.raises(AuthenticationFailed) as failure:
        authenticator.authenticate(2, b"x")
    assert "during re-authentication due to invalid credentials" in failure.value.response.error_message


def test_v0_handshake_means_raw_tokens():
    authenticator, session, _ = _authenticator()
    authenticator.handshake(0, "PLAIN")
    assert authenticator.raw_tokens
    assert authenticator.raw_token(b"one") == b"challenge"
    assert authenticator.raw_token(b"two") == b""
    assert authenticator.complete and not authenticator.raw_tokens
    assert session.principal == KafkaPrincipal("User", "alice")


def _reauthenticate(authenticator):
    assert authenticator.handshake(1, "PLAIN").error_code == 0
    authenticator.authenticate(2, b"one")
    assert authenticator.authenticate(2, b"two").error_code == 0
