"""CreateAcls, DescribeAcls and DeleteAcls through a real server over SASL PLAIN: the authenticated principal is the
one authorized (a super user administers, another user is refused the cluster operation), ACLs outlive a restart,
and a request Kafka cannot parse (an ACL code 0) closes the connection with one log line."""
from __future__ import annotations

import logging

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest
from compatbroker.security.acls import AclOperation, AclPermissionType, PatternType, ResourceType
from compatbroker.security.settings import STANDARD_AUTHORIZER

from tests.async_tests import async_test
from tests.server.helpers import RawClient
from tests.server.secure_helpers import plain_sasl_settings, sasl_plain_login, secure_server

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
SETTINGS = plain_sasl_settings(**{"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:alice"})
ORDERS_FOR_BOB = CreateAclsRequest.AclCreation(
    resource_type=ResourceType.TOPIC, resource_name="orders-", resource_pattern_type=PatternType.PREFIXED,
    principal="User:bob", host="*", operation=AclOperation.READ, permission_type=AclPermissionType.ALLOW)
EVERYTHING = DescribeAclsRequest(resource_type_filter=ResourceType.ANY, resource_name_filter=None,
                                 pattern_type_filter=PatternType.ANY, principal_filter=None, host_filter=None,
                                 operation=AclOperation.ANY, permission_type=AclPermissionType.ANY)


async def _login(port: int, user: str) -> RawClient:
    client = await RawClient.connect(port)
    assert (await sasl_plain_login(client, user, f"{user}-secret")).error_code == 0
    return client


async def _ask(client: RawClient, api_key: int, request, version: int = 3):
    await client.send(request, version=version, correlation_id=7)
    return (await client.read_response(api_key, version))[1]


def _described(response) -> list[tuple]:
    return [(r.resource_name, r.pattern_type, [(a.principal, a.operation) for a in r.acls])
            for r in response.resources]


@async_test
async def test_a_super_user_administers_acls_and_another_user_is_refused(tmp_path):
    async with secure_server(tmp_path, SETTINGS) as (_, ports):
        alice = await _login(ports["SASL_PLAINTEXT"], "alice")
        created = await _ask(alice, CREATE_ACLS, CreateAclsRequest(creations=[ORDERS_FOR_BOB]))
        assert [(r.error_code, r.error_message) for r in created.results] == [(0, None)]
        bob = await _login(ports["SASL_PLAINTEXT"], "bob")
        refused = await _ask(bob, DESCRIBE_ACLS, EVERYTHING)
        assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert "session=Session(User:bob,/127.0.0.1)" in refused.error_message
        refused = await _ask(bob, DELETE_ACLS, DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(
            resource_type_filter=ResourceType.ANY, pattern_type_filter=PatternType.ANY, resource_name_filter=None,
            principal_filter=None, host_filter=None, operation=AclOperation.ANY,
            permission_type=AclPermissionType.ANY)]))
        assert [r.error_code for r in refused.filter_results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
        await alice.close()
        await bob.close()
    async with secure_server(tmp_path, SETTINGS) as (_, ports):  # the same data directory: a restart
        alice = await _login(ports["SASL_PLAINTEXT"], "alice")
        described = await _ask(alice, DESCRIBE_ACLS, EVERYTHING)
        assert (described.error_code, _described(described)) == (
            0, [("orders-", PatternType.PREFIXED, [("User:bob", AclOperation.READ)])])
        await alice.close()


@async_test
async def test_an_acl_code_0_closes_the_connection_with_one_log_line(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    async with secure_server(tmp_path, SETTINGS) as (_, ports):
        alice = await _login(ports["SASL_PLAINTEXT"], "alice")
        unknown = CreateAclsRequest.AclCreation(resource_type=0, resource_name="x", resource_pattern_type=3,
                                                principal="User:bob", host="*", operation=3, permission_type=3)
        await alice.send(CreateAclsRequest(creations=[unknown]), version=1, correlation_id=9)
        assert await alice.closed_by_server()
        await alice.close()
    lines = [r for r in caplog.records if "contain UNKNOWN elements" in r.getMessage()]
    assert [r.levelname for r in lines] == ["WARNING"]
