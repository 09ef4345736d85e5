"""ACL bindings and filters: Kafka's matching rules (ResourcePatternFilter, AccessControlEntryFilter), indefinite
fields, and the validation messages of new bindings and of DeleteAcls filters."""
from __future__ import annotations

import pytest

from compatbroker.security.acls import (ANY_FILTER, AccessControlEntry, AccessControlEntryFilter, AclBinding,
                                        AclBindingFilter, AclOperation, AclPermissionType, InvalidAclError,
                                        PatternType, ResourcePattern, ResourcePatternFilter, ResourceType,
                                        validate_filter, validate_new_binding)
from compatbroker.security.acls.bindings import code_of, resource_type_name

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LITERAL, PREFIXED, MATCH, ANY = PatternType.LITERAL, PatternType.PREFIXED, PatternType.MATCH, PatternType.ANY
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def acl(name="foo", pattern=LITERAL, resource_type=TOPIC, principal="User:alice", host="*",
        operation=AclOperation.READ, permission=ALLOW) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern),
                      AccessControlEntry(principal, host, operation, permission))


@pytest.mark.parametrize("pattern, expected", [
    (ResourcePattern(TOPIC, "foo", LITERAL), True),
    (ResourcePattern(TOPIC, "*", LITERAL), True),
    (ResourcePattern(TOPIC, "f", PREFIXED), True),
    (ResourcePattern(TOPIC, "foo", PREFIXED), True),
    (ResourcePattern(TOPIC, "foob", PREFIXED), False),
    (ResourcePattern(TOPIC, "fo", LITERAL), False),
    (ResourcePattern(TOPIC, "*", PREFIXED), False),
    (ResourcePattern(GROUP, "foo", LITERAL), False),
])
def test_match_filter_selects_the_bindings_that_apply_to_a_resource(pattern, expected):
    assert ResourcePatternFilter(TOPIC, "foo", MATCH).matches(pattern) is expected


@pytest.mark.parametrize("pattern, expected", [
    (ResourcePattern(TOPIC, "foo", LITERAL), True),
    (ResourcePattern(TOPIC, "foo", PREFIXED), True),
    (ResourcePattern(TOPIC, "*", LITERAL), False),
    (ResourcePattern(TOPIC, "f", PREFIXED), False),
])
def test_any_filter_matches_the_exact_name_of_every_pattern_type(pattern, expected):
    assert ResourcePatternFilter(TOPIC, "foo", ANY).matches(pattern) is expected


def test_literal_and_prefixed_filters_match_their_own_type_and_name_only():
    assert ResourcePatternFilter(TOPIC, "*", LITERAL).matches(ResourcePattern(TOPIC, "*", LITERAL))
    assert not ResourcePatternFilter(TOPIC, "*", LITERAL).matches(ResourcePattern(TOPIC, "foo", LITERAL))
    assert not ResourcePatternFilter(TOPIC, "foo", LITERAL).matches(ResourcePattern(TOPIC, "foo", PREFIXED))
    assert ResourcePatternFilter(TOPIC, "fo", PREFIXED).matches(ResourcePattern(TOPIC, "fo", PREFIXED))
    assert not ResourcePatternFilter(TOPIC, "foo", PREFIXED).matches(ResourcePattern(TOPIC, "fo", PREFIXED))


def test_null_name_and_any_type_match_everything_of_their_scope():
    assert ResourcePatternFilter(TOPIC, None, ANY).matches(ResourcePattern(TOPIC, "x", PREFIXED))
    assert not ResourcePatternFilter(TOPIC, None, ANY).matches(ResourcePattern(GROUP, "x", PREFIXED))
    assert ResourcePatternFilter(ResourceType.ANY, None, LITERAL).matches(ResourcePattern(GROUP, "x", LITERAL))
    assert ANY_FILTER.matches(acl(resource_type=ResourceType.CLUSTER, name="kafka-cluster"))


def test_entry_filter_matches_null_and_any_as_wildcards_and_the_rest_exactly():
    entry = AccessControlEntry("User:alice", "10.0.0.1", AclOperation.WRITE, DENY)
    assert AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY).matches(entry)
    assert AccessControlEntryFilter("User:alice", "10.0.0.1", AclOperation.WRITE, DENY).matches(entry)
    assert not AccessControlEntryFilter("User:*", None, AclOperation.ANY, AclPermissionType.ANY).matches(entry)
    assert not AccessControlEntryFilter(None, "*", AclOperation.ANY, AclPermissionType.ANY).matches(entry)
    assert not AccessControlEntryFilter(None, None, AclOperation.ALL, AclPermissionType.ANY).matches(entry)
    assert not AccessControlEntryFilter(None, None, AclOperation.ANY, ALLOW).matches(entry)


def test_unknown_codes_match_nothing():
    unknown_type = AclBindingFilter(ResourcePatternFilter(code_of(ResourceType, 99), None, ANY),
                                    AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY))
    assert code_of(ResourceType, 99) is ResourceType.UNKNOWN and unknown_type.is_unknown
    assert not unknown_type.matches(acl())


@pytest.mark.parametrize("acl_filter, indefinite", [
    (AclBindingFilter(ResourcePatternFilter(TOPIC, "foo", LITERAL),
                      AccessControlEntryFilter("User:a", "*", AclOperation.READ, ALLOW)), None),
    (AclBindingFilter(ResourcePatternFilter(ResourceType.ANY, "foo", LITERAL),
                      AccessControlEntryFilter("User:a", "*", AclOperation.READ, ALLOW)), "Resource type is ANY."),
    (AclBindingFilter(ResourcePatternFilter(TOPIC, None, LITERAL),
                      AccessControlEntryFilter("User:a", "*", AclOperation.READ, ALLOW)), "Resource name is NULL."),
    (AclBindingFilter(ResourcePatternFilter(TOPIC, "foo", MATCH),
                      AccessControlEntryFilter("User:a", "*", AclOperation.READ, ALLOW)),
     "Resource pattern type is MATCH."),
    (AclBindingFilter(ResourcePatternFilter(TOPIC, "foo", LITERAL),
                      AccessControlEntryFilter(None, "*", AclOperation.READ, ALLOW)), "Principal is NULL"),
    (AclBindingFilter(ResourcePatternFilter(TOPIC, "foo", LITERAL),
                      AccessControlEntryFilter("User:a", "*", AclOperation.ANY, ALLOW)), "Operation is ANY"),
    (AclBindingFilter(ResourcePatternFilter(TOPIC, "foo", LITERAL),
                      AccessControlEntryFilter("User:a", "*", AclOperation.READ, AclPermissionType.ANY)),
     "Permission type is ANY"),
])
def test_indefinite_fields_as_kafka_names_them(acl_filter, indefinite):
    assert acl_filter.find_indefinite_field() == indefinite
    assert acl_filter.matches_at_most_one() is (indefinite is None)


def test_bindings_refuse_filter_only_values_with_kafkas_messages():
    with pytest.raises(ValueError, match="^resourceType must not be ANY$"):
        ResourcePattern(ResourceType.ANY, "foo", LITERAL)
    with pytest.raises(ValueError, match="^patternType must not be MATCH$"):
        ResourcePattern(TOPIC, "foo", MATCH)
    with pytest.raises(ValueError, match="^operation must not be ANY$"):
        AccessControlEntry("User:a", "*", AclOperation.ANY, ALLOW)
    with pytest.raises(ValueError, match="^permissionType must not be ANY$"):
        AccessControlEntry("User:a", "*", AclOperation.READ, AclPermissionType.ANY)


@pytest.mark.parametrize("binding, message", [
    (acl(resource_type=ResourceType.CLUSTER, name="other"),
     "The only valid name for the CLUSTER resource is kafka-cluster"),
    (acl(name=""), "Invalid empty resource name"),
    (acl(resource_type=ResourceType.UNKNOWN), "Invalid resourceType UNKNOWN"),
    (acl(pattern=PatternType.UNKNOWN), "Invalid patternType UNKNOWN"),
    (acl(operation=AclOperation.UNKNOWN), "Invalid operation UNKNOWN"),
    (acl(permission=AclPermissionType.UNKNOWN), "Invalid permissionType UNKNOWN"),
    (acl(principal="alice"), "Could not parse principal from `alice` (no colon is present separating the "
                             "principal type from the principal name)"),
])
def test_new_bindings_are_validated_with_kafkas_messages(binding, message):
    with pytest.raises(InvalidAclError) as raised:
        validate_new_binding(binding)
    assert str(raised.value) == message


def test_valid_bindings_pass_validation():
    validate_new_binding(acl())
    validate_new_binding(acl(resource_type=ResourceType.CLUSTER, name="kafka-cluster", pattern=PREFIXED))
    validate_new_binding(acl(principal="User:*", name="*"))


def test_delete_filters_with_unknown_codes_are_refused():
    pattern_ok = ResourcePatternFilter(TOPIC, None, ANY)
    entry_ok = AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY)
    validate_filter(AclBindingFilter(pattern_ok, entry_ok))
    with pytest.raises(InvalidAclError, match=r"^Unknown patternFilter\.$"):
        validate_filter(AclBindingFilter(ResourcePatternFilter(TOPIC, None, PatternType.UNKNOWN), entry_ok))
    with pytest.raises(InvalidAclError, match=r"^Unknown entryFilter\.$"):
        validate_filter(AclBindingFilter(pattern_ok, AccessControlEntryFilter(None, None, AclOperation.UNKNOWN,
                                                                              AclPermissionType.ANY)))


def test_resource_type_names_are_kafkas_pascal_case():
    assert [resource_type_name(t) for t in (TOPIC, ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN)] == [
        "Topic", "TransactionalId", "DelegationToken"]


def test_protocol_codes_become_enum_members():
    binding = AclBinding(ResourcePattern(2, "foo", 4), AccessControlEntry("User:alice", "*", 3, 3))
    assert binding == acl("foo", PREFIXED)
    assert binding.pattern.resource_type is TOPIC and binding.entry.permission_type is ALLOW
    assert "resourceType=TOPIC" in str(binding)
    assert ResourcePatternFilter(99, None, 1).resource_type is ResourceType.UNKNOWN
    assert AccessControlEntryFilter(None, None, -5, 1).operation is AclOperation.UNKNOWN
