"""Reconciliation of a KIP-848 member towards its target assignment (Kafka's CurrentAssignmentBuilder): revoke
before assign, unreleased partitions, epochs, subscription changes, the UNKNOWN state."""
from __future__ import annotations

import uuid

import pytest

from compatbroker.coordinator.consumer_group.model import ConsumerMember, MemberState
from compatbroker.coordinator.consumer_group.reconciliation import FencedMember, reconcile

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
BOTH = frozenset({T1, T2})


def member(epoch=10, state=MemberState.STABLE, assigned=None, pending=None) -> ConsumerMember:
    return ConsumerMember("m", member_epoch=epoch, previous_member_epoch=epoch - 1, state=state,
                          assigned_partitions=assigned or {}, partitions_pending_revocation=pending or {})


def parts(**topics) -> dict:
    ids = {"t1": T1, "t2": T2}
    return {ids[name]: frozenset(numbers) for name, numbers in topics.items()}


def free(topic_id, partition):
    return -1


def owned_by_other(*pairs):
    taken = set(pairs)
    return lambda topic_id, partition: 5 if (topic_id, partition) in taken else -1


def step(m, *, target_epoch=11, target=None, partition_epoch=free, owned=None, subscribed=BOTH, changed=False):
    return reconcile(m, target_epoch=target_epoch, target=target or {}, partition_epoch=partition_epoch,
                     owned=owned, subscribed_topic_ids=subscribed, subscription_changed=changed)


def test_a_stable_member_at_the_target_epoch_is_unchanged():
    m = member(assigned=parts(t1=[0, 1]))
    assert step(m, target_epoch=10, target=parts(t1=[0, 1]), owned=parts(t1=[0, 1])) is m


def test_new_free_partitions_are_assigned_at_the_target_epoch():
    m = member(assigned=parts(t1=[0]))
    after = step(m, target=parts(t1=[0, 1], t2=[3]), owned=parts(t1=[0]))
    assert after.state is MemberState.STABLE
    assert (after.member_epoch, after.previous_member_epoch) == (11, 10)
    assert after.assigned_partitions == parts(t1=[0, 1], t2=[3])


def test_partitions_to_give_up_are_revoked_before_anything_is_assigned():
    m = member(assigned=parts(t1=[0, 1, 2]))
    after = step(m, target=parts(t1=[0], t2=[5]), owned=parts(t1=[0, 1, 2]))
    assert after.state is MemberState.UNREVOKED_PARTITIONS
    assert after.member_epoch == 10  # stays at its epoch until it has revoked
    assert after.assigned_partitions == parts(t1=[0])
    assert after.partitions_pending_revocation == parts(t1=[1, 2])


def test_revocation_waits_while_the_member_still_owns_a_revoked_partition():
    m = member(state=MemberState.UNREVOKED_PARTITIONS, assigned=parts(t1=[0]), pending=parts(t1=[1, 2]))
    assert step(m, target=parts(t1=[0], t2=[5]), owned=parts(t1=[0, 2])) is m
    assert step(m, target=parts(t1=[0], t2=[5]), owned=None) is m  # not reported: still owned


def test_once_revoked_the_member_moves_to_the_next_epoch_and_gets_its_new_partitions():
    m = member(state=MemberState.UNREVOKED_PARTITIONS, assigned=parts(t1=[0]), pending=parts(t1=[1, 2]))
    after = step(m, target=parts(t1=[0], t2=[5]), owned=parts(t1=[0]))
    assert after.state is MemberState.STABLE
    assert after.member_epoch == 11
    assert after.assigned_partitions == parts(t1=[0], t2=[5])
    assert after.partitions_pending_revocation == {}


def test_a_partition_another_member_still_owns_is_not_given():
    m = member(assigned=parts(t1=[0]))
    after = step(m, target=parts(t1=[0, 1, 2]), partition_epoch=owned_by_other((T1, 2)), owned=parts(t1=[0]))
    assert after.state is MemberState.UNRELEASED_PARTITIONS
    assert after.member_epoch == 11
    assert after.assigned_partitions == parts(t1=[0, 1])
    # Released later: the next heartbeat hands it over.
    later = step(after, target=parts(t1=[0, 1, 2]), owned=parts(t1=[0, 1]))
    assert later.state is MemberState.STABLE
    assert later.assigned_partitions == parts(t1=[0, 1, 2])


def test_a_revocation_the_member_already_made_needs_no_round_trip():
    m = member(assigned=parts(t1=[0, 1]))
    after = step(m, target=parts(t1=[0]), owned=parts(t1=[0]))
    assert after.state is MemberState.STABLE
    assert after.member_epoch == 11
    assert after.assigned_partitions == parts(t1=[0])


def test_unsubscribed_topics_are_taken_away_before_the_target_catches_up():
    m = member(assigned=parts(t1=[0], t2=[1]))
    after = step(m, target_epoch=10, target=parts(t1=[0], t2=[1]), owned=parts(t1=[0], t2=[1]),
                 subscribed=frozenset({T1}), changed=True)
    assert after.state is MemberState.UNREVOKED_PARTITIONS
    assert after.member_epoch == 10
    assert after.assigned_partitions == parts(t1=[0])
    assert after.partitions_pending_revocation == parts(t2=[1])
    # Revoked, but the target of the new epoch is not computed yet: the epoch does not pass the target's.
    done = step(after, target_epoch=10, target=parts(t1=[0], t2=[1]), owned=parts(t1=[0]),
                subscribed=frozenset({T1}))
    assert done.member_epoch == 10
    assert done.state is MemberState.STABLE
    assert done.assigned_partitions == parts(t1=[0])


def test_an_unknown_state_fences_a_member_that_owns_partitions():
    m = member(state=MemberState.UNKNOWN, assigned=parts(t1=[0]))
    with pytest.raises(FencedMember):
        step(m, target=parts(t1=[0]), owned=parts(t1=[0]))
    after = step(m, target=parts(t1=[0]), owned={})
    assert after.state is MemberState.STABLE and after.member_epoch == 11
