"""Authorization as Kafka's StandardAuthorizer does it, seen by kafka-python, aiokafka, confluent-kafka and kcat.

One broker with `authorizer.class.name` set, `allow.everyone.if.no.acl.found=false` and the super user User:admin,
serving SASL_PLAINTEXT (PLAIN and SCRAM-SHA-512; the principal is User:<name>) and an mTLS listener (the principal is
the certificate's DN, User:CN=<name>). Each test uses topics and a group of its own; the bindings of the client
flows are added through the toolkit's control API, the admin tests add theirs with the admin clients.

- A consumer allowed READ on a topic prefix and on its group reads through the group and commits.
- The same consumer on a topic it has no ACL for is refused with TOPIC_AUTHORIZATION_FAILED (aiokafka:
  TopicAuthorizationFailedError; librdkafka: TOPIC_AUTHORIZATION_FAILED, "Broker: Topic authorization failed").
  When Metadata says so (the topic cannot even be described) kafka-python 3.0.12's group consumer does not tell the
  application: it logs "Topic ... is not authorized for this client" and waits for records (aiokafka's consumer of
  assigned partitions does the same). It raises TopicAuthorizationFailedError when a Fetch is refused (the topic
  described, READ denied: the DENY test).
- A producer allowed to see a topic (READ implies DESCRIBE) but not to WRITE it gets TOPIC_AUTHORIZATION_FAILED in its
  delivery report, and nothing is stored. (kafka-python's producer is idempotent: its InitProducerId needs
  IDEMPOTENT_WRITE on the cluster or WRITE on some topic, so the producer may WRITE another topic.)
- The super user needs no ACLs; a DENY binding wins over an ALLOW one.
- The admin clients that have the calls (kafka-python's KafkaAdminClient and confluent-kafka's AdminClient; aiokafka
  0.14 and kcat have none) create, describe and delete bindings with filters (LITERAL/PREFIXED patterns, MATCH and
  ANY in filters), alter and describe SCRAM credentials, and are refused CLUSTER_AUTHORIZATION_FAILED when their
  user may not ALTER the cluster.
"""
from __future__ import annotations

import uuid

import pytest

from compatbroker.toolkit.security import SecuritySetup

from .clients.base import LogCapture
from .records import assert_same, numbered
from .secured_clients import BrokerLog, connect, secured_broker

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
# A bound on a refused client's run: the refusal comes with the broker's first answer, but kafka-python's consumers
# only log it and wait for records until this time is up.
REFUSAL_TIMEOUT_S = 10.0
# How each client words TOPIC_AUTHORIZATION_FAILED in what its adapter raises.
TOPIC_REFUSED = {"kafka-python": "TopicAuthorizationFailedError", "aiokafka": "TopicAuthorizationFailedError",
                 "confluent-kafka": "TOPIC_AUTHORIZATION_FAILED", "kcat": "Topic authorization failed"}
# What kafka-python and aiokafka log instead when Metadata refuses a topic they do not raise for (module docstring).
TOPIC_REFUSED_LOGGED = "is not authorized for this client"
# The principal of user alice on each listener.
ALICE = {"SASL_PLAINTEXT": "User:alice", "MTLS": "User:CN=alice"}


@pytest.fixture(scope="module")
def acl_broker():
    setup = SecuritySetup(listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT", "MTLS": "SSL"},
                          client_auth={"MTLS": "required"}, mechanisms=("PLAIN", "SCRAM-SHA-512"), users=USERS,
                          acls=True, super_users=("admin",))
    with secured_broker(setup) as broker:
        # librdkafka consumers have a group.id even when they only assign partitions (confluent_client.py), and look
        # up its coordinator: FindCoordinator needs DESCRIBE on the group
        broker.add_acl("GROUP", "compat-", "User:*", "DESCRIBE", pattern_type="PREFIXED")
        yield broker


@pytest.fixture
def seed(reference, acl_broker):
    """Writes records to a topic as the super user (kafka-python); returns them."""
    admin, bootstrap = connect(reference, acl_broker, "SASL_PLAINTEXT", user="admin")

    def write(topic: str, count: int = 20):
        sent = numbered(count, topic[-8:])
        admin.produce(bootstrap, topic, sent)
        return sent
    return write


def assert_refused(call, client_name: str, *, or_logged: bool = False) -> None:
    """Runs `call`, which must fail with the client's TOPIC_AUTHORIZATION_FAILED; with `or_logged` a failure to
    get records and the client's log line for a refused topic do too (module docstring)."""
    with LogCapture("kafka", "aiokafka") as log, pytest.raises(Exception) as refused:  # noqa: PT011 - any client's
        call()
    if or_logged and any(TOPIC_REFUSED_LOGGED in line for line in log.lines):
        return
    assert TOPIC_REFUSED[client_name] in str(refused.value), "\n".join([str(refused.value), *log.lines])


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "MTLS"])
def test_group_consumer_with_read_on_prefix_and_group(secured_client, acl_broker, seed, topic, listener):
    prefix, group = f"{topic}.", f"{topic}-group"
    sent = seed(prefix + "orders")
    acl_broker.add_acl("TOPIC", prefix, ALICE[listener], "READ", pattern_type="PREFIXED")
    acl_broker.add_acl("GROUP", group, ALICE[listener], "READ")
    client, bootstrap = connect(secured_client, acl_broker, listener, user="alice")
    assert_same(sent, client.group_consume(bootstrap, prefix + "orders", group, len(sent)))
    assert acl_broker.committed_offsets(group) == {(prefix + "orders", 0): len(sent)}


def test_group_consumer_denied_on_another_topic(secured_client, acl_broker, seed, topic):
    group = f"{topic}-group"
    seed(f"{topic}-theirs", 5)
    acl_broker.add_acl("TOPIC", f"{topic}.", "User:alice", "READ", pattern_type="PREFIXED")
    acl_broker.add_acl("GROUP", group, "User:alice", "READ")
    client, bootstrap = connect(secured_client, acl_broker, "SASL_PLAINTEXT", user="alice")
    log = BrokerLog(acl_broker)
    assert_refused(lambda: client.group_consume(bootstrap, f"{topic}-theirs", group, 5, timeout_s=REFUSAL_TIMEOUT_S),
                   client.name, or_logged=client.name == "kafka-python")
    denied = log.wait_for(f"on resource = Topic:LITERAL:{topic}-theirs")
    assert all("Principal = User:alice is Denied operation" in line for line in denied), denied


def test_producer_without_write_gets_error_in_delivery_report(secured_client, acl_broker, topic):
    target = f"{topic}.target"
    acl_broker.create_topic(target, 1)
    acl_broker.add_acl("TOPIC", target, "User:alice", "READ")  # READ implies DESCRIBE: the producer sees the topic
    acl_broker.add_acl("TOPIC", f"{topic}.own", "User:alice", "WRITE")  # lets an idempotent producer have an id
    client, bootstrap = connect(secured_client, acl_broker, "SASL_PLAINTEXT", user="alice")
    assert_refused(lambda: client.produce(bootstrap, target, numbered(3, "refused"), timeout_s=REFUSAL_TIMEOUT_S),
                   client.name)
    assert acl_broker.records(target) == []


def test_super_user_needs_no_acls(secured_client, acl_broker, topic):
    sent = numbered(20, "super")
    admin, bootstrap = connect(secured_client, acl_broker, "SASL_PLAINTEXT", user="admin")
    admin.produce(bootstrap, topic, sent)  # auto-creation too: CREATE on the cluster
    assert_same(sent, admin.consume(bootstrap, topic, len(sent)))
    assert acl_broker.acls(name=topic, pattern_type="MATCH") == []


def test_deny_wins_over_allow(secured_client, acl_broker, seed, topic):
    prefix = f"{topic}."
    opened, secret = seed(prefix + "open", 5), seed(prefix + "secret", 5)
    acl_broker.add_acl("TOPIC", prefix, "User:alice", "READ", pattern_type="PREFIXED")
    acl_broker.add_acl("TOPIC", prefix + "secret", "User:*", "READ", permission="DENY")
    client, bootstrap = connect(secured_client, acl_broker, "SASL_PLAINTEXT", user="alice")
    assert_same(opened, client.consume(bootstrap, prefix + "open", len(opened)))
    assert_refused(lambda: client.consume(bootstrap, prefix + "secret", len(secret), timeout_s=REFUSAL_TIMEOUT_S),
                   client.name)


# --- admin clients ------------------------------------------------------------------------------------------------

def _kafka_python_admin(reference, broker, user: str):
    client, bootstrap = connect(reference, broker, "SASL_PLAINTEXT", user=user)
    return client.admin(bootstrap)


def test_kafka_python_admin_creates_describes_and_deletes_acls(reference, acl_broker, topic):
    from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                             ResourcePattern, ResourcePatternFilter, ResourceType)
    from kafka.errors import ClusterAuthorizationFailedError
    prefix = f"{topic}."
    bindings = [ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                    ResourcePattern(ResourceType.TOPIC, prefix, ACLResourcePatternType.PREFIXED)),
                ACL("User:bob", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                    ResourcePattern(ResourceType.TOPIC, prefix + "x", ACLResourcePatternType.LITERAL)),
                ACL("User:alice", "127.0.0.1", ACLOperation.READ, ACLPermissionType.DENY,
                    ResourcePattern(ResourceType.GROUP, prefix + "group", ACLResourcePatternType.LITERAL))]

    def matching(principal=None, resource_type=ResourceType.ANY, name=None, pattern=ACLResourcePatternType.ANY):
        acls, error = admin.describe_acls(ACLFilter(principal, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                                    ResourcePatternFilter(resource_type, name, pattern)))
        assert error.errno == 0, error
        return {acl for acl in acls if acl.resource_pattern.resource_name.startswith(prefix)}

    refused = _kafka_python_admin(reference, acl_broker, "alice")
    try:
        assert refused.create_acls(bindings[:1])["failed"] == [ClusterAuthorizationFailedError]
    finally:
        refused.close()
    admin = _kafka_python_admin(reference, acl_broker, "admin")
    try:
        created = admin.create_acls(bindings)
        assert created["failed"] == [] and len(created["succeeded"]) == 3, created
        assert matching() == set(bindings)
        assert matching(principal="User:alice") == {bindings[0], bindings[2]}
        assert matching(resource_type=ResourceType.TOPIC, name=prefix + "x",
                        pattern=ACLResourcePatternType.MATCH) == {bindings[0], bindings[1]}
        assert matching(resource_type=ResourceType.TOPIC, name=prefix,
                        pattern=ACLResourcePatternType.PREFIXED) == {bindings[0]}
        [(_, deleted, error)] = admin.delete_acls([ACLFilter(
            "User:bob", None, ACLOperation.ANY, ACLPermissionType.ANY,
            ResourcePatternFilter(ResourceType.TOPIC, prefix + "x", ACLResourcePatternType.MATCH))])
        assert error.errno == 0 and deleted == [bindings[1]], (deleted, error)
        assert matching() == {bindings[0], bindings[2]}
    finally:
        admin.close()


def test_confluent_kafka_admin_creates_describes_and_deletes_acls(acl_broker, topic):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                       ResourcePatternType, ResourceType)
    from . import clients
    confluent = clients.load_or_fail("confluent-kafka")
    prefix = f"{topic}."
    bindings = [AclBinding(ResourceType.TOPIC, prefix, ResourcePatternType.PREFIXED, "User:alice", "*",
                           AclOperation.READ, AclPermissionType.ALLOW),
                AclBinding(ResourceType.TOPIC, prefix + "x", ResourcePatternType.LITERAL, "User:bob", "*",
                           AclOperation.WRITE, AclPermissionType.ALLOW),
                AclBinding(ResourceType.GROUP, prefix + "group", ResourcePatternType.LITERAL, "User:alice",
                           "127.0.0.1", AclOperation.READ, AclPermissionType.DENY)]

    def admin_as(user: str):
        client, bootstrap = connect(confluent, acl_broker, "SASL_PLAINTEXT", user=user)
        return client.admin(bootstrap)

    def matching(principal=None, restype=ResourceType.ANY, name=None, pattern=ResourcePatternType.ANY):
        found = admin.describe_acls(AclBindingFilter(restype, name, pattern, principal, None, AclOperation.ANY,
                                                     AclPermissionType.ANY), request_timeout=15).result()
        return {binding for binding in found if binding.name.startswith(prefix)}

    alice = admin_as("alice")  # referenced until the result is in: a collected client fails its requests
    with pytest.raises(KafkaException) as refused:
        alice.create_acls(bindings[:1], request_timeout=15)[bindings[0]].result()
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    admin = admin_as("admin")
    for future in admin.create_acls(bindings, request_timeout=15).values():
        assert future.result() is None
    assert matching() == set(bindings)
    assert matching(principal="User:alice") == {bindings[0], bindings[2]}
    assert matching(restype=ResourceType.TOPIC, name=prefix + "x",
                    pattern=ResourcePatternType.MATCH) == {bindings[0], bindings[1]}
    assert matching(restype=ResourceType.TOPIC, name=prefix, pattern=ResourcePatternType.PREFIXED) == {bindings[0]}
    bob = AclBindingFilter(ResourceType.TOPIC, prefix + "x", ResourcePatternType.MATCH, "User:bob", None,
                           AclOperation.ANY, AclPermissionType.ANY)
    assert admin.delete_acls([bob], request_timeout=15)[bob].result() == [bindings[1]]
    assert matching() == {bindings[0], bindings[2]}


# --- SCRAM credentials --------------------------------------------------------------------------------------------

def assert_scram_login(broker, user: str, password: str, *, accepted: bool) -> None:
    """Logs in as `user` with SCRAM-SHA-512 (confluent-kafka: librdkafka reports a refusal at once)."""
    from . import clients
    client, bootstrap = connect(clients.load_or_fail("confluent-kafka"), broker, "SASL_PLAINTEXT", user=user,
                                password=password, mechanism="SCRAM-SHA-512")
    if accepted:
        client.list_topics(bootstrap)
    else:
        failure = client.connect_failure(bootstrap, timeout_s=10)
        assert failure.error == "_AUTHENTICATION", failure


def test_confluent_kafka_admin_alters_and_describes_scram_credentials(acl_broker):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                       UserScramCredentialUpsertion)
    from . import clients
    confluent = clients.load_or_fail("confluent-kafka")
    user, password = f"dave-{uuid.uuid4().hex[:6]}", "dave-secret"
    upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                          password.encode())

    def admin_as(name: str):
        client, bootstrap = connect(confluent, acl_broker, "SASL_PLAINTEXT", user=name)
        return client.admin(bootstrap)

    alice = admin_as("alice")  # referenced until the result is in: a collected client fails its requests
    with pytest.raises(KafkaException) as refused:
        alice.alter_user_scram_credentials([upsert], request_timeout=15)[user].result()
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    admin = admin_as("admin")
    assert admin.alter_user_scram_credentials([upsert], request_timeout=15)[user].result() is None
    described = admin.describe_user_scram_credentials([user], request_timeout=15)[user].result()
    assert [(info.mechanism, info.iterations) for info in described.scram_credential_infos] == \
        [(ScramMechanism.SCRAM_SHA_512, 8192)]
    assert_scram_login(acl_broker, user, password, accepted=True)
    deletion = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)
    assert admin.alter_user_scram_credentials([deletion], request_timeout=15)[user].result() is None
    with pytest.raises(KafkaException) as gone:
        admin.describe_user_scram_credentials([user], request_timeout=15)[user].result()
    assert gone.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
    assert_scram_login(acl_broker, user, password, accepted=False)


def test_kafka_python_admin_alters_and_describes_scram_credentials(reference, acl_broker):
    from kafka.admin import ScramMechanism, UserScramCredentialDeletion, UserScramCredentialUpsertion
    from kafka.errors import ClusterAuthorizationFailedError
    user, password = f"erin-{uuid.uuid4().hex[:6]}", "erin-secret"
    upsert = UserScramCredentialUpsertion(user, "SCRAM-SHA-512", password, iterations=4096)
    refused = _kafka_python_admin(reference, acl_broker, "alice")
    try:
        # kafka-python 3.0.12 reports an alteration's error message, and Kafka sends none with
        # CLUSTER_AUTHORIZATION_FAILED, so the refusal reads None; nothing is stored (below)
        refused.alter_user_scram_credentials([upsert])
        with pytest.raises(ClusterAuthorizationFailedError):
            refused.describe_user_scram_credentials([user])
    finally:
        refused.close()
    admin = _kafka_python_admin(reference, acl_broker, "admin")
    try:
        assert "does not exist" in admin.describe_user_scram_credentials([user])[user]["error"]
        assert admin.alter_user_scram_credentials([upsert]) == {user: None}
        assert admin.describe_user_scram_credentials([user]) == {
            user: {"error": None, "credential_infos": [{"mechanism": ScramMechanism.SCRAM_SHA_512,
                                                        "iterations": 4096}]}}
        assert_scram_login(acl_broker, user, password, accepted=True)
        assert admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, "SCRAM-SHA-512")]) == \
            {user: None}
        assert "does not exist" in admin.describe_user_scram_credentials([user])[user]["error"]
    finally:
        admin.close()
    assert_scram_login(acl_broker, user, password, accepted=False)
