"""Admin operations of a secured cluster: ACLs (describe, create, delete, with per-binding outcomes) and SCRAM users
(described without secrets, created with client-side salting, then used to log in; deleted, then refused)."""
from __future__ import annotations

import pytest

from compatbroker import EmbeddedBroker, SecuritySetup
from compatbroker.client import ClientConfig, KafkaClient, KafkaError
from compatbroker.client.admin import AclBinding, AclFilter, Admin, ScramUpsertion, UserResult


@pytest.fixture(scope="module")
def setup():
    made = SecuritySetup(listeners=("SASL_SSL", "SASL_PLAINTEXT"), mechanisms=("SCRAM-SHA-256", "SCRAM-SHA-512"),
                         acls=True)
    yield made
    made.cleanup()


@pytest.fixture(scope="module")
def secured(setup):
    with EmbeddedBroker(security=setup) as running:
        yield running


def client_as(secured, user: str, password: str | None = None, mechanism: str = "SCRAM-SHA-512") -> KafkaClient:
    properties = secured.client_config("kcat", "SASL_SSL", user=user, password=password, mechanism=mechanism)
    return KafkaClient(ClientConfig(properties=properties))


@pytest.fixture
def admin(secured):
    with client_as(secured, "admin") as client:
        yield Admin(client)


def test_create_describe_and_delete_acls(admin):
    bindings = [AclBinding("TOPIC", "orders", "User:alice", "READ"),
                AclBinding("GROUP", "app-", "User:alice", "READ", pattern_type="PREFIXED"),
                AclBinding("TOPIC", "orders", "User:bob", "WRITE", permission="DENY", host="10.0.0.1")]
    results = admin.create_acls(bindings)
    assert [r.error for r in results] == [None, None, None]
    described = admin.describe_acls(AclFilter(resource_type="TOPIC", resource_name="orders"))
    assert [(b.principal, b.operation, b.permission, b.host) for b in described] == [
        ("User:alice", "READ", "ALLOW", "*"), ("User:bob", "WRITE", "DENY", "10.0.0.1")]
    assert set(described[0].to_json()) == {"resource_type", "resource_name", "principal", "operation", "permission",
                                           "pattern_type", "host"}
    alice = admin.describe_acls(AclFilter(principal="User:alice"))
    assert {(b.resource_type, b.pattern_type) for b in alice} == {("TOPIC", "LITERAL"), ("GROUP", "PREFIXED")}
    matching = admin.describe_acls(AclFilter(resource_type="GROUP", resource_name="app-payments",
                                             pattern_type="MATCH"))
    assert [b.resource_name for b in matching] == ["app-"]
    deleted = admin.delete_acls([AclFilter(principal="User:bob"), AclFilter(principal="User:nobody")])
    assert deleted[0].error is None and [d.binding.operation for d in deleted[0].deleted] == ["WRITE"]
    assert deleted[1].deleted == []
    assert {b.principal for b in admin.describe_acls()} == {"User:alice"}


def test_acl_names_are_checked_before_sending(admin):
    with pytest.raises(ValueError, match="operation"):
        admin.create_acls([AclBinding("TOPIC", "t", "User:x", "READ_ALL")])


def test_a_bad_binding_fails_alone(admin):
    results = admin.create_acls([AclBinding("TOPIC", "fine", "User:carol", "READ"),
                                 AclBinding("TOPIC", "bad", "alice-without-type", "READ")])
    assert results[0].error is None and results[1].error is not None


def test_not_allowed_is_an_authorization_error(secured):
    with client_as(secured, "alice") as client:
        with pytest.raises(KafkaError) as caught:
            Admin(client).describe_acls()
    assert caught.value.name == "CLUSTER_AUTHORIZATION_FAILED"


def test_scram_users_round_trip(secured, admin):
    # Kafka refuses two changes of one user in one request: the admin client sends them one after the other
    results = admin.alter_scram_users([ScramUpsertion("dave", "SCRAM-SHA-256", "dave-secret", 8192),
                                       ScramUpsertion("dave", "SCRAM-SHA-512", "dave-secret"),
                                       ScramUpsertion("erin", "SCRAM-SHA-512", "erin-secret")])
    assert [(r.user, r.error) for r in results] == [("dave", None), ("erin", None)]
    dave = admin.describe_scram_users(["dave"])[0]
    assert sorted((c.mechanism, c.iterations) for c in dave.credentials) == [("SCRAM-SHA-256", 8192),
                                                                               ("SCRAM-SHA-512", 4096)]
    assert dave.to_json() == {"user": "dave", "error": None, "credentials": [
        {"mechanism": c.mechanism, "iterations": c.iterations} for c in dave.credentials]}
    assert "dave" in {u.user for u in admin.describe_scram_users()}
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        with client_as(secured, "dave", "dave-secret", mechanism) as client:
            assert client.metadata([]).brokers                # the salted credential logs in
    assert admin.alter_scram_users(deletions=[("dave", "SCRAM-SHA-256"), ("dave", "SCRAM-SHA-512")]) == [
        UserResult("dave", None)]
    assert admin.describe_scram_users(["dave"])[0].error.name == "RESOURCE_NOT_FOUND"
    with client_as(secured, "dave", "dave-secret", "SCRAM-SHA-256") as client:
        with pytest.raises(KafkaError) as caught:
            client.metadata([])
    assert caught.value.name == "SASL_AUTHENTICATION_FAILED"


def test_scram_errors(admin):
    missing = admin.describe_scram_users(["nobody-here"])[0]
    assert missing.error.name == "RESOURCE_NOT_FOUND"
    removed = admin.alter_scram_users(deletions=[("nobody-here", "SCRAM-SHA-256")])
    assert removed[0].error.name == "RESOURCE_NOT_FOUND"
    with pytest.raises(ValueError, match="at least 4096"):
        admin.alter_scram_users([ScramUpsertion("erin", "SCRAM-SHA-256", "pw", 100)])
    with pytest.raises(ValueError, match="mechanism"):
        admin.alter_scram_users([ScramUpsertion("erin", "SCRAM-SHA-1", "pw")])
