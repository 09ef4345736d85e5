"""A member's next assignment: how its current assignment converges on its target one, revoking before assigning
(Kafka's CurrentAssignmentBuilder, the reconciliation engine of KIP-848).

One step at a time, on each heartbeat:
- a member that keeps partitions it must give up stays at its epoch in UNREVOKED_PARTITIONS, with those partitions
  pending revocation, until a heartbeat shows it no longer owns them (then it moves to the next epoch, at most the
  target's);
- partitions of its target still owned by another member (`partition_epoch` not -1) are not given yet: the member
  moves to the target epoch in UNRELEASED_PARTITIONS and gets them on a later heartbeat, once they are free;
- otherwise it moves to the target epoch, STABLE, with the target's partitions.
Topics the member no longer subscribes to are taken away even before the target assignment catches up with the
subscription change (Kafka 4.1+'s `hasSubscriptionChanged` path).

Pure functions: nothing here touches the group; `heartbeat.py` writes what they return.
"""
from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable

from ...protocol.error_codes import ErrorCode
from .model import EMPTY_ASSIGNMENT, NO_PARTITION_EPOCH, Assignment, ConsumerMember, MemberState, assignment_of

PartitionEpoch = Callable[[uuid.UUID, int], int]


class FencedMember(Exception):
    """The member's state cannot be reconciled: it must give up everything and rejoin (FENCED_MEMBER_EPOCH)."""

    error = ErrorCode.FENCED_MEMBER_EPOCH


def reconcile(member: ConsumerMember, *, target_epoch: int, target: Assignment, partition_epoch: PartitionEpoch,
              owned: Assignment | None, subscribed_topic_ids: frozenset[uuid.UUID],
              subscription_changed: bool = False) -> ConsumerMember:
    """The member after one reconciliation step (the same object when nothing changes).

    `owned`: the partitions the heartbeat says the member owns (None: not reported, so nothing counts as revoked);
    `partition_epoch(topic_id, partition)`: the epoch of the partition's current owner, -1 when free;
    `subscribed_topic_ids`: the member's subscription resolved to topic ids."""
    step = _Step(member, target_epoch, target, partition_epoch, owned, subscribed_topic_ids)
    if member.state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return step.next_assignment(member.member_epoch)
        return step.drop_unsubscribed() if subscription_changed else member
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if step.owns_any(member.partitions_pending_revocation):
            return step.drop_unsubscribed() if subscription_changed else member
        # Everything asked for is revoked: on to the next epoch (never past the target's, which may lag behind a
        # revocation caused by a subscription change).
        return step.next_assignment(min(member.member_epoch + 1, target_epoch))
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return step.next_assignment(member.member_epoch)
    # UNKNOWN: written by a newer broker. Only a member that owns nothing can be reconciled from scratch.
    if owned is None or owned:
        raise FencedMember("The consumer group member is in a unknown state. "
                           "The member must abandon all its partitions and rejoin.")
    return step.next_assignment(target_epoch)


@dataclasses.dataclass
class _Step:
    member: ConsumerMember
    target_epoch: int
    target: Assignment
    partition_epoch: PartitionEpoch
    owned: Assignment | None
    subscribed: frozenset[uuid.UUID]

    def owns_any(self, partitions: Assignment) -> bool:
        """Whether the member still owns one of `partitions` (an unreported ownership counts as owning)."""
        if self.owned is None:
            return True
        return any(partitions.get(topic_id, frozenset()) & owned for topic_id, owned in self.owned.items())

    def drop_unsubscribed(self) -> ConsumerMember:
        """Take away, at once, the partitions of topics the member no longer subscribes to."""
        member = self.member
        dropped = {topic_id: partitions for topic_id, partitions in member.assigned_partitions.items()
                   if topic_id not in self.subscribed}
        if not dropped:
            return member
        kept = {topic_id: partitions for topic_id, partitions in member.assigned_partitions.items()
                if topic_id in self.subscribed}
        pending = assignment_of([*member.partitions_pending_revocation.items(), *dropped.items()])
        if self.owns_any(pending):
            return dataclasses.replace(member, state=MemberState.UNREVOKED_PARTITIONS, assigned_partitions=kept,
                                       partitions_pending_revocation=pending)
        return dataclasses.replace(member, assigned_partitions=kept)  # already given up: only shrink

    def next_assignment(self, member_epoch: int) -> ConsumerMember:
        """Kafka's computeNextAssignment: keep what stays, revoke what goes, add what is free."""
        member = self.member
        current = member.assigned_partitions
        pending_revocation = member.partitions_pending_revocation
        kept: dict[uuid.UUID, frozenset[int]] = {}
        revoking: dict[uuid.UUID, frozenset[int]] = {}
        adding: dict[uuid.UUID, frozenset[int]] = {}
        unreleased = False
        for topic_id in set(self.target) | set(current):
            target = self.target.get(topic_id, frozenset()) if topic_id in self.subscribed else frozenset()
            assigned = current.get(topic_id, frozenset())
            stays = assigned & target
            wanted = target - stays
            # A partition still owned by another member waits; one this member is revoking does not.
            mine = pending_revocation.get(topic_id, frozenset())
            free = frozenset(p for p in wanted
                             if self.partition_epoch(topic_id, p) == NO_PARTITION_EPOCH or p in mine)
            unreleased = unreleased or free != wanted
            _put(kept, topic_id, stays)
            _put(revoking, topic_id, assigned - stays)
            _put(adding, topic_id, free)
        if revoking and self.owns_any(revoking):
            return dataclasses.replace(member.with_epoch(member_epoch), state=MemberState.UNREVOKED_PARTITIONS,
                                       assigned_partitions=kept, partitions_pending_revocation=revoking)
        state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        assigned = assignment_of([*kept.items(), *adding.items()]) if adding else kept
        return dataclasses.replace(member.with_epoch(self.target_epoch), state=state, assigned_partitions=assigned,
                                   partitions_pending_revocation=EMPTY_ASSIGNMENT)


def _put(assignment: dict, topic_id: uuid.UUID, partitions: frozenset[int]) -> None:
    if partitions:
        assignment[topic_id] = partitions
