"""Static membership (KIP-345, `group.instance.id`): a restarted instance takes its place back without a
rebalance, the id it replaces is fenced, a static leader is told to skip assignment (v9) or is answered as a
follower (older versions), and static members survive join phases they miss."""
from __future__ import annotations

import asyncio

import pytest

from compatbroker.coordinator import GroupState
from compatbroker.protocol.error_codes import ErrorCode

from tests.coordinator.membership_support import (StandInStore, WriteFailed, async_test, finished, heartbeat, join,
                                                  join_task, leave, settle, started_coordinator, still_parked,
                                                  subscription, sync, sync_task)

GROUP = "g"


async def static_group(broker, *instances: str, version: int = 9, **options):
    """Static members (no MEMBER_ID_REQUIRED for them) join together and sync; returns their answers by instance.
    Each member's assignment is its instance name."""
    tasks = [join_task(broker, GROUP, instance=i, version=version, client_id=i, **options) for i in instances]
    answers = dict(zip(instances, await finished(asyncio.gather(*tasks))))
    leader = next(a for a in answers.values() if a.member_id == a.leader)
    plan = {a.member_id: i.encode() for i, a in answers.items()}
    followers = [sync_task(broker, GROUP, a.member_id, 1, instance=i) for i, a in answers.items() if a is not leader]
    leader_instance = next(i for i, a in answers.items() if a is leader)
    await sync(broker, GROUP, leader.member_id, 1, plan, instance=leader_instance)
    await finished(asyncio.gather(*followers))
    return answers


@async_test
async def test_a_restarted_static_follower_takes_its_place_back_without_a_rebalance(broker):
    coordinator = await started_coordinator(broker, store=StandInStore)
    members = await static_group(broker, "i-1", "i-2")
    follower_instance = next(i for i, a in members.items() if a.member_id != a.leader)
    old = members[follower_instance]
    back = await finished(join_task(broker, GROUP, instance=follower_instance))
    assert back.error_code == ErrorCode.NONE
    assert back.member_id != old.member_id and back.member_id.startswith(f"{follower_instance}-")
    assert (back.generation_id, back.leader, back.members, back.skip_assignment) == (1, old.leader, [], False)
    group = coordinator.group(GROUP)
    assert (group.state, group.generation_id) == (GroupState.STABLE, 1)
    assert coordinator.offsets.stored[-1][2] == 1 and back.member_id in coordinator.offsets.stored[-1][3]
    synced = await sync(broker, GROUP, back.member_id, 1, instance=follower_instance)
    assert synced.assignment == follower_instance.encode()  # the place's assignment
    # The previous incarnation is fenced everywhere
    assert await heartbeat(broker, GROUP, old.member_id, 1, instance=follower_instance) == \
        ErrorCode.FENCED_INSTANCE_ID
    assert (await sync(broker, GROUP, old.member_id, 1, instance=follower_instance)).error_code == \
        ErrorCode.FENCED_INSTANCE_ID
    assert (await join(broker, GROUP, old.member_id, instance=follower_instance)).error_code == \
        ErrorCode.FENCED_INSTANCE_ID
    assert coordinator.validate_offset_commit(GROUP, 1, old.member_id, follower_instance) == \
        ErrorCode.FENCED_INSTANCE_ID
    assert await heartbeat(broker, GROUP, back.member_id, 1, instance="unknown") == ErrorCode.UNKNOWN_MEMBER_ID


@async_test
async def test_a_restarted_static_leader_skips_assignment_from_v9(broker):
    await started_coordinator(broker, store=StandInStore)
    members = await static_group(broker, "i-1", "i-2")
    leader_instance = next(i for i, a in members.items() if a.member_id == a.leader)
    back = await finished(join_task(broker, GROUP, instance=leader_instance, version=9))
    assert (back.leader, back.skip_assignment, back.generation_id) == (back.member_id, True, 1)
    assert len(back.members) == 2


@pytest.mark.parametrize("version", [5, 6, 7, 8])
@async_test
async def test_before_v9_a_restarted_static_leader_is_answered_as_a_follower(broker, version):
    await started_coordinator(broker, store=StandInStore)
    members = await static_group(broker, "i-1", "i-2")
    leader_instance = next(i for i, a in members.items() if a.member_id == a.leader)
    old_leader = members[leader_instance].member_id
    back = await finished(join_task(broker, GROUP, instance=leader_instance, version=version))
    # Told the old leader id, it does not assign again: it just syncs and gets its assignment.
    assert (back.error_code, back.leader, back.members, back.generation_id) == (ErrorCode.NONE, old_leader, [], 1)
    synced = await sync(broker, GROUP, back.member_id, 1, instance=leader_instance, version=min(version, 5))
    assert synced.assignment == leader_instance.encode()


@async_test
async def test_a_static_member_rejoining_with_another_protocol_choice_rebalances(broker):
    coordinator = await started_coordinator(broker, store=StandInStore)
    await static_group(broker, "i-1", names=("range", "roundrobin"))
    # It now prefers roundrobin: the group's choice changes, which needs a new generation.
    answer = await finished(join_task(broker, GROUP, instance="i-1", names=("roundrobin", "range")))
    assert (answer.generation_id, answer.protocol_name) == (2, "roundrobin")
    assert coordinator.group(GROUP).state is GroupState.COMPLETING_REBALANCE


@async_test
async def test_a_static_member_rejoining_during_completing_rebalance_starts_a_new_round(broker):
    coordinator = await started_coordinator(broker, store=StandInStore)
    tasks = [join_task(broker, GROUP, instance=i, client_id=i) for i in ("i-1", "i-2")]
    answers = await finished(asyncio.gather(*tasks))
    follower = next(a for a in answers if a.member_id != a.leader)
    follower_instance = "i-1" if answers[0] is follower else "i-2"
    rejoined = join_task(broker, GROUP, instance=follower_instance)
    await settle()
    group = coordinator.group(GROUP)
    assert group.state is GroupState.PREPARING_REBALANCE and still_parked(rejoined)
    leader = next(a for a in answers if a is not follower)
    leader_again = join_task(broker, GROUP, leader.member_id, instance="i-2" if follower_instance == "i-1" else "i-1")
    second_round = await finished(asyncio.gather(rejoined, leader_again))
    assert {a.generation_id for a in second_round} == {2}


@async_test
async def test_a_parked_request_of_a_replaced_instance_is_fenced(broker):
    await started_coordinator(broker, store=StandInStore)
    members = await static_group(broker, "i-1", "i-2")
    leader_instance = next(i for i, a in members.items() if a.member_id == a.leader)
    old_leader = members[leader_instance]
    parked = join_task(broker, GROUP, old_leader.member_id, instance=leader_instance)  # waits for the other member
    await settle()
    assert still_parked(parked)
    replacement = join_task(broker, GROUP, instance=leader_instance)
    fenced = await finished(parked)
    assert (fenced.error_code, fenced.member_id) == (ErrorCode.FENCED_INSTANCE_ID, old_leader.member_id)
    replacement.cancel()


@async_test
async def test_static_members_that_miss_a_join_phase_stay(broker):
    coordinator = await started_coordinator(broker, store=StandInStore)
    members = await static_group(broker, "i-1", "i-2", rebalance_ms=200)
    leader_instance = next(i for i, a in members.items() if a.member_id == a.leader)
    other = next(i for i in members if i != leader_instance)
    # The other instance is down (no rejoin); the join phase ends at the rebalance timeout, keeping it.
    answer = await finished(join_task(broker, GROUP, members[leader_instance].member_id, instance=leader_instance,
                                      rebalance_ms=200))
    assert answer.generation_id == 2
    assert sorted(m.member_id for m in answer.members) == sorted(a.member_id for a in members.values())
    assert members[other].member_id in coordinator.group(GROUP).members


@async_test
async def test_an_admin_removes_a_static_member_by_instance_id(broker):
    coordinator = await started_coordinator(broker, store=StandInStore)
    members = await static_group(broker, "i-1", "i-2")
    answer = await leave(broker, GROUP, ("", "i-2"))
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in answer.members] == \
        [("", "i-2", ErrorCode.NONE)]
    group = coordinator.group(GROUP)
    assert members["i-2"].member_id not in group.members and "i-2" not in group.static_members
    assert group.state is GroupState.PREPARING_REBALANCE
    wrong = await leave(broker, GROUP, ("not-its-id", "i-1"))
    assert wrong.members[0].error_code == ErrorCode.FENCED_INSTANCE_ID


@async_test
async def test_a_failed_write_puts_the_replaced_static_member_back(broker):
    coordinator = await started_coordinator(broker, store=StandInStore)
    members = await static_group(broker, "i-1", "i-2")
    follower_instance = next(i for i, a in members.items() if a.member_id != a.leader)
    old = members[follower_instance]
    coordinator.offsets.fail_with = WriteFailed(ErrorCode.NOT_COORDINATOR)
    back = await finished(join_task(broker, GROUP, instance=follower_instance))
    assert (back.error_code, back.member_id) == (ErrorCode.NOT_COORDINATOR, "")
    group = coordinator.group(GROUP)
    assert group.static_members[follower_instance] == old.member_id and old.member_id in group.members
    assert await heartbeat(broker, GROUP, old.member_id, 1, instance=follower_instance) == ErrorCode.NONE


@async_test
async def test_static_replacement_with_old_subscription_metadata(broker):
    """The replacement's own metadata is what the group keeps (a restarted consumer may subscribe anew)."""
    coordinator = await started_coordinator(broker, store=StandInStore)
    await static_group(broker, "i-1")
    back = await finished(join_task(broker, GROUP, instance="i-1", metadata=subscription("t", "u")))
    assert back.generation_id == 1
    assert coordinator.group(GROUP).members[back.member_id].metadata("range") == subscription("t", "u")
