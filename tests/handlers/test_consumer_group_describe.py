"""ConsumerGroupDescribe (69) v0-1 through the codec: a described group (state, epochs, assignor, members with their
assignment and target), v1's member type, the errors per group (unknown, another type, not loaded) and
authorization (GROUP DESCRIBE, TOPIC DESCRIBE of the assignments' topics, authorized operations)."""
from __future__ import annotations

import pytest

from compatbroker.coordinator import Coordinator, coordinator_of
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from compatbroker.security.acls import AclOperation, ResourceType

from .authz_helpers import AUTHORIZER_ON, INT32_MIN, allow, call_as
from .helpers import call

SIX = 6


async def ready(broker):
    broker.create_topic("orders", SIX)
    await coordinator_of(broker).start()


async def join(broker, group="g", member_id="m1", **fields):
    request = ConsumerGroupHeartbeatRequest(group_id=group, member_id=member_id, member_epoch=0,
                                            rebalance_timeout_ms=30_000, topic_partitions=[],
                                            subscribed_topic_names=["orders"], **fields)
    response = (await call(broker, 1, request, client_id="consumer-1")).decoded
    assert response.error_code == ErrorCode.NONE
    return response


async def describe(broker, *groups, version=1, operations=False):
    request = ConsumerGroupDescribeRequest(group_ids=list(groups), include_authorized_operations=operations)
    return (await call(broker, version, request)).decoded.groups


@pytest.mark.parametrize("version", [0, 1])
async def test_a_described_group(broker, version):
    await ready(broker)
    await join(broker, instance_id="pod-a", rack_id="r1", server_assignor="range")
    await join(broker, member_id="m2")
    [group] = await describe(broker, "g", version=version)
    assert (group.error_code, group.error_message) == (ErrorCode.NONE, None)
    assert (group.group_id, group.group_state, group.group_epoch, group.assignment_epoch, group.assignor_name) == (
        "g", "Reconciling", 2, 2, "range")
    assert group.authorized_operations == INT32_MIN  # not asked for
    first, second = group.members
    topic_id = broker.topic("orders").topic_id
    assert (first.member_id, first.instance_id, first.rack_id, first.member_epoch, first.client_id,
            first.client_host, first.subscribed_topic_names, first.subscribed_topic_regex) == (
        "m1", "pod-a", "r1", 1, "consumer-1", "/127.0.0.1", ["orders"], None)
    [owned] = first.assignment.topic_partitions
    assert (owned.topic_id, owned.topic_name, owned.partitions) == (topic_id, "orders", list(range(SIX)))
    [target] = first.target_assignment.topic_partitions
    assert target.partitions == [0, 1, 2]  # range: the first member's half, not yet reconciled
    assert second.assignment.topic_partitions == []
    assert second.target_assignment.topic_partitions[0].partitions == [3, 4, 5]
    assert first.member_type == (1 if version >= 1 else -1)  # v1: consumer protocol member


async def test_unknown_groups_and_groups_of_other_types(broker):
    await ready(broker)
    coordinator = coordinator_of(broker)
    coordinator.membership.get_or_create("classic")
    unknown, classic = await describe(broker, "nope", "classic")
    assert (unknown.error_code, unknown.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group nope not found.")
    assert (classic.error_code, classic.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                           "Group classic is not a consumer group.")


async def test_an_empty_group_is_described_as_empty(broker):
    await ready(broker)
    await join(broker)
    leave = ConsumerGroupHeartbeatRequest(group_id="g", member_id="m1", member_epoch=-1)
    assert (await call(broker, 1, leave)).decoded.error_code == ErrorCode.NONE
    [group] = await describe(broker, "g")
    assert (group.error_code, group.group_state, group.group_epoch, group.members) == (
        ErrorCode.NONE, "Empty", 2, [])
    assert group.assignor_name == "uniform"  # nobody asks for one: the broker's default


async def test_a_group_not_loaded_yet(broker):
    from tests.coordinator.membership_support import StandInStore
    broker.coordinator = Coordinator(broker, offset_store_factory=StandInStore)  # never loaded
    [group] = await describe(broker, "g")
    assert group.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


async def test_authorization(broker_factory):
    broker = broker_factory(**AUTHORIZER_ON)
    await ready(broker)
    await join(broker)  # as the super user
    await join(broker, group="h")
    allow(broker, AclOperation.DESCRIBE, ResourceType.GROUP, "g")
    allow(broker, AclOperation.DESCRIBE, ResourceType.GROUP, "h")
    allow(broker, AclOperation.DESCRIBE, ResourceType.TOPIC, "orders")
    request = ConsumerGroupDescribeRequest(group_ids=["g", "secret"], include_authorized_operations=True)
    denied, described = (await call_as(broker, 1, request)).decoded.groups  # denied first, as in Kafka
    assert (denied.group_id, denied.error_code) == ("secret", ErrorCode.GROUP_AUTHORIZATION_FAILED)
    assert described.error_code == ErrorCode.NONE
    assert described.authorized_operations == 1 << AclOperation.DESCRIBE  # only DESCRIBE is allowed to alice
    # A group whose assignments name a topic alice may not describe is not shown.
    broker.create_topic("payments", 1)
    subscribe = ConsumerGroupHeartbeatRequest(group_id="h", member_id="m1", member_epoch=1,
                                              subscribed_topic_names=["orders", "payments"])
    assert (await call(broker, 1, subscribe)).decoded.error_code == ErrorCode.NONE
    [hidden] = (await call_as(broker, 1, ConsumerGroupDescribeRequest(group_ids=["h"]))).decoded.groups
    assert (hidden.error_code, hidden.error_message, hidden.members) == (
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        "The group has described topic(s) that the client is not authorized to describe.", [])
