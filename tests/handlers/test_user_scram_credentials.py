"""DescribeUserScramCredentials and AlterUserScramCredentials: Kafka's rules and messages, the store behind them,
and cluster authorization."""
from __future__ import annotations

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import (AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
                                            DescribeUserScramCredentialsRequest)
from compatbroker.security.acls import AclOperation, ResourceType
from compatbroker.security.acls.types import CLUSTER_NAME
from compatbroker.security.sasl import new_sasl_server
from compatbroker.security.scram_credentials import SCRAM_SHA_256, SCRAM_SHA_512, ScramCredentialStore
from tests.security.sasl_helpers import ScramClient, listener

from .authz_helpers import AUTHORIZER_ON, allow, call_as
from .helpers import call

Deletion = AlterUserScramCredentialsRequest.ScramCredentialDeletion
Upsertion = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
UserName = DescribeUserScramCredentialsRequest.UserName
SALT = b"client-chosen-salt"


def upsertion(user: str, password: str = "secret", *, mechanism=SCRAM_SHA_256, iterations: int = 4096,
              salt: bytes = SALT) -> Upsertion:
    return Upsertion(name=user, mechanism=mechanism.type, iterations=iterations, salt=salt,
                     salted_password=mechanism.salted_password(password, salt, iterations))


async def alter(broker, *, deletions=(), upsertions=(), as_principal=None) -> dict:
    request = AlterUserScramCredentialsRequest(deletions=list(deletions), upsertions=list(upsertions))
    answer = (await call(broker, 0, request) if as_principal is None
              else await call_as(broker, 0, request, principal=as_principal))
    return {r.user: (r.error_code, r.error_message) for r in answer.decoded.results}


async def describe(broker, users=None, **options):
    request = DescribeUserScramCredentialsRequest(
        users=None if users is None else [UserName(name=user) for user in users])
    answer = await (call(broker, 0, request) if not options else call_as(broker, 0, request, **options))
    return answer.decoded


def infos(result) -> list[tuple[int, int]]:
    return [(info.mechanism, info.iterations) for info in result.credential_infos]


async def test_upserted_credentials_authenticate_with_the_password(broker):
    assert await alter(broker, upsertions=[upsertion("alice", "pw-256"),
                                           upsertion("bob", "pw-512", mechanism=SCRAM_SHA_512, iterations=8192)]) == {
        "alice": (0, None), "bob": (0, None)}
    stored = broker.security.scram.get("alice", SCRAM_SHA_256)
    assert stored.salt == SALT and stored.iterations == 4096
    server = new_sasl_server("SCRAM-SHA-512", listener(), broker.security.scram)
    client = ScramClient("SCRAM-SHA-512", "bob", "pw-512")
    assert client.verifies(server.evaluate(client.final(server.evaluate(client.first()))))
    assert server.principal.name == "bob"


async def test_credentials_survive_a_restart(broker):
    await alter(broker, upsertions=[upsertion("alice")])
    reopened = ScramCredentialStore.open(broker.security.data_dir)
    assert reopened.get("alice", SCRAM_SHA_256) == broker.security.scram.get("alice", SCRAM_SHA_256)


async def test_describe_lists_mechanisms_and_iterations(broker):
    await alter(broker, upsertions=[upsertion("alice", iterations=5000)])
    await alter(broker, upsertions=[upsertion("alice", mechanism=SCRAM_SHA_512, iterations=6000),
                                    upsertion("bob")])
    response = await describe(broker, ["alice"])
    assert response.error_code == 0 and response.error_message is None
    [result] = response.results
    assert (result.user, result.error_code, result.error_message) == ("alice", 0, None)
    assert infos(result) == [(1, 5000), (2, 6000)]
    for everyone in (None, []):
        assert sorted(r.user for r in (await describe(broker, everyone)).results) == ["alice", "bob"]


async def test_describe_errors_per_user(broker):
    await alter(broker, upsertions=[upsertion("alice")])
    results = {r.user: r for r in (await describe(broker, ["alice", "nobody", "bob", "bob"])).results}
    assert list(results) == ["alice", "nobody", "bob"]
    assert results["alice"].error_code == 0
    assert (results["nobody"].error_code, results["nobody"].error_message) == (
        ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: nobody")
    assert (results["bob"].error_code, results["bob"].error_message) == (
        ErrorCode.DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials for the same user twice in a single "
                                      "request: bob")
    assert infos(results["bob"]) == [] and infos(results["nobody"]) == []


async def test_alteration_errors_are_kafkas(broker):
    await alter(broker, upsertions=[upsertion("carol")])
    results = await alter(broker, deletions=[
        Deletion(name="nobody", mechanism=1),
        Deletion(name="carol", mechanism=0),
        Deletion(name="", mechanism=1),
    ], upsertions=[
        upsertion("few", iterations=4095),
        upsertion("many", iterations=16385),
        Upsertion(name="unknown", mechanism=3, iterations=4096, salt=SALT, salted_password=b"x" * 32),
        upsertion("edge-low", iterations=4096),
        upsertion("edge-high", iterations=16384),
    ])
    assert results == {
        "edge-low": (0, None),
        "edge-high": (0, None),
        "nobody": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "carol": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "few": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "many": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "unknown": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
    }
    store = broker.security.scram
    assert store.users() == ["carol", "edge-high", "edge-low"]


async def test_a_user_altered_twice_is_refused_entirely(broker):
    await alter(broker, upsertions=[upsertion("alice"), upsertion("bob")])
    before = broker.security.scram.get("alice", SCRAM_SHA_256)
    results = await alter(broker, deletions=[Deletion(name="alice", mechanism=1), Deletion(name="bob", mechanism=1),
                                             Deletion(name="bob", mechanism=1)],
                          upsertions=[upsertion("alice", "new", mechanism=SCRAM_SHA_512), upsertion("dave"),
                                      upsertion("dave", mechanism=SCRAM_SHA_512)])
    duplicate = (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
    assert results == {"alice": duplicate, "bob": duplicate, "dave": duplicate}
    assert broker.security.scram.get("alice", SCRAM_SHA_256) == before
    assert broker.security.scram.get("alice", SCRAM_SHA_512) is None
    assert broker.security.scram.users() == ["alice", "bob"]


async def test_deletion_removes_one_mechanism(broker):
    await alter(broker, upsertions=[upsertion("alice")])
    await alter(broker, upsertions=[upsertion("alice", mechanism=SCRAM_SHA_512)])
    assert await alter(broker, deletions=[Deletion(name="alice", mechanism=1)]) == {"alice": (0, None)}
    [result] = (await describe(broker, ["alice"])).results
    assert infos(result) == [(2, 4096)]


async def test_an_empty_salted_password_is_an_unknown_server_error(broker):
    bad = Upsertion(name="alice", mechanism=1, iterations=4096, salt=SALT, salted_password=b"")
    assert await alter(broker, upsertions=[bad]) == {"alice": (ErrorCode.UNKNOWN_SERVER_ERROR, None)}
    assert broker.security.scram.users() == []


async def test_a_failed_write_answers_unknown_server_error_and_changes_nothing(broker, monkeypatch):
    from compatbroker.security import scram_credentials

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(scram_credentials, "write_atomically", fail)
    assert await alter(broker, upsertions=[upsertion("alice")]) == {"alice": (ErrorCode.UNKNOWN_SERVER_ERROR, None)}
    assert broker.security.scram.users() == []


# -- authorization --------------------------------------------------------------------------------------------------

async def test_describe_needs_cluster_describe(broker_factory):
    broker = broker_factory(**AUTHORIZER_ON)
    broker.security.scram.set_password("alice", "SCRAM-SHA-256", "secret")
    denied = await describe(broker, ["alice", "bob"], principal="User:alice")
    assert (denied.error_code, denied.error_message) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    assert [(r.user, r.error_code, r.error_message) for r in denied.results] == [
        ("", ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)] * 2
    allow(broker, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)
    allowed = await describe(broker, ["alice"], principal="User:alice")
    assert allowed.error_code == 0 and infos(allowed.results[0]) == [(1, 4096)]


async def test_alter_needs_cluster_alter_and_changes_nothing_without_it(broker_factory):
    broker = broker_factory(**AUTHORIZER_ON)
    allow(broker, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)  # DESCRIBE does not imply ALTER
    results = await alter(broker, deletions=[Deletion(name="zed", mechanism=1)],
                          upsertions=[upsertion("bob"), upsertion("alice")], as_principal="User:alice")
    assert results == {user: (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None) for user in ("alice", "bob", "zed")}
    assert broker.security.scram.users() == []
    allow(broker, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)
    assert await alter(broker, upsertions=[upsertion("alice")], as_principal="User:alice") == {"alice": (0, None)}


async def test_unauthorized_alter_lists_users_sorted(broker_factory):
    broker = broker_factory(**AUTHORIZER_ON)
    request = AlterUserScramCredentialsRequest(deletions=[Deletion(name="zed", mechanism=1)],
                                               upsertions=[upsertion("bob"), upsertion("alice"), upsertion("bob")])
    answer = await call_as(broker, 0, request, principal="User:alice")
    assert isinstance(answer.decoded, AlterUserScramCredentialsResponse)
    assert [r.user for r in answer.decoded.results] == ["alice", "bob", "zed"]
