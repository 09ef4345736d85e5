"""Fetch sessions (KIP-227): the cache on its own, then through the Fetch handler."""
from __future__ import annotations

import uuid

import pytest

from compatbroker.fetch_session import (FetchSessionCache, FullContext, IncrementalContext, PartitionRequest,
                                        SessionlessContext, new_context, next_epoch)
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import FetchResponse

from .helpers import batch, call, records_of
from .test_fetch import append, fetch_request

ZERO = uuid.UUID(int=0)


def wanted(partition: int, offset: int = 0, topic: str = "t") -> PartitionRequest:
    return PartitionRequest(topic=topic, topic_id=ZERO, partition=partition, fetch_offset=offset,
                            partition_max_bytes=1000)


def data(partition: int, high_watermark: int = 0, records=b"", error_code=0):
    return FetchResponse.PartitionData(partition_index=partition, high_watermark=high_watermark,
                                       log_start_offset=0, records=records, error_code=error_code)


def open_session(cache, partitions, now_ms=0) -> int:
    context = new_context(cache, version=12, session_id=0, epoch=0, requested=partitions, forgotten=[],
                          now_ms=now_ms)
    assert isinstance(context, FullContext)
    return context.respond([(p, data(p.partition)) for p in partitions], now_ms)[1]


# --- the cache ------------------------------------------------------------------------------------------------

def test_epochs_wrap_to_one():
    assert (next_epoch(0), next_epoch(41), next_epoch(2**31 - 1), next_epoch(-1)) == (1, 42, 1, -1)


def test_versions_before_7_are_sessionless():
    cache = FetchSessionCache(10)
    context = new_context(cache, version=6, session_id=0, epoch=0, requested=[wanted(0)], forgotten=[], now_ms=0)
    assert isinstance(context, SessionlessContext)
    assert context.respond([(wanted(0), data(0))], 0)[:2] == (0, 0)
    assert len(cache) == 0


def test_full_cache_gives_no_session_to_a_newcomer():
    cache = FetchSessionCache(1)
    assert open_session(cache, [wanted(0)]) != 0
    assert open_session(cache, [wanted(0), wanted(1)], now_ms=1000) == 0
    assert len(cache) == 1


def test_stale_sessions_are_evicted():
    cache = FetchSessionCache(1, eviction_ms=100)
    first = open_session(cache, [wanted(0)])
    second = open_session(cache, [wanted(0)], now_ms=101)
    assert second not in (0, first) and cache.get(first) is None


def test_an_aged_smaller_session_gives_way_to_a_larger_one():
    cache = FetchSessionCache(1, eviction_ms=100)
    small = open_session(cache, [wanted(0)])
    new_context(cache, version=12, session_id=small, epoch=1, requested=[], forgotten=[], now_ms=150)  # touched
    assert open_session(cache, [wanted(0)], now_ms=160) == 0  # not larger: no eviction
    larger = open_session(cache, [wanted(0), wanted(1)], now_ms=170)
    assert larger != 0 and cache.get(small) is None


def test_no_slots_no_sessions():
    assert open_session(FetchSessionCache(0), [wanted(0)]) == 0


def test_partitions_with_data_move_to_the_back():
    cache = FetchSessionCache(10)
    session_id = open_session(cache, [wanted(0), wanted(1), wanted(2)])
    context = new_context(cache, version=12, session_id=session_id, epoch=1, requested=[], forgotten=[], now_ms=1)
    assert isinstance(context, IncrementalContext)
    order = context.partitions()
    results = [(p, data(p.partition, high_watermark=5 if p.partition == 0 else 0,
                        records=b"x" if p.partition == 0 else b"")) for p in order]
    error, same_id, selected = context.respond(results, 1)
    assert (error, same_id, [r[0].partition for r in selected]) == (0, session_id, [0])
    context = new_context(cache, version=12, session_id=session_id, epoch=2, requested=[], forgotten=[], now_ms=2)
    assert [p.partition for p in context.partitions()] == [1, 2, 0]


def test_errors_are_resent_until_they_clear():
    cache = FetchSessionCache(10)
    session_id = open_session(cache, [wanted(0)])
    for epoch, code, expected in [(1, 3, 1), (2, 3, 1), (3, 0, 1), (4, 0, 0)]:
        context = new_context(cache, version=12, session_id=session_id, epoch=epoch, requested=[], forgotten=[],
                              now_ms=epoch)
        selected = context.respond([(wanted(0), data(0, error_code=code))], epoch)[2]
        assert len(selected) == expected, epoch


# --- through the handler --------------------------------------------------------------------------------------

@pytest.fixture
def two(broker):
    broker.create_topic("t", 2)
    append(broker, batch(b"zero"), partition=0)
    return broker


async def fetch(broker, version, *wanted_partitions, **options):
    return (await call(broker, version, fetch_request(broker, version, *wanted_partitions, **options))).decoded


def returned(answer) -> list[tuple[str, int]]:
    return [(topic.topic, partition.partition_index) for topic in answer.responses for partition in topic.partitions]


async def test_full_then_incremental_fetches(two):
    full = await fetch(two, 7, ("t", 0, 0, 1000), ("t", 1, 0, 1000), session_epoch=0)
    assert full.error_code == 0 and full.session_id != 0
    assert returned(full) == [("t", 0), ("t", 1)]
    session = full.session_id
    # nothing changed: an incremental fetch answers no partition at all
    quiet = await fetch(two, 7, ("t", 0, 1, 1000), session_id=session, session_epoch=1)
    assert (quiet.error_code, quiet.session_id, returned(quiet)) == (0, session, [])
    # new data on partition 1, which the request does not even mention
    append(two, batch(b"one"), partition=1)
    news = await fetch(two, 7, session_id=session, session_epoch=2)
    assert returned(news) == [("t", 1)]
    assert [r.value for r in records_of(news.responses[0].partitions[0].records)] == [b"one"]


async def test_forgotten_partitions_leave_the_session(two):
    session = (await fetch(two, 8, ("t", 0, 1, 1000), ("t", 1, 0, 1000), session_epoch=0)).session_id
    await fetch(two, 8, forgotten=[("t", 1)], session_id=session, session_epoch=1)
    append(two, batch(b"unseen"), partition=1)
    answer = await fetch(two, 8, session_id=session, session_epoch=2)
    assert answer.error_code == 0 and returned(answer) == []


async def test_forgetting_everything_ends_the_session(two):
    session = (await fetch(two, 8, ("t", 0, 1, 1000), session_epoch=0)).session_id
    answer = await fetch(two, 8, forgotten=[("t", 0)], session_id=session, session_epoch=1)
    assert answer.session_id == 0 and two.fetch_sessions.get(session) is None


async def test_wrong_epoch(two):
    session = (await fetch(two, 7, ("t", 0, 0, 1000), session_epoch=0)).session_id
    answer = await fetch(two, 7, session_id=session, session_epoch=5)
    assert (answer.error_code, answer.session_id, answer.responses) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, [])


async def test_unknown_session_id(two):
    answer = await fetch(two, 7, ("t", 0, 0, 1000), session_id=12345, session_epoch=1)
    assert (answer.error_code, answer.session_id, answer.responses) == (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, [])


async def test_final_epoch_closes_the_session(two):
    session = (await fetch(two, 7, ("t", 0, 0, 1000), session_epoch=0)).session_id
    closing = await fetch(two, 7, ("t", 0, 0, 1000), session_id=session, session_epoch=-1)
    assert closing.session_id == 0 and returned(closing) == [("t", 0)]
    later = await fetch(two, 7, session_id=session, session_epoch=1)
    assert later.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


async def test_full_fetch_replaces_the_session_it_names(two):
    first = (await fetch(two, 7, ("t", 0, 0, 1000), session_epoch=0)).session_id
    second = (await fetch(two, 7, ("t", 1, 0, 1000), session_id=first, session_epoch=0)).session_id
    assert second not in (0, first) and two.fetch_sessions.get(first) is None


async def test_cache_full_means_sessionless(broker_factory):
    broker = broker_factory(**{"max.incremental.fetch.session.cache.slots": "1"})
    broker.create_topic("t", 2)
    first = await fetch(broker, 7, ("t", 0, 0, 1000), session_epoch=0)
    second = await fetch(broker, 7, ("t", 0, 0, 1000), ("t", 1, 0, 1000), session_epoch=0)
    assert first.session_id != 0
    assert (second.error_code, second.session_id, returned(second)) == (0, 0, [("t", 0), ("t", 1)])


async def test_topic_id_sessions(two):
    info = two.topic("t")
    full = await fetch(two, 13, ("t", 0, 1, 1000), session_epoch=0)
    assert full.responses[0].topic_id == info.topic_id and full.session_id != 0
    append(two, batch(b"more"), partition=0)
    news = await fetch(two, 15, session_id=full.session_id, session_epoch=1)
    assert [r.value for r in records_of(first_records(news))] == [b"more"]
    crossed = await fetch(two, 12, session_id=full.session_id, session_epoch=2)
    assert crossed.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR


def first_records(answer):
    """The records of the first partition of a decoded response."""
    return answer.responses[0].partitions[0].records


async def test_session_remembers_unknown_topic_ids(two):
    ghost = uuid.uuid4()
    full = await fetch(two, 13, ("ghost", 0, 0, 1000), session_epoch=0, topic_ids={"ghost": ghost})
    assert full.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    again = await fetch(two, 13, session_id=full.session_id, session_epoch=1)
    assert [(t.topic_id, t.partitions[0].error_code) for t in again.responses] == [(ghost, ErrorCode.UNKNOWN_TOPIC_ID)]
