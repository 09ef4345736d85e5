"""ListOffsets: named positions per version, timestamp lookups, v0's legacy offsets, and the errors."""
from __future__ import annotations

import pytest

from compatbroker.handlers import list_offsets
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import ListOffsetsRequest
from compatbroker.protocol.records.batch import build_batch

from .helpers import call

Topic = ListOffsetsRequest.ListOffsetsTopic
Partition = ListOffsetsRequest.ListOffsetsPartition


def lookup(*partitions, topic="t", replica_id=-1, isolation_level=0) -> ListOffsetsRequest:
    return ListOffsetsRequest(replica_id=replica_id, isolation_level=isolation_level,
                              topics=[Topic(name=topic, partitions=list(partitions))])


async def ask(broker, version, timestamp, *, partition=0, topic="t", current_leader_epoch=-1, **options):
    request = lookup(Partition(partition_index=partition, timestamp=timestamp,
                               current_leader_epoch=current_leader_epoch if version >= 4 else -1),
                     topic=topic, **options)
    return (await call(broker, version, request)).decoded.topics[0].partitions[0]


@pytest.fixture
def stamped(broker):
    """Offsets 0-1 at 1000 and 1005, offset 2 at 3000, offset 3 at 2000 (timestamps out of order on purpose)."""
    broker.create_topic("t", 1)
    log = broker.get_log("t", 0)
    for records in ([(b"k", b"a", (), 1000), (b"k", b"b", (), 1005)], [(b"k", b"c", (), 3000)],
                    [(b"k", b"d", (), 2000)]):
        log.append(build_batch(records), leader_epoch=0, now_ms=broker.now_ms())
    return broker


def test_declares_every_schema_version():
    assert (list_offsets.API_KEY, list_offsets.MIN_VERSION, list_offsets.MAX_VERSION) == (2, 0, 11)


@pytest.mark.parametrize("version", range(1, 12))
async def test_earliest_and_latest(stamped, version):
    earliest = await ask(stamped, version, -2)
    latest = await ask(stamped, version, -1)
    assert (earliest.error_code, earliest.offset, earliest.timestamp) == (0, 0, -1)
    assert (latest.error_code, latest.offset, latest.timestamp) == (0, 4, -1)
    assert latest.leader_epoch == earliest.leader_epoch == (0 if version >= 4 else -1)


@pytest.mark.parametrize("target, offset, timestamp", [(0, 0, 1000), (1001, 1, 1005), (1500, 2, 3000),
                                                       (3000, 2, 3000), (3001, -1, -1)])
async def test_by_timestamp_finds_first_offset_at_or_after(stamped, target, offset, timestamp):
    found = await ask(stamped, 5, target)
    assert (found.error_code, found.offset, found.timestamp) == (0, offset, timestamp)
    assert found.leader_epoch == (0 if offset >= 0 else -1)


async def test_max_timestamp_from_v7(stamped):
    found = await ask(stamped, 7, -3)
    assert (found.error_code, found.offset, found.timestamp, found.leader_epoch) == (0, 2, 3000, 0)
    assert (await ask(stamped, 6, -3)).error_code == ErrorCode.UNSUPPORTED_VERSION


async def test_max_timestamp_of_an_empty_log(broker):
    broker.create_topic("t", 1)
    found = await ask(broker, 7, -3)
    assert (found.error_code, found.offset, found.timestamp) == (0, -1, -1)


@pytest.mark.parametrize("timestamp, since", [(-4, 8), (-5, 9), (-6, 11)])
async def test_tiered_positions_need_their_version(stamped, timestamp, since):
    refused = await ask(stamped, since - 1, timestamp)
    assert (refused.error_code, refused.offset) == (ErrorCode.UNSUPPORTED_VERSION, -1)
    answered = await ask(stamped, since, timestamp)
    assert answered.error_code == 0
    assert answered.offset == (0 if timestamp == -4 else -1)  # nothing is tiered: local start is the log start


@pytest.mark.parametrize("version", [1, 11])
async def test_negative_timestamps_that_name_nothing(stamped, version):
    assert (await ask(stamped, version, -7)).error_code == ErrorCode.UNSUPPORTED_VERSION


async def test_read_committed_latest_is_the_last_stable_offset(stamped):
    found = await ask(stamped, 2, -1, isolation_level=1)
    assert (found.error_code, found.offset) == (0, 4)


@pytest.mark.parametrize("version", [0, 1, 11])
async def test_unknown_topic_or_partition(stamped, version):
    assert (await ask(stamped, version, -1, topic="nope")).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert (await ask(stamped, version, -1, partition=3)).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_partition_named_twice_is_an_invalid_request(stamped):
    request = lookup(Partition(partition_index=0, timestamp=-1), Partition(partition_index=0, timestamp=-2))
    answer = (await call(stamped, 5, request)).decoded
    assert [(p.error_code, p.offset) for p in answer.topics[0].partitions] == [(ErrorCode.INVALID_REQUEST, -1)] * 2


async def test_leader_epoch_is_checked_from_v4(stamped):
    assert (await ask(stamped, 4, -1, current_leader_epoch=1)).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert (await ask(stamped, 4, -1, current_leader_epoch=-2)).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert (await ask(stamped, 4, -1, current_leader_epoch=0)).error_code == 0


@pytest.fixture
def segmented(broker):
    """Three segments starting at 0, 2 and 3; log end offset 4."""
    broker.create_topic("t", 1)
    log = broker.get_log("t", 0)
    now = broker.now_ms()
    log.append(build_batch([(b"k", b"a", (), now), (b"k", b"b", (), now)]), leader_epoch=0, now_ms=now)
    log.roll(now)
    log.append(build_batch([(b"k", b"c", (), now)]), leader_epoch=0, now_ms=now)
    log.roll(now)
    log.append(build_batch([(b"k", b"d", (), now)]), leader_epoch=0, now_ms=now)
    return broker


async def ask_v0(broker, timestamp, max_num_offsets, **options):
    request = lookup(Partition(partition_index=0, timestamp=timestamp, max_num_offsets=max_num_offsets), **options)
    return (await call(broker, 0, request)).decoded.topics[0].partitions[0]


async def test_v0_old_style_offsets(segmented):
    latest = await ask_v0(segmented, -1, 10)
    assert (latest.error_code, latest.old_style_offsets) == (0, [4, 3, 2, 0])
    assert (await ask_v0(segmented, -1, 2)).old_style_offsets == [4, 3]
    assert (await ask_v0(segmented, -2, 10)).old_style_offsets == [0]
    future = segmented.now_ms() + 3_600_000
    assert (await ask_v0(segmented, future, 10)).old_style_offsets == [4, 3, 2, 0]
    assert (await ask_v0(segmented, 0, 10)).old_style_offsets == []  # every segment was written after 1970


async def test_v0_refuses_positions_it_does_not_know(segmented):
    answer = await ask_v0(segmented, -3, 1)
    assert (answer.error_code, answer.old_style_offsets) == (ErrorCode.UNSUPPORTED_VERSION, [])
