"""DeleteGroups (API key 42), versions 0-2: delete Empty groups with their committed offsets.

Per group, as Kafka's: GROUP_AUTHORIZATION_FAILED for a group the principal may not DELETE (it is left alone),
then GROUP_ID_NOT_FOUND for a group the coordinator does not know, NON_EMPTY_GROUP for one with
members; otherwise the group is gone at once and its offsets and metadata get tombstones in
`__consumer_offsets` (the answer waits for them; a failed write is answered with Kafka's mapping, e.g.
NOT_COORDINATOR). While the coordinator is loading every group is answered COORDINATOR_LOAD_IN_PROGRESS; a group
another node coordinates NOT_COORDINATOR.
v2 is the first flexible version.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..coordinator import coordinator_of
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import DeleteGroupsResponse
from ..security.acls.types import AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 42
MIN_VERSION = 0
MAX_VERSION = 2

Result = DeleteGroupsResponse.DeletableGroupResult


async def handle(ctx: RequestContext, request) -> DeleteGroupsResponse:
    coordinator = coordinator_of(ctx.broker)
    deletable = ctx.filter_authorized(AclOperation.DELETE, ResourceType.GROUP, request.groups_names)
    results = []
    for group_id in request.groups_names:
        error = coordinator.error_for(group_id) if group_id in deletable else ErrorCode.GROUP_AUTHORIZATION_FAILED
        if error is ErrorCode.NONE:
            error = await coordinator.delete_group(group_id)
        results.append(Result(group_id=group_id, error_code=error))
    return DeleteGroupsResponse(results=results)
