"""OffsetForLeaderEpoch: the end offset of an epoch from the leader epoch cache, the current epoch of a partition
never written to, the epoch checks, unknown partitions, and every version."""
from __future__ import annotations

import pytest

from compatbroker.handlers import HANDLERS, offset_for_leader_epoch
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import OffsetForLeaderEpochRequest

from .helpers import batch, call

Topic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
Partition = OffsetForLeaderEpochRequest.OffsetForLeaderPartition
ALL_VERSIONS = range(offset_for_leader_epoch.MIN_VERSION, offset_for_leader_epoch.MAX_VERSION + 1)
CONSUMER = -1


async def ask(broker, epoch: int, *, topic="t", partition=0, current_leader_epoch=-1, version=4):
    """(error code, leader epoch, end offset) for one partition, as a consumer asks (v3+ replica id -1)."""
    request = OffsetForLeaderEpochRequest(replica_id=CONSUMER, topics=[Topic(topic=topic, partitions=[
        Partition(partition=partition, current_leader_epoch=current_leader_epoch, leader_epoch=epoch)])])
    answer = (await call(broker, version, request)).decoded
    [result] = answer.topics
    [found] = result.partitions
    assert (result.topic, found.partition) == (topic, partition)
    return found.error_code, found.leader_epoch, found.end_offset


def append(broker, count: int, *, epoch: int, topic="t", partition=0) -> None:
    log = broker.get_log(topic, partition)
    for index in range(count):
        log.append(batch(f"e{epoch}-{index}".encode()), leader_epoch=epoch, now_ms=broker.now_ms())


@pytest.fixture
def epochs(broker):
    """Partition t-0: epoch 0 wrote offsets 0-4, epoch 1 offsets 5-7, epoch 3 offsets 8-9 (log end offset 10).
    The broker's current epoch stays 0, as for every partition here; epochs 1 and 3 stand for leader changes."""
    broker.create_topic("t", 2)
    append(broker, 5, epoch=0)
    append(broker, 3, epoch=1)
    append(broker, 2, epoch=3)
    assert broker.get_log("t", 0).epochs.entries == [(0, 0), (1, 5), (3, 8)]
    return broker


def test_declares_every_schema_version_and_is_served():
    module = offset_for_leader_epoch
    assert (module.API_KEY, module.MIN_VERSION, module.MAX_VERSION) == (23, 0, 4)
    assert OffsetForLeaderEpochRequest.VALID_VERSIONS == (0, 4)
    assert HANDLERS[23] is module


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_the_latest_epoch_ends_at_the_log_end_at_every_version(epochs, version):
    error, epoch, end_offset = await ask(epochs, 3, version=version)
    assert (error, end_offset) == (ErrorCode.NONE, 10)
    assert epoch == (3 if version >= 1 else -1)  # v0 has no epoch in its answer


@pytest.mark.parametrize("asked, answer", [(0, (0, 5)), (1, (1, 8)), (2, (1, 8)), (3, (3, 10))])
async def test_an_epoch_ends_where_the_next_one_starts(epochs, asked, answer):
    assert await ask(epochs, asked) == (ErrorCode.NONE, *answer)


@pytest.mark.parametrize("asked", [4, 100, -1])
async def test_newer_than_every_epoch_or_undefined_is_unknown_without_an_error(epochs, asked):
    assert await ask(epochs, asked) == (ErrorCode.NONE, -1, -1)


async def test_older_than_every_cached_epoch_ends_at_the_first_cached_start(broker):
    broker.create_topic("t", 1)
    append(broker, 4, epoch=2)  # as if epochs 0 and 1 wrote records that retention has deleted since
    assert await ask(broker, 1) == (ErrorCode.NONE, 1, 0)
    assert await ask(broker, 2) == (ErrorCode.NONE, 2, 4)


async def test_a_partition_never_written_to_is_in_the_current_epoch(epochs):
    assert epochs.get_log("t", 1).epochs.entries == []
    assert await ask(epochs, 0, partition=1) == (ErrorCode.NONE, 0, 0)
    assert await ask(epochs, 1, partition=1) == (ErrorCode.NONE, -1, -1)


async def test_a_cache_behind_the_current_epoch_gets_it_at_the_log_end(epochs, monkeypatch):
    monkeypatch.setattr(epochs.partition_state("t", 0), "leader_epoch", 5)  # a leader elected after offset 10
    assert await ask(epochs, 5, current_leader_epoch=5) == (ErrorCode.NONE, 5, 10)
    assert await ask(epochs, 3, current_leader_epoch=5) == (ErrorCode.NONE, 3, 10)
    assert await ask(epochs, 4) == (ErrorCode.NONE, 3, 10)


async def test_deleting_old_records_moves_the_first_epoch_start(epochs):
    assert epochs.logs.delete_records("t", 0, 6, now_ms=epochs.now_ms()) == 6
    assert await ask(epochs, 1) == (ErrorCode.NONE, 1, 8)
    assert await ask(epochs, 0) == (ErrorCode.NONE, 0, 6)  # older than the first entry, (1, 6), now


@pytest.mark.parametrize("version", [2, 3, 4])
async def test_current_leader_epoch_is_checked_from_v2(epochs, version):
    assert await ask(epochs, 3, current_leader_epoch=0, version=version) == (ErrorCode.NONE, 3, 10)
    assert await ask(epochs, 3, current_leader_epoch=1, version=version) == (ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1)


async def test_an_older_current_leader_epoch_is_fenced(epochs, monkeypatch):
    monkeypatch.setattr(epochs.partition_state("t", 0), "leader_epoch", 3)
    assert await ask(epochs, 1, current_leader_epoch=2) == (ErrorCode.FENCED_LEADER_EPOCH, -1, -1)
    assert await ask(epochs, 1, current_leader_epoch=-1) == (ErrorCode.NONE, 1, 8)


@pytest.mark.parametrize("version", [0, 1])
async def test_versions_before_2_carry_no_current_epoch_to_check(epochs, version):
    error, _, end_offset = await ask(epochs, 1, current_leader_epoch=7, version=version)
    assert (error, end_offset) == (ErrorCode.NONE, 8)


@pytest.mark.parametrize("topic, partition", [("missing", 0), ("t", 2)])
async def test_unknown_topic_or_partition(epochs, topic, partition):
    assert await ask(epochs, 0, topic=topic, partition=partition) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)


async def test_follower_and_consumer_get_the_same_answer(epochs):
    request = OffsetForLeaderEpochRequest(replica_id=7, topics=[Topic(topic="t", partitions=[
        Partition(partition=0, leader_epoch=1)])])
    found = (await call(epochs, 3, request)).decoded.topics[0].partitions[0]
    assert (found.error_code, found.leader_epoch, found.end_offset) == (ErrorCode.NONE, 1, 8)


async def test_answers_in_request_order_with_each_mention(epochs):
    request = OffsetForLeaderEpochRequest(replica_id=CONSUMER, topics=[
        Topic(topic="t", partitions=[Partition(partition=1, leader_epoch=0), Partition(partition=0, leader_epoch=0)]),
        Topic(topic="gone", partitions=[Partition(partition=0, leader_epoch=0)]),
        Topic(topic="t", partitions=[Partition(partition=0, leader_epoch=3)])])
    answer = (await call(epochs, 4, request)).decoded
    assert answer.throttle_time_ms == 0
    assert [(t.topic, [(p.partition, p.error_code, p.leader_epoch, p.end_offset) for p in t.partitions])
            for t in answer.topics] == [
        ("t", [(1, 0, 0, 0), (0, 0, 0, 5)]),
        ("gone", [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]),
        ("t", [(0, 0, 3, 10)])]
