"""ShareAcknowledge (79) v1-2 against a real broker: session rules, acknowledgement answers per partition, lock
expiry and the delivery count limit."""
from __future__ import annotations

import asyncio
import uuid

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import ShareAcknowledgeRequest
from compatbroker.share import share_partitions_of
from compatbroker.share.partition import RecordState, StateBatch
from compatbroker.share.state_store import state_store_of

from .helpers import call
from .test_share_fetch import GROUP, MEMBER, partitions_of, produce, share_fetch


def share_ack(topic_id, acks, *, epoch, member=MEMBER, renew=False) -> ShareAcknowledgeRequest:
    """`acks`: {partition: [(first, last, [types])]}."""
    return ShareAcknowledgeRequest(
        group_id=GROUP, member_id=member, share_session_epoch=epoch, is_renew_ack=renew,
        topics=[ShareAcknowledgeRequest.AcknowledgeTopic(topic_id=topic_id, partitions=[
            ShareAcknowledgeRequest.AcknowledgePartition(partition_index=p, acknowledgement_batches=[
                ShareAcknowledgeRequest.AcknowledgementBatch(first_offset=first, last_offset=last,
                                                             acknowledge_types=list(types))
                for first, last, types in batches]) for p, batches in acks.items()])])


def ack_errors(answer):
    return {(t.topic_id, p.partition_index): p.error_code for t in answer.decoded.responses for p in t.partitions}


async def acquired_two(broker):
    topic = broker.create_topic("t", 1)
    await call(broker, 1, share_fetch(topic.topic_id))
    produce(broker, b"a", b"b")
    await call(broker, 1, share_fetch(topic.topic_id, epoch=1))
    return topic


async def test_accept_and_epoch_rules(broker):
    topic = await acquired_two(broker)
    opening = await call(broker, 1, share_ack(topic.topic_id, {0: [(0, 1, [1])]}, epoch=0))
    assert opening.decoded.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    stale = await call(broker, 1, share_ack(topic.topic_id, {0: [(0, 1, [1])]}, epoch=1))
    assert stale.decoded.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    answer = await call(broker, 1, share_ack(topic.topic_id, {0: [(0, 1, [1])]}, epoch=2))
    assert answer.decoded.error_code == ErrorCode.NONE
    assert ack_errors(answer) == {(topic.topic_id, 0): ErrorCode.NONE}
    assert share_partitions_of(broker).sessions.get(GROUP, MEMBER).epoch == 3
    assert share_partitions_of(broker).cached((GROUP, topic.topic_id, 0)).start_offset == 2
    missing = await call(broker, 1, share_ack(topic.topic_id, {0: [(0, 1, [1])]}, epoch=1, member="nobody"))
    assert missing.decoded.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND


async def test_partition_errors(broker):
    topic = await acquired_two(broker)
    unknown = uuid.uuid4()
    answer = await call(broker, 1, share_ack(unknown, {0: [(0, 0, [1])]}, epoch=2))
    assert ack_errors(answer) == {(unknown, 0): ErrorCode.UNKNOWN_TOPIC_ID}
    answer = await call(broker, 1, share_ack(topic.topic_id, {0: [(1, 1, [1]), (0, 0, [1])], 3: [(0, 0, [1])]},
                                             epoch=3))
    assert ack_errors(answer) == {(topic.topic_id, 0): ErrorCode.INVALID_REQUEST,
                                  (topic.topic_id, 3): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    past = await call(broker, 1, share_ack(topic.topic_id, {0: [(1, 5, [1])]}, epoch=4))
    assert ack_errors(past) == {(topic.topic_id, 0): ErrorCode.INVALID_REQUEST}
    renew_v1 = await call(broker, 1, share_ack(topic.topic_id, {0: [(0, 0, [4])]}, epoch=5))
    assert ack_errors(renew_v1) == {(topic.topic_id, 0): ErrorCode.INVALID_REQUEST}
    renew_v2 = await call(broker, 2, share_ack(topic.topic_id, {0: [(0, 0, [4])]}, epoch=6, renew=True))
    assert ack_errors(renew_v2) == {(topic.topic_id, 0): ErrorCode.NONE}
    assert renew_v2.decoded.acquisition_lock_timeout_ms == 30_000


async def test_final_epoch_closes_the_session_and_releases(broker):
    topic = await acquired_two(broker)
    answer = await call(broker, 1, share_ack(topic.topic_id, {0: [(0, 0, [1])]}, epoch=-1))
    assert ack_errors(answer) == {(topic.topic_id, 0): ErrorCode.NONE}
    manager = share_partitions_of(broker)
    assert manager.sessions.get(GROUP, MEMBER) is None
    assert manager.cached((GROUP, topic.topic_id, 0)) is None  # the group's last session here: it left memory
    state = await state_store_of(broker).read((GROUP, topic.topic_id, 0))
    assert state.start_offset == 1 and state.batches == (StateBatch(1, 1, RecordState.AVAILABLE, 1),)
    next_member = partitions_of(await call(broker, 1, share_fetch(topic.topic_id, member="next")))
    assert [(r.first_offset, r.last_offset, r.delivery_count)
            for r in next_member[(topic.topic_id, 0)].acquired_records] == [(1, 1, 2)]
    again = await call(broker, 1, share_ack(topic.topic_id, {0: [(1, 1, [1])]}, epoch=-1))
    assert again.decoded.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND


async def test_locks_expire_and_the_delivery_count_limit_archives(broker_factory):
    broker = broker_factory(**{"group.share.record.lock.duration.ms": 1000,
                               "group.share.min.record.lock.duration.ms": 1000,
                               "group.share.delivery.count.limit": 2})
    topic = broker.create_topic("t", 1)
    await call(broker, 1, share_fetch(topic.topic_id))
    produce(broker, b"a")
    counts = []
    for epoch in (1, 2):
        answer = await call(broker, 1, share_fetch(topic.topic_id, epoch=epoch, max_wait_ms=10_000))
        counts.append([r.delivery_count for r in partitions_of(answer)[(topic.topic_id, 0)].acquired_records])
    assert counts == [[1], [2]]  # redelivered once its lock expired
    share_partition = share_partitions_of(broker).cached((GROUP, topic.topic_id, 0))
    for _ in range(200):  # the second lock expires: at the limit the record is archived and passed
        if share_partition.start_offset == 1:
            break
        await asyncio.sleep(0.05)
    assert share_partition.start_offset == 1
    last = await call(broker, 1, share_fetch(topic.topic_id, epoch=3))
    assert (topic.topic_id, 0) not in partitions_of(last)
