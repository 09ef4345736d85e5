"""AddOffsetsToTxn through the codec: the group's `__consumer_offsets` partition joins the transaction, and the
errors at their version boundaries."""
from __future__ import annotations

import pytest

from compatbroker.coordinator.offsets import partition_for_group
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import AddOffsetsToTxnRequest

from .helpers import call
from .txn_helpers import init, loaded


async def add_offsets(broker, transactional_id: str, producer, group_id: str, *, version: int = 3) -> int:
    request = AddOffsetsToTxnRequest(transactional_id=transactional_id, producer_id=producer[0],
                                     producer_epoch=producer[1], group_id=group_id)
    return (await call(broker, version, request)).decoded.error_code


@pytest.mark.parametrize("version", [0, 2, 4])
async def test_the_groups_offsets_partition_joins_the_transaction(broker, version):
    await loaded(broker)
    producer = await init(broker, "tx")
    assert await add_offsets(broker, "tx", producer, "my-group", version=version) == ErrorCode.NONE
    described = (await loaded(broker)).describe("tx")
    partitions = broker.config.offsets_topic_num_partitions
    assert (described.state, described.partitions) == (
        "Ongoing", [("__consumer_offsets", partition_for_group("my-group", partitions))])


@pytest.mark.parametrize("version, code", [(0, ErrorCode.INVALID_PRODUCER_EPOCH), (1, ErrorCode.INVALID_PRODUCER_EPOCH),
                                           (2, ErrorCode.PRODUCER_FENCED), (4, ErrorCode.PRODUCER_FENCED)])
async def test_a_fenced_producer_gets_the_code_its_version_knows(broker, version, code):
    await loaded(broker)
    producer = await init(broker, "tx")
    await init(broker, "tx")
    assert await add_offsets(broker, "tx", producer, "g", version=version) == code


async def test_coordinator_errors_pass_through(broker, monkeypatch):
    await loaded(broker)
    assert await add_offsets(broker, "nobody", (999, 0), "g") == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert await add_offsets(broker, "", (1, 0), "g") == ErrorCode.INVALID_REQUEST
    monkeypatch.setattr(await loaded(broker), "loaded", False)
    assert await add_offsets(broker, "tx", (1, 0), "g") == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
