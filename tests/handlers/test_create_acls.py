"""CreateAcls: SECURITY_DISABLED without an authorizer, cluster ALTER first, per-creation validation with Kafka's
messages, filter-only values failing the request as a whole, code 0 closing the connection, persistence."""
from __future__ import annotations

import pytest

from compatbroker.handlers import CloseConnection, create_acls
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import CreateAclsRequest
from compatbroker.security.acls import AclOperation, AclPermissionType, AclStore, PatternType, ResourceType
from compatbroker.security.acls import store as store_module

from .authz_helpers import ALICE, AUTHORIZER_ON, allow, binding, call_as
from .helpers import call

ALL_VERSIONS = range(create_acls.MIN_VERSION, create_acls.MAX_VERSION + 1)
Creation = CreateAclsRequest.AclCreation


def creation(name="orders", *, resource_type=ResourceType.TOPIC, pattern=PatternType.LITERAL, principal="User:bob",
             host="*", operation=AclOperation.READ, permission=AclPermissionType.ALLOW) -> Creation:
    return Creation(resource_type=resource_type, resource_name=name, resource_pattern_type=pattern,
                    principal=principal, host=host, operation=operation, permission_type=permission)


def results(answer) -> list[tuple[int, str | None]]:
    return [(r.error_code, r.error_message) for r in answer.decoded.results]


def test_declares_every_schema_version():
    assert (create_acls.API_KEY, create_acls.MIN_VERSION, create_acls.MAX_VERSION) == (30, 0, 3)
    assert CreateAclsRequest.VALID_VERSIONS == (0, 3)


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_without_an_authorizer_every_creation_is_security_disabled(broker, version):
    answer = await call(broker, version, CreateAclsRequest(creations=[creation(), creation("b")]))
    assert results(answer) == [(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")] * 2
    assert len(broker.security.acls) == 0


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_creates_and_persists_at_every_version(broker_factory, version):
    broker = broker_factory(**AUTHORIZER_ON)
    answer = await call(broker, version, CreateAclsRequest(creations=[creation()]))
    assert results(answer) == [(ErrorCode.NONE, None)]
    expected = binding(AclOperation.READ, ResourceType.TOPIC, "orders", principal="User:bob")
    assert broker.security.acls.bindings() == [expected]
    assert AclStore.open(broker.config.data_dir).bindings() == [expected]


@pytest.mark.parametrize("version", [1, 2, 3])
async def test_prefixed_patterns_from_v1(broker_factory, version):
    broker = broker_factory(**AUTHORIZER_ON)
    answer = await call(broker, version, CreateAclsRequest(creations=[creation("orders-",
                                                                               pattern=PatternType.PREFIXED)]))
    assert results(answer) == [(ErrorCode.NONE, None)]
    assert broker.security.acls.bindings()[0].pattern.pattern_type == PatternType.PREFIXED


async def test_without_cluster_alter_every_creation_is_refused_and_nothing_created(broker_factory):
    broker = broker_factory(**AUTHORIZER_ON)
    allow(broker, AclOperation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster")
    answer = await call_as(broker, 3, CreateAclsRequest(creations=[creation(), creation("b")]))
    assert [code for code, _ in results(answer)] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED] * 2
    message = results(answer)[0][1]
    assert message.startswith("Request Request(") and message.endswith(") is not authorized.")
    assert f"session=Session({ALICE},/127.0.0.1)" in message
    assert len(broker.security.acls) == 1


async def test_cluster_alter_lets_a_principal_create(broker_factory):
    broker = broker_factory(**AUTHORIZER_ON)
    allow(broker, AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster")
    answer = await call_as(broker, 3, CreateAclsRequest(creations=[creation()]))
    assert results(answer) == [(ErrorCode.NONE, None)] and len(broker.security.acls) == 2


async def test_invalid_creations_answer_invalid_request_and_the_others_are_created(broker_factory):
    broker = broker_factory(**AUTHORIZER_ON)
    request = CreateAclsRequest(creations=[
        creation("ok"),
        creation("other", resource_type=ResourceType.CLUSTER),
        creation(""),
        creation(resource_type=99),
        creation(operation=99),
        creation(permission=99),
        creation(pattern=99),
        creation(principal="bob"),
        creation("cluster-ok", resource_type=ResourceType.CLUSTER),
    ])
    request.creations[-1].resource_name = "kafka-cluster"
    answer = await call(broker, 3, request)
    invalid = ErrorCode.INVALID_REQUEST
    assert results(answer) == [
        (ErrorCode.NONE, None),
        (invalid, "The only valid name for the CLUSTER resource is kafka-cluster"),
        (invalid, "Invalid empty resource name"),
        (invalid, "Invalid resourceType UNKNOWN"),
        (invalid, "Invalid operation UNKNOWN"),
        (invalid, "Invalid permissionType UNKNOWN"),
        (invalid, "Invalid patternType UNKNOWN"),
        (invalid, "Could not parse principal from `bob` (no colon is present separating the principal type from the "
                  "principal name)"),
        (ErrorCode.NONE, None),
    ]
    assert [b.pattern.name for b in broker.security.acls.bindings()] == ["ok", "kafka-cluster"]


@pytest.mark.parametrize("field, value", [("resource_type", ResourceType.ANY), ("pattern", PatternType.ANY),
                                          ("pattern", PatternType.MATCH), ("operation", AclOperation.ANY),
                                          ("permission", AclPermissionType.ANY)])
async def test_a_filter_only_value_fails_the_whole_request(broker_factory, field, value):
    broker = broker_factory(**AUTHORIZER_ON)
    answer = await call(broker, 3, CreateAclsRequest(creations=[creation("ok"), creation(**{field: value})]))
    assert results(answer) == [(ErrorCode.UNKNOWN_SERVER_ERROR, None)] * 2
    assert len(broker.security.acls) == 0


@pytest.mark.parametrize("field", ["resource_type", "pattern", "operation", "permission"])
async def test_the_unknown_code_0_closes_the_connection(broker_factory, field):
    broker = broker_factory(**AUTHORIZER_ON)
    with pytest.raises(CloseConnection, match="CreatableAcls contain UNKNOWN elements"):
        await call(broker, 1, CreateAclsRequest(creations=[creation("ok"), creation(**{field: 0})]))
    assert len(broker.security.acls) == 0


async def test_creating_an_existing_binding_succeeds_once(broker_factory):
    broker = broker_factory(**AUTHORIZER_ON)
    answer = await call(broker, 2, CreateAclsRequest(creations=[creation(), creation()]))
    assert results(answer) == [(ErrorCode.NONE, None)] * 2
    answer = await call(broker, 2, CreateAclsRequest(creations=[creation()]))
    assert results(answer) == [(ErrorCode.NONE, None)] and len(broker.security.acls) == 1


async def test_a_failed_write_answers_unknown_server_error_and_creates_nothing(broker_factory, monkeypatch, caplog):
    broker = broker_factory(**AUTHORIZER_ON)

    def failing_write(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store_module, "write_atomically", failing_write)
    answer = await call(broker, 3, CreateAclsRequest(creations=[creation(), creation(principal="bob")]))
    assert [code for code, _ in results(answer)] == [ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.INVALID_REQUEST]
    assert results(answer)[0][1] is None and len(broker.security.acls) == 0
    assert [r.levelname for r in caplog.records if "could not be written" in r.getMessage()] == ["ERROR"]
