"""The server-side assignors of KIP-848 consumer groups (`group.consumer.assignors`): `uniform` and `range`, by
Kafka's rules. Pure functions: members and topic sizes in, each member's target assignment out.

`uniform` (Kafka's UniformAssignor) balances partitions across members (sizes differ by at most one where the
subscriptions allow it) and, second to that, keeps each member's current target partitions:
- every member subscribed to the same topics (homogeneous): each member, in member id order, gets a quota (total /
  members, plus one of the `total % members` extra partitions while some are left), keeps its current partitions up
  to its quota and gives up the rest; a member that does not hold enough to use its extra partition leaves it to a
  later member, unless the members left are needed to take the extras (Kafka 4.2's rule, which keeps moves few);
  the free partitions (those nobody held, then those given up) then fill the members below their quota, in order;
- different subscriptions (heterogeneous): members keep what they still subscribe to; the free partitions go, topic
  by topic (most partitions per subscriber first, then fewest subscribers, then topic id), each to its least
  loaded subscriber; then partitions move from the most to the least loaded subscriber of each topic until their
  sizes differ by at most one, in at most 16 rounds over the topics (Kafka's bound; overlapping subscriptions can
  leave the group almost balanced, as in Kafka).

`range` (Kafka's RangeAssignor for KIP-848) gives each subscriber of a topic a contiguous range of its partitions
(partitions / subscribers, one more for the first `partitions % subscribers`), members ordered static members first
by instance id, then the others by member id. Topics with the same partition count are therefore co-partitioned
(partition p of each goes to the same member) when the members subscribe to the same topics. It is sticky only
through static members' instance ids, as Kafka's is (it recomputes the ranges every time).

Orders are Kafka's where its own are deterministic (member ids as Java strings, topic ids as Kafka's Uuid compares
them), and member id order where Kafka's is a hash map's. Both assignors ignore a subscribed topic missing from
`partitions_per_topic` (deleted meanwhile) and current partitions that no longer exist; a partition two members
claim stays with the first in member order. Neither places by rack (Kafka 4.2's do not either).
"""
from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from ...protocol.error_codes import ErrorCode

__all__ = ["ASSIGNORS", "MemberSpec", "UnknownAssignor", "assign", "range_assignment", "uniform_assignment"]

UNIFORM = "uniform"
RANGE = "range"
ASSIGNORS = (UNIFORM, RANGE)

MAX_BALANCE_ROUNDS = 16  # Kafka's bound on the heterogeneous balancing passes

TopicPartition = tuple[uuid.UUID, int]
Assignment = dict[uuid.UUID, frozenset[int]]


class MemberSpec(NamedTuple):
    """What an assignor knows of a member: its ids, the topics it subscribes to (by id, those that exist), and its
    current target assignment."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    subscribed_topic_ids: frozenset[uuid.UUID]
    current: Mapping[uuid.UUID, frozenset[int]]


class UnknownAssignor(ValueError):
    """A ServerAssignor the broker does not offer: UNSUPPORTED_ASSIGNOR with Kafka's message."""

    error_code = ErrorCode.UNSUPPORTED_ASSIGNOR

    def __init__(self, name: str, supported: Iterable[str] = ASSIGNORS):
        self.message = f"ServerAssignor {name} is not supported. Supported assignors: {', '.join(supported)}."
        super().__init__(self.message)


def assign(name: str, members: Mapping[str, MemberSpec], partitions_per_topic: Mapping[uuid.UUID, int]
           ) -> dict[str, Assignment]:
    """The target assignment of every member (an empty one for a member given nothing) by the assignor `name`."""
    if name == UNIFORM:
        return uniform_assignment(members, partitions_per_topic)
    if name == RANGE:
        return range_assignment(members, partitions_per_topic)
    raise UnknownAssignor(name)


# --- uniform ------------------------------------------------------------------------------------------------------

def uniform_assignment(members: Mapping[str, MemberSpec], partitions_per_topic: Mapping[uuid.UUID, int]
                       ) -> dict[str, Assignment]:
    """Kafka's UniformAssignor (see the module docstring)."""
    if not members:
        return {}
    subscriptions = {spec.subscribed_topic_ids for spec in members.values()}
    if len(subscriptions) == 1:
        return _uniform_homogeneous(members, partitions_per_topic)
    return _uniform_heterogeneous(members, partitions_per_topic)


def _uniform_homogeneous(members: Mapping[str, MemberSpec], counts: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
    topics = sorted((topic for topic in next(iter(members.values())).subscribed_topic_ids if counts.get(topic, 0) > 0),
                    key=_uuid_order)
    held = _current_holdings(members, counts, {member_id: set(topics) for member_id in members})
    kept, room, revoked = _keep_within_quotas(sorted(members, key=_java_order), held,
                                              sum(counts[topic] for topic in topics))
    # Free: the partitions nobody held, in topic and partition order, then those given up (Kafka's order).
    held_before = {tp for partitions in held.values() for tp in partitions}
    free = iter([tp for tp in _all_partitions(topics, counts) if tp not in held_before] + revoked)
    for member_id, space in room:
        kept[member_id].extend(itertools.islice(free, space))
    return {member_id: _as_assignment(kept[member_id]) for member_id in members}


def _keep_within_quotas(order: list[str], held: dict[str, list[TopicPartition]], total: int):
    """Each member's quota, what it keeps of what it holds, the room left under its quota (in member order) and
    the partitions given up."""
    base, extra = divmod(total, len(order))
    kept: dict[str, list[TopicPartition]] = {}
    room: list[tuple[str, int]] = []
    revoked: list[TopicPartition] = []
    for position, member_id in enumerate(order):
        quota = base + (1 if extra > 0 else 0)
        kept[member_id] = held[member_id][:quota]
        revoked.extend(held[member_id][quota:])
        if quota > base and len(kept[member_id]) < quota and len(order) - position > extra:
            quota = base  # Kafka 4.2: leave the extra partition to a member that holds it, unless one must take it
        if quota > base:
            extra -= 1
        if quota > len(kept[member_id]):
            room.append((member_id, quota - len(kept[member_id])))
    return kept, room, revoked


def _uniform_heterogeneous(members: Mapping[str, MemberSpec], counts: Mapping[uuid.UUID, int]
                           ) -> dict[str, Assignment]:
    order = sorted(members, key=_java_order)
    subscribed = {member_id: {t for t in members[member_id].subscribed_topic_ids if counts.get(t, 0) > 0}
                  for member_id in order}
    subscribers: dict[uuid.UUID, list[str]] = {}
    for member_id in order:
        for topic in subscribed[member_id]:
            subscribers.setdefault(topic, []).append(member_id)
    state = _Placement(order)
    for member_id, partitions in _current_holdings(members, counts, subscribed).items():
        for tp in partitions:
            state.give(tp, member_id)
    topics = sorted(subscribers, key=lambda topic: (-counts[topic] / len(subscribers[topic]),
                                                    len(subscribers[topic]), _uuid_order(topic)))
    for topic in topics:
        for partition in range(counts[topic]):
            if (topic, partition) not in state.owner:
                state.give((topic, partition), state.least_loaded(subscribers[topic]))
    _balance(state, [topic for topic in topics if len(subscribers[topic]) >= 2], subscribers)
    return {member_id: _as_assignment(state.held[member_id]) for member_id in members}


def _balance(state: _Placement, topics: list[uuid.UUID], subscribers: dict[uuid.UUID, list[str]]) -> None:
    """Move partitions of each topic from its most to its least loaded subscriber while their sizes differ by more
    than one; stop after a round without a move, or after MAX_BALANCE_ROUNDS rounds."""
    for _ in range(MAX_BALANCE_ROUNDS):
        moved = False
        for topic in topics:
            while True:
                donors = [m for m in subscribers[topic] if state.holds(m, topic)]
                if not donors:
                    break
                donor = state.most_loaded(donors)
                receiver = state.least_loaded(subscribers[topic])
                if state.size(donor) - state.size(receiver) <= 1:
                    break
                state.give(max(tp for tp in state.held[donor] if tp[0] == topic), receiver)
                moved = True
        if not moved:
            return


class _Placement:
    """Who holds which partition while an assignment is built; members ranked by (size, order)."""

    def __init__(self, order: list[str]):
        self.rank = {member_id: index for index, member_id in enumerate(order)}
        self.held: dict[str, set[TopicPartition]] = {member_id: set() for member_id in order}
        self.owner: dict[TopicPartition, str] = {}
        self._per_topic: dict[tuple[str, uuid.UUID], int] = {}

    def give(self, tp: TopicPartition, member_id: str) -> None:
        previous = self.owner.get(tp)
        if previous is not None:
            self.held[previous].discard(tp)
            self._per_topic[(previous, tp[0])] -= 1
        self.owner[tp] = member_id
        self.held[member_id].add(tp)
        self._per_topic[(member_id, tp[0])] = self._per_topic.get((member_id, tp[0]), 0) + 1

    def size(self, member_id: str) -> int:
        return len(self.held[member_id])

    def holds(self, member_id: str, topic: uuid.UUID) -> bool:
        return self._per_topic.get((member_id, topic), 0) > 0

    def least_loaded(self, member_ids: list[str]) -> str:
        return min(member_ids, key=lambda m: (len(self.held[m]), self.rank[m]))

    def most_loaded(self, member_ids: list[str]) -> str:
        return max(member_ids, key=lambda m: (len(self.held[m]), self.rank[m]))


# --- range --------------------------------------------------------------------------------------------------------

def range_assignment(members: Mapping[str, MemberSpec], partitions_per_topic: Mapping[uuid.UUID, int]
                     ) -> dict[str, Assignment]:
    """Kafka's RangeAssignor for KIP-848 (see the module docstring)."""
    order = sorted(members.values(), key=_range_order)
    subscriber_counts: dict[uuid.UUID, int] = {}
    for spec in order:
        for topic in spec.subscribed_topic_ids:
            if partitions_per_topic.get(topic, 0) > 0:
                subscriber_counts[topic] = subscriber_counts.get(topic, 0) + 1
    next_start = dict.fromkeys(subscriber_counts, 0)
    extras = {topic: partitions_per_topic[topic] % count for topic, count in subscriber_counts.items()}
    result: dict[str, Assignment] = {}
    for spec in order:
        assignment = {}
        for topic in sorted(spec.subscribed_topic_ids & subscriber_counts.keys(), key=_uuid_order):
            partitions = partitions_per_topic[topic]
            quota = partitions // subscriber_counts[topic]
            if extras[topic] > 0:
                quota += 1
                extras[topic] -= 1
            start = next_start[topic]
            end = min(start + quota, partitions)
            next_start[topic] = end
            if start < end:
                assignment[topic] = frozenset(range(start, end))
        result[spec.member_id] = assignment
    return result


def _range_order(spec: MemberSpec):
    """Static members first, by instance id; then the others, by member id (Java's String order)."""
    if spec.instance_id is not None:
        return (0, _java_order(spec.instance_id))
    return (1, _java_order(spec.member_id))


# --- helpers ------------------------------------------------------------------------------------------------------

def _java_order(text: str) -> bytes:
    """A key sorting strings as Java's String.compareTo does (by UTF-16 code units)."""
    return text.encode("utf-16-be", "surrogatepass")


def _uuid_order(topic_id: uuid.UUID) -> tuple[int, int]:
    """A key sorting topic ids as Kafka's Uuid.compareTo does (its two halves as signed longs)."""
    return _signed64(topic_id.int >> 64), _signed64(topic_id.int & 0xFFFFFFFFFFFFFFFF)


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _current_holdings(members: Mapping[str, MemberSpec], counts: Mapping[uuid.UUID, int],
                      subscribed: Mapping[str, set[uuid.UUID]]) -> dict[str, list[TopicPartition]]:
    """Each member's current partitions it may keep, sorted: of topics it subscribes to, that exist, and not
    claimed by a member earlier in member id order."""
    claimed: set[TopicPartition] = set()
    held: dict[str, list[TopicPartition]] = {}
    for member_id in sorted(members, key=_java_order):
        keep = []
        for topic in sorted(members[member_id].current, key=_uuid_order):
            if topic not in subscribed[member_id]:
                continue
            for partition in sorted(members[member_id].current[topic]):
                tp = (topic, partition)
                if 0 <= partition < counts.get(topic, 0) and tp not in claimed:
                    claimed.add(tp)
                    keep.append(tp)
        held[member_id] = keep
    return held


def _all_partitions(topics: Iterable[uuid.UUID], counts: Mapping[uuid.UUID, int]) -> list[TopicPartition]:
    return [(topic, partition) for topic in topics for partition in range(counts[topic])]


def _as_assignment(partitions: Iterable[TopicPartition]) -> Assignment:
    by_topic: dict[uuid.UUID, set[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, set()).add(partition)
    return {topic: frozenset(values) for topic, values in by_topic.items()}
