"""SASL/OAUTHBEARER (RFC 7628), server side, as Kafka's OAuthBearerSaslServer runs it.

The client's first message is `n,[a=<authzid>],\\x01auth=Bearer <token>\\x01[<key>=<value>\\x01...]\\x01`. The token is
checked by one of two validators, chosen as Kafka chooses its server callback handler:
- by default Kafka's unsecured validator (OAuthBearerUnsecuredValidatorCallbackHandler), for development: an
  unsigned JWS (`alg: none`, empty signature) whose principal claim (`unsecuredValidatorPrincipalClaimName`, "sub")
  is a non-blank string, with `exp` (required) and `iat` checked against the clock with
  `unsecuredValidatorAllowableClockSkewMs` (0) of leeway, and `unsecuredValidatorRequiredScope` (space separated)
  all present in the `unsecuredValidatorScopeClaimName` ("scope") claim; these are options of the listener's
  OAUTHBEARER `sasl.jaas.config`;
- when `listener.name.<l>.oauthbearer.sasl.server.callback.handler.class` is Kafka's
  OAuthBearerValidatorCallbackHandler, signed JWTs against a local JWKS file (jwks.py).
A refused token is not yet a failure: the server answers the challenge `{"status":"invalid_token"}` (with
`"scope"` and status `insufficient_scope` when a required scope is missing), the client answers `\\x01`, and that
fails the authentication with the challenge text as the message. Malformed messages fail with Kafka's generic
message. Extensions are accepted (both Kafka validators accept every extension). Once complete, `lifetime_ms` is
the time left until the token expires, which the authenticator turns into `session_lifetime_ms` (KIP-368).
`check_listener` finds unusable settings (a bad JWKS file, unsecured options Kafka refuses) at start-up; met
during an authentication instead, they fail it with the generic message.
"""
from __future__ import annotations

import binascii
import json
import logging
import math
import re

from ..principal import USER_TYPE, KafkaPrincipal
from .jwks import (VALIDATOR_CALLBACK_HANDLERS, JwksValidator, TokenValidationError, ValidatedToken, b64url_decode,
                   jwks_path, load_jwks)
from .mechanism import OAUTHBEARER, Clock, SaslAuthenticationError, SaslCredentialsError, as_clock

log = logging.getLogger("compatbroker.security.sasl")

INTERNAL_ERROR_ON_SERVER = "Authentication could not be performed due to an internal error on the server"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KVPAIRS = r"(?:[A-Za-z]+=[\x21-\x7e \t\r\n]+\x01)*"
CLIENT_INITIAL_RESPONSE = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>{_KVPAIRS})\x01")
AUTH = re.compile(r"(?P<scheme>[A-Za-z0-9_]+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")
_SCOPE_ITEM = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
_INT64_MAX = 2**63 - 1


class TokenRefused(Exception):
    """The validator's verdict on a token: the challenge's status and scope, and the reason for the log."""

    def __init__(self, reason: str, status: str = "invalid_token", scope: str | None = None):
        super().__init__(reason)
        self.status = status
        self.scope = scope


class OAuthBearerSaslServer:
    mechanism = OAUTHBEARER

    def __init__(self, validate, clock: Clock):
        self._validate = validate  # token text -> ValidatedToken, or TokenRefused
        self._clock = clock
        self._complete = False
        self._error_challenge: str | None = None
        self.token: ValidatedToken | None = None
        self.extensions: dict[str, str] = {}
        self.principal: KafkaPrincipal | None = None
        self.lifetime_ms: int | None = None

    @classmethod
    def for_listener(cls, listener, *, now_ms: Clock | int | None = None) -> OAuthBearerSaslServer:
        clock = as_clock(now_ms)
        if listener is not None and uses_jwks(listener):
            return cls(_secured(JwksValidator(listener.oauthbearer, clock)), clock)
        options = unsecured_options(listener)
        # built per token: a bad option fails the authentication (generic message), not the handshake
        return cls(lambda token: UnsecuredValidator(options, clock).validate(token), clock)

    @property
    def complete(self) -> bool:
        return self._complete

    def evaluate(self, token: bytes) -> bytes:
        token = bytes(token)
        if self._complete:
            raise SaslCredentialsError(self.mechanism, "Unexpected response after OAUTHBEARER authentication")
        if token == b"\x01" and self._error_challenge is not None:
            raise SaslAuthenticationError(self._error_challenge)  # the client acknowledged our error challenge
        self._error_challenge = None
        try:
            return self._process(*_initial_response(token.decode("utf-8", errors="replace")))
        except SaslAuthenticationError:
            raise
        except Exception as exc:  # noqa: BLE001 - a validator's surprise is a failed authentication, not a crash
            raise SaslCredentialsError(self.mechanism, f"{INTERNAL_ERROR_ON_SERVER}: {exc!r}") from exc

    def _process(self, token_value: str, authzid: str, extensions: dict[str, str]) -> bytes:
        try:
            validated = self._validate(token_value)
        except TokenRefused as refusal:
            self._error_challenge = _error_json(refusal.status, refusal.scope)
            log.debug("OAUTHBEARER token refused: %s", refusal)
            return self._error_challenge.encode()
        if authzid and authzid != validated.principal_name:
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id ({authzid}) that is different from "
                f"the token's principal name ({validated.principal_name})")
        self.token = validated
        self.extensions = extensions
        self.principal = KafkaPrincipal(USER_TYPE, validated.principal_name)
        self.lifetime_ms = min(max(0, validated.lifetime_ms - self._clock()), _INT64_MAX)
        self._complete = True
        return b""


def _initial_response(message: str) -> tuple[str, str, dict[str, str]]:
    """(token, authorization id, extensions) of a client initial response; SaslCredentialsError if malformed."""
    match = CLIENT_INITIAL_RESPONSE.fullmatch(message)
    if match is None:
        raise SaslCredentialsError(OAUTHBEARER, "Invalid OAUTHBEARER client first message")
    properties = {}
    for pair in match["kvpairs"].split("\x01"):
        if pair:
            key, _, value = pair.partition("=")
            properties[key] = value
    auth = properties.pop("auth", None)
    if auth is None:
        raise SaslCredentialsError(OAUTHBEARER, "Invalid OAUTHBEARER client first message: 'auth' not specified")
    auth_match = AUTH.fullmatch(auth)
    if auth_match is None:
        raise SaslCredentialsError(OAUTHBEARER, "Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if auth_match["scheme"].lower() != "bearer":
        raise SaslCredentialsError(OAUTHBEARER, f"Invalid scheme in OAUTHBEARER client first message: "
                                                f"{auth_match['scheme']}")
    return auth_match["token"], match["authzid"] or "", properties


def _error_json(status: str, scope: str | None) -> str:
    """Kafka's challenge text, byte for byte (not a JSON library's spacing)."""
    text = f'{{"status":"{status}"'
    if scope is not None:
        text += f', "scope":"{scope}"'
    return text + "}"


def _secured(validator: JwksValidator):
    def validate(token_value: str) -> ValidatedToken:
        try:
            return validator.validate(token_value)
        except TokenValidationError as exc:
            log.warning("%s", exc)  # Kafka logs the reason at WARN and tells the client only invalid_token
            raise TokenRefused(str(exc)) from None
    return validate


def uses_jwks(listener) -> bool:
    """Whether the listener validates OAUTHBEARER tokens against a JWKS (else with Kafka's unsecured validator)."""
    return listener.server_callback_handlers.get(OAUTHBEARER) in VALIDATOR_CALLBACK_HANDLERS


def unsecured_options(listener) -> dict[str, str]:
    jaas = listener.jaas.get(OAUTHBEARER) if listener is not None else None
    return dict(jaas.options) if jaas is not None else {}


def check_listener(listener) -> None:
    """ValueError when the listener's OAUTHBEARER settings cannot work: a JWKS URL that is missing, not `file:`,
    or not a readable key set; unsecured validator options Kafka refuses. For start-up."""
    if uses_jwks(listener):
        url = listener.oauthbearer.jwks_endpoint_url
        if not url:
            raise ValueError(f"listener {listener.listener_name}: OAuthBearerValidatorCallbackHandler needs "
                             f"sasl.oauthbearer.jwks.endpoint.url (a file: URL of a JWKS)")
        try:
            load_jwks(jwks_path(url))
        except (OSError, ValueError) as exc:
            raise ValueError(f"listener {listener.listener_name}: sasl.oauthbearer.jwks.endpoint.url: {exc}") from None
    else:
        UnsecuredValidator(unsecured_options(listener), as_clock(None))


class UnsecuredValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler, with its JAAS options."""

    def __init__(self, options: dict[str, str], clock: Clock):
        self.principal_claim = (options.get("unsecuredValidatorPrincipalClaimName") or "").strip() or "sub"
        self.scope_claim = (options.get("unsecuredValidatorScopeClaimName") or "").strip() or "scope"
        self.required_scope = _parse_scope(options.get("unsecuredValidatorRequiredScope") or "")
        self.skew_ms = _parse_skew(options.get("unsecuredValidatorAllowableClockSkewMs") or "")
        self.clock = clock

    def validate(self, token: str) -> ValidatedToken:
        jws = UnsecuredJws(token, self.principal_claim, self.scope_claim)
        now = self.clock()
        iat, exp = jws.number("iat"), jws.number("exp")
        if iat is not None and 1000 * iat > now + self.skew_ms:
            raise TokenRefused(f"The Issued At value ({iat:f} seconds) was after the indicated time ({now} ms) plus "
                               f"allowable clock skew ({self.skew_ms} ms)")
        if now - self.skew_ms >= 1000 * exp:
            raise TokenRefused(f"The indicated time ({now} ms) minus allowable clock skew ({self.skew_ms} ms) was on "
                               f"or after the Expiration Time value ({exp:f} seconds)")
        if iat is not None and exp <= iat:
            raise TokenRefused(f"The Expiration Time time ({exp:f} seconds) was not after the Issued At time "
                               f"({iat:f} seconds)")
        for required in self.required_scope:
            if required not in jws.scope:
                required_text = _java_list(self.required_scope)
                raise TokenRefused(f"The provided scope ({_java_list(sorted(jws.scope))}) was missing a required "
                                   f"scope ({required}).  All required scope elements: {required_text}",
                                   status="insufficient_scope", scope=required_text)
        log.info("Successfully validated token with principal %s", jws.principal_name)
        return ValidatedToken(token, jws.principal_name, _to_ms(exp), None if iat is None else _to_ms(iat),
                              frozenset(jws.scope))


class UnsecuredJws:
    """Kafka's OAuthBearerUnsecuredJws: the checks made while reading the token (TokenRefused when one fails)."""

    def __init__(self, compact: str, principal_claim: str, scope_claim: str):
        if ".." in compact:
            raise TokenRefused("Malformed compact serialization contains '..'")
        splits = compact.split(".")
        if len(splits) != 3:
            raise TokenRefused("Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded "
                               "values")
        header = _claims_map(splits[0])
        self.claims = _claims_map(splits[1])
        if header.get("alg") is None:
            raise TokenRefused("JWS header must have an Algorithm value")
        if header["alg"] != "none":
            raise TokenRefused("Unsecured JWS must have 'none' for an algorithm")
        if splits[2]:
            raise TokenRefused("Unsecured JWS must not contain a digital signature")
        self.scope = self._scope(scope_claim)
        if self.number("exp") is None:
            raise TokenRefused("No expiration time in JWT")
        principal = self.claim(principal_claim, str)
        if principal is None or not principal.strip():
            raise TokenRefused(f"No principal name in JWT claim: {principal_claim}")
        self.principal_name = principal
        self.number("iat")

    def claim(self, name: str, kind: type):
        value = self.claims.get(name)
        if value is not None and not isinstance(value, kind):
            raise TokenRefused(f"The '{name}' claim was not of type {_JAVA_TYPES[kind]}: {_java_type(value)}")
        return value

    def number(self, name: str) -> float | int | None:
        return self.claim(name, (int, float))

    def _scope(self, name: str) -> set[str]:
        value = self.claims.get(name)
        if isinstance(value, str):
            return {value.strip()} if value.strip() else set()
        items = self.claim(name, list) or []
        return {item.strip() for item in items if item.strip()}


_JAVA_TYPES = {str: "String", list: "List", (int, float): "Number"}


def _java_type(value) -> str:
    if isinstance(value, str):
        return "String"
    if isinstance(value, list):
        return "ArrayList"
    if isinstance(value, float):
        return "Double"
    return "Integer" if -2**31 <= value < 2**31 else "Long" if -2**63 <= value < 2**63 else "BigInteger"


def _claims_map(section: str) -> dict:
    """A JWS section as Kafka's toMap reads it: arrays become lists of text, numbers stay numbers, anything else
    becomes its text (Jackson's asText)."""
    try:
        document = json.loads(b64url_decode(section))
    except binascii.Error:
        raise TokenRefused("malformed Base64 URL encoded value") from None
    except ValueError:
        raise TokenRefused("malformed JSON") from None
    if not isinstance(document, dict):
        return {}
    return {key: [_as_text(item) for item in value] if isinstance(value, list) else
            value if _is_number(value) else _as_text(value) for key, value in document.items()}


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _as_text(value) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return repr(value)
    return ""  # objects and arrays have no text


def _to_ms(seconds: float) -> int:
    """Seconds to ms as Java's Math.round(double) does it: saturating at the long range."""
    ms = seconds * 1000
    if math.isinf(ms):
        return _INT64_MAX if ms > 0 else -_INT64_MAX - 1
    return max(-_INT64_MAX - 1, min(_INT64_MAX, round(ms)))


def _java_list(items) -> str:
    return "[" + ", ".join(items) + "]"


def _parse_scope(text: str) -> list[str]:
    scope = [item for item in text.strip().split(" ") if item]
    for item in scope:
        if not _SCOPE_ITEM.fullmatch(item):
            raise ValueError(f"Invalid scope value: {item}")
    return scope


def _parse_skew(text: str) -> int:
    skew = int(text.strip()) if text.strip() else 0
    if skew < 0:
        raise ValueError(f"Allowable clock skew millis must not be negative: {text}")
    return skew
