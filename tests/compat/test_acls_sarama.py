"""sarama 1.22 (Debian's package) against Kafka's StandardAuthorizer, its users authenticated with SASL PLAIN
(SaslHandshake v1 + SaslAuthenticate, protocol 2.1.0) or with client certificates on the mTLS listener (as
User:CN=<name>); User:admin is a super user.

- A consumer allowed READ on a topic prefix and on its group (PREFIXED bindings) joins the group, consumes and
  commits; one reading a topic outside its ACLs (or one where a DENY binding matches too) gets
  ErrTopicAuthorizationFailed ("kafka server: The client is not authorized to access this topic.") from the Metadata
  answer before it fetches anything.
- A producer allowed only DESCRIBE gets ErrTopicAuthorizationFailed for its messages (the Produce answer); nothing is
  written.
- sarama's ClusterAdmin creates, lists and deletes ACLs at version 0 of CreateAcls / DescribeAcls / DeleteAcls
  (LITERAL bindings, filters naming a resource and a principal). sarama 1.22's CreateACL ignores the per-binding
  errors of the answer, so a refused creation is not checked here (kafkajs' test does).
"""
from __future__ import annotations

import uuid

import pytest

from compatbroker.security.acls.types import AclOperation, AclPermissionType, PatternType, ResourceType
from compatbroker.toolkit.security import SecuritySetup

from . import clients
from .clients.base import ClientError
from .records import numbered
from .secured_clients import allow, secured_broker, stored_values

pytestmark = pytest.mark.matrix(client="sarama", flow="acls")
LISTENER = "SASL_PLAINTEXT"
MTLS = "SSL"  # with client certificates: the principal is the certificate's DN (User:CN=<name>)
PROTOCOL = "2.1.0"
NOT_AUTHORIZED = "kafka server: The client is not authorized to access this topic."


@pytest.fixture(scope="module")
def broker():
    setup = SecuritySetup(listeners=(LISTENER, MTLS), mechanisms=("PLAIN",), acls=True, super_users=("admin",),
                          client_auth={MTLS: "required"})
    with secured_broker(setup) as running:
        yield running


@pytest.fixture(scope="module")
def sarama():
    return clients.load_or_fail("sarama").with_protocol(PROTOCOL)


@pytest.fixture
def prefix() -> str:
    """A topic and group name prefix of the test's own (ACLs stay in the module's broker)."""
    return f"app-{uuid.uuid4().hex[:8]}."


def as_user(broker, sarama, user: str):
    return sarama.secured(broker.client_config("sarama", LISTENER, user=user))



def test_consumer_allowed_on_a_prefix_and_its_group_consumes(broker, sarama, prefix):
    bootstrap, topic, group = broker.bootstrap_servers_for(LISTENER), f"{prefix}orders", f"{prefix}group"
    sent = numbered(4, "acl")
    as_user(broker, sarama, "admin").produce(bootstrap, topic, sent)  # the super user needs no binding
    allow(broker, "TOPIC", prefix, "alice", "READ", pattern="PREFIXED")
    allow(broker, "GROUP", prefix, "alice", "READ", pattern="PREFIXED")
    got = as_user(broker, sarama, "alice").group_consume(bootstrap, topic, group, len(sent))
    assert [record.value for record in got] == [record.value for record in sent]
    assert broker.committed_offsets(group) == {(topic, 0): len(sent)}


@pytest.mark.parametrize("binding", ["none", "deny"])
def test_consumer_denied_a_topic_gets_topic_authorization_failed(broker, sarama, prefix, binding):
    bootstrap, topic = broker.bootstrap_servers_for(LISTENER), f"{prefix}secret"
    as_user(broker, sarama, "admin").produce(bootstrap, topic, numbered(1))
    if binding == "deny":  # DENY wins over a matching ALLOW
        allow(broker, "TOPIC", prefix, "alice", "READ", pattern="PREFIXED")
        allow(broker, "TOPIC", topic, "alice", "READ", permission="DENY")
    else:
        allow(broker, "TOPIC", f"{prefix}other", "alice", "READ")
    with pytest.raises(ClientError) as denied:
        as_user(broker, sarama, "alice").consume(bootstrap, topic, 1, timeout_s=20)
    assert NOT_AUTHORIZED in str(denied.value)


def test_producer_without_write_gets_topic_authorization_failed(broker, sarama, prefix):
    bootstrap, topic = broker.bootstrap_servers_for(LISTENER), f"{prefix}events"
    broker.create_topic(topic, 1)
    allow(broker, "TOPIC", topic, "alice", "DESCRIBE")  # Metadata answers; Produce must not
    with pytest.raises(ClientError) as denied:
        as_user(broker, sarama, "alice").produce(bootstrap, topic, numbered(2))
    assert NOT_AUTHORIZED in str(denied.value)
    assert stored_values(broker, topic) == []


def _acl(resource_type, name, principal, operation, permission) -> dict:
    return {"resource_type": int(resource_type), "name": name, "pattern_type": int(PatternType.LITERAL),
            "principal": principal, "host": "*", "operation": int(operation), "permission": int(permission)}


def _found(answer: list[dict]) -> set[tuple]:
    return {(acl["resource_type"], acl["name"], acl["principal"], acl["operation"], acl["permission"])
            for acl in answer}


def test_admin_creates_lists_and_deletes_acls(broker, sarama, prefix):
    carol = f"User:carol-{prefix.strip('.')}"
    topic_read = (ResourceType.TOPIC, f"{prefix}audit", carol, AclOperation.READ, AclPermissionType.ALLOW)
    group_read = (ResourceType.GROUP, f"{prefix}group", carol, AclOperation.READ, AclPermissionType.ALLOW)
    of_carol = {"resource_type": int(ResourceType.ANY), "name": None, "pattern_type": int(PatternType.LITERAL),
                "principal": carol, "host": None, "operation": int(AclOperation.ANY),
                "permission": int(AclPermissionType.ANY)}
    created_topic, created_group, listed, topics_deleted, left = as_user(broker, sarama, "admin").admin_results(
        broker.bootstrap_servers_for(LISTENER),
        {"call": "create_acl", "acl": _acl(*topic_read)},
        {"call": "create_acl", "acl": _acl(*group_read)},
        {"call": "list_acls", "acl": of_carol},
        {"call": "delete_acls", "acl": {**of_carol, "resource_type": int(ResourceType.TOPIC)}},
        {"call": "list_acls", "acl": of_carol})
    assert _found(listed) == {topic_read, group_read}
    assert _found(topics_deleted) == {topic_read}
    assert _found(left) == {group_read}
    assert [(acl["resource_type"], acl["name"]) for acl in broker.acls(principal=carol)] == [
        ("GROUP", f"{prefix}group")]
    versions = {(entry.api, entry.api_version) for entry in broker.requests() if entry.api.endswith("Acls")}
    assert {("CreateAcls", 0), ("DescribeAcls", 0), ("DeleteAcls", 0)} <= versions


def test_mtls_principal_is_the_certificate_dn(broker, sarama, prefix):
    """Over mTLS the principal is the client certificate's DN under Kafka's DEFAULT mapping rule: a binding for
    User:CN=alice lets the certificate CN=alice read; her SASL name (User:alice) gets nothing from it."""
    topic, group = f"{prefix}dn", f"{prefix}dn-group"
    as_user(broker, sarama, "admin").produce(broker.bootstrap_servers_for(LISTENER), topic, numbered(2))
    certificate = broker.security.certificates.client("alice")
    assert certificate.principal == "User:CN=alice"
    for resource_type, name in (("TOPIC", topic), ("GROUP", group)):
        broker.add_acl(resource_type, name, certificate.principal, "READ")
    by_certificate = sarama.secured(broker.client_config("sarama", MTLS, user="alice"))
    got = by_certificate.group_consume(broker.bootstrap_servers_for(MTLS), topic, group, 2)
    assert [record.value for record in got] == [record.value for record in numbered(2)]
    with pytest.raises(ClientError) as denied:
        as_user(broker, sarama, "alice").group_consume(broker.bootstrap_servers_for(LISTENER), topic, group, 2,
                                                       timeout_s=20)
    assert "kafka server: The client is not authorized to access this" in str(denied.value)  # group or topic
