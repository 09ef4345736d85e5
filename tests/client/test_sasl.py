"""The SCRAM and PLAIN client state machines, checked against RFC 7677's SCRAM-SHA-256 example exchange, and their
refusals of a wrong server (bad nonce, too few iterations, a signature that does not verify)."""
from __future__ import annotations

import pytest

from compatbroker.client import KafkaError
from compatbroker.client.sasl import PlainClient, ScramClient, salted_password

# RFC 7677, section 3
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_client() -> ScramClient:
    return ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=CLIENT_NONCE)


def test_scram_sha256_matches_rfc7677():
    client = rfc_client()
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert client.next(SERVER_FIRST) == CLIENT_FINAL
    assert client.next(SERVER_FINAL) is None


def test_wrong_server_signature_is_refused():
    client = rfc_client()
    client.next(SERVER_FIRST)
    with pytest.raises(KafkaError, match="signature") as caught:
        client.next(b"v=AAAA" + SERVER_FINAL[6:])
    assert caught.value.name == "SASL_AUTHENTICATION_FAILED"


def test_server_error_is_reported():
    client = rfc_client()
    client.next(SERVER_FIRST)
    with pytest.raises(KafkaError, match="invalid-proof"):
        client.next(b"e=invalid-proof")


@pytest.mark.parametrize("server_first, match", [
    (b"r=someoneelse,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),
    (b"r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),
    (b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4095", "minimum 4096"),
    (b"r=rOprNGfwEbeRWgbNEkqOxyz,i=4096", "malformed"),
    (b"r=rOprNGfwEbeRWgbNEkqOxyz,s=not*base64,i=4096", "malformed"),
    (b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=2147483647", "maximum 16384"),
])
def test_bad_server_first_is_refused(server_first, match):
    with pytest.raises(KafkaError, match=match):
        rfc_client().next(server_first)


def test_usernames_are_escaped():
    assert ScramClient("SCRAM-SHA-512", "a=b,c", "p", nonce="n").first() == b"n,,n=a=3Db=2Cc,r=n"


def test_plain_token():
    client = PlainClient("alice", "secret")
    assert client.first() == b"\0alice\0secret"
    assert client.next(b"") is None


def test_salted_password_is_pbkdf2_hmac():
    # RFC 7914 section 11: PBKDF2-HMAC-SHA256, P="passwd", S="salt", c=1 (the first 32 bytes of its 64-byte output)
    expected = bytes.fromhex("55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc")
    assert salted_password("SCRAM-SHA-256", "passwd", b"salt", 1) == expected
    assert len(salted_password("SCRAM-SHA-512", "passwd", b"salt", 1)) == 64
