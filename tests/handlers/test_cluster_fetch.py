"""Fetch on a three-node cluster: which node serves a consumer (leader; any replica from v11), reads bounded by the
replica's high watermark, KIP-392's preferred read replica, leader hints (v16+) and per-node fetch sessions."""
from __future__ import annotations

import asyncio

import pytest

from compatbroker.protocol.error_codes import ErrorCode

from .cluster_helpers import PORT, create_topic, host_of, in_sync, serving_cluster, until
from .helpers import batch, call, on_the_wire, records_of, start
from .test_fetch import fetch_request

RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def append(cluster, *values):
    """Append at the leader as Produce does (acks=1)."""
    state = cluster.metadata.partition("t", 0)
    leader = cluster.nodes[state.leader]
    leader.get_log("t", 0).append(batch(*values), leader_epoch=state.leader_epoch, now_ms=leader.now_ms())
    leader.notify_appended("t", 0)


async def fetch(node, version=12, offset=0, rack_id="", fields=None, **options):
    request = fetch_request(node, version, ("t", 0, offset, 1 << 20, fields or {}), **options)
    request.rack_id = rack_id
    answer = (await call(node, version, request)).decoded
    return answer, answer.responses[0].partitions[0]


def values(partition) -> list[bytes]:
    return [record.value for record in records_of(partition.records)]


@pytest.mark.parametrize("version", [4, 10])
async def test_before_v11_only_the_leader_serves_a_consumer(tmp_path, version):
    async with serving_cluster(tmp_path) as cluster:
        create_topic(cluster)
        append(cluster, b"a")
        await in_sync(cluster)
        _, partition = await fetch(cluster.nodes[1], version)
        assert (partition.error_code, partition.high_watermark) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)
        _, led = await fetch(cluster.nodes[0], version)
        assert values(led) == [b"a"]


async def test_from_v11_a_follower_serves_a_consumer_up_to_its_high_watermark(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        create_topic(cluster)
        append(cluster, b"a")
        await in_sync(cluster)
        _, partition = await fetch(cluster.nodes[2], 11)
        assert (partition.error_code, partition.high_watermark, values(partition)) == (ErrorCode.NONE, 1, [b"a"])


async def test_a_consumer_reads_nothing_past_the_high_watermark_and_its_long_poll_wakes_when_it_moves(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        create_topic(cluster)
        cluster.isolate_node(2)  # in the ISR, copying nothing: the high watermark stays
        append(cluster, b"a")
        leader = cluster.nodes[0]
        assert leader.get_log("t", 0).log_end_offset == 1
        _, partition = await fetch(leader, 12)
        assert (partition.high_watermark, values(partition)) == (0, [])
        waiting = asyncio.ensure_future(start(leader, 12, fetch_request(leader, 12, ("t", 0, 0, 1 << 20),
                                                                        max_wait_ms=20_000)))
        await until(lambda: leader._append_waiters.get(("t", 0)), "the long poll waiting (it read nothing)")
        assert not waiting.done()
        cluster.isolate_node(2, False)
        answer = on_the_wire(1, 12, await waiting)
        assert values(answer.responses[0].partitions[0]) == [b"a"]


async def test_from_v16_not_leader_and_fenced_epoch_name_the_leader_and_its_endpoint(tmp_path):
    async with serving_cluster(tmp_path, racks=["a", "b", "c"]) as cluster:
        create_topic(cluster, replicas=(1, 0))
        epoch = cluster.metadata.partition("t", 0).leader_epoch
        answer, partition = await fetch(cluster.nodes[2], 16)  # no replica there
        assert partition.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (1, epoch)
        assert [(e.node_id, e.host, e.port, e.rack) for e in answer.node_endpoints] == [(1, host_of(1), PORT, "b")]
        cluster.move_leader("t", 0, 0)
        answer, fenced = await fetch(cluster.nodes[0], 16, fields={"current_leader_epoch": epoch})
        assert fenced.error_code == ErrorCode.FENCED_LEADER_EPOCH
        assert (fenced.current_leader.leader_id, fenced.current_leader.leader_epoch) == (0, epoch + 1)
        assert [e.node_id for e in answer.node_endpoints] == [0]
        _, old = await fetch(cluster.nodes[2], 15)
        assert old.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and old.current_leader.leader_id == -1


async def test_the_leader_sends_a_consumer_to_the_in_sync_follower_in_its_rack(tmp_path):
    async with serving_cluster(tmp_path, racks=["a", "b", "c"], **{"replica.selector.class": RACK_AWARE}) as cluster:
        create_topic(cluster)
        append(cluster, b"a")
        await in_sync(cluster)
        _, redirected = await fetch(cluster.nodes[0], 11, rack_id="c", max_wait_ms=20_000)  # answers at once
        assert (redirected.error_code, redirected.preferred_read_replica) == (ErrorCode.NONE, 2)
        assert (values(redirected), redirected.high_watermark) == ([], 1)
        _, follower = await fetch(cluster.nodes[2], 11, rack_id="c")
        assert (follower.preferred_read_replica, values(follower)) == (-1, [b"a"])
        for rack in ("a", "elsewhere", ""):  # the leader's rack, no replica's, none: read from the leader
            _, here = await fetch(cluster.nodes[0], 11, rack_id=rack)
            assert (here.preferred_read_replica, values(here)) == (-1, [b"a"])
        _, v10 = await fetch(cluster.nodes[0], 10)
        assert values(v10) == [b"a"]
        cluster.stop_node(2)  # out of the ISR: no longer a candidate
        _, leader_again = await fetch(cluster.nodes[0], 11, rack_id="c")
        assert (leader_again.preferred_read_replica, values(leader_again)) == (-1, [b"a"])


async def test_without_a_replica_selector_there_is_no_preferred_read_replica(tmp_path):
    async with serving_cluster(tmp_path, racks=["a", "b", "c"]) as cluster:
        create_topic(cluster)
        append(cluster, b"a")
        await in_sync(cluster)
        _, partition = await fetch(cluster.nodes[0], 11, rack_id="c")
        assert (partition.preferred_read_replica, values(partition)) == (-1, [b"a"])


async def test_each_node_keeps_its_own_fetch_sessions(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        create_topic(cluster)
        append(cluster, b"a")
        await in_sync(cluster)
        follower = cluster.nodes[1]
        answer, partition = await fetch(follower, 12, session_id=0, session_epoch=0)
        assert answer.session_id != 0 and values(partition) == [b"a"]
        assert follower.fetch_sessions.get(answer.session_id) is not None
        assert cluster.nodes[0].fetch_sessions.get(answer.session_id) is None
        append(cluster, b"b")
        await in_sync(cluster)
        incremental = fetch_request(follower, 12, session_id=answer.session_id, session_epoch=1)
        incremental.topics = []  # nothing changed in the session: it reads what it holds
        next_answer = (await call(follower, 12, incremental)).decoded
        assert next_answer.responses[0].partitions[0].high_watermark == 2
