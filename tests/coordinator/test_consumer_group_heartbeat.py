"""The rules of ConsumerGroupHeartbeat in the coordinator (Kafka 4.2's GroupMetadataManager): joining, epochs,
fencing, leaving, static members, revoke before assign, assignors, regex subscriptions, group size, group types."""
from __future__ import annotations

import pytest

from compatbroker.coordinator.consumer_group import ConsumerGroupState, MemberState
from compatbroker.coordinator.consumer_group.heartbeat import REGEX_REFRESH_INTERVAL_MS
from compatbroker.protocol.error_codes import ErrorCode
from tests.async_tests import async_test
from tests.coordinator.consumer_group_support import (SIX, Consumer, beat_args, join_args, manager_of, make_broker,
                                                      ok, settle, started)


@pytest.fixture
def broker(tmp_path):
    broker = make_broker(tmp_path / "data")
    broker.create_topic("orders", SIX)
    yield broker
    broker.logs.shutdown()


async def manager(broker):
    return manager_of(await started(broker))


def orders_id(broker):
    return broker.topic("orders").topic_id


@async_test
async def test_a_lone_member_joins_and_gets_every_partition(broker):
    groups = await manager(broker)
    consumer = Consumer(groups, "g", "m1")
    answer = ok(await consumer.join())
    assert (answer.member_id, answer.member_epoch) == ("m1", 1)
    assert answer.assignment == {orders_id(broker): frozenset(range(SIX))}
    assert answer.heartbeat_interval_ms == groups.settings.heartbeat_interval_ms  # group.consumer.heartbeat...
    group = groups.groups["g"]
    assert (group.group_epoch, group.assignment_epoch, group.state) == (1, 1, ConsumerGroupState.STABLE)
    # A heartbeat that changes nothing is answered without an assignment and writes nothing.
    again = ok(await consumer.heartbeat())
    assert (again.member_epoch, again.assignment) == (1, None)


@async_test
async def test_a_version_0_member_without_id_gets_one_from_the_coordinator(broker):
    groups = await manager(broker)
    answer = ok(await groups.heartbeat(join_args("g", "", version=0)))
    assert len(answer.member_id) == 22 and answer.member_id in groups.groups["g"].members


@async_test
async def test_three_members_split_six_partitions_revoking_before_assigning(broker):
    groups = await manager(broker)
    first = Consumer(groups, "g", "m1")
    ok(await first.join())
    second = Consumer(groups, "g", "m2")
    answer = ok(await second.join())
    # m2 is at the new epoch but its partitions are still m1's: it gets nothing yet.
    assert answer.member_epoch == 2 and answer.assignment == {}
    assert groups.groups["g"].members["m2"].state is MemberState.UNRELEASED_PARTITIONS
    revoking = ok(await first.heartbeat())
    assert revoking.member_epoch == 1  # stays at its epoch until it has revoked
    assert groups.groups["g"].members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    assert first.partition_count() == 3
    third = Consumer(groups, "g", "m3")
    ok(await third.join())
    await settle(first, second, third)
    counts = sorted(c.partition_count() for c in (first, second, third))
    assert counts == [2, 2, 2]
    owned = [p for c in (first, second, third) for p in c.owned[orders_id(broker)]]
    assert sorted(owned) == list(range(SIX))  # each partition exactly once
    assert groups.groups["g"].state is ConsumerGroupState.STABLE


@async_test
async def test_epochs_ahead_or_behind_are_fenced_but_the_previous_epoch_is_forgiven(broker):
    groups = await manager(broker)
    consumers = [Consumer(groups, "g", f"m{n}") for n in (1, 2, 3)]
    for consumer in consumers:  # one group epoch per join: m1 ends at epoch 3, coming from 2
        ok(await consumer.join())
        await settle(*[c for c in consumers if c.epoch])
    first = consumers[0]
    member = groups.groups["g"].members["m1"]
    assert (member.member_epoch, member.previous_member_epoch) == (3, 2)
    ahead = await groups.heartbeat(beat_args("g", "m1", 4, dict(first.owned)))
    assert ahead.error is ErrorCode.FENCED_MEMBER_EPOCH
    assert ahead.message == ("The consumer group member has a greater member epoch (4) than the one known by the "
                             "group coordinator (3). The member must abandon all its partitions and rejoin.")
    # The previous epoch with a subset of the assignment: the answer with the new epoch may have been lost.
    assert ok(await groups.heartbeat(beat_args("g", "m1", 2, dict(first.owned)))).member_epoch == 3
    # The previous epoch while claiming more than the assignment is fenced, and so is an older epoch.
    claims = {orders_id(broker): frozenset(range(SIX))}
    assert (await groups.heartbeat(beat_args("g", "m1", 2, claims))).error is ErrorCode.FENCED_MEMBER_EPOCH
    older = await groups.heartbeat(beat_args("g", "m1", 1, dict(first.owned)))
    assert older.error is ErrorCode.FENCED_MEMBER_EPOCH and "a smaller member epoch (1)" in older.message
    assert groups.groups["g"].members["m1"].member_epoch == 3  # a fenced heartbeat changes nothing


@async_test
async def test_a_fenced_member_rejoins_with_epoch_0_and_its_id(broker):
    groups = await manager(broker)
    consumer = Consumer(groups, "g", "m1")
    ok(await consumer.join())
    answer = ok(await consumer.join())  # KAFKA-19233: epoch 0 with a known member id is a rejoin
    assert answer.member_epoch == 1 and answer.assignment == {orders_id(broker): frozenset(range(SIX))}


@async_test
async def test_unknown_members_and_groups(broker):
    groups = await manager(broker)
    missing = await groups.heartbeat(beat_args("nope", "m1", 3, {}))
    assert (missing.error, missing.message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Consumer group nope not found.")
    ok(await Consumer(groups, "g", "m1").join())
    unknown = await groups.heartbeat(beat_args("g", "m9", 1, {}))
    assert (unknown.error, unknown.message) == (ErrorCode.UNKNOWN_MEMBER_ID, "Member m9 is not a member of group g.")
    leave_missing = await groups.heartbeat(beat_args("nope", "m1", -1))
    assert (leave_missing.error, leave_missing.message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group nope not found.")


@async_test
async def test_leaving_removes_the_member_and_moves_the_group_epoch(broker):
    groups = await manager(broker)
    first, second = Consumer(groups, "g", "m1"), Consumer(groups, "g", "m2")
    ok(await first.join())
    ok(await second.join())
    await settle(first, second)
    epoch = groups.groups["g"].group_epoch
    answer = ok(await first.leave())
    assert (answer.member_id, answer.member_epoch) == ("m1", -1)
    group = groups.groups["g"]
    assert "m1" not in group.members and "m1" not in group.target_assignment
    assert group.group_epoch == epoch + 1 and group.state is ConsumerGroupState.ASSIGNING
    await settle(second)
    assert second.partition_count() == SIX
    ok(await second.leave())
    group = groups.groups["g"]
    assert group.state is ConsumerGroupState.EMPTY  # an empty consumer group stays
    assert group.assignment_epoch == group.group_epoch  # KAFKA-20442


@async_test
async def test_static_member_leave_and_rejoin_under_a_new_member_id(broker):
    groups = await manager(broker)
    first = Consumer(groups, "g", "a1", instance="pod-a")
    ok(await first.join())
    taken = await groups.heartbeat(join_args("g", "a2", instance="pod-a"))
    assert taken.error is ErrorCode.UNRELEASED_INSTANCE_ID
    assert taken.message == ("Static member a2 with instance id pod-a cannot join the group because the instance "
                             "id is owned by a1 member.")
    away = ok(await first.leave(-2, instance_id="pod-a"))
    assert away.member_epoch == -2
    assert groups.groups["g"].members["a1"].member_epoch == -2
    back = ok(await groups.heartbeat(join_args("g", "a2", instance="pod-a")))
    assert back.member_epoch == 1  # no rebalance: the same epoch, the same partitions
    assert back.assignment == {orders_id(broker): frozenset(range(SIX))}
    group = groups.groups["g"]
    assert list(group.members) == ["a2"] and group.static_members == {"pod-a": "a2"}
    assert group.group_epoch == 1
    fenced = await groups.heartbeat(beat_args("g", "a1", 1, {}, instance_id="pod-a"))
    assert (fenced.error, fenced.message) == (ErrorCode.FENCED_INSTANCE_ID,
                                              "Static member a1 with instance id pod-a was fenced by member a2.")
    unknown = await groups.heartbeat(beat_args("g", "x", 1, {}, instance_id="pod-z"))
    assert (unknown.error, unknown.message) == (ErrorCode.UNKNOWN_MEMBER_ID, "Instance id pod-z is unknown.")


@async_test
async def test_subscribing_to_another_topic_moves_the_epoch_and_revokes_at_once(broker):
    broker.create_topic("payments", 2)
    groups = await manager(broker)
    consumer = Consumer(groups, "g", "m1")
    ok(await consumer.join())
    answer = ok(await consumer.heartbeat(subscribed_topic_names=["payments"], rebalance_timeout_ms=30_000))
    assert groups.groups["g"].group_epoch == 2
    # The orders partitions go first (revoked), payments come once they are.
    assert answer.assignment == {}
    await settle(consumer)
    assert consumer.owned == {broker.topic("payments").topic_id: frozenset({0, 1})}


@async_test
async def test_new_partitions_of_a_subscribed_topic_are_assigned(broker):
    groups = await manager(broker)
    consumer = Consumer(groups, "g", "m1")
    ok(await consumer.join())
    broker.add_partitions("orders", 8)
    await settle(consumer)
    assert consumer.partition_count() == 8


@async_test
async def test_regex_subscription_picks_up_a_topic_created_later(broker):
    groups = await manager(broker)
    consumer = Consumer(groups, "g", "m1", topics=None, regex="orders.*")
    answer = ok(await consumer.join())
    assert answer.assignment == {orders_id(broker): frozenset(range(SIX))}
    assert groups.groups["g"].resolved_regexes["orders.*"].topics == {"orders"}
    broker.create_topic("orders-eu", 2)
    broker.create_topic("payments", 2)
    await settle(consumer)
    assert consumer.owned == {orders_id(broker): frozenset(range(SIX)),
                              broker.topic("orders-eu").topic_id: frozenset({0, 1})}
    assert groups.groups["g"].resolved_regexes["orders.*"].topics == {"orders", "orders-eu"}
    assert groups.groups["g"].is_subscribed("orders-eu") and not groups.groups["g"].is_subscribed("payments")


@async_test
async def test_a_regex_that_does_not_compile_is_refused(broker):
    groups = await manager(broker)
    answer = await groups.heartbeat(join_args("g", "m1", topics=None, regex="orders("))
    assert answer.error is ErrorCode.INVALID_REGULAR_EXPRESSION
    assert answer.message == "SubscribedTopicRegex `orders(` is not a valid regular expression: missing closing )."
    assert "g" not in groups.groups


@async_test
async def test_regex_results_keep_only_topics_the_member_may_describe(broker):
    broker.create_topic("orders-secret", 1)
    groups = await manager(broker)
    allowed = {"orders"}
    consumer = Consumer(groups, "g", "m1", topics=None, regex="orders.*", authorized_topic=allowed.__contains__)
    assert ok(await consumer.join()).assignment == {orders_id(broker): frozenset(range(SIX))}
    ok(await consumer.heartbeat(authorized_topic=allowed.__contains__))  # __consumer_offsets appeared: resolved again
    # A permission granted later shows once the resolution is older than Kafka's regex refresh interval.
    allowed.add("orders-secret")
    ok(await consumer.heartbeat(authorized_topic=allowed.__contains__))
    assert groups.groups["g"].resolved_regexes["orders.*"].topics == {"orders"}
    group = groups.groups["g"]
    old = group.resolved_regexes["orders.*"]
    group.set_resolved_regex("orders.*", old._replace(timestamp_ms=old.timestamp_ms - REGEX_REFRESH_INTERVAL_MS - 1))
    ok(await consumer.heartbeat(authorized_topic=allowed.__contains__))
    assert group.resolved_regexes["orders.*"].topics == {"orders", "orders-secret"}
    await settle(consumer)
    assert broker.topic("orders-secret").topic_id in consumer.owned


@async_test
async def test_the_range_assignor_when_the_members_ask_for_it(broker):
    groups = await manager(broker)
    first = Consumer(groups, "g", "m1", assignor="range")
    second = Consumer(groups, "g", "m2", assignor="range")
    ok(await first.join())
    ok(await second.join())
    await settle(first, second)
    assert first.owned == {orders_id(broker): frozenset({0, 1, 2})}
    assert second.owned == {orders_id(broker): frozenset({3, 4, 5})}


@async_test
async def test_group_max_size(tmp_path):
    broker = make_broker(tmp_path / "data", **{"group.consumer.max.size": "1"})
    broker.create_topic("orders", SIX)
    try:
        groups = await manager(broker)
        ok(await Consumer(groups, "g", "m1").join())
        full = await groups.heartbeat(join_args("g", "m2"))
        assert (full.error, full.message) == (ErrorCode.GROUP_MAX_SIZE_REACHED,
                                              "The consumer group has reached its maximum capacity of 1 members.")
        ok(await Consumer(groups, "g", "m1").join())  # a member already in the group is welcome
    finally:
        broker.logs.shutdown()


@async_test
async def test_a_classic_group_with_members_is_not_a_consumer_group(broker):
    coordinator = await started(broker)
    groups = manager_of(coordinator)
    classic = coordinator.membership.get_or_create("legacy")
    from compatbroker.coordinator.group import GroupState, Member
    classic.add(Member("c1", None, "client", "/127.0.0.1", 10_000, 10_000, "other", [("range", b"")]))
    classic.transition(GroupState.PREPARING_REBALANCE, 0)
    answer = await groups.heartbeat(join_args("legacy", "m1"))
    assert answer.error is ErrorCode.GROUP_ID_NOT_FOUND
    # An empty classic group (offsets only) gives way to a consumer group.
    coordinator.membership.get_or_create("simple")
    ok(await groups.heartbeat(join_args("simple", "m1")))
    assert coordinator.group_type("simple") == "consumer"


@async_test
async def test_offset_commit_and_fetch_validation(broker):
    groups = await manager(broker)
    consumer = Consumer(groups, "g", "m1")
    ok(await consumer.join())
    group = groups.groups["g"]
    assert groups.validate_offset_commit(group, "m1", 1, api_version=9) is ErrorCode.NONE
    assert groups.validate_offset_commit(group, "m1", 2, api_version=9) is ErrorCode.STALE_MEMBER_EPOCH
    assert groups.validate_offset_commit(group, "m1", 1, api_version=8) is ErrorCode.UNSUPPORTED_VERSION
    assert groups.validate_offset_commit(group, "m1", 1, api_version=3, transactional=True) is ErrorCode.NONE
    assert groups.validate_offset_commit(group, "zz", 1, api_version=9) is ErrorCode.UNKNOWN_MEMBER_ID
    assert groups.validate_offset_commit(group, "", -1, api_version=9) is ErrorCode.UNKNOWN_MEMBER_ID
    assert groups.validate_offset_commit(group, "", -1, api_version=3, transactional=True) is ErrorCode.NONE
    assert groups.validate_offset_fetch(group, None, -1) is ErrorCode.NONE
    assert groups.validate_offset_fetch(group, "m1", 1) is ErrorCode.NONE
    assert groups.validate_offset_fetch(group, "m1", 0) is ErrorCode.STALE_MEMBER_EPOCH
    assert groups.validate_offset_fetch(group, "zz", 1) is ErrorCode.UNKNOWN_MEMBER_ID
    ok(await consumer.leave())
    assert groups.validate_offset_commit(group, "", -1, api_version=9) is ErrorCode.NONE  # empty group: admin


@async_test
async def test_heartbeats_for_groups_that_do_not_exist_leave_nothing_behind(broker):
    groups = await manager(broker)
    for n in range(100):
        assert (await groups.heartbeat(beat_args(f"ghost-{n}", "m1", 5, {}))).error is ErrorCode.GROUP_ID_NOT_FOUND
    assert groups.groups == {} and groups._locks == {}


@async_test
async def test_a_heartbeat_whose_records_cannot_be_written_changes_nothing(broker):
    from compatbroker.coordinator.offsets import OffsetWriteError
    coordinator = await started(broker)
    groups = manager_of(coordinator)
    consumer = Consumer(groups, "g", "m1")
    ok(await consumer.join())
    store_records = coordinator.offsets.store_records

    async def refuse(group_id, records):
        raise OffsetWriteError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    coordinator.offsets.store_records = refuse
    failed = await groups.heartbeat(join_args("g", "m2"))
    assert (failed.error, failed.message, failed.member_id) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, None, None)
    left = await consumer.leave()
    assert left.error is ErrorCode.COORDINATOR_NOT_AVAILABLE
    group = groups.groups["g"]
    assert list(group.members) == ["m1"] and group.group_epoch == 1  # neither the join nor the leave happened
    coordinator.offsets.store_records = store_records
    assert ok(await groups.heartbeat(join_args("g", "m2"))).member_epoch == 2


@async_test
async def test_a_subscribed_topic_created_later_is_assigned(broker):
    groups = await manager(broker)
    consumer = Consumer(groups, "g", "m1", topics=("later",))
    assert ok(await consumer.join()).assignment == {}
    epoch = groups.groups["g"].group_epoch
    broker.create_topic("later", 3)
    await settle(consumer)
    assert consumer.owned == {broker.topic("later").topic_id: frozenset({0, 1, 2})}
    assert groups.groups["g"].group_epoch == epoch + 1  # the subscribed topics' metadata changed
