"""DescribeGroups (API key 15), versions 0-6: state, protocol and members of classic groups.

A KIP-848 consumer group or a share group is not described here, as in Kafka 4.2 (admin clients use
ConsumerGroupDescribe / ShareGroupDescribe): it is answered like an unknown group, Dead, and from v6 with
GROUP_ID_NOT_FOUND and "Group X is not a classic group.".

Per group, as Kafka's: the state's name; the protocol type ("" for a group that only has offsets); in a Stable
group the chosen protocol and each member's metadata for it, in other states neither; each member's id, client
id, client host ("/address") and current assignment, and from v4 its `group_instance_id`.
A group the coordinator does not know is described as Dead with no members; v6 adds GROUP_ID_NOT_FOUND and an
error message for it (KIP-1043), earlier versions no error. While loading every group is answered
COORDINATOR_LOAD_IN_PROGRESS; a group another node coordinates NOT_COORDINATOR.
Authorization, as Kafka's: a group the principal may not DESCRIBE answers GROUP_AUTHORIZATION_FAILED with an
empty state, protocol and member list (the coordinator is not asked about it).
Authorized operations (v3+, when asked, for groups described without error): the operations the principal may do
on the group (`RequestContext.authorized_operations`; without an authorizer every operation Kafka supports on
groups: READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS = 3400); otherwise INT32_MIN.
Deviation: denied groups keep their place in the request's order (Kafka answers them first).
v5 is the first flexible version.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..coordinator import coordinator_of
from ..coordinator.group import GROUP_TYPE, GroupState
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import DescribeGroupsResponse
from ..security.acls.types import AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 15
MIN_VERSION = 0
MAX_VERSION = 6

AUTHORIZED_OPERATIONS_OMITTED = -2**31  # the schema's default: not asked for

Described = DescribeGroupsResponse.DescribedGroup
DescribedMember = DescribeGroupsResponse.DescribedGroupMember


async def handle(ctx: RequestContext, request) -> DescribeGroupsResponse:
    version = ctx.api_version
    coordinator = coordinator_of(ctx.broker)
    described = []
    for group_id in request.groups:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described.append(Described(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id))
            continue
        error = coordinator.error_for(group_id)
        if error is not ErrorCode.NONE:
            described.append(Described(error_code=error, group_id=group_id))
            continue
        entry = _describe(group_id, coordinator.group(group_id), version)
        if version >= 3 and request.include_authorized_operations and entry.error_code == ErrorCode.NONE:
            entry.authorized_operations = ctx.authorized_operations(ResourceType.GROUP, group_id)
        described.append(entry)
    return DescribeGroupsResponse(groups=described)


def _describe(group_id: str, group, version: int):
    if group is None or str(group.state) == GroupState.DEAD:
        return _dead(group_id, version, f"Group {group_id} not found.")
    if group.group_type != GROUP_TYPE:
        return _dead(group_id, version, f"Group {group_id} is not a classic group.")
    stable = group.state is GroupState.STABLE
    members = [DescribedMember(member_id=member.member_id,
                               group_instance_id=member.group_instance_id if version >= 4 else None,
                               client_id=member.client_id, client_host=member.client_host,
                               member_metadata=member.metadata(group.protocol_name) if stable else b"",
                               member_assignment=member.assignment)
               for member in group.members.values()]
    return Described(group_id=group_id, group_state=group.state.value, protocol_type=group.protocol_type or "",
                     protocol_data=group.protocol_name if stable else "", members=members)


def _dead(group_id: str, version: int, message: str):
    """Kafka's answer for a group it cannot describe: Dead, from v6 with GROUP_ID_NOT_FOUND and why."""
    if version >= 6:
        return Described(error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=message, group_id=group_id,
                         group_state=GroupState.DEAD.value)
    return Described(group_id=group_id, group_state=GroupState.DEAD.value)
