"""kafkajs against Kafka's StandardAuthorizer (`authorizer.class.name`), its users authenticated with SASL PLAIN
(or with client certificates on the mTLS listener, as User:CN=<name>); User:admin is a super user, alice has only
the ACLs a test gives her.

- A consumer allowed READ on a topic prefix and on its group (PREFIXED bindings) joins the group, consumes and
  commits; a topic outside its ACLs, or one where a DENY binding matches as well as an ALLOW, is
  TOPIC_AUTHORIZATION_FAILED in kafkajs' terms (KafkaJSProtocolError type TOPIC_AUTHORIZATION_FAILED: the Metadata
  answer names the topic with that error). The super user writes and reads anything without a binding.
- A producer allowed to describe a topic but not to write it gets TOPIC_AUTHORIZATION_FAILED from its Produce
  request (kafkajs' send() rejects with it); nothing is written.
- kafkajs' admin client creates ACL bindings (CreateAcls), describes them with filters (DescribeAcls: a resource
  type, a pattern type of ANY / MATCH / PREFIXED, a principal) and deletes them by filter (DeleteAcls, which answers
  the bindings it removed); a user without ALTER on the cluster is CLUSTER_AUTHORIZATION_FAILED.
"""
from __future__ import annotations

import uuid

import pytest

from compatbroker.security.acls.types import AclOperation, AclPermissionType, PatternType, ResourceType
from compatbroker.toolkit.security import SecuritySetup

from . import clients
from .clients.kafkajs_client import KafkajsError, error_chain
from .records import numbered
from .secured_clients import allow, secured_broker, stored_values

pytestmark = pytest.mark.matrix(client="kafkajs", flow="acls")
LISTENER = "SASL_PLAINTEXT"
MTLS = "SSL"  # with client certificates: the principal is the certificate's DN (User:CN=<name>)
ANY_HOST = "*"


@pytest.fixture(scope="module")
def broker():
    setup = SecuritySetup(listeners=(LISTENER, MTLS), mechanisms=("PLAIN",), acls=True, super_users=("admin",),
                          client_auth={MTLS: "required"})
    with secured_broker(setup) as running:
        yield running


@pytest.fixture(scope="module")
def kafkajs():
    return clients.load_or_fail("kafkajs")


@pytest.fixture
def prefix() -> str:
    """A topic and group name prefix of the test's own (ACLs stay in the module's broker)."""
    return f"app-{uuid.uuid4().hex[:8]}."


def as_user(broker, kafkajs, user: str):
    return kafkajs.secured(broker.client_config("kafkajs", LISTENER, user=user))



def test_consumer_allowed_on_a_prefix_and_its_group_consumes(broker, kafkajs, prefix):
    bootstrap, topic, group = broker.bootstrap_servers_for(LISTENER), f"{prefix}orders", f"{prefix}group"
    sent = numbered(4, "acl")
    as_user(broker, kafkajs, "admin").produce(bootstrap, topic, sent)  # the super user needs no binding
    allow(broker, "TOPIC", prefix, "alice", "READ", pattern="PREFIXED")
    allow(broker, "GROUP", prefix, "alice", "READ", pattern="PREFIXED")
    got = as_user(broker, kafkajs, "alice").group_consume(bootstrap, topic, group, len(sent))
    assert [record.value for record in got] == [record.value for record in sent]
    assert broker.committed_offsets(group) == {(topic, 0): len(sent)}


@pytest.mark.parametrize("binding", ["none", "deny"])
def test_consumer_denied_a_topic_gets_topic_authorization_failed(broker, kafkajs, prefix, binding):
    bootstrap, topic = broker.bootstrap_servers_for(LISTENER), f"{prefix}secret"
    as_user(broker, kafkajs, "admin").produce(bootstrap, topic, numbered(1))
    allow(broker, "GROUP", prefix, "alice", "READ", pattern="PREFIXED")
    if binding == "deny":  # DENY wins over a matching ALLOW
        allow(broker, "TOPIC", prefix, "alice", "READ", pattern="PREFIXED")
        allow(broker, "TOPIC", topic, "alice", "READ", permission="DENY")
    else:
        allow(broker, "TOPIC", f"{prefix}other", "alice", "READ")  # alice's ACLs name another topic only
    with pytest.raises(KafkajsError) as denied:
        as_user(broker, kafkajs, "alice").group_consume(bootstrap, topic, f"{prefix}group", 1, timeout_s=20)
    assert "TOPIC_AUTHORIZATION_FAILED" in denied.value.types(), denied.value.chain()


def test_producer_without_write_gets_topic_authorization_failed(broker, kafkajs, prefix):
    bootstrap, topic = broker.bootstrap_servers_for(LISTENER), f"{prefix}events"
    broker.create_topic(topic, 1)
    allow(broker, "TOPIC", topic, "alice", "DESCRIBE")  # Metadata answers; Produce must not
    with pytest.raises(KafkajsError) as denied:
        as_user(broker, kafkajs, "alice").produce(bootstrap, topic, numbered(2))
    assert "TOPIC_AUTHORIZATION_FAILED" in denied.value.types(), denied.value.chain()
    assert stored_values(broker, topic) == []


def _binding(resource_type, name, pattern, principal, operation, permission) -> dict:
    return {"resourceType": int(resource_type), "resourceName": name, "resourcePatternType": int(pattern),
            "principal": principal, "host": ANY_HOST, "operation": int(operation), "permissionType": int(permission)}


def _described(answer: dict) -> set[tuple]:
    """(resource type, name, pattern type, principal, operation, permission) of a describeAcls result."""
    return {(resource["resourceType"], resource["resourceName"], resource["resourcePatternType"], acl["principal"],
             acl["operation"], acl["permissionType"])
            for resource in answer["result"]["resources"] for acl in resource["acls"]}


def test_admin_creates_describes_and_deletes_acls_with_filters(broker, kafkajs, prefix):
    bootstrap, carol = broker.bootstrap_servers_for(LISTENER), f"User:carol-{prefix.strip('.')}"
    read_prefix = (ResourceType.TOPIC, prefix, PatternType.PREFIXED, carol, AclOperation.READ, AclPermissionType.ALLOW)
    deny_write = (ResourceType.TOPIC, f"{prefix}audit", PatternType.LITERAL, carol, AclOperation.WRITE,
                  AclPermissionType.DENY)
    group_read = (ResourceType.GROUP, f"{prefix}group", PatternType.LITERAL, carol, AclOperation.READ,
                  AclPermissionType.ALLOW)
    topics_of_carol = {"resourceType": int(ResourceType.TOPIC), "resourcePatternType": int(PatternType.ANY),
                       "principal": carol, "operation": int(AclOperation.ANY),
                       "permissionType": int(AclPermissionType.ANY)}
    matching_audit = {"resourceType": int(ResourceType.ANY), "resourceName": f"{prefix}audit",
                      "resourcePatternType": int(PatternType.MATCH), "operation": int(AclOperation.ANY),
                      "permissionType": int(AclPermissionType.ANY)}
    prefixed_of_carol = {"resourceType": int(ResourceType.TOPIC), "resourcePatternType": int(PatternType.PREFIXED),
                         "principal": carol, "operation": int(AclOperation.ANY),
                         "permissionType": int(AclPermissionType.ANY)}
    created, topics, matching, deleted, left = as_user(broker, kafkajs, "admin").acl_calls(
        bootstrap,
        {"call": "create", "acl": [_binding(*read_prefix), _binding(*deny_write), _binding(*group_read)]},
        {"call": "describe", "filter": topics_of_carol},
        {"call": "describe", "filter": matching_audit},  # the literal binding and the prefix covering the name
        {"call": "delete", "filters": [prefixed_of_carol]},
        {"call": "describe", "filter": {**topics_of_carol, "resourceType": int(ResourceType.ANY)}})
    assert "error" not in created, created
    assert _described(topics) == {read_prefix, deny_write}
    assert _described(matching) == {read_prefix, deny_write}
    [removed] = deleted["result"]["filterResponses"]
    assert [(acl["resourceName"], acl["resourcePatternType"], acl["operation"]) for acl in removed["matchingAcls"]] \
        == [(prefix, PatternType.PREFIXED, AclOperation.READ)]
    assert _described(left) == {deny_write, group_read}
    assert {(acl["resource_type"], acl["name"]) for acl in broker.acls(principal=carol)} == {
        ("TOPIC", f"{prefix}audit"), ("GROUP", f"{prefix}group")}


def test_admin_calls_need_alter_on_the_cluster(broker, kafkajs, prefix):
    binding = _binding(ResourceType.TOPIC, prefix, PatternType.PREFIXED, "User:alice", AclOperation.ALL,
                       AclPermissionType.ALLOW)
    [refused] = as_user(broker, kafkajs, "alice").acl_calls(broker.bootstrap_servers_for(LISTENER),
                                                            {"call": "create", "acl": [binding]})
    types = {detail.get("type") for detail in error_chain(refused["error"])}
    assert "CLUSTER_AUTHORIZATION_FAILED" in types, refused
    assert broker.acls(principal="User:alice", name=prefix) == []



def test_mtls_principal_is_the_certificate_dn(broker, kafkajs, prefix):
    """Over mTLS the principal is the client certificate's DN under Kafka's DEFAULT mapping rule: a binding for
    User:CN=alice lets the certificate CN=alice read; her SASL name (User:alice) gets nothing from it."""
    topic, group = f"{prefix}dn", f"{prefix}dn-group"
    as_user(broker, kafkajs, "admin").produce(broker.bootstrap_servers_for(LISTENER), topic, numbered(2))
    certificate = broker.security.certificates.client("alice")
    assert certificate.principal == "User:CN=alice"
    for resource_type, name in (("TOPIC", topic), ("GROUP", group)):
        broker.add_acl(resource_type, name, certificate.principal, "READ")
    by_certificate = kafkajs.secured(broker.client_config("kafkajs", MTLS, user="alice"))
    got = by_certificate.group_consume(broker.bootstrap_servers_for(MTLS), topic, group, 2)
    assert [record.value for record in got] == [record.value for record in numbered(2)]
    with pytest.raises(KafkajsError) as denied:
        as_user(broker, kafkajs, "alice").group_consume(broker.bootstrap_servers_for(LISTENER), topic, group, 2,
                                                        timeout_s=20)
    assert {"GROUP_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED"} & denied.value.types(), denied.value.chain()
