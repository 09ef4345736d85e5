"""JoinGroup (API key 11), versions 0-9: a member enters a classic group or rejoins it for a rebalance.

The request stays parked until the join phase ends (see `coordinator/membership.py`); the leader's answer lists
every member with its metadata for the chosen protocol, the others' an empty list.
A JoinGroup for a KIP-848 consumer group with members is served by that group at once: the member becomes (or
stays) a classic-protocol member of it, with its assignment computed by the server
(`coordinator/consumer_group/classic_members.py`); an empty consumer group gives way to a classic group; a share
group answers INCONSISTENT_GROUP_PROTOCOL.

Version differences, as Kafka's:
- v0 has no rebalance timeout: the session timeout stands in for it.
- From v4 a member without an id is answered MEMBER_ID_REQUIRED with an id to join again with (KIP-394); v0-3
  members are admitted with a new id at once.
- v5 adds `group_instance_id` (static membership, KIP-345) in the request and in the leader's member list.
- v6 is the first flexible version. v7 answers the protocol type, and a missing protocol name as null (v0-6: "").
- v8 adds a free-text reason (logged). v9 adds `skip_assignment`, set for a static leader that rejoins a Stable
  group without a rebalance: it must not compute a new assignment.

Authorization first, as Kafka's: READ on the group, else GROUP_AUTHORIZATION_FAILED (with Kafka's empty error
answer: no member id, generation -1) and the group is not touched.
Then, before the group is looked at: an empty group id (INVALID_GROUP_ID), a session timeout outside
[`group.min.session.timeout.ms`, `group.max.session.timeout.ms`] (INVALID_SESSION_TIMEOUT), a coordinator still
loading (COORDINATOR_LOAD_IN_PROGRESS) or a group another node coordinates (NOT_COORDINATOR).

The member's client host is recorded as Kafka records it: Java's text of the address after a "/".
"""
from __future__ import annotations

import asyncio
import ipaddress
from typing import TYPE_CHECKING

from ..coordinator import coordinator_of
from ..coordinator.consumer_group import classic_members
from ..coordinator.group import JoinResult
from ..coordinator.membership import JoinArgs
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import JoinGroupResponse
from ..security.acls.types import AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 11
MIN_VERSION = 0
MAX_VERSION = 9

Member = JoinGroupResponse.JoinGroupResponseMember


async def handle(ctx: RequestContext, request) -> JoinGroupResponse:
    version = ctx.api_version
    coordinator = coordinator_of(ctx.broker)
    settings = coordinator.settings
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return response(version, JoinResult(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    if not request.group_id:
        return response(version, JoinResult(ErrorCode.INVALID_GROUP_ID, member_id=request.member_id))
    if not settings.min_session_timeout_ms <= request.session_timeout_ms <= settings.max_session_timeout_ms:
        return response(version, JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id=request.member_id))
    error = coordinator.error_for(request.group_id)
    if error is not ErrorCode.NONE:
        return response(version, JoinResult(error, member_id=request.member_id))
    args = JoinArgs(
        group_id=request.group_id, member_id=request.member_id, protocol_type=request.protocol_type,
        protocols=[(protocol.name, bytes(protocol.metadata)) for protocol in request.protocols],
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.session_timeout_ms if version == 0 else request.rebalance_timeout_ms,
        group_instance_id=request.group_instance_id, client_id=ctx.client_id or "",
        client_host=client_host(ctx.peer), requires_known_member_id=version >= 4,
        supports_skip_assignment=version >= 9, reason=request.reason)
    # Shielded: if the client goes away, its parked join stays answerable (Kafka cannot see disconnects either).
    result = await asyncio.shield(classic_members.join_group(coordinator, args))
    return response(version, result)


def response(version: int, result: JoinResult) -> JoinGroupResponse:
    protocol_name = result.protocol_name
    if version < 7 and protocol_name is None:
        protocol_name = ""  # not nullable before v7
    elif version >= 7 and protocol_name == "":
        protocol_name = None
    members = [Member(member_id=member_id, group_instance_id=instance_id if version >= 5 else None,
                      metadata=metadata) for member_id, instance_id, metadata in result.members]
    return JoinGroupResponse(error_code=result.error, generation_id=result.generation_id,
                             protocol_type=result.protocol_type if version >= 7 else None,
                             protocol_name=protocol_name, leader=result.leader,
                             skip_assignment=result.skip_assignment and version >= 9, member_id=result.member_id,
                             members=members)


def client_host(peer: str) -> str:
    """Java's text of the client's address, as Kafka records it ("/127.0.0.1", "/0:0:0:0:0:0:0:1"), from the
    connection's "host:port"."""
    host = (peer.rpartition(":")[0] if ":" in peer else peer).strip("[]")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return "/" + host
    if address.version == 6:  # Java writes every group, in hex without leading zeros, and never "::"
        return "/" + ":".join(format(int(group, 16), "x") for group in address.exploded.split(":"))
    return "/" + str(address)
