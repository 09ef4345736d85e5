"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer and PlainServerCallbackHandler check it.

The client sends one message, `authzid \\0 username \\0 password` (UTF-8). Users and passwords come from the
listener's PLAIN JAAS options, `user_<name>="<password>"`
(`listener.name.<listener>.plain.sasl.jaas.config`). The authorization id may be empty or the user name.
Every failure's message goes to the client (Kafka raises SaslAuthenticationException for each).
"""
from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping

from ..principal import USER_TYPE, KafkaPrincipal
from .mechanism import PLAIN, SaslAuthenticationError

JAAS_USER_PREFIX = "user_"

PasswordLookup = Callable[[str], "str | None"]


def users_from_jaas_options(options: Mapping[str, str]) -> dict[str, str]:
    """user name -> password, from PlainLoginModule options `user_<name>=<password>`."""
    return {key[len(JAAS_USER_PREFIX):]: value for key, value in options.items() if key.startswith(JAAS_USER_PREFIX)}


class PlainSaslServer:
    mechanism = PLAIN

    def __init__(self, password_of: PasswordLookup | Mapping[str, str]):
        self._password_of = password_of.get if isinstance(password_of, Mapping) else password_of
        self._complete = False
        self.principal: KafkaPrincipal | None = None
        self.lifetime_ms: int | None = None

    @classmethod
    def for_listener(cls, listener) -> PlainSaslServer:
        jaas = listener.jaas.get(PLAIN) if listener is not None else None
        return cls(users_from_jaas_options(jaas.options) if jaas is not None else {})

    @property
    def complete(self) -> bool:
        return self._complete

    def evaluate(self, token: bytes) -> bytes:
        authzid, username, password = _tokens(bytes(token).decode("utf-8", errors="replace"))
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._password_of(username)
        if expected is None or not hmac.compare_digest(password.encode(), expected.encode()):
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        self.principal = KafkaPrincipal(USER_TYPE, username)
        self._complete = True
        return b""


def _tokens(message: str) -> tuple[str, str, str]:
    parts = message.split("\0", 3)  # a fourth part means too many NULs: Kafka counts at most 4 tokens
    if len(parts) != 3:
        raise SaslAuthenticationError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(parts), 4)}")
    return parts[0], parts[1], parts[2]
