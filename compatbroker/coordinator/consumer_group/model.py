"""A KIP-848 consumer group as its coordinator keeps it: the group, its members, their epochs and assignments.

The vocabulary is Kafka's (modern/consumer/ConsumerGroup, ConsumerGroupMember, MemberState):
- the **group epoch** grows whenever the group's subscriptions or the metadata of its subscribed topics change;
- the **target assignment** (one per member) is what the server assignor computed at the **assignment epoch**; a
  group whose epoch is ahead of its assignment epoch has a new assignment to compute;
- each member has a **member epoch** (and the previous one), the partitions it is **assigned** now and those
  **pending revocation**, and a `MemberState` telling where its reconciliation towards the target stands;
- every assigned (or pending revocation) partition records the epoch of its owner (`current_partition_epoch`), so
  that a partition is not given to a member before its previous owner has released it.

The group's state is derived, as Kafka derives it: Empty without members, Assigning while the group epoch is ahead
of the assignment epoch, Reconciling while a member is not yet reconciled to the target assignment, else Stable;
Dead once removed.

The mutators below are the meaning of the group's records (`records.py` replays each record type through them;
the heartbeat computes the changes, writes the records, then applies them through the same mutators). Members are
immutable values: a change is a new `ConsumerMember` (`dataclasses.replace`) handed to `update_member`.
Nothing here awaits or knows about timers: the manager (`ConsumerGroups`) does that.
"""
from __future__ import annotations

import dataclasses
import enum
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = ["Assignment", "ClassicMemberMetadata", "ClassicProtocol", "ConsumerGroup", "ConsumerGroupState",
           "ConsumerMember", "EMPTY_ASSIGNMENT", "GROUP_TYPE", "LEAVE_GROUP_MEMBER_EPOCH",
           "LEAVE_GROUP_STATIC_MEMBER_EPOCH", "MemberState", "PROTOCOL_TYPE", "ResolvedRegex", "assignment_of",
           "member_topics", "preferred_server_assignor", "subscribed_topics"]

GROUP_TYPE = "consumer"
PROTOCOL_TYPE = "consumer"

# Kafka's special member epochs (ConsumerGroupHeartbeatRequest).
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

NO_PARTITION_EPOCH = -1

Assignment = Mapping[uuid.UUID, frozenset[int]]
"""Partitions by topic id. Treated as immutable: build a new one instead of changing it."""

EMPTY_ASSIGNMENT: Assignment = {}


class ConsumerGroupState(enum.StrEnum):
    """Kafka's names (ConsumerGroup.ConsumerGroupState), as ListGroups and ConsumerGroupDescribe show them."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(enum.IntEnum):
    """Where a member's reconciliation stands; the value is what ConsumerGroupCurrentMemberAssignmentValue.State
    stores (Kafka's MemberState bytes). UNKNOWN: a value a newer broker wrote; the member is fenced on its next
    heartbeat unless it owns nothing (Kafka's CurrentAssignmentBuilder)."""

    STABLE = 0                  # reconciled to the target assignment
    UNREVOKED_PARTITIONS = 1    # must give up partitions before it may move to the next epoch
    UNRELEASED_PARTITIONS = 2   # at the target epoch, but waits for partitions other members still own
    UNKNOWN = 127

    @classmethod
    def from_value(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class ClassicProtocol(NamedTuple):
    """One protocol a classic-protocol member offered in its JoinGroup (name and subscription metadata)."""

    name: str
    metadata: bytes


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """What a member that speaks the classic protocol inside a consumer group adds (KIP-848 migration):
    ConsumerGroupMemberMetadataValue.ClassicMemberMetadata."""

    session_timeout_ms: int
    supported_protocols: tuple[ClassicProtocol, ...] = ()


class ResolvedRegex(NamedTuple):
    """A subscription regex resolved against the cluster's topics (ConsumerGroupRegularExpressionValue):
    the matching topic names, the metadata version it was resolved at, and when (ms)."""

    topics: frozenset[str]
    version: int
    timestamp_ms: int


@dataclass(frozen=True, eq=True)
class ConsumerMember:
    """One member of a consumer group (Kafka's ConsumerGroupMember). Immutable: change it with
    `dataclasses.replace(member, ...)` and hand the result to `ConsumerGroup.update_member`."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: frozenset[str] = frozenset()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)
    classic: ClassicMemberMetadata | None = None   # set for members that speak the classic protocol

    __hash__ = None  # the assignments are dicts: members are compared, never hashed

    @property
    def use_classic_protocol(self) -> bool:
        return self.classic is not None

    def is_reconciled_to(self, target_assignment_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_assignment_epoch

    def with_epoch(self, member_epoch: int) -> ConsumerMember:
        """The member moved to `member_epoch` (the previous epoch remembers where it came from)."""
        return dataclasses.replace(self, previous_member_epoch=self.member_epoch, member_epoch=member_epoch)


class ConsumerGroup:
    """A KIP-848 consumer group. Runs on the event loop only; nothing here awaits."""

    group_type = GROUP_TYPE
    protocol_type = PROTOCOL_TYPE

    def __init__(self, group_id: str, *, now_ms: Callable[[], int] | None = None):
        self.group_id = group_id
        self._now_ms = now_ms or _wall_clock_ms
        self.state = ConsumerGroupState.EMPTY
        self.current_state_timestamp: int | None = self._now_ms()
        self.group_epoch = 0
        self.metadata_hash = 0                   # of the subscribed topics when the group epoch last moved
        self.assignment_epoch = 0                # the target assignment's epoch
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}             # instance id -> member id
        self.target_assignment: dict[str, Assignment] = {}   # member id -> its target partitions
        self.resolved_regexes: dict[str, ResolvedRegex] = {}
        self._partition_epochs: dict[uuid.UUID, dict[int, int]] = {}

    def __repr__(self):
        return (f"ConsumerGroup({self.group_id!r}, {self.state}, epoch={self.group_epoch}, "
                f"assignment_epoch={self.assignment_epoch}, members={list(self.members)})")

    # --- mutators: the meaning of the records -----------------------------------------------------------------------

    def set_group_epoch(self, epoch: int, metadata_hash: int | None = None) -> None:
        """ConsumerGroupMetadataValue."""
        self.group_epoch = epoch
        if metadata_hash is not None:
            self.metadata_hash = metadata_hash
        self.refresh_state()

    def set_assignment_epoch(self, epoch: int) -> None:
        """ConsumerGroupTargetAssignmentMetadataValue."""
        self.assignment_epoch = epoch
        self.refresh_state()

    def set_target_assignment(self, member_id: str, assignment: Assignment | None) -> None:
        """ConsumerGroupTargetAssignmentMemberValue (None: its tombstone)."""
        if assignment is None:
            self.target_assignment.pop(member_id, None)
        else:
            self.target_assignment[member_id] = assignment

    def update_member(self, member: ConsumerMember) -> None:
        """A new or changed member (ConsumerGroupMemberMetadataValue and ConsumerGroupCurrentMemberAssignmentValue
        both end here): its static mapping and partition epochs follow."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._remove_partition_epochs(old)
            if old.instance_id is not None and old.instance_id != member.instance_id and \
                    self.static_members.get(old.instance_id) == old.member_id:
                del self.static_members[old.instance_id]
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._add_partition_epochs(member)
        self.refresh_state()

    def remove_member(self, member_id: str) -> ConsumerMember | None:
        """The member is gone (its records' tombstones); its target assignment goes with it."""
        member = self.members.pop(member_id, None)
        if member is not None:
            self._remove_partition_epochs(member)
            if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
                del self.static_members[member.instance_id]
        self.target_assignment.pop(member_id, None)
        self.refresh_state()
        return member

    def set_resolved_regex(self, regex: str, resolved: ResolvedRegex | None) -> None:
        """ConsumerGroupRegularExpressionValue (None: its tombstone)."""
        if resolved is None:
            self.resolved_regexes.pop(regex, None)
        else:
            self.resolved_regexes[regex] = resolved

    def get_or_create_member(self, member_id: str) -> ConsumerMember:
        """The member, or a blank one with that id (not added: hand it to `update_member`)."""
        return self.members.get(member_id) or ConsumerMember(member_id)

    def mark_dead(self) -> None:
        """The group was deleted or is no longer coordinated here: anything still holding it sees Dead."""
        self._transition(ConsumerGroupState.DEAD)

    # --- the derived state ------------------------------------------------------------------------------------------

    def refresh_state(self) -> None:
        """Kafka's maybeUpdateGroupState."""
        if self.state is ConsumerGroupState.DEAD:
            return
        if not self.members:
            state = ConsumerGroupState.EMPTY
        elif self.group_epoch > self.assignment_epoch:
            state = ConsumerGroupState.ASSIGNING
        elif any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            state = ConsumerGroupState.RECONCILING
        else:
            state = ConsumerGroupState.STABLE
        self._transition(state)

    def _transition(self, state: ConsumerGroupState) -> None:
        if state is not self.state:
            self.state = state
            self.current_state_timestamp = self._now_ms()

    # --- queries ----------------------------------------------------------------------------------------------------

    def static_member(self, instance_id: str | None) -> ConsumerMember | None:
        member_id = self.static_members.get(instance_id) if instance_id is not None else None
        return self.members.get(member_id) if member_id is not None else None

    def target_assignment_of(self, member_id: str) -> Assignment:
        return self.target_assignment.get(member_id, EMPTY_ASSIGNMENT)

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The member epoch of the partition's current owner, or -1 when no member owns it."""
        return self._partition_epochs.get(topic_id, {}).get(partition, NO_PARTITION_EPOCH)

    def preferred_server_assignor(self) -> str | None:
        return preferred_server_assignor(self.members.values())

    def subscribed_regexes(self) -> Counter:
        """Each subscribed regex and how many members use it."""
        return Counter(m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex)

    def member_subscribed_topics(self, member: ConsumerMember) -> frozenset[str]:
        return member_topics(member, self.resolved_regexes)

    def subscribed_topics(self) -> set[str]:
        """Every topic some member subscribes to (the common group view; offset retention reads it)."""
        return subscribed_topics(self.members.values(), self.resolved_regexes)

    def is_subscribed(self, topic: str) -> bool:
        return any(topic in self.member_subscribed_topics(m) for m in self.members.values())

    def classic_members(self) -> list[ConsumerMember]:
        return [member for member in self.members.values() if member.use_classic_protocol]

    def is_empty(self) -> bool:
        return not self.members

    # --- partition epochs -------------------------------------------------------------------------------------------

    def _add_partition_epochs(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, partitions in assignment.items():
                epochs = self._partition_epochs.setdefault(topic_id, {})
                for partition in partitions:
                    epochs[partition] = member.member_epoch

    def _remove_partition_epochs(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, partitions in assignment.items():
                epochs = self._partition_epochs.get(topic_id)
                if epochs is None:
                    continue
                for partition in partitions:
                    if epochs.get(partition) == member.member_epoch:
                        del epochs[partition]
                if not epochs:
                    del self._partition_epochs[topic_id]


# --- subscriptions of a set of members (a heartbeat plans with the members the group will have) --------------------

def preferred_server_assignor(members: Iterable[ConsumerMember]) -> str | None:
    """The server assignor most members asked for (Kafka's preferredServerAssignor); None when none did."""
    counts = Counter(m.server_assignor for m in members if m.server_assignor)
    return counts.most_common(1)[0][0] if counts else None


def member_topics(member: ConsumerMember, resolved_regexes: Mapping[str, ResolvedRegex]) -> frozenset[str]:
    """The topics a member subscribes to: its names plus what its regex resolved to (an unresolved regex matches
    nothing yet, as in Kafka)."""
    regex = member.subscribed_topic_regex
    resolved = resolved_regexes.get(regex) if regex else None
    return member.subscribed_topic_names | resolved.topics if resolved else member.subscribed_topic_names


def subscribed_topics(members: Iterable[ConsumerMember], resolved_regexes: Mapping[str, ResolvedRegex]) -> set[str]:
    topics: set[str] = set()
    for member in members:
        topics |= member_topics(member, resolved_regexes)
    return topics


# --- assignment helpers -------------------------------------------------------------------------------------------

def assignment_of(pairs: Iterable[tuple[uuid.UUID, Iterable[int]]]) -> Assignment:
    """An assignment from (topic id, partitions) pairs; empty partition lists are dropped, repeated topics merge."""
    merged: dict[uuid.UUID, set[int]] = {}
    for topic_id, partitions in pairs:
        merged.setdefault(topic_id, set()).update(partitions)
    return {topic_id: frozenset(partitions) for topic_id, partitions in merged.items() if partitions}


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)
