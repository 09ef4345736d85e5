"""KIP-848 consumer groups in a cluster of three in-process nodes: only the leader of the group's partition of
`__consumer_offsets` serves ConsumerGroupHeartbeat (NOT_COORDINATOR elsewhere), its writes reach the replicas, and
when the leadership moves the new leader replays the group and its members carry on at their epochs."""
from __future__ import annotations

from compatbroker.coordinator.offsets import partition_for_group
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.topic_names import GROUP_METADATA_TOPIC
from tests.async_tests import async_test
from tests.coordinator.consumer_group_support import SIX, Consumer, beat_args, ok, settle, until
from tests.coordinator.test_cluster_coordinators import (another, coordinated_cluster, find, group_leader,
                                                         move_when_in_sync)


@async_test
async def test_a_consumer_group_moves_with_the_leadership_of_its_partition(tmp_path):
    async with coordinated_cluster(tmp_path) as cluster:
        cluster.nodes[0].create_topic("orders", SIX)
        await find(cluster.nodes[0], 0, "g")  # creates __consumer_offsets
        old = cluster.nodes[group_leader(cluster, "g")]
        other = cluster.nodes[another(cluster, old.node_id)]
        assert (await other.coordinator.consumer_groups.heartbeat(beat_args("g", "m1", 0))).error \
            is ErrorCode.INVALID_REQUEST  # the request's shape is checked before the coordinator
        consumers = [Consumer(old.coordinator.consumer_groups, "g", f"m{n}") for n in (1, 2)]
        for consumer in consumers:
            ok(await consumer.join())
        await settle(*consumers)
        before = {c.member_id: (c.epoch, dict(c.owned)) for c in consumers}
        elsewhere = Consumer(other.coordinator.consumer_groups, "g", "m1")
        elsewhere.epoch, elsewhere.owned = consumers[0].epoch, consumers[0].owned
        assert (await elsewhere.heartbeat()).error is ErrorCode.NOT_COORDINATOR

        await move_when_in_sync(cluster, GROUP_METADATA_TOPIC, partition_for_group("g", 50), other.node_id)
        assert (await consumers[0].heartbeat()).error is ErrorCode.NOT_COORDINATOR
        assert "g" not in old.coordinator.consumer_groups.groups
        await until(lambda: other.coordinator.error_for("g") is ErrorCode.NONE, "the new coordinator loaded g")
        for consumer in consumers:
            consumer.manager = other.coordinator.consumer_groups
            answer = ok(await consumer.heartbeat())
            assert (answer.member_epoch, consumer.owned) == before[consumer.member_id]
        assert str(other.coordinator.consumer_groups.groups["g"].state) == "Stable"
