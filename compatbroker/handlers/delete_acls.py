"""DeleteAcls (API key 31), versions 0-3: remove the ACL bindings matching any of the filters.

Behaviour, as Kafka's broker (AclApis) and controller (AclControlManager) answer:
- A filter carrying the code 0 (UNKNOWN) as resource type, pattern type, operation or permission type makes the
  request unparsable for Kafka: the connection is closed (one WARNING line).
- Without ALTER on the cluster every filter answers CLUSTER_AUTHORIZATION_FAILED ("Request ... is not
  authorized."); then, with no authorizer configured, SECURITY_DISABLED "No Authorizer is configured.".
- A filter with a code Kafka does not define answers INVALID_REQUEST ("Unknown patternFilter." for the resource
  type or pattern type, "Unknown entryFilter." for the operation or permission type).
- Each other filter answers the bindings it matched (`AclBindingFilter.matches`, as DescribeAcls), each with error
  0; a binding two filters match is listed by both. Every matched binding is removed, in one write of the ACL
  file. v0 has no pattern type: its filters are LITERAL.
- When the ACL file cannot be written, those filters answer UNKNOWN_SERVER_ERROR (one ERROR line) and nothing is
  removed.

Deviation: Kafka lists a filter's bindings in a hash map's order; here in order of creation.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import DeleteAclsResponse
from ..security.acls.bindings import InvalidAclError, validate_filter
from ..security.acls.types import AclOperation
from .acl_requests import FILTER_FIELDS, cluster_refusal, filter_of, refuse_unknown_codes

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 31
MIN_VERSION = 0
MAX_VERSION = 3

log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request) -> DeleteAclsResponse:
    refuse_unknown_codes(ctx, request.filters, FILTER_FIELDS, "Filters")
    refusal = cluster_refusal(ctx, AclOperation.ALTER)
    if refusal is not None:
        return _every(request.filters, *refusal)
    if ctx.broker.security.authorizer is None:
        return _every(request.filters, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    filters = [filter_of(wire) for wire in request.filters]
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=_delete(ctx, filters))


def _delete(ctx: RequestContext, filters: list) -> list:
    """Remove what the valid filters match, in one write; a filter result per filter."""
    refusals = [_invalidity(acl_filter) for acl_filter in filters]  # None: valid
    try:
        matched = iter(ctx.broker.security.acls.remove(
            [acl_filter for acl_filter, refusal in zip(filters, refusals) if refusal is None]))
    except OSError as exc:
        log.error("DeleteAcls from %s: the ACL file could not be written, no ACL deleted: %s", ctx.peer, exc)
        return [_failed(*(refusal or (ErrorCode.UNKNOWN_SERVER_ERROR, None))) for refusal in refusals]
    results = []
    deleted: dict = {}  # every binding removed, once, in order
    for refusal in refusals:
        if refusal is not None:
            results.append(_failed(*refusal))
            continue
        bindings = next(matched)
        deleted.update(dict.fromkeys(bindings))
        results.append(DeleteAclsResponse.DeleteAclsFilterResult(
            error_code=ErrorCode.NONE, error_message=None, matching_acls=[_matching(binding) for binding in bindings]))
    if deleted:
        log.info("ACLs deleted by %s: %s", ctx.session.principal, "; ".join(map(str, deleted)))
    return results


def _invalidity(acl_filter) -> tuple[int, str] | None:
    try:
        validate_filter(acl_filter)
    except InvalidAclError as exc:
        return ErrorCode.INVALID_REQUEST, str(exc)
    return None


def _matching(binding) -> DeleteAclsResponse.DeleteAclsMatchingAcl:
    pattern, entry = binding.pattern, binding.entry
    return DeleteAclsResponse.DeleteAclsMatchingAcl(
        error_code=ErrorCode.NONE, error_message=None, resource_type=pattern.resource_type,
        resource_name=pattern.name, pattern_type=pattern.pattern_type, principal=entry.principal, host=entry.host,
        operation=entry.operation, permission_type=entry.permission_type)


def _failed(code: int, message: str | None) -> DeleteAclsResponse.DeleteAclsFilterResult:
    return DeleteAclsResponse.DeleteAclsFilterResult(error_code=code, error_message=message, matching_acls=[])


def _every(filters, code: int, message: str) -> DeleteAclsResponse:
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=[_failed(code, message) for _ in filters])
