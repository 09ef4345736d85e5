"""EndTxn through the handlers, and whole transactions as a client drives them: InitProducerId,
AddPartitionsToTxn, Produce and EndTxn, then the control batches in the logs, the last stable offset and the
aborted-transaction index. Transactions v1 (EndTxn v0-4) against v2 (Produce v12+, EndTxn v5)."""
from __future__ import annotations

import pytest

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import EndTxnRequest
from tests.coordinator.transactions_support import markers

from .helpers import call
from .txn_helpers import add_partitions, end, init, loaded, produce, txn_batch

PARTITIONS = [("t", 0), ("t", 1), ("t", 2)]


async def _open_transaction(broker, transactional_id: str = "tx", *, values=(b"a", b"b")):
    """A transaction over three partitions holding `values` each; returns the producer."""
    broker.create_topic("t", 3)
    await loaded(broker)
    producer = await init(broker, transactional_id)
    assert await add_partitions(broker, transactional_id, producer, PARTITIONS) == {tp: 0 for tp in PARTITIONS}
    for _, index in PARTITIONS:
        answer = await produce(broker, transactional_id, "t", index, txn_batch(producer, 0, *values))
        assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, 0)
    for _, index in PARTITIONS:  # the open transaction holds the last stable offset back
        assert broker.get_log("t", index).last_stable_offset == 0
    return producer


@pytest.mark.parametrize("commit, marker", [(True, "COMMIT"), (False, "ABORT")])
async def test_a_transaction_ends_with_a_marker_in_every_partition(broker, commit, marker):
    producer = await _open_transaction(broker)
    answer = await end(broker, "tx", producer, commit)
    assert answer.error_code == ErrorCode.NONE
    for _, index in PARTITIONS:
        log = broker.get_log("t", index)
        assert markers(broker, "t", index) == [(producer[0], producer[1], marker, 0)]
        assert log.log_end_offset == 3  # two records and the marker
        assert log.last_stable_offset == 3
        aborted = log.collect_aborted_transactions(0, 3)
        assert [(entry.producer_id, entry.first_offset, entry.last_offset) for entry in aborted] == (
            [] if commit else [(producer[0], 0, 2)])
    described = (await loaded(broker)).describe("tx")
    assert described.state == ("CompleteCommit" if commit else "CompleteAbort")
    assert described.producer_epoch == producer[1]  # transactions v1 keep the epoch


async def test_end_txn_v5_bumps_the_epoch_and_answers_it_where_v4_does_not(broker):
    producer = await _open_transaction(broker)
    v4 = await end(broker, "tx", producer, True, version=4)
    assert (v4.error_code, v4.producer_id, v4.producer_epoch) == (ErrorCode.NONE, -1, -1)  # no such fields
    assert (await loaded(broker)).describe("tx").producer_epoch == producer[1]

    assert await add_partitions(broker, "tx", producer, [("t", 0)]) == {("t", 0): 0}
    v5 = await end(broker, "tx", producer, False, version=5)
    assert (v5.error_code, v5.producer_id, v5.producer_epoch) == (ErrorCode.NONE, producer[0], producer[1] + 1)
    assert (await loaded(broker)).describe("tx").producer_epoch == producer[1] + 1
    # the marker of a transactions-v2 end carries the bumped epoch
    assert markers(broker, "t", 0)[-1] == (producer[0], producer[1] + 1, "ABORT", 0)


async def test_a_transactions_v2_producer_adds_partitions_by_producing(broker):
    """Produce v12 adds the partition itself (no AddPartitionsToTxn); EndTxn v5 commits and bumps the epoch."""
    broker.create_topic("t", 2)
    await loaded(broker)
    producer = await init(broker, "tx", version=5)
    for index in (0, 1):
        answer = await produce(broker, "tx", "t", index, txn_batch(producer, 0, b"x"), version=12)
        assert answer.error_code == ErrorCode.NONE
    described = (await loaded(broker)).describe("tx")
    assert (described.state, described.partitions) == ("Ongoing", [("t", 0), ("t", 1)])
    answer = await end(broker, "tx", producer, True, version=5)
    assert (answer.error_code, answer.producer_epoch) == (ErrorCode.NONE, producer[1] + 1)
    for index in (0, 1):
        assert markers(broker, "t", index) == [(producer[0], producer[1] + 1, "COMMIT", 0)]
        assert broker.get_log("t", index).last_stable_offset == 2


@pytest.mark.parametrize("version, code", [(0, ErrorCode.INVALID_PRODUCER_EPOCH), (1, ErrorCode.INVALID_PRODUCER_EPOCH),
                                           (2, ErrorCode.PRODUCER_FENCED), (5, ErrorCode.PRODUCER_FENCED)])
async def test_a_fenced_producer_is_told_in_the_code_its_version_knows(broker, version, code):
    producer = await _open_transaction(broker)
    newer = await init(broker, "tx")  # fences the first producer: its transaction is aborted
    assert newer[1] > producer[1]
    answer = await end(broker, "tx", producer, True, version=version)
    assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (code, -1, -1)


async def test_errors_of_the_coordinator_pass_through(broker, monkeypatch):
    await _open_transaction(broker)
    unknown = await end(broker, "nobody", (12345, 0), True)
    assert unknown.error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    empty = await call(broker, 3, EndTxnRequest(transactional_id="", producer_id=1, producer_epoch=0,
                                                committed=True))
    assert empty.decoded.error_code == ErrorCode.INVALID_REQUEST
    monkeypatch.setattr(await loaded(broker), "loaded", False)
    loading = await end(broker, "tx", (1, 0), True)
    assert loading.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
