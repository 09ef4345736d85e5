"""DescribeTransactions through the codec."""
from __future__ import annotations

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import DescribeTransactionsRequest

from .helpers import call
from .txn_helpers import TIMEOUT_MS, add_partitions, init, loaded


async def describe(broker, *transactional_ids: str) -> list:
    request = DescribeTransactionsRequest(transactional_ids=list(transactional_ids))
    return (await call(broker, 0, request)).decoded.transaction_states


async def test_each_id_answers_in_the_order_asked(broker, monkeypatch):
    broker.create_topic("b", 2)
    broker.create_topic("a", 3)
    await loaded(broker)
    monkeypatch.setattr(broker, "now_ms", lambda: 1_700_000_000_000)
    producer = await init(broker, "tx")
    await add_partitions(broker, "tx", producer, [("b", 1), ("a", 2), ("a", 0), ("b", 0)])
    idle = await init(broker, "idle")
    states = await describe(broker, "tx", "unknown", "", "idle", "tx")
    assert [(s.transactional_id, s.error_code) for s in states] == [
        ("tx", 0), ("unknown", ErrorCode.TRANSACTIONAL_ID_NOT_FOUND), ("", ErrorCode.INVALID_REQUEST), ("idle", 0),
        ("tx", 0)]
    ongoing = states[0]
    assert (ongoing.transaction_state, ongoing.producer_id, ongoing.producer_epoch, ongoing.transaction_timeout_ms,
            ongoing.transaction_start_time_ms) == ("Ongoing", producer[0], producer[1], TIMEOUT_MS, 1_700_000_000_000)
    assert [(t.topic, t.partitions) for t in ongoing.topics] == [("a", [0, 2]), ("b", [0, 1])]
    empty = states[3]
    assert (empty.transaction_state, empty.producer_id, empty.transaction_start_time_ms, empty.topics) == (
        "Empty", idle[0], -1, [])
    assert (states[1].transaction_state, states[1].producer_id, states[1].topics) == ("", 0, [])


async def test_while_loading_every_id_answers_load_in_progress(broker, monkeypatch):
    monkeypatch.setattr(await loaded(broker), "loaded", False)
    states = await describe(broker, "a", "b")
    assert [s.error_code for s in states] == [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS] * 2
