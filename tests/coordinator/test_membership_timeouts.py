"""Timers of the classic protocol, with small timeouts: sessions expel silent members, the rebalance timeout ends
join and sync phases without the stragglers, a new member's parked join and an unused MEMBER_ID_REQUIRED id
expire, and the initial rebalance delay gathers members. Each test awaits the timer's effect (an answer, or the
state the group enters), never a sleep."""
from __future__ import annotations

import asyncio
import dataclasses

import pytest

from compatbroker.coordinator import GroupState
from compatbroker.coordinator.membership import heartbeat_key
from compatbroker.protocol.error_codes import ErrorCode

from tests.coordinator.membership_support import (FAST, StandInStore, async_test, finished, form_group, heartbeat,
                                                  join, join_new_members, join_task, reaches, settle,
                                                  started_coordinator, still_parked, sync, watch)

GROUP = "g"
SHORT_MS = 200
LONG_MS = 20_000  # longer than any test may run: reaching it would fail the test


@pytest.mark.parametrize("session_ms, rebalance_ms", [(SHORT_MS, LONG_MS), (LONG_MS, SHORT_MS)],
                         ids=["session-timeout", "rebalance-timeout"])
@async_test
async def test_a_member_that_does_not_rejoin_is_dropped_at_the_shorter_timeout(broker, session_ms, rebalance_ms):
    """A short session: the silent follower is expelled when its session runs out. A short rebalance timeout:
    the join phase ends without it."""
    await started_coordinator(broker, store=StandInStore)
    leader, follower = await form_group(broker, GROUP, 2, session_ms=session_ms, rebalance_ms=rebalance_ms)
    loop = asyncio.get_running_loop()
    began = loop.time()
    # The leader rejoins (and so stays alive); the follower says nothing.
    rejoined = await finished(join_task(broker, GROUP, leader.member_id, session_ms=session_ms,
                                        rebalance_ms=rebalance_ms))
    assert loop.time() - began >= SHORT_MS / 1000 * 0.9
    assert (rejoined.generation_id, [m.member_id for m in rejoined.members]) == (2, [leader.member_id])
    assert await heartbeat(broker, GROUP, follower.member_id, 1) == ErrorCode.UNKNOWN_MEMBER_ID


@async_test
async def test_a_group_whose_members_all_go_silent_becomes_empty(broker):
    coordinator = await started_coordinator(broker, store=StandInStore)
    await form_group(broker, GROUP, 2, session_ms=SHORT_MS, rebalance_ms=LONG_MS)
    group = coordinator.group(GROUP)
    states = watch(group)
    await reaches(states, GroupState.PREPARING_REBALANCE)
    await reaches(states, GroupState.EMPTY)
    assert (group.generation_id, group.members) == (2, {})
    await settle()
    assert coordinator.offsets.stored[-1] == (GROUP, "Empty", 2, {})


@async_test
async def test_heartbeats_renew_the_session_and_other_generations_do_not(broker):
    coordinator = await started_coordinator(broker, store=StandInStore)
    leader, = await form_group(broker, GROUP, 1, session_ms=LONG_MS)
    handles = coordinator.membership.timers._handles
    key = heartbeat_key(GROUP, leader.member_id)
    before = handles[key].when()
    assert await heartbeat(broker, GROUP, leader.member_id, 1) == ErrorCode.NONE
    renewed = handles[key].when()
    assert renewed > before
    assert await heartbeat(broker, GROUP, leader.member_id, 5) == ErrorCode.ILLEGAL_GENERATION
    assert handles[key].when() == renewed


@async_test
async def test_a_members_offset_commit_renews_its_session_as_a_heartbeat_does(broker):
    coordinator = await started_coordinator(broker, store=StandInStore)
    leader, = await form_group(broker, GROUP, 1, session_ms=LONG_MS)
    handles = coordinator.membership.timers._handles
    key = heartbeat_key(GROUP, leader.member_id)
    before = handles[key].when()
    assert coordinator.validate_offset_commit(GROUP, 1, leader.member_id, None) == ErrorCode.NONE
    renewed = handles[key].when()
    assert renewed > before
    assert coordinator.validate_offset_commit(GROUP, 7, leader.member_id, None) == ErrorCode.ILLEGAL_GENERATION
    assert handles[key].when() == renewed  # a refused commit proves nothing


@async_test
async def test_members_that_never_sync_are_dropped_and_the_group_rebalances(broker):
    coordinator = await started_coordinator(broker, store=StandInStore)
    answers = await finished(asyncio.gather(*await join_new_members(broker, GROUP, 2, session_ms=LONG_MS,
                                                                    rebalance_ms=SHORT_MS)))
    leader = next(a for a in answers if a.member_id == a.leader)
    silent = next(a for a in answers if a is not leader)
    group = coordinator.group(GROUP)
    states = watch(group)
    await sync(broker, GROUP, leader.member_id, 1, {leader.member_id: b"L", silent.member_id: b"S"})
    await reaches(states, GroupState.STABLE)
    await reaches(states, GroupState.PREPARING_REBALANCE)
    assert list(group.members) == [leader.member_id]
    assert await heartbeat(broker, GROUP, silent.member_id, 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert await heartbeat(broker, GROUP, leader.member_id, 1) == ErrorCode.REBALANCE_IN_PROGRESS


@async_test
async def test_a_new_members_parked_join_expires(broker):
    settings = dataclasses.replace(FAST, new_member_join_timeout_ms=SHORT_MS)
    coordinator = await started_coordinator(broker, settings=settings, store=StandInStore)
    await form_group(broker, GROUP, 1, session_ms=LONG_MS, rebalance_ms=LONG_MS)
    [newcomer] = await join_new_members(broker, GROUP, 1, session_ms=LONG_MS, rebalance_ms=LONG_MS)
    # The join phase waits for the old member, which never rejoins; the newcomer's wait is bounded on its own.
    answer = await finished(newcomer)
    assert answer.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    group = coordinator.group(GROUP)
    assert group.state is GroupState.PREPARING_REBALANCE and len(group.members) == 1


@async_test
async def test_an_unused_member_id_expires_and_stops_holding_up_the_join_phase(broker):
    coordinator = await started_coordinator(broker, store=StandInStore)
    leader, = await form_group(broker, GROUP, 1, session_ms=LONG_MS, rebalance_ms=LONG_MS)
    pending = await join(broker, GROUP, session_ms=SHORT_MS)
    assert pending.error_code == ErrorCode.MEMBER_ID_REQUIRED
    rejoin = join_task(broker, GROUP, leader.member_id, session_ms=LONG_MS, rebalance_ms=LONG_MS)
    await settle()
    assert still_parked(rejoin)  # waiting for the member that was given an id
    answer = await finished(rejoin)
    assert (answer.generation_id, len(answer.members)) == (2, 1)
    assert coordinator.group(GROUP).pending_join_members == set()


@async_test
async def test_the_initial_rebalance_delay_gathers_members(broker):
    settings = dataclasses.replace(FAST, initial_rebalance_delay_ms=300)
    await started_coordinator(broker, settings=settings, store=StandInStore)
    first = join_task(broker, GROUP, version=3, client_id="first")
    await settle()
    assert still_parked(first)
    second = join_task(broker, GROUP, version=3, client_id="second")
    answers = await finished(asyncio.gather(first, second))
    assert {a.generation_id for a in answers} == {1}
    assert len(next(a for a in answers if a.member_id == a.leader).members) == 2


@async_test
async def test_without_the_initial_delay_a_first_member_is_answered_at_once(broker):
    await started_coordinator(broker, store=StandInStore)
    loop = asyncio.get_running_loop()
    began = loop.time()
    answer = await finished(join_task(broker, GROUP, version=3), within_s=1)
    assert answer.generation_id == 1 and loop.time() - began < 0.5
