"""A classic group as its coordinator keeps it: members, state, generation, protocol and leader.

This module holds the group's data and the rules that concern one group only (which state may follow which, which
protocol every member can speak, who leads, whether a member id is current). The rebalance protocol that moves a
group between states, with its timers and its answers to requests, is `membership.py`.

States and their meaning, as in Kafka:
- Empty: no members (a new group, a group whose members all left, or one that only stores offsets);
- PreparingRebalance: waiting for the members to (re)send JoinGroup;
- CompletingRebalance: the generation is formed; waiting for the leader's assignment in SyncGroup;
- Stable: every member may fetch its assignment;
- Dead: removed; a request that still finds the group is told to look the coordinator up again.

The attributes keep the names the `__consumer_offsets` group metadata record uses (`generation_id`,
`protocol_name`, `leader_id`, members' `session_timeout_ms`, `subscription` via `metadata()`, `assignment`),
so that the offsets store can write a group as Kafka does.
"""
from __future__ import annotations

import asyncio
import enum
import logging
import struct
from collections import Counter
from dataclasses import dataclass, field

from ..protocol import wire
from ..protocol.error_codes import ErrorCode

log = logging.getLogger(__name__)

CONSUMER_PROTOCOL_TYPE = "consumer"
GROUP_TYPE = "classic"  # KIP-848's name of this kind of group (ListGroups v5, DescribeGroups)


class GroupState(enum.StrEnum):
    """Kafka's names of the classic group states, as DescribeGroups and ListGroups send them."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_ANY_STATE = frozenset(GroupState)
# Which states a group may come from when it enters each state.
_PREVIOUS_STATES = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE,
                                               GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: _ANY_STATE,
}

Protocol = tuple[str, bytes]
"""One protocol a member offers: its name (for consumers the assignor) and its metadata bytes."""


@dataclass
class JoinResult:
    """What a JoinGroup is answered; the handler turns it into the response of the request's version."""

    error: ErrorCode = ErrorCode.NONE
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)  # id, instance id, metadata


@dataclass
class SyncResult:
    """What a SyncGroup is answered."""

    error: ErrorCode = ErrorCode.NONE
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


def resolve(future: asyncio.Future | None, result) -> bool:
    """Answer a parked request unless it already has its answer (or its client went away)."""
    if future is None or future.done():
        return False
    future.set_result(result)
    return True


class Member:
    """One member of a classic group."""

    __slots__ = ("member_id", "group_instance_id", "client_id", "client_host", "rebalance_timeout_ms",
                 "session_timeout_ms", "protocol_type", "protocols", "assignment", "join_future", "sync_future",
                 "is_new")

    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
                 rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                 protocols: list[Protocol], assignment: bytes = b""):
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = assignment
        self.join_future: asyncio.Future | None = None  # a JoinGroup parked until the join phase ends
        self.sync_future: asyncio.Future | None = None  # a SyncGroup parked until the leader's assignment
        self.is_new = False  # joined but not yet through a join phase: its session does not run yet

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol_name: str) -> bytes:
        """The member's metadata (for consumers its subscription) for one of its protocols."""
        for name, metadata in self.protocols:
            if name == protocol_name:
                return metadata
        raise KeyError(f"member {self.member_id} does not offer protocol {protocol_name!r}")

    def matches(self, protocols: list[Protocol]) -> bool:
        """Whether a rejoin brings exactly the protocols (and metadata) the member already has."""
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def heartbeat_satisfied(self) -> bool:
        """Whether an expiring session timer should spare the member: a member parked in a join or a sync is
        waiting on the coordinator, not silent; a new member's first join is bounded by its own timer."""
        if self.is_new:
            return False
        return self.awaiting_join or self.awaiting_sync

    def __repr__(self):
        return f"Member({self.member_id!r}, instance={self.group_instance_id!r}, protocols={self.protocol_names()})"


class Group:
    """A classic group. Everything runs on the event loop; nothing here awaits."""

    group_type = GROUP_TYPE

    def __init__(self, group_id: str, *, state: GroupState = GroupState.EMPTY, generation_id: int = 0,
                 protocol_type: str | None = None, protocol_name: str | None = None, leader_id: str | None = None,
                 current_state_timestamp: int | None = None):
        self.group_id = group_id
        self.state = state
        self.previous_state: GroupState | None = None
        self.generation_id = generation_id
        self.protocol_type = protocol_type    # None: a group that only stores offsets (a "simple" group)
        self.protocol_name = protocol_name    # chosen at each generation; None while Empty
        self.leader_id = leader_id
        self.current_state_timestamp = current_state_timestamp  # ms when the group entered its state
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}     # group.instance.id -> member id
        self.pending_join_members: set[str] = set()  # ids handed out with MEMBER_ID_REQUIRED, not yet joined
        self.pending_sync_members: set[str] = set()  # members of this generation that have not sent SyncGroup
        self.new_member_added = False                # a member joined during the initial rebalance delay
        self._subscribed_topics: set[str] | None = None

    def __repr__(self):
        return (f"Group({self.group_id!r}, {self.state}, generation={self.generation_id}, "
                f"members={list(self.members)})")

    # --- state ----------------------------------------------------------------------------------------------------

    def transition(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _PREVIOUS_STATES[state]:
            raise RuntimeError(f"group {self.group_id}: cannot move from {self.state} to {state}")
        self.previous_state, self.state = self.state, state
        self.current_state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in _PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    # --- members --------------------------------------------------------------------------------------------------

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: Member, join_future: asyncio.Future | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise RuntimeError(f"group {self.group_id}: instance {member.group_instance_id} is already a member")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        member.join_future = join_future
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str, error: ErrorCode = ErrorCode.UNKNOWN_MEMBER_ID) -> None:
        """Drop a member (or a pending member id). A request it still has parked is answered `error`
        (UNKNOWN_MEMBER_ID; NOT_COORDINATOR when this node stops coordinating the group), so that no handler waits
        for ever."""
        member = self.members.pop(member_id, None)
        if member is not None:
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
            resolve(member.join_future, JoinResult(error))
            resolve(member.sync_future, SyncResult(error))
            member.join_future = member.sync_future = None
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def update_member(self, member: Member, protocols: list[Protocol], rebalance_timeout_ms: int,
                      session_timeout_ms: int, join_future: asyncio.Future | None) -> None:
        """A rejoin: new protocols and timeouts, and the new JoinGroup parked. An older JoinGroup of the same
        member still parked (its client gave up on it and retried) is answered REBALANCE_IN_PROGRESS."""
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if member.join_future is not join_future:
            resolve(member.join_future, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id))
        member.join_future = join_future

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> Member:
        """A static member came back with a new member id: it takes the old member's place, assignment and
        leadership; requests the old id still has parked are fenced."""
        old = self.members.pop(old_member_id)
        resolve(old.join_future, JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=old_member_id))
        resolve(old.sync_future, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        old.join_future = old.sync_future = None
        new = Member(new_member_id, old.group_instance_id, old.client_id, old.client_host, old.rebalance_timeout_ms,
                     old.session_timeout_ms, old.protocol_type, old.protocols, old.assignment)
        self.members[new_member_id] = new
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        return new

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode:
        """UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID when the ids do not name a current member."""
        if group_instance_id is not None:
            current = self.static_members.get(group_instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                log.info("group %s: member %s of instance %s is fenced by member %s", self.group_id, member_id,
                         group_instance_id, current)
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def awaiting_join_count(self) -> int:
        return sum(1 for member in self.members.values() if member.awaiting_join)

    def has_all_members_joined(self) -> bool:
        return not self.pending_join_members and all(m.awaiting_join for m in self.members.values())

    def rebalance_timeout_ms(self) -> int:
        """How long a join phase may wait: the longest rebalance timeout of the members."""
        return max((member.rebalance_timeout_ms for member in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """At the end of a join phase the leader must be a member that rejoined; False when nobody rejoined."""
        leader = self.members.get(self.leader_id) if self.leader_id is not None else None
        if leader is None:
            return False
        if leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                log.info("group %s: leader %s did not rejoin in time; %s leads now", self.group_id, leader.member_id,
                         member.member_id)
                self.leader_id = member.member_id
                return True
        return False

    # --- protocols ------------------------------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports."""
        members = iter(self.members.values())
        first = next(members, None)
        if first is None:
            return set()
        common = set(first.protocol_names())
        for member in members:
            common.intersection_update(member.protocol_names())
        return common

    def supports_protocols(self, protocol_type: str, protocol_names: list[str]) -> bool:
        """Whether a joining member fits: any non-empty type and protocols while Empty, else the group's type and
        at least one protocol every current member supports."""
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(protocol_names)
        if protocol_type != self.protocol_type:
            return False
        candidates = self.candidate_protocols()
        return any(name in candidates for name in protocol_names)

    def select_protocol(self) -> str:
        """Each member votes for its preferred protocol among the common ones; the most votes win (ties: the
        protocol voted for first, so the choice is deterministic)."""
        if not self.members:
            raise RuntimeError(f"group {self.group_id}: no protocol to select without members")
        candidates = self.candidate_protocols()
        votes = Counter(member.vote(candidates) for member in self.members.values())
        return votes.most_common(1)[0][0]

    def init_next_generation(self, now_ms: int) -> None:
        """Close a join phase: a new generation, CompletingRebalance with the selected protocol, or Empty."""
        self.generation_id += 1
        self.protocol_name = self.select_protocol() if self.members else None
        self.refresh_subscribed_topics()
        self.transition(GroupState.COMPLETING_REBALANCE if self.members else GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        """Every member with its metadata for the chosen protocol: what the leader needs to assign."""
        return [(member.member_id, member.group_instance_id, member.metadata(self.protocol_name))
                for member in self.members.values()]

    # --- subscriptions (used by offset retention) -----------------------------------------------------------------

    def subscribed_topics(self) -> set[str] | None:
        """The topics the consumer members subscribe to, or None when unknown (not a consumer group, or a
        subscription that cannot be read)."""
        return self._subscribed_topics

    def is_subscribed(self, topic: str) -> bool:
        if self._subscribed_topics is not None:
            return topic in self._subscribed_topics
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE  # unknown: assume so, offsets must not expire

    def refresh_subscribed_topics(self) -> None:
        self._subscribed_topics = self._compute_subscribed_topics()

    def _compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(subscription_topics(member.metadata(self.protocol_name)))
        except (ValueError, KeyError, IndexError, struct.error) as exc:
            log.warning("group %s: cannot read the subscriptions of protocol %s: %s", self.group_id,
                        self.protocol_name, exc)
            return None
        return topics

    # --- offsets ----------------------------------------------------------------------------------------------------

    def validate_offset_commit(self, member_id: str, group_instance_id: str | None, generation_id: int,
                               transactional: bool = False) -> ErrorCode:
        """Kafka's checks of an offset commit against a classic group."""
        if self.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and self.state is GroupState.EMPTY:
            return ErrorCode.NONE  # assign() consumers and admin tools commit for empty groups
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = self.validate_member(member_id, group_instance_id)
            if error is not ErrorCode.NONE:
                return error
            if generation_id != self.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif not transactional and self.state is not GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID  # no member id and no generation: only for empty groups
        if not transactional and self.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS  # a valid member that has not synced yet: let it finish first
        return ErrorCode.NONE

    # --- the durable form -----------------------------------------------------------------------------------------

    @classmethod
    def from_metadata_value(cls, group_id: str, value) -> Group:
        """A group as a GroupMetadataValue record left it: Stable with its members, or Empty."""
        protocol_type = value.protocol_type or None
        group = cls(group_id, state=GroupState.STABLE if value.members else GroupState.EMPTY,
                    generation_id=value.generation, protocol_type=protocol_type, protocol_name=value.protocol,
                    leader_id=value.leader,
                    current_state_timestamp=None if value.current_state_timestamp == -1
                    else value.current_state_timestamp)
        for stored in value.members:
            rebalance_timeout = stored.session_timeout if stored.rebalance_timeout == -1 else stored.rebalance_timeout
            member = Member(stored.member_id, stored.group_instance_id, stored.client_id, stored.client_host,
                            rebalance_timeout, stored.session_timeout, value.protocol_type,
                            [(value.protocol, bytes(stored.subscription))], bytes(stored.assignment))
            group.add(member)
        group.protocol_type = protocol_type
        group.leader_id = value.leader if value.leader in group.members else next(iter(group.members), None)
        group.refresh_subscribed_topics()
        return group


def subscription_topics(metadata: bytes) -> list[str]:
    """The topics of a consumer's subscription (ConsumerProtocolSubscription): every version starts with an int16
    version and the topic array of version 0, so that prefix is all that is read."""
    view = memoryview(metadata)
    if len(view) < 2:
        raise ValueError("subscription shorter than its version")
    count, position = wire.read_array_len(view, 2)
    topics = []
    for _ in range(max(count, 0)):
        topic, position = wire.read_string(view, position)
        topics.append(topic)
    return topics
