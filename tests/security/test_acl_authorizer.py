"""The StandardAuthorizer: Kafka's rules (super users, DENY before ALLOW, ALL, implied operations, literal, prefixed
and wildcard resources, host and principal wildcards, allow.everyone.if.no.acl.found), authorizeByResourceType,
authorized operations, the log lines, and the index agreeing with a plain scan of every ACL."""
from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings, strategies as st

from compatbroker.security.acls import (AccessControlEntry, AclBinding, AclOperation, AclPermissionType, AclStore,
                                        PatternType, ResourcePattern, ResourceType, StandardAuthorizer)
from compatbroker.security.acls.authorizer import TRACE
from compatbroker.security.principal import parse_principal
from compatbroker.security.session import Session

Op = AclOperation
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
HOST = "127.0.0.1"


def acl(name, operation=Op.READ, permission=ALLOW, *, pattern=LITERAL, resource_type=TOPIC,
        principal="User:alice", host="*") -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern),
                      AccessControlEntry(principal, host, operation, permission))


def authorizer(*bindings, super_users=(), allow_everyone=False) -> StandardAuthorizer:
    store = AclStore()
    store.add(bindings)
    return StandardAuthorizer(store, super_users=frozenset(super_users), allow_everyone_if_no_acl_found=allow_everyone)


def session(principal="User:alice", host=HOST) -> Session:
    return Session(principal=parse_principal(principal), client_host=host)


def allowed(auth, operation, name, *, resource_type=TOPIC, principal="User:alice", host=HOST) -> bool:
    return auth.authorize(session(principal, host), operation, resource_type, name, request="Fetch")


def test_no_acl_for_the_resource_follows_allow_everyone_if_no_acl_found():
    assert not allowed(authorizer(), Op.READ, "foo")
    assert allowed(authorizer(allow_everyone=True), Op.READ, "foo")


def test_acls_on_a_resource_deny_whoever_they_do_not_allow_even_with_allow_everyone():
    auth = authorizer(acl("foo"), allow_everyone=True)
    assert allowed(auth, Op.READ, "foo")
    assert not allowed(auth, Op.READ, "foo", principal="User:bob")
    assert not allowed(auth, Op.WRITE, "foo")
    assert allowed(auth, Op.WRITE, "bar", principal="User:bob")  # no ACL on bar: the default


def test_deny_wins_over_allow_from_any_pattern():
    assert not allowed(authorizer(acl("fo", pattern=PREFIXED), acl("foo", permission=DENY)), Op.READ, "foo")
    assert not allowed(authorizer(acl("foo"), acl("*", permission=DENY)), Op.READ, "foo")
    assert not allowed(authorizer(acl("foo", Op.ALL), acl("f", Op.READ, DENY, pattern=PREFIXED)), Op.READ, "foo")
    assert allowed(authorizer(acl("foo", Op.ALL), acl("f", Op.READ, DENY, pattern=PREFIXED)), Op.WRITE, "foo")


def test_all_matches_every_operation():
    auth = authorizer(acl("foo", Op.ALL))
    assert all(allowed(auth, operation, "foo") for operation in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER_CONFIGS))
    denied = authorizer(acl("foo", Op.ALL, DENY), acl("foo", Op.READ))
    assert not allowed(denied, Op.READ, "foo")


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE])
def test_read_write_delete_alter_imply_describe(granted):
    assert allowed(authorizer(acl("foo", granted)), Op.DESCRIBE, "foo")


@pytest.mark.parametrize("granted", [Op.CREATE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, Op.IDEMPOTENT_WRITE])
def test_other_operations_do_not_imply_describe(granted):
    assert not allowed(authorizer(acl("foo", granted)), Op.DESCRIBE, "foo")


def test_alter_configs_implies_describe_configs_and_nothing_else_does():
    assert allowed(authorizer(acl("foo", Op.ALTER_CONFIGS)), Op.DESCRIBE_CONFIGS, "foo")
    assert not allowed(authorizer(acl("foo", Op.ALTER)), Op.DESCRIBE_CONFIGS, "foo")
    assert not allowed(authorizer(acl("foo", Op.DESCRIBE_CONFIGS)), Op.ALTER_CONFIGS, "foo")


def test_implication_widens_allows_only():
    auth = authorizer(acl("foo", Op.ALL), acl("foo", Op.READ, DENY))
    assert allowed(auth, Op.DESCRIBE, "foo") and not allowed(auth, Op.READ, "foo")


def test_prefixed_patterns_match_names_starting_with_them():
    auth = authorizer(acl("orders-", pattern=PREFIXED))
    assert allowed(auth, Op.READ, "orders-eu") and allowed(auth, Op.READ, "orders-")
    assert not allowed(auth, Op.READ, "orders") and not allowed(auth, Op.READ, "my-orders-eu")


def test_literal_patterns_match_the_exact_name_only():
    auth = authorizer(acl("foo"))
    assert allowed(auth, Op.READ, "foo")
    assert not allowed(auth, Op.READ, "foobar") and not allowed(auth, Op.READ, "fo")


def test_the_literal_wildcard_matches_every_name_and_a_prefixed_star_does_not():
    assert allowed(authorizer(acl("*")), Op.READ, "anything")
    assert not allowed(authorizer(acl("*", pattern=PREFIXED)), Op.READ, "anything")
    assert allowed(authorizer(acl("*", pattern=PREFIXED)), Op.READ, "*x", resource_type=TOPIC)


def test_acls_of_another_resource_type_do_not_apply():
    auth = authorizer(acl("foo", resource_type=GROUP))
    assert allowed(auth, Op.READ, "foo", resource_type=GROUP) and not allowed(auth, Op.READ, "foo")


def test_hosts_match_exactly_or_by_wildcard():
    auth = authorizer(acl("foo", host="10.0.0.1"), acl("bar", host="*"))
    assert allowed(auth, Op.READ, "foo", host="10.0.0.1") and not allowed(auth, Op.READ, "foo", host=HOST)
    assert allowed(auth, Op.READ, "bar", host="10.9.9.9")


def test_user_star_is_the_one_principal_wildcard():
    # Kafka matches an ACL's principal against {the session's, User:*}: User:* applies to any principal at all.
    assert allowed(authorizer(acl("foo", principal="User:*")), Op.READ, "foo", principal="User:bob")
    assert allowed(authorizer(acl("foo", principal="User:*")), Op.READ, "foo", principal="Group:ops")
    assert not allowed(authorizer(acl("foo", principal="Group:*")), Op.READ, "foo", principal="Group:ops")


def test_super_users_bypass_every_acl():
    auth = authorizer(acl("foo", Op.ALL, DENY, principal="User:admin"), super_users={"User:admin"})
    assert allowed(auth, Op.READ, "foo", principal="User:admin")
    assert allowed(auth, Op.ALTER, "kafka-cluster", resource_type=CLUSTER, principal="User:admin")
    assert not allowed(auth, Op.READ, "foo", principal="User:bob")


def test_new_acls_apply_to_the_next_decision():
    auth = authorizer()
    assert not allowed(auth, Op.READ, "foo")
    auth.store.add([acl("foo")])
    assert allowed(auth, Op.READ, "foo")


# --- authorizeByResourceType ------------------------------------------------------------------------------------

@pytest.mark.parametrize("bindings, expected", [
    ([], False),
    ([acl("foo", Op.WRITE)], True),
    ([acl("foo", Op.ALL)], True),
    ([acl("foo", Op.READ)], False),
    ([acl("foo", Op.WRITE, principal="User:bob")], False),
    ([acl("foo", Op.WRITE, host="10.0.0.1")], False),
    ([acl("foo", Op.WRITE), acl("foo", Op.WRITE, DENY)], False),
    ([acl("foo", Op.WRITE), acl("bar", Op.WRITE, DENY)], True),
    ([acl("foo", Op.WRITE), acl("f", Op.WRITE, DENY, pattern=PREFIXED)], False),
    ([acl("foo", Op.WRITE, pattern=PREFIXED), acl("foo", Op.WRITE, DENY)], True),
    ([acl("foo", Op.WRITE, pattern=PREFIXED), acl("fo", Op.WRITE, DENY, pattern=PREFIXED)], False),
    ([acl("foo", Op.WRITE, pattern=PREFIXED), acl("foob", Op.WRITE, DENY, pattern=PREFIXED)], True),
    ([acl("*", Op.WRITE)], True),
    ([acl("*", Op.WRITE), acl("foo", Op.WRITE, DENY)], True),
    ([acl("foo", Op.WRITE), acl("*", Op.WRITE, DENY)], False),
    ([acl("foo", Op.WRITE, resource_type=GROUP)], False),
    ([acl("foo", Op.WRITE, principal="User:*")], True),
])
def test_authorize_by_resource_type_as_kafka(bindings, expected):
    assert authorizer(*bindings).authorize_by_resource_type(session(), Op.WRITE, TOPIC) is expected


def test_authorize_by_resource_type_lets_super_users_and_the_default_allow_through():
    auth = authorizer(acl("*", Op.WRITE, DENY, principal="User:admin"), super_users={"User:admin"})
    assert auth.authorize_by_resource_type(session("User:admin"), Op.WRITE, TOPIC)
    assert authorizer(allow_everyone=True).authorize_by_resource_type(session(), Op.WRITE, TOPIC)


@pytest.mark.parametrize("operation, resource_type, message", [
    (Op.READ, ResourceType.ANY, "Must specify a non-filter resource type for authorizeByResourceType"),
    (Op.READ, ResourceType.UNKNOWN, "Unknown resource type"),
    (Op.ANY, TOPIC, "Must specify a non-filter operation type for authorizeByResourceType"),
    (Op.UNKNOWN, TOPIC, "Unknown operation type"),
])
def test_authorize_by_resource_type_refuses_filter_values(operation, resource_type, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        authorizer().authorize_by_resource_type(session(), operation, resource_type)


# --- authorized operations --------------------------------------------------------------------------------------

def test_authorized_operations_carry_the_allowed_supported_operations():
    auth = authorizer(acl("foo", Op.READ), acl("foo", Op.ALTER_CONFIGS))
    expected = (1 << Op.READ) | (1 << Op.DESCRIBE) | (1 << Op.ALTER_CONFIGS) | (1 << Op.DESCRIBE_CONFIGS)
    assert auth.authorized_operations(session(), TOPIC, "foo") == expected
    assert authorizer(super_users={"User:alice"}).authorized_operations(session(), GROUP, "g") == sum(
        1 << op for op in (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS))
    assert StandardAuthorizer.supported_operations(ResourceType.TRANSACTIONAL_ID) == (Op.DESCRIBE, Op.WRITE)


# --- log lines --------------------------------------------------------------------------------------------------

def test_denials_are_logged_at_info_in_kafkas_shape(caplog):
    auth = authorizer(acl("foo", Op.READ, DENY))
    with caplog.at_level(logging.INFO, logger="compatbroker.authorizer"):
        assert not allowed(auth, Op.READ, "foo")
    assert [(r.name, r.levelno) for r in caplog.records] == [("compatbroker.authorizer", logging.INFO)]
    assert caplog.records[0].getMessage() == (
        "Principal = User:alice is Denied operation = READ from host = 127.0.0.1 on resource = Topic:LITERAL:foo "
        "for request = Fetch with resourceRefCount = 1 based on rule MatchingAcl(acl=StandardAcl(resourceType=TOPIC, "
        "resourceName=foo, patternType=LITERAL, principal=User:alice, host=*, operation=READ, permissionType=DENY))")


def test_allowances_are_logged_at_debug_and_defaults_by_their_rule(caplog):
    with caplog.at_level(logging.DEBUG, logger="compatbroker.authorizer"):
        assert allowed(authorizer(allow_everyone=True), Op.WRITE, "t", resource_type=ResourceType.TRANSACTIONAL_ID)
        assert allowed(authorizer(super_users={"User:alice"}), Op.READ, "t")
        assert not allowed(authorizer(acl("t", principal="User:bob")), Op.READ, "t")
    assert [(r.levelno, r.getMessage().split(" based on rule ")[1]) for r in caplog.records] == [
        (logging.DEBUG, "DefaultAllow"), (logging.DEBUG, "SuperUser"), (logging.INFO, "DefaultDeny")]
    assert "on resource = TransactionalId:LITERAL:t " in caplog.records[0].getMessage()


def test_log_if_denied_false_and_log_if_allowed_false_log_at_trace_only(caplog):
    auth = authorizer(acl("foo"))
    with caplog.at_level(logging.DEBUG, logger="compatbroker.authorizer"):
        auth.authorize(session(), Op.WRITE, TOPIC, "foo", log_if_denied=False)
        auth.authorize(session(), Op.READ, TOPIC, "foo", log_if_allowed=False)
        auth.authorized_operations(session(), TOPIC, "foo")
    assert caplog.records == []
    with caplog.at_level(TRACE, logger="compatbroker.authorizer"):
        auth.authorize(session(), Op.WRITE, TOPIC, "foo", log_if_denied=False)
    assert [r.levelname for r in caplog.records] == ["TRACE"]


# --- the index agrees with a scan of every ACL ------------------------------------------------------------------

def _reference(bindings, principal, host, operation, resource_type, name, allow_everyone) -> bool:
    """The rules read off Kafka's StandardAuthorizerData, by scanning every binding."""
    on_resource = [b for b in bindings if b.pattern.resource_type == resource_type and (
        (b.pattern.pattern_type == LITERAL and b.pattern.name in (name, "*"))
        or (b.pattern.pattern_type == PREFIXED and name.startswith(b.pattern.name)))]

    def applies(entry):
        implied = {Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
                   Op.DESCRIBE_CONFIGS: {Op.ALTER_CONFIGS}}.get(operation, set())
        return (entry.principal in (principal, "User:*") and entry.host in (host, "*")
                and (entry.operation in (Op.ALL, operation)
                     or (entry.permission_type == ALLOW and entry.operation in implied)))

    permissions = {b.entry.permission_type for b in on_resource if applies(b.entry)}
    if DENY in permissions:
        return False
    return ALLOW in permissions or (not on_resource and allow_everyone)


_names = st.text(alphabet="ab*", min_size=1, max_size=3)
_bindings = st.builds(
    acl, _names, st.sampled_from([Op.ALL, Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS]),
    st.sampled_from([ALLOW, DENY]), pattern=st.sampled_from([LITERAL, PREFIXED]),
    resource_type=st.sampled_from([TOPIC, GROUP]), principal=st.sampled_from(["User:alice", "User:*", "Group:*"]),
    host=st.sampled_from(["*", HOST, "10.0.0.1"]))


@settings(max_examples=300, deadline=None)
@given(bindings=st.lists(_bindings, max_size=12), name=_names, allow_everyone=st.booleans(),
       operation=st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS]),
       principal=st.sampled_from(["User:alice", "Group:ops"]), host=st.sampled_from([HOST, "10.0.0.1"]))
def test_the_indexed_decision_equals_a_scan_of_every_acl(bindings, name, allow_everyone, operation, principal, host):
    auth = authorizer(*bindings, allow_everyone=allow_everyone)
    decision = auth.authorize(session(principal, host), operation, TOPIC, name)
    assert decision == _reference(bindings, principal, host, operation, TOPIC, name, allow_everyone)
