"""DeleteAcls: SECURITY_DISABLED without an authorizer, cluster ALTER first, per-filter results (a binding matched
by two filters listed by both), unknown codes per filter, code 0 closing the connection, persistence."""
from __future__ import annotations

import pytest

from compatbroker.handlers import CloseConnection, delete_acls
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import DeleteAclsRequest
from compatbroker.security.acls import AclOperation, AclPermissionType, AclStore, PatternType, ResourceType
from compatbroker.security.acls import store as store_module

from .authz_helpers import AUTHORIZER_ON, allow, call_as, deny
from .helpers import call

ALL_VERSIONS = range(delete_acls.MIN_VERSION, delete_acls.MAX_VERSION + 1)
TOPIC = ResourceType.TOPIC
Op = AclOperation


def by(resource_type=ResourceType.ANY, name=None, pattern=PatternType.ANY, principal=None, host=None,
       operation=Op.ANY, permission=AclPermissionType.ANY):
    return DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=resource_type, resource_name_filter=name, pattern_type_filter=pattern,
        principal_filter=principal, host_filter=host, operation=operation, permission_type=permission)


def outcome(answer) -> list[tuple]:
    """(error code, message, [(name, pattern type, operation, error code)...]) per filter."""
    return [(r.error_code, r.error_message, [(m.resource_name, m.pattern_type, m.operation, m.error_code)
                                             for m in r.matching_acls])
            for r in answer.decoded.filter_results]


@pytest.fixture
def secured(broker_factory):
    broker = broker_factory(**AUTHORIZER_ON)
    allow(broker, Op.READ, TOPIC, "orders")
    allow(broker, Op.READ, TOPIC, "ord", pattern=PatternType.PREFIXED)
    deny(broker, Op.WRITE, TOPIC, "orders")
    allow(broker, Op.READ, ResourceType.GROUP, "g")
    return broker


def names(broker) -> list[tuple]:
    return [(b.pattern.name, b.entry.operation) for b in broker.security.acls.bindings()]


def test_declares_every_schema_version():
    assert (delete_acls.API_KEY, delete_acls.MIN_VERSION, delete_acls.MAX_VERSION) == (31, 0, 3)


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_without_an_authorizer_every_filter_is_security_disabled(broker, version):
    answer = await call(broker, version, DeleteAclsRequest(filters=[by(pattern=PatternType.LITERAL)] * 2))
    assert outcome(answer) == [(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.", [])] * 2


@pytest.mark.parametrize("version", [1, 2, 3])
async def test_each_filter_lists_what_it_matched_and_all_of_it_is_removed(secured, version):
    request = DeleteAclsRequest(filters=[by(TOPIC, "orders", PatternType.MATCH, operation=Op.READ),
                                         by(TOPIC, "orders", PatternType.LITERAL),
                                         by(name="none")])
    answer = await call(secured, version, request)
    assert outcome(answer) == [
        (0, None, [("orders", PatternType.LITERAL, Op.READ, 0), ("ord", PatternType.PREFIXED, Op.READ, 0)]),
        (0, None, [("orders", PatternType.LITERAL, Op.READ, 0), ("orders", PatternType.LITERAL, Op.WRITE, 0)]),
        (0, None, []),
    ]
    matched = answer.decoded.filter_results[0].matching_acls[0]
    assert (matched.principal, matched.host, matched.permission_type, matched.resource_type) == (
        "User:alice", "*", AclPermissionType.ALLOW, TOPIC)
    assert names(secured) == [("g", Op.READ)]
    assert [b.pattern.name for b in AclStore.open(secured.config.data_dir).bindings()] == ["g"]


async def test_v0_filters_are_literal(secured):
    answer = await call(secured, 0, DeleteAclsRequest(filters=[by(TOPIC, pattern=PatternType.LITERAL)]))
    assert [name for name, *_ in outcome(answer)[0][2]] == ["orders", "orders"]
    assert names(secured) == [("ord", Op.READ), ("g", Op.READ)]


async def test_unknown_codes_answer_invalid_request_per_filter(secured):
    request = DeleteAclsRequest(filters=[by(resource_type=99), by(pattern=99), by(operation=99), by(permission=99),
                                         by(ResourceType.GROUP)])
    answer = await call(secured, 2, request)
    invalid = ErrorCode.INVALID_REQUEST
    assert outcome(answer) == [(invalid, "Unknown patternFilter.", []), (invalid, "Unknown patternFilter.", []),
                               (invalid, "Unknown entryFilter.", []), (invalid, "Unknown entryFilter.", []),
                               (0, None, [("g", PatternType.LITERAL, Op.READ, 0)])]
    assert len(secured.security.acls) == 3


@pytest.mark.parametrize("field", ["resource_type", "pattern", "operation", "permission"])
async def test_the_unknown_code_0_closes_the_connection(secured, field):
    with pytest.raises(CloseConnection, match="Filters contain UNKNOWN elements"):
        await call(secured, 1, DeleteAclsRequest(filters=[by(), by(**{field: 0})]))
    assert len(secured.security.acls) == 4


async def test_without_cluster_alter_every_filter_is_refused_and_nothing_removed(secured):
    allow(secured, Op.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster")
    answer = await call_as(secured, 3, DeleteAclsRequest(filters=[by(), by(TOPIC)]))
    assert [(code, matched) for code, _, matched in outcome(answer)] == [
        (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])] * 2
    assert outcome(answer)[0][1].endswith(" is not authorized.")
    assert len(secured.security.acls) == 5


async def test_cluster_alter_lets_a_principal_delete(secured):
    allow(secured, Op.ALTER, ResourceType.CLUSTER, "kafka-cluster")
    answer = await call_as(secured, 3, DeleteAclsRequest(filters=[by(ResourceType.GROUP)]))
    assert outcome(answer) == [(0, None, [("g", PatternType.LITERAL, Op.READ, 0)])]


async def test_a_failed_write_answers_unknown_server_error_and_removes_nothing(secured, monkeypatch):
    def failing_write(*args, **kwargs):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(store_module, "write_atomically", failing_write)
    answer = await call(secured, 3, DeleteAclsRequest(filters=[by(TOPIC), by(resource_type=99)]))
    assert outcome(answer) == [(ErrorCode.UNKNOWN_SERVER_ERROR, None, []),
                               (ErrorCode.INVALID_REQUEST, "Unknown patternFilter.", [])]
    assert len(secured.security.acls) == 4
