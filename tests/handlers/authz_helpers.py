"""Authorization in handler tests: a broker with Kafka's StandardAuthorizer on, ACLs added to its store, and
requests sent as a given principal from a given host.

    broker = broker_factory(**AUTHORIZER_ON)
    allow(broker, AclOperation.READ, ResourceType.TOPIC, "t")            # User:alice from any host
    answer = await call_as(broker, 11, FetchRequest(...))               # as User:alice from 127.0.0.1

With no ACL matching a resource Kafka denies (`allow.everyone.if.no.acl.found` is false by default). The anonymous
principal of the shared helpers (`helpers.call`, the `txn_helpers` steps) is a super user here, so set-up steps run
as they do without an authorizer; the principal under test is ALICE.
"""
from __future__ import annotations

from compatbroker.handlers import HANDLERS, RequestContext
from compatbroker.protocol import RequestHeader
from compatbroker.security.acls import (AccessControlEntry, AclBinding, AclOperation, AclPermissionType, PatternType,
                                        ResourcePattern, ResourceType)
from compatbroker.security.principal import parse_principal
from compatbroker.security.session import Session
from compatbroker.security.settings import STANDARD_AUTHORIZER

from .helpers import CORRELATION_ID, Answer, as_received, on_the_wire

ALICE = "User:alice"
CLIENT_HOST = "127.0.0.1"
AUTHORIZER_ON = {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS"}
INT32_MIN = -2**31


def binding(operation: AclOperation, resource_type: ResourceType, name: str, *, principal: str = ALICE,
            host: str = "*", pattern: PatternType = PatternType.LITERAL,
            permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern),
                      AccessControlEntry(principal, host, operation, permission))


def allow(broker, operation: AclOperation, resource_type: ResourceType, name: str, **options) -> None:
    """Add an ALLOW ACL (for ALICE from any host unless told otherwise) to the broker's cluster."""
    broker.security.acls.add([binding(operation, resource_type, name, **options)])


def deny(broker, operation: AclOperation, resource_type: ResourceType, name: str, **options) -> None:
    broker.security.acls.add([binding(operation, resource_type, name, permission=AclPermissionType.DENY,
                                      **options)])


def context_as(broker, api_key: int, version: int, *, principal: str = ALICE, host: str = CLIENT_HOST,
               client_id: str = "handler-tests") -> RequestContext:
    header = RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=CORRELATION_ID,
                           client_id=client_id)
    return RequestContext(broker, header, peer=f"{host}:50000", listener_host="localhost", listener_port=9092,
                          session=Session(principal=parse_principal(principal), client_host=host))


def start_as(broker, version: int, request, *, principal: str = ALICE, host: str = CLIENT_HOST,
             client_id: str = "handler-tests"):
    """The handler coroutine for the request sent by `principal` from `host`, not yet awaited."""
    api_key = type(request).API_KEY
    body = as_received(api_key, version, request, client_id)
    ctx = context_as(broker, api_key, version, principal=principal, host=host, client_id=client_id)
    return HANDLERS[api_key].handle(ctx, body)


async def call_as(broker, version: int, request, *, principal: str = ALICE, host: str = CLIENT_HOST,
                  client_id: str = "handler-tests") -> Answer | None:
    """helpers.call, as `principal` from `host`: through the codec both ways."""
    raw = await start_as(broker, version, request, principal=principal, host=host, client_id=client_id)
    if raw is None:
        return None
    return Answer(raw, on_the_wire(type(request).API_KEY, version, raw))
