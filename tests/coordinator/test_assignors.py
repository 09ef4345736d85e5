"""The KIP-848 server assignors (`consumer_group/assignors.py`): Kafka's uniform (homogeneous and heterogeneous)
and range results, stickiness, balance and completeness over many generated groups, and UNSUPPORTED_ASSIGNOR."""
from __future__ import annotations

import random
import uuid

import pytest

from compatbroker.coordinator.consumer_group.assignors import (ASSIGNORS, MemberSpec, UnknownAssignor, assign,
                                                               range_assignment, uniform_assignment)
from compatbroker.protocol.error_codes import ErrorCode

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
T3 = uuid.UUID(int=3)


def member(member_id, topics=(T1,), current=None, instance_id=None):
    return MemberSpec(member_id, instance_id, None, frozenset(topics),
                      {topic: frozenset(parts) for topic, parts in (current or {}).items()})


def group(*specs):
    return {spec.member_id: spec for spec in specs}


def sizes(assignment):
    return {member_id: sum(len(parts) for parts in topics.values()) for member_id, topics in assignment.items()}


def owners(assignment):
    """(topic, partition) -> member ids holding it."""
    held = {}
    for member_id, topics in assignment.items():
        for topic, partitions in topics.items():
            for partition in partitions:
                held.setdefault((topic, partition), []).append(member_id)
    return held


def check_complete(assignment, members, counts):
    """Every partition of a subscribed topic goes to exactly one of its subscribers, and nothing else is given."""
    held = owners(assignment)
    expected = {(topic, p) for spec in members.values() for topic in spec.subscribed_topic_ids
                if topic in counts for p in range(counts[topic])}
    assert set(held) == expected
    for (topic, _), holders in held.items():
        assert len(holders) == 1 and topic in members[holders[0]].subscribed_topic_ids


def then(previous, *specs):
    """The next round: the given members, each with its previous target as current."""
    return group(*(spec._replace(current=previous.get(spec.member_id, {})) for spec in specs))


# --- uniform, homogeneous -----------------------------------------------------------------------------------------

def test_one_member_gets_all_six_then_three_split_two_each():
    counts = {T1: 6}
    first = uniform_assignment(group(member("a")), counts)
    assert first == {"a": {T1: frozenset(range(6))}}
    second = uniform_assignment(then(first, member("a"), member("b")), counts)
    assert sizes(second) == {"a": 3, "b": 3} and second["a"][T1] <= first["a"][T1]
    third = uniform_assignment(then(second, member("a"), member("b"), member("c")), counts)
    assert sizes(third) == {"a": 2, "b": 2, "c": 2}
    assert third["a"][T1] <= second["a"][T1] and third["b"][T1] <= second["b"][T1]  # nobody swaps partitions
    check_complete(third, group(member("a"), member("b"), member("c")), counts)


def test_fresh_group_gets_consecutive_partitions_in_member_order():
    assignment = uniform_assignment(group(member("m3"), member("m1"), member("m2")), {T1: 6})
    assert assignment == {"m1": {T1: frozenset({0, 1})}, "m2": {T1: frozenset({2, 3})},
                          "m3": {T1: frozenset({4, 5})}}


def test_a_fresh_group_leaves_the_extra_partitions_to_the_last_members_as_kafka_4_2():
    assignment = uniform_assignment(group(member("m1"), member("m2"), member("m3")), {T1: 7})
    assert assignment == {"m1": {T1: frozenset({0, 1})}, "m2": {T1: frozenset({2, 3})},
                          "m3": {T1: frozenset({4, 5, 6})}}


def test_when_a_member_leaves_the_others_keep_theirs_and_share_its_partitions():
    counts = {T1: 6}
    before = {"a": {T1: frozenset({0, 1})}, "b": {T1: frozenset({2, 3})}, "c": {T1: frozenset({4, 5})}}
    after = uniform_assignment(then(before, member("a"), member("b")), counts)
    assert sizes(after) == {"a": 3, "b": 3}
    assert after["a"][T1] >= {0, 1} and after["b"][T1] >= {2, 3}


def test_the_extra_partition_stays_with_the_member_holding_it():
    before = {"a": {T1: frozenset({0, 1})}, "b": {T1: frozenset({2, 3})}, "c": {T1: frozenset({4, 5, 6})}}
    assert uniform_assignment(then(before, member("a"), member("b"), member("c")), {T1: 7}) == before


def test_unsubscribed_deleted_and_vanished_partitions_are_dropped_and_a_double_claim_is_settled():
    members = group(member("a", (T1,), {T1: {0, 1, 9}, T2: {0}}),  # 9 does not exist, T2 is no longer subscribed
                    member("b", (T1,), {T1: {1, 2}, T3: {0}}))     # 1 is a's too; T3 was deleted
    assignment = uniform_assignment(members, {T1: 4, T2: 1})
    assert assignment == {"a": {T1: frozenset({0, 1})}, "b": {T1: frozenset({2, 3})}}


def test_several_topics_are_balanced_as_one_pool():
    members = group(member("a", (T1, T2)), member("b", (T1, T2)))
    assignment = uniform_assignment(members, {T1: 3, T2: 1})
    assert sorted(sizes(assignment).values()) == [2, 2]
    check_complete(assignment, members, {T1: 3, T2: 1})


def test_topics_are_taken_in_kafkas_uuid_order():
    negative = uuid.UUID(int=1 << 127)  # its most significant half is negative as a Java long: it sorts first
    members = group(member("m1", (T1, negative)), member("m2", (T1, negative)))
    assert uniform_assignment(members, {T1: 1, negative: 1}) == {"m1": {negative: frozenset({0})},
                                                                 "m2": {T1: frozenset({0})}}


def test_no_members_or_no_topics_give_empty_assignments():
    assert uniform_assignment({}, {T1: 3}) == {}
    assert uniform_assignment(group(member("a", ())), {T1: 3}) == {"a": {}}
    assert uniform_assignment(group(member("a", (T2,))), {T1: 3}) == {"a": {}}


# --- uniform, heterogeneous ---------------------------------------------------------------------------------------

def test_heterogeneous_subscriptions_are_balanced_over_the_shared_topic():
    members = group(member("a", (T1,)), member("b", (T1, T2)))
    counts = {T1: 4, T2: 2}
    assignment = uniform_assignment(members, counts)
    check_complete(assignment, members, counts)
    assert sizes(assignment) == {"a": 3, "b": 3}
    assert assignment["b"][T2] == {0, 1}


def test_heterogeneous_keeps_current_partitions_when_balanced():
    current = {"a": {T1: {0, 1}}, "b": {T1: {2}, T2: {0, 1}}, "c": {T2: {2, 3}}}
    members = group(member("a", (T1,), current["a"]), member("b", (T1, T2), current["b"]),
                    member("c", (T2,), current["c"]))
    assignment = uniform_assignment(members, {T1: 3, T2: 4})
    assert assignment == {m: {t: frozenset(p) for t, p in topics.items()} for m, topics in current.items()}


def test_heterogeneous_moves_partitions_from_the_most_loaded_subscriber():
    members = group(member("a", (T1,), {T1: set(range(6))}), member("b", (T1, T2)))
    assignment = uniform_assignment(members, {T1: 6, T2: 2})
    check_complete(assignment, members, {T1: 6, T2: 2})
    assert sizes(assignment) == {"a": 4, "b": 4} and assignment["a"][T1] < set(range(6))


# --- properties over generated groups -----------------------------------------------------------------------------

def random_round(rng, previous, topics, counts, homogeneous):
    names = sorted(rng.sample([f"m{n}" for n in range(12)], rng.randint(1, 8)))
    shared = frozenset(rng.sample(topics, rng.randint(1, len(topics))))
    return {name: member(name, shared if homogeneous else rng.sample(topics, rng.randint(1, len(topics))),
                         previous.get(name, {})) for name in names}


@pytest.mark.parametrize("homogeneous", [True, False])
def test_uniform_is_complete_balanced_and_sticky_over_generated_rounds(homogeneous):
    rng = random.Random(848)
    topics = [uuid.UUID(int=n) for n in range(1, 5)]
    counts = {topic: rng.randint(1, 12) for topic in topics}
    previous: dict = {}
    for _ in range(300):
        members = random_round(rng, previous, topics, counts, homogeneous)
        assignment = uniform_assignment(members, counts)
        check_complete(assignment, members, counts)
        if homogeneous:
            total = sum(counts[t] for t in next(iter(members.values())).subscribed_topic_ids)
            quota = total // len(members)
            assert max(sizes(assignment).values()) - min(sizes(assignment).values()) <= 1
            for name, spec in members.items():  # each keeps what it may keep, up to the smaller quota
                still = {(t, p) for t, ps in spec.current.items() if t in spec.subscribed_topic_ids for p in ps}
                kept = {(t, p) for t, ps in assignment[name].items() for p in ps} & still
                assert len(kept) >= min(len(still), quota)
        else:
            for topic in counts:  # no partition of a topic could go to a subscriber two or more smaller
                subscribed = [m for m, spec in members.items() if topic in spec.subscribed_topic_ids]
                holders = [m for m in subscribed if topic in assignment[m]]
                if len(subscribed) >= 2 and holders:
                    assert max(sizes(assignment)[m] for m in holders) - min(
                        sizes(assignment)[m] for m in subscribed) <= 1
        previous = assignment


def test_a_large_group_is_assigned():
    members = group(*(member(f"member-{n:04}", (T1, T2)) for n in range(1000)))
    assignment = uniform_assignment(members, {T1: 5000, T2: 5000})
    assert set(sizes(assignment).values()) == {10}


# --- range --------------------------------------------------------------------------------------------------------

def test_range_gives_contiguous_ranges_extra_partitions_first():
    assignment = range_assignment(group(member("c"), member("a"), member("b")), {T1: 7})
    assert assignment == {"a": {T1: frozenset({0, 1, 2})}, "b": {T1: frozenset({3, 4})},
                          "c": {T1: frozenset({5, 6})}}


def test_range_co_partitions_topics_of_equal_size():
    members = group(member("a", (T1, T2)), member("b", (T1, T2)), member("c", (T1, T2)))
    assignment = range_assignment(members, {T1: 6, T2: 6})
    for name in "abc":
        assert assignment[name][T1] == assignment[name][T2] and len(assignment[name][T1]) == 2


def test_range_orders_static_members_first_by_instance_id():
    members = group(member("a"), member("z", instance_id="i-2"), member("y", instance_id="i-1"))
    assignment = range_assignment(members, {T1: 3})
    assert assignment == {"y": {T1: frozenset({0})}, "z": {T1: frozenset({1})}, "a": {T1: frozenset({2})}}


def test_range_heterogeneous_splits_each_topic_among_its_subscribers():
    members = group(member("a", (T1,)), member("b", (T1, T2)), member("c", (T2,)))
    assignment = range_assignment(members, {T1: 4, T2: 3})
    assert assignment == {"a": {T1: frozenset({0, 1})}, "b": {T1: frozenset({2, 3}), T2: frozenset({0, 1})},
                          "c": {T2: frozenset({2})}}


def test_range_with_more_members_than_partitions_leaves_some_empty():
    assignment = range_assignment(group(member("a"), member("b"), member("c")), {T1: 2})
    assert assignment == {"a": {T1: frozenset({0})}, "b": {T1: frozenset({1})}, "c": {}}


# --- by name ------------------------------------------------------------------------------------------------------

def test_assign_by_name_and_unknown_assignor():
    members = group(member("a"))
    assert ASSIGNORS == ("uniform", "range")
    assert assign("uniform", members, {T1: 2}) == assign("range", members, {T1: 2}) == {"a": {T1: frozenset({0, 1})}}
    with pytest.raises(UnknownAssignor) as raised:
        assign("sticky", members, {T1: 2})
    assert raised.value.error_code is ErrorCode.UNSUPPORTED_ASSIGNOR
    assert raised.value.message == "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
