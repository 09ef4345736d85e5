"""Signed JWTs checked against a JSON Web Key Set read from a local file, as Kafka's secured OAUTHBEARER validator
(OAuthBearerValidatorCallbackHandler with JwksFileVerificationKeyResolver and ValidatorAccessTokenValidator, on
jose4j) checks them.

- The key set comes from `sasl.oauthbearer.jwks.endpoint.url` when it is a `file:` URL. It is re-read when the file
  changes (Kafka reads it once at start; tests that rotate keys need the re-read).
- Signatures: RS256/384/512, PS256/384/512 (RSA keys) and ES256/384/512 (EC keys on P-256/384/521), verified with
  the `cryptography` package, imported on first use. `alg: none` is refused. The key is the one whose `kid` is the
  token header's (any, when the header has none), whose `kty` fits the algorithm and whose `use` is `sig` or absent;
  zero or several such keys refuse the token.
- Claims (jose4j's JwtConsumer as Kafka builds it): `exp` and `iat` required; `exp`, and `nbf` when present, checked
  with `sasl.oauthbearer.clock.skew.seconds` of leeway; `iss` equal to `sasl.oauthbearer.expected.issuer` when set;
  `aud` containing one of `sasl.oauthbearer.expected.audience` when set, and refused when present but no audience
  is expected (jose4j's default audience check). Then Kafka's own: the `sasl.oauthbearer.sub.claim.name` claim is
  the principal (a non-blank string), the `sasl.oauthbearer.scope.claim.name` claim a string or list of distinct
  non-blank strings.
Every refusal raises `TokenValidationError` with a message for the broker's log; the client only learns
`{"status":"invalid_token"}`.
"""
from __future__ import annotations

import base64
import binascii
import json
import math
import os
import threading
from dataclasses import dataclass
from urllib.parse import unquote, urlparse

VALIDATOR_CALLBACK_HANDLERS = frozenset({
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",  # pre-3.4 name
})

_HASHES = {"256": "SHA256", "384": "SHA384", "512": "SHA512"}
_EC_CURVES = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}


class TokenValidationError(Exception):
    """The token is refused; str(exc) is the reason (logged, never sent)."""


@dataclass(frozen=True)
class ValidatedToken:
    value: str
    principal_name: str
    lifetime_ms: int               # the expiration time, ms since the epoch (Kafka's OAuthBearerToken.lifetimeMs)
    start_time_ms: int | None      # the issued-at time
    scope: frozenset[str]


def b64url_decode(text: str) -> bytes:
    """Base64url without padding (RFC 7515); the standard alphabet is accepted too. binascii.Error if invalid."""
    text = text.replace("-", "+").replace("_", "/")
    return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)


def jwks_path(url: str) -> str:
    """The local path of a `file:` JWKS URL; ValueError for other schemes (this broker fetches nothing)."""
    parsed = urlparse(url)
    if parsed.scheme != "file":
        raise ValueError(f"sasl.oauthbearer.jwks.endpoint.url {url!r}: only file: URLs are supported")
    return unquote(parsed.path)


class _JwksCache:
    def __init__(self):
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[tuple[int, int], list[dict]]] = {}

    def keys(self, path: str) -> list[dict]:
        stat = os.stat(path)
        stamp = (stat.st_mtime_ns, stat.st_size)
        with self._lock:
            cached = self._entries.get(path)
            if cached is not None and cached[0] == stamp:
                return cached[1]
        keys = load_jwks(path)
        with self._lock:
            self._entries[path] = (stamp, keys)
        return keys


_CACHE = _JwksCache()


def load_jwks(path: str) -> list[dict]:
    """The keys of a JWKS file; ValueError when it is not one (checked at start-up by whoever configures it)."""
    with open(path, encoding="utf-8") as source:
        document = json.load(source)
    keys = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(keys, list) or not all(isinstance(key, dict) for key in keys):
        raise ValueError(f"{path} is not a JSON Web Key Set: expected an object with a \"keys\" array")
    return keys


class JwksValidator:
    """ValidatorAccessTokenValidator with a file-backed key resolver; `settings` is an OAuthBearerSettings."""

    def __init__(self, settings, clock):
        self.settings = settings
        self.clock = clock

    def validate(self, token: str) -> ValidatedToken:
        token = token.strip()
        sections = token.split(".")
        if len(sections) != 3 or not all(section.strip() for section in sections):
            raise TokenValidationError("Malformed JWT provided; expected three sections (header, payload, and "
                                       "signature)")
        header, claims = _json_section(sections[0], "header"), _json_section(sections[1], "payload")
        keys = _CACHE.keys(jwks_path(self.settings.jwks_endpoint_url or ""))
        _verify_signature(header, sections, keys)
        self._check_claims(claims)
        return self._token(token, claims)

    def _check_claims(self, claims: dict) -> None:
        now_s = self.clock() / 1000
        skew = self.settings.clock_skew_seconds
        exp, iat, nbf = (_numeric_date(claims, name) for name in ("exp", "iat", "nbf"))
        if exp is None:
            raise TokenValidationError("Could not validate the access token: No Expiration Time (exp) claim present.")
        if iat is None:
            raise TokenValidationError("Could not validate the access token: No Issued At (iat) claim present.")
        if now_s - skew >= exp:
            raise TokenValidationError(f"Could not validate the access token: The JWT is no longer valid - the "
                                       f"evaluation time {now_s:.0f} is on or after the Expiration Time (exp={exp}) "
                                       f"claim value (even when providing {skew} seconds of leeway)")
        if nbf is not None and now_s + skew < nbf:
            raise TokenValidationError(f"Could not validate the access token: The JWT is not yet valid as the "
                                       f"evaluation time {now_s:.0f} is before the Not Before (nbf={nbf}) claim time "
                                       f"(even when providing {skew} seconds of leeway)")
        issuer = self.settings.expected_issuer
        if issuer is not None and claims.get("iss") != issuer:
            raise TokenValidationError(f"Could not validate the access token: Issuer (iss) claim value "
                                       f"({claims.get('iss')}) doesn't match expected value of {issuer}")
        self._check_audience(claims.get("aud"))

    def _check_audience(self, aud) -> None:
        expected = tuple(self.settings.expected_audience or ())
        if aud is None:
            if expected:
                raise TokenValidationError("Could not validate the access token: No Audience (aud) claim present.")
            return
        audiences = [aud] if isinstance(aud, str) else aud
        if not isinstance(audiences, list) or not all(isinstance(item, str) for item in audiences):
            raise TokenValidationError("Could not validate the access token: The value of the 'aud' claim is not "
                                       "the expected type")
        if not expected:
            raise TokenValidationError(f"Could not validate the access token: Audience (aud) claim {audiences} "
                                       f"present in the JWT but no expected audience value(s) were provided")
        if not set(audiences) & set(expected):
            raise TokenValidationError(f"Could not validate the access token: Audience (aud) claim {audiences} "
                                       f"doesn't contain an acceptable identifier. Expected one of {list(expected)}")

    def _token(self, token: str, claims: dict) -> ValidatedToken:
        scope_name, sub_name = self.settings.scope_claim_name, self.settings.sub_claim_name
        raw_scope = claims.get(scope_name)
        scopes = [raw_scope] if isinstance(raw_scope, str) else raw_scope if isinstance(raw_scope, list) else []
        seen: set[str] = set()
        for scope in scopes:
            scope = _non_blank(scope_name, scope)
            if scope in seen:
                raise TokenValidationError(f"{scope_name} value must not contain duplicates - {scope} already present")
            seen.add(scope)
        sub = claims.get(sub_name)
        if sub is not None and not isinstance(sub, str):
            raise TokenValidationError(f"Could not extract the '{sub_name}' claim from the access token")
        principal = _non_blank(sub_name, sub)
        exp_ms, iat_ms = _seconds_to_ms(claims["exp"]), _seconds_to_ms(claims["iat"])
        if exp_ms < 0:
            raise TokenValidationError(f"exp value must be non-negative; value given was \"{exp_ms}\"")
        if iat_ms < 0:
            raise TokenValidationError(f"iat value must be null or non-negative; value given was \"{iat_ms}\"")
        return ValidatedToken(token, principal, exp_ms, iat_ms, frozenset(seen))


def _json_section(section: str, name: str) -> dict:
    try:
        value = json.loads(b64url_decode(section.strip()))
    except (binascii.Error, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise TokenValidationError(f"Could not validate the access token: malformed JWT {name}: {exc}") from None
    if not isinstance(value, dict):
        raise TokenValidationError(f"Could not validate the access token: the JWT {name} is not a JSON object")
    return value


def _numeric_date(claims: dict, name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TokenValidationError(f"Could not validate the access token: The value of the '{name}' claim is not "
                                   f"the expected type")
    return value


def _seconds_to_ms(seconds: float) -> int:
    ms = seconds * 1000
    return (2**63 - 1 if ms > 0 else -2**63) if math.isinf(ms) else round(ms)


def _non_blank(name: str, value) -> str:
    if value is None:
        raise TokenValidationError(f"{name} value must be non-null")
    if not isinstance(value, str):
        raise TokenValidationError(f"{name} value must be a string")
    if not value:
        raise TokenValidationError(f"{name} value must be non-empty")
    if not value.strip():
        raise TokenValidationError(f"{name} value must not contain only whitespace")
    return value.strip()


def _verify_signature(header: dict, sections: list[str], keys: list[dict]) -> None:
    alg = header.get("alg")
    if not isinstance(alg, str) or alg == "none" or alg[:2] not in ("RS", "PS", "ES") or alg[2:] not in _HASHES:
        raise TokenValidationError(f"Could not validate the access token: the JWS algorithm {alg!r} is not "
                                   f"permitted (RS256/384/512, PS256/384/512, ES256/384/512)")
    key = _select_key(header, alg, keys)
    try:
        signature = b64url_decode(sections[2].strip())
    except binascii.Error:
        raise TokenValidationError("Could not validate the access token: malformed JWT signature") from None
    signing_input = f"{sections[0]}.{sections[1]}".encode("ascii", errors="replace")
    if not _signature_valid(alg, key, signing_input, signature):
        raise TokenValidationError("Could not validate the access token: JWT rejected due to invalid signature")


def _select_key(header: dict, alg: str, keys: list[dict]) -> dict:
    kty = "EC" if alg.startswith("ES") else "RSA"
    kid = header.get("kid")
    candidates = [key for key in keys
                  if key.get("kty") == kty and key.get("use") in (None, "sig") and key.get("alg") in (None, alg)
                  and (kty != "EC" or key.get("crv") == _EC_CURVES[alg])
                  and (kid is None or key.get("kid") == kid)]
    if len(candidates) != 1:
        raise TokenValidationError(f"Could not validate the access token: Unable to find a suitable verification key "
                                   f"for JWS w/ header {header} due to an unexpected number ({len(candidates)}) of "
                                   f"selected keys")
    return candidates[0]


def _signature_valid(alg: str, jwk: dict, signing_input: bytes, signature: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature  # imported only when a secured validator runs
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    hash_algorithm = getattr(hashes, _HASHES[alg[2:]])()
    try:
        if alg.startswith("ES"):
            curve = {"P-256": ec.SECP256R1, "P-384": ec.SECP384R1, "P-521": ec.SECP521R1}[jwk["crv"]]()
            size = (curve.key_size + 7) // 8
            if len(signature) != 2 * size:
                return False
            public_key = ec.EllipticCurvePublicNumbers(_jwk_int(jwk, "x"), _jwk_int(jwk, "y"), curve).public_key()
            r, s = int.from_bytes(signature[:size], "big"), int.from_bytes(signature[size:], "big")
            public_key.verify(encode_dss_signature(r, s), signing_input, ec.ECDSA(hash_algorithm))
        else:
            public_key = rsa.RSAPublicNumbers(_jwk_int(jwk, "e"), _jwk_int(jwk, "n")).public_key()
            pad = (padding.PKCS1v15() if alg.startswith("RS")
                   else padding.PSS(mgf=padding.MGF1(hash_algorithm), salt_length=hash_algorithm.digest_size))
            public_key.verify(signature, signing_input, pad, hash_algorithm)
    except InvalidSignature:
        return False
    except (KeyError, TypeError, ValueError, binascii.Error) as exc:  # a key the JWKS describes badly
        raise TokenValidationError(f"Could not validate the access token: unusable verification key "
                                   f"{jwk.get('kid')!r}: {exc}") from None
    return True


def _jwk_int(jwk: dict, name: str) -> int:
    return int.from_bytes(b64url_decode(jwk[name]), "big")
