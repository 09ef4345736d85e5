"""The ACL store: bindings persisted atomically in `acls.json`, reloaded at start, a damaged file refused at open
with a clear message, failed writes leaving nothing changed, and the index the authorizer reads kept current."""
from __future__ import annotations

import json
import os

import pytest

from compatbroker.security.acls import (ANY_FILTER, AccessControlEntry, AccessControlEntryFilter, AclBinding,
                                        AclBindingFilter, AclOperation, AclPermissionType, AclStore, AclStoreError,
                                        PatternType, ResourcePattern, ResourcePatternFilter, ResourceType)
from compatbroker.security.acls import store as store_module

TOPIC = ResourceType.TOPIC


def acl(name="foo", pattern=PatternType.LITERAL, principal="User:alice", operation=AclOperation.READ,
        permission=AclPermissionType.ALLOW, resource_type=TOPIC) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern),
                      AccessControlEntry(principal, "*", operation, permission))


def by_name(name, pattern_type=PatternType.ANY) -> AclBindingFilter:
    return AclBindingFilter(ResourcePatternFilter(ResourceType.ANY, name, pattern_type),
                            AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY))


def test_bindings_survive_a_reopen(tmp_path):
    store = AclStore.open(str(tmp_path))
    assert len(store) == 0 and not (tmp_path / "acls.json").exists()
    bindings = [acl(), acl("orders-", PatternType.PREFIXED, operation=AclOperation.WRITE),
                acl("g", resource_type=ResourceType.GROUP, permission=AclPermissionType.DENY)]
    assert store.add(bindings) == bindings
    reopened = AclStore.open(str(tmp_path / "acls.json"))
    assert reopened.bindings() == bindings
    assert reopened.index.literal[TOPIC]["foo"] == (bindings[0],)
    assert reopened.index.prefixed[TOPIC]["orders-"] == (bindings[1],)


def test_adding_an_existing_binding_changes_nothing(tmp_path, monkeypatch):
    store = AclStore.open(str(tmp_path))
    store.add([acl()])
    writes = []
    monkeypatch.setattr(store_module, "write_atomically", lambda *args, **kwargs: writes.append(args))
    assert store.add([acl(), acl()]) == []
    assert writes == [] and len(store) == 1


def test_remove_answers_per_filter_and_removes_the_union_in_one_write(tmp_path, monkeypatch):
    store = AclStore.open(str(tmp_path))
    foo, foo_prefix, bar = acl("foo"), acl("foo", PatternType.PREFIXED), acl("bar")
    store.add([foo, foo_prefix, bar])
    real_write = store_module.write_atomically
    writes = []

    def counting_write(*args, **kwargs):
        writes.append(args[0])
        return real_write(*args, **kwargs)

    monkeypatch.setattr(store_module, "write_atomically", counting_write)
    matched = store.remove([by_name("foo"), by_name("foo", PatternType.LITERAL), by_name("nothing")])
    assert matched == [[foo, foo_prefix], [foo], []]
    assert len(writes) == 1
    assert AclStore.open(str(tmp_path)).bindings() == [bar]


def test_acls_lists_what_a_filter_matches(tmp_path):
    store = AclStore.open(str(tmp_path))
    store.add([acl("foo"), acl("f", PatternType.PREFIXED), acl("*"), acl("bar")])
    match = by_name("foo", PatternType.MATCH)
    assert [b.pattern.name for b in store.acls(match)] == ["foo", "f", "*"]
    assert len(store.acls(ANY_FILTER)) == 4


def test_a_failed_write_changes_nothing(tmp_path, monkeypatch):
    store = AclStore.open(str(tmp_path))
    store.add([acl("kept")])
    index = store.index

    def failing_write(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store_module, "write_atomically", failing_write)
    with pytest.raises(OSError):
        store.add([acl("new")])
    with pytest.raises(OSError):
        store.remove([ANY_FILTER])
    assert store.bindings() == [acl("kept")] and store.index is index
    monkeypatch.undo()
    assert AclStore.open(str(tmp_path)).bindings() == [acl("kept")]


def test_every_change_replaces_the_index(tmp_path):
    store = AclStore.open(str(tmp_path))
    before = store.index
    store.add([acl("a", PatternType.PREFIXED), acl("abc", PatternType.PREFIXED)])
    assert store.index is not before and store.index.prefix_lengths[TOPIC] == (3, 1)
    store.remove([by_name("abc")])
    assert store.index.prefix_lengths[TOPIC] == (1,) and store.index.count == 1


def test_in_memory_store_writes_no_file(tmp_path):
    store = AclStore()
    store.add([acl()])
    assert store.bindings() == [acl()] and os.listdir(tmp_path) == []


def test_the_file_is_readable_json_with_kafkas_names(tmp_path):
    AclStore.open(str(tmp_path)).add([acl("orders-", PatternType.PREFIXED)])
    document = json.loads((tmp_path / "acls.json").read_text())
    assert document == {"version": 1, "acls": [
        {"resourceType": "TOPIC", "resourceName": "orders-", "patternType": "PREFIXED", "principal": "User:alice",
         "host": "*", "operation": "READ", "permissionType": "ALLOW"}]}


def test_a_stray_temp_file_of_an_interrupted_write_is_removed(tmp_path):
    AclStore.open(str(tmp_path)).add([acl()])
    stray = tmp_path / "acls.json.123-4.tmp"
    stray.write_text("{half")
    assert AclStore.open(str(tmp_path)).bindings() == [acl()]
    assert not stray.exists()


@pytest.mark.parametrize("content, reason", [
    (b"{not json", "is not valid JSON"),
    (b"\xff\xfe", "is not valid JSON"),
    (b'{"version": 2, "acls": []}', "is not an ACL file of version 1"),
    (b'[]', "is not an ACL file of version 1"),
    (b'{"version": 1}', "has no list of ACLs"),
    (b'{"version": 1, "acls": [7]}', "invalid ACL at position 0"),
    (b'{"version": 1, "acls": [{"resourceType": "TOPIC"}]}', "invalid ACL at position 0"),
])
def test_a_damaged_file_is_refused_at_open_with_its_path(tmp_path, content, reason):
    (tmp_path / "acls.json").write_bytes(content)
    with pytest.raises(AclStoreError) as raised:
        AclStore.open(str(tmp_path))
    assert str(tmp_path / "acls.json") in str(raised.value) and reason in str(raised.value)


@pytest.mark.parametrize("change, reason", [
    ({"operation": "REED"}, "unknown or missing value 'REED'"),
    ({"principal": "alice"}, "Could not parse principal from `alice`"),
    ({"patternType": "MATCH"}, "patternType must not be MATCH"),
    ({"resourceName": 5}, "resourceName is not a string"),
])
def test_an_invalid_acl_in_the_file_is_named(tmp_path, change, reason):
    AclStore.open(str(tmp_path)).add([acl("ok"), acl("changed")])
    document = json.loads((tmp_path / "acls.json").read_text())
    document["acls"][1].update(change)
    (tmp_path / "acls.json").write_text(json.dumps(document))
    with pytest.raises(AclStoreError, match="invalid ACL at position 1: .*" + reason.replace("(", r"\(")):
        AclStore.open(str(tmp_path))


def test_an_unreadable_file_is_refused_at_open(tmp_path):
    (tmp_path / "acls.json").mkdir()  # a directory where the file should be
    with pytest.raises(AclStoreError, match="cannot read the ACL file"):
        AclStore.open(str(tmp_path))


def test_a_broker_with_an_authorizer_refuses_to_start_on_a_damaged_file(tmp_path):
    from compatbroker.security.settings import STANDARD_AUTHORIZER
    from tests.handlers.helpers import make_broker

    data = tmp_path / "data"
    data.mkdir()
    (data / "acls.json").write_text('{"version": 1, "acls": [{"resourceType": "TOPIK"}]}')
    with pytest.raises(AclStoreError, match="acls.json has an invalid ACL at position 0"):
        make_broker(data, **{"authorizer.class.name": STANDARD_AUTHORIZER})


def test_an_invalid_binding_is_refused_before_anything_changes(tmp_path):
    from compatbroker.security.acls import InvalidAclError

    store = AclStore.open(str(tmp_path))
    with pytest.raises(InvalidAclError, match="Could not parse principal"):
        store.add([acl("fine"), acl(principal="alice")])
    assert len(store) == 0 and not (tmp_path / "acls.json").exists()
