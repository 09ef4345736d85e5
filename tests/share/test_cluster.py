"""Share-partitions in a cluster: the share-partition lives on the data partition's leader, its state in the
`__share_group_state` partition another node may lead (reached in-process), replicated before an acknowledgement
is answered, and read back by the next leader when leadership moves."""
from __future__ import annotations

import pytest

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.share import share_partitions_of
from compatbroker.share.state_store import ShareStateError, store_for
from compatbroker.topic_names import SHARE_GROUP_STATE_TOPIC

from ..handlers.cluster_helpers import create_topic, in_sync, serving_cluster, until
from ..handlers.helpers import batch, call
from ..handlers.test_share_fetch import GROUP, partitions_of, share_fetch


def produce(cluster, *values, topic="t", partition=0):
    leader = cluster.nodes[cluster.metadata.partition(topic, partition).leader]
    leader.get_log(topic, partition).append(batch(*values), leader_epoch=leader.leader_epoch(topic, partition),
                                            now_ms=leader.now_ms())
    leader.notify_appended(topic, partition)


async def test_state_is_replicated_and_the_next_leader_resumes(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        create_topic(cluster, replicas=(1, 0, 2))
        topic = cluster.nodes[0].topic("t")
        leader = cluster.nodes[1]
        not_leader = await call(cluster.nodes[0], 1, share_fetch(topic.topic_id))
        data = partitions_of(not_leader)[(topic.topic_id, 0)]
        assert data.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and data.current_leader.leader_id == 1
        assert [endpoint.node_id for endpoint in not_leader.decoded.node_endpoints] == [1]

        await call(leader, 1, share_fetch(topic.topic_id))
        produce(cluster, b"a", b"b", b"c")
        await in_sync(cluster)
        acquired = partitions_of(await call(leader, 1, share_fetch(topic.topic_id, epoch=1)))[(topic.topic_id, 0)]
        assert [(r.first_offset, r.last_offset) for r in acquired.acquired_records] == [(0, 2)]
        acked = await call(leader, 1, share_fetch(topic.topic_id, epoch=2, acks={0: [(0, 0, [1])]}, max_records=0))
        assert partitions_of(acked)[(topic.topic_id, 0)].acknowledge_error_code == ErrorCode.NONE

        key = (GROUP, topic.topic_id, 0)
        store = store_for(leader, key)
        assert (await store.read(key)).start_offset == 1
        state_partition = store.partition_of(key)
        assert cluster.metadata.partition(SHARE_GROUP_STATE_TOPIC, state_partition).leader == store._host.node_id
        await in_sync(cluster, SHARE_GROUP_STATE_TOPIC, state_partition)

        cluster.move_leader("t", 0, 0)
        await until(lambda: cluster.metadata.partition("t", 0).leader == 0, "node 0 leads t-0")
        moved = await call(leader, 1, share_fetch(topic.topic_id, epoch=3))
        assert partitions_of(moved)[(topic.topic_id, 0)].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert share_partitions_of(leader).cached(key) is None
        resumed = partitions_of(await call(cluster.nodes[0], 1, share_fetch(topic.topic_id, member="next")))
        # offsets 1-2 were acquired (never acknowledged) on the old leader: available again, delivered a second time
        assert [(r.first_offset, r.last_offset, r.delivery_count)
                for r in resumed[(topic.topic_id, 0)].acquired_records] == [(1, 2, 2)]


async def test_a_new_leader_of_the_state_partition_replays_it(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        create_topic(cluster, replicas=(0, 1, 2))
        topic = cluster.nodes[0].topic("t")
        leader = cluster.nodes[0]
        await call(leader, 1, share_fetch(topic.topic_id))
        produce(cluster, b"a", b"b")
        await in_sync(cluster)
        await call(leader, 1, share_fetch(topic.topic_id, epoch=1))
        await call(leader, 1, share_fetch(topic.topic_id, epoch=2, acks={0: [(0, 0, [1])]}, max_records=0))
        key = (GROUP, topic.topic_id, 0)
        old_store = store_for(leader, key)
        state_partition = old_store.partition_of(key)
        await in_sync(cluster, SHARE_GROUP_STATE_TOPIC, state_partition)
        target = next(node_id for node_id in cluster.metadata.partition(SHARE_GROUP_STATE_TOPIC,
                                                                         state_partition).replicas
                      if node_id != old_store._host.node_id)
        cluster.move_leader(SHARE_GROUP_STATE_TOPIC, state_partition, target)
        await until(lambda: cluster.metadata.partition(SHARE_GROUP_STATE_TOPIC, state_partition).leader == target,
                    "the state partition moved")
        new_store = store_for(leader, key)
        assert new_store is not old_store and new_store._host.node_id == target
        assert (await new_store.read(key)).start_offset == 1  # replayed from its replica
        with pytest.raises(ShareStateError) as refused:  # the old leader dropped what it held
            await old_store.read(key)
        assert refused.value.error_code == ErrorCode.NOT_COORDINATOR
        acked = await call(leader, 1, share_fetch(topic.topic_id, epoch=3, acks={0: [(1, 1, [1])]}, max_records=0))
        assert partitions_of(acked)[(topic.topic_id, 0)].acknowledge_error_code == ErrorCode.NONE
        assert (await new_store.read(key)).start_offset == 2


async def test_a_node_no_longer_leading_acquires_nothing(tmp_path):
    """A long poll that began on the leader acquires again after its wait: by then another node may lead."""
    async with serving_cluster(tmp_path) as cluster:
        create_topic(cluster, replicas=(1, 0, 2))
        topic = cluster.nodes[0].topic("t")
        old_leader = cluster.nodes[1]
        await call(old_leader, 1, share_fetch(topic.topic_id))
        cluster.move_leader("t", 0, 0)
        await until(lambda: cluster.metadata.partition("t", 0).leader == 0, "node 0 leads t-0")
        produce(cluster, b"a")
        await in_sync(cluster)
        manager = share_partitions_of(old_leader)
        result = await manager.acquire(GROUP, "member", topic, 0, manager.limits(GROUP), max_bytes=1_000_000,
                                       max_records=500, batch_size=500, strict=False, first=True)
        assert (result.error_code, result.acquired) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, [])
