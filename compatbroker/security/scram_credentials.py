"""SCRAM credentials: Kafka's salted format and the cluster's credential store.

A credential is what RFC 5802 lets a server keep instead of a password: the salt, the iteration count, and two keys
derived from the salted password (SaltedPassword = PBKDF2-HMAC(password, salt, iterations)):
StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey = HMAC(SaltedPassword, "Server Key").
Kafka's text form (ScramCredentialUtils) is `salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`.

`ScramCredentialStore` holds one credential per (user, mechanism) for the whole cluster. It is written atomically
to `<data dir>/scram-credentials.json` after every change and read back at start. AlterUserScramCredentials hands
it the salted password the client computed (`set_salted`); the toolkit and control API give passwords
(`set_password`). `validate_alteration` holds the rules Kafka's controller applies to an alteration
(ScramControlManager): mechanism known, user name not empty, 4096 <= iterations <= 16384.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import secrets
import threading
from dataclasses import dataclass

from ..protocol.error_codes import ErrorCode
from ..storage.checkpoints import write_atomically

FILE_NAME = "scram-credentials.json"
MAX_ITERATIONS = 16384  # ScramControlManager.MAX_ITERATIONS
_FILE_VERSION = 1


@dataclass(frozen=True)
class ScramMechanism:
    name: str        # SASL mechanism name, e.g. "SCRAM-SHA-256"
    type: int        # the code DescribeUserScramCredentials / AlterUserScramCredentials carry
    hash_name: str   # hashlib name
    min_iterations: int = 4096
    max_iterations: int = MAX_ITERATIONS

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """RFC 5802's Hi(): PBKDF2 with this mechanism's HMAC (Kafka does not apply SASLprep)."""
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode(), salt, iterations)

    def client_key(self, salted_password: bytes) -> bytes:
        return self.hmac(salted_password, b"Client Key")

    def server_key(self, salted_password: bytes) -> bytes:
        return self.hmac(salted_password, b"Server Key")


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", 1, "sha256")
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", 2, "sha512")
MECHANISMS = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
MECHANISMS_BY_TYPE = {m.type: m for m in MECHANISMS.values()}


def mechanism_named(name_or_type: str | int | ScramMechanism) -> ScramMechanism:
    """The mechanism for a name ("SCRAM-SHA-512") or a protocol type code (2); ValueError for any other."""
    if isinstance(name_or_type, ScramMechanism):
        return name_or_type
    table = MECHANISMS_BY_TYPE if isinstance(name_or_type, int) else MECHANISMS
    try:
        return table[name_or_type]
    except KeyError:
        raise ValueError(f"Unknown SCRAM mechanism {name_or_type!r}") from None


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self):  # never log key material
        return f"ScramCredential(iterations={self.iterations}, salt=[hidden], stored_key=[hidden], server_key=[hidden])"

    def to_text(self) -> str:
        """Kafka's ScramCredentialUtils.credentialToString."""
        b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},server_key={b64(self.server_key)},"
                f"iterations={self.iterations}")

    @classmethod
    def from_text(cls, text: str) -> ScramCredential:
        """Kafka's credentialFromString: exactly the four properties; ValueError otherwise."""
        props = {}
        for token in text.split(","):
            key, separator, value = token.partition("=")
            if not separator or not key:
                raise ValueError(f"Credentials not valid: {text}")
            props[key] = value
        if set(props) != {"salt", "stored_key", "server_key", "iterations"}:
            raise ValueError(f"Credentials not valid: {text}")
        try:
            return cls(base64.b64decode(props["salt"], validate=True),
                       base64.b64decode(props["stored_key"], validate=True),
                       base64.b64decode(props["server_key"], validate=True), int(props["iterations"]))
        except (binascii.Error, ValueError):
            raise ValueError(f"Credentials not valid: {text}") from None


def credential_from_salted(mechanism: ScramMechanism, salt: bytes, salted_password: bytes,
                           iterations: int) -> ScramCredential:
    """What the controller stores for an upsertion (ScramFormatter.generateCredential(salt, saltedPassword, ...))."""
    return ScramCredential(salt, mechanism.hash(mechanism.client_key(salted_password)),
                           mechanism.server_key(salted_password), iterations)


def credential_from_password(mechanism: ScramMechanism, password: str, iterations: int,
                             salt: bytes | None = None) -> ScramCredential:
    salt = salt if salt is not None else secrets.token_bytes(24)
    return credential_from_salted(mechanism, salt, mechanism.salted_password(password, salt, iterations), iterations)


def validate_alteration(user: str, mechanism_type: int, iterations: int | None = None) -> tuple[int, str] | None:
    """Kafka's controller checks of one deletion (iterations None) or upsertion: (error code, message) or None."""
    if not user:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    mechanism = MECHANISMS_BY_TYPE.get(mechanism_type)
    if mechanism is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if iterations is not None and iterations < mechanism.min_iterations:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if iterations is not None and iterations > mechanism.max_iterations:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    return None


class ScramCredentialStore:
    """(user, mechanism) -> ScramCredential, persisted in one JSON file when a path is given (None: in memory).

    Changes are made under a lock and written before the call returns, so a credential an admin call reported as
    stored survives a restart."""

    def __init__(self, path: str | None = None):
        self.path = path
        self._lock = threading.Lock()
        self._credentials: dict[str, dict[str, ScramCredential]] = {}  # user -> mechanism name -> credential
        if path is not None and os.path.exists(path):
            self._credentials = _load(path)

    @classmethod
    def open(cls, data_dir_or_path: str) -> ScramCredentialStore:
        """The store of a data dir (its `scram-credentials.json`) or of an explicit .json path."""
        path = data_dir_or_path
        if os.path.isdir(path):
            path = os.path.join(path, FILE_NAME)
        return cls(path)

    # -- reads --------------------------------------------------------------------------------------------------
    def get(self, user: str, mechanism: str | int | ScramMechanism) -> ScramCredential | None:
        return self._credentials.get(user, {}).get(mechanism_named(mechanism).name)

    def users(self) -> list[str]:
        return sorted(self._credentials)

    def describe(self, user: str) -> list[tuple[ScramMechanism, int]]:
        """The user's (mechanism, iterations), in mechanism type order; [] for an unknown user."""
        with self._lock:
            entries = dict(self._credentials.get(user, {}))
        return sorted(((MECHANISMS[name], cred.iterations) for name, cred in entries.items()),
                      key=lambda entry: entry[0].type)

    # -- changes ------------------------------------------------------------------------------------------------
    def set_password(self, user: str, mechanism: str | int | ScramMechanism, password: str,
                     iterations: int = 4096) -> ScramCredential:
        mech = mechanism_named(mechanism)
        _check_iterations(user, mech, iterations)
        credential = credential_from_password(mech, password, iterations)
        self.put(user, mech, credential)
        return credential

    def set_salted(self, user: str, mechanism: str | int | ScramMechanism, salt: bytes, salted_password: bytes,
                   iterations: int) -> ScramCredential:
        mech = mechanism_named(mechanism)
        _check_iterations(user, mech, iterations)
        credential = credential_from_salted(mech, salt, salted_password, iterations)
        self.put(user, mech, credential)
        return credential

    def put(self, user: str, mechanism: str | int | ScramMechanism, credential: ScramCredential) -> None:
        self.apply([], [(user, mechanism_named(mechanism), credential)])

    def delete(self, user: str, mechanism: str | int | ScramMechanism) -> bool:
        """Remove one credential; False when there was none."""
        mech = mechanism_named(mechanism)
        with self._lock:
            if mech.name not in self._credentials.get(user, {}):
                return False
            self._apply_locked([(user, mech)], [])
            return True

    def apply(self, deletions: list[tuple[str, ScramMechanism]],
              upsertions: list[tuple[str, ScramMechanism, ScramCredential]]) -> None:
        """Several changes, written as one file update: all of them take effect, or (OSError writing the file)
        none (AlterUserScramCredentials applies a request atomically)."""
        with self._lock:
            self._apply_locked(deletions, upsertions)

    def _apply_locked(self, deletions, upsertions) -> None:
        updated = {user: dict(entries) for user, entries in self._credentials.items()}
        for user, mech in deletions:
            entries = updated.get(user, {})
            entries.pop(mech.name, None)
            if not entries:
                updated.pop(user, None)
        for user, mech, credential in upsertions:
            updated.setdefault(user, {})[mech.name] = credential
        self._save(updated)
        self._credentials = updated

    def _save(self, credentials: dict[str, dict[str, ScramCredential]]) -> None:
        if self.path is None:
            return
        document = {"version": _FILE_VERSION,
                    "credentials": {user: {name: cred.to_text() for name, cred in sorted(entries.items())}
                                    for user, entries in sorted(credentials.items())}}
        write_atomically(self.path, json.dumps(document, indent=1) + "\n")


def _check_iterations(user: str, mechanism: ScramMechanism, iterations: int) -> None:
    problem = validate_alteration(user, mechanism.type, iterations)
    if problem is not None:
        raise ValueError(problem[1])


def _load(path: str) -> dict[str, dict[str, ScramCredential]]:
    try:
        with open(path, encoding="utf-8") as source:
            document = json.load(source)
        if document.get("version") != _FILE_VERSION:
            raise ValueError(f"unsupported version {document.get('version')!r}")
        credentials = {}
        for user, entries in document["credentials"].items():
            credentials[user] = {mechanism_named(name).name: ScramCredential.from_text(text)
                                 for name, text in entries.items()}
        return {user: entries for user, entries in credentials.items() if entries}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"SCRAM credential file {path} is not valid: {exc}") from exc
