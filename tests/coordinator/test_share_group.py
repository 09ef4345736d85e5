"""Share group membership (ShareGroups, Kafka 4.2's shareGroupHeartbeat rules) on stand-ins: a fake clock and
timers, an in-memory record store, a host with a few topics. Each rule answers with Kafka's code and message, the
records written replay into the same group, and a session expires only when the fake clock passes it."""
from __future__ import annotations

import asyncio
import types
import uuid

import pytest

from compatbroker.coordinator import group_records as gr
from compatbroker.coordinator.offsets import OffsetWriteError
from compatbroker.coordinator.settings import ConsumerGroupSettings, ShareGroupSettings
from compatbroker.coordinator.share_group import HeartbeatArgs, ShareGroups, ShareGroupState
from compatbroker.protocol.error_codes import ErrorCode

from tests.async_tests import async_test

GROUP = "g"
T1 = uuid.UUID(int=11)
T2 = uuid.UUID(int=12)


class FakeTimers:
    """Keyed one-shot timers on a fake clock: `advance(ms)` fires those due, in deadline order."""

    def __init__(self, clock):
        self.clock = clock
        self.due: dict = {}

    def schedule(self, key, delay_ms, callback):
        self.due[key] = (self.clock.now + delay_ms, callback)

    def cancel(self, key):
        self.due.pop(key, None)

    def cancel_all(self):
        self.due.clear()

    def advance(self, ms):
        self.clock.now += ms
        for key, (deadline, callback) in sorted(self.due.items(), key=lambda item: item[1][0]):
            if deadline <= self.clock.now and self.due.get(key, (None,))[0] == deadline:
                del self.due[key]
                callback()


class Clock:
    now = 1_000_000


class Store:
    """OffsetStore.store_records: keeps every batch; `fail` makes the next write raise."""

    def __init__(self):
        self.batches: list[list] = []
        self.fail: ErrorCode | None = None

    async def store_records(self, group_id, records):
        if self.fail is not None:
            raise OffsetWriteError(self.fail)
        self.batches.append(list(records))


class GroupConfigs(dict):
    """cluster.metadata.group_configs: a group's overrides, {} for none."""

    def get(self, group_id, default=None):
        return super().get(group_id, {})


def topic(name, topic_id, partitions):
    return types.SimpleNamespace(name=name, topic_id=topic_id, partitions=partitions, is_internal=False)


class Host:
    def __init__(self, clock):
        self.clock = clock
        self.topic_list = {"t1": topic("t1", T1, 4), "t2": topic("t2", T2, 2)}
        self.cluster = types.SimpleNamespace(metadata=types.SimpleNamespace(group_configs=GroupConfigs()), nodes={})
        self.config = None
        self.coordinator = None

    def topics(self):
        return dict(self.topic_list)

    def topic_by_id(self, topic_id):
        return next((t for t in self.topic_list.values() if t.topic_id == topic_id), None)

    def now_ms(self):
        return self.clock.now


class Coordinator:
    def __init__(self, host, settings, *, other_groups=None):
        self.broker = host
        self.offsets = Store()
        self.share_settings = settings
        self.consumer_settings = ConsumerGroupSettings()
        self.other_groups = other_groups or {}
        self.share_groups = None
        host.coordinator = self

    def error_for(self, group_id):
        return ErrorCode.NONE

    def group(self, group_id):
        return self.share_groups.groups.get(group_id) or self.other_groups.get(group_id)


def manager(settings=None, **options):
    clock = Clock()
    settings = settings or ShareGroupSettings()
    host = Host(clock)
    coordinator = Coordinator(host, settings, **options)
    groups = ShareGroups(coordinator, settings, timers=FakeTimers(clock))
    coordinator.share_groups = groups
    return groups


async def beat(groups, member_id, epoch, topics=None, *, group_id=GROUP, rack_id=None):
    return await groups.heartbeat(HeartbeatArgs(group_id=group_id, member_id=member_id, member_epoch=epoch,
                                                rack_id=rack_id, subscribed_topic_names=topics,
                                                client_id="client", client_host="/127.0.0.1"))


async def settle(groups):
    while groups._tasks:
        await asyncio.wait(list(groups._tasks))


def partitions(assignment):
    return {topic_id: set(parts) for topic_id, parts in assignment.items()}


# --- joins, heartbeats, assignments -------------------------------------------------------------------------------

@async_test
async def test_a_member_joins_and_gets_every_partition_at_once():
    groups = manager()
    answer = await beat(groups, "m1", 0, ["t1"])
    assert (answer.error, answer.member_id, answer.member_epoch, answer.heartbeat_interval_ms) == \
        (ErrorCode.NONE, "m1", 1, 5000)
    assert partitions(answer.assignment) == {T1: {0, 1, 2, 3}}
    group = groups.groups[GROUP]
    assert (group.state, group.group_epoch, group.assignment_epoch) == (ShareGroupState.STABLE, 1, 1)
    assert set(group.members) == {"m1"} and partitions(group.members["m1"].assigned_partitions) == {T1: {0, 1, 2, 3}}
    written = {gr.parse_typed(*split(key), value).record_type for key, value in groups.coordinator.offsets.batches[0]}
    assert written == {10, 11, 12, 13, 14, 15}


@async_test
async def test_a_second_member_bumps_the_epoch_and_the_first_learns_its_share_at_its_next_heartbeat():
    groups = manager()
    first = await beat(groups, "m1", 0, ["t1"])
    second = await beat(groups, "m2", 0, ["t1"])
    assert second.member_epoch == 2 and len(second.assignment[T1]) == 2
    again = await beat(groups, "m1", first.member_epoch)
    assert again.member_epoch == 2
    assert again.assignment[T1] | second.assignment[T1] == frozenset(range(4))
    assert not again.assignment[T1] & second.assignment[T1]
    quiet = await beat(groups, "m1", 2)
    assert (quiet.member_epoch, quiet.assignment) == (2, None)  # nothing new: no assignment in the answer


@async_test
async def test_a_full_request_always_carries_the_assignment():
    groups = manager()
    await beat(groups, "m1", 0, ["t1"])
    answer = await beat(groups, "m1", 1, ["t1"])
    assert answer.assignment is not None and partitions(answer.assignment) == {T1: {0, 1, 2, 3}}


@async_test
async def test_a_changed_subscription_moves_the_member_to_the_new_topics():
    groups = manager()
    await beat(groups, "m1", 0, ["t1"])
    answer = await beat(groups, "m1", 1, ["t2"])
    assert answer.member_epoch == 2 and partitions(answer.assignment) == {T2: {0, 1}}
    assert groups.groups[GROUP].initialized_partitions() == {T1: frozenset(range(4)), T2: frozenset(range(2))}


@async_test
async def test_new_partitions_of_a_subscribed_topic_are_assigned_at_the_next_heartbeat():
    groups = manager()
    await beat(groups, "m1", 0, ["t1"])
    groups.host.topic_list["t1"] = topic("t1", T1, 6)
    answer = await beat(groups, "m1", 1)
    assert answer.member_epoch == 2 and partitions(answer.assignment) == {T1: set(range(6))}


@async_test
async def test_a_previous_epoch_is_accepted_as_its_answer_may_have_been_lost():
    groups = manager()
    await beat(groups, "m1", 0, ["t1"])
    await beat(groups, "m2", 0, ["t1"])
    await beat(groups, "m1", 1)                   # m1 moves to epoch 2; suppose the answer is lost
    answer = await beat(groups, "m1", 1)
    assert (answer.error, answer.member_epoch) == (ErrorCode.NONE, 2)


@pytest.mark.parametrize("epoch, message", [
    (5, "The share group member has a greater member epoch (5) than the one known by the group coordinator (3). "
        "The member must abandon all its partitions and rejoin."),
    (2, "The share group member has a smaller member epoch (2) than the one known by the group coordinator (3), "
        "and it does not match the previous member epoch (1). The member must abandon all its partitions and "
        "rejoin.")])
@async_test
async def test_other_epochs_are_fenced(epoch, message):
    groups = manager()
    await beat(groups, "m1", 0, ["t1"])
    await beat(groups, "m2", 0, ["t1"])
    await beat(groups, "m3", 0, ["t1"])
    assert (await beat(groups, "m1", 1)).member_epoch == 3   # from epoch 1 straight to 3
    answer = await beat(groups, "m1", epoch, ["t1"])
    assert (answer.error, answer.message) == (ErrorCode.FENCED_MEMBER_EPOCH, message)


@async_test
async def test_a_fenced_member_rejoins_with_epoch_0_and_keeps_its_place():
    groups = manager()
    await beat(groups, "m1", 0, ["t1"])
    await beat(groups, "m2", 0, ["t1"])
    mine = (await beat(groups, "m1", 1)).assignment
    rejoined = await beat(groups, "m1", 0, ["t1"])
    assert (rejoined.error, rejoined.member_epoch, rejoined.assignment) == (ErrorCode.NONE, 2, mine)
    assert groups.groups[GROUP].group_epoch == 2


@async_test
async def test_unknown_members_and_groups():
    groups = manager()
    assert _refusal(await beat(groups, "m1", 1)) == (ErrorCode.GROUP_ID_NOT_FOUND, "Share group g not found.")
    assert _refusal(await beat(groups, "m1", -1)) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group g not found.")
    await beat(groups, "m1", 0, ["t1"])
    assert _refusal(await beat(groups, "m9", 1)) == (ErrorCode.UNKNOWN_MEMBER_ID,
                                                     "Member m9 is not a member of group g.")
    assert _refusal(await beat(groups, "m9", -1)) == (ErrorCode.UNKNOWN_MEMBER_ID,
                                                      "Member m9 is not a member of group g.")


@async_test
async def test_a_group_of_another_type_is_not_a_share_group():
    groups = manager(other_groups={GROUP: types.SimpleNamespace(group_type="consumer")})
    assert _refusal(await beat(groups, "m1", 0, ["t1"])) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                             "Group g is not a share group.")
    assert GROUP not in groups.groups


@async_test
async def test_a_full_group_refuses_new_members_only():
    groups = manager(ShareGroupSettings(max_size=2))
    await beat(groups, "m1", 0, ["t1"])
    await beat(groups, "m2", 0, ["t1"])
    assert _refusal(await beat(groups, "m3", 0, ["t1"])) == (
        ErrorCode.GROUP_MAX_SIZE_REACHED, "The share group has reached its maximum capacity of 2 members.")
    assert (await beat(groups, "m2", 2)).error is ErrorCode.NONE


@pytest.mark.parametrize("args, message", [
    (dict(member_id=""), "MemberId can't be empty."),
    (dict(group_id=" "), "GroupId can't be empty."),
    (dict(rack_id=""), "RackId can't be empty."),
    (dict(subscribed_topic_names=None), "SubscribedTopicNames must be set in first request."),
    (dict(subscribed_topic_names=()), "SubscribedTopicNames must be set in first request."),
    (dict(member_epoch=-2), "MemberEpoch is invalid.")])
@async_test
async def test_invalid_requests(args, message):
    groups = manager()
    request = dict(group_id=GROUP, member_id="m1", member_epoch=0, subscribed_topic_names=("t1",), **{})
    request.update(args)
    answer = await groups.heartbeat(HeartbeatArgs(**request))
    assert (answer.error, answer.message) == (ErrorCode.INVALID_REQUEST, message)
    assert groups.coordinator.offsets.batches == []


@async_test
async def test_a_failed_write_changes_nothing():
    groups = manager()
    groups.coordinator.offsets.fail = ErrorCode.NOT_COORDINATOR
    assert (await beat(groups, "m1", 0, ["t1"])).error is ErrorCode.NOT_COORDINATOR
    assert GROUP not in groups.groups and not groups.timers.due


# --- leaving and sessions -----------------------------------------------------------------------------------------

@async_test
async def test_a_leaving_member_is_removed_and_the_others_take_its_partitions():
    groups = manager()
    await beat(groups, "m1", 0, ["t1"])
    await beat(groups, "m2", 0, ["t1"])
    await beat(groups, "m1", 1)
    left = await beat(groups, "m2", -1)
    assert (left.error, left.member_id, left.member_epoch, left.assignment) == (ErrorCode.NONE, "m2", -1, None)
    group = groups.groups[GROUP]
    assert set(group.members) == {"m1"} and group.group_epoch == 3
    assert ("share-session", GROUP, "m2") not in groups.timers.due
    answer = await beat(groups, "m1", 2)
    assert answer.member_epoch == 3 and partitions(answer.assignment) == {T1: {0, 1, 2, 3}}
    await beat(groups, "m1", -1)
    assert (group.state, group.group_epoch, group.assignment_epoch) == (ShareGroupState.EMPTY, 4, 4)


@async_test
async def test_a_silent_member_expires_when_its_session_runs_out():
    groups = manager(ShareGroupSettings(session_timeout_ms=45_000))
    await beat(groups, "m1", 0, ["t1"])
    await beat(groups, "m2", 0, ["t1"])
    groups.timers.advance(30_000)
    await beat(groups, "m1", 1)             # m1 renews its session; m2 says nothing
    groups.timers.advance(15_000)
    await settle(groups)
    assert set(groups.groups[GROUP].members) == {"m1"}
    groups.timers.advance(29_999)
    await settle(groups)
    assert set(groups.groups[GROUP].members) == {"m1"}
    groups.timers.advance(1)
    await settle(groups)
    assert groups.groups[GROUP].state is ShareGroupState.EMPTY


@async_test
async def test_the_groups_own_session_timeout_and_heartbeat_interval_apply():
    groups = manager()
    groups.host.cluster.metadata.group_configs[GROUP] = {"share.session.timeout.ms": "50000",
                                                         "share.heartbeat.interval.ms": "7000"}
    answer = await beat(groups, "m1", 0, ["t1"])
    assert answer.heartbeat_interval_ms == 7000
    groups.timers.advance(49_999)
    await settle(groups)
    assert "m1" in groups.groups[GROUP].members
    groups.timers.advance(1)
    await settle(groups)
    assert "m1" not in groups.groups[GROUP].members


# --- records: replay, load, deletion ------------------------------------------------------------------------------

@async_test
async def test_the_records_written_replay_into_the_same_group():
    groups = manager()
    await beat(groups, "m1", 0, ["t1"], rack_id="r1")
    await beat(groups, "m2", 0, ["t1", "t2"])
    await beat(groups, "m1", 1)
    await beat(groups, "m3", 0, ["t2"])
    await beat(groups, "m3", -1)
    replayed = manager()
    for batch in groups.coordinator.offsets.batches:
        for key, value in batch:
            replayed.replay(gr.parse_typed(*split(key), value))
    assert _snapshot(replayed.groups[GROUP]) == _snapshot(groups.groups[GROUP])
    replayed.on_loaded([GROUP, "unknown"])
    assert set(replayed.timers.due) == {("share-session", GROUP, "m1"), ("share-session", GROUP, "m2")}


@async_test
async def test_tombstones_cover_every_live_record_and_remove_the_group_on_replay():
    groups = manager()
    await beat(groups, "m1", 0, ["t1"])
    await beat(groups, "m2", 0, ["t1"])
    await beat(groups, "m2", -1)
    latest = {key: value for batch in groups.coordinator.offsets.batches for key, value in batch}
    live = {key for key, value in latest.items() if value is not None}
    tombstones = groups.tombstones(GROUP)
    assert all(value is None for _, value in tombstones)
    assert live <= {key for key, _ in tombstones}
    for key, value in tombstones:
        groups.replay(gr.parse_typed(*split(key), value))
    assert GROUP not in groups.groups


@async_test
async def test_unload_drops_the_group_and_its_sessions():
    groups = manager()
    await beat(groups, "m1", 0, ["t1"])
    group = groups.groups[GROUP]
    groups.unload_group(GROUP)
    assert GROUP not in groups.groups and not groups.timers.due and group.state is ShareGroupState.DEAD


def test_a_share_group_has_no_committed_offsets():
    groups = manager()
    assert groups.validate_offset_commit(None, "m1", 1) is ErrorCode.GROUP_ID_NOT_FOUND


@async_test
async def test_a_deleted_topic_leaves_the_share_state_metadata_at_the_next_assignment():
    groups = manager()
    await beat(groups, "m1", 0, ["t1", "t2"])
    del groups.host.topic_list["t2"]
    answer = await beat(groups, "m1", 1)
    assert answer.member_epoch == 2 and partitions(answer.assignment) == {T1: {0, 1, 2, 3}}
    assert set(groups.groups[GROUP].initialized_topics) == {T1}


# --- helpers ------------------------------------------------------------------------------------------------------

def split(key: bytes):
    return int.from_bytes(key[:2], "big", signed=True), memoryview(key)[2:]


def _refusal(answer):
    return answer.error, answer.message


def _snapshot(group):
    return (group.state, group.group_epoch, group.metadata_hash, group.assignment_epoch, dict(group.members),
            dict(group.target_assignment), dict(group.initialized_topics), dict(group.deleting_topics))

