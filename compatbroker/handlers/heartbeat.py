"""Heartbeat (API key 12), versions 0-4: a member shows it is alive and learns whether a rebalance runs.

Authorization first, as Kafka's: READ on the group, else GROUP_AUTHORIZATION_FAILED (the session is not renewed).
Answers, as Kafka's: NONE in CompletingRebalance and Stable (renewing the member's session),
REBALANCE_IN_PROGRESS in PreparingRebalance (renewing it too: the member should rejoin), UNKNOWN_MEMBER_ID for a
member or group the coordinator does not know, FENCED_INSTANCE_ID for a replaced static member (v3+ sends
`group_instance_id`), ILLEGAL_GENERATION for another generation, INVALID_GROUP_ID for an empty group id. While
the coordinator is loading the answer is NONE, as Kafka's, so that members do not drop out of their group; for a
group another node coordinates NOT_COORDINATOR.
v4 is the first flexible version.
A classic-protocol member of a KIP-848 consumer group is answered by that group
(`coordinator/consumer_group/classic_members.py`): REBALANCE_IN_PROGRESS when it must rejoin to reconcile, and
ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID (also for a consumer-protocol member), FENCED_INSTANCE_ID as above; a share
group answers UNKNOWN_MEMBER_ID.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..coordinator import coordinator_of
from ..coordinator.consumer_group import classic_members
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import HeartbeatResponse
from ..security.acls.types import AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request) -> HeartbeatResponse:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return HeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not request.group_id:
        return HeartbeatResponse(error_code=ErrorCode.INVALID_GROUP_ID)
    coordinator = coordinator_of(ctx.broker)
    error = coordinator.error_for(request.group_id)
    if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
        return HeartbeatResponse(error_code=ErrorCode.NONE)
    if error is not ErrorCode.NONE:
        return HeartbeatResponse(error_code=error)
    error = classic_members.heartbeat(coordinator, request.group_id, request.member_id, request.group_instance_id,
                                      request.generation_id)
    return HeartbeatResponse(error_code=error)
