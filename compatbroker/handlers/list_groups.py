"""ListGroups (API key 16), versions 0-5: the groups this node coordinates (a single node coordinates every group;
in a cluster, clients ask every node), of every type, with their protocol type ("" for a group that only has
committed offsets, "consumer" for a KIP-848 consumer group, "share" for a share group).

v3 is the first flexible version. v4 adds each group's state and a state filter (KIP-518), v5 each group's type
("classic", "consumer" or "share") and a type filter (KIP-848); filters are case-insensitive, an empty filter
passes every group, and each type's own state names are matched (consumer groups: Empty, Assigning,
Reconciling, Stable; share groups: Empty, Stable). Versions before 5 list groups of every type too, as Kafka's.
While the coordinator is loading (any partition of `__consumer_offsets` this node leads) the answer is
COORDINATOR_LOAD_IN_PROGRESS.
Authorization, as Kafka's: with DESCRIBE on the cluster every group is listed; otherwise only the groups the
principal may DESCRIBE (neither check logs a denial: a filtered list is no failure).
Groups are listed by id (Kafka's order is that of a hash map).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..coordinator import coordinator_of
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import ListGroupsResponse
from ..security.acls.types import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 16
MIN_VERSION = 0
MAX_VERSION = 5

Listed = ListGroupsResponse.ListedGroup


async def handle(ctx: RequestContext, request) -> ListGroupsResponse:
    version = ctx.api_version
    coordinator = coordinator_of(ctx.broker)
    if not coordinator.loaded:
        return ListGroupsResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    states = request.states_filter if version >= 4 else []
    types = request.types_filter if version >= 5 else []
    groups = sorted(coordinator.list_groups(states, types), key=lambda group: group.group_id)
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=False):
        visible = ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.GROUP,
                                        [group.group_id for group in groups], log_if_denied=False)
        groups = [group for group in groups if group.group_id in visible]
    return ListGroupsResponse(groups=[
        Listed(group_id=group.group_id, protocol_type=group.protocol_type or "",
               group_state=str(group.state) if version >= 4 else "",
               group_type=group.group_type if version >= 5 else "")
        for group in groups])
