"""Online migration between the classic protocol and KIP-848's consumer protocol (`consumer_group/migration.py`),
as Kafka 4.2 runs it: a classic group upgraded by a joining ConsumerGroupHeartbeat and downgraded when its last
consumer-protocol member goes, under `group.consumer.migration.policy`; the refusals (policy, protocol type,
custom assignor, size); the records of both conversions; committed offsets kept; a restart in between."""
from __future__ import annotations

import dataclasses

import pytest

from compatbroker.coordinator.consumer_group import consumer_protocol
from compatbroker.coordinator.group_records import (CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                                                    CONSUMER_GROUP_MEMBER_METADATA, CONSUMER_GROUP_METADATA,
                                                    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
                                                    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA)
from compatbroker.coordinator.offsets import CommittedOffset, partition_for_group
from compatbroker.protocol import decode_message, encode_message
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import ConsumerProtocolAssignment
from compatbroker.topic_names import GROUP_METADATA_TOPIC

from tests.cluster.helpers import until
from tests.coordinator.consumer_group_support import beat_args, join_args
from tests.coordinator.membership_support import (FAST, async_test, assignment, finished, heartbeat, join, join_task,
                                                  leave, records_in, started_coordinator, subscription, sync)
from tests.coordinator.test_cluster_coordinators import (another, coordinated_cluster, find, group_leader,
                                                         move_when_in_sync)
from tests.handlers.helpers import make_broker

GROUP = "grp"
TOPIC = "foo"
ALL = {TOPIC: [0, 1, 2]}


@pytest.fixture
def broker_with(data_dir):
    """A broker factory with broker properties (Kafka's names); each is shut down after the test."""
    made = []

    def make(**properties):
        broker = make_broker(data_dir, **{name.replace("_", "."): value for name, value in properties.items()})
        broker.create_topic(TOPIC, 3)
        made.append(broker)
        return broker
    yield make
    for broker in made:
        broker.logs.shutdown()


async def classic_group(broker, *, instance: str | None = None, protocol_type: str = "consumer",
                        assigned: bytes | None = None, owned=None) -> str:
    """One classic member joins and syncs (as its own leader) with all partitions of `foo`; returns its id."""
    options = dict(metadata=subscription(TOPIC, owned=owned), protocol_type=protocol_type, instance=instance)
    if instance is None:
        first = await join(broker, GROUP, **options)
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
        joined = await finished(join_task(broker, GROUP, first.member_id, **options))
    else:
        joined = await finished(join_task(broker, GROUP, **options))
    assert joined.error_code == ErrorCode.NONE and joined.leader == joined.member_id
    synced = await sync(broker, GROUP, joined.member_id, joined.generation_id,
                        {joined.member_id: assignment(ALL) if assigned is None else assigned}, instance=instance,
                        protocol_type=protocol_type)
    assert synced.error_code == ErrorCode.NONE
    return joined.member_id


async def consumer_heartbeat(coordinator, member_id: str, epoch: int = 0, *, instance: str | None = None,
                             owned=None):
    """A consumer-protocol member's heartbeat, straight to the manager: a join (epoch 0) subscribing to `foo`."""
    args = join_args(GROUP, member_id, (TOPIC,), instance=instance, rebalance_ms=300_000) if epoch == 0 else \
        beat_args(GROUP, member_id, epoch, owned, instance_id=instance)
    return await coordinator.consumer_groups.heartbeat(args)


def record_types(broker) -> list[tuple[int, bool]]:
    """(key version, is a tombstone) of every record in the group's partition, in log order."""
    return [(int.from_bytes(key[:2], "big"), value is None) for key, value in records_in(broker, GROUP)]


async def commit(coordinator, offsets: dict[int, int]) -> None:
    await coordinator.offsets.commit(GROUP, [CommittedOffset(TOPIC, p, o, -1, "", 0) for p, o in offsets.items()])


def committed(coordinator) -> dict[int, int]:
    return {key[1]: c.offset for key, c in coordinator.offsets.fetch(GROUP).items()}


def partitions_of(data: bytes) -> dict[str, list[int]]:
    body = decode_message(ConsumerProtocolAssignment, int.from_bytes(data[:2], "big"), data[2:])
    return {tp.topic: sorted(tp.partitions) for tp in body.assigned_partitions}


# --- upgrade ------------------------------------------------------------------------------------------------------

@async_test
async def test_a_consumer_member_joining_upgrades_the_classic_group_and_keeps_its_offsets(broker_with):
    broker = broker_with()
    coordinator = await started_coordinator(broker)
    classic_id = await classic_group(broker)
    await commit(coordinator, {0: 10, 1: 11, 2: 12})
    before = len(records_in(broker, GROUP))

    answer = await consumer_heartbeat(coordinator, "next-gen-1")

    assert answer.error is ErrorCode.NONE, answer.message
    group = coordinator.group(GROUP)
    assert group.group_type == "consumer" and GROUP not in coordinator.membership.groups
    member = group.members[classic_id]
    assert member.use_classic_protocol and member.classic.session_timeout_ms == 10_000
    assert member.member_epoch == 1 and group.group_epoch == 2  # the generation, then the join's bump
    assert [p.name for p in member.classic.supported_protocols] == ["range"]
    # The classic member keeps its partitions until it revokes them: the new member gets nothing yet.
    assert answer.member_epoch == 2 and answer.assignment == {}
    assert committed(coordinator) == {0: 10, 1: 11, 2: 12}
    written = record_types(broker)[before:]
    # Kafka's batch: the classic group's tombstone, then the converted group's records, then the join's.
    assert written[0] == (2, True)
    assert written[1:6] == [(CONSUMER_GROUP_MEMBER_METADATA, False), (CONSUMER_GROUP_METADATA, False),
                            (CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, False),
                            (CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, False),
                            (CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, False)]


@async_test
async def test_the_upgrade_asks_the_classic_member_to_rejoin_and_it_revokes_before_the_new_member_gets_any(
        broker_with):
    broker = broker_with()
    coordinator = await started_coordinator(broker)
    classic_id = await classic_group(broker)
    new = await consumer_heartbeat(coordinator, "next-gen-1")
    assert await heartbeat(broker, GROUP, classic_id, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    assert await heartbeat(broker, GROUP, classic_id, 7) == ErrorCode.ILLEGAL_GENERATION
    assert await heartbeat(broker, GROUP, "next-gen-1", 2) == ErrorCode.UNKNOWN_MEMBER_ID  # not a classic member

    # Cooperative: it rejoins owning everything, keeps its share and is told what to give up.
    rejoined = await join(broker, GROUP, classic_id, metadata=subscription(TOPIC, owned=ALL))
    assert (rejoined.error_code, rejoined.generation_id, rejoined.protocol_name, rejoined.leader,
            rejoined.members) == (ErrorCode.NONE, 1, "range", "", [])
    kept = partitions_of((await sync(broker, GROUP, classic_id, 1)).assignment)[TOPIC]
    assert 0 < len(kept) < 3
    assert await heartbeat(broker, GROUP, classic_id, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    # Having revoked, it moves to the group epoch; the new member then gets the rest.
    again = await join(broker, GROUP, classic_id, metadata=subscription(TOPIC, owned={TOPIC: kept}))
    assert again.generation_id == 2
    assert partitions_of((await sync(broker, GROUP, classic_id, 2)).assignment) == {TOPIC: kept}
    assert await heartbeat(broker, GROUP, classic_id, 2) == ErrorCode.NONE
    topic_id = broker.topic(TOPIC).topic_id
    got = await consumer_heartbeat(coordinator, "next-gen-1", new.member_epoch, owned={})
    assert got.error is ErrorCode.NONE
    assert set(got.assignment[topic_id]) == {0, 1, 2} - set(kept)
    assert coordinator.group(GROUP).state == "Stable"


@async_test
async def test_an_empty_classic_group_is_replaced_whatever_the_policy(broker_with):
    broker = broker_with(group_consumer_migration_policy="disabled")
    coordinator = await started_coordinator(broker)
    classic_id = await classic_group(broker)
    await commit(coordinator, {0: 5})
    left = await _leave(broker, classic_id)
    assert left == ErrorCode.NONE and coordinator.group(GROUP).state == "Empty"
    answer = await consumer_heartbeat(coordinator, "next-gen-1")
    assert answer.error is ErrorCode.NONE
    assert coordinator.group(GROUP).group_type == "consumer"
    assert committed(coordinator) == {0: 5}


@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
@async_test
async def test_the_policy_may_forbid_the_upgrade(broker_with, policy):
    broker = broker_with(group_consumer_migration_policy=policy)
    coordinator = await started_coordinator(broker)
    await classic_group(broker)
    answer = await consumer_heartbeat(coordinator, "next-gen-1")
    assert answer.error is ErrorCode.GROUP_ID_NOT_FOUND
    assert answer.message == (f"Cannot upgrade classic group {GROUP} to consumer group because online upgrade is "
                              "disabled.")
    assert coordinator.group(GROUP).group_type == "classic" and coordinator.group(GROUP).state == "Stable"


@async_test
async def test_a_group_of_another_protocol_type_cannot_upgrade(broker_with):
    broker = broker_with()
    coordinator = await started_coordinator(broker)
    await classic_group(broker, protocol_type="connect")
    answer = await consumer_heartbeat(coordinator, "next-gen-1")
    assert (answer.error, answer.message) == (
        ErrorCode.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {GROUP} to consumer group because the group "
                                      "does not use the consumer embedded protocol.")
    assert coordinator.group(GROUP).group_type == "classic"


@async_test
async def test_an_assignment_with_a_custom_assignors_user_data_cannot_upgrade(broker_with):
    broker = broker_with()
    coordinator = await started_coordinator(broker)
    body = ConsumerProtocolAssignment(assigned_partitions=[
        ConsumerProtocolAssignment.TopicPartition(topic=TOPIC, partitions=[0, 1, 2])], user_data=b"\x00")
    with_user_data = (0).to_bytes(2, "big") + encode_message(ConsumerProtocolAssignment, 0, body)
    await classic_group(broker, assigned=with_user_data)
    answer = await consumer_heartbeat(coordinator, "next-gen-1")
    assert (answer.error, answer.message) == (
        ErrorCode.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {GROUP} to consumer group because an "
        "unsupported custom assignor is in use. Please refer to the documentation or switch to a default assignor "
        "before re-attempting the upgrade.")
    assert coordinator.group(GROUP).group_type == "classic"


@async_test
async def test_a_group_larger_than_the_consumer_group_maximum_cannot_upgrade(broker_with):
    broker = broker_with(group_consumer_max_size=1)
    coordinator = await started_coordinator(broker)
    await classic_group(broker)
    answer = await consumer_heartbeat(coordinator, "next-gen-1")
    # One classic member fits; the joining member then finds the consumer group full.
    assert answer.error is ErrorCode.GROUP_MAX_SIZE_REACHED
    assert coordinator.group(GROUP).group_type == "classic"


@async_test
async def test_a_static_classic_member_stays_static_through_the_upgrade(broker_with):
    broker = broker_with()
    coordinator = await started_coordinator(broker)
    classic_id = await classic_group(broker, instance="i-1")
    assert (await consumer_heartbeat(coordinator, "next-gen-1", instance="i-2")).error is ErrorCode.NONE
    group = coordinator.group(GROUP)
    assert group.static_member("i-1").member_id == classic_id
    assert await heartbeat(broker, GROUP, "someone-else", 1, instance="i-1") == ErrorCode.FENCED_INSTANCE_ID


@async_test
async def test_an_upgrade_during_a_rebalance_answers_the_parked_join_with_rebalance_in_progress(broker_with):
    broker = broker_with()
    coordinator = await started_coordinator(broker)
    first = await classic_group(broker)
    asked = await join(broker, GROUP, metadata=subscription(TOPIC))
    parked = join_task(broker, GROUP, asked.member_id, metadata=subscription(TOPIC))  # waits for `first`
    await until(lambda: coordinator.group(GROUP).state == "PreparingRebalance", "the rebalance")

    assert (await consumer_heartbeat(coordinator, "next-gen-1")).error is ErrorCode.NONE

    assert (await finished(parked)).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    group = coordinator.group(GROUP)
    assert group.group_type == "consumer" and set(group.members) == {first, asked.member_id, "next-gen-1"}
    assert group.members[asked.member_id].assigned_partitions == {}  # it never synced: nothing to keep
    again = await join(broker, GROUP, asked.member_id, metadata=subscription(TOPIC))  # now a classic member
    assert again.error_code == ErrorCode.NONE and again.leader == ""


# --- downgrade ----------------------------------------------------------------------------------------------------

async def upgraded(broker, coordinator, **options) -> tuple[str, object]:
    classic_id = await classic_group(broker, **options)
    answer = await consumer_heartbeat(coordinator, "next-gen-1", instance=options.get("consumer_instance"))
    assert answer.error is ErrorCode.NONE, answer.message
    return classic_id, answer


@async_test
async def test_the_last_consumer_member_leaving_downgrades_the_group(broker_with):
    broker = broker_with()
    coordinator = await started_coordinator(broker)
    classic_id, new = await upgraded(broker, coordinator)
    await commit(coordinator, {0: 20, 1: 21})
    before = len(records_in(broker, GROUP))

    left = await consumer_heartbeat(coordinator, "next-gen-1", -1)

    assert left.error is ErrorCode.NONE
    group = coordinator.group(GROUP)
    assert group.group_type == "classic" and GROUP not in coordinator.consumer_groups.groups
    # A member left: the classic group rebalances at once, from the consumer group's epoch.
    assert (group.state, group.generation_id, group.protocol_name) == ("PreparingRebalance", 2, "range")
    assert list(group.members) == [classic_id] and group.members[classic_id].session_timeout_ms == 10_000
    assert committed(coordinator) == {0: 20, 1: 21}
    written = record_types(broker)[before:]
    assert written[-1] == (2, False) and all(tombstone for _, tombstone in written[:-1])
    assert {kind for kind, _ in written[:-1]} >= {CONSUMER_GROUP_METADATA, CONSUMER_GROUP_MEMBER_METADATA}
    # The classic member rejoins the classic group as its leader.
    rejoined = await finished(join_task(broker, GROUP, classic_id, metadata=subscription(TOPIC)))
    assert rejoined.error_code == ErrorCode.NONE and rejoined.leader == classic_id
    assert rejoined.generation_id == 3


@async_test
async def test_the_upgrade_only_policy_keeps_a_consumer_group(broker_with):
    broker = broker_with(group_consumer_migration_policy="upgrade")
    coordinator = await started_coordinator(broker)
    classic_id, _ = await upgraded(broker, coordinator)
    assert (await consumer_heartbeat(coordinator, "next-gen-1", -1)).error is ErrorCode.NONE
    group = coordinator.group(GROUP)
    assert group.group_type == "consumer" and list(group.members) == [classic_id]


@async_test
async def test_a_group_larger_than_the_classic_maximum_is_not_downgraded(broker_with):
    broker = broker_with()
    coordinator = await started_coordinator(broker, settings=dataclasses.replace(FAST, max_size=1))
    classic_id, _ = await upgraded(broker, coordinator)
    second = await join(broker, GROUP, "", metadata=subscription(TOPIC))  # a second classic member, in the
    other = await join(broker, GROUP, second.member_id, metadata=subscription(TOPIC))  # consumer group now
    assert (second.error_code, other.error_code) == (ErrorCode.MEMBER_ID_REQUIRED, ErrorCode.NONE)
    assert (await consumer_heartbeat(coordinator, "next-gen-1", -1)).error is ErrorCode.NONE
    group = coordinator.group(GROUP)  # two classic members do not fit a classic group of group.max.size=1
    assert group.group_type == "consumer" and set(group.members) == {classic_id, second.member_id}


@async_test
async def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades_without_a_rebalance(
        broker_with):
    broker = broker_with()
    coordinator = await started_coordinator(broker)
    classic_id = await classic_group(broker, instance="i-1")
    assert (await consumer_heartbeat(coordinator, "next-gen-1", instance="i-2")).error is ErrorCode.NONE
    group = coordinator.group(GROUP)
    target = group.target_assignment_of("next-gen-1")

    replaced = await finished(join_task(broker, GROUP, instance="i-2", metadata=subscription(TOPIC)))

    assert replaced.error_code == ErrorCode.NONE
    classic = coordinator.group(GROUP)
    assert classic.group_type == "classic" and classic.state == "Stable"
    assert set(classic.members) == {classic_id, replaced.member_id}
    assert replaced.generation_id == classic.generation_id
    synced = await sync(broker, GROUP, replaced.member_id, replaced.generation_id, instance="i-2")
    assert synced.error_code == ErrorCode.NONE
    topic_id = broker.topic(TOPIC).topic_id
    assert partitions_of(synced.assignment).get(TOPIC, []) == sorted(target.get(topic_id, ()))


# --- durability ---------------------------------------------------------------------------------------------------

@async_test
async def test_a_mixed_group_survives_a_restart_with_its_classic_members(broker_with, data_dir):
    broker = broker_with()
    coordinator = await started_coordinator(broker)
    classic_id, _ = await upgraded(broker, coordinator)
    await coordinator.stop()

    again = await started_coordinator(broker)
    group = again.group(GROUP)
    assert group.group_type == "consumer"
    member = group.members[classic_id]
    assert member.use_classic_protocol and member.classic.session_timeout_ms == 10_000
    assert member.classic.supported_protocols[0].name == "range"
    assert await heartbeat(broker, GROUP, classic_id, member.member_epoch) == ErrorCode.REBALANCE_IN_PROGRESS
    # And it still downgrades once the consumer member leaves.
    assert (await consumer_heartbeat(again, "next-gen-1", -1)).error is ErrorCode.NONE
    assert again.group(GROUP).group_type == "classic"


async def _leave(broker, member_id: str) -> ErrorCode:
    answer = await leave(broker, GROUP, (member_id, None))
    return ErrorCode.for_code(answer.members[0].error_code) if answer.error_code == 0 else \
        ErrorCode.for_code(answer.error_code)


@async_test
async def test_a_downgraded_group_is_a_classic_group_after_a_restart(broker_with):
    broker = broker_with()
    coordinator = await started_coordinator(broker)
    classic_id, _ = await upgraded(broker, coordinator)
    assert (await consumer_heartbeat(coordinator, "next-gen-1", -1)).error is ErrorCode.NONE
    await commit(coordinator, {2: 42})
    await coordinator.stop()

    again = await started_coordinator(broker)
    group = again.group(GROUP)
    assert group.group_type == "classic" and list(group.members) == [classic_id]
    assert GROUP not in again.consumer_groups.groups  # every consumer group record has its tombstone
    assert (group.generation_id, group.protocol_name) == (2, "range")
    assert committed(again) == {2: 42}


# --- the embedded consumer protocol ---------------------------------------------------------------------------------

def test_a_newer_subscription_version_is_read_with_ours_and_its_extra_bytes_ignored():
    newer = (7).to_bytes(2, "big") + subscription(TOPIC, owned={TOPIC: [1]}, version=3)[2:] + b"future fields"
    parsed = consumer_protocol.parse_subscription(newer)
    assert (parsed.topics, [(tp.topic, tp.partitions) for tp in parsed.owned_partitions]) == ([TOPIC],
                                                                                          [(TOPIC, [1])])
    assert consumer_protocol.metadata_version(newer) == 7


@pytest.mark.parametrize("data", [b"", b"\x00", b"\xff\xff" + subscription(TOPIC)[2:], b"\x00\x01\x00\x00\x00\x05"])
def test_malformed_subscriptions_are_refused(data):
    with pytest.raises(consumer_protocol.MalformedProtocol):
        consumer_protocol.parse_subscription(data)


@pytest.mark.parametrize(("version", "written"), [(0, 0), (3, 3), (9, 3)])
def test_an_assignment_is_written_in_the_subscriptions_version_capped_at_ours(version, written):
    data = consumer_protocol.assignment_bytes({"b": {2, 0}, "a": {1}, "empty": set()}, version)
    assert int.from_bytes(data[:2], "big") == written
    assert partitions_of(data) == {"a": [1], "b": [0, 2]}


# --- in a cluster -------------------------------------------------------------------------------------------------

@async_test
async def test_a_migrated_group_moves_with_its_partition_and_downgrades_on_its_new_coordinator(tmp_path):
    async with coordinated_cluster(tmp_path) as cluster:
        cluster.nodes[0].create_topic(TOPIC, 3)
        await find(cluster.nodes[0], 0, GROUP)  # creates __consumer_offsets
        old = cluster.nodes[group_leader(cluster, GROUP)]
        classic_id = await classic_group(old)
        assert (await consumer_heartbeat(old.coordinator, "next-gen-1")).error is ErrorCode.NONE
        new = cluster.nodes[another(cluster, old.node_id)]

        await move_when_in_sync(cluster, GROUP_METADATA_TOPIC, partition_for_group(GROUP, 50), new.node_id)

        await until(lambda: new.coordinator.error_for(GROUP) is ErrorCode.NONE, "the new coordinator loaded it")
        group = new.coordinator.group(GROUP)
        assert group.group_type == "consumer" and group.members[classic_id].use_classic_protocol
        assert await heartbeat(new, GROUP, classic_id, 1) == ErrorCode.REBALANCE_IN_PROGRESS
        assert (await consumer_heartbeat(new.coordinator, "next-gen-1", -1)).error is ErrorCode.NONE
        assert new.coordinator.group(GROUP).group_type == "classic"
