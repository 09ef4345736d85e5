"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), server side, as Kafka's ScramSaslServer does it.

    client-first   n,[a=<authzid>],n=<saslname>,r=<client nonce>[,<ext>=<value>...]
    server-first   r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final   c=<base64 gs2 header>,r=<nonce>,p=<base64 proof>
    server-final   v=<base64 server signature>

Messages are matched against Kafka's grammar (ScramMessages); the credential comes from the cluster's
ScramCredentialStore. The client's proof is checked by recomputing StoredKey from it (RFC 5802 section 3), the
final message's nonce must end with the combined nonce the server sent. A server accepts one client-first and one
client-final message: anything after completion or failure fails, so a replayed final message never
authenticates (on a fresh server it is not a valid first message, and a new exchange has a new server nonce).

Failures the client learns the cause of (Kafka's SaslAuthenticationException): an authorization id different from
the user name. Every other failure (unknown user, bad proof, bad nonce, malformed message) answers Kafka's generic
message and keeps the reason for the broker's log (`SaslCredentialsError.reason`). The only extension Kafka reads
is `tokenauth` (delegation tokens, which this broker does not issue, so a token authentication always fails);
others are ignored.
"""
from __future__ import annotations

import base64
import hmac
import re
import secrets

from ..principal import USER_TYPE, KafkaPrincipal
from ..scram_credentials import ScramCredentialStore, mechanism_named
from .mechanism import SaslAuthenticationError, SaslCredentialsError

# Kafka's ScramMessages grammar, with Java's class intersections spelled out ("=" is \x3d, "," is \x2c).
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_B64 = r"[a-zA-Z0-9/+]"
_BASE64 = rf"(?:{_B64}{{4}})*(?:{_B64}{{3}}=|{_B64}{{2}}==)?"
_RESERVED = rf"(?:m={_VALUE},)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_RESERVED}n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})"
    rf"(?P<extensions>{_EXTENSIONS})")
CLIENT_FINAL = re.compile(
    rf"c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS},p=(?P<proof>{_BASE64})")

TOKEN_AUTH_EXTENSION = "tokenauth"

_RECEIVE_CLIENT_FIRST, _RECEIVE_CLIENT_FINAL, _COMPLETE, _FAILED = (
    "RECEIVE_CLIENT_FIRST_MESSAGE", "RECEIVE_CLIENT_FINAL_MESSAGE", "COMPLETE", "FAILED")


class SaslIllegalStateError(SaslAuthenticationError):
    """A token arrived after the exchange ended (Kafka's IllegalSaslStateException)."""


def username_of(saslname: str) -> str:
    """RFC 5802's saslname decoding: =2C is ",", =3D is "="."""
    return saslname.replace("=2C", ",").replace("=3D", "=")


def server_nonce() -> str:
    """130 random bits in base 36, as Kafka's ScramFormatter.secureRandomString."""
    value, digits = secrets.randbits(130), []
    while value:
        value, digit = divmod(value, 36)
        digits.append("0123456789abcdefghijklmnopqrstuvwxyz"[digit])
    return "".join(reversed(digits)) or "0"


class ScramSaslServer:
    def __init__(self, mechanism: str, store: ScramCredentialStore):
        self._mech = mechanism_named(mechanism)
        self.mechanism = self._mech.name
        self._store = store
        self._state = _RECEIVE_CLIENT_FIRST
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._credential = None
        self._username = ""
        self.principal: KafkaPrincipal | None = None
        self.lifetime_ms: int | None = None

    @property
    def complete(self) -> bool:
        return self._state == _COMPLETE

    def evaluate(self, token: bytes) -> bytes:
        try:
            if self._state == _RECEIVE_CLIENT_FIRST:
                return self._client_first(bytes(token).decode("utf-8", errors="replace"))
            if self._state == _RECEIVE_CLIENT_FINAL:
                return self._client_final(bytes(token).decode("utf-8", errors="replace"))
            raise SaslIllegalStateError(f"Unexpected challenge in Sasl server state {self._state}")
        except SaslAuthenticationError:
            self._fail()
            raise
        except Exception as exc:  # noqa: BLE001 - whatever the client sent, the answer is a failed authentication
            self._fail()
            raise SaslCredentialsError(self.mechanism, f"Authentication failed: {exc!r}") from exc

    def _fail(self) -> None:
        self._credential = None
        self._state = _FAILED

    def _client_first(self, message: str) -> bytes:
        match = CLIENT_FIRST.fullmatch(message)
        if match is None:
            raise SaslCredentialsError(self.mechanism,
                                       f"Invalid SCRAM client first message format: {_shown(message)}")
        extensions = _parse_extensions(match["extensions"])
        username = username_of(match["saslname"])
        if extensions.get(TOKEN_AUTH_EXTENSION, "").lower() == "true":
            raise SaslCredentialsError(self.mechanism, f"Token Authentication failed: Invalid tokenId : {username}")
        credential = self._store.get(username, self._mech)
        if credential is None:
            raise SaslCredentialsError(self.mechanism, "Authentication failed: Invalid user credentials")
        authzid = match["authzid"] or ""
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        if credential.iterations < self._mech.min_iterations:
            raise SaslCredentialsError(self.mechanism, f"Iterations {credential.iterations} is less than the "
                                                       f"minimum {self._mech.min_iterations} for {self.mechanism}")
        bare = f"n={match['saslname']},r={match['nonce']}"
        if extensions:
            bare += "," + ",".join(f"{key}={value}" for key, value in extensions.items())
        self._client_first_bare = bare
        self._nonce = match["nonce"] + server_nonce()
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._credential = credential
        self._username = username
        self._state = _RECEIVE_CLIENT_FINAL
        return self._server_first.encode()

    def _client_final(self, message: str) -> bytes:
        match = CLIENT_FINAL.fullmatch(message)
        if match is None:
            raise SaslCredentialsError(self.mechanism,
                                       f"Invalid SCRAM client final message format: {_shown(message)}")
        if not match["nonce"].endswith(self._nonce):
            raise SaslCredentialsError(self.mechanism, "Invalid client nonce in the final client message.")
        channel = base64.b64encode(_b64decode(match["channel"])).decode()
        auth_message = f"{self._client_first_bare},{self._server_first},c={channel},r={match['nonce']}".encode()
        credential = self._credential
        client_signature = self._mech.hmac(credential.stored_key, auth_message)
        proof = _b64decode(match["proof"])
        if len(proof) != len(client_signature):
            raise SaslCredentialsError(self.mechanism, "Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(client_signature, proof))
        if not hmac.compare_digest(self._mech.hash(client_key), credential.stored_key):
            raise SaslCredentialsError(self.mechanism, "Invalid client credentials")
        server_signature = self._mech.hmac(credential.server_key, auth_message)
        self._credential = None
        self.principal = KafkaPrincipal(USER_TYPE, self._username)
        self._state = _COMPLETE
        return b"v=" + base64.b64encode(server_signature)


def _parse_extensions(text: str) -> dict[str, str]:
    extensions = {}
    for item in text[1:].split(",") if text else ():
        key, _, value = item.partition("=")
        extensions[key] = value
    return extensions


def _shown(message: str, limit: int = 200) -> str:
    """A client's message for a log line: quoted, and cut short (it may be as large as a SASL frame)."""
    return repr(message) if len(message) <= limit else f"{message[:limit]!r}... ({len(message)} characters)"


def _b64decode(text: str) -> bytes:
    return base64.b64decode(text, validate=True)  # the grammar admits only valid base64 (binascii.Error else)
