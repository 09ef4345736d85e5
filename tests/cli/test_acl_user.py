"""`compatbroker acl ...` and `compatbroker user ...` against a secured compatbroker (SASL_SSL with SCRAM, ACLs on),
the client's settings given as Kafka's tools take them: a Java properties file in --command-config."""
from __future__ import annotations

import json

import pytest

from compatbroker import EmbeddedBroker, SecuritySetup
from compatbroker.client import ClientConfig, KafkaClient, KafkaError

from .helpers import run

ACL_KEYS = {"resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission"}
USERS = {"admin": "admin-secret", "alice": "alice-secret"}


@pytest.fixture(scope="module")
def secured():
    setup = SecuritySetup(listeners=("SASL_SSL",), mechanisms=("SCRAM-SHA-512",), users=USERS, acls=True)
    try:
        with EmbeddedBroker(security=setup) as broker:
            yield broker
    finally:
        setup.cleanup()


def _properties_file(path, properties: dict) -> str:
    path.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
    return str(path)


@pytest.fixture(scope="module")
def admin_config(secured, tmp_path_factory):
    """--command-config of the super user admin (Java client properties, bootstrap.servers included)."""
    properties = secured.client_config("java", "SASL_SSL", user="admin", mechanism="SCRAM-SHA-512")
    return _properties_file(tmp_path_factory.mktemp("cli") / "admin.properties", properties)


def cli(config: str, *args, **kwargs):
    return run("--command-config", config, *args, **kwargs)


def test_acl_create_list_delete(admin_config):
    created = cli(admin_config, "acl", "create", "--topic", "orders-", "--resource-pattern-type", "prefixed",
                  "--allow-principal", "User:alice", "--operation", "Read", "--operation", "describe",
                  "--format", "json")
    document = created.json()
    assert [set(row) for row in document["acls"]] == [ACL_KEYS | {"error"}] * 2
    assert [(r["resource_type"], r["resource_name"], r["pattern_type"], r["principal"], r["host"], r["operation"],
             r["permission"], r["error"]) for r in document["acls"]] == [
        ("TOPIC", "orders-", "PREFIXED", "User:alice", "*", op, "ALLOW", None) for op in ("READ", "DESCRIBE")]
    assert cli(admin_config, "acl", "create", "--group", "g", "--deny-principal", "User:alice",
               "--deny-host", "10.0.0.1").code == 0

    listed = cli(admin_config, "acl", "list", "--format", "json").json()["acls"]
    assert [set(row) for row in listed] == [ACL_KEYS] * 3
    assert {(r["resource_type"], r["resource_name"], r["operation"], r["permission"], r["host"]) for r in listed} == {
        ("TOPIC", "orders-", "READ", "ALLOW", "*"), ("TOPIC", "orders-", "DESCRIBE", "ALLOW", "*"),
        ("GROUP", "g", "ALL", "DENY", "10.0.0.1")}
    on_topic = cli(admin_config, "acl", "list", "--topic", "orders-eu", "--resource-pattern-type", "match",
                   "--format", "json").json()["acls"]
    assert {r["operation"] for r in on_topic} == {"READ", "DESCRIBE"}
    table = cli(admin_config, "acl", "list", "--group", "g").stdout.splitlines()
    assert table[0].split() == ["RESOURCE-TYPE", "RESOURCE-NAME", "PATTERN-TYPE", "PRINCIPAL", "HOST", "OPERATION",
                                "PERMISSION"]
    assert table[1].split() == ["GROUP", "g", "LITERAL", "User:alice", "10.0.0.1", "ALL", "DENY"]

    deleted = cli(admin_config, "acl", "delete", "--topic", "orders-", "--resource-pattern-type", "prefixed",
                  "--operation", "read", "--format", "json").json()["acls"]
    assert [(r["resource_name"], r["operation"]) for r in deleted] == [("orders-", "READ")]
    remaining = cli(admin_config, "acl", "list", "--format", "json").json()["acls"]
    assert {(r["resource_name"], r["operation"]) for r in remaining} == {("orders-", "DESCRIBE"), ("g", "ALL")}
    assert cli(admin_config, "acl", "delete", "--cluster", "--format", "json").json() == {"acls": []}


def test_acl_usage_errors(admin_config):
    for args in (["create", "--topic", "t", "--operation", "Read"],                      # no principal
                 ["create", "--allow-principal", "User:a"],                             # no resource
                 ["create", "--topic", "t", "--group", "g", "--allow-principal", "User:a"],
                 ["create", "--topic", "t", "--allow-principal", "User:a", "--operation", "Fly"],
                 ["create", "--topic", "t", "--allow-principal", "User:a", "--resource-pattern-type", "match"],
                 ["delete"]):                                                             # deleting everything
        ran = cli(admin_config, "acl", *args)
        assert ran.code == 2, (args, ran.stdout, ran.stderr)


def test_acl_refused_without_the_rights(secured, tmp_path):
    properties = secured.client_config("java", "SASL_SSL", user="alice", mechanism="SCRAM-SHA-512")
    alice = _properties_file(tmp_path / "alice.properties", properties)
    ran = cli(alice, "acl", "create", "--topic", "t", "--allow-principal", "User:alice")
    assert ran.code == 1
    assert ": CLUSTER_AUTHORIZATION_FAILED: " in ran.stderr and ran.stderr.startswith("compatbroker: acl create")


def _can_log_in(secured, user: str, password: str) -> bool:
    config = secured.client_config("java", "SASL_SSL", user=user, password=password, mechanism="SCRAM-SHA-512")
    try:
        with KafkaClient(ClientConfig(properties=config)) as client:
            client.metadata([])
    except KafkaError as exc:
        assert exc.name == "SASL_AUTHENTICATION_FAILED", exc
        return False
    return True


def test_user_create_list_delete(secured, admin_config):
    created = cli(admin_config, "user", "create", "bob", "--mechanism", "SCRAM-SHA-512", "--iterations", "8192",
                  input="bob-secret\n", env={})
    assert (created.code, created.stdout) == (0, "Created SCRAM-SHA-512 credentials of user bob.\n"), created.stderr
    assert _can_log_in(secured, "bob", "bob-secret")

    listed = cli(admin_config, "user", "list", "--format", "json").json()["users"]
    assert {"name": "bob", "credentials": [{"mechanism": "SCRAM-SHA-512", "iterations": 8192}]} in listed
    assert {u["name"] for u in listed} >= {"admin", "alice", "bob"}
    only = cli(admin_config, "user", "list", "bob").stdout.splitlines()
    assert [line.split() for line in only] == [["USER", "MECHANISM", "ITERATIONS"], ["bob", "SCRAM-SHA-512", "8192"]]

    changed = cli(admin_config, "user", "create", "bob", "--password", "new-secret", "--mechanism", "scram-sha-512",
                  "--format", "json").json()
    assert changed == {"users": [{"name": "bob", "mechanism": "SCRAM-SHA-512", "iterations": 4096, "error": None}]}
    assert _can_log_in(secured, "bob", "new-secret") and not _can_log_in(secured, "bob", "bob-secret")

    deleted = cli(admin_config, "user", "delete", "bob", "--format", "json").json()
    assert deleted == {"users": [{"name": "bob", "mechanism": "SCRAM-SHA-512", "iterations": None, "error": None}]}
    assert "bob" not in {u["name"] for u in cli(admin_config, "user", "list", "--format", "json").json()["users"]}
    assert not _can_log_in(secured, "bob", "new-secret")


def test_user_errors(admin_config):
    missing = cli(admin_config, "user", "delete", "nobody", "--mechanism", "SCRAM-SHA-256")
    assert missing.code == 1 and missing.stderr.startswith("compatbroker: user delete nobody: RESOURCE_NOT_FOUND: ")
    unknown = cli(admin_config, "user", "list", "nobody")
    assert unknown.code == 1 and ": RESOURCE_NOT_FOUND: " in unknown.stderr
    assert cli(admin_config, "user", "create", "x", "--password", "p", "--iterations", "100").code == 2
    assert cli(admin_config, "user", "create", "x", input="").code == 2  # no password anywhere


def test_a_wrong_password_in_the_command_config_is_an_error_answered_by_the_broker(secured, tmp_path):
    properties = secured.client_config("java", "SASL_SSL", user="alice", password="wrong", mechanism="SCRAM-SHA-512")
    ran = cli(_properties_file(tmp_path / "wrong.properties", properties), "user", "list")
    assert ran.code == 1
    assert ran.stderr.startswith("compatbroker: user list: SASL_AUTHENTICATION_FAILED: ")


def test_without_an_authorizer_acl_list_says_so(broker):
    ran = run("-b", broker.bootstrap_servers, "acl", "list")
    assert ran.code == 1
    assert ran.stderr.startswith("compatbroker: acl list: SECURITY_DISABLED: ")
    assert json.loads(run("-b", broker.bootstrap_servers, "user", "list", "--format", "json").stdout) == {"users": []}
