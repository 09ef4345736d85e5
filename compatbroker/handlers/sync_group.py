"""SyncGroup (API key 14), versions 0-5: each member fetches its assignment for the generation it joined; the
leader's request carries the assignment of every member.

A follower's request stays parked until the leader's assignment is stored; in a Stable group (the leader synced
first) it is answered at once with the member's assignment. See `coordinator/membership.py`.
A classic-protocol member of a KIP-848 consumer group gets its current assignment from the server at once
(`coordinator/consumer_group/classic_members.py`; REBALANCE_IN_PROGRESS when the group epoch moved past its
generation); an empty consumer group or a share group answers UNKNOWN_MEMBER_ID.

Version differences: v3 adds `group_instance_id`; v4 is the first flexible version; v5 adds the protocol type and
name to both request and response (KIP-559): both must be present in a v5 request (else
INCONSISTENT_GROUP_PROTOCOL, as Kafka checks first) and must match the group's.
Authorization, as Kafka's, right after that protocol check: READ on the group, else GROUP_AUTHORIZATION_FAILED
and the group is not touched.
Errors: INVALID_GROUP_ID for an empty group id, COORDINATOR_LOAD_IN_PROGRESS while loading, NOT_COORDINATOR for a
group another node coordinates (also for a parked request when the group moves away), and from the group:
UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, INCONSISTENT_GROUP_PROTOCOL.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ..coordinator import coordinator_of
from ..coordinator.consumer_group import classic_members
from ..coordinator.group import SyncResult
from ..coordinator.membership import SyncArgs
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import SyncGroupResponse
from ..security.acls.types import AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 14
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request) -> SyncGroupResponse:
    version = ctx.api_version
    if version >= 5 and (request.protocol_type is None or request.protocol_name is None):
        return response(version, SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return response(version, SyncResult(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    if not request.group_id:
        return response(version, SyncResult(ErrorCode.INVALID_GROUP_ID))
    coordinator = coordinator_of(ctx.broker)
    error = coordinator.error_for(request.group_id)
    if error is not ErrorCode.NONE:
        return response(version, SyncResult(error))
    args = SyncArgs(group_id=request.group_id, generation_id=request.generation_id, member_id=request.member_id,
                    group_instance_id=request.group_instance_id, protocol_type=request.protocol_type,
                    protocol_name=request.protocol_name,
                    assignments={a.member_id: bytes(a.assignment) for a in request.assignments})
    result = await asyncio.shield(classic_members.sync_group(coordinator, args))
    return response(version, result)


def response(version: int, result: SyncResult) -> SyncGroupResponse:
    with_protocol = version >= 5
    return SyncGroupResponse(error_code=result.error,
                             protocol_type=result.protocol_type if with_protocol else None,
                             protocol_name=result.protocol_name if with_protocol else None,
                             assignment=result.assignment)
