"""The client side of the SASL exchanges, for tests of the server side: a SCRAM client (RFC 5802), unsigned and
signed JWTs, a JWKS file, and listener settings with the options under test."""
from __future__ import annotations

import base64
import json
import secrets

from compatbroker.security.scram_credentials import mechanism_named
from compatbroker.security.settings import JaasConfig, ListenerSecurity, OAuthBearerSettings

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
VALIDATOR_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


def listener(*, plain_users: dict[str, str] | None = None, oauth_options: dict[str, str] | None = None,
             jwks_url: str | None = None, **oauth_settings) -> ListenerSecurity:
    jaas = {}
    if plain_users is not None:
        jaas["PLAIN"] = JaasConfig(PLAIN_MODULE, "required", {f"user_{u}": p for u, p in plain_users.items()})
    if oauth_options is not None:
        jaas["OAUTHBEARER"] = JaasConfig(OAUTH_MODULE, "required", dict(oauth_options))
    handlers = {"OAUTHBEARER": VALIDATOR_HANDLER} if jwks_url else {}
    return ListenerSecurity("SASL_PLAINTEXT", "SASL_PLAINTEXT",
                            sasl_enabled_mechanisms=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"),
                            jaas=jaas, server_callback_handlers=handlers,
                            oauthbearer=OAuthBearerSettings(jwks_endpoint_url=jwks_url, **oauth_settings))


class ScramClient:
    """RFC 5802 client: first(), then final(server_first), then check(server_final)."""

    def __init__(self, mechanism: str, user: str, password: str, *, nonce: str | None = None, authzid: str = "",
                 extensions: str = ""):
        self.mech = mechanism_named(mechanism)
        self.user, self.password = user, password
        self.nonce = nonce or secrets.token_urlsafe(18).replace("-", "a").replace("_", "b")
        self.gs2 = f"n,{'a=' + authzid if authzid else ''},"
        saslname = user.replace("=", "=3D").replace(",", "=2C")
        self.first_bare = f"n={saslname},r={self.nonce}{extensions}"
        self.server_signature = b""

    def first(self) -> bytes:
        return (self.gs2 + self.first_bare).encode()

    def final(self, server_first: bytes, *, nonce: str | None = None, password: str | None = None) -> bytes:
        fields = dict(item.split("=", 1) for item in server_first.decode().split(","))
        combined = nonce if nonce is not None else fields["r"]
        salted = self.mech.salted_password(password or self.password, base64.b64decode(fields["s"]),
                                           int(fields["i"]))
        without_proof = f"c={base64.b64encode(self.gs2.encode()).decode()},r={combined}"
        auth_message = f"{self.first_bare},{server_first.decode()},{without_proof}".encode()
        client_key = self.mech.client_key(salted)
        signature = self.mech.hmac(self.mech.hash(client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self.server_signature = self.mech.hmac(self.mech.server_key(salted), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verifies(self, server_final: bytes) -> bool:
        return server_final == b"v=" + base64.b64encode(self.server_signature)


def b64url(data: bytes | dict) -> str:
    if isinstance(data, dict):
        data = json.dumps(data).encode()
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsecured_jwt(claims: dict, header: dict | None = None) -> str:
    return f"{b64url(header or {'alg': 'none'})}.{b64url(claims)}."


def oauth_first_message(token: str, *, authzid: str = "", extensions: dict[str, str] | None = None) -> bytes:
    kvpairs = "".join(f"{k}={v}\x01" for k, v in (extensions or {}).items())
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01{kvpairs}\x01".encode()


class SigningKey:
    """An RSA or EC key pair that signs JWTs and describes itself as a JWK."""

    def __init__(self, kind: str = "RSA", kid: str = "key-1"):
        from cryptography.hazmat.primitives.asymmetric import ec, rsa
        self.kind, self.kid = kind, kid
        self.private = (rsa.generate_private_key(public_exponent=65537, key_size=2048) if kind == "RSA"
                        else ec.generate_private_key(ec.SECP256R1()))

    @property
    def alg(self) -> str:
        return "RS256" if self.kind == "RSA" else "ES256"

    def jwk(self) -> dict:
        numbers = self.private.public_key().public_numbers()
        if self.kind == "RSA":
            return {"kty": "RSA", "kid": self.kid, "use": "sig", "n": _b64int(numbers.n), "e": _b64int(numbers.e)}
        return {"kty": "EC", "kid": self.kid, "crv": "P-256", "x": _b64int(numbers.x, 32),
                "y": _b64int(numbers.y, 32)}

    def sign(self, claims: dict, *, header: dict | None = None) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec, padding
        from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
        header = header if header is not None else {"alg": self.alg, "kid": self.kid, "typ": "JWT"}
        signing_input = f"{b64url(header)}.{b64url(claims)}".encode()
        if self.kind == "RSA":
            signature = self.private.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
        else:
            r, s = decode_dss_signature(self.private.sign(signing_input, ec.ECDSA(hashes.SHA256())))
            signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
        return f"{signing_input.decode()}.{b64url(signature)}"


def _b64int(value: int, length: int | None = None) -> str:
    return b64url(value.to_bytes(length or (value.bit_length() + 7) // 8, "big"))


def write_jwks(path, *keys: SigningKey) -> str:
    """Write the keys' JWKS to `path`; returns its file: URL."""
    path.write_text(json.dumps({"keys": [key.jwk() for key in keys]}))
    return path.as_uri()
