"""Kafka's StandardAuthorizer (org.apache.kafka.metadata.authorizer): may a session's principal do an operation on a
resource?

The rules, in Kafka's order:
- a principal named in `super.users` may do everything;
- otherwise the ACLs that apply to the resource are those of its type with the LITERAL name, the LITERAL wildcard
  `*`, and every PREFIXED name the resource's name starts with. Of those, an ACL applies to the request when its
  principal is the session's or `User:*`, its host is the client's address or `*`, and its operation is the one
  asked, ALL, or (ALLOW ACLs only) one that implies it: READ, WRITE, DELETE and ALTER imply DESCRIBE, ALTER_CONFIGS
  implies DESCRIBE_CONFIGS;
- a DENY that applies wins over any ALLOW; an ALLOW that applies allows; when ACLs exist for the resource but none
  applies, the answer is no; when no ACL exists for the resource, `allow.everyone.if.no.acl.found` decides.
`authorize_by_resource_type` (may the principal do the operation on some resource of a type: Kafka's
authorizeByResourceType) and `authorized_operations` (the `*_authorized_operations` bit field) build on these.

Each decision is logged through the logger `compatbroker.authorizer` in the shape of Kafka's `kafka.authorizer.logger`
lines: a denial at INFO when `log_if_denied` (an explicit access), an allowance at DEBUG when `log_if_allowed`, and
the others at TRACE (level 5). Messages are only built when their level is enabled.

The cost of a decision is a few dictionary lookups (AclIndex: by type and name, one per distinct prefix length),
not a scan of every ACL, since every request of a broker with an authorizer passes through here.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..operations import operations_field, supported_operations as _supported_operations
from .bindings import AclBinding, resource_type_name
from .store import AclStore
from .types import WILDCARD, AclOperation, AclPermissionType, PatternType, ResourceType

if TYPE_CHECKING:
    from ..session import Session

log = logging.getLogger("compatbroker.authorizer")

TRACE = 5  # below DEBUG: the decisions Kafka logs at TRACE (authorized-operations probes, filters)
logging.addLevelName(TRACE, "TRACE")

WILDCARD_PRINCIPAL = "User:*"
_HARDCODED_NAME = "hardcode"  # the name Kafka's authorizeByResourceType checks first, for super users

_IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                               AclOperation.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})
_ALLOW, _DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


class _Rule:
    """What decided: a super user, a matching ACL, or the default (`DefaultAllow` / `DefaultDeny`)."""

    __slots__ = ("allowed", "name", "acl")

    def __init__(self, allowed: bool, name: str, acl: AclBinding | None = None):
        self.allowed, self.name, self.acl = allowed, name, acl

    def __str__(self) -> str:
        if self.acl is None:
            return self.name
        pattern, entry = self.acl.pattern, self.acl.entry
        return (f"MatchingAcl(acl=StandardAcl(resourceType={pattern.resource_type.name}, "
                f"resourceName={pattern.name}, patternType={pattern.pattern_type.name}, principal={entry.principal}, "
                f"host={entry.host}, operation={entry.operation.name}, permissionType={entry.permission_type.name}))")


_SUPER_USER = _Rule(True, "SuperUser")
_DEFAULT_ALLOW = _Rule(True, "DefaultAllow")
_DEFAULT_DENY = _Rule(False, "DefaultDeny")


def _applies(entry, principal: str, host: str, operation: AclOperation) -> AclPermissionType | None:
    """The permission of an ACL entry for this principal, host and operation; None when it does not apply
    (Kafka's StandardAuthorizerData.findResult, the resource already matched)."""
    if entry.principal != principal and entry.principal != WILDCARD_PRINCIPAL:
        return None
    if entry.host != WILDCARD and entry.host != host:
        return None
    acl_operation = entry.operation
    if acl_operation != AclOperation.ALL and acl_operation != operation:
        if entry.permission_type != _ALLOW:
            return None  # implication only widens ALLOWs: a DENY of READ does not deny DESCRIBE
        if operation == AclOperation.DESCRIBE:
            if acl_operation not in _IMPLIES_DESCRIBE:
                return None
        elif operation == AclOperation.DESCRIBE_CONFIGS:
            if acl_operation not in _IMPLIES_DESCRIBE_CONFIGS:
                return None
        else:
            return None
    return entry.permission_type


class StandardAuthorizer:
    def __init__(self, store: AclStore, *, super_users: frozenset[str], allow_everyone_if_no_acl_found: bool):
        self.store = store
        self.super_users = frozenset(super_users)
        self._no_acl_rule = _DEFAULT_ALLOW if allow_everyone_if_no_acl_found else _DEFAULT_DENY

    @staticmethod
    def supported_operations(resource_type: ResourceType) -> tuple[AclOperation, ...]:
        """Kafka's AclEntry.supportedOperations: the operations that mean something on a resource of the type."""
        return _supported_operations(resource_type)

    def authorize(self, session: Session, operation: AclOperation, resource_type: ResourceType, name: str, *,
                  log_if_allowed: bool = True, log_if_denied: bool = True, request: str = "",
                  ref_count: int = 1) -> bool:
        """May the session's principal do `operation` on the resource `name` (a LITERAL name) of the type?
        `request` names the API in the log line (e.g. "Fetch")."""
        principal = str(session.principal)
        if principal in self.super_users:
            rule = _SUPER_USER
        else:
            rule = self._rule(self._buckets(resource_type, name), principal, session.client_host, operation)
        self._log(rule, principal, session.client_host, operation, resource_type, name, log_if_allowed=log_if_allowed,
                  log_if_denied=log_if_denied, request=request, ref_count=ref_count)
        return rule.allowed

    def _buckets(self, resource_type: ResourceType, name: str) -> list:
        """The ACLs that can apply to the resource, in Kafka's order: those of its literal name, of its prefixes
        from the longest, of the wildcard `*` (tuples, None where there are none)."""
        index = self.store.index
        literal = index.literal.get(resource_type, {})
        buckets = [literal.get(name)]
        prefixed = index.prefixed.get(resource_type)
        if prefixed is not None:
            buckets.extend(prefixed.get(name[:length]) for length in index.prefix_lengths[resource_type]
                           if length <= len(name))
        buckets.append(literal.get(WILDCARD))
        return buckets

    def _rule(self, buckets: list, principal: str, host: str, operation: AclOperation) -> _Rule:
        # The first DENY that applies decides; else the last ALLOW that applies; else any ACL on the resource denies.
        has_resource_acls = False
        allow_acl = None
        for bucket in buckets:
            if not bucket:
                continue
            has_resource_acls = True
            for binding in bucket:
                permission = _applies(binding.entry, principal, host, operation)
                if permission == _DENY:
                    return _Rule(False, "MatchingAcl", binding)
                if permission == _ALLOW:
                    allow_acl = binding
        if allow_acl is not None:
            return _Rule(True, "MatchingAcl", allow_acl)
        return _DEFAULT_DENY if has_resource_acls else self._no_acl_rule

    @staticmethod
    def _log(rule: _Rule, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str,
             *, log_if_allowed: bool, log_if_denied: bool, request: str, ref_count: int) -> None:
        if rule.allowed:
            level = logging.DEBUG if log_if_allowed else TRACE
        else:
            level = logging.INFO if log_if_denied else TRACE
        if log.isEnabledFor(level):
            log.log(level, "Principal = %s is %s operation = %s from host = %s on resource = %s:%s:%s for request = "
                    "%s with resourceRefCount = %d based on rule %s", principal,
                    "Allowed" if rule.allowed else "Denied", operation.name, host,
                    resource_type_name(resource_type), PatternType.LITERAL.name, name, request, ref_count, rule)

    def authorize_by_resource_type(self, session: Session, operation: AclOperation, resource_type: ResourceType, *,
                                   request: str = "") -> bool:
        """Kafka's authorizeByResourceType: may the principal do `operation` on at least one resource of the type,
        i.e. is there an ALLOW for it (wildcard, literal or prefixed) that no DENY of the same or a shorter prefix
        cancels? Super users and a default allow answer yes. ValueError for ANY/UNKNOWN, as Kafka's."""
        _check_by_resource_type_args(operation, resource_type)
        if self.authorize(session, operation, resource_type, _HARDCODED_NAME, log_if_allowed=True,
                          log_if_denied=False, request=request, ref_count=0):
            return True
        principal, host = str(session.principal), session.client_host
        deny_literal, deny_prefixed, allow_literal, allow_prefixed = set(), set(), set(), set()
        has_wildcard_allow = False
        for binding in self.store.index.by_type.get(resource_type, ()):
            entry, pattern = binding.entry, binding.pattern
            if entry.host != host and entry.host != WILDCARD:
                continue
            if entry.principal != principal and entry.principal != WILDCARD_PRINCIPAL:
                continue
            if entry.operation != operation and entry.operation != AclOperation.ALL:
                continue
            literal = pattern.pattern_type == PatternType.LITERAL
            if entry.permission_type == _DENY:
                if literal and pattern.name == WILDCARD:
                    return False
                (deny_literal if literal else deny_prefixed).add(pattern.name)
            elif literal and pattern.name == WILDCARD:
                has_wildcard_allow = True
            else:
                (allow_literal if literal else allow_prefixed).add(pattern.name)
        if has_wildcard_allow:
            return True
        for name in allow_literal:
            if name not in deny_literal and not _has_denied_prefix(name, deny_prefixed):
                return True
        return any(not _has_denied_prefix(name, deny_prefixed) for name in allow_prefixed)

    def authorized_operations(self, session: Session, resource_type: ResourceType, name: str, *,
                              request: str = "") -> int:
        """The 32-bit field of the supported operations the principal may do on the resource (bit n: the
        operation with code n), as `*_authorized_operations` response fields carry it. Logged at TRACE only.
        The resource's ACLs are looked up once for all the operations."""
        principal, host = str(session.principal), session.client_host
        buckets = None if principal in self.super_users else self._buckets(resource_type, name)
        allowed = []
        for operation in self.supported_operations(resource_type):
            rule = _SUPER_USER if buckets is None else self._rule(buckets, principal, host, operation)
            self._log(rule, principal, host, operation, resource_type, name, log_if_allowed=False,
                      log_if_denied=False, request=request, ref_count=1)
            if rule.allowed:
                allowed.append(operation)
        return operations_field(allowed)


def _has_denied_prefix(name: str, deny_prefixed: set[str]) -> bool:
    return any(name[:length] in deny_prefixed for length in range(1, len(name) + 1))


def _check_by_resource_type_args(operation: AclOperation, resource_type: ResourceType) -> None:
    if resource_type == ResourceType.ANY:
        raise ValueError("Must specify a non-filter resource type for authorizeByResourceType")
    if resource_type == ResourceType.UNKNOWN:
        raise ValueError("Unknown resource type")
    if operation == AclOperation.ANY:
        raise ValueError("Must specify a non-filter operation type for authorizeByResourceType")
    if operation == AclOperation.UNKNOWN:
        raise ValueError("Unknown operation type")
