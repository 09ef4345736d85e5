"""OAUTHBEARER tokens for tests: Kafka's unsecured JWS, and RS256 JWTs signed by a throwaway key published as JWKS.

- `unsecured_token(sub, lifetime_s, scope=...)`: a JWS with header `{"alg":"none"}` and an empty signature, as
  Kafka's OAuthBearerUnsecuredLoginCallbackHandler makes them; brokers with Kafka's default (unsecured) validator
  accept it.
- `JwksIssuer(directory)`: an RSA key pair, its public half written as `<directory>/jwks.json` (the broker's
  `sasl.oauthbearer.jwks.endpoint.url=file://...`), and `mint_token(sub, lifetime_s, scope=...)` signing tokens
  with claims `sub`, `iat`, `exp` (and `iss`, `aud`, `scope` when given), the header naming the key's `kid`, which
  Kafka's OAuthBearerValidatorCallbackHandler validates. `expired_token(sub)` expired an hour ago.

Times are seconds since the epoch (NumericDate, RFC 7519). A `scope` string is one scope; several are a list
(Kafka's validators read a string claim as a single scope). `cryptography` is imported only by `JwksIssuer`.
"""
from __future__ import annotations

import base64
import json
import os
import time
import uuid
from collections.abc import Sequence

DEFAULT_LIFETIME_S = 3600
EXPIRED_AGO_S = 3600


def unsecured_token(sub: str, lifetime_s: float = DEFAULT_LIFETIME_S, *, scope: str | Sequence[str] | None = None,
                    now: float | None = None, claims: dict | None = None) -> str:
    """Kafka's unsecured JWS (`alg` none): `header.payload.` with an empty signature."""
    payload = _claims(sub, lifetime_s, scope, now, claims)
    return f"{_b64_json({'alg': 'none'})}.{_b64_json(payload)}."


def expired_unsecured_token(sub: str, *, now: float | None = None) -> str:
    """An unsecured JWS that expired an hour ago."""
    now = time.time() if now is None else now
    return unsecured_token(sub, DEFAULT_LIFETIME_S, now=now - DEFAULT_LIFETIME_S - EXPIRED_AGO_S)


class JwksIssuer:
    """A signing key for RS256 JWTs; `jwks_file` holds its public JWK (`{"keys": [...]}`), `jwks_url` that file as
    the `file://` URL of `sasl.oauthbearer.jwks.endpoint.url`."""

    def __init__(self, directory: str | os.PathLike, *, issuer: str | None = None, audience: str | None = None,
                 kid: str | None = None):
        from cryptography.hazmat.primitives.asymmetric import rsa

        self.issuer = issuer
        self.audience = audience
        self.kid = kid or uuid.uuid4().hex[:16]
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        os.makedirs(os.fspath(directory), exist_ok=True)
        self.jwks_file = os.path.join(os.fspath(directory), "jwks.json")
        with open(self.jwks_file, "w", encoding="ascii") as file:
            json.dump({"keys": [self.public_jwk()]}, file, indent=2)

    @property
    def jwks_url(self) -> str:
        return "file://" + os.path.abspath(self.jwks_file)

    def public_jwk(self) -> dict:
        numbers = self._key.public_key().public_numbers()
        return {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": self.kid,
                "n": _b64_int(numbers.n), "e": _b64_int(numbers.e)}

    def mint_token(self, sub: str, lifetime_s: float = DEFAULT_LIFETIME_S, *,
                   scope: str | Sequence[str] | None = None, now: float | None = None,
                   claims: dict | None = None) -> str:
        """A signed JWT for `sub`, valid `lifetime_s` from `now`; `claims` adds or overrides claims (e.g. a wrong
        `aud`), with None values removing one."""
        payload = _claims(sub, lifetime_s, scope, now, {"iss": self.issuer, "aud": self.audience, **(claims or {})})
        signing_input = f"{_b64_json({'alg': 'RS256', 'typ': 'JWT', 'kid': self.kid})}.{_b64_json(payload)}"
        return f"{signing_input}.{_b64(self._sign(signing_input.encode('ascii')))}"

    def expired_token(self, sub: str, *, scope: str | Sequence[str] | None = None) -> str:
        """A correctly signed JWT for `sub` that expired an hour ago."""
        return self.mint_token(sub, DEFAULT_LIFETIME_S, scope=scope,
                               now=time.time() - DEFAULT_LIFETIME_S - EXPIRED_AGO_S)

    def _sign(self, data: bytes) -> bytes:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        return self._key.sign(data, padding.PKCS1v15(), hashes.SHA256())


def token_claims(token: str) -> dict:
    """The claims of a JWT/JWS (not verified): for tests and for clients wanting the token's `exp`."""
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def _claims(sub, lifetime_s, scope, now, extra) -> dict:
    now = time.time() if now is None else now
    claims = {"sub": sub, "iat": int(now), "exp": int(now + lifetime_s)}
    if scope is not None:
        claims["scope"] = scope if isinstance(scope, str) else list(scope)  # Kafka: a string is ONE scope
    claims.update(extra or {})
    return {name: value for name, value in claims.items() if value is not None}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64_json(value: dict) -> str:
    return _b64(json.dumps(value, separators=(",", ":")).encode())


def _b64_int(value: int) -> str:
    return _b64(value.to_bytes((value.bit_length() + 7) // 8, "big"))
