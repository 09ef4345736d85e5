"""What CreateAcls, DescribeAcls and DeleteAcls share (not a handler module): the wire form of bindings and filters,
the refusal of the code 0 (UNKNOWN) that Kafka's request parser rejects, and the cluster operation checked first, as
Kafka's AclApis does (ALTER to change ACLs, DESCRIBE to list them). Whether an authorizer is configured is checked
next by each handler, Kafka's SECURITY_DISABLED message differing between them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol.error_codes import ErrorCode
from ..security.acls.bindings import (AccessControlEntry, AccessControlEntryFilter, AclBinding, AclBindingFilter,
                                      ResourcePattern, ResourcePatternFilter)
from ..security.acls.types import CLUSTER_NAME, AclOperation, ResourceType
from . import CloseConnection

if TYPE_CHECKING:
    from . import RequestContext

UNKNOWN_CODE = 0  # every ACL enum's UNKNOWN: Kafka's request classes refuse it when parsing (connection closed)


def refuse_unknown_codes(ctx: RequestContext, items, fields: tuple[str, ...], what: str) -> None:
    """CloseConnection when an item carries the code 0 in one of `fields`, as Kafka's parser refuses such a request
    (IllegalArgumentException "<what> contain unknown elements") and the connection is closed."""
    for item in items:
        if any(getattr(item, field) == UNKNOWN_CODE for field in fields):
            raise CloseConnection(f"{what} contain UNKNOWN elements (code 0) in a request of API key "
                                  f"{ctx.header.request_api_key} v{ctx.api_version} from {ctx.peer}")


def cluster_refusal(ctx: RequestContext, operation: AclOperation) -> tuple[int, str] | None:
    """(error code, message) when the request may not go on: CLUSTER_AUTHORIZATION_FAILED without `operation` on the
    cluster (checked first, as Kafka's AclApis does), else None. SECURITY_DISABLED is the caller's, its message
    differing per API."""
    if ctx.authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME):
        return None
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, f"Request {describe_request(ctx)} is not authorized."


def describe_request(ctx: RequestContext) -> str:
    """The request in the shape of Kafka's RequestChannel.Request.toString, which its ClusterAuthorizationException
    message quotes."""
    session = ctx.session
    return (f"Request(processor=0, connectionId={ctx.listener_host}:{ctx.listener_port}-{ctx.peer}-0, "
            f"session=Session({session.principal},/{session.client_host}), "
            f"listenerName=ListenerName({session.listener_name}), securityProtocol={session.security_protocol}, "
            f"buffer=null, envelope=None)")


def binding_of(creation) -> AclBinding:
    """The binding a CreateAcls creation asks for (ValueError for a filter-only value: ANY, MATCH); a code Kafka
    does not define becomes UNKNOWN, which validation refuses."""
    return AclBinding(
        ResourcePattern(creation.resource_type, creation.resource_name, creation.resource_pattern_type),
        AccessControlEntry(creation.principal, creation.host, creation.operation, creation.permission_type))


def filter_of(wire) -> AclBindingFilter:
    """The filter of a DescribeAcls request or a DeleteAcls filter (v0 has no pattern type: LITERAL)."""
    return AclBindingFilter(
        ResourcePatternFilter(wire.resource_type_filter, wire.resource_name_filter, wire.pattern_type_filter),
        AccessControlEntryFilter(wire.principal_filter, wire.host_filter, wire.operation, wire.permission_type))


FILTER_FIELDS = ("resource_type_filter", "pattern_type_filter", "operation", "permission_type")
