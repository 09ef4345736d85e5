"""The client side of SASL PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802, RFC 7677), as Kafka's clients speak
them inside SaslAuthenticate requests, and the SCRAM arithmetic the admin client needs to store credentials.

A mechanism is a small state machine: `first()` gives the first client token, `next(server_token)` the following
one (None when the exchange is complete on the client's side); a `KafkaError(SASL_AUTHENTICATION_FAILED)` is raised
when the server's answer is wrong (bad nonce, too few or too many iterations, a salt that is not base64, a server
signature that does not verify).
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets

from compatbroker.protocol.error_codes import ErrorCode

from .errors import KafkaError

SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's ScramMechanism: credentials with fewer iterations are refused, by the broker and by its client
SCRAM_MIN_ITERATIONS = 4096
# ... and a Kafka cluster stores none with more; more is refused here too, so that a broken or hostile broker
# cannot keep the client hashing for hours (Java's client checks only the minimum)
SCRAM_MAX_ITERATIONS = 16384


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2 with the mechanism's HMAC over the UTF-8 password."""
    return hashlib.pbkdf2_hmac(SCRAM_HASHES[mechanism], password.encode(), salt, iterations)


def _hmac(name: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, name).digest()


def _failed(message: str) -> KafkaError:
    return KafkaError(ErrorCode.SASL_AUTHENTICATION_FAILED, message)


class PlainClient:
    """PLAIN: one token, `\\0username\\0password` (no authorization id)."""

    def __init__(self, username: str, password: str):
        self._token = b"\0" + username.encode() + b"\0" + password.encode()

    def first(self) -> bytes:
        return self._token

    def next(self, server_token: bytes) -> bytes | None:
        return None


class ScramClient:
    """SCRAM-SHA-256/512: client-first, then client-final with the proof; the server-final message is checked."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None):
        self.mechanism = mechanism
        self._hash = SCRAM_HASHES[mechanism]
        self._password = password
        self._nonce = nonce or secrets.token_urlsafe(24)
        saslname = username.replace("=", "=3D").replace(",", "=2C")
        self._client_first_bare = f"n={saslname},r={self._nonce}"
        self._server_signature: bytes | None = None

    def first(self) -> bytes:
        return ("n,," + self._client_first_bare).encode()

    def next(self, server_token: bytes) -> bytes | None:
        if self._server_signature is None:
            return self._client_final(bytes(server_token).decode("utf-8", "replace"))
        self._verify_server_final(bytes(server_token).decode("utf-8", "replace"))
        return None

    def _client_final(self, server_first: str) -> bytes:
        fields = _attributes(server_first)
        if "e" in fields:
            raise _failed(f"{self.mechanism}: the broker refused the exchange: {fields['e']}")
        nonce, salt, iterations = fields.get("r", ""), fields.get("s"), fields.get("i", "")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise _failed(f"{self.mechanism}: the broker's nonce does not extend the client's")
        try:
            salt_bytes = base64.b64decode(salt or "", validate=True)
        except binascii.Error:
            salt_bytes = b""
        if not salt_bytes or not iterations.isdigit():
            raise _failed(f"{self.mechanism}: malformed server-first message")
        if int(iterations) < SCRAM_MIN_ITERATIONS:
            raise _failed(f"{self.mechanism}: requested iterations {iterations} is less than the minimum "
                          f"{SCRAM_MIN_ITERATIONS}")
        if int(iterations) > SCRAM_MAX_ITERATIONS:
            raise _failed(f"{self.mechanism}: requested iterations {iterations} is more than the maximum "
                          f"{SCRAM_MAX_ITERATIONS}")
        salted = salted_password(self.mechanism, self._password, salt_bytes, int(iterations))
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        client_key = _hmac(self._hash, salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        signature = _hmac(self._hash, stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._server_signature = _hmac(self._hash, _hmac(self._hash, salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify_server_final(self, server_final: str) -> None:
        fields = _attributes(server_final)
        if "e" in fields:
            raise _failed(f"{self.mechanism}: the broker refused the credentials: {fields['e']}")
        try:
            signature = base64.b64decode(fields.get("v", ""), validate=True)
        except ValueError:
            signature = b""
        if not hmac.compare_digest(signature, self._server_signature):
            raise _failed(f"{self.mechanism}: the broker's signature does not verify (is it the real broker?)")


def _attributes(message: str) -> dict[str, str]:
    fields = {}
    for part in message.split(","):
        name, sep, value = part.partition("=")
        if sep:
            fields.setdefault(name, value)
    return fields


def mechanism_client(mechanism: str, username: str, password: str):
    """The client state machine of a mechanism named as Kafka names it."""
    if mechanism == "PLAIN":
        return PlainClient(username, password)
    return ScramClient(mechanism, username, password)
