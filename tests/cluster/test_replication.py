"""Replication on a real in-process cluster of three nodes: followers copying byte for byte, the high watermark,
acks=all, the ISR shrinking and growing back, truncation by leader epoch after a leader change or an unclean
election, reassignments, and the faults (stopped, isolated, delayed nodes)."""
from __future__ import annotations

import asyncio

from compatbroker.cluster import NO_LEADER
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.records.batch import iter_batches

from ..async_tests import async_test
from ..storage.helpers import batch, records_of
from .helpers import create_topic as create_replicated_topic
from .helpers import started_cluster, until

LAG_MS = 200  # replica.lag.time.max.ms of the tests that watch followers leave the ISR


def create_topic(cluster, partitions=1, configs=None, topic="t"):
    """A topic whose partitions all have replicas [0, 1, 2]: node 0 leads them."""
    create_replicated_topic(cluster, topic, partitions, configs=configs)


def state_of(cluster, topic="t", partition=0):
    return cluster.metadata.partition(topic, partition)


def log_of(cluster, node_id, topic="t", partition=0):
    return cluster.nodes[node_id].get_log(topic, partition)


def produce(cluster, values, topic="t", partition=0, **batch_args) -> int:
    """Append one batch at the leader as Produce does; returns the offset an acks=all must wait for."""
    state = state_of(cluster, topic, partition)
    leader = cluster.nodes[state.leader]
    result = leader.get_log(topic, partition).append(batch(values, **batch_args), leader_epoch=state.leader_epoch,
                                                     now_ms=leader.now_ms())
    leader.notify_appended(topic, partition)
    return result.last_offset + 1


def log_bytes(partition_log) -> bytes:
    return partition_log.read_bytes(partition_log.log_start_offset, 1 << 30)


def values_of(partition_log) -> list[bytes]:
    return [value for _, _, value in records_of(log_bytes(partition_log))]


def in_sync(cluster, node_id, topic="t", partition=0) -> bool:
    """The node's replica has all the leader has and is in the ISR."""
    state = state_of(cluster, topic, partition)
    leader_log = log_of(cluster, state.leader, topic, partition)
    return (node_id in state.isr
            and log_of(cluster, node_id, topic, partition).log_end_offset == leader_log.log_end_offset)


async def all_in_sync(cluster, topic="t", partition=0) -> None:
    state = state_of(cluster, topic, partition)
    await until(lambda: all(in_sync(cluster, node_id, topic, partition) for node_id in state.replicas),
                f"every replica of {topic}-{partition} in sync")


# --- copying ----------------------------------------------------------------------------------------------------

@async_test
async def test_followers_copy_the_leaders_batches_byte_for_byte(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        create_topic(cluster)
        for index in range(5):
            produce(cluster, [b"v%d-%d" % (index, n) for n in range(3)], producer_id=7, producer_epoch=0,
                    base_sequence=index * 3)
        await all_in_sync(cluster)
        leader_log = log_of(cluster, state_of(cluster).leader)
        assert leader_log.log_end_offset == 15 and leader_log.high_watermark == 15
        for node_id in (1, 2):
            follower_log = log_of(cluster, node_id)
            assert log_bytes(follower_log) == log_bytes(leader_log)
            assert follower_log.high_watermark == 15
            assert follower_log.epochs.entries == leader_log.epochs.entries
            assert follower_log.producer_state.entry(7).last_sequence == 14


@async_test
async def test_a_burst_of_appends_is_copied_in_few_passes_of_at_most_replica_fetch_max_bytes(tmp_path):
    async with started_cluster(tmp_path, **{"replica.fetch.max.bytes": 4096}) as cluster:
        create_topic(cluster)
        for index in range(50):
            produce(cluster, [bytes(1000)], timestamp=1_700_000_000_000 + index)
        await all_in_sync(cluster)
        leader_log = log_of(cluster, 0)
        assert leader_log.high_watermark == 50
        for node_id in (1, 2):
            assert log_bytes(log_of(cluster, node_id)) == log_bytes(leader_log)


# --- high watermark and acks=all ------------------------------------------------------------------------------

@async_test
async def test_the_high_watermark_waits_for_every_in_sync_replica_and_so_does_acks_all(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        create_topic(cluster)
        replication = cluster.replication
        replication.delay_follower(2, 60_000)  # far longer than the test: only lifting it lets node 2 copy
        required = produce(cluster, [b"a", b"b"])
        waiting = asyncio.ensure_future(replication.wait_for_isr("t", 0, required, 30))
        await until(lambda: log_of(cluster, 1).log_end_offset == 2, "node 1 to copy")
        assert log_of(cluster, 0).high_watermark == 0 and not waiting.done()
        assert log_of(cluster, 1).high_watermark == 0
        replication.delay_follower(2, 0)
        assert await waiting == ErrorCode.NONE
        assert log_of(cluster, 0).high_watermark == 2
        await until(lambda: log_of(cluster, 2).high_watermark == 2 and log_of(cluster, 1).high_watermark == 2,
                    "the followers to learn the high watermark")


@async_test
async def test_acks_all_completes_when_the_appender_did_not_wake_the_followers(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        create_topic(cluster)
        assert await cluster.replication.wait_for_isr("t", 0, produce(cluster, [b"told"]), 30) == ErrorCode.NONE
        await all_in_sync(cluster)  # every copier has had its pass: they sleep until woken
        leader = cluster.nodes[0]
        result = leader.get_log("t", 0).append(batch([b"quiet"]), leader_epoch=0, now_ms=leader.now_ms())
        # well before the periodic ISR check (every replica.lag.time.max.ms / 2 = 15 s) would wake the followers
        assert await cluster.replication.wait_for_isr("t", 0, result.last_offset + 1, 5) == ErrorCode.NONE


@async_test
async def test_readers_of_leader_and_followers_wake_when_the_high_watermark_advances(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        create_topic(cluster)
        await all_in_sync(cluster)
        cluster.replication.delay_follower(2, 60_000)
        produce(cluster, [b"x"])  # wakes the long polls already waiting: the new ones below wait for the HW
        readers = [asyncio.ensure_future(cluster.nodes[node_id].wait_for_append([("t", 0)], 60)) for node_id in (0, 1)]
        await asyncio.sleep(0)
        assert not any(reader.done() for reader in readers)
        cluster.replication.delay_follower(2, 0)
        await asyncio.wait_for(asyncio.gather(*readers), 20)  # long before their own timeout
        assert log_of(cluster, 0).high_watermark == log_of(cluster, 1).high_watermark == 1


@async_test
async def test_a_partition_with_one_replica_keeps_its_high_watermark_at_its_end_as_on_a_single_node(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        cluster.nodes[0].create_topic("t", 1, assignment={0: [1]})
        required = produce(cluster, [b"one"])
        assert not log_of(cluster, 1).high_watermark_set and log_of(cluster, 1).high_watermark == required
        assert await cluster.replication.wait_for_isr("t", 0, required, 30) == ErrorCode.NONE


@async_test
async def test_a_leader_alone_in_the_isr_acknowledges_at_once(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        create_topic(cluster)
        cluster.stop_node(1)
        cluster.stop_node(2)
        assert state_of(cluster).isr == [0]
        required = produce(cluster, [b"alone"])
        assert log_of(cluster, 0).high_watermark == required
        assert await cluster.replication.wait_for_isr("t", 0, required, 30) == ErrorCode.NONE


@async_test
async def test_below_min_insync_replicas_the_high_watermark_stays_and_acks_all_times_out(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        create_topic(cluster, configs={"min.insync.replicas": "2"})
        produce(cluster, [b"committed"])
        await all_in_sync(cluster)
        cluster.stop_node(1)
        cluster.stop_node(2)
        required = produce(cluster, [b"not committed"])
        # Kafka's strict min ISR rule: the HW does not move while the ISR is smaller than min.insync.replicas
        assert log_of(cluster, 0).high_watermark == 1
        assert await cluster.replication.wait_for_isr("t", 0, required, 0.05) == ErrorCode.REQUEST_TIMED_OUT
        cluster.start_node(1)
        await until(lambda: log_of(cluster, 0).high_watermark == 2, "the HW once node 1 is back in the ISR")
        assert await cluster.replication.wait_for_isr("t", 0, required, 30) == ErrorCode.NONE
        assert state_of(cluster).isr == [0, 1]


@async_test
async def test_acks_all_waiting_on_a_leader_that_moves_answers_not_leader_or_follower(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        create_topic(cluster)
        cluster.replication.delay_follower(1, 60_000)
        cluster.replication.delay_follower(2, 60_000)
        required = produce(cluster, [b"x"])
        waiting = asyncio.ensure_future(cluster.replication.wait_for_isr("t", 0, required, 30))
        await asyncio.sleep(0)  # let it start waiting
        assert not waiting.done()
        cluster.move_leader("t", 0, 1)
        assert await waiting == ErrorCode.NOT_LEADER_OR_FOLLOWER


@async_test
async def test_acks_all_waiting_on_a_deleted_topic_answers_not_leader_or_follower(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        create_topic(cluster)
        cluster.replication.delay_follower(1, 60_000)
        required = produce(cluster, [b"x"])
        waiting = asyncio.ensure_future(cluster.replication.wait_for_isr("t", 0, required, 30))
        await asyncio.sleep(0)
        await cluster.nodes[0].delete_topic("t")
        assert await waiting == ErrorCode.NOT_LEADER_OR_FOLLOWER


# --- the ISR --------------------------------------------------------------------------------------------------

@async_test
async def test_an_isolated_follower_leaves_the_isr_after_the_lag_time_and_rejoins_when_caught_up(tmp_path):
    async with started_cluster(tmp_path, **{"replica.lag.time.max.ms": LAG_MS}) as cluster:
        create_topic(cluster)
        produce(cluster, [b"before"])
        await all_in_sync(cluster)
        cluster.isolate_node(2)
        required = produce(cluster, [b"while isolated"])
        # acks=all waits for node 2 until it leaves the ISR, then the ISR has it
        assert await cluster.replication.wait_for_isr("t", 0, required, 30) == ErrorCode.NONE
        assert state_of(cluster).isr == [0, 1]
        assert log_of(cluster, 2).log_end_offset == 1
        cluster.isolate_node(2, False)
        await until(lambda: state_of(cluster).isr == [0, 1, 2], "node 2 back in the ISR")
        assert values_of(log_of(cluster, 2)) == [b"before", b"while isolated"]


@async_test
async def test_a_delayed_follower_leaves_the_isr_and_rejoins_once_the_delay_ends(tmp_path):
    async with started_cluster(tmp_path, **{"replica.lag.time.max.ms": LAG_MS}) as cluster:
        create_topic(cluster)
        await all_in_sync(cluster)
        cluster.replication.delay_follower(1, 60_000)
        produce(cluster, [b"late"])
        await until(lambda: state_of(cluster).isr == [0, 2], "the delayed node 1 out of the ISR")
        assert log_of(cluster, 0).high_watermark == 1  # node 2 and the leader have it
        cluster.replication.delay_follower(1, 0)
        await until(lambda: state_of(cluster).isr == [0, 1, 2], "node 1 back in the ISR")
        assert values_of(log_of(cluster, 1)) == [b"late"]


@async_test
async def test_a_stopped_follower_catches_up_and_rejoins_the_isr_when_started(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        create_topic(cluster, 2)
        cluster.stop_node(2)
        assert all(2 not in state.isr for state in cluster.metadata.partitions("t"))
        for partition in (0, 1):
            required = produce(cluster, [b"p%d" % partition] * 3, partition=partition)
            assert await cluster.replication.wait_for_isr("t", partition, required, 30) == ErrorCode.NONE
        assert log_of(cluster, 2, partition=0).log_end_offset == 0  # a stopped node copies nothing
        cluster.start_node(2)
        for partition in (0, 1):
            await all_in_sync(cluster, partition=partition)
            assert values_of(log_of(cluster, 2, partition=partition)) == [b"p%d" % partition] * 3


# --- leader changes and truncation ----------------------------------------------------------------------------

@async_test
async def test_an_old_leader_truncates_what_the_new_leader_never_had(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        create_topic(cluster)
        produce(cluster, [b"a", b"b"])
        await all_in_sync(cluster)
        cluster.isolate_node(0)  # the leader keeps appending what no follower gets
        produce(cluster, [b"lost-1", b"lost-2"])
        assert log_of(cluster, 0).log_end_offset == 4 and log_of(cluster, 0).high_watermark == 2
        cluster.move_leader("t", 0, 1)  # still in the ISR: the lag time has not passed
        assert state_of(cluster).leader == 1 and state_of(cluster).leader_epoch == 1
        for value in (b"c", b"d", b"e"):  # past node 0's end: only the epochs show where the logs part
            produce(cluster, [value])
        cluster.isolate_node(0, False)
        await all_in_sync(cluster)
        assert values_of(log_of(cluster, 0)) == [b"a", b"b", b"c", b"d", b"e"]
        assert log_bytes(log_of(cluster, 0)) == log_bytes(log_of(cluster, 1))
        assert log_of(cluster, 0).epochs.entries == [(0, 0), (1, 2)]
        assert [header.partition_leader_epoch for _, header in iter_batches(log_bytes(log_of(cluster, 2)))] \
            == [0, 1, 1, 1]


@async_test
async def test_leadership_moving_twice_keeps_every_replica_identical(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        create_topic(cluster)
        for leader in (1, 2, 0):
            await all_in_sync(cluster)
            cluster.move_leader("t", 0, leader)
            required = produce(cluster, [b"from %d" % leader])
            assert await cluster.replication.wait_for_isr("t", 0, required, 30) == ErrorCode.NONE
        await all_in_sync(cluster)
        assert values_of(log_of(cluster, 1)) == [b"from 1", b"from 2", b"from 0"]
        assert log_of(cluster, 0).epochs.entries == [(1, 0), (2, 1), (3, 2)]
        assert log_bytes(log_of(cluster, 1)) == log_bytes(log_of(cluster, 2)) == log_bytes(log_of(cluster, 0))


@async_test
async def test_unclean_election_loses_what_only_the_isr_had_and_the_old_leader_truncates_it(tmp_path):
    properties = {"replica.lag.time.max.ms": LAG_MS, "unclean.leader.election.enable": "true"}
    async with started_cluster(tmp_path, **properties) as cluster:
        create_topic(cluster)
        produce(cluster, [b"everyone"])
        await all_in_sync(cluster)
        cluster.isolate_node(2)
        required = produce(cluster, [b"isr only"])
        # acks=all answers once node 2, not caught up for replica.lag.time.max.ms, has left the ISR
        assert await cluster.replication.wait_for_isr("t", 0, required, 30) == ErrorCode.NONE
        assert state_of(cluster).isr == [0, 1]
        cluster.stop_node(1)
        cluster.stop_node(0)  # the last in-sync replica: the out-of-sync node 2 leads
        assert state_of(cluster).leader == 2 and state_of(cluster).isr == [2]
        cluster.isolate_node(2, False)
        produce(cluster, [b"after"])
        cluster.start_node(0)
        await until(lambda: in_sync(cluster, 0), "node 0 in sync with node 2")
        assert values_of(log_of(cluster, 0)) == [b"everyone", b"after"]
        assert log_bytes(log_of(cluster, 0)) == log_bytes(log_of(cluster, 2))


@async_test
async def test_without_unclean_election_the_partition_waits_offline_for_an_in_sync_replica(tmp_path):
    async with started_cluster(tmp_path, **{"replica.lag.time.max.ms": LAG_MS}) as cluster:
        create_topic(cluster)
        cluster.isolate_node(2)
        required = produce(cluster, [b"kept"])
        assert await cluster.replication.wait_for_isr("t", 0, required, 30) == ErrorCode.NONE
        cluster.isolate_node(2, False)
        cluster.stop_node(1)
        cluster.stop_node(0)
        assert state_of(cluster).leader == NO_LEADER
        assert await cluster.replication.wait_for_isr("t", 0, 1, 30) == ErrorCode.NOT_LEADER_OR_FOLLOWER
        cluster.start_node(0)
        assert state_of(cluster).leader == 0
        await until(lambda: in_sync(cluster, 2), "node 2, which was behind, in sync")
        assert values_of(log_of(cluster, 2)) == [b"kept"]


# --- replica sets and offsets ---------------------------------------------------------------------------------

@async_test
async def test_a_reassignment_copies_to_the_new_replicas_then_moves_leadership_and_removes_the_old(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        cluster.nodes[0].create_topic("t", 1, assignment={0: [0]})
        for index in range(3):
            produce(cluster, [b"r%d" % index])
        cluster.controller.reassign("t", 0, [1, 2])
        await until(lambda: state_of(cluster).replicas == [1, 2], "the reassignment to complete")
        state = state_of(cluster)
        assert state.leader == 1 and sorted(state.isr) == [1, 2]
        assert log_of(cluster, 0) is None
        await all_in_sync(cluster)
        assert values_of(log_of(cluster, 2)) == [b"r0", b"r1", b"r2"]
        info = cluster.metadata.topic("t")
        assert cluster.nodes[2].logs.topic_ids["t"] == info.topic_id


@async_test
async def test_a_followers_log_start_offset_follows_the_leaders(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        create_topic(cluster, configs={"segment.bytes": "1024"})
        for index in range(10):
            produce(cluster, [bytes(300)], timestamp=1_700_000_000_000 + index)
        await all_in_sync(cluster)
        leader = cluster.nodes[0]
        assert leader.logs.delete_records("t", 0, 6, now_ms=leader.now_ms()) == 6
        leader.notify_appended("t", 0)  # as the DeleteRecords handler does: the followers look at once
        await until(lambda: all(log_of(cluster, node_id).log_start_offset == 6 for node_id in (1, 2)),
                    "the followers' log start offset")
        assert all(log_of(cluster, node_id).segments[0].base_offset > 0 for node_id in (1, 2))  # segments went


@async_test
async def test_a_follower_behind_the_leaders_log_start_offset_starts_over_there(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        create_topic(cluster, configs={"segment.bytes": "1024"})
        cluster.stop_node(2)
        for index in range(10):
            produce(cluster, [bytes(300)], timestamp=1_700_000_000_000 + index)
        await until(lambda: log_of(cluster, 0).high_watermark == 10, "the records committed by nodes 0 and 1")
        leader = cluster.nodes[0]
        leader.logs.delete_records("t", 0, 8, now_ms=leader.now_ms())
        cluster.start_node(2)
        await all_in_sync(cluster)
        follower_log = log_of(cluster, 2)
        assert follower_log.log_start_offset == 8 and follower_log.segments[0].base_offset == 8
        assert log_bytes(follower_log) == log_bytes(log_of(cluster, 0))


@async_test
async def test_a_follower_honours_flush_messages_before_the_leader_counts_its_copy(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        create_topic(cluster, configs={"flush.messages": "1"})
        required = produce(cluster, [b"durable"])
        assert await cluster.replication.wait_for_isr("t", 0, required, 30) == ErrorCode.NONE
        assert all(log_of(cluster, node_id).recovery_point == 1 for node_id in (1, 2))


@async_test
async def test_a_cancelled_reassignment_removes_the_replica_it_was_adding(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        cluster.nodes[0].create_topic("t", 1, assignment={0: [0]})
        cluster.isolate_node(1)  # it cannot copy: the reassignment stays in progress
        cluster.controller.reassign("t", 0, [1])
        assert state_of(cluster).adding_replicas == [1] and log_of(cluster, 1) is not None
        cluster.controller.reassign("t", 0, None)
        assert state_of(cluster).replicas == [0] and log_of(cluster, 1) is None


@async_test
async def test_replication_resumes_after_the_cluster_restarts(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        create_topic(cluster)
        assert await cluster.replication.wait_for_isr("t", 0, produce(cluster, [b"before"]), 30) == ErrorCode.NONE
        await all_in_sync(cluster)
    async with started_cluster(tmp_path) as cluster:
        assert log_of(cluster, 0).high_watermark == 1
        assert await cluster.replication.wait_for_isr("t", 0, produce(cluster, [b"after"]), 30) == ErrorCode.NONE
        await all_in_sync(cluster)
        assert values_of(log_of(cluster, 2)) == [b"before", b"after"]
        assert log_of(cluster, 2).high_watermark == 2
