"""The SharePartitionManager's entry points for the share group coordinator (DescribeShareGroupOffsets,
AlterShareGroupOffsets, DeleteShareGroupOffsets): read_offsets, alter_start_offsets, delete_state."""
from __future__ import annotations

import pytest

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.share import share_partitions_of
from compatbroker.share.state_store import state_store_of

from ..handlers.helpers import call, make_broker
from ..handlers.test_share_fetch import GROUP, partitions_of, produce, share_fetch


@pytest.fixture
def broker(tmp_path):
    broker = make_broker(tmp_path / "data")
    yield broker
    broker.logs.shutdown()


async def test_read_alter_and_delete(broker):
    topic = broker.create_topic("t", 2)
    manager = share_partitions_of(broker)
    assert await manager.read_offsets(GROUP, topic.topic_id, [0]) == {0: (-1, 0, -1, ErrorCode.NONE)}
    await call(broker, 1, share_fetch(topic.topic_id))
    produce(broker, b"a", b"b", b"c")
    await call(broker, 1, share_fetch(topic.topic_id, epoch=1))
    await call(broker, 1, share_fetch(topic.topic_id, epoch=2, acks={0: [(0, 0, [1]), (2, 2, [3])]}, max_records=0))
    # start 1; of the 2 records from there, offset 2 is done: lag 1
    assert await manager.read_offsets(GROUP, topic.topic_id, [0, 5]) == {
        0: (1, 0, 1, ErrorCode.NONE), 5: (-1, -1, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)}

    assert await manager.alter_start_offsets(GROUP, {(topic.topic_id, 0): 3}) == {(topic.topic_id, 0): ErrorCode.NONE}
    assert (await state_store_of(broker).read((GROUP, topic.topic_id, 0))).start_offset == 3
    produce(broker, b"d")
    await call(broker, 1, share_fetch(topic.topic_id, member="new"))
    again = partitions_of(await call(broker, 1, share_fetch(topic.topic_id, member="new", epoch=1)))
    assert (topic.topic_id, 0) not in again or again[(topic.topic_id, 0)].acquired_records == []
    assert share_partitions_of(broker).cached((GROUP, topic.topic_id, 0)).start_offset == 3

    assert await manager.delete_state(GROUP, [(topic.topic_id, 0)]) == {(topic.topic_id, 0): ErrorCode.NONE}
    assert await state_store_of(broker).read((GROUP, topic.topic_id, 0)) is None
    assert await manager.read_offsets(GROUP, topic.topic_id, [0]) == {0: (-1, 0, -1, ErrorCode.NONE)}
