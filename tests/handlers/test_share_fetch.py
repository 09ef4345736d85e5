"""ShareFetch (78) v1-2 against a real broker: sessions, acquisition, acknowledgements piggybacked, long polling,
errors and version boundaries."""
from __future__ import annotations

import asyncio
import uuid

import pytest

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import ShareFetchRequest
from compatbroker.share import share_partitions_of

from .helpers import batch, call, records_of, start

MEMBER = "bXlNZW1iZXJJZDAwMDAwMA"
GROUP = "sg"


def share_fetch(topic_id, partitions=(0,), *, epoch=0, member=MEMBER, group=GROUP, acks=None, max_wait_ms=0,
                max_records=500, batch_size=500, min_bytes=1, max_bytes=2**31 - 1, forgotten=(), mode=0,
                renew=False) -> ShareFetchRequest:
    """`acks`: {partition: [(first, last, [types])]}."""
    acks = acks or {}
    wanted = sorted(set(partitions) | set(acks))
    topics = [ShareFetchRequest.FetchTopic(topic_id=topic_id, partitions=[
        ShareFetchRequest.FetchPartition(partition_index=p, acknowledgement_batches=[
            ShareFetchRequest.AcknowledgementBatch(first_offset=first, last_offset=last, acknowledge_types=list(types))
            for first, last, types in acks.get(p, [])]) for p in wanted])] if wanted else []
    return ShareFetchRequest(group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=max_wait_ms,
                             min_bytes=min_bytes, max_bytes=max_bytes, max_records=max_records,
                             batch_size=batch_size, share_acquire_mode=mode, is_renew_ack=renew, topics=topics,
                             forgotten_topics_data=[ShareFetchRequest.ForgottenTopic(topic_id=topic_id,
                                                                                     partitions=list(forgotten))]
                             if forgotten else [])


def produce(broker, *values, topic="t", partition=0):
    broker.get_log(topic, partition).append(batch(*values), leader_epoch=0, now_ms=broker.now_ms())
    broker.notify_appended(topic, partition)


def partitions_of(answer):
    return {(t.topic_id, p.partition_index): p for t in answer.decoded.responses for p in t.partitions}


@pytest.fixture
def topic(broker):
    return broker.create_topic("t", 1)


async def test_first_fetch_starts_at_latest_and_acquires_new_records(broker, topic):
    produce(broker, b"old")
    first = await call(broker, 1, share_fetch(topic.topic_id))
    assert first.decoded.error_code == ErrorCode.NONE
    assert first.decoded.acquisition_lock_timeout_ms == 30_000
    assert partitions_of(first)[(topic.topic_id, 0)].acquired_records == []
    produce(broker, b"a", b"b")
    second = await call(broker, 1, share_fetch(topic.topic_id, epoch=1))
    data = partitions_of(second)[(topic.topic_id, 0)]
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in data.acquired_records] == [(1, 2, 1)]
    assert [record.value for record in records_of(data.records)] == [b"a", b"b"]


async def test_two_members_never_share_a_record_and_accept_moves_on(broker, topic):
    await call(broker, 1, share_fetch(topic.topic_id))
    await call(broker, 1, share_fetch(topic.topic_id, member="other"))
    produce(broker, b"a", b"b")
    one = partitions_of(await call(broker, 1, share_fetch(topic.topic_id, epoch=1)))[(topic.topic_id, 0)]
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in one.acquired_records] == [(0, 1, 1)]
    two = partitions_of(await call(broker, 1, share_fetch(topic.topic_id, epoch=1, member="other")))
    assert (topic.topic_id, 0) not in two  # incremental answer: nothing for it, so the partition is left out
    done = await call(broker, 1, share_fetch(topic.topic_id, epoch=2, acks={0: [(0, 1, [1])]}))
    assert partitions_of(done)[(topic.topic_id, 0)].acknowledge_error_code == ErrorCode.NONE
    assert share_partitions_of(broker).cached((GROUP, topic.topic_id, 0)).start_offset == 2


async def test_released_records_are_redelivered_and_rejected_ones_are_not(broker, topic):
    await call(broker, 1, share_fetch(topic.topic_id))
    produce(broker, b"a", b"b")
    await call(broker, 1, share_fetch(topic.topic_id, epoch=1))
    await call(broker, 1, share_fetch(topic.topic_id, epoch=2, acks={0: [(0, 1, [2, 3])]}, max_records=0))
    again = partitions_of(await call(broker, 1, share_fetch(topic.topic_id, epoch=3)))[(topic.topic_id, 0)]
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in again.acquired_records] == [(0, 0, 2)]


async def test_ack_of_records_not_acquired_is_invalid_record_state(broker, topic):
    await call(broker, 1, share_fetch(topic.topic_id))
    await call(broker, 1, share_fetch(topic.topic_id, member="other"))
    produce(broker, b"a")
    await call(broker, 1, share_fetch(topic.topic_id, epoch=1))
    answer = await call(broker, 1, share_fetch(topic.topic_id, member="other", epoch=1, acks={0: [(0, 0, [1])]}))
    assert partitions_of(answer)[(topic.topic_id, 0)].acknowledge_error_code == ErrorCode.INVALID_RECORD_STATE


async def test_malformed_ack_batches_are_invalid_request(broker, topic):
    await call(broker, 1, share_fetch(topic.topic_id))
    for batches in ([(2, 1, [1])], [(0, 1, [])], [(0, 1, [1, 1, 1])], [(0, 0, [4])], [(0, 0, [-1])]):
        epoch = share_partitions_of(broker).sessions.get(GROUP, MEMBER).epoch
        answer = await call(broker, 1, share_fetch(topic.topic_id, epoch=epoch, acks={0: batches}))
        assert partitions_of(answer)[(topic.topic_id, 0)].acknowledge_error_code == ErrorCode.INVALID_REQUEST


async def test_session_errors(broker, topic):
    assert (await call(broker, 1, share_fetch(topic.topic_id, epoch=3))).decoded.error_code == \
        ErrorCode.SHARE_SESSION_NOT_FOUND
    assert (await call(broker, 1, share_fetch(topic.topic_id, epoch=-1))).decoded.error_code == \
        ErrorCode.SHARE_SESSION_NOT_FOUND
    await call(broker, 1, share_fetch(topic.topic_id))
    assert (await call(broker, 1, share_fetch(topic.topic_id, epoch=5))).decoded.error_code == \
        ErrorCode.INVALID_SHARE_SESSION_EPOCH
    opened_with_acks = await call(broker, 1, share_fetch(topic.topic_id, acks={0: [(0, 0, [1])]}))
    assert opened_with_acks.decoded.error_code == ErrorCode.INVALID_REQUEST
    assert (await call(broker, 1, share_fetch(topic.topic_id, member=""))).decoded.error_code == \
        ErrorCode.INVALID_REQUEST


async def test_session_limit_reached(broker_factory):
    broker = broker_factory(**{"group.share.max.share.sessions": 1, "group.share.max.size": 1})
    topic = broker.create_topic("t", 1)
    assert (await call(broker, 1, share_fetch(topic.topic_id))).decoded.error_code == ErrorCode.NONE
    answer = await call(broker, 1, share_fetch(topic.topic_id, member="second"))
    assert answer.decoded.error_code == ErrorCode.SHARE_SESSION_LIMIT_REACHED


async def test_closing_the_session_releases_acquired_records(broker, topic):
    await call(broker, 1, share_fetch(topic.topic_id))
    produce(broker, b"a", b"b")
    await call(broker, 1, share_fetch(topic.topic_id, epoch=1))
    closed = await call(broker, 1, share_fetch(topic.topic_id, epoch=-1, acks={0: [(0, 0, [1])]}, partitions=()))
    assert closed.decoded.error_code == ErrorCode.NONE
    assert partitions_of(closed)[(topic.topic_id, 0)].acknowledge_error_code == ErrorCode.NONE
    assert share_partitions_of(broker).sessions.get(GROUP, MEMBER) is None
    later = partitions_of(await call(broker, 1, share_fetch(topic.topic_id, member="next")))
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in later[(topic.topic_id, 0)].acquired_records] \
        == [(1, 1, 2)]


async def test_long_poll_is_woken_by_an_append(broker, topic):
    await call(broker, 1, share_fetch(topic.topic_id))
    waiting = asyncio.ensure_future(start(broker, 1, share_fetch(topic.topic_id, epoch=1, max_wait_ms=20_000)))
    await until_waiting(broker)
    assert not waiting.done()
    produce(broker, b"x")
    response = await asyncio.wait_for(waiting, 10)
    assert response.responses[0].partitions[0].acquired_records[0].first_offset == 0


async def until_waiting(broker, timeout_s: float = 10.0) -> None:
    """Until a ShareFetch long poll is registered with the node's manager (it registers before it starts waiting)."""
    manager = share_partitions_of(broker)
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not manager._waiters:  # noqa: SLF001 - the manager's wake-up registry is what the test waits on
        assert asyncio.get_running_loop().time() < deadline, "the ShareFetch never started waiting"
        await asyncio.sleep(0.005)


async def test_long_poll_is_woken_by_a_release(broker, topic):
    await call(broker, 1, share_fetch(topic.topic_id))
    await call(broker, 1, share_fetch(topic.topic_id, member="other"))
    produce(broker, b"x")
    await call(broker, 1, share_fetch(topic.topic_id, epoch=1))
    waiting = asyncio.ensure_future(start(broker, 1, share_fetch(topic.topic_id, member="other", epoch=1,
                                                                 max_wait_ms=20_000)))
    await until_waiting(broker)
    await call(broker, 1, share_fetch(topic.topic_id, epoch=2, acks={0: [(0, 0, [2])]}, max_records=0))
    response = await asyncio.wait_for(waiting, 10)
    assert response.responses[0].partitions[0].acquired_records[0].delivery_count == 2


async def test_record_limit_mode_is_exact_and_batch_optimized_aligns_to_batches(broker, topic):
    await call(broker, 2, share_fetch(topic.topic_id))
    produce(broker, b"a", b"b", b"c")
    exact = partitions_of(await call(broker, 2, share_fetch(topic.topic_id, epoch=1, max_records=2, mode=1)))
    assert [(r.first_offset, r.last_offset) for r in exact[(topic.topic_id, 0)].acquired_records] == [(0, 1)]
    soft = partitions_of(await call(broker, 2, share_fetch(topic.topic_id, member="other", max_records=1)))
    assert [(r.first_offset, r.last_offset) for r in soft[(topic.topic_id, 0)].acquired_records] == [(2, 2)]


async def test_renew_ack_needs_zero_fetch_parameters_and_keeps_the_lock(broker, topic):
    await call(broker, 2, share_fetch(topic.topic_id))
    produce(broker, b"a")
    await call(broker, 2, share_fetch(topic.topic_id, epoch=1))
    bad = await call(broker, 2, share_fetch(topic.topic_id, epoch=2, acks={0: [(0, 0, [4])]}, renew=True))
    assert bad.decoded.error_code == ErrorCode.INVALID_REQUEST
    renewed = await call(broker, 2, share_fetch(topic.topic_id, epoch=2, acks={0: [(0, 0, [4])]}, renew=True,
                                                max_records=0, min_bytes=0, max_bytes=0))
    data = partitions_of(renewed)[(topic.topic_id, 0)]
    assert data.acknowledge_error_code == ErrorCode.NONE and data.acquired_records == []
    sp = share_partitions_of(broker).cached((GROUP, topic.topic_id, 0))
    assert sp.record(0).member_id == MEMBER


async def test_unknown_topic_id_and_not_leader(broker, topic):
    unknown = uuid.uuid4()
    answer = await call(broker, 1, share_fetch(unknown))
    assert partitions_of(answer)[(unknown, 0)].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    other = await call(broker, 1, share_fetch(topic.topic_id, partitions=(7,), member="m7"))
    assert partitions_of(other)[(topic.topic_id, 7)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_state_survives_a_restart(tmp_path):
    from .helpers import make_broker
    broker = make_broker(tmp_path / "d")
    topic = broker.create_topic("t", 1)
    await call(broker, 1, share_fetch(topic.topic_id))
    produce(broker, b"a", b"b", b"c")
    await call(broker, 1, share_fetch(topic.topic_id, epoch=1))
    await call(broker, 1, share_fetch(topic.topic_id, epoch=2, acks={0: [(0, 0, [1]), (1, 1, [3])]},
                                      max_records=0))
    broker.logs.shutdown()
    again = make_broker(tmp_path / "d")
    try:
        data = partitions_of(await call(again, 1, share_fetch(topic.topic_id)))[(topic.topic_id, 0)]
        assert [(r.first_offset, r.last_offset, r.delivery_count) for r in data.acquired_records] == [(2, 2, 2)]
    finally:
        again.logs.shutdown()


async def test_auto_offset_reset_earliest_and_by_duration(broker, topic):
    old = broker.now_ms() - 3_600_000
    broker.get_log("t", 0).append(batch(b"old", timestamp=old), leader_epoch=0, now_ms=broker.now_ms())
    produce(broker, b"new")
    broker.cluster.metadata.group_configs.set("early", {"share.auto.offset.reset": "earliest"})
    broker.cluster.metadata.group_configs.set("recent", {"share.auto.offset.reset": "by_duration:PT10M"})
    early = partitions_of(await call(broker, 1, share_fetch(topic.topic_id, group="early")))
    recent = partitions_of(await call(broker, 1, share_fetch(topic.topic_id, group="recent")))
    assert [(r.first_offset, r.last_offset) for r in early[(topic.topic_id, 0)].acquired_records] == [(0, 1)]
    assert [(r.first_offset, r.last_offset) for r in recent[(topic.topic_id, 0)].acquired_records] == [(1, 1)]


async def test_read_committed_skips_aborted_transactions_and_stops_at_the_lso(broker, topic):
    from .test_fetch_read_committed import ABORT, COMMIT, Txn, plain
    broker.cluster.metadata.group_configs.set(GROUP, {"share.isolation.level": "read_committed",
                                                      "share.auto.offset.reset": "earliest"})
    aborted, committed, open_txn = Txn(broker, 1), Txn(broker, 2), Txn(broker, 3)
    aborted.send(b"x")          # 0
    aborted.end(ABORT)          # 1
    committed.send(b"y")        # 2
    committed.end(COMMIT)       # 3
    plain(broker, b"z")         # 4
    open_txn.send(b"pending")   # 5: the last stable offset
    plain(broker, b"later")     # 6
    data = partitions_of(await call(broker, 1, share_fetch(topic.topic_id)))[(topic.topic_id, 0)]
    assert [(r.first_offset, r.last_offset) for r in data.acquired_records] == [(2, 2), (4, 4)]
    assert [record.value for record in records_of(data.records)] == [b"y", b"z"]
    sp = share_partitions_of(broker).cached((GROUP, topic.topic_id, 0))
    assert sp.start_offset == 2 and sp.next_offset == 5


async def test_a_closed_connection_ends_the_session_and_releases(broker, topic):
    from compatbroker.handlers import HANDLERS

    from .helpers import as_received, context
    gone = asyncio.get_running_loop().create_future()
    ctx = context(broker, 78, 1)
    ctx.client_gone = gone
    await HANDLERS[78].handle(ctx, as_received(78, 1, share_fetch(topic.topic_id)))
    produce(broker, b"a")
    ctx = context(broker, 78, 1)
    ctx.client_gone = gone
    held = await HANDLERS[78].handle(ctx, as_received(78, 1, share_fetch(topic.topic_id, epoch=1)))
    assert held.responses[0].partitions[0].acquired_records[0].first_offset == 0
    gone.set_result(None)
    await asyncio.sleep(0)  # the done callbacks run on the next loop iteration
    assert share_partitions_of(broker).sessions.get(GROUP, MEMBER) is None
    # the group's last session here ended: its share-partition left memory, the release is in its state
    assert share_partitions_of(broker).cached((GROUP, topic.topic_id, 0)) is None
    again = partitions_of(await call(broker, 1, share_fetch(topic.topic_id, member="next")))
    assert [(r.first_offset, r.delivery_count) for r in again[(topic.topic_id, 0)].acquired_records] == [(0, 2)]


async def test_authorization(broker_factory):
    from compatbroker.security.acls import AclOperation, ResourceType

    from .authz_helpers import AUTHORIZER_ON, allow, call_as
    broker = broker_factory(**AUTHORIZER_ON)
    topic = broker.create_topic("t", 1)
    refused = await call_as(broker, 1, share_fetch(topic.topic_id))
    assert refused.decoded.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    allow(broker, AclOperation.READ, ResourceType.GROUP, GROUP)
    no_topic = await call_as(broker, 1, share_fetch(topic.topic_id))
    assert partitions_of(no_topic)[(topic.topic_id, 0)].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    allow(broker, AclOperation.READ, ResourceType.TOPIC, "t")
    allowed = await call_as(broker, 1, share_fetch(topic.topic_id, epoch=1))
    assert partitions_of(allowed)[(topic.topic_id, 0)].error_code == ErrorCode.NONE


async def test_version_boundaries(broker, topic):
    from compatbroker.handlers import share_fetch as module
    assert (module.MIN_VERSION, module.MAX_VERSION) == (1, 2)  # v0 was Kafka 4.0's early access, gone from 4.1
    await call(broker, 1, share_fetch(topic.topic_id))
    produce(broker, b"a", b"b", b"c")
    # v1 has no ShareAcquireMode: MaxRecords is the soft limit of batch_optimized, aligned to the log batch
    v1 = partitions_of(await call(broker, 1, share_fetch(topic.topic_id, epoch=1, max_records=1)))
    assert [(r.first_offset, r.last_offset) for r in v1[(topic.topic_id, 0)].acquired_records] == [(0, 2)]
    # v1 has no IsRenewAck either: a RENEW type there is malformed
    renew_v1 = await call(broker, 1, share_fetch(topic.topic_id, epoch=2, acks={0: [(0, 0, [4])]}))
    assert partitions_of(renew_v1)[(topic.topic_id, 0)].acknowledge_error_code == ErrorCode.INVALID_REQUEST


async def test_records_are_read_a_chunk_at_a_time_and_large_batches_still_come_whole(broker):
    topic = broker.create_topic("t", 2, {"max.message.bytes": "2000000"})
    await call(broker, 1, share_fetch(topic.topic_id, partitions=(0, 1)))
    produce(broker, b"small", partition=0)
    big = b"x" * 1_500_000  # larger than the largest read chunk
    for _ in range(3):
        produce(broker, big, partition=1)
    answer = partitions_of(await call(broker, 1, share_fetch(topic.topic_id, partitions=(0, 1), epoch=1,
                                                             max_records=2)))
    assert [(r.first_offset, r.last_offset) for r in answer[(topic.topic_id, 0)].acquired_records] == [(0, 0)]
    second = answer[(topic.topic_id, 1)]
    assert [(r.first_offset, r.last_offset) for r in second.acquired_records] == [(0, 0)]
    assert [record.value for record in records_of(second.records)] == [big]


async def test_shutdown_answers_a_long_poll_at_once(broker, topic):
    await call(broker, 1, share_fetch(topic.topic_id))
    waiting = asyncio.ensure_future(start(broker, 1, share_fetch(topic.topic_id, epoch=1, max_wait_ms=25_000)))
    await asyncio.sleep(0)
    assert not waiting.done()
    broker.begin_shutdown()
    response = await asyncio.wait_for(waiting, 10)  # not the 25 s asked, nor a busy loop until then
    assert response.error_code == ErrorCode.NONE


async def test_batches_larger_than_the_first_read_chunk_still_fill_max_records(broker, topic):
    await call(broker, 1, share_fetch(topic.topic_id))
    for index in range(4):
        produce(broker, bytes([index]) * 50_000)  # each batch most of the first 64 KiB chunk
    data = partitions_of(await call(broker, 1, share_fetch(topic.topic_id, epoch=1, max_records=3)))
    assert [(r.first_offset, r.last_offset) for r in data[(topic.topic_id, 0)].acquired_records] == [(0, 2)]


async def test_an_accept_wakes_a_fetch_waiting_at_the_in_flight_limit(broker_factory):
    broker = broker_factory(**{"group.share.partition.max.record.locks": 100})
    topic = broker.create_topic("t", 1)
    await call(broker, 1, share_fetch(topic.topic_id))
    await call(broker, 1, share_fetch(topic.topic_id, member="other"))
    produce(broker, *[b"r"] * 100)
    produce(broker, b"more")
    await call(broker, 1, share_fetch(topic.topic_id, epoch=1))  # takes 0-99: the window is full
    waiting = asyncio.ensure_future(start(broker, 1, share_fetch(topic.topic_id, member="other", epoch=1,
                                                                 max_wait_ms=20_000)))
    await asyncio.sleep(0)
    assert not waiting.done()
    await call(broker, 1, share_fetch(topic.topic_id, epoch=2, acks={0: [(0, 99, [1])]}, max_records=0))
    response = await asyncio.wait_for(waiting, 10)
    assert [(r.first_offset, r.last_offset) for r in response.responses[0].partitions[0].acquired_records] \
        == [(100, 100)]


async def test_a_deleted_topic_answers_unknown_topic_id_and_its_share_partitions_go(broker, topic):
    await call(broker, 1, share_fetch(topic.topic_id))
    assert share_partitions_of(broker).cached((GROUP, topic.topic_id, 0)) is not None
    await broker.delete_topic("t")
    answer = await call(broker, 1, share_fetch(topic.topic_id, epoch=1))
    assert partitions_of(answer)[(topic.topic_id, 0)].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    assert share_partitions_of(broker).cached((GROUP, topic.topic_id, 0)) is None
