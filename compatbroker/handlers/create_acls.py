"""CreateAcls (API key 30), versions 0-3: add ACL bindings (v0 has no pattern type: LITERAL).

Behaviour, as Kafka's broker (AclApis) and controller (AclControlManager) answer:
- A creation carrying the code 0 (UNKNOWN) as resource type, pattern type, operation or permission type makes the
  request unparsable for Kafka: the connection is closed (one WARNING line).
- Without ALTER on the cluster every creation answers CLUSTER_AUTHORIZATION_FAILED ("Request ... is not
  authorized."); then, with no authorizer configured, SECURITY_DISABLED "No Authorizer is configured.".
- A creation with a filter-only value (resource type ANY, pattern type ANY or MATCH, operation or permission ANY)
  cannot be a binding: as Kafka's request handling fails, every creation answers UNKNOWN_SERVER_ERROR without a
  message, and nothing is created (one INFO line says why).
- Each creation is then checked on its own, with Kafka's INVALID_REQUEST messages (`validate_new_binding`): a
  CLUSTER resource not named kafka-cluster, an empty name, an unknown code, a principal without `Type:`. The others
  are stored together, in one write of the ACL file; a binding that exists already succeeds without change.
- When the ACL file cannot be written, the valid creations answer UNKNOWN_SERVER_ERROR (one ERROR line) and none
  is stored.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import CreateAclsResponse
from ..security.acls.bindings import InvalidAclError, validate_new_binding
from ..security.acls.types import AclOperation
from .acl_requests import binding_of, cluster_refusal, refuse_unknown_codes

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 30
MIN_VERSION = 0
MAX_VERSION = 3

log = logging.getLogger(__name__)

_CODE_FIELDS = ("resource_type", "resource_pattern_type", "operation", "permission_type")


async def handle(ctx: RequestContext, request) -> CreateAclsResponse:
    creations = request.creations
    refuse_unknown_codes(ctx, creations, _CODE_FIELDS, "CreatableAcls")
    refusal = cluster_refusal(ctx, AclOperation.ALTER)
    if refusal is not None:
        return _every(creations, *refusal)
    if ctx.broker.security.authorizer is None:
        return _every(creations, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    try:
        bindings = [binding_of(creation) for creation in creations]
    except ValueError as exc:
        log.info("CreateAcls from %s refused as a whole: %s", ctx.peer, exc)
        return _every(creations, ErrorCode.UNKNOWN_SERVER_ERROR, None)
    return CreateAclsResponse(throttle_time_ms=0, results=[
        CreateAclsResponse.AclCreationResult(error_code=code, error_message=message)
        for code, message in _create(ctx, bindings)])


def _create(ctx: RequestContext, bindings: list) -> list[tuple[int, str | None]]:
    """Store the valid bindings in one write; (error code, message) per binding."""
    refusals = [_invalidity(binding) for binding in bindings]  # None: valid
    valid = [binding for binding, refusal in zip(bindings, refusals) if refusal is None]
    if len(valid) < len(bindings):
        log.info("CreateAcls from %s: %d of %d creation(s) invalid, the first: %s", ctx.peer,
                 len(bindings) - len(valid), len(bindings), next(r[1] for r in refusals if r is not None))
    try:
        added = ctx.broker.security.acls.add(valid)
    except OSError as exc:
        log.error("CreateAcls from %s: the ACL file could not be written, no ACL created: %s", ctx.peer, exc)
        return [refusal or (ErrorCode.UNKNOWN_SERVER_ERROR, None) for refusal in refusals]
    if added:
        log.info("ACLs created by %s: %s", ctx.session.principal, "; ".join(map(str, added)))
    return [refusal or (ErrorCode.NONE, None) for refusal in refusals]


def _invalidity(binding) -> tuple[int, str] | None:
    try:
        validate_new_binding(binding)
    except InvalidAclError as exc:
        return ErrorCode.INVALID_REQUEST, str(exc)
    return None


def _every(creations, code: int, message: str | None) -> CreateAclsResponse:
    return CreateAclsResponse(throttle_time_ms=0, results=[
        CreateAclsResponse.AclCreationResult(error_code=code, error_message=message) for _ in creations])
