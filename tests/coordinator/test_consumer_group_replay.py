"""KIP-848 consumer groups survive a restart: every change is written to `__consumer_offsets` before it is
answered, and replaying those records rebuilds the same group (members, epochs, assignments, regexes), whose
members then carry on without rejoining."""
from __future__ import annotations

from compatbroker.coordinator.consumer_group import ConsumerGroupState
from compatbroker.protocol.error_codes import ErrorCode
from tests.async_tests import async_test
from tests.coordinator.consumer_group_support import (SIX, Consumer, manager_of, make_broker, ok, settle, started)


def snapshot(group) -> dict:
    return {"epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch, "hash": group.metadata_hash,
            "state": group.state, "members": dict(group.members), "targets": dict(group.target_assignment),
            "static": dict(group.static_members), "regexes": dict(group.resolved_regexes)}


@async_test
async def test_a_restart_replays_the_group_and_its_members_carry_on(tmp_path):
    broker = make_broker(tmp_path / "data")
    broker.create_topic("orders", SIX)
    broker.create_topic("orders-eu", 2)
    groups = manager_of(await started(broker))
    members = [Consumer(groups, "g", "m1"), Consumer(groups, "g", "m2", instance="pod-b"),
               Consumer(groups, "g", "m3", topics=None, regex="orders-.*")]
    for consumer in members:
        ok(await consumer.join())
    await settle(*members)
    ok(await members[0].leave())
    await settle(*members[1:])
    ok(await Consumer(groups, "empty", "x").join())
    ok(await Consumer(groups, "empty", "x").leave())
    before = snapshot(groups.groups["g"])
    await broker.shutdown()

    reopened = make_broker(tmp_path / "data")
    again = manager_of(await started(reopened))
    assert snapshot(again.groups["g"]) == before
    assert again.groups["g"].state is ConsumerGroupState.STABLE
    assert again.groups["empty"].state is ConsumerGroupState.EMPTY and again.groups["empty"].group_epoch == 2
    # Their sessions run again, and they go on heartbeating at their epochs.
    assert again.timers.is_scheduled(("consumer-session", "g", "m2"))
    for consumer in members[1:]:
        consumer.manager = again
        answer = ok(await consumer.heartbeat())
        assert answer.member_epoch == before["members"][consumer.member_id].member_epoch
    assert (await members[0].heartbeat()).error is ErrorCode.UNKNOWN_MEMBER_ID
    await reopened.shutdown()
