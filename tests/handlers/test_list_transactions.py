"""ListTransactions through the codec: each filter, at the version that brings it."""
from __future__ import annotations

import pytest

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import ListTransactionsRequest

from .helpers import call
from .txn_helpers import add_partitions, init, loaded


async def listing(broker, version: int = 2, **filters):
    return (await call(broker, version, ListTransactionsRequest(**filters))).decoded


def listed(answer) -> list[tuple[str, int, str]]:
    return sorted((s.transactional_id, s.producer_id, s.transaction_state) for s in answer.transaction_states)


async def _three(broker, monkeypatch):
    """orders-1 Ongoing (started at 1000), orders-2 and audit Empty; the clock then stands at 6000."""
    broker.create_topic("t", 1)
    await loaded(broker)
    clock = [1000]
    monkeypatch.setattr(broker, "now_ms", lambda: clock[0])
    ids = {name: await init(broker, name) for name in ("orders-1", "orders-2", "audit")}
    await add_partitions(broker, "orders-1", ids["orders-1"], [("t", 0)])
    clock[0] = 6000
    return ids


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_without_filters_every_id_is_listed(broker, monkeypatch, version):
    ids = await _three(broker, monkeypatch)
    answer = await listing(broker, version)
    assert (answer.error_code, answer.unknown_state_filters) == (0, [])
    assert listed(answer) == [("audit", ids["audit"][0], "Empty"), ("orders-1", ids["orders-1"][0], "Ongoing"),
                              ("orders-2", ids["orders-2"][0], "Empty")]


async def test_state_and_producer_id_filters(broker, monkeypatch):
    ids = await _three(broker, monkeypatch)
    assert [row[0] for row in listed(await listing(broker, 0, state_filters=["Ongoing"]))] == ["orders-1"]
    by_producer = await listing(broker, 0, producer_id_filters=[ids["audit"][0], 424242])
    assert [row[0] for row in listed(by_producer)] == ["audit"]
    unknown = await listing(broker, 0, state_filters=["Ongoing", "Sleeping", "Sleeping"])
    assert (unknown.unknown_state_filters, [row[0] for row in listed(unknown)]) == (["Sleeping"], ["orders-1"])
    only_unknown = await listing(broker, 0, state_filters=["Sleeping"])
    assert (only_unknown.unknown_state_filters, listed(only_unknown)) == (["Sleeping"], [])


async def test_duration_filter_from_v1(broker, monkeypatch):
    await _three(broker, monkeypatch)
    longer = await listing(broker, 1, state_filters=["Ongoing"], duration_filter=4999)
    assert [row[0] for row in listed(longer)] == ["orders-1"]  # open for 5000 ms
    not_longer = await listing(broker, 1, state_filters=["Ongoing"], duration_filter=5000)
    assert listed(not_longer) == []
    assert [row[0] for row in listed(await listing(broker, 1, state_filters=["Ongoing"], duration_filter=-1))] == [
        "orders-1"]


async def test_transactional_id_pattern_from_v2_must_match_the_whole_id(broker, monkeypatch):
    await _three(broker, monkeypatch)
    assert [row[0] for row in listed(await listing(broker, 2, transactional_id_pattern="orders-[0-9]+"))] == [
        "orders-1", "orders-2"]
    assert listed(await listing(broker, 2, transactional_id_pattern="orders")) == []  # not a prefix match
    assert len(listed(await listing(broker, 2, transactional_id_pattern=""))) == 3   # empty: no filter
    combined = await listing(broker, 2, transactional_id_pattern="orders-.*", state_filters=["Empty"])
    assert [row[0] for row in listed(combined)] == ["orders-2"]


@pytest.mark.parametrize("pattern", ["orders-[", "(a)\\1", "(?=orders)o.*", "a++"])
async def test_a_pattern_re2_refuses_is_invalid_regular_expression(broker, monkeypatch, pattern):
    await _three(broker, monkeypatch)
    answer = await listing(broker, 2, transactional_id_pattern=pattern)
    assert (answer.error_code, answer.transaction_states) == (ErrorCode.INVALID_REGULAR_EXPRESSION, [])


async def test_while_loading_the_answer_is_load_in_progress(broker, monkeypatch):
    monkeypatch.setattr(await loaded(broker), "loaded", False)
    answer = await listing(broker, 2)
    assert (answer.error_code, answer.transaction_states) == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, [])


async def test_a_pattern_that_backtracks_exponentially_is_matched_in_linear_time(broker):
    """(a+)+b against a long run of a's takes a backtracking engine (Python's re) longer than the age of the universe;
    RE2, Kafka's engine, answers at once: the test's time limit would catch a broker that hangs."""
    await loaded(broker)
    transactional_id = "a" * 200
    await init(broker, transactional_id)
    answer = await listing(broker, 2, transactional_id_pattern="(a+)+b")
    assert (answer.error_code, listed(answer)) == (ErrorCode.NONE, [])
    found = await listing(broker, 2, transactional_id_pattern="(a+)+")
    assert [row[0] for row in listed(found)] == [transactional_id]
