"""A KIP-932 share group as its coordinator keeps it: the group, its members, their epochs and assignments.

The vocabulary is Kafka 4.2's (modern/share/ShareGroup, ShareGroupMember):
- the **group epoch** grows whenever a member joins or leaves, a subscription changes, or the metadata of the
  subscribed topics changes (their partition counts: the **metadata hash**);
- the **target assignment** (one per member) is what the `simple` assignor computed at the **assignment epoch**;
- each member has a **member epoch** (and the previous one) and the partitions **assigned** to it. Unlike a
  consumer group there is no revocation phase: several members may read one partition, so a member takes its
  target assignment (and the target assignment epoch) at its next heartbeat;
- the share-partition state is **initialized** per (topic, partitions) before those partitions are assigned, and
  a topic whose offsets are deleted is **deleting** until its state is gone (ShareGroupStatePartitionMetadata).

The state is Empty without members, else Stable; Dead once the group is removed.

The mutators below are the meaning of the group's records (`records.py` replays each record type through them;
the heartbeat computes the records, writes them, then applies them through the same path). Members are immutable
values. Nothing here awaits or knows about timers: the manager (`ShareGroups`) does that.
"""
from __future__ import annotations

import dataclasses
import enum
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = ["Assignment", "GROUP_TYPE", "InitializedTopic", "PROTOCOL_TYPE", "ShareGroup", "ShareGroupState",
           "ShareMember", "assignment_of", "assignment_pairs"]

GROUP_TYPE = "share"
PROTOCOL_TYPE = "share"

# ShareGroupHeartbeatRequest's special member epochs.
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1

# Kafka's MemberState byte: a share group member is always STABLE (no revocation, no unreleased partitions).
MEMBER_STATE_STABLE = 0

Assignment = Mapping[uuid.UUID, frozenset[int]]
"""Partitions by topic id. Treated as immutable: build a new one instead of changing it."""


class ShareGroupState(enum.StrEnum):
    """Kafka's ShareGroupState names (its UNKNOWN is only a client-side parse result)."""

    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


class InitializedTopic(NamedTuple):
    """A topic whose share-partition state exists for the group (ShareGroupStatePartitionMetadataValue)."""

    name: str
    partitions: frozenset[int]


@dataclass(frozen=True, eq=True)
class ShareMember:
    """One member of a share group (Kafka's ShareGroupMember). Immutable: change it with `dataclasses.replace`."""

    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = MEMBER_STATE_STABLE
    assigned_partitions: Assignment = field(default_factory=dict)

    __hash__ = None  # the assignment is a dict: members are compared, never hashed

    def with_epoch(self, member_epoch: int) -> ShareMember:
        """The member moved to `member_epoch` (the previous epoch remembers where it came from)."""
        return dataclasses.replace(self, previous_member_epoch=self.member_epoch, member_epoch=member_epoch)

    def same_metadata(self, other: ShareMember) -> bool:
        """Whether `other` carries the same ShareGroupMemberMetadataValue (rack, client, subscription)."""
        return (self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names) == \
            (other.rack_id, other.client_id, other.client_host, other.subscribed_topic_names)


class ShareGroup:
    """A KIP-932 share group. Runs on the event loop only; nothing here awaits."""

    group_type = GROUP_TYPE
    protocol_type = PROTOCOL_TYPE

    def __init__(self, group_id: str, *, now_ms: Callable[[], int] | None = None):
        self.group_id = group_id
        self._now_ms = now_ms or _wall_clock_ms
        self.state = ShareGroupState.EMPTY
        self.current_state_timestamp: int | None = self._now_ms()
        self.group_epoch = 0
        self.metadata_hash = 0                   # of the subscribed topics when the group epoch last moved
        self.assignment_epoch = 0                # the target assignment's epoch
        self.members: dict[str, ShareMember] = {}
        self.target_assignment: dict[str, Assignment] = {}   # member id -> its target partitions
        self.initialized_topics: dict[uuid.UUID, InitializedTopic] = {}
        self.deleting_topics: dict[uuid.UUID, str] = {}       # topic id -> name

    def __repr__(self):
        return (f"ShareGroup({self.group_id!r}, {self.state}, epoch={self.group_epoch}, "
                f"assignment_epoch={self.assignment_epoch}, members={list(self.members)})")

    # --- mutators: the meaning of the records -----------------------------------------------------------------------

    def set_group_epoch(self, epoch: int, metadata_hash: int) -> None:
        """ShareGroupMetadataValue."""
        self.group_epoch = epoch
        self.metadata_hash = metadata_hash

    def set_assignment_epoch(self, epoch: int) -> None:
        """ShareGroupTargetAssignmentMetadataValue."""
        self.assignment_epoch = epoch

    def set_target_assignment(self, member_id: str, assignment: Assignment | None) -> None:
        """ShareGroupTargetAssignmentMemberValue (None: its tombstone)."""
        if assignment is None:
            self.target_assignment.pop(member_id, None)
        else:
            self.target_assignment[member_id] = assignment

    def update_member(self, member: ShareMember) -> None:
        """A new or changed member (ShareGroupMemberMetadataValue and ShareGroupCurrentMemberAssignmentValue)."""
        self.members[member.member_id] = member
        self._refresh_state()

    def remove_member(self, member_id: str) -> ShareMember | None:
        """The member is gone (its ShareGroupMemberMetadata tombstone)."""
        member = self.members.pop(member_id, None)
        self._refresh_state()
        return member

    def set_state_metadata(self, initialized: Mapping[uuid.UUID, InitializedTopic],
                           deleting: Mapping[uuid.UUID, str]) -> None:
        """ShareGroupStatePartitionMetadataValue (a tombstone: both empty)."""
        self.initialized_topics = dict(initialized)
        self.deleting_topics = dict(deleting)

    def mark_dead(self) -> None:
        """The group was deleted or is no longer coordinated here: anything still holding it sees Dead."""
        self._transition(ShareGroupState.DEAD)

    # --- queries ----------------------------------------------------------------------------------------------------

    def get_or_create_member(self, member_id: str) -> ShareMember:
        """The member, or a blank one with that id (not added)."""
        return self.members.get(member_id) or ShareMember(member_id)

    def is_subscribed(self, topic: str) -> bool:
        return any(topic in member.subscribed_topic_names for member in self.members.values())

    def is_empty(self) -> bool:
        return not self.members

    def initialized_partitions(self) -> dict[uuid.UUID, frozenset[int]]:
        return {topic_id: info.partitions for topic_id, info in self.initialized_topics.items()}

    # --- internals --------------------------------------------------------------------------------------------------

    def _refresh_state(self) -> None:
        if self.state is not ShareGroupState.DEAD:
            self._transition(ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY)

    def _transition(self, state: ShareGroupState) -> None:
        if state is not self.state:
            self.state = state
            self.current_state_timestamp = self._now_ms()


def assignment_of(pairs: Iterable[tuple[uuid.UUID, Iterable[int]]]) -> Assignment:
    """An assignment from (topic id, partitions) pairs, topics without partitions left out."""
    merged: dict[uuid.UUID, set[int]] = {}
    for topic_id, partitions in pairs:
        merged.setdefault(topic_id, set()).update(partitions)
    return {topic_id: frozenset(partitions) for topic_id, partitions in merged.items() if partitions}


def assignment_pairs(assignment: Assignment) -> list[tuple[uuid.UUID, list[int]]]:
    """(topic id, sorted partitions) pairs in a stable order, for records and responses."""
    return [(topic_id, sorted(partitions)) for topic_id, partitions in sorted(assignment.items(),
                                                                               key=lambda item: str(item[0]))]


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)
