"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup sent to a KIP-848 consumer group (classic-protocol members living
in it, `consumer_group/classic_members.py`), through the codec at the versions that differ: Kafka 4.2's answers
and errors, the routing by group type (an empty consumer group gives way, a share group refuses), and the join,
sync and session timeouts that fence a classic member."""
from __future__ import annotations

import pytest

from compatbroker.protocol import decode_message
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import ConsumerGroupHeartbeatRequest, ConsumerProtocolAssignment

from tests.cluster.helpers import until
from tests.coordinator.membership_support import (heartbeat, join, leave, started_coordinator, subscription,
                                                  sync)

from .helpers import call
from .share_group_helpers import heartbeat as share_heartbeat

GROUP = "g"
TOPIC = "orders"


async def consumer_group(broker, member_id: str = "next-gen", *, instance: str | None = None):
    """A consumer group with one consumer-protocol member owning every partition of `orders` (3)."""
    if broker.topic(TOPIC) is None:
        broker.create_topic(TOPIC, 3)
    coordinator = await started_coordinator(broker)
    answer = await consumer_heartbeat(broker, member_id, 0, instance=instance)
    assert answer.error_code == ErrorCode.NONE, answer.error_message
    return coordinator


async def consumer_heartbeat(broker, member_id: str, epoch: int, *, instance: str | None = None, owned=None):
    topic_id = broker.topic(TOPIC).topic_id
    request = ConsumerGroupHeartbeatRequest(
        group_id=GROUP, member_id=member_id, member_epoch=epoch, instance_id=instance,
        rebalance_timeout_ms=30_000 if epoch == 0 else -1,
        subscribed_topic_names=[TOPIC] if epoch == 0 else None,
        topic_partitions=[] if epoch == 0 else None if owned is None else [
            ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=topic_id, partitions=owned)])
    return (await call(broker, 1, request)).decoded


async def classic_join(broker, *, version: int = 9, instance: str | None = None, **options):
    """A classic member's KIP-394 round trip (v4+ dynamic members), then its JoinGroup with the id."""
    options.setdefault("metadata", subscription(TOPIC))
    first = await join(broker, GROUP, version=version, instance=instance, **options)
    if first.error_code != ErrorCode.MEMBER_ID_REQUIRED:
        return first
    return await join(broker, GROUP, first.member_id, version=version, instance=instance, **options)


def partitions_of(data: bytes) -> tuple[int, dict[str, list[int]]]:
    version = int.from_bytes(data[:2], "big")
    body = decode_message(ConsumerProtocolAssignment, version, data[2:])
    return version, {tp.topic: sorted(tp.partitions) for tp in body.assigned_partitions}


# --- JoinGroup --------------------------------------------------------------------------------------------------------

async def test_a_classic_member_joins_at_once_with_its_epoch_as_generation_and_no_leader(broker):
    coordinator = await consumer_group(broker)
    joined = await classic_join(broker)
    assert (joined.error_code, joined.protocol_type, joined.protocol_name, joined.leader, joined.members) == (
        ErrorCode.NONE, "consumer", "range", "", [])
    group = coordinator.group(GROUP)
    member = group.members[joined.member_id]
    assert member.use_classic_protocol and joined.generation_id == member.member_epoch == group.group_epoch == 2
    assert len(joined.member_id) == 22  # Kafka's Uuid text, not the classic "client-uuid"
    # Its partitions are still the consumer member's: it waits (NONE) until they are released, then rejoins.
    assert member.state.name == "UNRELEASED_PARTITIONS"
    assert await heartbeat(broker, GROUP, joined.member_id, 2) == ErrorCode.NONE
    beat = await consumer_heartbeat(broker, "next-gen", 1, owned=[0, 1, 2])
    kept = beat.assignment.topic_partitions[0].partitions
    assert (await consumer_heartbeat(broker, "next-gen", beat.member_epoch, owned=kept)).error_code == ErrorCode.NONE
    assert await heartbeat(broker, GROUP, joined.member_id, 2) == ErrorCode.REBALANCE_IN_PROGRESS
    again = await join(broker, GROUP, joined.member_id, metadata=subscription(TOPIC))
    _, partitions = partitions_of((await sync(broker, GROUP, joined.member_id, again.generation_id)).assignment)
    assert sorted(partitions[TOPIC] + kept) == [0, 1, 2]
    assert await heartbeat(broker, GROUP, joined.member_id, again.generation_id) == ErrorCode.NONE
    assert coordinator.group(GROUP).state == "Stable"


async def test_a_new_dynamic_member_gets_an_id_to_join_again_with_and_is_not_remembered_until_then(broker):
    coordinator = await consumer_group(broker)
    first = await join(broker, GROUP, metadata=subscription(TOPIC))
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED and first.member_id
    assert first.member_id not in coordinator.group(GROUP).members
    assert await heartbeat(broker, GROUP, first.member_id, 0) == ErrorCode.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("version", [0, 3])
async def test_before_v4_a_new_member_is_admitted_at_once(broker, version):
    coordinator = await consumer_group(broker)
    joined = await join(broker, GROUP, version=version, metadata=subscription(TOPIC))
    assert joined.error_code == ErrorCode.NONE and joined.member_id in coordinator.group(GROUP).members
    # v0 has no rebalance timeout: the session timeout stands in for it.
    assert coordinator.group(GROUP).members[joined.member_id].rebalance_timeout_ms == 10_000


@pytest.mark.parametrize(("options", "error"), [
    ({"protocol_type": "connect"}, ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
    ({"names": ("roundrobin",)}, ErrorCode.INCONSISTENT_GROUP_PROTOCOL),  # the classic member there has range
    ({"metadata": b"\x00"}, ErrorCode.UNKNOWN_SERVER_ERROR),              # a subscription shorter than its version
])
async def test_join_errors(broker, options, error):
    await consumer_group(broker)
    assert (await classic_join(broker, names=("range",))).error_code == ErrorCode.NONE
    answer = await classic_join(broker, **options)
    assert (answer.error_code, answer.member_id, answer.generation_id) == (error, "", -1)


async def test_static_members_are_fenced_or_unknown_by_instance_id(broker):
    await consumer_group(broker)
    joined = await classic_join(broker, instance="i-1")
    assert joined.error_code == ErrorCode.NONE
    assert (await join(broker, GROUP, "other", instance="i-1", metadata=subscription(TOPIC))).error_code == \
        ErrorCode.FENCED_INSTANCE_ID
    assert (await join(broker, GROUP, "other", instance="i-9", metadata=subscription(TOPIC))).error_code == \
        ErrorCode.UNKNOWN_MEMBER_ID
    # Without a member id the instance takes its place back under a new id.
    back = await join(broker, GROUP, instance="i-1", metadata=subscription(TOPIC))
    assert back.error_code == ErrorCode.NONE and back.member_id != joined.member_id
    assert await heartbeat(broker, GROUP, joined.member_id, joined.generation_id, instance="i-1") == \
        ErrorCode.FENCED_INSTANCE_ID


async def test_a_full_consumer_group_refuses_a_classic_member(broker_factory):
    broker = broker_factory(**{"group.consumer.max.size": 1})
    await consumer_group(broker)
    assert (await classic_join(broker)).error_code == ErrorCode.GROUP_MAX_SIZE_REACHED


# --- SyncGroup --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("sync_version", "subscription_version"), [(0, 0), (4, 1), (5, 3)])
async def test_sync_answers_the_assignment_in_the_subscriptions_version(broker, sync_version, subscription_version):
    await consumer_group(broker)
    joined = await classic_join(broker, metadata=subscription(TOPIC, version=subscription_version))
    # The consumer-protocol member gives its partitions up; the classic member then rejoins to collect them.
    topic_id = broker.topic(TOPIC).topic_id
    beat = await consumer_heartbeat(broker, "next-gen", 1, owned=[0, 1, 2])
    await consumer_heartbeat(broker, "next-gen", beat.member_epoch,
                             owned=sorted(beat.assignment.topic_partitions[0].partitions) if beat.assignment and
                             beat.assignment.topic_partitions else [])
    again = await join(broker, GROUP, joined.member_id, metadata=subscription(TOPIC, version=subscription_version))
    synced = await sync(broker, GROUP, joined.member_id, again.generation_id, version=sync_version)
    assert synced.error_code == ErrorCode.NONE
    version, partitions = partitions_of(synced.assignment)
    assert version == subscription_version and partitions.get(TOPIC)
    assert (synced.protocol_type, synced.protocol_name) == (("consumer", "range") if sync_version >= 5
                                                            else (None, None))
    assert topic_id  # the assignment names topics, the group keeps ids


async def test_sync_errors(broker):
    await consumer_group(broker)
    joined = await classic_join(broker)
    generation = joined.generation_id
    assert (await sync(broker, GROUP, joined.member_id, generation + 5)).error_code == ErrorCode.ILLEGAL_GENERATION
    assert (await sync(broker, GROUP, joined.member_id, generation, protocol_type="connect")).error_code == \
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert (await sync(broker, GROUP, joined.member_id, generation, protocol_name="roundrobin")).error_code == \
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert (await sync(broker, GROUP, "next-gen", 1)).error_code == ErrorCode.UNKNOWN_MEMBER_ID  # not classic
    assert (await sync(broker, GROUP, "nobody", generation)).error_code == ErrorCode.UNKNOWN_MEMBER_ID


async def test_a_member_behind_the_group_epoch_is_told_to_rejoin(broker):
    await consumer_group(broker)
    joined = await classic_join(broker)
    assert (await consumer_heartbeat(broker, "next-gen-2", 0)).error_code == ErrorCode.NONE  # the epoch moves
    assert await heartbeat(broker, GROUP, joined.member_id, joined.generation_id) == ErrorCode.REBALANCE_IN_PROGRESS
    assert (await sync(broker, GROUP, joined.member_id, joined.generation_id)).error_code == \
        ErrorCode.REBALANCE_IN_PROGRESS
    assert await heartbeat(broker, GROUP, joined.member_id, joined.generation_id + 9) == ErrorCode.ILLEGAL_GENERATION


# --- LeaveGroup -------------------------------------------------------------------------------------------------------

async def test_leave_by_member_id_or_by_instance_id_alone(broker):
    coordinator = await consumer_group(broker)
    dynamic = await classic_join(broker)
    static = await classic_join(broker, instance="i-1")
    answer = await leave(broker, GROUP, (dynamic.member_id, None), ("", "i-1"), ("nobody", None),
                         ("wrong", "i-1"))
    assert [m.error_code for m in answer.members] == [ErrorCode.NONE, ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID,
                                                      ErrorCode.FENCED_INSTANCE_ID]
    assert set(coordinator.group(GROUP).members) == {"next-gen"}
    assert static.member_id not in coordinator.group(GROUP).members


async def test_removing_the_last_consumer_member_with_leave_group_downgrades_the_group(broker):
    coordinator = await consumer_group(broker)
    joined = await classic_join(broker)
    answer = await leave(broker, GROUP, ("next-gen", None), version=3)
    assert [m.error_code for m in answer.members] == [ErrorCode.NONE]
    group = coordinator.group(GROUP)
    assert group.group_type == "classic" and list(group.members) == [joined.member_id]
    assert group.state == "PreparingRebalance"


@pytest.mark.parametrize("version", [0, 2])
async def test_v0_to_v2_leave_answers_one_error(broker, version):
    coordinator = await consumer_group(broker)
    joined = await classic_join(broker)
    assert (await leave(broker, GROUP, ("nobody", None), version=version)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert (await leave(broker, GROUP, (joined.member_id, None), version=version)).error_code == ErrorCode.NONE
    assert joined.member_id not in coordinator.group(GROUP).members


# --- routing ----------------------------------------------------------------------------------------------------------

async def test_an_empty_consumer_group_gives_way_to_a_classic_group(broker):
    coordinator = await consumer_group(broker)
    assert (await consumer_heartbeat(broker, "next-gen", -1)).error_code == ErrorCode.NONE
    assert coordinator.group(GROUP).group_type == "consumer" and coordinator.group(GROUP).state == "Empty"
    # A known member id of a group that is not classic: nothing to rejoin.
    assert (await join(broker, GROUP, "ghost", metadata=subscription(TOPIC))).error_code == \
        ErrorCode.UNKNOWN_MEMBER_ID
    joined = await classic_join(broker)
    assert joined.error_code == ErrorCode.NONE and joined.leader == joined.member_id
    assert coordinator.group(GROUP).group_type == "classic"
    assert GROUP not in coordinator.consumer_groups.groups
    assert (await sync(broker, GROUP, "x", 1)).error_code == ErrorCode.UNKNOWN_MEMBER_ID


async def test_an_empty_consumer_group_answers_sync_with_unknown_member(broker):
    await consumer_group(broker)
    await consumer_heartbeat(broker, "next-gen", -1)
    assert (await sync(broker, GROUP, "next-gen", 1)).error_code == ErrorCode.UNKNOWN_MEMBER_ID


async def test_a_share_group_refuses_the_classic_requests(broker):
    coordinator = await started_coordinator(broker)
    broker.create_topic(TOPIC, 3)
    shared = await share_heartbeat(broker, "share-member", 0, [TOPIC], group=GROUP)
    assert shared.error_code == ErrorCode.NONE and coordinator.group(GROUP).group_type == "share"
    answer = await join(broker, GROUP, metadata=subscription(TOPIC))
    assert (answer.error_code, answer.member_id) == (ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "")
    assert (await sync(broker, GROUP, "share-member", 1)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert await heartbeat(broker, GROUP, "share-member", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    left = await leave(broker, GROUP, ("share-member", None))
    assert (left.error_code, [m.error_code for m in left.members]) == (ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID])
    assert GROUP not in coordinator.membership.groups and coordinator.group(GROUP).group_type == "share"


# --- timeouts ---------------------------------------------------------------------------------------------------------

async def test_a_classic_member_that_never_syncs_is_fenced_after_its_rebalance_timeout(broker):
    coordinator = await consumer_group(broker)
    joined = await classic_join(broker, rebalance_ms=200, session_ms=60_000)
    group = coordinator.group(GROUP)
    assert joined.member_id in group.members
    await until(lambda: joined.member_id not in coordinator.group(GROUP).members, "the sync timeout")


async def test_a_classic_member_whose_session_expires_is_fenced(broker):
    coordinator = await consumer_group(broker)
    joined = await classic_join(broker, rebalance_ms=60_000, session_ms=300)
    assert joined.member_id in coordinator.group(GROUP).members
    await until(lambda: joined.member_id not in coordinator.group(GROUP).members, "the session timeout")
    assert coordinator.group(GROUP).group_type == "consumer"  # the consumer member stays


async def test_a_classic_member_told_to_rejoin_that_does_not_is_fenced_after_its_rebalance_timeout(broker):
    coordinator = await consumer_group(broker)
    joined = await classic_join(broker, rebalance_ms=2_000, session_ms=60_000)
    synced = await sync(broker, GROUP, joined.member_id, joined.generation_id)  # no sync timeout from here on
    assert synced.error_code == ErrorCode.NONE
    await consumer_heartbeat(broker, "next-gen-2", 0)  # the group epoch moves past the classic member's
    assert await heartbeat(broker, GROUP, joined.member_id, joined.generation_id) == ErrorCode.REBALANCE_IN_PROGRESS
    await until(lambda: joined.member_id not in coordinator.group(GROUP).members, "the join timeout")


# --- the upgrade on the wire ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("policy", "error", "message"), [
    ("bidirectional", ErrorCode.NONE, None),
    ("disabled", ErrorCode.GROUP_ID_NOT_FOUND,
     f"Cannot upgrade classic group {GROUP} to consumer group because online upgrade is disabled."),
])
async def test_consumer_group_heartbeat_on_a_classic_group_follows_the_migration_policy(broker_factory, policy,
                                                                                        error, message):
    broker = broker_factory(**{"group.consumer.migration.policy": policy})
    broker.create_topic(TOPIC, 3)
    coordinator = await started_coordinator(broker)
    joined = await classic_join(broker)
    assert (await sync(broker, GROUP, joined.member_id, joined.generation_id, {joined.member_id: b""})).error_code \
        == ErrorCode.NONE
    answer = await consumer_heartbeat(broker, "next-gen", 0)
    assert (answer.error_code, answer.error_message) == (error, message)
    assert coordinator.group(GROUP).group_type == ("consumer" if error is ErrorCode.NONE else "classic")
