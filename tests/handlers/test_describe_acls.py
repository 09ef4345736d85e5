"""DescribeAcls: SECURITY_DISABLED without an authorizer, cluster DESCRIBE first, the filter's matching rules, and
bindings grouped by resource pattern."""
from __future__ import annotations

import pytest

from compatbroker.handlers import CloseConnection, describe_acls
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import DescribeAclsRequest
from compatbroker.security.acls import AclOperation, AclPermissionType, PatternType, ResourceType

from .authz_helpers import AUTHORIZER_ON, allow, call_as, deny
from .helpers import call

ALL_VERSIONS = range(describe_acls.MIN_VERSION, describe_acls.MAX_VERSION + 1)
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
Op = AclOperation


def describe(resource_type=ResourceType.ANY, name=None, pattern=PatternType.ANY, principal=None, host=None,
             operation=Op.ANY, permission=AclPermissionType.ANY) -> DescribeAclsRequest:
    return DescribeAclsRequest(resource_type_filter=resource_type, resource_name_filter=name,
                               pattern_type_filter=pattern, principal_filter=principal, host_filter=host,
                               operation=operation, permission_type=permission)


def listing(answer) -> list[tuple]:
    """(type, name, pattern type, [(principal, host, operation, permission)...]) per resource."""
    return [(r.resource_type, r.resource_name, r.pattern_type,
             [(a.principal, a.host, a.operation, a.permission_type) for a in r.acls]) for r in answer.decoded.resources]


@pytest.fixture
def secured(broker_factory):
    """A broker with an authorizer and a few ACLs (User:alice unless said otherwise)."""
    broker = broker_factory(**AUTHORIZER_ON)
    allow(broker, Op.READ, TOPIC, "orders")
    allow(broker, Op.WRITE, TOPIC, "orders", principal="User:bob", host="10.0.0.1")
    allow(broker, Op.READ, TOPIC, "ord", pattern=PatternType.PREFIXED)
    deny(broker, Op.ALL, TOPIC, "*")
    allow(broker, Op.READ, GROUP, "orders")
    return broker


def test_declares_every_schema_version():
    assert (describe_acls.API_KEY, describe_acls.MIN_VERSION, describe_acls.MAX_VERSION) == (29, 0, 3)


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_without_an_authorizer_the_answer_is_security_disabled(broker, version):
    answer = (await call(broker, version, describe(pattern=PatternType.LITERAL))).decoded
    assert (answer.error_code, answer.error_message) == (ErrorCode.SECURITY_DISABLED,
                                                         "No Authorizer is configured on the broker")
    assert answer.resources == []


async def test_everything_grouped_by_resource_pattern(secured):
    answer = await call(secured, 3, describe())
    assert (answer.decoded.error_code, answer.decoded.error_message) == (0, None)
    assert listing(answer) == [
        (TOPIC, "orders", PatternType.LITERAL, [("User:alice", "*", Op.READ, AclPermissionType.ALLOW),
                                                ("User:bob", "10.0.0.1", Op.WRITE, AclPermissionType.ALLOW)]),
        (TOPIC, "ord", PatternType.PREFIXED, [("User:alice", "*", Op.READ, AclPermissionType.ALLOW)]),
        (TOPIC, "*", PatternType.LITERAL, [("User:alice", "*", Op.ALL, AclPermissionType.DENY)]),
        (GROUP, "orders", PatternType.LITERAL, [("User:alice", "*", Op.READ, AclPermissionType.ALLOW)]),
    ]


@pytest.mark.parametrize("request_filter, expected", [
    (describe(TOPIC, "orders", PatternType.MATCH), [("orders", 3), ("ord", 4), ("*", 3)]),
    (describe(TOPIC, "orders", PatternType.ANY), [("orders", 3)]),
    (describe(TOPIC, "ord", PatternType.PREFIXED), [("ord", 4)]),
    (describe(TOPIC, None, PatternType.LITERAL), [("orders", 3), ("*", 3)]),
    (describe(GROUP), [("orders", 3)]),
    (describe(principal="User:bob"), [("orders", 3)]),
    (describe(host="10.0.0.1"), [("orders", 3)]),
    (describe(operation=Op.ALL), [("*", 3)]),
    (describe(permission=AclPermissionType.DENY), [("*", 3)]),
    (describe(TOPIC, "nothing", PatternType.LITERAL), []),
])
async def test_filters_select_as_kafkas(secured, request_filter, expected):
    answer = await call(secured, 2, request_filter)
    assert [(r.resource_name, r.pattern_type) for r in answer.decoded.resources] == expected


async def test_v0_sees_literal_bindings_only(secured):
    answer = await call(secured, 0, describe(pattern=PatternType.LITERAL))  # v0 cannot carry another
    assert [(r.resource_type, r.resource_name) for r in answer.decoded.resources] == [
        (TOPIC, "orders"), (TOPIC, "*"), (GROUP, "orders")]


async def test_unknown_codes_match_nothing(secured):
    answer = (await call(secured, 1, describe(resource_type=99))).decoded
    assert (answer.error_code, answer.resources) == (0, [])
    answer = (await call(secured, 1, describe(operation=99))).decoded
    assert (answer.error_code, answer.resources) == (0, [])


@pytest.mark.parametrize("field", ["resource_type", "pattern", "operation", "permission"])
async def test_the_unknown_code_0_closes_the_connection(secured, field):
    with pytest.raises(CloseConnection, match="DescribeAclsRequest contain UNKNOWN elements"):
        await call(secured, 1, describe(**{field: 0}))


async def test_without_cluster_describe_the_answer_is_cluster_authorization_failed(secured):
    answer = (await call_as(secured, 3, describe())).decoded
    assert answer.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and answer.resources == []
    assert answer.error_message.startswith("Request Request(") and answer.error_message.endswith("is not authorized.")


@pytest.mark.parametrize("operation", [Op.DESCRIBE, Op.ALTER, Op.ALL])
async def test_cluster_describe_or_an_operation_implying_it_lets_a_principal_describe(secured, operation):
    allow(secured, operation, ResourceType.CLUSTER, "kafka-cluster")
    answer = (await call_as(secured, 3, describe(ResourceType.CLUSTER))).decoded
    assert answer.error_code == 0 and [r.resource_name for r in answer.resources] == ["kafka-cluster"]


async def test_acls_created_through_one_node_are_described_by_another(tmp_path):
    from compatbroker.protocol.messages import CreateAclsRequest

    from .cluster_helpers import serving_cluster

    async with serving_cluster(tmp_path, nodes=2, **AUTHORIZER_ON) as cluster:
        creation = CreateAclsRequest.AclCreation(resource_type=TOPIC, resource_name="t", resource_pattern_type=3,
                                                 principal="User:bob", host="*", operation=Op.READ,
                                                 permission_type=AclPermissionType.ALLOW)
        first, second = sorted(cluster.nodes)
        created = await call(cluster.nodes[first], 3, CreateAclsRequest(creations=[creation]))
        assert [r.error_code for r in created.decoded.results] == [0]
        answer = await call(cluster.nodes[second], 3, describe())
        assert listing(answer) == [(TOPIC, "t", PatternType.LITERAL,
                                    [("User:bob", "*", Op.READ, AclPermissionType.ALLOW)])]
