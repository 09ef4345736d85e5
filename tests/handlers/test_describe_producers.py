"""DescribeProducers through the codec: the producer state of each asked partition, and Kafka's errors."""
from __future__ import annotations

import time

import pytest

from compatbroker import topic_names
from compatbroker.handlers import describe_producers
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import DescribeProducersRequest, ProduceRequest
from compatbroker.protocol.records.batch import build_batch

from .helpers import batch, call

TopicRequest = DescribeProducersRequest.TopicRequest


async def describe(broker, *topics: tuple[str, list[int]]):
    request = DescribeProducersRequest(topics=[TopicRequest(name=name, partition_indexes=indexes)
                                               for name, indexes in topics])
    return (await call(broker, 0, request)).decoded


async def produce(broker, topic: str, partition: int, records: bytes) -> None:
    data = ProduceRequest.TopicProduceData(name=topic, partition_data=[
        ProduceRequest.PartitionProduceData(index=partition, records=records)])
    answer = await call(broker, 9, ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[data]))
    assert answer.decoded.responses[0].partition_responses[0].error_code == 0


def idempotent(producer_id: int, epoch: int, sequence: int, count: int, timestamp: int) -> bytes:
    records = [(b"k", b"v%d" % n, (), timestamp + n) for n in range(count)]
    return build_batch(records, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence)


def test_declares_version_0():
    assert (describe_producers.API_KEY, describe_producers.MIN_VERSION, describe_producers.MAX_VERSION) == (61, 0, 0)


async def test_active_producers_of_a_partition_in_producer_id_order(broker):
    broker.create_topic("t", 2)
    now = int(time.time() * 1000)
    await produce(broker, "t", 1, idempotent(7, 2, 0, 3, now))
    await produce(broker, "t", 1, idempotent(7, 2, 3, 2, now + 10))
    await produce(broker, "t", 1, idempotent(3, 0, 0, 1, now + 20))
    await produce(broker, "t", 1, batch(b"plain"))  # no producer id: not tracked
    answer = await describe(broker, ("t", [1, 0]))
    assert answer.throttle_time_ms == 0
    [topic] = answer.topics
    assert topic.name == "t"
    busy, idle = topic.partitions
    assert (busy.partition_index, busy.error_code, busy.error_message) == (1, 0, None)
    assert [(p.producer_id, p.producer_epoch, p.last_sequence, p.last_timestamp, p.coordinator_epoch,
             p.current_txn_start_offset) for p in busy.active_producers] == [
        (3, 0, 0, now + 20, -1, -1),
        (7, 2, 4, now + 11, -1, -1),  # the last batch's last sequence and largest timestamp
    ]
    assert (idle.partition_index, idle.error_code, idle.active_producers) == (0, 0, [])


async def test_unknown_topic_answers_each_asked_partition(broker):
    answer = await describe(broker, ("missing", [0, 3]))
    partitions = answer.topics[0].partitions
    assert [(p.partition_index, p.error_code, p.error_message) for p in partitions] == [
        (0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.message),
        (3, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.message)]
    assert all(p.active_producers == [] for p in partitions)


async def test_partition_the_topic_lacks_has_no_message(broker):
    broker.create_topic("t", 1)
    [bad] = (await describe(broker, ("t", [5]))).topics[0].partitions
    assert (bad.partition_index, bad.error_code, bad.error_message) == (5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)


async def test_illegal_topic_name_says_why(broker):
    [bad] = (await describe(broker, ("a/b", [0]))).topics[0].partitions
    with pytest.raises(topic_names.InvalidTopicName) as refused:
        topic_names.validate("a/b")
    assert (bad.error_code, bad.error_message) == (ErrorCode.INVALID_TOPIC_EXCEPTION, str(refused.value))


async def test_topics_answer_in_the_order_asked(broker):
    broker.create_topic("b", 1)
    broker.create_topic("a", 1)
    answer = await describe(broker, ("b", [0]), ("nope", [0]), ("a", [0]))
    assert [(t.name, t.partitions[0].error_code) for t in answer.topics] == [
        ("b", 0), ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), ("a", 0)]


async def test_nothing_asked_nothing_answered(broker):
    assert (await describe(broker)).topics == []


async def test_an_expired_producer_is_no_longer_described(broker):
    """What the broker's periodic job does every producer.id.expiration.check.interval.ms: a producer idle for
    producer.id.expiration.ms (counted from its last batch's timestamp, as in Kafka) drops out."""
    broker.create_topic("t", 1)
    now = int(time.time() * 1000)
    await produce(broker, "t", 0, idempotent(7, 0, 0, 1, now - 5000))
    await produce(broker, "t", 0, idempotent(8, 0, 0, 1, now))
    assert broker.get_log("t", 0).expire_producers(now, producer_id_expiration_ms=5000) == 1
    [partition] = (await describe(broker, ("t", [0]))).topics[0].partitions
    assert [p.producer_id for p in partition.active_producers] == [8]
