"""DescribeAcls (API key 29), versions 0-3: the ACL bindings matching one filter, grouped by resource pattern.

Behaviour, as Kafka's broker (AclApis) answers:
- A filter carrying the code 0 (UNKNOWN) as resource type, pattern type, operation or permission type makes the
  request unparsable for Kafka: the connection is closed (one WARNING line).
- Without DESCRIBE on the cluster the answer is CLUSTER_AUTHORIZATION_FAILED ("Request ... is not authorized.");
  then, with no authorizer configured, SECURITY_DISABLED "No Authorizer is configured on the broker".
- Otherwise every binding the filter matches (`AclBindingFilter.matches`: null name, principal or host match any;
  ANY any type, operation or permission; pattern type MATCH the literal, wildcard and prefixed bindings that apply to
  the named resource), one entry per resource pattern in order of first creation. v0 has no pattern type: its
  filter is LITERAL, so it sees literal bindings only. A filter with a code Kafka does not define matches nothing.

Deviation: Kafka lists resources, and bindings within one, in a hash map's order; here in order of creation.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import DescribeAclsResponse
from ..security.acls.types import AclOperation
from .acl_requests import FILTER_FIELDS, cluster_refusal, filter_of, refuse_unknown_codes

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 29
MIN_VERSION = 0
MAX_VERSION = 3


async def handle(ctx: RequestContext, request) -> DescribeAclsResponse:
    refuse_unknown_codes(ctx, (request,), FILTER_FIELDS, "DescribeAclsRequest")
    refusal = cluster_refusal(ctx, AclOperation.DESCRIBE)
    if refusal is not None:
        return _error(*refusal)
    security = ctx.broker.security
    if security.authorizer is None:
        return _error(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker")
    by_pattern: dict = {}
    for binding in security.acls.acls(filter_of(request)):
        entry = binding.entry
        by_pattern.setdefault(binding.pattern, []).append(DescribeAclsResponse.AclDescription(
            principal=entry.principal, host=entry.host, operation=entry.operation,
            permission_type=entry.permission_type))
    return DescribeAclsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, resources=[
        DescribeAclsResponse.DescribeAclsResource(resource_type=pattern.resource_type, resource_name=pattern.name,
                                                  pattern_type=pattern.pattern_type, acls=descriptions)
        for pattern, descriptions in by_pattern.items()])


def _error(code: int, message: str) -> DescribeAclsResponse:
    return DescribeAclsResponse(throttle_time_ms=0, error_code=code, error_message=message, resources=[])
