"""SASL/OAUTHBEARER as Kafka's OAuthBearerSaslServer: the client first message, Kafka's unsecured validator, the
secured validator against a JWKS file, the error challenge and the client's \\x01, and the token's lifetime."""
from __future__ import annotations

import dataclasses
import json
import re

import pytest

from compatbroker.security.principal import KafkaPrincipal
from compatbroker.security.sasl import SaslAuthenticationError, SaslCredentialsError, check_listener, new_sasl_server
from compatbroker.security.scram_credentials import ScramCredentialStore
from compatbroker.security.settings import OAuthBearerSettings

from .sasl_helpers import SigningKey, listener, oauth_first_message, unsecured_jwt, write_jwks

NOW_MS = 1_700_000_000_000
NOW_S = NOW_MS // 1000
INVALID_TOKEN = b'{"status":"invalid_token"}'


def unsecured_server(options=None, now_ms=NOW_MS):
    return new_sasl_server("OAUTHBEARER", listener(oauth_options=options or {}), ScramCredentialStore(),
                           now_ms=now_ms)


def claims(**overrides):
    base = {"sub": "alice", "iat": NOW_S - 10, "exp": NOW_S + 3600}
    base.update(overrides)
    return {key: value for key, value in base.items() if value is not None}


def refused(server, token, *, authzid=""):
    """Send the token, expect the error challenge, answer \\x01 and return the failure."""
    challenge = server.evaluate(oauth_first_message(token, authzid=authzid))
    assert not server.complete
    with pytest.raises(SaslAuthenticationError) as failure:
        server.evaluate(b"\x01")
    assert str(failure.value) == challenge.decode()
    return challenge


# -- the unsecured validator ---------------------------------------------------------------------------------------

def test_a_valid_unsecured_token_authenticates_and_gives_its_remaining_lifetime():
    server = unsecured_server()
    assert server.evaluate(oauth_first_message(unsecured_jwt(claims()), extensions={"traceId": "abc"})) == b""
    assert server.complete and server.principal == KafkaPrincipal("User", "alice")
    assert server.lifetime_ms == 3600 * 1000
    assert server.extensions == {"traceId": "abc"}


def test_a_clock_function_is_read_when_the_token_is_checked():
    times = iter([NOW_MS, NOW_MS + 1000])
    server = unsecured_server(now_ms=lambda: next(times))
    server.evaluate(oauth_first_message(unsecured_jwt(claims())))
    assert server.lifetime_ms == 3600 * 1000 - 1000


@pytest.mark.parametrize("token_claims, header", [
    (claims(exp=NOW_S - 1), None),                           # expired
    (claims(exp=NOW_S), None),                               # "on or after" the expiration time
    (claims(exp=None), None),                                # exp required
    (claims(sub=None), None),                                # principal claim required
    (claims(sub="  "), None),
    (claims(sub=42), None),
    (claims(exp="soon"), None),
    (claims(iat=NOW_S + 60), None),                          # issued in the future
    (claims(iat=NOW_S + 7200), None),                        # and after exp
    (claims(), {"alg": "RS256"}),                            # must be unsecured
    (claims(), {"typ": "JWT"}),                              # no alg
])
def test_invalid_unsecured_tokens_get_the_invalid_token_challenge_then_fail(token_claims, header):
    assert refused(unsecured_server(), unsecured_jwt(token_claims, header)) == INVALID_TOKEN


@pytest.mark.parametrize("token", ["a.b.c.d", "abc", "e30.e30.sig", "e.e30.", "e3.e30.", "e30..", "W10.W10."])
def test_malformed_unsecured_tokens_are_invalid_tokens(token):
    assert refused(unsecured_server(), token) == INVALID_TOKEN


def test_clock_skew_option_tolerates_a_just_expired_token():
    token = unsecured_jwt(claims(exp=NOW_S - 1))
    server = unsecured_server({"unsecuredValidatorAllowableClockSkewMs": "5000"})
    server.evaluate(oauth_first_message(token))
    assert server.complete and server.lifetime_ms == 0


def test_principal_claim_name_option():
    server = unsecured_server({"unsecuredValidatorPrincipalClaimName": "client_id"})
    server.evaluate(oauth_first_message(unsecured_jwt(claims(sub=None, client_id="svc"))))
    assert server.principal.name == "svc"


def test_missing_required_scope_answers_insufficient_scope():
    options = {"unsecuredValidatorRequiredScope": "read write"}
    challenge = refused(unsecured_server(options), unsecured_jwt(claims(scope=["read"])))
    assert challenge == b'{"status":"insufficient_scope", "scope":"[read, write]"}'
    server = unsecured_server({**options, "unsecuredValidatorScopeClaimName": "scp"})
    server.evaluate(oauth_first_message(unsecured_jwt(claims(scp="read write".split()))))
    assert server.complete


def test_authorization_id_must_be_the_tokens_principal():
    server = unsecured_server()
    with pytest.raises(SaslAuthenticationError) as failure:
        server.evaluate(oauth_first_message(unsecured_jwt(claims()), authzid="bob"))
    assert str(failure.value) == ("Authentication failed: Client requested an authorization id (bob) that is "
                                  "different from the token's principal name (alice)")


def test_a_client_may_retry_with_a_good_token_after_the_challenge():
    server = unsecured_server()
    assert server.evaluate(oauth_first_message(unsecured_jwt(claims(exp=NOW_S - 5)))) == INVALID_TOKEN
    server.evaluate(oauth_first_message(unsecured_jwt(claims())))
    assert server.complete


@pytest.mark.parametrize("message", [
    b"\x01",                                           # acknowledging an error never sent
    b"n,,\x01auth=Bearer abc\x01",                     # missing the final \x01
    b"n,,\x01\x01",                                    # no auth
    b"n,,\x01auth=Basic abc\x01\x01",                  # not bearer
    b"n,,\x01auth=Bearer\x01\x01",                     # no token
    b"p=tls-unique,,\x01auth=Bearer abc\x01\x01",
    b"",
])
def test_malformed_client_first_messages_fail_with_the_generic_message(message):
    with pytest.raises(SaslCredentialsError) as failure:
        unsecured_server().evaluate(message)
    assert str(failure.value) == ("Authentication failed during authentication due to invalid credentials with "
                                  "SASL mechanism OAUTHBEARER")


def test_nothing_is_accepted_after_completion():
    server = unsecured_server()
    message = oauth_first_message(unsecured_jwt(claims()))
    server.evaluate(message)
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(message)


# -- the secured validator (JWKS file) -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def keys():
    return {"rsa": SigningKey("RSA", "rsa-1"), "ec": SigningKey("EC", "ec-1"), "other": SigningKey("RSA", "rsa-2")}


def secured_server(tmp_path, keys, *, now_ms=NOW_MS, **settings):
    url = write_jwks(tmp_path / "jwks.json", keys["rsa"], keys["ec"])
    return new_sasl_server("OAUTHBEARER", listener(jwks_url=url, **settings), ScramCredentialStore(), now_ms=now_ms)


@pytest.mark.parametrize("key", ["rsa", "ec"])
def test_signed_tokens_from_the_jwks_authenticate(tmp_path, keys, key):
    server = secured_server(tmp_path, keys)
    server.evaluate(oauth_first_message(keys[key].sign(claims(scope="a b"))))
    assert server.complete and server.principal.name == "alice"
    assert server.lifetime_ms == 3600 * 1000
    assert server.token.scope == frozenset({"a b"})


def secured_validator(tmp_path, keys, **settings):
    from compatbroker.security.sasl.jwks import JwksValidator
    url = write_jwks(tmp_path / "jwks.json", keys["rsa"], keys["ec"])
    return JwksValidator(OAuthBearerSettings(jwks_endpoint_url=url, **settings), lambda: NOW_MS)


def tampered(keys):
    header, _, signature = keys["rsa"].sign(claims()).split(".")
    return f"{header}.{unsecured_jwt(claims(sub='mallory')).split('.')[1]}.{signature}"


@pytest.mark.parametrize("make_token, reason", [
    (tampered, "invalid signature"),
    (lambda keys: keys["other"].sign(claims()), "unexpected number (0) of selected keys"),   # kid not in the JWKS
    (lambda keys: keys["other"].sign(claims(), header={"alg": "RS256"}), "invalid signature"),  # the one RSA key
    (lambda keys: unsecured_jwt(claims()), "Malformed JWT"),                                # no signature
    (lambda keys: unsecured_jwt(claims()) + "c2ln", "algorithm 'none' is not permitted"),
    (lambda keys: keys["rsa"].sign(claims(exp=NOW_S - 31)), "no longer valid"),             # beyond the 30 s skew
    (lambda keys: keys["rsa"].sign(claims(iat=None)), "No Issued At (iat) claim present"),
    (lambda keys: keys["rsa"].sign(claims(nbf=NOW_S + 31)), "not yet valid"),
    (lambda keys: keys["rsa"].sign(claims(sub=None)), "sub value must be non-null"),
    (lambda keys: keys["rsa"].sign(claims(sub=7)), "Could not extract the 'sub' claim"),
    (lambda keys: keys["rsa"].sign(claims(aud="kafka")), "no expected audience"),
    (lambda keys: keys["rsa"].sign(claims(scope=["a", "a"])), "must not contain duplicates"),
    (lambda keys: "a.b", "Malformed JWT"),
])
def test_secured_validator_refuses_bad_tokens(tmp_path, keys, make_token, reason):
    from compatbroker.security.sasl.jwks import TokenValidationError
    token = make_token(keys)
    with pytest.raises(TokenValidationError, match=re.escape(reason)):
        secured_validator(tmp_path, keys).validate(token)
    assert refused(secured_server(tmp_path, keys), token) == INVALID_TOKEN


def test_a_token_without_kid_uses_the_only_key_of_its_type(tmp_path, keys):
    server = secured_server(tmp_path, keys)
    server.evaluate(oauth_first_message(keys["ec"].sign(claims(), header={"alg": "ES256"})))
    assert server.complete


def test_clock_skew_setting(tmp_path, keys):
    token = keys["rsa"].sign(claims(exp=NOW_S - 20))
    assert refused(secured_server(tmp_path, keys, clock_skew_seconds=10), token) == INVALID_TOKEN
    server = secured_server(tmp_path, keys, clock_skew_seconds=30)
    server.evaluate(oauth_first_message(token))
    assert server.complete and server.lifetime_ms == 0


def test_expected_audience_and_issuer(tmp_path, keys):
    settings = {"expected_audience": ("kafka", "other"), "expected_issuer": "https://issuer"}
    good = keys["rsa"].sign(claims(aud=["x", "kafka"], iss="https://issuer"))
    server = secured_server(tmp_path, keys, **settings)
    server.evaluate(oauth_first_message(good))
    assert server.complete
    for token in [keys["rsa"].sign(claims(aud="x", iss="https://issuer")),
                  keys["rsa"].sign(claims(iss="https://issuer")),
                  keys["rsa"].sign(claims(aud="kafka", iss="https://elsewhere")),
                  keys["rsa"].sign(claims(aud="kafka"))]:
        assert refused(secured_server(tmp_path, keys, **settings), token) == INVALID_TOKEN


def test_sub_claim_name_setting(tmp_path, keys):
    server = secured_server(tmp_path, keys, sub_claim_name="client_id")
    server.evaluate(oauth_first_message(keys["ec"].sign(claims(sub=None, client_id="svc"))))
    assert server.principal.name == "svc"


def test_the_jwks_file_is_reread_when_it_changes(tmp_path, keys):
    token = keys["other"].sign(claims())
    assert refused(secured_server(tmp_path, keys), token) == INVALID_TOKEN
    url = write_jwks(tmp_path / "jwks.json", keys["other"])
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [keys["other"].jwk()], "rotated": True}))  # a different size: a new file
    server = new_sasl_server("OAUTHBEARER", listener(jwks_url=url), ScramCredentialStore(), now_ms=NOW_MS)
    server.evaluate(oauth_first_message(token))
    assert server.complete


def test_a_missing_jwks_file_fails_authentication_with_the_generic_message(tmp_path, keys):
    server = new_sasl_server("OAUTHBEARER", listener(jwks_url=(tmp_path / "absent.json").as_uri()),
                             ScramCredentialStore(), now_ms=NOW_MS)
    with pytest.raises(SaslCredentialsError) as failure:
        server.evaluate(oauth_first_message(keys["rsa"].sign(claims())))
    assert "internal error on the server" in failure.value.reason


# -- configuration checks ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("options, problem", [({"unsecuredValidatorAllowableClockSkewMs": "-1"}, "negative"),
                                              ({"unsecuredValidatorAllowableClockSkewMs": "soon"}, "soon"),
                                              ({"unsecuredValidatorRequiredScope": "a \"b"}, "Invalid scope value")])
def test_bad_unsecured_options_are_reported_at_start_and_fail_authentication(options, problem):
    with pytest.raises(ValueError, match=problem):
        check_listener(listener(oauth_options=options))
    with pytest.raises(SaslCredentialsError) as failure:
        unsecured_server(options).evaluate(oauth_first_message(unsecured_jwt(claims())))
    assert "internal error on the server" in failure.value.reason


def test_jwks_settings_are_checked_at_start(tmp_path, keys):
    check_listener(listener(jwks_url=write_jwks(tmp_path / "jwks.json", keys["rsa"])))
    (tmp_path / "bad.json").write_text('{"no": "keys"}')
    for url, problem in [((tmp_path / "absent.json").as_uri(), "No such file"),
                         ((tmp_path / "bad.json").as_uri(), "not a JSON Web Key Set"),
                         ("https://issuer/jwks", "only file: URLs")]:
        with pytest.raises(ValueError, match=problem):
            check_listener(listener(jwks_url=url))
    with pytest.raises(ValueError, match="needs sasl.oauthbearer.jwks.endpoint.url"):
        check_listener(dataclasses.replace(listener(jwks_url="file:///x"), oauthbearer=OAuthBearerSettings()))
