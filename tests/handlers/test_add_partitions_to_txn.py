"""AddPartitionsToTxn through the codec: the single transaction of v0-3, the batched and verify-only transactions
of v4+, and each error at its version boundary."""
from __future__ import annotations

import pytest

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import AddPartitionsToTxnRequest

from .helpers import call
from .txn_helpers import add_partitions, init, loaded, topics

Transaction = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction


async def _producer(broker, transactional_id: str = "tx"):
    if broker.topic("t") is None:
        broker.create_topic("t", 3)
    await loaded(broker)
    return await init(broker, transactional_id)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
async def test_partitions_join_the_transaction(broker, version):
    producer = await _producer(broker)
    asked = [("t", 2), ("t", 0), ("t", 2)]  # a repeat is answered once
    assert await add_partitions(broker, "tx", producer, asked, version=version) == {("t", 2): 0, ("t", 0): 0}
    described = (await loaded(broker)).describe("tx")
    assert (described.state, described.partitions) == ("Ongoing", [("t", 0), ("t", 2)])


@pytest.mark.parametrize("version", [0, 3])
async def test_an_unknown_partition_fails_the_whole_transaction(broker, version):
    producer = await _producer(broker)
    answer = await add_partitions(broker, "tx", producer, [("t", 0), ("t", 7), ("nope", 0)], version=version)
    assert answer == {("t", 0): ErrorCode.OPERATION_NOT_ATTEMPTED, ("t", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert (await loaded(broker)).describe("tx").partitions == []


async def test_a_client_may_not_add_an_internal_topic(broker):
    producer = await _producer(broker)
    broker.create_topic("__consumer_offsets", 1)
    answer = await add_partitions(broker, "tx", producer, [("__consumer_offsets", 0), ("t", 1)])
    assert answer == {("__consumer_offsets", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                      ("t", 1): ErrorCode.OPERATION_NOT_ATTEMPTED}


@pytest.mark.parametrize("version, code", [(0, ErrorCode.INVALID_PRODUCER_EPOCH), (1, ErrorCode.INVALID_PRODUCER_EPOCH),
                                           (2, ErrorCode.PRODUCER_FENCED), (3, ErrorCode.PRODUCER_FENCED)])
async def test_a_fenced_producer_gets_the_code_its_version_knows(broker, version, code):
    producer = await _producer(broker)
    await init(broker, "tx")
    assert await add_partitions(broker, "tx", producer, [("t", 0), ("t", 1)], version=version) == {
        ("t", 0): code, ("t", 1): code}


async def test_coordinator_errors_are_spread_over_the_partitions(broker, monkeypatch):
    await _producer(broker)
    assert await add_partitions(broker, "nobody", (999, 0), [("t", 0)]) == {
        ("t", 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    assert await add_partitions(broker, "", (1, 0), [("t", 0)]) == {("t", 0): ErrorCode.INVALID_REQUEST}
    monkeypatch.setattr(await loaded(broker), "loaded", False)
    assert await add_partitions(broker, "tx", (1, 0), [("t", 0), ("t", 1)]) == {
        ("t", 0): ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ("t", 1): ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}


@pytest.mark.parametrize("version", [4, 5])
async def test_batched_transactions_add_or_verify_each_and_answer_in_order(broker, version):
    first = await _producer(broker, "first")
    second = await _producer(broker, "second")
    assert await add_partitions(broker, "second", second, [("t", 0)]) == {("t", 0): 0}
    request = AddPartitionsToTxnRequest(transactions=[
        Transaction(transactional_id="first", producer_id=first[0], producer_epoch=first[1], verify_only=False,
                    topics=topics([("t", 1), ("t", 9)])),
        Transaction(transactional_id="second", producer_id=second[0], producer_epoch=second[1], verify_only=True,
                    topics=topics([("t", 0), ("t", 2)])),
        Transaction(transactional_id="first", producer_id=first[0], producer_epoch=first[1], verify_only=False,
                    topics=topics([("t", 1)]))])
    answer = (await call(broker, version, request)).decoded
    assert answer.error_code == ErrorCode.NONE
    results = [(entry.transactional_id, {(topic.name, p.partition_index): p.partition_error_code
                                         for topic in entry.topic_results for p in topic.results_by_partition})
               for entry in answer.results_by_transaction]
    assert results == [
        ("first", {("t", 1): ErrorCode.OPERATION_NOT_ATTEMPTED, ("t", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}),
        ("second", {("t", 0): ErrorCode.NONE, ("t", 2): ErrorCode.TRANSACTION_ABORTABLE}),  # verified, not added
        ("first", {("t", 1): ErrorCode.NONE})]
    coordinator = await loaded(broker)
    assert coordinator.describe("second").partitions == [("t", 0)]
    assert coordinator.describe("first").partitions == [("t", 1)]
    # Kafka: an add of v4+ is one of transactions v2 (transactionVersionForAddPartitionsToTxn); v0-3 of v1
    assert coordinator.metadata("first").client_transaction_version == 2
    assert coordinator.metadata("second").client_transaction_version == 0


async def test_v4_from_a_client_is_served_and_may_name_internal_topics(broker):
    """v4+ is meant for brokers (Kafka authorizes CLUSTER_ACTION); without an authorizer anyone is served, and
    internal topics are not filtered out as they are for v0-3."""
    producer = await _producer(broker)
    broker.create_topic("__consumer_offsets", 1)
    request = AddPartitionsToTxnRequest(transactions=[Transaction(
        transactional_id="tx", producer_id=producer[0], producer_epoch=producer[1], topics=topics(
            [("__consumer_offsets", 0)]))])
    answer = (await call(broker, 4, request)).decoded
    assert answer.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code == 0
