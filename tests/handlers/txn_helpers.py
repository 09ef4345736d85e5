"""Transactions through the handlers, as a client drives them: InitProducerId, AddPartitionsToTxn, Produce and
EndTxn each go through the codec at the version asked (see helpers.call)."""
from __future__ import annotations

import asyncio
import time

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import (AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest,
                                            ProduceRequest)
from compatbroker.protocol.records.batch import build_batch

from tests.coordinator.transactions_support import loaded  # noqa: F401 - the started coordinator, for the tests

from .helpers import call

TIMEOUT_MS = 60_000
Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic


async def init(broker, transactional_id: str, *, version: int = 4, bound_s: float = 20.0) -> tuple[int, int]:
    """InitProducerId, retried as a client does while the coordinator answers CONCURRENT_TRANSACTIONS (it is
    aborting the previous producer's transaction), within a generous bound."""
    deadline = time.monotonic() + bound_s
    while True:
        answer = await call(broker, version, InitProducerIdRequest(transactional_id=transactional_id,
                                                                    transaction_timeout_ms=TIMEOUT_MS))
        if answer.decoded.error_code != ErrorCode.CONCURRENT_TRANSACTIONS or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.01)
    assert answer.decoded.error_code == ErrorCode.NONE, answer.decoded
    return answer.decoded.producer_id, answer.decoded.producer_epoch


def topics(partitions) -> list:
    by_topic: dict[str, list[int]] = {}
    for topic, index in partitions:
        by_topic.setdefault(topic, []).append(index)
    return [Topic(name=name, partitions=indexes) for name, indexes in by_topic.items()]


async def add_partitions(broker, transactional_id: str, producer: tuple[int, int], partitions, *,
                         version: int = 3) -> dict[tuple[str, int], int]:
    """AddPartitionsToTxn v0-3: error code per (topic, partition)."""
    request = AddPartitionsToTxnRequest(v3_and_below_transactional_id=transactional_id,
                                        v3_and_below_producer_id=producer[0],
                                        v3_and_below_producer_epoch=producer[1],
                                        v3_and_below_topics=topics(partitions))
    answer = await call(broker, version, request)
    return {(topic.name, result.partition_index): result.partition_error_code
            for topic in answer.decoded.results_by_topic_v3_and_below for result in topic.results_by_partition}


def txn_batch(producer: tuple[int, int], sequence: int, *values: bytes) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([(b"k", value, (), now) for value in values], producer_id=producer[0],
                       producer_epoch=producer[1], base_sequence=sequence, is_transactional=True)


def produce_request(transactional_id: str | None, topic: str, partitions: dict[int, bytes], *,
                    acks: int = -1) -> ProduceRequest:
    data = ProduceRequest.TopicProduceData(name=topic, partition_data=[
        ProduceRequest.PartitionProduceData(index=index, records=records) for index, records in partitions.items()])
    return ProduceRequest(transactional_id=transactional_id, acks=acks, timeout_ms=1000, topic_data=[data])


async def produce(broker, transactional_id: str | None, topic: str, partition: int, records: bytes, *,
                  version: int = 9):
    """The one partition's answer."""
    answer = await call(broker, version, produce_request(transactional_id, topic, {partition: records}))
    return answer.decoded.responses[0].partition_responses[0]


async def end(broker, transactional_id: str, producer: tuple[int, int], commit: bool, *, version: int = 3):
    answer = await call(broker, version, EndTxnRequest(transactional_id=transactional_id, producer_id=producer[0],
                                                       producer_epoch=producer[1], committed=commit))
    return answer.decoded
