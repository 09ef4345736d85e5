"""The group handlers at every version they declare: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
DescribeGroups, ListGroups and DeleteGroups; requests that kafka-python encodes (flexible versions included) and
that real clients sent; the coordinator facade (offset commit checks, simple groups, first use) and groups kept in
`__consumer_offsets` across a restart, with the real offset store."""
from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest
from kafka.protocol.consumer import (JoinGroupRequest as KpJoinGroupRequest,
                                     JoinGroupResponse as KpJoinGroupResponse,
                                     LeaveGroupRequest as KpLeaveGroupRequest,
                                     LeaveGroupResponse as KpLeaveGroupResponse,
                                     SyncGroupRequest as KpSyncGroupRequest,
                                     SyncGroupResponse as KpSyncGroupResponse)

from compatbroker.coordinator import Coordinator, GroupState, coordinator_of
from compatbroker.coordinator.offsets import CommittedOffset, GroupRecord, parse_record
from compatbroker.handlers import HANDLERS, RequestContext
from compatbroker.protocol import API_KEYS, decode_request, decode_response, encode_response
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import (DeleteGroupsRequest, FindCoordinatorRequest, HeartbeatRequest,
                                            ListGroupsRequest)

from tests.coordinator.membership_support import (FAST, StandInStore, WriteFailed, async_test, describe, finished,
                                                  form_group, heartbeat, join, join_new_members, join_request,
                                                  join_task, leave, reaches, records_in,
                                                  started_coordinator, subscription, sync, watch)
from tests.handlers.helpers import call, make_broker

GROUP = "g"
GROUP_MODULES = {10: "find_coordinator", 11: "join_group", 14: "sync_group", 12: "heartbeat", 13: "leave_group",
                 15: "describe_groups", 16: "list_groups", 42: "delete_groups"}
FRAMES = Path(__file__).resolve().parents[1] / "data" / "client_frames"
INT32_MIN = -2**31


def versions(api_key: int):
    module = HANDLERS[api_key]
    return range(module.MIN_VERSION, module.MAX_VERSION + 1)


def test_every_schema_version_is_declared_and_registered():
    for api_key, name in GROUP_MODULES.items():
        module = HANDLERS[api_key]
        assert module.__name__.endswith(name)
        request_cls = API_KEYS[api_key][0]
        assert (module.MIN_VERSION, module.MAX_VERSION) == request_cls.VALID_VERSIONS
        assert module.__doc__.startswith(request_cls.NAME.removesuffix("Request"))


# --- FindCoordinator ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", versions(10))
@async_test
async def test_find_coordinator_answers_this_broker_for_groups_and_transactions(broker, version):
    for key_type in ((0,) if version == 0 else (0, 1)):
        if version >= 4:
            request = FindCoordinatorRequest(key_type=key_type, coordinator_keys=["a", "b"])
            answer = (await call(broker, version, request)).decoded
            assert [(c.key, c.node_id, c.host, c.port, c.error_code) for c in answer.coordinators] == \
                [("a", 1, "localhost", 9092, 0), ("b", 1, "localhost", 9092, 0)]
            continue
        request = FindCoordinatorRequest(key="a", key_type=key_type)
        answer = (await call(broker, version, request)).decoded
        assert (answer.error_code, answer.node_id, answer.host, answer.port) == (0, 1, "localhost", 9092)
        assert answer.error_message == ("NONE" if version >= 1 else "")


@pytest.mark.parametrize("version", [1, 3, 4, 6])
@pytest.mark.parametrize("key_type", [2, 7])
@async_test
async def test_find_coordinator_refuses_other_key_types(broker, version, key_type):
    if version >= 4:
        answer = (await call(broker, version, FindCoordinatorRequest(key_type=key_type,
                                                                     coordinator_keys=["x"]))).decoded
        [coordinator] = answer.coordinators
        assert (coordinator.key, coordinator.error_code, coordinator.node_id) == ("x", ErrorCode.INVALID_REQUEST, -1)
        return
    answer = (await call(broker, version, FindCoordinatorRequest(key="x", key_type=key_type))).decoded
    assert (answer.error_code, answer.node_id, answer.host, answer.port) == (ErrorCode.INVALID_REQUEST, -1, "", -1)


# --- JoinGroup, SyncGroup, Heartbeat, LeaveGroup at every version -------------------------------------------------

@pytest.mark.parametrize("version", versions(11))
@async_test
async def test_join_group_at_every_version(broker, version):
    await started_coordinator(broker, store=StandInStore)
    instance = "static-1" if version >= 5 else None
    if version == 4:  # a dynamic member from v4: the MEMBER_ID_REQUIRED round trip first
        [task] = await join_new_members(broker, GROUP, 1, version=version)
    else:  # v0-3 members and static members are admitted at once
        task = join_task(broker, GROUP, version=version, instance=instance)
    answer = await finished(task)
    assert answer.error_code == ErrorCode.NONE
    assert (answer.generation_id, answer.leader, answer.member_id) == (1, answer.member_id, answer.member_id)
    assert answer.protocol_name == "range"
    assert answer.protocol_type == ("consumer" if version >= 7 else None)
    [member] = answer.members
    assert member.group_instance_id == instance
    assert answer.skip_assignment is False
    stranger = await join(broker, GROUP, "stranger", version=version)
    assert stranger.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert stranger.protocol_name == ("" if version < 7 else None)  # not nullable before v7
    if version >= 4:
        assert (await join(broker, "other", version=version)).error_code == ErrorCode.MEMBER_ID_REQUIRED


@pytest.mark.parametrize("version", versions(14))
@async_test
async def test_sync_group_at_every_version(broker, version):
    await started_coordinator(broker, store=StandInStore)
    answers = await finished(asyncio.gather(*await join_new_members(broker, GROUP, 2)))
    leader = next(a for a in answers if a.member_id == a.leader)
    follower = next(a for a in answers if a is not leader)
    plan = {leader.member_id: b"L", follower.member_id: b"F"}
    synced = await sync(broker, GROUP, leader.member_id, 1, plan, version=version)
    late = await sync(broker, GROUP, follower.member_id, 1, version=version)
    assert (synced.error_code, synced.assignment, late.error_code, late.assignment) == (0, b"L", 0, b"F")
    assert (synced.protocol_type, synced.protocol_name) == (("consumer", "range") if version >= 5 else (None, None))


@pytest.mark.parametrize("version", versions(12))
@async_test
async def test_heartbeat_at_every_version(broker, version):
    await started_coordinator(broker, store=StandInStore)
    leader, = await form_group(broker, GROUP, 1)
    assert await heartbeat(broker, GROUP, leader.member_id, 1, version=version) == ErrorCode.NONE
    assert await heartbeat(broker, GROUP, leader.member_id, 2, version=version) == ErrorCode.ILLEGAL_GENERATION


@pytest.mark.parametrize("version", versions(13))
@async_test
async def test_leave_group_at_every_version(broker, version):
    coordinator = await started_coordinator(broker, store=StandInStore)
    leader, follower = await form_group(broker, GROUP, 2)
    answer = await leave(broker, GROUP, (follower.member_id, None), version=version)
    assert answer.error_code == ErrorCode.NONE
    if version >= 3:
        assert [(m.member_id, m.error_code) for m in answer.members] == [(follower.member_id, 0)]
    assert list(coordinator.group(GROUP).members) == [leader.member_id]


# --- requests as other clients encode them ------------------------------------------------------------------------

async def serve_frame(broker, frame: bytes):
    """Run a raw request frame (header and body, no size) through its handler as the server does; returns the
    header and the encoded response body (without its size)."""
    header, body = decode_request(frame)
    module = HANDLERS[header.request_api_key]
    ctx = RequestContext(broker, header, peer="127.0.0.1:50000", listener_host="localhost", listener_port=9092)
    response = await module.handle(ctx, body)
    return header, encode_response(header.request_api_key, header.request_api_version, header.correlation_id,
                                   response)


def kafka_python_frame(request) -> bytes:
    request.with_header(correlation_id=7, client_id="kafka-python")
    return bytes(request.encode(header=True))


@pytest.mark.parametrize("version", [6, 7, 8, 9])
@async_test
async def test_flexible_join_and_sync_as_kafka_python_encodes_them(broker, version):
    """Limitation 2 of the mock: it read JoinGroup v6 and SyncGroup v4 arrays as int32. kafka-python's own
    encoding must be understood, and our answers must decode with kafka-python's decoder."""
    await started_coordinator(broker, store=StandInStore)
    metadata = subscription("t")

    def join_frame(member_id):
        return kafka_python_frame(KpJoinGroupRequest(
            version=version, group_id=GROUP, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
            member_id=member_id, group_instance_id=None, protocol_type="consumer",
            protocols=[("range", metadata), ("roundrobin", metadata)], reason="test"))

    _, data = await serve_frame(broker, join_frame(""))
    first = KpJoinGroupResponse.decode(data, version=version, header=True)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    _, data = await serve_frame(broker, join_frame(first.member_id))
    joined = KpJoinGroupResponse.decode(data, version=version, header=True)
    assert (joined.error_code, joined.generation_id, joined.protocol_name) == (0, 1, "range")
    assert [(m.member_id, bytes(m.metadata)) for m in joined.members] == [(first.member_id, metadata)]
    for sync_version in (4, 5):
        frame = kafka_python_frame(KpSyncGroupRequest(
            version=sync_version, group_id=GROUP, generation_id=1, member_id=first.member_id, group_instance_id=None,
            protocol_type="consumer", protocol_name="range", assignments=[(first.member_id, b"mine")]))
        _, data = await serve_frame(broker, frame)
        synced = KpSyncGroupResponse.decode(data, version=sync_version, header=True)
        assert (synced.error_code, bytes(synced.assignment)) == (0, b"mine")


@pytest.mark.parametrize("version", [3, 4, 5])
@async_test
async def test_batched_leave_as_kafka_python_encodes_it(broker, version):
    """Limitation 3 of the mock: it read LeaveGroup v3+ members as one member id, so the member stayed."""
    coordinator = await started_coordinator(broker, store=StandInStore)
    leader, follower = await form_group(broker, GROUP, 2)
    members = [(leader.member_id, None), (follower.member_id, None)]
    if version >= 5:
        members = [(m, i, "closing") for m, i in members]
    frame = kafka_python_frame(KpLeaveGroupRequest(version=version, group_id=GROUP, members=members))
    _, data = await serve_frame(broker, frame)
    answer = KpLeaveGroupResponse.decode(data, version=version, header=True)
    assert answer.error_code == 0 and [m.error_code for m in answer.members] == [0, 0]
    group = coordinator.group(GROUP)
    assert group.members == {} and group.state is GroupState.EMPTY


GROUP_APIS = ("FindCoordinator", "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "DescribeGroups",
              "ListGroups")


def expected_for_a_fresh_coordinator(request) -> ErrorCode:
    """What a recorded request gets from a coordinator that has never seen the client (the recorded member ids
    came from another broker)."""
    name = type(request).__name__
    if name == "JoinGroupRequest":
        return ErrorCode.MEMBER_ID_REQUIRED if request.member_id == "" else ErrorCode.UNKNOWN_MEMBER_ID
    if name in ("SyncGroupRequest", "HeartbeatRequest", "LeaveGroupRequest"):
        return ErrorCode.UNKNOWN_MEMBER_ID
    return ErrorCode.NONE


@pytest.mark.parametrize("frame", sorted(p for p in FRAMES.glob("*/*.bin") if p.name.split("__")[0] in GROUP_APIS),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
@async_test
async def test_real_clients_group_requests_are_served(broker, frame):
    await started_coordinator(broker, store=StandInStore)
    _, request = decode_request(frame.read_bytes())
    header, data = await serve_frame(broker, frame.read_bytes())
    _, body = decode_response(header.request_api_key, header.request_api_version, data)
    if type(body).__name__ == "DescribeGroupsResponse":
        [group] = body.groups
        assert group.group_state == "Dead"
        error = group.error_code if header.request_api_version < 6 else ErrorCode.NONE
    else:
        error = body.error_code
    assert error == expected_for_a_fresh_coordinator(request)


# --- DescribeGroups, ListGroups, DeleteGroups ---------------------------------------------------------------------

@pytest.mark.parametrize("version", versions(15))
@async_test
async def test_describe_groups_at_every_version(broker, version):
    await started_coordinator(broker, store=StandInStore)
    answer = await finished(join_task(broker, GROUP, instance="i-1", client_id="cid"))
    await sync(broker, GROUP, answer.member_id, 1, {answer.member_id: b"mine"}, instance="i-1")
    described, missing = await describe(broker, GROUP, "missing", version=version, include_operations=True)
    assert (described.error_code, described.group_state, described.protocol_type, described.protocol_data) == \
        (0, "Stable", "consumer", "range")
    [member] = described.members
    assert (member.member_id, member.client_id, member.client_host, member.member_assignment) == \
        (answer.member_id, "cid", "/127.0.0.1", b"mine")
    assert member.group_instance_id == ("i-1" if version >= 4 else None)
    assert described.authorized_operations == (3400 if version >= 3 else INT32_MIN)
    assert (missing.group_id, missing.group_state, missing.members) == ("missing", "Dead", [])
    if version >= 6:
        assert (missing.error_code, missing.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group missing not found.")
        assert missing.authorized_operations == INT32_MIN
    else:
        assert missing.error_code == 0


@pytest.mark.parametrize("version", versions(16))
@async_test
async def test_list_groups_at_every_version(broker, version):
    coordinator = await started_coordinator(broker, store=StandInStore)
    await form_group(broker, "stable", 1)
    await finished(asyncio.gather(*await join_new_members(broker, "completing", 1)))
    coordinator.offsets.with_offsets.add("offsets-only")
    request = ListGroupsRequest()
    listed = (await call(broker, version, request)).decoded
    assert listed.error_code == 0
    rows = [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups]
    state = (lambda s: s) if version >= 4 else (lambda s: "")
    kind = "classic" if version >= 5 else ""
    assert rows == [("completing", "consumer", state("CompletingRebalance"), kind),
                    ("offsets-only", "", state("Empty"), kind), ("stable", "consumer", state("Stable"), kind)]
    if version >= 4:
        filtered = (await call(broker, version, ListGroupsRequest(states_filter=["stable", " EMPTY "]))).decoded
        assert [g.group_id for g in filtered.groups] == ["offsets-only", "stable"]
    if version >= 5:
        none = (await call(broker, version, ListGroupsRequest(types_filter=["consumer"]))).decoded
        classic = (await call(broker, version, ListGroupsRequest(types_filter=["Classic"]))).decoded
        assert none.groups == [] and len(classic.groups) == 3


@pytest.mark.parametrize("version", versions(42))
@async_test
async def test_delete_groups_at_every_version(broker, version):
    coordinator = await started_coordinator(broker)  # the real store: tombstones in __consumer_offsets
    leader, = await form_group(broker, "busy", 1)
    await coordinator.offsets.commit("done", [CommittedOffset("t", 0, 5)])
    request = DeleteGroupsRequest(groups_names=["busy", "done", "missing"])
    answer = (await call(broker, version, request)).decoded
    assert [(r.group_id, r.error_code) for r in answer.results] == [
        ("busy", ErrorCode.NON_EMPTY_GROUP), ("done", ErrorCode.NONE), ("missing", ErrorCode.GROUP_ID_NOT_FOUND)]
    assert coordinator.offsets.fetch("done") == {}
    assert coordinator.group("done") is None
    await leave(broker, "busy", (leader.member_id, None))
    again = (await call(broker, version, DeleteGroupsRequest(groups_names=["busy"]))).decoded
    assert [(r.group_id, r.error_code) for r in again.results] == [("busy", ErrorCode.NONE)]


@async_test
async def test_a_failed_deletion_is_answered_with_the_write_error(broker):
    coordinator = await started_coordinator(broker, store=StandInStore)
    coordinator.offsets.with_offsets.add("done")
    coordinator.offsets.fail_with = WriteFailed(ErrorCode.NOT_COORDINATOR)
    answer = (await call(broker, 2, DeleteGroupsRequest(groups_names=["done"]))).decoded
    assert [r.error_code for r in answer.results] == [ErrorCode.NOT_COORDINATOR]


# --- offset commit checks and simple groups -----------------------------------------------------------------------

@async_test
async def test_offset_commit_checks_follow_kafka(broker):
    coordinator = await started_coordinator(broker, store=StandInStore)
    check = coordinator.validate_offset_commit
    assert check("nobody", 3, "m", None) == ErrorCode.ILLEGAL_GENERATION
    assert check("nobody", 3, "m", None, api_version=9) == ErrorCode.GROUP_ID_NOT_FOUND
    assert coordinator.group("nobody") is None
    assert check("simple", -1, "", None) == ErrorCode.NONE  # assign() consumers: creates a simple group
    simple = coordinator.group("simple")
    assert (simple.state, simple.protocol_type) == (GroupState.EMPTY, None)

    answers = await finished(asyncio.gather(*await join_new_members(broker, GROUP, 2)))
    leader = next(a for a in answers if a.member_id == a.leader)
    assert check(GROUP, 1, leader.member_id, None) == ErrorCode.REBALANCE_IN_PROGRESS  # CompletingRebalance
    assert check(GROUP, -1, "", None) == ErrorCode.UNKNOWN_MEMBER_ID
    assert check(GROUP, 1, "stranger", None) == ErrorCode.UNKNOWN_MEMBER_ID
    assert check(GROUP, 0, leader.member_id, None) == ErrorCode.ILLEGAL_GENERATION
    assert check(GROUP, 1, leader.member_id, "no-such-instance") == ErrorCode.UNKNOWN_MEMBER_ID
    await sync(broker, GROUP, leader.member_id, 1, {})
    assert check(GROUP, 1, leader.member_id, None) == ErrorCode.NONE


@async_test
async def test_an_empty_group_goes_with_its_last_offsets(broker):
    coordinator = await started_coordinator(broker, store=StandInStore)
    leader, = await form_group(broker, GROUP, 1)
    coordinator.offsets.with_offsets.add(GROUP)
    coordinator.on_offsets_deleted(GROUP)
    assert coordinator.group(GROUP) is not None  # still has offsets and members
    await leave(broker, GROUP, (leader.member_id, None))
    coordinator.offsets.with_offsets.discard(GROUP)
    coordinator.on_offsets_deleted(GROUP)
    assert coordinator.group(GROUP) is None
    await finished(asyncio.gather(*coordinator.membership._tasks))
    assert coordinator.offsets.deleted == [GROUP]


@async_test
async def test_a_coordinator_made_on_first_use_loads_in_the_background(broker):
    first = (await call(broker, 9, join_request(GROUP))).decoded
    assert first.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    coordinator = coordinator_of(broker)
    assert isinstance(coordinator, Coordinator) and coordinator is broker.coordinator
    await coordinator.start()
    # Kafka's session bounds apply by default
    assert (await call(broker, 9, join_request(GROUP, session_ms=1000))).decoded.error_code == \
        ErrorCode.INVALID_SESSION_TIMEOUT
    assert (await call(broker, 9, join_request(GROUP))).decoded.error_code == ErrorCode.MEMBER_ID_REQUIRED
    await coordinator.stop()


# --- groups in __consumer_offsets ---------------------------------------------------------------------------------

def group_records(broker, group_id: str) -> list:
    parsed = [parse_record(key, value) for key, value in records_in(broker, group_id)]
    return [p for p in parsed if isinstance(p, GroupRecord) and p.group_id == group_id]


@contextlib.asynccontextmanager
async def serving(data_dir):
    """A broker on `data_dir` with a started coordinator (the real store), both stopped on the way out: the next
    one on the same directory replays what this one wrote."""
    broker = make_broker(data_dir)
    try:
        coordinator = await started_coordinator(broker)
        yield broker, coordinator
        await coordinator.stop()
    finally:
        broker.logs.shutdown()


@async_test
async def test_a_stable_group_is_stored_and_survives_a_restart(data_dir):
    async with serving(data_dir) as (broker, _):
        leader, follower = await form_group(broker, GROUP, 2, session_ms=30_000)
        [record] = group_records(broker, GROUP)
        value = record.value
        assert (value.protocol_type, value.generation, value.protocol, value.leader) == \
            ("consumer", 1, "range", leader.member_id)
        assert {m.member_id: bytes(m.assignment) for m in value.members} == \
            {leader.member_id: b"0", follower.member_id: b"1"}

    async with serving(data_dir) as (broker, restarted):
        group = restarted.group(GROUP)
        assert (group.state, group.generation_id, group.leader_id) == (GroupState.STABLE, 1, leader.member_id)
        # Members carry on where they were: same generation, same assignment, no rebalance.
        assert await heartbeat(broker, GROUP, follower.member_id, 1) == ErrorCode.NONE
        assert (await sync(broker, GROUP, follower.member_id, 1)).assignment == b"1"
        [described] = await describe(broker, GROUP)
        assert {m.member_id for m in described.members} == {leader.member_id, follower.member_id}


@async_test
async def test_loaded_members_that_never_come_back_expire(data_dir):
    async with serving(data_dir) as (broker, _):
        await form_group(broker, GROUP, 1, session_ms=200)

    async with serving(data_dir) as (broker, restarted):
        states = watch(restarted.group(GROUP))
        await reaches(states, GroupState.EMPTY)
        assert restarted.group(GROUP).generation_id == 2
        await asyncio.gather(*restarted.membership._tasks)
        assert [r.value.generation for r in group_records(broker, GROUP)][-1] == 2


@async_test
async def test_a_deleted_group_stays_deleted_after_a_restart(data_dir):
    async with serving(data_dir) as (broker, coordinator):
        leader, = await form_group(broker, GROUP, 1)
        await leave(broker, GROUP, (leader.member_id, None))
        await asyncio.gather(*coordinator.membership._tasks)
        assert (await call(broker, 2, DeleteGroupsRequest(groups_names=[GROUP]))).decoded.results[0].error_code == 0
        assert group_records(broker, GROUP)[-1].value is None  # the tombstone

    async with serving(data_dir) as (broker, restarted):
        assert restarted.group(GROUP) is None
        assert (await call(broker, 4, HeartbeatRequest(group_id=GROUP, generation_id=1,
                                                       member_id=leader.member_id))).decoded.error_code == \
            ErrorCode.UNKNOWN_MEMBER_ID


def test_fast_settings_lower_only_the_session_floor():
    assert FAST.min_session_timeout_ms == 1 and FAST.initial_rebalance_delay_ms == 0
