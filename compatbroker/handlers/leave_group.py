"""LeaveGroup (API key 13), versions 0-5: members leave a classic group, which starts a rebalance for the rest.

Members of a KIP-848 consumer group leave it here too, whichever protocol they speak (an admin tool removing
members); when only classic-protocol members remain the group goes back to the classic protocol
(`coordinator/consumer_group/classic_members.py`). For a share group every member is answered UNKNOWN_MEMBER_ID.

v0-2 name one member (`member_id`) and answer one error code. From v3 a batch of members, each by member id and
`group_instance_id` (KIP-345), with an answer per member; an admin tool may name a static member by its instance
id alone (empty member id). v4 is the first flexible version; v5 adds a reason per member (logged).

Authorization first, as Kafka's: READ on the group, else GROUP_AUTHORIZATION_FAILED at the top (no member
answers) and nobody leaves.
Errors, as Kafka's: per member UNKNOWN_MEMBER_ID (also for every member of a group the coordinator does not know)
and FENCED_INSTANCE_ID; at the top INVALID_GROUP_ID for an empty group id and COORDINATOR_LOAD_IN_PROGRESS while
loading, NOT_COORDINATOR for a group another node coordinates. A v0-2 answer carries the top-level error, else
the member's.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..coordinator import coordinator_of
from ..coordinator.consumer_group import classic_members
from ..coordinator.membership import LeavingMember
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import LeaveGroupResponse
from ..security.acls.types import AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 13
MIN_VERSION = 0
MAX_VERSION = 5

MemberResponse = LeaveGroupResponse.MemberResponse


async def handle(ctx: RequestContext, request) -> LeaveGroupResponse:
    version = ctx.api_version
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return LeaveGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if version >= 3:
        leaving = [LeavingMember(m.member_id, m.group_instance_id, m.reason) for m in request.members]
    else:
        leaving = [LeavingMember(request.member_id)]
    if not request.group_id:
        return LeaveGroupResponse(error_code=ErrorCode.INVALID_GROUP_ID)
    coordinator = coordinator_of(ctx.broker)
    error = coordinator.error_for(request.group_id)
    if error is not ErrorCode.NONE:
        return LeaveGroupResponse(error_code=error)
    error, results = await classic_members.leave_group(coordinator, request.group_id, leaving)
    if version < 3:
        first_failure = next((r.error for r in results if r.error is not ErrorCode.NONE), ErrorCode.NONE)
        return LeaveGroupResponse(error_code=error if error is not ErrorCode.NONE else first_failure)
    return LeaveGroupResponse(error_code=error, members=[
        MemberResponse(member_id=r.member_id, group_instance_id=r.group_instance_id, error_code=r.error)
        for r in results])
