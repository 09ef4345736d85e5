"""DescribeLogDirs: the data directory, partition sizes from the segment files, which partitions are listed, and
the file system figures of v4+."""
from __future__ import annotations

import os

import pytest

from compatbroker.handlers import describe_log_dirs
from compatbroker.protocol.messages import DescribeLogDirsRequest

from .helpers import batch, call

Wanted = DescribeLogDirsRequest.DescribableLogDirTopic
ALL_VERSIONS = range(describe_log_dirs.MIN_VERSION, describe_log_dirs.MAX_VERSION + 1)


def segment_bytes(broker, topic: str, partition: int) -> int:
    directory = os.path.join(broker.logs.data_dir, f"{topic}-{partition}")
    return sum(os.path.getsize(os.path.join(directory, name)) for name in os.listdir(directory)
               if name.endswith(".log"))


async def describe(broker, topics, version: int = 4):
    return (await call(broker, version, DescribeLogDirsRequest(topics=topics))).decoded


def listed(result) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.partition_size for t in result.topics for p in t.partitions}


@pytest.fixture
def filled(broker):
    broker.create_topic("a", 2)
    broker.create_topic("b", 1)
    for value in (b"x" * 100, b"y" * 300):
        broker.get_log("a", 1).append(batch(value), leader_epoch=0, now_ms=broker.now_ms())
    broker.get_log("b", 0).append(batch(b"z"), leader_epoch=0, now_ms=broker.now_ms())
    broker.get_log("a", 1).roll(broker.now_ms())  # sizes count every segment
    broker.get_log("a", 1).append(batch(b"w" * 50), leader_epoch=0, now_ms=broker.now_ms())
    return broker


def test_declares_every_schema_version():
    assert (describe_log_dirs.API_KEY, describe_log_dirs.MIN_VERSION, describe_log_dirs.MAX_VERSION) == (35, 0, 5)
    assert DescribeLogDirsRequest.VALID_VERSIONS == (0, 5)


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_null_topics_describes_every_partition(filled, version):
    answer = await describe(filled, None, version)
    assert answer.error_code == 0
    [result] = answer.results
    assert (result.error_code, result.log_dir) == (0, filled.logs.data_dir)
    assert os.path.isabs(result.log_dir)
    assert listed(result) == {("a", 0): 0, ("a", 1): segment_bytes(filled, "a", 1),
                              ("b", 0): segment_bytes(filled, "b", 0)}
    assert listed(result)[("a", 1)] > 450
    for topic in result.topics:
        assert all((p.offset_lag, p.is_future_key) == (0, False) for p in topic.partitions)
    if version >= 4:
        stats = os.statvfs(filled.logs.data_dir)
        assert result.total_bytes == stats.f_blocks * stats.f_frsize
        assert 0 < result.usable_bytes <= result.total_bytes
    else:
        assert (result.total_bytes, result.usable_bytes) == (-1, -1)
    assert result.is_cordoned is False


async def test_only_the_asked_partitions_that_exist(filled):
    [result] = (await describe(filled, [Wanted(topic="a", partitions=[1, 7]), Wanted(topic="gone", partitions=[0]),
                                        Wanted(topic="b", partitions=[])])).results
    assert listed(result) == {("a", 1): segment_bytes(filled, "a", 1)}
    assert [t.name for t in result.topics] == ["a"]


async def test_an_empty_list_describes_the_directory_only(filled):
    [result] = (await describe(filled, [])).results
    assert (result.error_code, result.log_dir, result.topics) == (0, filled.logs.data_dir, [])
    assert result.total_bytes > 0


async def test_sizes_follow_deleted_records(filled):
    before = listed((await describe(filled, None)).results[0])[("a", 1)]
    filled.logs.delete_records("a", 1, 2, now_ms=filled.now_ms())  # drops the first segment
    after = listed((await describe(filled, None)).results[0])[("a", 1)]
    assert after == segment_bytes(filled, "a", 1) < before
