"""WriteTxnMarkers through the codec: markers written to the listed partitions, per-partition errors, v1 and v2."""
from __future__ import annotations

import pytest

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import WriteTxnMarkersRequest
from tests.coordinator.transactions_support import markers

from .helpers import call
from .txn_helpers import add_partitions, init, loaded, produce, txn_batch

Marker = WriteTxnMarkersRequest.WritableTxnMarker
MarkerTopic = WriteTxnMarkersRequest.WritableTxnMarkerTopic


def marker(producer, commit: bool, partitions: dict[str, list[int]], *, coordinator_epoch: int = 0, **fields):
    return Marker(producer_id=producer[0], producer_epoch=producer[1], transaction_result=commit,
                  coordinator_epoch=coordinator_epoch,
                  topics=[MarkerTopic(name=name, partition_indexes=indexes) for name, indexes in partitions.items()],
                  **fields)


def results(answer) -> list[tuple[int, dict]]:
    return [(entry.producer_id, {(topic.name, p.partition_index): p.error_code
                                 for topic in entry.topics for p in topic.partitions})
            for entry in answer.markers]


async def _open(broker):
    broker.create_topic("t", 2)
    await loaded(broker)
    producer = await init(broker, "tx")
    await add_partitions(broker, "tx", producer, [("t", 0)])
    assert (await produce(broker, "tx", "t", 0, txn_batch(producer, 0, b"a"))).error_code == 0
    return producer


@pytest.mark.parametrize("version, extra", [(1, {}), (2, {"transaction_version": 2})])
async def test_markers_are_written_and_unknown_partitions_named(broker, version, extra):
    producer = await _open(broker)
    other = (555, 3)
    request = WriteTxnMarkersRequest(markers=[marker(producer, True, {"t": [0, 5], "nope": [0]}, **extra),
                                              marker(other, False, {"t": [1]}, **extra)])
    answer = (await call(broker, version, request)).decoded
    assert results(answer) == [
        (producer[0], {("t", 0): 0, ("t", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}),
        (555, {("t", 1): 0})]  # a producer without an open transaction still gets its marker
    assert markers(broker, "t", 0) == [(producer[0], producer[1], "COMMIT", 0)]
    assert markers(broker, "t", 1) == [(555, 3, "ABORT", 0)]
    assert broker.get_log("t", 0).last_stable_offset == 2


async def test_a_stale_producer_epoch_is_refused(broker):
    """The partition's producer moved to a newer epoch (a new producer instance wrote there): a marker with the
    old epoch is INVALID_PRODUCER_EPOCH and is not written."""
    producer = await _open(broker)
    newer = await init(broker, "tx")
    await add_partitions(broker, "tx", newer, [("t", 0)])
    assert (await produce(broker, "tx", "t", 0, txn_batch(newer, 0, b"b"))).error_code == 0
    before = markers(broker, "t", 0)
    answer = (await call(broker, 1, WriteTxnMarkersRequest(markers=[marker(producer, True, {"t": [0]})]))).decoded
    assert results(answer) == [(producer[0], {("t", 0): ErrorCode.INVALID_PRODUCER_EPOCH})]
    assert markers(broker, "t", 0) == before


async def test_no_markers_no_results(broker):
    answer = (await call(broker, 1, WriteTxnMarkersRequest(markers=[]))).decoded
    assert answer.markers == []
