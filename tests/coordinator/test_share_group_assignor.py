"""The `simple` share group assignor (Kafka 4.2's SimpleAssignor): balance first (each partition shared by
ceil(members / partitions) members, member counts within one of each other), then stickiness, homogeneous and
heterogeneous subscriptions."""
from __future__ import annotations

import itertools
import math
import uuid

import pytest

from compatbroker.coordinator.share_group.assignor import MemberSpec, assign

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


def members(count, topics=frozenset({T1}), current=None):
    current = current or {}
    return {f"m{i}": MemberSpec(frozenset(topics), current.get(f"m{i}", {})) for i in range(count)}


def sizes(assignment, topic=T1):
    return {member: len(parts.get(topic, ())) for member, parts in assignment.items()}


def holders(assignment, topic=T1):
    counts = {}
    for parts in assignment.values():
        for partition in parts.get(topic, ()):
            counts[partition] = counts.get(partition, 0) + 1
    return counts


def test_no_members_no_assignment():
    assert assign({}, {T1: range(3)}) == {}


def test_one_member_gets_every_partition():
    assert assign(members(1), {T1: range(6)}) == {"m0": {T1: frozenset(range(6))}}


def test_members_split_partitions_without_sharing_when_there_are_enough():
    result = assign(members(3), {T1: range(6)})
    assert sorted(sizes(result).values()) == [2, 2, 2]
    assert holders(result) == {p: 1 for p in range(6)}


def test_more_members_than_partitions_share_each_partition():
    result = assign(members(5), {T1: range(2)})
    # desired sharing ceil(5/2) = 3 per partition, member counts 2,1,1,1,1 (Kafka's fractional rule)
    assert holders(result) == {0: 3, 1: 3}
    assert sorted(sizes(result).values()) == [1, 1, 1, 1, 2]


@pytest.mark.parametrize("member_count, partition_count", list(itertools.product(range(1, 8), range(1, 8))))
def test_balance_holds_for_every_shape(member_count, partition_count):
    result = assign(members(member_count), {T1: range(partition_count)})
    counts = list(sizes(result).values())
    assert min(counts) >= 1 and max(counts) - min(counts) <= 1
    sharing = math.ceil(member_count / partition_count)
    assert holders(result) == {p: sharing for p in range(partition_count)}


def test_a_joining_member_takes_partitions_from_the_others_who_keep_the_rest():
    current = {"m0": {T1: frozenset({0, 1, 2})}, "m1": {T1: frozenset({3, 4, 5})}}
    result = assign(members(3, current=current), {T1: range(6)})
    assert result["m0"][T1] < current["m0"][T1] and len(result["m0"][T1]) == 2
    assert result["m1"][T1] < current["m1"][T1] and len(result["m1"][T1]) == 2
    assert result["m2"][T1] == frozenset(range(6)) - result["m0"][T1] - result["m1"][T1]


def test_partitions_of_a_topic_no_longer_subscribed_are_revoked():
    current = {"m0": {T1: frozenset({0}), T2: frozenset({0, 1})}}
    result = assign({"m0": MemberSpec(frozenset({T1}), current["m0"])}, {T1: range(2), T2: range(2)})
    assert result == {"m0": {T1: frozenset({0, 1})}}


def test_a_subscribed_topic_that_does_not_exist_assigns_nothing():
    result = assign({"m0": MemberSpec(frozenset({T1, T2}), {})}, {T1: range(1)})
    assert result == {"m0": {T1: frozenset({0})}}


def test_heterogeneous_subscriptions_balance_each_topic_among_its_subscribers():
    specs = {"a": MemberSpec(frozenset({T1}), {}), "b": MemberSpec(frozenset({T2}), {}),
             "c": MemberSpec(frozenset({T1, T2}), {})}
    result = assign(specs, {T1: range(4), T2: range(2)})
    assert set(result["a"]) == {T1} and set(result["b"]) == {T2}
    assert len(result["a"][T1]) == 2 and len(result["c"][T1]) == 2
    assert result["a"][T1] | result["c"][T1] == frozenset(range(4))
    assert len(result["b"][T2]) == 1 and len(result["c"][T2]) == 1
    assert result["b"][T2] | result["c"][T2] == frozenset(range(2))
