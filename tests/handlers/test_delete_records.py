"""DeleteRecords: moving the log start offset, the high watermark sentinel, every per-partition error, the
checkpoint written before the answer, and Fetch/ListOffsets seeing the new start."""
from __future__ import annotations

import os

import pytest

from compatbroker.handlers import delete_records
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import DeleteRecordsRequest, ListOffsetsRequest
from compatbroker.storage.checkpoints import LOG_START_OFFSET_CHECKPOINT, read_offsets

from .helpers import batch, call
from .test_fetch import fetch_request

Topic = DeleteRecordsRequest.DeleteRecordsTopic
Partition = DeleteRecordsRequest.DeleteRecordsPartition
ALL_VERSIONS = range(delete_records.MIN_VERSION, delete_records.MAX_VERSION + 1)
E = ErrorCode


def below(topic: str, *offsets: tuple[int, int]):
    """The request entry deleting, in `topic`, the records below each (partition, offset)."""
    return Topic(name=topic, partitions=[Partition(partition_index=p, offset=o) for p, o in offsets])


async def delete(broker, *topics, version: int = 2) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (error code, low watermark)."""
    answer = await call(broker, version, DeleteRecordsRequest(topics=list(topics), timeout_ms=5000))
    return {(t.name, p.partition_index): (p.error_code, p.low_watermark)
            for t in answer.decoded.topics for p in t.partitions}


def fill(broker, topic: str, partition: int, count: int) -> None:
    partition_log = broker.get_log(topic, partition)
    for index in range(count):
        partition_log.append(batch(f"record-{index}".encode()), leader_epoch=0, now_ms=broker.now_ms())


@pytest.fixture
def ten(broker):
    """Topic "t": partition 0 holds offsets 0-9 in ten batches, partition 1 is empty."""
    broker.create_topic("t", 2)
    fill(broker, "t", 0, 10)
    return broker


def test_declares_every_schema_version():
    assert (delete_records.API_KEY, delete_records.MIN_VERSION, delete_records.MAX_VERSION) == (21, 0, 2)
    assert DeleteRecordsRequest.VALID_VERSIONS == (0, 2)


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_moves_the_log_start_offset_at_every_version(ten, version):
    assert await delete(ten, below("t", (0, 4)), version=version) == {("t", 0): (E.NONE, 4)}
    assert ten.get_log("t", 0).log_start_offset == 4


async def test_minus_one_means_the_high_watermark(ten):
    assert await delete(ten, below("t", (0, -1), (1, -1))) == {("t", 0): (E.NONE, 10), ("t", 1): (E.NONE, 0)}
    assert ten.get_log("t", 0).log_start_offset == 10


async def test_the_start_never_moves_back(ten):
    await delete(ten, below("t", (0, 6)))
    assert await delete(ten, below("t", (0, 2))) == {("t", 0): (E.NONE, 6)}


@pytest.mark.parametrize("offset", [11, -2])
async def test_offsets_out_of_range(ten, offset):
    assert await delete(ten, below("t", (0, offset))) == {("t", 0): (E.OFFSET_OUT_OF_RANGE, -1)}
    assert ten.get_log("t", 0).log_start_offset == 0


async def test_unknown_topic_and_partition(ten):
    assert await delete(ten, below("t", (5, 0)), below("nope", (0, 0))) == {
        ("t", 5): (E.UNKNOWN_TOPIC_OR_PARTITION, -1), ("nope", 0): (E.UNKNOWN_TOPIC_OR_PARTITION, -1)}


async def test_compacted_topic_is_a_policy_violation(broker):
    broker.create_topic("compacted", 1, {"cleanup.policy": "compact"})
    assert await delete(broker, below("compacted", (0, 0))) == {("compacted", 0): (E.POLICY_VIOLATION, -1)}


async def test_internal_topic_is_refused(broker):
    broker.create_topic("__consumer_offsets", 1, {"cleanup.policy": "delete"})
    assert await delete(broker, below("__consumer_offsets", (0, 0))) == {
        ("__consumer_offsets", 0): (E.INVALID_TOPIC_EXCEPTION, -1)}


async def test_partitions_fail_one_by_one(ten):
    assert await delete(ten, below("t", (0, 3), (1, 5))) == {("t", 0): (E.NONE, 3),
                                                            ("t", 1): (E.OFFSET_OUT_OF_RANGE, -1)}


async def test_a_partition_named_twice_takes_the_last_offset(ten):
    assert await delete(ten, below("t", (0, 2)), below("t", (0, 5))) == {("t", 0): (E.NONE, 5)}


async def test_the_new_start_is_checkpointed_before_the_answer(ten):
    await delete(ten, below("t", (0, 7)))
    checkpoint = read_offsets(os.path.join(ten.logs.data_dir, LOG_START_OFFSET_CHECKPOINT))
    assert checkpoint[("t", 0)] == 7


async def test_fetch_and_list_offsets_see_the_new_start(ten):
    await delete(ten, below("t", (0, 5)))
    fetched = (await call(ten, 11, fetch_request(ten, 11, ("t", 0, 2, 1 << 20)))).decoded
    assert fetched.responses[0].partitions[0].error_code == E.OFFSET_OUT_OF_RANGE
    fetched = (await call(ten, 11, fetch_request(ten, 11, ("t", 0, 5, 1 << 20)))).decoded
    assert (fetched.responses[0].partitions[0].error_code, fetched.responses[0].partitions[0].log_start_offset) == (
        E.NONE, 5)
    earliest = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name="t", partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-2)])])
    listed = (await call(ten, 7, earliest)).decoded
    assert listed.topics[0].partitions[0].offset == 5
