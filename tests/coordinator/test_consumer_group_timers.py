"""KIP-848 consumer group timers: a member whose session runs out is fenced and the others take over its
partitions; a member that does not revoke within its rebalance timeout is fenced; heartbeats keep a session."""
from __future__ import annotations

import asyncio

import pytest

from compatbroker.coordinator.consumer_group import MemberState
from compatbroker.protocol.error_codes import ErrorCode
from tests.async_tests import async_test
from tests.coordinator.consumer_group_support import (SIX, Consumer, beat_args, manager_of, make_broker, ok, settle,
                                                      started, until)

SESSION_MS = 1_000  # ample for heartbeats every 50 ms on a loaded machine
FAST = {"group.consumer.min.session.timeout.ms": "100", "group.consumer.session.timeout.ms": str(SESSION_MS),
        "group.consumer.min.heartbeat.interval.ms": "10", "group.consumer.heartbeat.interval.ms": "50"}


@pytest.fixture
def broker(tmp_path):
    broker = make_broker(tmp_path / "data", **FAST)
    broker.create_topic("orders", SIX)
    yield broker
    broker.logs.shutdown()


@async_test
async def test_an_expired_session_fences_the_member_and_the_others_take_over(broker):
    coordinator = await started(broker)
    groups = manager_of(coordinator)
    survivor, victim = Consumer(groups, "g", "m1"), Consumer(groups, "g", "m2")
    ok(await survivor.join())
    ok(await victim.join())
    await settle(survivor, victim)
    assert survivor.partition_count() == 3
    epoch = groups.groups["g"].group_epoch

    async def keep_alive():  # the survivor heartbeats at its interval; the victim has gone silent
        while True:
            ok(await survivor.heartbeat())
            await asyncio.sleep(0.05)
    beating = asyncio.get_running_loop().create_task(keep_alive())
    try:
        await until(lambda: "m2" not in groups.groups["g"].members, "the silent member's fencing")
        await until(lambda: survivor.partition_count() == SIX, "the survivor taking every partition")
    finally:
        beating.cancel()
    assert groups.groups["g"].group_epoch > epoch
    assert (await victim.heartbeat()).error is ErrorCode.UNKNOWN_MEMBER_ID
    await coordinator.stop()


@async_test
async def test_the_session_timeout_and_heartbeat_interval_are_the_groups_configs(tmp_path):
    broker = make_broker(tmp_path / "data", **{**FAST, "group.consumer.session.timeout.ms": "60000"})
    broker.create_topic("orders", SIX)
    broker.cluster.metadata.group_configs.set("quick", {"consumer.session.timeout.ms": "200",
                                                        "consumer.heartbeat.interval.ms": "20"})
    coordinator = await started(broker)
    groups = manager_of(coordinator)
    try:
        assert ok(await Consumer(groups, "quick", "m1").join()).heartbeat_interval_ms == 20
        assert ok(await Consumer(groups, "slow", "m1").join()).heartbeat_interval_ms == 50
        await until(lambda: not groups.groups["quick"].members, "the group's short session to expire")
        assert "m1" in groups.groups["slow"].members  # the broker's 60 s session still runs
    finally:
        await coordinator.stop()
        broker.logs.shutdown()


@async_test
async def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced(broker):
    coordinator = await started(broker)
    groups = manager_of(coordinator)
    stubborn = Consumer(groups, "g", "m1", rebalance_ms=200)
    ok(await stubborn.join())
    newcomer = Consumer(groups, "g", "m2")
    ok(await newcomer.join())
    owned = dict(stubborn.owned)
    ok(await groups.heartbeat(beat_args("g", "m1", stubborn.epoch, owned)))  # told to revoke; it does not
    assert groups.groups["g"].members["m1"].state is MemberState.UNREVOKED_PARTITIONS

    async def beat_without_revoking():
        while True:
            await groups.heartbeat(beat_args("g", "m1", 1, owned))
            ok(await newcomer.heartbeat())
            await asyncio.sleep(0.03)
    beating = asyncio.get_running_loop().create_task(beat_without_revoking())
    try:
        await until(lambda: "m1" not in groups.groups["g"].members, "the rebalance timeout")
        await until(lambda: newcomer.partition_count() == SIX, "the newcomer getting every partition")
    finally:
        beating.cancel()
    await coordinator.stop()
