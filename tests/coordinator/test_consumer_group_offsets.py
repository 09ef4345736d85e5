"""Offsets and the admin group APIs against KIP-848 consumer groups and KIP-932 share groups, through the server's
codec path: OffsetCommit / OffsetFetch member epochs and version boundaries, TxnOffsetCommit's generation rule,
OffsetDelete's subscribed topics, ListGroups' types and states, DescribeGroups' answer for groups that are not
classic, and DeleteGroups of every type (Kafka 4.2's rules)."""
from __future__ import annotations

import asyncio
import functools
import uuid

import pytest

from compatbroker.coordinator import coordinator_of
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import (ConsumerGroupHeartbeatRequest, DeleteGroupsRequest, DescribeGroupsRequest,
                                            ListGroupsRequest, OffsetCommitRequest, OffsetDeleteRequest,
                                            OffsetFetchRequest, ShareGroupHeartbeatRequest)
from tests.async_tests import run_coroutine
from tests.handlers.helpers import call, make_broker

E = ErrorCode

CommitTopic = OffsetCommitRequest.OffsetCommitRequestTopic
CommitPartition = OffsetCommitRequest.OffsetCommitRequestPartition


@pytest.fixture
def broker(tmp_path):
    broker = make_broker(tmp_path / "data")
    broker.create_topic("t", 2)
    broker.create_topic("u", 1)
    yield broker
    broker.logs.shutdown()


def coordinated(test):
    """Run the coroutine test on a fresh loop with the broker's coordinator loaded first and stopped after."""
    @functools.wraps(test)
    def run(broker, **arguments):
        async def body():
            coordinator = coordinator_of(broker)
            await coordinator.start()
            try:
                await test(broker, **arguments)
            finally:
                await coordinator.stop()
        run_coroutine(body())
    return run


# --- making groups ------------------------------------------------------------------------------------------------

async def join_consumer(broker, group="cg", member="m-1", topics=("t",)):
    answer = (await call(broker, 1, ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=0, rebalance_timeout_ms=30_000,
        subscribed_topic_names=list(topics), topic_partitions=[]))).decoded
    assert answer.error_code == E.NONE, answer
    return answer


async def leave_consumer(broker, group="cg", member="m-1"):
    answer = (await call(broker, 1, ConsumerGroupHeartbeatRequest(group_id=group, member_id=member,
                                                                  member_epoch=-1))).decoded
    assert answer.error_code == E.NONE, answer


async def join_share(broker, group="sg", member=None, topics=("t",)):
    member = member or str(uuid.uuid4())
    answer = (await call(broker, 1, ShareGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=0, subscribed_topic_names=list(topics)))).decoded
    assert answer.error_code == E.NONE, answer
    return member


async def leave_share(broker, member, group="sg"):
    answer = (await call(broker, 1, ShareGroupHeartbeatRequest(group_id=group, member_id=member,
                                                               member_epoch=-1))).decoded
    assert answer.error_code == E.NONE, answer


# --- requests -----------------------------------------------------------------------------------------------------

async def commit(broker, version, *, group="cg", member="", epoch=-1, topic="t", partition=0, offset=5):
    request = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=epoch, member_id=member, topics=[
        CommitTopic(name=topic, topic_id=broker.topic(topic).topic_id, partitions=[
            CommitPartition(partition_index=partition, committed_offset=offset)])])
    answer = (await call(broker, version, request)).decoded
    return answer.topics[0].partitions[0].error_code


async def fetch(broker, *, group="cg", member=None, epoch=-1, topics=(("t", [0]),), version=9):
    """(group error, {(topic, partition): (offset, error)})."""
    wanted = None if topics is None else [OffsetFetchRequest.OffsetFetchRequestTopics(
        name=name, topic_id=broker.topic(name).topic_id, partition_indexes=parts) for name, parts in topics]
    request = OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
        group_id=group, member_id=member, member_epoch=epoch, topics=wanted)])
    (answer,) = (await call(broker, version, request)).decoded.groups
    found = {(topic.name, p.partition_index): (p.committed_offset, p.error_code)
             for topic in answer.topics for p in topic.partitions}
    return answer.error_code, found


# --- OffsetCommit -------------------------------------------------------------------------------------------------

@coordinated
async def test_a_member_commits_with_its_epoch_and_reads_it_back(broker):
    joined = await join_consumer(broker)
    assert await commit(broker, 9, member="m-1", epoch=joined.member_epoch, offset=7) == E.NONE
    assert await fetch(broker, member="m-1", epoch=joined.member_epoch) == (E.NONE, {("t", 0): (7, E.NONE)})


@pytest.mark.parametrize("version", [9, 10])
@coordinated
async def test_a_stale_epoch_or_an_unknown_member_is_refused(broker, version):
    joined = await join_consumer(broker)
    assert await commit(broker, version, member="m-1", epoch=joined.member_epoch + 1) == E.STALE_MEMBER_EPOCH
    assert await commit(broker, version, member="m-1", epoch=joined.member_epoch - 1) == E.STALE_MEMBER_EPOCH
    assert await commit(broker, version, member="ghost", epoch=joined.member_epoch) == E.UNKNOWN_MEMBER_ID
    assert await commit(broker, version, member="", epoch=-1) == E.UNKNOWN_MEMBER_ID  # the group has members
    assert await fetch(broker) == (E.NONE, {("t", 0): (-1, E.NONE)})  # nothing was stored


@pytest.mark.parametrize("version", [2, 8])
@coordinated
async def test_a_consumer_protocol_member_must_commit_with_v9(broker, version):
    joined = await join_consumer(broker)
    assert await commit(broker, version, member="m-1", epoch=joined.member_epoch) == E.UNSUPPORTED_VERSION


@coordinated
async def test_an_empty_consumer_group_takes_commits_outside_membership(broker):
    await join_consumer(broker)
    await leave_consumer(broker)
    assert await commit(broker, 9, member="", epoch=-1, offset=11) == E.NONE
    assert await commit(broker, 8, member="", epoch=-1, offset=12) == E.NONE
    assert (await fetch(broker))[1] == {("t", 0): (12, E.NONE)}


@coordinated
async def test_a_commit_with_an_epoch_for_an_unknown_group(broker):
    assert await commit(broker, 9, group="nobody", member="m", epoch=3) == E.GROUP_ID_NOT_FOUND
    assert await commit(broker, 8, group="nobody", member="m", epoch=3) == E.ILLEGAL_GENERATION


@pytest.mark.parametrize("version", [8, 9])
@coordinated
async def test_a_share_group_has_no_committed_offsets(broker, version):
    await join_share(broker)
    assert await commit(broker, version, group="sg", member="", epoch=-1) == E.GROUP_ID_NOT_FOUND


# --- OffsetFetch --------------------------------------------------------------------------------------------------

@coordinated
async def test_offset_fetch_checks_the_member_epoch(broker):
    joined = await join_consumer(broker)
    assert (await fetch(broker, member="m-1", epoch=joined.member_epoch + 1))[0] == E.STALE_MEMBER_EPOCH
    assert (await fetch(broker, member="ghost", epoch=joined.member_epoch))[0] == E.UNKNOWN_MEMBER_ID
    assert (await fetch(broker, member="m-1", epoch=-1))[0] == E.STALE_MEMBER_EPOCH  # an id asks as a member
    assert (await fetch(broker, member=None, epoch=-1))[0] == E.NONE  # an admin client
    assert (await fetch(broker, member="ghost", version=8))[0] == E.NONE  # v8 sends neither


@coordinated
async def test_offset_fetch_of_a_share_group_answers_no_offsets(broker):
    await join_share(broker)
    assert await fetch(broker, group="sg") == (E.NONE, {("t", 0): (-1, E.NONE)})
    assert await fetch(broker, group="sg", topics=None) == (E.NONE, {})


# --- TxnOffsetCommit: tests/handlers/test_txn_offset_commit.py (test_a_consumer_groups_member_epoch_...) ---------

# --- OffsetDelete -------------------------------------------------------------------------------------------------

async def offset_delete(broker, group, *topics):
    request = OffsetDeleteRequest(group_id=group, topics=[
        OffsetDeleteRequest.OffsetDeleteRequestTopic(name=name, partitions=[
            OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)]) for name in topics])
    answer = (await call(broker, 0, request)).decoded
    return answer.error_code, {topic.name: topic.partitions[0].error_code for topic in answer.topics}


@coordinated
async def test_offset_delete_spares_the_topics_a_consumer_group_subscribes_to(broker):
    joined = await join_consumer(broker, topics=("t",))
    assert await commit(broker, 9, member="m-1", epoch=joined.member_epoch, topic="t") == E.NONE
    assert await commit(broker, 9, member="m-1", epoch=joined.member_epoch, topic="u") == E.NONE
    assert await offset_delete(broker, "cg", "t", "u") == (E.NONE, {"t": E.GROUP_SUBSCRIBED_TO_TOPIC, "u": E.NONE})
    _, found = await fetch(broker, member="m-1", epoch=joined.member_epoch, topics=(("t", [0]), ("u", [0])))
    assert found == {("t", 0): (5, E.NONE), ("u", 0): (-1, E.NONE)}


@coordinated
async def test_an_empty_consumer_group_goes_with_its_last_offset(broker):
    """Kafka's cleanup pass: an Empty consumer group left without committed offsets is removed, with its
    tombstones."""
    joined = await join_consumer(broker)
    assert await commit(broker, 9, member="m-1", epoch=joined.member_epoch, topic="u") == E.NONE
    await leave_consumer(broker)
    assert (await list_groups(broker))["cg"][1] == "Empty"
    assert await offset_delete(broker, "cg", "u") == (E.NONE, {"u": E.NONE})
    coordinator = coordinator_of(broker)
    await coordinator.offsets.expire_offsets()  # the periodic cleanup pass (offsets.retention.check.interval.ms)
    for _ in range(1000):  # removed by a task of its own, under the group's lock
        if coordinator.group("cg") is None:
            break
        await asyncio.sleep(0.01)
    assert coordinator.group("cg") is None and "cg" not in await list_groups(broker)


@coordinated
async def test_offset_delete_of_a_share_group_is_group_id_not_found(broker):
    await join_share(broker)
    assert await offset_delete(broker, "sg", "t") == (E.GROUP_ID_NOT_FOUND, {})


# --- ListGroups, DescribeGroups -----------------------------------------------------------------------------------

async def list_groups(broker, version=5, states=(), types=()):
    request = ListGroupsRequest(states_filter=list(states), types_filter=list(types))
    answer = (await call(broker, version, request)).decoded
    assert answer.error_code == E.NONE
    return {g.group_id: (g.protocol_type, g.group_state, g.group_type) for g in answer.groups}


@coordinated
async def test_list_groups_shows_every_type_and_filters_by_type_and_state(broker):
    await join_consumer(broker)
    await join_share(broker)
    assert await commit(broker, 8, group="simple") == E.NONE
    assert await list_groups(broker) == {"cg": ("consumer", "Stable", "consumer"), "sg": ("share", "Stable", "share"),
                                         "simple": ("", "Empty", "classic")}
    assert set(await list_groups(broker, types=["Consumer"])) == {"cg"}
    assert set(await list_groups(broker, types=["share", "classic"])) == {"sg", "simple"}
    assert set(await list_groups(broker, types=["streams"])) == set()
    assert set(await list_groups(broker, states=["stable"])) == {"cg", "sg"}
    assert set(await list_groups(broker, states=["empty"], types=["consumer"])) == set()
    assert await list_groups(broker, version=4) == {"cg": ("consumer", "Stable", ""), "sg": ("share", "Stable", ""),
                                                    "simple": ("", "Empty", "")}


@pytest.mark.parametrize("version", [0, 5, 6])
@coordinated
async def test_describe_groups_answers_consumer_and_share_groups_as_not_classic(broker, version):
    await join_consumer(broker)
    await join_share(broker)
    answer = (await call(broker, version, DescribeGroupsRequest(groups=["cg", "sg", "none"]))).decoded
    found = {g.group_id: (g.error_code, g.error_message, g.group_state, g.members) for g in answer.groups}
    if version < 6:
        assert found == {name: (E.NONE, None, "Dead", []) for name in ("cg", "sg", "none")}
    else:
        assert found == {"cg": (E.GROUP_ID_NOT_FOUND, "Group cg is not a classic group.", "Dead", []),
                         "sg": (E.GROUP_ID_NOT_FOUND, "Group sg is not a classic group.", "Dead", []),
                         "none": (E.GROUP_ID_NOT_FOUND, "Group none not found.", "Dead", [])}


# --- DeleteGroups -------------------------------------------------------------------------------------------------

async def delete_groups(broker, *groups):
    answer = (await call(broker, 2, DeleteGroupsRequest(groups_names=list(groups)))).decoded
    return {result.group_id: result.error_code for result in answer.results}


@coordinated
async def test_delete_groups_of_every_type_only_when_empty(broker):
    joined = await join_consumer(broker)
    assert await commit(broker, 9, member="m-1", epoch=joined.member_epoch) == E.NONE
    member = await join_share(broker)
    assert await delete_groups(broker, "cg", "sg") == {"cg": E.NON_EMPTY_GROUP, "sg": E.NON_EMPTY_GROUP}
    await leave_consumer(broker)
    await leave_share(broker, member)
    assert await delete_groups(broker, "cg", "sg") == {"cg": E.NONE, "sg": E.NONE}
    assert await delete_groups(broker, "cg", "sg") == {"cg": E.GROUP_ID_NOT_FOUND, "sg": E.GROUP_ID_NOT_FOUND}
    assert await list_groups(broker) == {}
    assert await fetch(broker) == (E.NONE, {("t", 0): (-1, E.NONE)})  # the offsets went with the group


# --- restart ------------------------------------------------------------------------------------------------------

def test_a_consumer_groups_offsets_and_type_survive_a_restart(tmp_path):
    async def before():
        broker = make_broker(tmp_path / "data")
        broker.create_topic("t", 2)
        coordinator = coordinator_of(broker)
        await coordinator.start()
        try:
            joined = await join_consumer(broker)
            assert await commit(broker, 10, member="m-1", epoch=joined.member_epoch, offset=9) == E.NONE
        finally:
            await coordinator.stop()
            broker.logs.shutdown()

    async def after():
        broker = make_broker(tmp_path / "data")
        coordinator = coordinator_of(broker)
        await coordinator.start()
        try:
            assert (await list_groups(broker))["cg"] == ("consumer", "Stable", "consumer")
            assert await fetch(broker) == (E.NONE, {("t", 0): (9, E.NONE)})
            assert (await fetch(broker, member="m-1", epoch=99))[0] == E.STALE_MEMBER_EPOCH
        finally:
            await coordinator.stop()
            broker.logs.shutdown()

    run_coroutine(before())
    run_coroutine(after())
