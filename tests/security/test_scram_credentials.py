"""SCRAM credentials: Kafka's derivation and text form, the alteration rules, and the persisted store."""
from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.security import scram_credentials
from compatbroker.security.scram_credentials import (SCRAM_SHA_256, SCRAM_SHA_512, ScramCredential,
                                                     ScramCredentialStore, credential_from_salted, mechanism_named,
                                                     validate_alteration)


def test_keys_are_derived_as_rfc5802_says():
    salt, password = b"salt-bytes", "pencil"
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, 4096)
    credential = credential_from_salted(SCRAM_SHA_512, salt, salted, 4096)
    client_key = hmac.new(salted, b"Client Key", "sha512").digest()
    assert credential.stored_key == hashlib.sha512(client_key).digest()
    assert credential.server_key == hmac.new(salted, b"Server Key", "sha512").digest()
    assert SCRAM_SHA_512.salted_password(password, salt, 4096) == salted


def test_text_form_is_kafkas():
    credential = ScramCredential(b"\x01\x02", b"\x03", b"\x04", 4096)
    assert credential.to_text() == "salt=AQI=,stored_key=Aw==,server_key=BA==,iterations=4096"
    assert ScramCredential.from_text(credential.to_text()) == credential
    assert "AQI" not in repr(credential)


@pytest.mark.parametrize("text", ["salt=AQI=,stored_key=Aw==,server_key=BA==",
                                  "salt=AQI=,stored_key=Aw==,server_key=BA==,iterations=x",
                                  "salt=A!,stored_key=Aw==,server_key=BA==,iterations=1",
                                  "salt=AQI=,stored_key=Aw==,server_key=BA==,iterations=1,extra=1", "garbage"])
def test_malformed_text_is_refused(text):
    with pytest.raises(ValueError, match="Credentials not valid"):
        ScramCredential.from_text(text)


def test_mechanisms_by_name_and_type():
    assert mechanism_named("SCRAM-SHA-256") is SCRAM_SHA_256 and mechanism_named(2) is SCRAM_SHA_512
    for unknown in ("scram-sha-1", 0, 3):
        with pytest.raises(ValueError):
            mechanism_named(unknown)


@pytest.mark.parametrize("user, mechanism, iterations, expected", [
    ("alice", 1, 4096, None),
    ("alice", 2, 16384, None),
    ("alice", 1, None, None),
    ("", 1, 4096, (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")),
    ("alice", 0, 4096, (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")),
    ("alice", 3, None, (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")),
    ("alice", 1, 4095, (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")),
    ("alice", 2, 16385, (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")),
])
def test_alteration_rules(user, mechanism, iterations, expected):
    assert validate_alteration(user, mechanism, iterations) == expected


def test_store_persists_and_reloads(tmp_path):
    store = ScramCredentialStore.open(str(tmp_path))
    stored = store.set_password("alice", "SCRAM-SHA-256", "secret", iterations=8192)
    store.set_password("bob", "SCRAM-SHA-512", "bob-secret")
    document = json.loads((tmp_path / "scram-credentials.json").read_text())
    assert document["credentials"]["alice"]["SCRAM-SHA-256"] == stored.to_text()

    reloaded = ScramCredentialStore.open(str(tmp_path))
    assert reloaded.get("alice", "SCRAM-SHA-256") == stored
    assert reloaded.users() == ["alice", "bob"]
    assert reloaded.describe("alice") == [(SCRAM_SHA_256, 8192)]

    assert reloaded.delete("alice", "SCRAM-SHA-256") is True
    assert reloaded.delete("alice", "SCRAM-SHA-256") is False
    assert ScramCredentialStore.open(str(tmp_path)).users() == ["bob"]


def test_store_refuses_out_of_range_iterations():
    with pytest.raises(ValueError, match="Too few iterations"):
        ScramCredentialStore().set_password("alice", "SCRAM-SHA-256", "secret", iterations=10)


def test_set_salted_keeps_the_clients_salt():
    store = ScramCredentialStore()
    salted = SCRAM_SHA_256.salted_password("pw", b"client-salt", 4096)
    store.set_salted("alice", 1, b"client-salt", salted, 4096)
    assert store.get("alice", 1) == credential_from_salted(SCRAM_SHA_256, b"client-salt", salted, 4096)


def test_a_failed_write_changes_nothing(tmp_path, monkeypatch):
    store = ScramCredentialStore.open(str(tmp_path))
    store.set_password("alice", "SCRAM-SHA-256", "secret")

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(scram_credentials, "write_atomically", fail)
    with pytest.raises(OSError):
        store.apply([("alice", SCRAM_SHA_256)], [("bob", SCRAM_SHA_512, store.get("alice", 1))])
    assert store.users() == ["alice"]


@pytest.mark.parametrize("content", ["not json", '{"version": 7, "credentials": {}}',
                                     '{"version": 1, "credentials": {"a": {"SCRAM-SHA-1": "x"}}}',
                                     '{"version": 1, "credentials": {"a": {"SCRAM-SHA-256": "salt=x"}}}'])
def test_a_damaged_file_stops_the_start_with_its_path(tmp_path, content):
    path = tmp_path / "scram-credentials.json"
    path.write_text(content)
    with pytest.raises(ValueError, match="scram-credentials.json is not valid"):
        ScramCredentialStore.open(str(tmp_path))

