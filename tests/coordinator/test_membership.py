"""The classic rebalance protocol through the handlers (latest versions unless a test says otherwise): join
phases, MEMBER_ID_REQUIRED, protocol selection, sync, heartbeats, leaving, generation checks, the cooperative
flow, and the quirks other brokers got wrong (a follower's SyncGroup after the group is Stable; a lone rejoining
member; flexible versions)."""
from __future__ import annotations

import asyncio
import dataclasses

import pytest

from compatbroker.coordinator import GroupSettings, GroupState
from compatbroker.coordinator.group import Group, Member, subscription_topics
from compatbroker.coordinator.membership import heartbeat_key
from compatbroker.handlers.join_group import client_host
from compatbroker.protocol.error_codes import ErrorCode

from tests.coordinator.membership_support import (FAST, StandInStore, assignment, async_test, describe, finished,
                                                  form_group, heartbeat, join, join_new_member, join_new_members,
                                                  join_task, leave, settle, started_coordinator,
                                                  still_parked, subscription, sync, sync_task)
from tests.handlers.helpers import make_broker

GROUP = "g"


# --- one member ---------------------------------------------------------------------------------------------------

@async_test
async def test_a_member_joins_through_member_id_required_and_gets_its_assignment(broker):
    coordinator = await started_coordinator(broker, store=StandInStore)
    first = await join(broker, GROUP, client_id="app")
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("app-") and first.generation_id == -1
    assert coordinator.group(GROUP).pending_join_members == {first.member_id}

    answer = await finished(join_task(broker, GROUP, first.member_id, client_id="app"))
    assert answer.error_code == ErrorCode.NONE
    assert (answer.member_id, answer.leader, answer.generation_id) == (first.member_id, first.member_id, 1)
    assert (answer.protocol_type, answer.protocol_name) == ("consumer", "range")
    assert [m.member_id for m in answer.members] == [first.member_id]
    assert answer.members[0].metadata == subscription("t")
    assert coordinator.group(GROUP).state is GroupState.COMPLETING_REBALANCE

    mine = assignment({"t": [0, 1, 2]})
    synced = await sync(broker, GROUP, first.member_id, 1, {first.member_id: mine})
    assert (synced.error_code, synced.assignment) == (ErrorCode.NONE, mine)
    assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")
    group = coordinator.group(GROUP)
    assert group.state is GroupState.STABLE
    assert coordinator.offsets.stored == [(GROUP, "CompletingRebalance", 1, {first.member_id: mine})]
    assert await heartbeat(broker, GROUP, first.member_id, 1) == ErrorCode.NONE


@async_test
async def test_a_lone_member_that_rejoins_rebalances_at_once(broker):
    """Limitation 5 of the mock: kafka-python rejoins right after its first metadata refresh; a lone member must
    not wait for anybody."""
    await started_coordinator(broker, store=StandInStore)
    [leader] = await form_group(broker, GROUP, 1)
    loop = asyncio.get_running_loop()
    began = loop.time()
    again = await finished(join_task(broker, GROUP, leader.member_id), within_s=1)
    assert loop.time() - began < 0.5
    assert (again.error_code, again.generation_id, again.leader) == (ErrorCode.NONE, 2, leader.member_id)


@async_test
async def test_versions_before_4_join_without_the_member_id_round_trip(broker):
    await started_coordinator(broker, store=StandInStore)
    answer = await join(broker, GROUP, version=3, client_id="old")
    assert answer.error_code == ErrorCode.NONE and answer.member_id.startswith("old-")
    assert answer.generation_id == 1 and answer.leader == answer.member_id


# --- several members ----------------------------------------------------------------------------------------------

@async_test
async def test_members_joining_together_form_one_generation(broker):
    coordinator = await started_coordinator(broker, store=StandInStore)
    answers = await finished(asyncio.gather(*await join_new_members(broker, GROUP, 3)))
    assert {a.generation_id for a in answers} == {1}
    leader_id = answers[0].leader
    assert {a.leader for a in answers} == {leader_id}
    for answer in answers:
        expected = sorted(a.member_id for a in answers) if answer.member_id == leader_id else []
        assert sorted(m.member_id for m in answer.members) == expected
    assert len(coordinator.group(GROUP).members) == 3


@async_test
async def test_followers_wait_for_the_leaders_assignment(broker):
    coordinator = await started_coordinator(broker, store=StandInStore)
    answers = await finished(asyncio.gather(*await join_new_members(broker, GROUP, 2)))
    leader = next(a for a in answers if a.member_id == a.leader)
    follower = next(a for a in answers if a is not leader)
    parked = sync_task(broker, GROUP, follower.member_id, 1)
    await settle()
    assert still_parked(parked)
    plan = {leader.member_id: assignment({"t": [0]}), follower.member_id: assignment({"t": [1]})}
    assert (await sync(broker, GROUP, leader.member_id, 1, plan)).assignment == plan[leader.member_id]
    answered = await finished(parked)
    assert (answered.error_code, answered.assignment) == (ErrorCode.NONE, plan[follower.member_id])
    assert coordinator.group(GROUP).state is GroupState.STABLE


@async_test
async def test_a_follower_syncing_after_the_group_is_stable_gets_its_assignment(broker):
    """Limitation 4 of the mock: kafka-python, aiokafka and sarama send the follower's SyncGroup after the
    leader's; Kafka answers it with the assignment."""
    await started_coordinator(broker, store=StandInStore)
    answers = await finished(asyncio.gather(*await join_new_members(broker, GROUP, 2)))
    leader = next(a for a in answers if a.member_id == a.leader)
    follower = next(a for a in answers if a is not leader)
    plan = {leader.member_id: b"L", follower.member_id: b"F"}
    await sync(broker, GROUP, leader.member_id, 1, plan)
    late = await sync(broker, GROUP, follower.member_id, 1)
    assert (late.error_code, late.assignment) == (ErrorCode.NONE, b"F")


@async_test
async def test_a_new_member_rebalances_a_stable_group(broker):
    await started_coordinator(broker, store=StandInStore)
    old, = await form_group(broker, GROUP, 1)
    newcomer = await join_new_member(broker, GROUP, client_id="new")
    await settle()
    assert still_parked(newcomer)
    assert await heartbeat(broker, GROUP, old.member_id, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    rejoined = await finished(join_task(broker, GROUP, old.member_id))
    joined = await finished(newcomer)
    assert rejoined.generation_id == joined.generation_id == 2
    assert rejoined.leader == old.member_id and len(rejoined.members) == 2 and joined.members == []
    # The old generation is over for everything but the rejoin
    assert await heartbeat(broker, GROUP, old.member_id, 1) == ErrorCode.ILLEGAL_GENERATION
    assert (await sync(broker, GROUP, old.member_id, 1)).error_code == ErrorCode.ILLEGAL_GENERATION


@async_test
async def test_a_follower_rejoining_unchanged_in_a_stable_group_gets_the_current_generation(broker):
    coordinator = await started_coordinator(broker, store=StandInStore)
    leader, follower = await form_group(broker, GROUP, 2)
    answer = await finished(join_task(broker, GROUP, follower.member_id))
    assert (answer.error_code, answer.generation_id, answer.leader, answer.members) == \
        (ErrorCode.NONE, 1, leader.member_id, [])
    assert coordinator.group(GROUP).state is GroupState.STABLE
    synced = await sync(broker, GROUP, follower.member_id, 1)
    assert synced.assignment == b"1"


@async_test
async def test_changed_metadata_or_a_rejoining_leader_rebalance(broker):
    coordinator = await started_coordinator(broker, store=StandInStore)
    leader, follower = await form_group(broker, GROUP, 2)
    changed = join_task(broker, GROUP, follower.member_id, metadata=subscription("t", "u"))
    await settle()
    assert coordinator.group(GROUP).state is GroupState.PREPARING_REBALANCE and still_parked(changed)
    both = await finished(asyncio.gather(changed, join_task(broker, GROUP, leader.member_id)))
    assert {a.generation_id for a in both} == {2}
    assert coordinator.group(GROUP).subscribed_topics() == {"t", "u"}


@async_test
async def test_a_rejoin_during_completing_rebalance_with_the_same_metadata_is_answered_again(broker):
    await started_coordinator(broker, store=StandInStore)
    answers = await finished(asyncio.gather(*await join_new_members(broker, GROUP, 2)))
    leader = next(a for a in answers if a.member_id == a.leader)
    again = await finished(join_task(broker, GROUP, leader.member_id))
    assert (again.generation_id, again.leader, len(again.members)) == (1, leader.member_id, 2)


@async_test
async def test_a_rebalance_answers_parked_syncs_with_rebalance_in_progress(broker):
    await started_coordinator(broker, store=StandInStore)
    answers = await finished(asyncio.gather(*await join_new_members(broker, GROUP, 2)))
    follower = next(a for a in answers if a.member_id != a.leader)
    parked = sync_task(broker, GROUP, follower.member_id, 1)
    await settle()
    newcomer = await join(broker, GROUP)  # MEMBER_ID_REQUIRED does not rebalance yet
    assert still_parked(parked) and newcomer.error_code == ErrorCode.MEMBER_ID_REQUIRED
    joining = join_task(broker, GROUP, newcomer.member_id)
    assert (await finished(parked)).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    assert (await sync(broker, GROUP, follower.member_id, 1)).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    joining.cancel()


# --- protocols ----------------------------------------------------------------------------------------------------

PREFERENCES = [("roundrobin", "range", "sticky"), ("sticky", "range"), ("range", "sticky")]


@async_test
async def test_the_protocol_most_members_prefer_among_the_common_ones_is_chosen(broker):
    await started_coordinator(broker, store=StandInStore)
    firsts = [await join(broker, GROUP, names=names) for names in PREFERENCES]
    answers = await finished(asyncio.gather(*[join_task(broker, GROUP, first.member_id, names=names)
                                              for first, names in zip(firsts, PREFERENCES)]))
    # Common: range and sticky. Votes: a -> range, b -> sticky, c -> range.
    assert {a.protocol_name for a in answers} == {"range"}


@async_test
async def test_inconsistent_protocols_are_refused(broker):
    await started_coordinator(broker, store=StandInStore)
    empty_type = await join(broker, GROUP, protocol_type="")
    assert empty_type.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL and empty_type.member_id == ""
    await form_group(broker, GROUP, 1)
    other_type = await join(broker, GROUP, protocol_type="connect")
    assert other_type.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    no_common = await join(broker, GROUP, names=("roundrobin",))
    assert no_common.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert (await join(broker, GROUP, names=("roundrobin", "range"))).error_code == ErrorCode.MEMBER_ID_REQUIRED


@async_test
async def test_sync_v5_checks_protocol_type_and_name(broker):
    await started_coordinator(broker, store=StandInStore)
    tasks = [await join_new_member(broker, GROUP)]
    [answer] = await finished(asyncio.gather(*tasks))
    wrong = await sync(broker, GROUP, answer.member_id, 1, protocol_name="roundrobin")
    assert wrong.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    missing = await sync(broker, GROUP, answer.member_id, 1, protocol_type=None)
    assert missing.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    older = await sync(broker, GROUP, answer.member_id, 1, {answer.member_id: b"x"}, version=4)
    assert (older.error_code, older.assignment) == (ErrorCode.NONE, b"x")


# --- unknown members and generations ------------------------------------------------------------------------------

@async_test
async def test_unknown_members_and_groups(broker):
    await started_coordinator(broker, store=StandInStore)
    nowhere = await join(broker, "missing", "someone")
    assert (nowhere.error_code, nowhere.member_id) == (ErrorCode.UNKNOWN_MEMBER_ID, "someone")
    assert (await sync(broker, "missing", "someone", 1)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert await heartbeat(broker, "missing", "someone", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    leader, = await form_group(broker, GROUP, 1)
    stranger = await join(broker, GROUP, "stranger")
    assert (stranger.error_code, stranger.member_id, stranger.protocol_name) == \
        (ErrorCode.UNKNOWN_MEMBER_ID, "stranger", None)
    assert await heartbeat(broker, GROUP, "stranger", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert await heartbeat(broker, GROUP, leader.member_id, 7) == ErrorCode.ILLEGAL_GENERATION
    assert (await sync(broker, GROUP, leader.member_id, 0)).error_code == ErrorCode.ILLEGAL_GENERATION


@async_test
async def test_invalid_group_id_and_session_timeout(broker):
    await started_coordinator(broker, store=StandInStore)
    assert (await join(broker, "")).error_code == ErrorCode.INVALID_GROUP_ID
    assert (await sync(broker, "", "m", 1)).error_code == ErrorCode.INVALID_GROUP_ID
    assert await heartbeat(broker, "", "m", 1) == ErrorCode.INVALID_GROUP_ID
    assert (await leave(broker, "", ("m", None))).error_code == ErrorCode.INVALID_GROUP_ID


@async_test
async def test_session_timeouts_outside_kafkas_bounds_are_refused(broker):
    await started_coordinator(broker, settings=GroupSettings(), store=StandInStore)
    assert (await join(broker, GROUP, session_ms=5_999)).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    assert (await join(broker, GROUP, session_ms=1_800_001)).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    assert (await join(broker, GROUP, session_ms=6_000)).error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert (await join(broker, GROUP, session_ms=1_800_000)).error_code == ErrorCode.MEMBER_ID_REQUIRED


def test_settings_come_from_the_broker_configuration(tmp_path):
    broker = make_broker(tmp_path / "data", **{"group.initial.rebalance.delay.ms": 250})
    try:
        settings = GroupSettings.from_config(broker.config)
        assert settings.initial_rebalance_delay_ms == 250
        assert (settings.min_session_timeout_ms, settings.max_session_timeout_ms) == (6_000, 1_800_000)
    finally:
        broker.logs.shutdown()


@async_test
async def test_while_loading_requests_get_kafkas_answers(broker):
    class Unloaded(StandInStore):
        async def load(self):
            pass  # never loaded

    await started_coordinator(broker, store=Unloaded)
    assert (await join(broker, GROUP)).error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert (await sync(broker, GROUP, "m", 1)).error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert await heartbeat(broker, GROUP, "m", 1) == ErrorCode.NONE  # Kafka: keep members in their group
    assert (await leave(broker, GROUP, ("m", None))).error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    [described] = await describe(broker, GROUP)
    assert described.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


# --- leaving ------------------------------------------------------------------------------------------------------

@async_test
async def test_a_member_leaving_rebalances_the_others(broker):
    coordinator = await started_coordinator(broker, store=StandInStore)
    leader, follower = await form_group(broker, GROUP, 2)
    answer = await leave(broker, GROUP, (leader.member_id, None))
    assert answer.error_code == ErrorCode.NONE
    assert [(m.member_id, m.error_code) for m in answer.members] == [(leader.member_id, ErrorCode.NONE)]
    group = coordinator.group(GROUP)
    assert group.state is GroupState.PREPARING_REBALANCE and list(group.members) == [follower.member_id]
    assert await heartbeat(broker, GROUP, follower.member_id, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    rejoined = await finished(join_task(broker, GROUP, follower.member_id))
    assert (rejoined.generation_id, rejoined.leader) == (2, follower.member_id)


@async_test
async def test_the_last_member_leaving_empties_the_group_at_a_new_generation(broker):
    coordinator = await started_coordinator(broker, store=StandInStore)
    leader, = await form_group(broker, GROUP, 1)
    await leave(broker, GROUP, (leader.member_id, None))
    group = coordinator.group(GROUP)
    assert (group.state, group.generation_id, group.protocol_name, group.leader_id) == \
        (GroupState.EMPTY, 2, None, None)
    await settle()
    assert coordinator.offsets.stored[-1] == (GROUP, "Empty", 2, {})


@async_test
async def test_leave_answers_each_member(broker):
    await started_coordinator(broker, store=StandInStore)
    leader, follower = await form_group(broker, GROUP, 2)
    pending = await join(broker, GROUP)
    answer = await leave(broker, GROUP, (follower.member_id, None), ("ghost", None), ("", "nobody"),
                         (pending.member_id, None))
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in answer.members] == [
        (follower.member_id, None, ErrorCode.NONE), ("ghost", None, ErrorCode.UNKNOWN_MEMBER_ID),
        ("", "nobody", ErrorCode.UNKNOWN_MEMBER_ID), (pending.member_id, None, ErrorCode.NONE)]
    missing = await leave(broker, "missing", ("a", None), ("b", "i"))
    assert missing.error_code == ErrorCode.NONE
    assert [(m.member_id, m.error_code) for m in missing.members] == \
        [("a", ErrorCode.UNKNOWN_MEMBER_ID), ("b", ErrorCode.UNKNOWN_MEMBER_ID)]


@pytest.mark.parametrize("version", [0, 1, 2])
@async_test
async def test_leave_before_v3_names_one_member_and_answers_one_error(broker, version):
    await started_coordinator(broker, store=StandInStore)
    leader, = await form_group(broker, GROUP, 1)
    assert (await leave(broker, GROUP, ("ghost", None), version=version)).error_code == \
        ErrorCode.UNKNOWN_MEMBER_ID
    assert (await leave(broker, GROUP, (leader.member_id, None), version=version)).error_code == ErrorCode.NONE


@async_test
async def test_a_leaving_member_with_a_parked_join_is_answered(broker):
    await started_coordinator(broker, store=StandInStore)
    leader, follower = await form_group(broker, GROUP, 2)
    parked = join_task(broker, GROUP, leader.member_id)  # the leader's rejoin waits for the follower
    await settle()
    assert still_parked(parked)
    await leave(broker, GROUP, (leader.member_id, None))
    assert (await finished(parked)).error_code == ErrorCode.UNKNOWN_MEMBER_ID


# --- the cooperative flow -----------------------------------------------------------------------------------------

@async_test
async def test_cooperative_rounds_let_members_keep_their_partitions(broker):
    """librdkafka and the Java client run cooperative-sticky over the classic protocol: a first round takes
    partitions away from their owner without giving them to anybody, the owner revokes them and rejoins with its
    smaller ownership, and a second round hands them to the newcomer. Between rounds the owner keeps consuming
    (and committing) what it kept."""
    coordinator = await started_coordinator(broker, store=StandInStore)
    names = ("cooperative-sticky",)
    first_task = await join_new_member(broker, GROUP, names=names, metadata=subscription("t"), client_id="a")
    a = await finished(first_task)
    all_four = {"t": [0, 1, 2, 3]}
    await sync(broker, GROUP, a.member_id, 1, {a.member_id: assignment(all_four)}, protocol_name=names[0])

    b_task = await join_new_member(broker, GROUP, names=names, metadata=subscription("t"), client_id="b")
    await settle()
    assert await heartbeat(broker, GROUP, a.member_id, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    # While the group rebalances, a keeps the partitions it owns: its commits at generation 1 are accepted.
    assert coordinator.validate_offset_commit(GROUP, 1, a.member_id, None) == ErrorCode.NONE
    round1 = await finished(asyncio.gather(
        join_task(broker, GROUP, a.member_id, names=names, metadata=subscription("t", owned=all_four)), b_task))
    a1, b1 = round1
    assert a1.generation_id == b1.generation_id == 2 and a1.leader == a.member_id
    kept = {"t": [0, 1]}
    await sync(broker, GROUP, a.member_id, 2, {a.member_id: assignment(kept), b1.member_id: assignment({})},
               protocol_name=names[0])
    assert (await sync(broker, GROUP, b1.member_id, 2, protocol_name=names[0])).assignment == assignment({})

    # a revoked partitions 2 and 3: it rejoins at once with what it owns now, which starts round 2.
    a2_task = join_task(broker, GROUP, a.member_id, names=names, metadata=subscription("t", owned=kept))
    await settle()
    assert await heartbeat(broker, GROUP, b1.member_id, 2) == ErrorCode.REBALANCE_IN_PROGRESS
    b2_task = join_task(broker, GROUP, b1.member_id, names=names, metadata=subscription("t"))
    a2, b2 = await finished(asyncio.gather(a2_task, b2_task))
    assert a2.generation_id == b2.generation_id == 3
    given = {"t": [2, 3]}
    b2_sync = sync_task(broker, GROUP, b2.member_id, 3, protocol_name=names[0])
    await sync(broker, GROUP, a.member_id, 3, {a.member_id: assignment(kept), b2.member_id: assignment(given)},
               protocol_name=names[0])
    assert (await finished(b2_sync)).assignment == assignment(given)
    assert coordinator.group(GROUP).state is GroupState.STABLE


# --- describing ---------------------------------------------------------------------------------------------------

@async_test
async def test_describe_shows_metadata_only_when_stable(broker):
    await started_coordinator(broker, store=StandInStore)
    tasks = [await join_new_member(broker, GROUP, client_id="only")]
    [answer] = await finished(asyncio.gather(*tasks))
    [completing] = await describe(broker, GROUP)
    assert (completing.group_state, completing.protocol_type, completing.protocol_data) == \
        ("CompletingRebalance", "consumer", "")
    [member] = completing.members
    assert (member.member_id, member.client_id, member.client_host, member.member_metadata) == \
        (answer.member_id, "only", "/127.0.0.1", b"")
    await sync(broker, GROUP, answer.member_id, 1, {answer.member_id: b"mine"})
    [stable] = await describe(broker, GROUP)
    assert (stable.group_state, stable.protocol_data) == ("Stable", "range")
    assert (stable.members[0].member_metadata, stable.members[0].member_assignment) == (subscription("t"), b"mine")


# --- group.max.size and timers ------------------------------------------------------------------------------------

@async_test
async def test_a_full_group_refuses_new_members(broker):
    await started_coordinator(broker, settings=dataclasses.replace(FAST, max_size=1), store=StandInStore)
    leader, = await form_group(broker, GROUP, 1)
    refused = await join(broker, GROUP)
    assert (refused.error_code, refused.member_id) == (ErrorCode.GROUP_MAX_SIZE_REACHED, "")
    assert (await finished(join_task(broker, GROUP, leader.member_id))).generation_id == 2  # members still rejoin


@async_test
async def test_leaving_cancels_the_members_session_timer(broker):
    coordinator = await started_coordinator(broker, store=StandInStore)
    leader, follower = await form_group(broker, GROUP, 2)
    timers = coordinator.membership.timers
    assert timers.is_scheduled(heartbeat_key(GROUP, follower.member_id))
    await leave(broker, GROUP, (follower.member_id, None))
    assert not timers.is_scheduled(heartbeat_key(GROUP, follower.member_id))
    assert timers.is_scheduled(heartbeat_key(GROUP, leader.member_id))


# --- the group's own rules ----------------------------------------------------------------------------------------

def test_state_transitions_follow_kafkas_graph():
    group = Group("x")
    with pytest.raises(RuntimeError):
        group.transition(GroupState.STABLE, 1)
    group.transition(GroupState.PREPARING_REBALANCE, 2)
    group.transition(GroupState.COMPLETING_REBALANCE, 3)
    group.transition(GroupState.STABLE, 4)
    assert (group.state, group.previous_state, group.current_state_timestamp) == \
        (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, 4)
    with pytest.raises(RuntimeError):
        group.transition(GroupState.EMPTY, 5)
    group.transition(GroupState.DEAD, 6)
    assert group.state == "Dead"  # the state is also Kafka's name for it


def test_protocol_votes_break_ties_by_the_first_vote():
    group = Group("x")
    group.add(Member("a", None, "c", "/h", 1, 1, "consumer", [("sticky", b""), ("range", b"")]))
    group.add(Member("b", None, "c", "/h", 1, 1, "consumer", [("range", b""), ("sticky", b"")]))
    assert group.select_protocol() == "sticky"
    assert group.candidate_protocols() == {"sticky", "range"}


def test_subscriptions_are_read_from_every_consumer_protocol_version():
    for version in (0, 1, 3):
        assert subscription_topics(subscription("a", "b", version=version)) == ["a", "b"]
    group = Group("x", protocol_type="consumer", protocol_name="range")
    group.add(Member("a", None, "c", "/h", 1, 1, "consumer", [("range", b"\x00")]))  # unreadable
    group.refresh_subscribed_topics()
    assert group.subscribed_topics() is None and group.is_subscribed("anything")
    other = Group("y", protocol_type="connect", protocol_name="default")
    assert other.subscribed_topics() is None and not other.is_subscribed("t")


def test_client_host_is_written_as_java_writes_addresses():
    assert client_host("127.0.0.1:50000") == "/127.0.0.1"
    assert client_host("[::1]:50000") == "/0:0:0:0:0:0:0:1"
    assert client_host("[fe80::a:b0]:1") == "/fe80:0:0:0:0:0:a:b0"
