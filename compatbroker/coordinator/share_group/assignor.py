"""Kafka's `simple` share group assignor, as Kafka 4.2 has it (SimpleAssignor with its homogeneous and
heterogeneous assignment builders). A pure function: members and assignable partitions in, target assignment out.

Unlike a consumer group assignor, a partition may go to several members: with more members than partitions each
partition is shared by `ceil(members / partitions)` of them. The rules, balance before stickiness:
- **balance**: each partition is wanted by `desired_sharing = ceil(members / partitions)` members, and member `i`
  (of `n`) wants `ceil(p * (i + 1)) - ceil(p * i)` partitions, where `p = desired_sharing * partitions / n`, so
  that counts differ by at most one;
- **stickiness**: a member keeps what it had (of the topics it still subscribes to) unless it holds more than it
  wants, or a partition is shared by more members than wanted;
- then the partitions that lack members go to the members that lack partitions, in turn.

When every member subscribes to the same topics (homogeneous) the rules apply to all their partitions at once;
otherwise (heterogeneous) to each topic separately, among the members subscribing to it.

Only assignable partitions are given out: those whose share-partition state is initialized (here: every
partition of a subscribed topic, since initialisation is synchronous). The iteration order is Kafka's in spirit
(members in the order given, partitions by topic then index) but not its hash order, so the exact pairing may
differ from Kafka's for the same input; the sizes and sharing do not.
"""
from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from .model import Assignment, assignment_of

NAME = "simple"

TopicPartition = tuple[uuid.UUID, int]


class MemberSpec(NamedTuple):
    subscribed_topic_ids: frozenset[uuid.UUID]
    current: Assignment


def assign(members: Mapping[str, MemberSpec], partitions_per_topic: Mapping[uuid.UUID, Sequence[int]]
           ) -> dict[str, Assignment]:
    """The target assignment of every member. `partitions_per_topic`: the assignable partitions of each existing
    topic (a subscribed topic missing from it has nothing to assign)."""
    member_ids = list(members)
    if not member_ids:
        return {}
    subscriptions = {member_id: spec.subscribed_topic_ids & partitions_per_topic.keys()
                     for member_id, spec in members.items()}
    if len({frozenset(topics) for topics in subscriptions.values()}) == 1:
        groups = [(member_ids, subscriptions[member_ids[0]])]                      # homogeneous
    else:
        topics = sorted(set().union(*subscriptions.values()), key=str)              # heterogeneous: per topic
        groups = [([m for m in member_ids if topic in subscriptions[m]], {topic}) for topic in topics]
    result: dict[str, set[TopicPartition]] = {member_id: set() for member_id in member_ids}
    for subscribed_members, topics in groups:
        targets = [(topic, partition) for topic in sorted(topics, key=str)
                   for partition in sorted(partitions_per_topic[topic])]
        current = {member_id: {(topic, partition) for topic, partitions in members[member_id].current.items()
                               if topic in topics for partition in partitions}
                   for member_id in subscribed_members}
        for member_id, partitions in _balance(subscribed_members, targets, current).items():
            result[member_id] |= partitions
    return {member_id: _as_assignment(partitions) for member_id, partitions in result.items()}


def _balance(member_ids: list[str], targets: list[TopicPartition], current: Mapping[str, set[TopicPartition]]
             ) -> dict[str, set[TopicPartition]]:
    """The assignment of `targets` among `member_ids`, keeping as much of `current` as balance allows."""
    if not member_ids or not targets:
        return {member_id: set() for member_id in member_ids}
    members, count = len(member_ids), len(targets)
    sharing = (members + count - 1) // count
    precise = sharing * count / members
    wanted = {member_id: math.ceil(precise * (index + 1)) - math.ceil(precise * index)
              for index, member_id in enumerate(member_ids)}
    assignable = set(targets)
    by_member = {member_id: [tp for tp in _ordered(current.get(member_id, ())) if tp in assignable]
                 for member_id in member_ids}
    # Members holding more than they want give up their surplus.
    for member_id, held in by_member.items():
        del held[wanted[member_id]:]
    by_partition: dict[TopicPartition, list[str]] = {tp: [] for tp in targets}
    for member_id, held in by_member.items():
        for tp in held:
            by_partition[tp].append(member_id)
    # Partitions shared by more members than wanted lose the extra ones.
    for tp, holders in by_partition.items():
        while len(holders) > sharing:
            by_member[holders.pop()].remove(tp)
    unfilled = [member_id for member_id in member_ids if len(by_member[member_id]) < wanted[member_id]]
    _fill(targets, by_partition, by_member, sharing, wanted, unfilled)
    return {member_id: set(held) for member_id, held in by_member.items()}


def _fill(targets, by_partition, by_member, sharing: int, wanted: Mapping[str, int], unfilled: list[str]) -> None:
    """Walk the partitions once, giving each that lacks members to the unfilled members in turn; stop when a whole
    turn of the unfilled members assigns nothing (each already holds the partitions left)."""
    cursor, progressed = 0, False
    for tp in targets:
        holders = by_partition[tp]
        missing = sharing - len(holders)
        while missing > 0 and unfilled:
            if cursor >= len(unfilled):
                if not progressed:
                    break
                cursor, progressed = 0, False
            member_id = unfilled[cursor]
            if member_id in holders:
                cursor += 1
                continue
            holders.append(member_id)
            by_member[member_id].append(tp)
            missing -= 1
            progressed = True
            if len(by_member[member_id]) >= wanted[member_id]:
                unfilled.pop(cursor)
            else:
                cursor += 1
        if not unfilled:
            return


def _ordered(partitions) -> list[TopicPartition]:
    return sorted(partitions, key=lambda tp: (str(tp[0]), tp[1]))


def _as_assignment(partitions: set[TopicPartition]) -> Assignment:
    return assignment_of((topic, (partition,)) for topic, partition in partitions)
