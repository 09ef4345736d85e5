"""The cluster's ACL bindings: kept in memory with an index the authorizer reads, persisted in `<data dir>/acls.json`.

`AclStore.open(path)` loads the file (none yet: no ACLs) and refuses, with an `AclStoreError` naming the file
and what is wrong, one that does not parse: a broker must not start with half its ACLs. A binding Kafka would not
create (`bindings.validate_new_binding`) is refused before anything changes, so the file always loads. Every
change rewrites the whole file atomically (temp file, fsync, rename, fsync of the directory:
storage.checkpoints.write_atomically) before it becomes visible; when the write fails nothing changes and the
OSError is raised. A stray temp file of a write a crash interrupted is removed at open.

The file is JSON, with Kafka's enum names:

    {"version": 1, "acls": [{"resourceType": "TOPIC", "resourceName": "orders", "patternType": "PREFIXED",
                             "principal": "User:alice", "host": "*", "operation": "READ", "permissionType": "ALLOW"}]}

`index` is an immutable `AclIndex` replaced on every change (as Kafka's AclCache), so an authorization that read
it sees one consistent set of ACLs.
"""
from __future__ import annotations

import glob
import json
import os
import threading
from collections.abc import Iterable

from ...storage.checkpoints import TEMP_SUFFIX, write_atomically
from .bindings import (ANY_FILTER, AccessControlEntry, AclBinding, AclBindingFilter, InvalidAclError,
                       ResourcePattern, validate_new_binding)
from .types import AclOperation, AclPermissionType, PatternType, ResourceType

FILE_NAME = "acls.json"
FORMAT_VERSION = 1


class AclStoreError(ValueError):
    """The ACL file cannot be loaded (start-up refuses the data directory)."""


def _kafka_order(binding: AclBinding):
    # Kafka's StandardAcl order among bindings of one resource pattern: operation, principal, host, permission.
    entry = binding.entry
    return entry.operation, entry.principal, entry.host, entry.permission_type


class AclIndex:
    """The bindings by resource type and name, for authorizations that look at the few that can apply:
    `literal[type][name]` and `prefixed[type][prefix]` (each a tuple in Kafka's order), `prefix_lengths[type]`
    (the distinct lengths of that type's prefixes, longest first: a name's prefixes are found with one lookup per
    length) and `by_type[type]` (every binding of the type, for authorizeByResourceType)."""

    __slots__ = ("literal", "prefixed", "prefix_lengths", "by_type", "count")

    def __init__(self, bindings: Iterable[AclBinding] = ()):
        literal: dict[ResourceType, dict[str, list]] = {}
        prefixed: dict[ResourceType, dict[str, list]] = {}
        by_type: dict[ResourceType, list] = {}
        count = 0
        for binding in bindings:
            pattern = binding.pattern
            table = literal if pattern.pattern_type == PatternType.LITERAL else prefixed
            table.setdefault(pattern.resource_type, {}).setdefault(pattern.name, []).append(binding)
            by_type.setdefault(pattern.resource_type, []).append(binding)
            count += 1
        self.literal = _frozen(literal)
        self.prefixed = _frozen(prefixed)
        self.prefix_lengths = {resource_type: tuple(sorted({len(name) for name in names}, reverse=True))
                               for resource_type, names in self.prefixed.items()}
        self.by_type = {resource_type: tuple(bindings) for resource_type, bindings in by_type.items()}
        self.count = count


def _frozen(table: dict[ResourceType, dict[str, list]]) -> dict[ResourceType, dict[str, tuple]]:
    return {resource_type: {name: tuple(sorted(bindings, key=_kafka_order)) for name, bindings in names.items()}
            for resource_type, names in table.items()}


class AclStore:
    """The ACL bindings of a cluster. `path` None keeps them in memory only (tests)."""

    def __init__(self, path: str | None = None, bindings: Iterable[AclBinding] = ()):
        self.path = path
        self._bindings: dict[AclBinding, None] = dict.fromkeys(bindings)  # in order of creation
        self._lock = threading.Lock()  # the control API may change ACLs from another thread
        self.index = AclIndex(self._bindings)

    @classmethod
    def open(cls, path: str) -> AclStore:
        """The store persisted in the file `path` (`<data dir>/acls.json`; a directory means its `acls.json`),
        empty while the file does not exist. AclStoreError when the file cannot be read or parsed."""
        if os.path.isdir(path):
            path = os.path.join(path, FILE_NAME)
        for stray in glob.glob(glob.escape(path) + ".*" + TEMP_SUFFIX):  # a write a crash interrupted
            os.remove(stray)
        try:
            with open(path, "rb") as file:
                data = file.read()
        except FileNotFoundError:
            return cls(path)
        except OSError as exc:
            raise AclStoreError(f"cannot read the ACL file {path}: {exc.strerror or exc}") from None
        return cls(path, _parse(path, data))

    def __len__(self) -> int:
        return len(self._bindings)

    def bindings(self) -> list[AclBinding]:
        """Every binding, in order of creation."""
        return list(self._bindings)

    def acls(self, acl_filter: AclBindingFilter = ANY_FILTER) -> list[AclBinding]:
        """The bindings the filter matches."""
        return [binding for binding in self._bindings if acl_filter.matches(binding)]

    def add(self, bindings: Iterable[AclBinding]) -> list[AclBinding]:
        """Store the bindings (one write); returns those that were new (an existing one is left as it is, as
        Kafka's controller does). InvalidAclError for a binding Kafka refuses (`validate_new_binding`: the file
        must stay loadable), OSError when the file cannot be written: either way nothing changed."""
        bindings = list(dict.fromkeys(bindings))
        for binding in bindings:
            validate_new_binding(binding)
        with self._lock:
            added = [binding for binding in bindings if binding not in self._bindings]
            if added:
                self._commit({**self._bindings, **dict.fromkeys(added)})
            return added

    def remove(self, filters: Iterable[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove every binding matching any of the filters (one write); returns, per filter, the bindings it
        matched (a binding two filters match is in both lists). OSError when the file cannot be written."""
        with self._lock:
            matched = [self.acls(acl_filter) for acl_filter in filters]
            gone = {binding for bindings in matched for binding in bindings}
            if gone:
                self._commit({binding: None for binding in self._bindings if binding not in gone})
            return matched

    def _commit(self, bindings: dict[AclBinding, None]) -> None:
        if self.path is not None:
            write_atomically(self.path, _serialize(bindings))
        self._bindings = bindings
        self.index = AclIndex(bindings)


def _serialize(bindings: Iterable[AclBinding]) -> str:
    acls = [{"resourceType": b.pattern.resource_type.name, "resourceName": b.pattern.name,
             "patternType": b.pattern.pattern_type.name, "principal": b.entry.principal, "host": b.entry.host,
             "operation": b.entry.operation.name, "permissionType": b.entry.permission_type.name}
            for b in bindings]
    return json.dumps({"version": FORMAT_VERSION, "acls": acls}, indent=1) + "\n"


def _parse(path: str, data: bytes) -> list[AclBinding]:
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise AclStoreError(f"the ACL file {path} is not valid JSON: {exc}") from None
    if not isinstance(document, dict) or document.get("version") != FORMAT_VERSION:
        raise AclStoreError(f"the ACL file {path} is not an ACL file of version {FORMAT_VERSION}")
    acls = document.get("acls")
    if not isinstance(acls, list):
        raise AclStoreError(f"the ACL file {path} has no list of ACLs")
    bindings = []
    for position, item in enumerate(acls):
        try:
            bindings.append(_binding_of(item))
        except (InvalidAclError, ValueError, KeyError, TypeError) as exc:
            raise AclStoreError(f"the ACL file {path} has an invalid ACL at position {position}: "
                                f"{_reason(exc)}") from None
    return bindings


def _binding_of(item: dict) -> AclBinding:
    for key in ("resourceName", "principal", "host"):
        if not isinstance(item[key], str):
            raise TypeError(f"{key} is not a string")
    binding = AclBinding(
        ResourcePattern(ResourceType[item["resourceType"]], item["resourceName"], PatternType[item["patternType"]]),
        AccessControlEntry(item["principal"], item["host"], AclOperation[item["operation"]],
                           AclPermissionType[item["permissionType"]]))
    validate_new_binding(binding)
    return binding


def _reason(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"unknown or missing value {exc.args[0]!r}"
    return str(exc)
