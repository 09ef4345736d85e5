"""ShareGroupDescribe (77) on the wire, v1: a described group (state, epochs, assignor, members and their
assignments with topic names), Kafka 4.2's per-group errors and messages, authorized operations, and the
authorization rules (GROUP DESCRIBE; a group assigning a topic the principal may not describe is hidden)."""
from __future__ import annotations

from compatbroker.coordinator import coordinator_of
from compatbroker.coordinator.offsets import CommittedOffset
from compatbroker.handlers import HANDLERS, build_registry
from compatbroker.protocol import RequestHeader, encode_request
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import ShareGroupDescribeRequest
from compatbroker.security.acls import AclOperation, ResourceType

from tests.server.helpers import RawClient, running_server

from .authz_helpers import AUTHORIZER_ON, INT32_MIN, allow
from .share_group_helpers import GROUP, coordinated, describe_groups, heartbeat

GROUP_OPERATIONS = 3400  # READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS


async def test_a_group_with_members(broker):
    broker = await coordinated(broker)
    broker.create_topic("t", 2)
    await heartbeat(broker, "a", 0, ["t"], rack_id="rack1")
    await heartbeat(broker, "b", 0, ["t"])
    (group,) = await describe_groups(broker, GROUP)
    assert (group.error_code, group.group_state, group.group_epoch, group.assignment_epoch, group.assignor_name,
            group.authorized_operations) == (ErrorCode.NONE, "Stable", 2, 2, "simple", INT32_MIN)
    members = {m.member_id: m for m in group.members}
    a, b = members["a"], members["b"]
    assert (a.rack_id, a.member_epoch, a.client_id, a.client_host, a.subscribed_topic_names) == \
        ("rack1", 1, "handler-tests", "/127.0.0.1", ["t"])
    assert b.member_epoch == 2 and b.rack_id is None
    assert [(tp.topic_id, tp.topic_name, tp.partitions) for tp in a.assignment.topic_partitions] == \
        [(broker.topic("t").topic_id, "t", [0, 1])]   # a has not heartbeated since b joined


async def test_errors_per_group(broker):
    broker = await coordinated(broker)
    broker.create_topic("t", 1)
    await coordinator_of(broker).offsets.commit("classic", [CommittedOffset("t", 0, 1)])
    answers = await describe_groups(broker, "", "missing", "classic")
    assert [(g.group_id, g.error_code, g.error_message) for g in answers] == [
        ("", ErrorCode.INVALID_GROUP_ID, None),
        ("missing", ErrorCode.GROUP_ID_NOT_FOUND, "Group missing not found."),
        ("classic", ErrorCode.GROUP_ID_NOT_FOUND, "Group classic is not a share group.")]


async def test_while_loading(broker):
    (group,) = await describe_groups(broker, GROUP)
    assert group.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


async def test_an_empty_group_and_authorized_operations(broker):
    broker = await coordinated(broker)
    broker.create_topic("t", 1)
    await heartbeat(broker, "a", 0, ["t"])
    await heartbeat(broker, "a", -1)
    (group,) = await describe_groups(broker, GROUP, operations=True)
    assert (group.group_state, group.members, group.authorized_operations) == ("Empty", [], GROUP_OPERATIONS)


async def test_authorization(broker_factory):
    broker = await coordinated(broker_factory(**AUTHORIZER_ON))
    broker.create_topic("t", 1)
    await heartbeat(broker, "a", 0, ["t"])                     # set up as the super user
    await heartbeat(broker, "a", 0, ["t"], group="other")
    allow(broker, AclOperation.DESCRIBE, ResourceType.GROUP, GROUP)
    answers = await describe_groups(broker, GROUP, "other", as_alice=True)
    # denied groups first, as Kafka answers them; the described group hides its topic ALICE cannot describe
    assert [(g.group_id, g.error_code, g.error_message, g.members) for g in answers] == [
        ("other", ErrorCode.GROUP_AUTHORIZATION_FAILED, None, []),
        (GROUP, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
         "The group has described topic(s) that the client is not authorized to describe.", [])]
    allow(broker, AclOperation.DESCRIBE, ResourceType.TOPIC, "t")
    (group,) = await describe_groups(broker, GROUP, operations=True, as_alice=True)
    assert (group.error_code, len(group.members), group.authorized_operations) == \
        (ErrorCode.NONE, 1, 1 << AclOperation.DESCRIBE)


async def test_only_version_1_is_served(tmp_path):
    assert (HANDLERS[77].MIN_VERSION, HANDLERS[77].MAX_VERSION) == (1, 1)
    async with running_server(tmp_path, build_registry(["api_versions", "share_group_describe"])) as (server, port):
        await coordinated(server.broker)
        request = ShareGroupDescribeRequest(group_ids=[GROUP])
        client = await RawClient.connect(port)
        await client.send(request, version=1, correlation_id=1)
        _, body = await client.read_response(77, 1)
        assert [g.error_code for g in body.groups] == [ErrorCode.GROUP_ID_NOT_FOUND]
        frame = bytearray(encode_request(RequestHeader(request_api_key=77, request_api_version=1, correlation_id=2,
                                                       client_id="v0"), request))
        frame[2:4] = (0).to_bytes(2, "big")   # Kafka 4.0's early-access version
        await client.send_frame(bytes(frame))
        assert await client.closed_by_server()
        await client.close()
