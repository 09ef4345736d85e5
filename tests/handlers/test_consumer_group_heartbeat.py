"""ConsumerGroupHeartbeat (68) v0-1 through the codec: each error Kafka answers before or instead of the
coordinator's rules, the version boundaries (v0's coordinator-made member id, v1's required member id and regex),
authorization (GROUP READ, TOPIC DESCRIBE of named topics and of regex results) and the success path."""
from __future__ import annotations

import logging
import uuid

import pytest

from compatbroker.coordinator import Coordinator, coordinator_of
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import ConsumerGroupHeartbeatRequest
from compatbroker.security.acls import AclOperation, ResourceType

from .authz_helpers import AUTHORIZER_ON, allow, call_as
from .helpers import call

Request = ConsumerGroupHeartbeatRequest
SIX = 6


def join(group="g", member_id="m1", *, topics=("orders",), regex=None, epoch=0, **fields) -> Request:
    options = {"rebalance_timeout_ms": 30_000, "topic_partitions": [], **fields}
    return Request(group_id=group, member_id=member_id, member_epoch=epoch,
                   subscribed_topic_names=list(topics) if topics is not None else None,
                   subscribed_topic_regex=regex, **options)


async def ready(broker):
    broker.create_topic("orders", SIX) if broker.topic("orders") is None else None
    await coordinator_of(broker).start()


async def answer(broker, request, version=1):
    return (await call(broker, version, request)).decoded


async def test_a_join_gets_an_epoch_an_interval_and_every_partition(broker):
    await ready(broker)
    response = await answer(broker, join())
    assert (response.error_code, response.error_message) == (ErrorCode.NONE, None)
    interval = coordinator_of(broker).consumer_settings.heartbeat_interval_ms  # group.consumer.heartbeat.interval.ms
    assert (response.member_id, response.member_epoch, response.heartbeat_interval_ms) == ("m1", 1, interval)
    [topic] = response.assignment.topic_partitions
    assert (topic.topic_id, topic.partitions) == (broker.topic("orders").topic_id, list(range(SIX)))
    beat = await answer(broker, Request(group_id="g", member_id="m1", member_epoch=1))
    assert (beat.error_code, beat.member_epoch, beat.assignment) == (ErrorCode.NONE, 1, None)


@pytest.mark.parametrize("version", [0, 1])
async def test_v0_lets_the_coordinator_choose_the_member_id_and_v1_requires_one(broker, version):
    await ready(broker)
    response = await answer(broker, join(member_id=""), version)
    if version == 0:
        assert response.error_code == ErrorCode.NONE and len(response.member_id) == 22
    else:
        assert (response.error_code, response.error_message) == (ErrorCode.INVALID_REQUEST,
                                                                 "MemberId can't be empty.")
        assert response.member_id is None


@pytest.mark.parametrize("request_, message", [
    (join(group=" "), "GroupId can't be empty."),
    (join(instance_id=""), "InstanceId can't be empty."),
    (join(rack_id="\t"), "RackId can't be empty."),
    (join(rebalance_timeout_ms=-1), "RebalanceTimeoutMs must be provided in first request."),
    (join(topic_partitions=None), "TopicPartitions must be empty when (re-)joining."),
    (join(topic_partitions=[Request.TopicPartitions(topic_id=uuid.UUID(int=1), partitions=[0])]),
     "TopicPartitions must be empty when (re-)joining."),
    (join(topics=None), "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
    (Request(group_id="g", member_id="m1", member_epoch=-2), "InstanceId can't be null."),
    (Request(group_id="g", member_id="m1", member_epoch=-3), "MemberEpoch is invalid."),
    (Request(group_id="g", member_id="", member_epoch=5), "MemberId can't be empty."),
])
async def test_malformed_requests_are_invalid_with_kafkas_message(broker, request_, message):
    await ready(broker)
    response = await answer(broker, request_, 0)
    assert (response.error_code, response.error_message) == (ErrorCode.INVALID_REQUEST, message)


async def test_a_malformed_request_or_regex_gets_one_log_line(broker, caplog):
    await ready(broker)
    with caplog.at_level(logging.INFO, logger="compatbroker.coordinator.consumer_group.heartbeat"):
        assert (await answer(broker, join(rebalance_timeout_ms=-1))).error_code == ErrorCode.INVALID_REQUEST
        assert (await answer(broker, join("h", topics=None, regex="[a-"))).error_code == \
            ErrorCode.INVALID_REGULAR_EXPRESSION
    lines = [r.getMessage() for r in caplog.records if "refused" in r.getMessage() or "invalid" in r.getMessage()]
    assert len(lines) == 2
    assert "RebalanceTimeoutMs must be provided in first request." in lines[0]
    assert "SubscribedTopicRegex `[a-` is not a valid regular expression" in lines[1]


async def test_an_assignor_the_broker_does_not_run(broker):
    await ready(broker)
    response = await answer(broker, join(server_assignor="sticky"))
    assert (response.error_code, response.error_message) == (
        ErrorCode.UNSUPPORTED_ASSIGNOR, "ServerAssignor sticky is not supported. Supported assignors: uniform, range.")


async def test_the_regex_of_v1(broker):
    await ready(broker)
    broker.create_topic("orders-eu", 2)
    response = await answer(broker, join(topics=None, regex="orders-.*"))
    assert response.error_code == ErrorCode.NONE
    assert [(t.topic_id, t.partitions) for t in response.assignment.topic_partitions] == [
        (broker.topic("orders-eu").topic_id, [0, 1])]
    bad = await answer(broker, join("h", topics=None, regex="[a-"))
    assert bad.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION
    assert bad.error_message == "SubscribedTopicRegex `[a-` is not a valid regular expression: missing closing ]."


async def test_member_epoch_errors(broker):
    await ready(broker)
    await answer(broker, join())
    fenced = await answer(broker, Request(group_id="g", member_id="m1", member_epoch=7))
    assert fenced.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    unknown = await answer(broker, Request(group_id="g", member_id="m2", member_epoch=1))
    assert unknown.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    missing = await answer(broker, Request(group_id="other", member_id="m1", member_epoch=1))
    assert (missing.error_code, missing.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                           "Consumer group other not found.")
    left = await answer(broker, Request(group_id="g", member_id="m1", member_epoch=-1))
    assert (left.error_code, left.member_id, left.member_epoch) == (ErrorCode.NONE, "m1", -1)


async def test_static_members(broker):
    await ready(broker)
    assert (await answer(broker, join(instance_id="pod-a"))).error_code == ErrorCode.NONE
    taken = await answer(broker, join(member_id="m2", instance_id="pod-a"))
    assert taken.error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    away = await answer(broker, Request(group_id="g", member_id="m1", member_epoch=-2, instance_id="pod-a"))
    assert (away.error_code, away.member_epoch) == (ErrorCode.NONE, -2)
    back = await answer(broker, join(member_id="m2", instance_id="pod-a"))
    assert (back.error_code, back.member_epoch) == (ErrorCode.NONE, 1)
    old = await answer(broker, Request(group_id="g", member_id="m1", member_epoch=1, instance_id="pod-a"))
    assert old.error_code == ErrorCode.FENCED_INSTANCE_ID


async def test_coordinator_errors_come_after_the_request_checks(broker):
    from tests.coordinator.membership_support import StandInStore
    broker.coordinator = Coordinator(broker, offset_store_factory=StandInStore)  # never loaded
    malformed = await answer(broker, join(rebalance_timeout_ms=-1))
    assert malformed.error_code == ErrorCode.INVALID_REQUEST
    loading = await answer(broker, join())
    assert (loading.error_code, loading.member_id) == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None)


async def test_a_group_of_another_type(broker):
    await ready(broker)
    coordinator = coordinator_of(broker)
    from compatbroker.coordinator.group import GroupState, Member
    classic = coordinator.membership.get_or_create("classic")
    classic.add(Member("c1", None, "client", "/127.0.0.1", 10_000, 10_000, "other", [("range", b"")]))
    classic.transition(GroupState.PREPARING_REBALANCE, 0)
    response = await answer(broker, join("classic"))
    assert response.error_code == ErrorCode.GROUP_ID_NOT_FOUND


async def test_group_read_is_required(broker_factory):
    broker = broker_factory(**AUTHORIZER_ON)
    await ready(broker)
    denied = (await call_as(broker, 1, join())).decoded
    assert (denied.error_code, denied.error_message) == (ErrorCode.GROUP_AUTHORIZATION_FAILED, None)


async def test_named_topics_need_describe_and_regex_results_are_filtered(broker_factory):
    broker = broker_factory(**AUTHORIZER_ON)
    await ready(broker)
    broker.create_topic("orders-secret", 1)
    allow(broker, AclOperation.READ, ResourceType.GROUP, "g")
    denied = (await call_as(broker, 1, join(topics=("orders", "orders-secret")))).decoded
    assert denied.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    allow(broker, AclOperation.DESCRIBE, ResourceType.TOPIC, "orders")
    response = (await call_as(broker, 1, join(topics=None, regex="orders.*"))).decoded
    assert response.error_code == ErrorCode.NONE
    assert [t.topic_id for t in response.assignment.topic_partitions] == [broker.topic("orders").topic_id]


async def test_a_share_group_of_the_id_is_not_a_consumer_group(broker):
    from .share_group_helpers import heartbeat as share_heartbeat
    from .test_consumer_group_describe import describe
    await ready(broker)
    assert (await share_heartbeat(broker, "s1", 0, ["orders"], group="shared")).error_code == ErrorCode.NONE
    response = await answer(broker, join("shared"))
    assert (response.error_code, response.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                             "Group shared is not a consumer group.")
    [described] = await describe(broker, "shared")
    assert (described.error_code, described.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                               "Group shared is not a consumer group.")


async def test_a_broker_without_the_consumer_protocol_answers_unsupported_version(broker_factory):
    """`consumer` left out of group.coordinator.rebalance.protocols: both KIP-848 APIs answer UNSUPPORTED_VERSION,
    before authorization, as KafkaApis does."""
    from compatbroker.protocol.messages import ConsumerGroupDescribeRequest
    broker = broker_factory(**{"group.coordinator.rebalance.protocols": "classic"})
    await ready(broker)
    assert (await answer(broker, join())).error_code == ErrorCode.UNSUPPORTED_VERSION
    described = (await call(broker, 1, ConsumerGroupDescribeRequest(group_ids=["g", "h"]))).decoded
    assert [(group.group_id, group.error_code) for group in described.groups] == [
        ("g", ErrorCode.UNSUPPORTED_VERSION), ("h", ErrorCode.UNSUPPORTED_VERSION)]
    assert coordinator_of(broker).consumer_groups.groups == {}
