"""The control operations on the cluster's security state: SCRAM users and ACL bindings (`ControlOperations`
inherits them; routes in `http.py`).

- users: `add_user(name, password, mechanisms, iterations)` stores SCRAM credentials (default: SCRAM-SHA-256 and
  SCRAM-SHA-512, 4096 iterations) in the cluster's credential store, as AlterUserScramCredentials would;
  `remove_user(name, mechanisms)` deletes them; `users()` lists {name: [{mechanism, iterations}]}. PLAIN users are
  the listener's `plain.sasl.jaas.config` and change only with the broker's settings.
- ACLs: `add_acls(acls)` with [{resource_type, name, pattern_type, principal, host, operation, permission}]
  (enum values by Kafka's name, any case, or protocol code; pattern_type LITERAL, host "*" and permission ALLOW by
  default), `acls(...)` and `remove_acls(...)` with a filter of the same fields (left out: any; pattern_type MATCH
  as in DescribeAcls). Bindings are validated with Kafka's messages (400) and persisted at once.

They work whether or not an authorizer is configured (ACLs are stored either way, as in Kafka's metadata).
"""
from __future__ import annotations

from ...security.acls import (AccessControlEntry, AccessControlEntryFilter, AclBinding, AclBindingFilter,
                              AclOperation, AclPermissionType, InvalidAclError, PatternType, ResourcePattern,
                              ResourcePatternFilter, ResourceType, validate_new_binding)
from ...security.scram_credentials import MECHANISMS as SCRAM_MECHANISMS
from . import ControlError

DEFAULT_ITERATIONS = 4096
_ACL_FIELDS = ("resource_type", "name", "pattern_type", "principal", "host", "operation", "permission")


class SecurityOperations:
    """Mixed into ControlOperations: `self._runtime` is the ClusterRuntime."""

    @property
    def _security(self):
        return self._runtime.cluster.security

    # --- SCRAM users ----------------------------------------------------------------------------------------------

    async def add_user(self, name, password, mechanisms=None, iterations=DEFAULT_ITERATIONS) -> dict:
        """Store SCRAM credentials for `name` (an existing user's are replaced)."""
        name, mechanisms = _user_name(name), _scram_mechanisms(mechanisms)
        if not isinstance(password, str) or not password:
            raise ControlError(400, "a password is a non-empty string")
        store = self._security.scram
        for mechanism in mechanisms:
            try:
                store.set_password(name, mechanism, password, int(iterations))
            except (TypeError, ValueError) as exc:
                raise ControlError(400, f"cannot store {mechanism} credentials of {name}: {exc}") from None
        return self._user(name)

    async def remove_user(self, name, mechanisms=None) -> dict:
        """Delete the user's credentials of `mechanisms` (default: all); 404 when it had none."""
        name, mechanisms = _user_name(name), _scram_mechanisms(mechanisms)
        removed = [mechanism for mechanism in mechanisms if self._security.scram.delete(name, mechanism)]
        if not removed:
            raise ControlError(404, f"no SCRAM credentials of user {name} for {', '.join(mechanisms)}")
        return {"name": name, "removed": removed}

    async def users(self) -> dict:
        store = self._security.scram
        return {name: self._user(name)["credentials"] for name in store.users()}

    def _user(self, name: str) -> dict:
        return {"name": name, "credentials": [{"mechanism": mechanism.name, "iterations": iterations}
                                              for mechanism, iterations in self._security.scram.describe(name)]}

    # --- ACLs -----------------------------------------------------------------------------------------------------

    async def add_acls(self, acls) -> list[dict]:
        """Store the bindings; answers those that were new."""
        if not isinstance(acls, list) or not all(isinstance(item, dict) for item in acls):
            raise ControlError(400, "acls is a list of objects {resource_type, name, pattern_type, principal, "
                                    "host, operation, permission}")
        bindings = [_binding(item) for item in acls]
        try:
            added = self._security.acls.add(bindings)
        except OSError as exc:
            raise ControlError(500, f"cannot store the ACLs: {exc}") from None
        return [acl_dict(binding) for binding in added]

    async def acls(self, resource_type=None, name=None, pattern_type=None, principal=None, host=None,
                   operation=None, permission=None) -> list[dict]:
        acl_filter = _filter(resource_type, name, pattern_type, principal, host, operation, permission)
        return [acl_dict(binding) for binding in self._security.acls.acls(acl_filter)]

    async def remove_acls(self, resource_type=None, name=None, pattern_type=None, principal=None, host=None,
                          operation=None, permission=None) -> list[dict]:
        """Remove every binding the filter matches; answers them."""
        acl_filter = _filter(resource_type, name, pattern_type, principal, host, operation, permission)
        try:
            [removed] = self._security.acls.remove([acl_filter])
        except OSError as exc:
            raise ControlError(500, f"cannot store the ACLs: {exc}") from None
        return [acl_dict(binding) for binding in removed]


def acl_dict(binding: AclBinding) -> dict:
    pattern, entry = binding.pattern, binding.entry
    return {"resource_type": pattern.resource_type.name, "name": pattern.name,
            "pattern_type": pattern.pattern_type.name, "principal": entry.principal, "host": entry.host,
            "operation": entry.operation.name, "permission": entry.permission_type.name}


def _binding(item: dict) -> AclBinding:
    unknown = sorted(set(item) - set(_ACL_FIELDS))
    if unknown:
        raise ControlError(400, f"an ACL has {', '.join(_ACL_FIELDS)}; unknown: {', '.join(unknown)}")
    for required in ("resource_type", "name", "principal", "operation"):
        if item.get(required) is None:
            raise ControlError(400, f"an ACL needs {required}")
    try:
        binding = AclBinding(
            ResourcePattern(_enum(ResourceType, item["resource_type"], "resource_type"), str(item["name"]),
                            _enum(PatternType, item.get("pattern_type", "LITERAL"), "pattern_type")),
            AccessControlEntry(str(item["principal"]), str(item.get("host", "*")),
                               _enum(AclOperation, item["operation"], "operation"),
                               _enum(AclPermissionType, item.get("permission", "ALLOW"), "permission")))
        validate_new_binding(binding)
    except (InvalidAclError, ValueError) as exc:
        raise ControlError(400, f"invalid ACL: {exc}") from None
    return binding


def _filter(resource_type, name, pattern_type, principal, host, operation, permission) -> AclBindingFilter:
    def any_or(enum_type, value, what):
        return enum_type.ANY if value is None else _enum(enum_type, value, what)

    return AclBindingFilter(
        ResourcePatternFilter(any_or(ResourceType, resource_type, "resource_type"),
                              None if name is None else str(name),
                              any_or(PatternType, pattern_type, "pattern_type")),
        AccessControlEntryFilter(None if principal is None else str(principal), None if host is None else str(host),
                                 any_or(AclOperation, operation, "operation"),
                                 any_or(AclPermissionType, permission, "permission")))


def _enum(enum_type, value, what: str):
    """A member by Kafka's name (any case; "TransactionalId" too) or protocol code; 400 otherwise."""
    if isinstance(value, str) and value.strip().isdigit():  # a code from a query string
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return enum_type(value)
        except ValueError:
            pass
    elif isinstance(value, str):
        key = value.strip().upper().replace("-", "_")
        member = enum_type.__members__.get(key) or _from_camel(enum_type, value)
        if member is not None:
            return member
    known = ", ".join(member.name for member in enum_type if member.name != "UNKNOWN")
    raise ControlError(400, f"{what} is one of {known} (or its code), got {value!r}")


def _from_camel(enum_type, value: str):
    """TransactionalId -> TRANSACTIONAL_ID."""
    snake = "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(value.strip())).upper()
    return enum_type.__members__.get(snake)


def _user_name(name) -> str:
    if not isinstance(name, str) or not name:
        raise ControlError(400, "a user name is a non-empty string")
    return name


def _scram_mechanisms(mechanisms) -> list[str]:
    if mechanisms is None:
        return list(SCRAM_MECHANISMS)
    if isinstance(mechanisms, str):
        mechanisms = [mechanisms]
    names = [str(mechanism).upper() for mechanism in mechanisms]
    unknown = [name for name in names if name not in SCRAM_MECHANISMS]
    if unknown or not names:
        raise ControlError(400, f"SCRAM mechanisms are {', '.join(SCRAM_MECHANISMS)}, got {mechanisms!r}")
    return names
