"""ACL bindings and the filters that select them, as Kafka's org.apache.kafka.common.acl / .resource classes.

- `ResourcePattern` (type, name, LITERAL or PREFIXED) + `AccessControlEntry` (principal, host, operation,
  permission) = `AclBinding`, one stored ACL. Their constructors refuse the filter-only values (ANY, MATCH) with
  Kafka's messages, as a ValueError.
- `ResourcePatternFilter` + `AccessControlEntryFilter` = `AclBindingFilter`, what DescribeAcls and DeleteAcls
  carry: None matches any name/principal/host, ANY any type/operation/permission, and the pattern type MATCH selects
  every binding that would apply to the named resource (its literal binding, the wildcard `*` and the prefixes of the
  name). `matches_at_most_one` / `find_indefinite_field` are Kafka's.
- The enum fields take the enum or its protocol code; a code Kafka does not define becomes UNKNOWN (`code_of`).
- `validate_new_binding` and `validate_filter` raise `InvalidAclError` with the messages Kafka's broker
  (AclApis) and controller (AclControlManager) answer INVALID_REQUEST with.
"""
from __future__ import annotations

from dataclasses import dataclass

from .types import CLUSTER_NAME, WILDCARD, AclOperation, AclPermissionType, PatternType, ResourceType


class InvalidAclError(ValueError):
    """A binding or filter Kafka refuses with INVALID_REQUEST; str(exc) is Kafka's message."""


def code_of(enum_type, code: int):
    """The member with this protocol code, UNKNOWN for a code Kafka does not define (Kafka's fromCode)."""
    try:
        return enum_type(code)
    except ValueError:
        return enum_type.UNKNOWN


def _coerce(obj, **enums) -> None:
    # Plain ints (a protocol code) become the enum member, so that names and logs work whatever the caller gave.
    for field, enum_type in enums.items():
        value = getattr(obj, field)
        if type(value) is not enum_type:
            object.__setattr__(obj, field, code_of(enum_type, value))


def resource_type_name(resource_type: ResourceType) -> str:
    """Kafka's PascalCase name of a resource type, as in log lines: TRANSACTIONAL_ID -> TransactionalId."""
    return "".join(part.capitalize() for part in resource_type.name.split("_"))


@dataclass(frozen=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __post_init__(self):
        _coerce(self, resource_type=ResourceType, pattern_type=PatternType)
        if self.resource_type == ResourceType.ANY:
            raise ValueError("resourceType must not be ANY")
        if self.pattern_type in (PatternType.MATCH, PatternType.ANY):
            raise ValueError(f"patternType must not be {self.pattern_type.name}")

    @property
    def is_unknown(self) -> bool:
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
                f"patternType={self.pattern_type.name})")


@dataclass(frozen=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __post_init__(self):
        _coerce(self, operation=AclOperation, permission_type=AclPermissionType)
        if self.operation == AclOperation.ANY:
            raise ValueError("operation must not be ANY")
        if self.permission_type == AclPermissionType.ANY:
            raise ValueError("permissionType must not be ANY")

    @property
    def is_unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission_type.name})")


@dataclass(frozen=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def __str__(self) -> str:
        return f"(pattern={self.pattern}, entry={self.entry})"


@dataclass(frozen=True)
class ResourcePatternFilter:
    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def __post_init__(self):
        _coerce(self, resource_type=ResourceType, pattern_type=PatternType)

    @property
    def is_unknown(self) -> bool:
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        # MATCH: the bindings that apply to a resource named `name`.
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD
        if pattern.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return False

    def find_indefinite_field(self) -> str | None:
        if self.resource_type == ResourceType.ANY:
            return "Resource type is ANY."
        if self.resource_type == ResourceType.UNKNOWN:
            return "Resource type is UNKNOWN."
        if self.name is None:
            return "Resource name is NULL."
        if self.pattern_type == PatternType.MATCH:
            return "Resource pattern type is MATCH."
        if self.pattern_type == PatternType.UNKNOWN:
            return "Resource pattern type is UNKNOWN."
        return None

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None


@dataclass(frozen=True)
class AccessControlEntryFilter:
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def __post_init__(self):
        _coerce(self, operation=AclOperation, permission_type=AclPermissionType)

    @property
    def is_unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN

    def matches(self, entry: AccessControlEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != entry.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or self.permission_type == entry.permission_type

    def find_indefinite_field(self) -> str | None:
        if self.principal is None:
            return "Principal is NULL"
        if self.host is None:
            return "Host is NULL"
        if self.operation == AclOperation.ANY:
            return "Operation is ANY"
        if self.operation == AclOperation.UNKNOWN:
            return "Operation is UNKNOWN"
        if self.permission_type == AclPermissionType.ANY:
            return "Permission type is ANY"
        if self.permission_type == AclPermissionType.UNKNOWN:
            return "Permission type is UNKNOWN"
        return None

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None


@dataclass(frozen=True)
class AclBindingFilter:
    pattern_filter: ResourcePatternFilter
    entry_filter: AccessControlEntryFilter

    @property
    def is_unknown(self) -> bool:
        return self.pattern_filter.is_unknown or self.entry_filter.is_unknown

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_filter.matches(binding.pattern) and self.entry_filter.matches(binding.entry)

    def find_indefinite_field(self) -> str | None:
        return self.pattern_filter.find_indefinite_field() or self.entry_filter.find_indefinite_field()

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None


ANY_FILTER = AclBindingFilter(ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY),
                              AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY))
"""Matches every binding."""


def validate_new_binding(binding: AclBinding) -> None:
    """Kafka's checks of an ACL to create, in its order: the broker's (AclApis: the cluster resource's name, an
    empty name), then the controller's (AclControlManager.validateNewAcl). InvalidAclError with Kafka's message."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise InvalidAclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not pattern.name:
        raise InvalidAclError("Invalid empty resource name")
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise InvalidAclError(f"Invalid resourceType {pattern.resource_type.name}")
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAclError(f"Invalid patternType {pattern.pattern_type.name}")
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise InvalidAclError(f"Invalid operation {entry.operation.name}")
    if entry.permission_type not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        raise InvalidAclError(f"Invalid permissionType {entry.permission_type.name}")
    if ":" not in entry.principal:
        raise InvalidAclError(f"Could not parse principal from `{entry.principal}` (no colon is present separating "
                              f"the principal type from the principal name)")


def validate_filter(acl_filter: AclBindingFilter) -> None:
    """AclControlManager.validateFilter: a filter of DeleteAcls with an unknown code. InvalidAclError."""
    if acl_filter.pattern_filter.is_unknown:
        raise InvalidAclError("Unknown patternFilter.")
    if acl_filter.entry_filter.is_unknown:
        raise InvalidAclError("Unknown entryFilter.")
