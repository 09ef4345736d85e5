"""ShareGroupHeartbeat (76) on the wire: v1 only (v0 was Kafka 4.0's early access), each of Kafka 4.2's errors
with its message, authorization (GROUP READ, TOPIC DESCRIBE of the subscription), and a group that survives a
broker restart through its records in __consumer_offsets."""
from __future__ import annotations

import pytest

from compatbroker.coordinator import coordinator_of
from compatbroker.coordinator.offsets import CommittedOffset
from compatbroker.handlers import HANDLERS, build_registry
from compatbroker.protocol import RequestHeader, encode_request
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse
from compatbroker.security.acls import AclOperation, ResourceType

from tests.server.helpers import RawClient, running_server

from .authz_helpers import AUTHORIZER_ON, allow
from .helpers import make_broker
from .share_group_helpers import GROUP, coordinated, describe_groups, heartbeat

MEMBER = "Z2h0bHktY2xpZW50LW1lbWJlcg"   # clients make a base64 UUID of 22 characters


@pytest.fixture
def topic_broker(broker):
    broker.create_topic("t", 3)
    broker.create_topic("u", 1)
    return broker


async def test_join_heartbeat_and_leave(topic_broker):
    broker = await coordinated(topic_broker)
    joined = await heartbeat(broker, MEMBER, 0, ["t"])
    topic_id = broker.topic("t").topic_id
    assert (joined.error_code, joined.member_id, joined.member_epoch, joined.heartbeat_interval_ms) == \
        (ErrorCode.NONE, MEMBER, 1, 5000)
    assert [(tp.topic_id, tp.partitions) for tp in joined.assignment.topic_partitions] == [(topic_id, [0, 1, 2])]
    again = await heartbeat(broker, MEMBER, 1)
    assert (again.error_code, again.member_epoch, again.assignment) == (ErrorCode.NONE, 1, None)
    left = await heartbeat(broker, MEMBER, -1)
    assert (left.error_code, left.member_id, left.member_epoch, left.assignment) == (ErrorCode.NONE, MEMBER, -1, None)
    (group,) = await describe_groups(broker, GROUP)
    assert (group.group_state, group.members) == ("Empty", [])


@pytest.mark.parametrize("member_id, group_id, epoch, topics, rack, message", [
    ("", GROUP, 0, ["t"], None, "MemberId can't be empty."),
    (MEMBER, "", 0, ["t"], None, "GroupId can't be empty."),
    (MEMBER, GROUP, 0, ["t"], " ", "RackId can't be empty."),
    (MEMBER, GROUP, 0, None, None, "SubscribedTopicNames must be set in first request."),
    (MEMBER, GROUP, -2, None, None, "MemberEpoch is invalid.")])
async def test_invalid_requests(topic_broker, member_id, group_id, epoch, topics, rack, message):
    broker = await coordinated(topic_broker)
    answer = await heartbeat(broker, member_id, epoch, topics, group=group_id, rack_id=rack)
    assert (answer.error_code, answer.error_message, answer.member_id) == (ErrorCode.INVALID_REQUEST, message, None)


async def test_group_and_member_errors_carry_kafkas_messages(topic_broker):
    broker = await coordinated(topic_broker)
    assert _error(await heartbeat(broker, MEMBER, 3)) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                          f"Share group {GROUP} not found.")
    await heartbeat(broker, MEMBER, 0, ["t"])
    assert _error(await heartbeat(broker, "other", 1)) == (ErrorCode.UNKNOWN_MEMBER_ID,
                                                          f"Member other is not a member of group {GROUP}.")
    fenced = await heartbeat(broker, MEMBER, 7)
    assert fenced.error_code == ErrorCode.FENCED_MEMBER_EPOCH and "greater member epoch (7)" in fenced.error_message


async def test_a_group_id_used_by_another_group_type_is_not_a_share_group(topic_broker):
    broker = await coordinated(topic_broker)
    await coordinator_of(broker).offsets.commit("classic", [CommittedOffset("t", 0, 5)])
    answer = await heartbeat(broker, MEMBER, 0, ["t"], group="classic")
    assert _error(answer) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group classic is not a share group.")


async def test_the_group_size_limit(broker_factory):
    broker = await coordinated(broker_factory(**{"group.share.max.size": "1"}))
    broker.create_topic("t", 1)
    assert (await heartbeat(broker, "a", 0, ["t"])).error_code == ErrorCode.NONE
    assert _error(await heartbeat(broker, "b", 0, ["t"])) == (
        ErrorCode.GROUP_MAX_SIZE_REACHED, "The share group has reached its maximum capacity of 1 members.")


async def test_while_the_coordinator_loads(topic_broker):
    answer = await heartbeat(topic_broker, MEMBER, 0, ["t"])  # the first request starts the load
    assert answer.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    await coordinated(topic_broker)
    assert (await heartbeat(topic_broker, MEMBER, 0, ["t"])).error_code == ErrorCode.NONE


async def test_authorization_needs_group_read_and_topic_describe(broker_factory):
    broker = await coordinated(broker_factory(**AUTHORIZER_ON))
    broker.create_topic("t", 1)
    broker.create_topic("u", 1)
    assert (await heartbeat(broker, MEMBER, 0, ["t"], as_alice=True)).error_code == \
        ErrorCode.GROUP_AUTHORIZATION_FAILED
    allow(broker, AclOperation.READ, ResourceType.GROUP, GROUP)
    allow(broker, AclOperation.DESCRIBE, ResourceType.TOPIC, "t")
    assert (await heartbeat(broker, MEMBER, 0, ["t", "u"], as_alice=True)).error_code == \
        ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert coordinator_of(broker).share_groups.describe(GROUP) is None
    assert (await heartbeat(broker, MEMBER, 0, ["t"], as_alice=True)).error_code == ErrorCode.NONE


async def test_the_group_survives_a_restart(tmp_path):
    data_dir = tmp_path / "data"
    broker = await coordinated(make_broker(data_dir))
    broker.create_topic("t", 2)
    await heartbeat(broker, "a", 0, ["t"])
    second = await heartbeat(broker, "b", 0, ["t"])
    await coordinator_of(broker).stop()
    broker.logs.shutdown()
    restarted = await coordinated(make_broker(data_dir))
    try:
        answer = await heartbeat(restarted, "b", second.member_epoch)
        assert (answer.error_code, answer.member_epoch) == (ErrorCode.NONE, 2)
        (group,) = await describe_groups(restarted, GROUP)
        assert (group.group_state, group.group_epoch, sorted(m.member_id for m in group.members)) == \
            ("Stable", 2, ["a", "b"])
    finally:
        await coordinator_of(restarted).stop()
        restarted.logs.shutdown()


async def test_only_version_1_is_served(tmp_path):
    assert (HANDLERS[76].MIN_VERSION, HANDLERS[76].MAX_VERSION) == (1, 1)
    async with running_server(tmp_path, build_registry(["api_versions", "share_group_heartbeat"])) as (server, port):
        await coordinated(server.broker)
        server.broker.create_topic("t", 1)
        request = ShareGroupHeartbeatRequest(group_id=GROUP, member_id=MEMBER, member_epoch=0,
                                             subscribed_topic_names=["t"])
        client = await RawClient.connect(port)
        await client.send(request, version=1, correlation_id=5)
        header, body = await client.read_response(76, 1)
        assert (header.correlation_id, body.error_code, body.member_epoch) == (5, ErrorCode.NONE, 1)
        frame = bytearray(encode_request(RequestHeader(request_api_key=76, request_api_version=1, correlation_id=6,
                                                       client_id="v0"), request))
        frame[2:4] = (0).to_bytes(2, "big")   # the same request, claiming version 0
        await client.send_frame(bytes(frame))
        assert await client.closed_by_server()
        await client.close()


def _error(answer: ShareGroupHeartbeatResponse):
    return answer.error_code, answer.error_message
