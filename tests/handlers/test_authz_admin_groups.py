"""Authorization of the group APIs with Kafka's StandardAuthorizer on (KafkaApis: handleFindCoordinatorRequest,
handleJoinGroupRequest, handleSyncGroupRequest, handleHeartbeatRequest, handleLeaveGroupRequest,
handleOffsetCommitRequest, handleOffsetFetchRequest, handleOffsetDeleteRequest, handleDescribeGroupsRequest,
handleListGroupsRequest, handleDeleteGroupsRequest): the ACL each needs, the error a denied request answers, and
that a denied request changes nothing.

Set-up steps run as the anonymous super user (`helpers.call`, the membership helpers); the principal under test is
ALICE (`authz_helpers.call_as`), who has only the ACLs a test gives her.
"""
from __future__ import annotations

import uuid

import pytest

from compatbroker.coordinator.offsets import CommittedOffset
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import (DeleteGroupsRequest, DescribeGroupsRequest, FindCoordinatorRequest,
                                            HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, ListGroupsRequest,
                                            OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest,
                                            SyncGroupRequest)
from compatbroker.protocol.wire import ZERO_UUID
from compatbroker.security.acls import CLUSTER_NAME, AclOperation, PatternType, ResourceType
from tests.coordinator.membership_support import form_group, protocols, started_coordinator

from .authz_helpers import AUTHORIZER_ON, INT32_MIN, allow, call_as, deny

READ, DESCRIBE, DELETE = AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE
GROUP, TOPIC, CLUSTER = ResourceType.GROUP, ResourceType.TOPIC, ResourceType.CLUSTER
PREFIXED = PatternType.PREFIXED
E = ErrorCode


@pytest.fixture
def secured(broker_factory):
    """A broker with the authorizer on and topics "allowed" and "secret" (2 partitions each); each test starts its
    group coordinator (`coordinated`) on its own event loop."""
    broker = broker_factory(**AUTHORIZER_ON)
    broker.create_topic("allowed", 2)
    broker.create_topic("secret", 2)
    return broker


async def coordinated(broker):
    """`broker` with a loaded group coordinator."""
    await started_coordinator(broker)
    return broker


def coordinator(broker):
    return broker.coordinator


async def committed(broker, group: str, *offsets: tuple[str, int, int]) -> None:
    """Offsets stored for `group` as the broker's own coordinator writes them (no request, no authorization)."""
    await coordinator(broker).offsets.commit(group, [CommittedOffset(t, p, at) for t, p, at in offsets])


def stored(broker, group: str) -> dict[tuple[str, int], int]:
    return {key: value.offset for key, value in coordinator(broker).offsets.fetch(group).items()}


# --- FindCoordinator ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 3])
async def test_find_coordinator_of_a_group_needs_describe_on_it(secured, version):
    await coordinated(secured)
    denied = (await call_as(secured, version, FindCoordinatorRequest(key="g", key_type=0))).decoded
    assert (denied.error_code, denied.node_id, denied.host, denied.port) == (E.GROUP_AUTHORIZATION_FAILED, -1, "", -1)
    allow(secured, DESCRIBE, GROUP, "g")
    found = (await call_as(secured, version, FindCoordinatorRequest(key="g", key_type=0))).decoded
    assert (found.error_code, found.node_id) == (E.NONE, secured.node_id)


@pytest.mark.parametrize("version", [1, 3])
async def test_find_coordinator_of_a_transaction_needs_describe_on_the_transactional_id(secured, version):
    await coordinated(secured)
    allow(secured, DESCRIBE, GROUP, "tx")  # a group ACL of the same name does not count
    request = FindCoordinatorRequest(key="tx", key_type=1)
    denied = (await call_as(secured, version, request)).decoded
    assert (denied.error_code, denied.node_id) == (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)
    allow(secured, DESCRIBE, ResourceType.TRANSACTIONAL_ID, "tx")
    found = (await call_as(secured, version, request)).decoded
    assert (found.error_code, found.node_id) == (E.NONE, secured.node_id)


@pytest.mark.parametrize("version", [4, 6])
async def test_find_coordinator_batches_answer_each_key_on_its_own(secured, version):
    await coordinated(secured)
    allow(secured, DESCRIBE, GROUP, "mine")
    allow(secured, DESCRIBE, ResourceType.TRANSACTIONAL_ID, "tx-mine")
    groups = (await call_as(secured, version, FindCoordinatorRequest(key_type=0, coordinator_keys=["mine", "other"])))
    assert [(c.key, c.error_code, c.node_id) for c in groups.decoded.coordinators] == [
        ("mine", E.NONE, secured.node_id), ("other", E.GROUP_AUTHORIZATION_FAILED, -1)]
    txns = await call_as(secured, version, FindCoordinatorRequest(key_type=1, coordinator_keys=["tx-other", "tx-mine"]))
    assert [(c.key, c.error_code) for c in txns.decoded.coordinators] == [
        ("tx-other", E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), ("tx-mine", E.NONE)]


async def test_find_coordinator_of_a_share_group_needs_cluster_action(secured):
    await coordinated(secured)
    request = FindCoordinatorRequest(key_type=2, coordinator_keys=["s1", "s2"])
    denied = (await call_as(secured, 6, request)).decoded
    assert [(c.key, c.error_code, c.node_id) for c in denied.coordinators] == [
        ("s1", E.CLUSTER_AUTHORIZATION_FAILED, -1), ("s2", E.CLUSTER_AUTHORIZATION_FAILED, -1)]
    allow(secured, AclOperation.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)
    allowed = (await call_as(secured, 6, request)).decoded  # no share coordinator here, as in Kafka without one
    assert [c.error_code for c in allowed.coordinators] == [E.INVALID_REQUEST, E.INVALID_REQUEST]
    v5 = (await call_as(secured, 5, request)).decoded  # before v6 a share key is malformed, whoever asks
    assert [c.error_code for c in v5.coordinators] == [E.INVALID_REQUEST, E.INVALID_REQUEST]


# --- JoinGroup, SyncGroup, Heartbeat, LeaveGroup --------------------------------------------------------------------

def join_request(group: str, member_id: str = "") -> JoinGroupRequest:
    return JoinGroupRequest(group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                            member_id=member_id, protocol_type="consumer", protocols=protocols("range"))


@pytest.mark.parametrize("version", [0, 6, 9])
async def test_join_group_needs_read_on_the_group(secured, version):
    await coordinated(secured)
    allow(secured, DESCRIBE, GROUP, "g")  # DESCRIBE is not enough
    denied = (await call_as(secured, version, join_request("g", "someone"))).decoded
    assert denied.error_code == E.GROUP_AUTHORIZATION_FAILED
    assert (denied.member_id, denied.generation_id, denied.leader, denied.members) == ("", -1, "", [])
    assert denied.protocol_name == ("" if version < 7 else None)
    assert coordinator(secured).group("g") is None  # no group was made for the denied member


async def test_a_member_allowed_to_read_the_group_joins(secured):
    await coordinated(secured)
    allow(secured, READ, GROUP, "g")
    answer = (await call_as(secured, 9, join_request("g"))).decoded
    assert answer.error_code == E.MEMBER_ID_REQUIRED  # KIP-394's first round trip: the join goes on
    assert answer.member_id


def sync_request(group: str, member_id: str, generation: int, assignments: dict[str, bytes]) -> SyncGroupRequest:
    return SyncGroupRequest(group_id=group, generation_id=generation, member_id=member_id, protocol_type="consumer",
                            protocol_name="range", assignments=[
                                SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                                for m, a in assignments.items()])


@pytest.mark.parametrize("version", [0, 5])
async def test_sync_group_needs_read_on_the_group(secured, version):
    await coordinated(secured)
    leader, = await form_group(secured, "g", 1)
    before = coordinator(secured).group("g").members[leader.member_id].assignment
    request = sync_request("g", leader.member_id, leader.generation_id, {leader.member_id: b"stolen"})
    denied = (await call_as(secured, version, request)).decoded
    assert (denied.error_code, denied.assignment) == (E.GROUP_AUTHORIZATION_FAILED, b"")
    assert coordinator(secured).group("g").members[leader.member_id].assignment == before
    allow(secured, READ, GROUP, "g")
    synced = (await call_as(secured, version, request)).decoded
    assert (synced.error_code, synced.assignment) == (E.NONE, before)  # Stable: the stored assignment


async def test_sync_group_v5_checks_the_protocol_before_authorizing(secured):
    await coordinated(secured)
    request = SyncGroupRequest(group_id="g", generation_id=1, member_id="m", protocol_type=None,
                               protocol_name="range", assignments=[])
    assert (await call_as(secured, 5, request)).decoded.error_code == E.INCONSISTENT_GROUP_PROTOCOL


@pytest.mark.parametrize("version", [0, 4])
async def test_heartbeat_needs_read_on_the_group(secured, version):
    await coordinated(secured)
    leader, = await form_group(secured, "g", 1)
    request = HeartbeatRequest(group_id="g", generation_id=leader.generation_id, member_id=leader.member_id)
    assert (await call_as(secured, version, request)).decoded.error_code == E.GROUP_AUTHORIZATION_FAILED
    allow(secured, READ, GROUP, "g")
    assert (await call_as(secured, version, request)).decoded.error_code == E.NONE


@pytest.mark.parametrize("version", [0, 3, 5])
async def test_leave_group_needs_read_on_the_group(secured, version):
    await coordinated(secured)
    leader, = await form_group(secured, "g", 1)
    if version >= 3:
        request = LeaveGroupRequest(group_id="g", members=[LeaveGroupRequest.MemberIdentity(
            member_id=leader.member_id, reason="bye" if version >= 5 else None)])
    else:
        request = LeaveGroupRequest(group_id="g", member_id=leader.member_id)
    denied = (await call_as(secured, version, request)).decoded
    assert (denied.error_code, denied.members) == (E.GROUP_AUTHORIZATION_FAILED, [])
    assert leader.member_id in coordinator(secured).group("g").members  # still a member
    allow(secured, READ, GROUP, "g")
    assert (await call_as(secured, version, request)).decoded.error_code == E.NONE
    assert coordinator(secured).group("g").members == {}


# --- OffsetCommit ---------------------------------------------------------------------------------------------------

def commit_request(version: int, broker, *topics: str, group: str = "g") -> OffsetCommitRequest:
    """Offset 7 for partition 0 of each topic (named, or by id from v10; an unknown name gets a random id)."""
    def topic_id(name):
        info = broker.topic(name)
        return (info.topic_id if info else uuid.uuid4()) if version >= 10 else ZERO_UUID
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", retention_time_ms=-1,
                               topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
                                   name=name, topic_id=topic_id(name), partitions=[
                                       OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0,
                                                                                        committed_offset=7)])
                                   for name in topics])


def commit_errors(answer) -> list[int]:
    return [p.error_code for topic in answer.decoded.topics for p in topic.partitions]


@pytest.mark.parametrize("version", [0, 2, 8, 10])
async def test_offset_commit_needs_read_on_the_group_first(secured, version):
    await coordinated(secured)
    allow(secured, READ, TOPIC, "allowed")
    allow(secured, DESCRIBE, GROUP, "g")  # DESCRIBE is not enough
    answer = await call_as(secured, version, commit_request(version, secured, "allowed", "secret"))
    assert commit_errors(answer) == [E.GROUP_AUTHORIZATION_FAILED] * 2
    assert stored(secured, "g") == {}
    assert coordinator(secured).group("g") is None


@pytest.mark.parametrize("version", [2, 8, 10])
async def test_offset_commit_needs_read_on_each_topic(secured, version):
    await coordinated(secured)
    allow(secured, READ, GROUP, "g")
    allow(secured, READ, TOPIC, "allowed")
    answer = await call_as(secured, version, commit_request(version, secured, "allowed", "secret", "absent"))
    # an unknown topic the principal may not read is answered as denied: its existence is not disclosed
    unknown = E.UNKNOWN_TOPIC_ID if version >= 10 else E.TOPIC_AUTHORIZATION_FAILED
    assert commit_errors(answer) == [E.NONE, E.TOPIC_AUTHORIZATION_FAILED, unknown]
    assert stored(secured, "g") == {("allowed", 0): 7}


async def test_offset_commit_answers_an_unknown_topic_the_principal_may_read(secured):
    await coordinated(secured)
    allow(secured, READ, GROUP, "g")
    allow(secured, READ, TOPIC, "absent")
    answer = await call_as(secured, 8, commit_request(8, secured, "absent"))
    assert commit_errors(answer) == [E.UNKNOWN_TOPIC_OR_PARTITION]


# --- OffsetFetch ----------------------------------------------------------------------------------------------------

def fetch_request(version: int, group: str, topics: list[str] | None) -> OffsetFetchRequest:
    """Partitions 0 and 1 of each topic; None: every partition the group has an offset for."""
    if version >= 8:
        wanted = None if topics is None else [
            OffsetFetchRequest.OffsetFetchRequestTopics(name=name, partition_indexes=[0, 1]) for name in topics]
        return OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=wanted)])
    wanted = None if topics is None else [
        OffsetFetchRequest.OffsetFetchRequestTopic(name=name, partition_indexes=[0, 1]) for name in topics]
    return OffsetFetchRequest(group_id=group, topics=wanted)


def fetched(answer, version: int) -> tuple[int, dict[tuple[str, int], tuple[int, int]]]:
    """(group error, {(topic, partition): (offset, error)})."""
    group = answer.decoded.groups[0] if version >= 8 else answer.decoded
    return group.error_code, {(t.name, p.partition_index): (p.committed_offset, p.error_code)
                              for t in group.topics for p in t.partitions}


@pytest.mark.parametrize("version", [0, 1])
async def test_offset_fetch_v0_v1_put_a_denied_group_on_every_partition(secured, version):
    await coordinated(secured)
    await committed(secured, "g", ("allowed", 0, 5))
    allow(secured, DESCRIBE, TOPIC, "allowed")
    _, partitions = fetched(await call_as(secured, version, fetch_request(version, "g", ["allowed"])), version)
    assert partitions == {("allowed", 0): (-1, E.GROUP_AUTHORIZATION_FAILED),
                          ("allowed", 1): (-1, E.GROUP_AUTHORIZATION_FAILED)}


@pytest.mark.parametrize("version", [2, 7, 8, 9])
async def test_offset_fetch_needs_describe_on_the_group(secured, version):
    await coordinated(secured)
    await committed(secured, "g", ("allowed", 0, 5))
    allow(secured, DESCRIBE, TOPIC, "allowed")
    answer = await call_as(secured, version, fetch_request(version, "g", ["allowed"]))
    assert fetched(answer, version) == (E.GROUP_AUTHORIZATION_FAILED, {})


@pytest.mark.parametrize("version", [1, 5, 8])
async def test_offset_fetch_hides_the_offsets_of_topics_the_principal_may_not_describe(secured, version):
    await coordinated(secured)
    await committed(secured, "g", ("allowed", 0, 5), ("secret", 0, 9))
    allow(secured, DESCRIBE, GROUP, "g")
    allow(secured, DESCRIBE, TOPIC, "allowed")
    answer = await call_as(secured, version, fetch_request(version, "g", ["allowed", "secret"]))
    assert fetched(answer, version) == (E.NONE, {
        ("allowed", 0): (5, E.NONE), ("allowed", 1): (-1, E.NONE),
        ("secret", 0): (-1, E.TOPIC_AUTHORIZATION_FAILED), ("secret", 1): (-1, E.TOPIC_AUTHORIZATION_FAILED)})


@pytest.mark.parametrize("version", [2, 7, 8])
async def test_offset_fetch_of_all_partitions_leaves_out_topics_the_principal_may_not_describe(secured, version):
    await coordinated(secured)
    await committed(secured, "g", ("allowed", 0, 5), ("secret", 1, 9))
    allow(secured, DESCRIBE, GROUP, "g")
    allow(secured, READ, TOPIC, "allowed")  # READ implies DESCRIBE
    answer = await call_as(secured, version, fetch_request(version, "g", None))
    assert fetched(answer, version) == (E.NONE, {("allowed", 0): (5, E.NONE)})


async def test_offset_fetch_answers_each_group_of_a_batch_on_its_own(secured):
    await coordinated(secured)
    await committed(secured, "mine", ("allowed", 0, 5))
    await committed(secured, "other", ("allowed", 0, 6))
    allow(secured, DESCRIBE, GROUP, "mine")
    allow(secured, DESCRIBE, TOPIC, "allowed")
    request = OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=g, topics=None)
                                         for g in ("mine", "other")])
    answer = (await call_as(secured, 8, request)).decoded
    assert [(g.group_id, g.error_code, [t.name for t in g.topics]) for g in answer.groups] == [
        ("mine", E.NONE, ["allowed"]), ("other", E.GROUP_AUTHORIZATION_FAILED, [])]


# --- OffsetDelete ---------------------------------------------------------------------------------------------------

def offset_delete_request(group: str, *topics: str) -> OffsetDeleteRequest:
    return OffsetDeleteRequest(group_id=group, topics=[OffsetDeleteRequest.OffsetDeleteRequestTopic(
        name=name, partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])
        for name in topics])


async def test_offset_delete_needs_delete_on_the_group(secured):
    await coordinated(secured)
    await committed(secured, "g", ("allowed", 0, 5))
    allow(secured, READ, GROUP, "g")  # READ is not enough
    allow(secured, READ, TOPIC, "allowed")
    answer = (await call_as(secured, 0, offset_delete_request("g", "allowed"))).decoded
    assert (answer.error_code, answer.topics) == (E.GROUP_AUTHORIZATION_FAILED, [])
    assert stored(secured, "g") == {("allowed", 0): 5}


async def test_offset_delete_needs_read_on_each_topic(secured):
    await coordinated(secured)
    await committed(secured, "g", ("allowed", 0, 5), ("secret", 0, 9))
    allow(secured, DELETE, GROUP, "g")
    allow(secured, READ, TOPIC, "allowed")
    answer = (await call_as(secured, 0, offset_delete_request("g", "allowed", "secret", "absent"))).decoded
    assert answer.error_code == E.NONE
    assert [(t.name, [p.error_code for p in t.partitions]) for t in answer.topics] == [
        ("allowed", [E.NONE]), ("secret", [E.TOPIC_AUTHORIZATION_FAILED]), ("absent", [E.TOPIC_AUTHORIZATION_FAILED])]
    assert stored(secured, "g") == {("secret", 0): 9}


# --- DescribeGroups, ListGroups, DeleteGroups -----------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 3, 6])
async def test_describe_groups_needs_describe_on_each_group(secured, version):
    await coordinated(secured)
    leader, = await form_group(secured, "mine", 1)
    await form_group(secured, "other", 1)
    allow(secured, READ, GROUP, "mine")  # READ implies DESCRIBE
    request = DescribeGroupsRequest(groups=["other", "mine"], include_authorized_operations=version >= 3)
    other, mine = (await call_as(secured, version, request)).decoded.groups
    assert (other.group_id, other.error_code) == ("other", E.GROUP_AUTHORIZATION_FAILED)
    assert (other.group_state, other.protocol_type, other.protocol_data, other.members) == ("", "", "", [])
    assert other.authorized_operations == INT32_MIN
    assert (mine.error_code, mine.group_state, [m.member_id for m in mine.members]) == (
        E.NONE, "Stable", [leader.member_id])
    if version >= 3:  # READ, and DESCRIBE which READ implies: bit n for operation code n
        assert mine.authorized_operations == (1 << READ) | (1 << DESCRIBE)


async def test_describe_groups_leaves_authorized_operations_out_unless_asked(secured):
    await coordinated(secured)
    await form_group(secured, "mine", 1)
    allow(secured, DESCRIBE, GROUP, "mine")
    [mine] = (await call_as(secured, 5, DescribeGroupsRequest(groups=["mine"]))).decoded.groups
    assert (mine.error_code, mine.authorized_operations) == (E.NONE, INT32_MIN)


@pytest.mark.parametrize("version", [0, 4, 5])
async def test_list_groups_shows_only_the_groups_the_principal_may_describe(secured, version):
    await coordinated(secured)
    for group in ("g-mine", "g-other", "x-mine"):
        await committed(secured, group, ("allowed", 0, 1))
    listed = (await call_as(secured, version, ListGroupsRequest())).decoded
    assert (listed.error_code, listed.groups) == (E.NONE, [])  # a filtered list, not an error
    allow(secured, DESCRIBE, GROUP, "g-mine")
    allow(secured, DESCRIBE, GROUP, "x-", pattern=PREFIXED)
    listed = (await call_as(secured, version, ListGroupsRequest())).decoded
    assert [g.group_id for g in listed.groups] == ["g-mine", "x-mine"]
    allow(secured, DESCRIBE, CLUSTER, CLUSTER_NAME)
    listed = (await call_as(secured, version, ListGroupsRequest())).decoded
    assert [g.group_id for g in listed.groups] == ["g-mine", "g-other", "x-mine"]


async def test_list_groups_denials_are_not_logged(secured, caplog):
    await coordinated(secured)
    await committed(secured, "g", ("allowed", 0, 1))
    caplog.set_level("INFO", logger="compatbroker.authorizer")
    await call_as(secured, 5, ListGroupsRequest())
    assert "is Denied" not in caplog.text
    await call_as(secured, 5, DescribeGroupsRequest(groups=["g"]))  # a refusal, which is logged
    assert "is Denied operation = DESCRIBE" in caplog.text


@pytest.mark.parametrize("version", [0, 2])
async def test_delete_groups_needs_delete_on_each_group(secured, version):
    await coordinated(secured)
    await committed(secured, "done", ("allowed", 0, 1))
    await committed(secured, "kept", ("allowed", 0, 2))
    allow(secured, DELETE, GROUP, "done")
    allow(secured, READ, GROUP, "kept")
    deny(secured, DELETE, GROUP, "kept")
    answer = (await call_as(secured, version, DeleteGroupsRequest(groups_names=["done", "kept"]))).decoded
    assert [(r.group_id, r.error_code) for r in answer.results] == [
        ("done", E.NONE), ("kept", E.GROUP_AUTHORIZATION_FAILED)]
    assert stored(secured, "done") == {}
    assert stored(secured, "kept") == {("allowed", 0): 2}
    assert coordinator(secured).group("kept") is not None

