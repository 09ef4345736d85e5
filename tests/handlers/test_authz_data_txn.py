"""Authorization of the transaction APIs with Kafka's StandardAuthorizer on (KafkaApis): InitProducerId,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, WriteTxnMarkers, DescribeTransactions and
ListTransactions. Each refused request is checked to leave the coordinator's state and the logs as they were.

Set-up steps run as the super user (helpers.call); the requests under test are sent as ALICE (call_as)."""
from __future__ import annotations

import pytest

from compatbroker.coordinator import coordinator_of
from compatbroker.coordinator.offsets import partition_for_group
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import (AddOffsetsToTxnRequest, AddPartitionsToTxnRequest,
                                            DescribeTransactionsRequest, EndTxnRequest, InitProducerIdRequest,
                                            ListTransactionsRequest, TxnOffsetCommitRequest, WriteTxnMarkersRequest)
from compatbroker.security.acls import CLUSTER_NAME, AclOperation, PatternType, ResourceType
from compatbroker.topic_names import GROUP_METADATA_TOPIC
from tests.coordinator.transactions_support import markers

from .authz_helpers import AUTHORIZER_ON, allow, call_as, deny
from .test_write_txn_markers import marker, results
from .txn_helpers import add_partitions, init, loaded, produce, topics, txn_batch

Op = AclOperation
TOPIC, GROUP, CLUSTER, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
E = ErrorCode


@pytest.fixture
def secured(broker_factory):
    """Authorizer on, topics "open" and "secret" (2 partitions). Tests start with `await loaded(secured)`: the
    transaction coordinator, started (fixtures cannot await)."""
    broker = broker_factory(**AUTHORIZER_ON)
    broker.create_topic("open", 2)
    broker.create_topic("secret", 2)
    return broker


async def open_transaction(broker, transactional_id: str = "tx") -> tuple[int, int]:
    """An ongoing transaction with one record in open-0, begun by the super user."""
    producer = await init(broker, transactional_id)
    assert await add_partitions(broker, transactional_id, producer, [("open", 0)]) == {("open", 0): E.NONE}
    assert (await produce(broker, transactional_id, "open", 0, txn_batch(producer, 0, b"a"))).error_code == E.NONE
    return producer


def state_of(broker, transactional_id: str = "tx"):
    """The coordinator's view of the id (None when it does not know it)."""
    from compatbroker.coordinator.transactions import transactions_of
    return transactions_of(broker).describe(transactional_id)


# --- InitProducerId -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 3, 5])
async def test_init_producer_id_needs_write_on_the_transactional_id(secured, version):
    await loaded(secured)
    request = InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60_000)
    answer = (await call_as(secured, version, request)).decoded
    assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                                                               -1, -1)
    assert state_of(secured) is None  # no producer id handed out, no state written
    allow(secured, Op.WRITE, TXN, "tx")
    answer = (await call_as(secured, version, request)).decoded
    assert answer.error_code == E.NONE and answer.producer_id >= 0
    assert state_of(secured).producer_id == answer.producer_id


async def test_init_producer_id_checks_authorization_before_the_empty_id(secured):
    await loaded(secured)
    answer = (await call_as(secured, 4, InitProducerIdRequest(transactional_id="", transaction_timeout_ms=1000)))
    assert answer.decoded.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


async def test_an_idempotent_producer_needs_idempotent_write_or_write_on_some_topic(secured):
    await loaded(secured)
    request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000)
    answer = (await call_as(secured, 4, request)).decoded
    assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (E.CLUSTER_AUTHORIZATION_FAILED, -1, -1)

    allow(secured, Op.WRITE, TOPIC, "logs-", pattern=PatternType.PREFIXED)  # any topic will do
    assert (await call_as(secured, 4, request)).decoded.error_code == E.NONE
    deny(secured, Op.WRITE, TOPIC, "log", pattern=PatternType.PREFIXED)  # a shorter DENY prefix cancels it
    assert (await call_as(secured, 4, request)).decoded.error_code == E.CLUSTER_AUTHORIZATION_FAILED
    allow(secured, Op.IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME)
    assert (await call_as(secured, 4, request)).decoded.error_code == E.NONE


# --- AddPartitionsToTxn ---------------------------------------------------------------------------------------------

def add_partitions_v3(producer, partitions, transactional_id: str = "tx") -> AddPartitionsToTxnRequest:
    return AddPartitionsToTxnRequest(v3_and_below_transactional_id=transactional_id,
                                     v3_and_below_producer_id=producer[0], v3_and_below_producer_epoch=producer[1],
                                     v3_and_below_topics=topics(partitions))


def v3_codes(answer) -> dict[tuple[str, int], int]:
    return {(topic.name, result.partition_index): result.partition_error_code
            for topic in answer.decoded.results_by_topic_v3_and_below for result in topic.results_by_partition}


async def test_add_partitions_needs_write_on_the_transactional_id_then_on_each_topic(secured):
    await loaded(secured)
    producer = await init(secured, "tx")
    wanted = [("open", 0), ("open", 1), ("secret", 0)]
    answer = await call_as(secured, 3, add_partitions_v3(producer, wanted))
    assert v3_codes(answer) == dict.fromkeys(wanted, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)

    allow(secured, Op.WRITE, TXN, "tx")
    allow(secured, Op.WRITE, TOPIC, "open")
    answer = await call_as(secured, 3, add_partitions_v3(producer, wanted))
    assert v3_codes(answer) == {("open", 0): E.OPERATION_NOT_ATTEMPTED, ("open", 1): E.OPERATION_NOT_ATTEMPTED,
                                ("secret", 0): E.TOPIC_AUTHORIZATION_FAILED}
    assert state_of(secured).partitions == []  # nothing added

    answer = await call_as(secured, 3, add_partitions_v3(producer, [("open", 0), ("open", 1)]))
    assert v3_codes(answer) == {("open", 0): E.NONE, ("open", 1): E.NONE}
    assert state_of(secured).partitions == [("open", 0), ("open", 1)]


async def test_add_partitions_v4_is_for_brokers_with_cluster_action(secured):
    await loaded(secured)
    producer = await open_transaction(secured)
    Transaction = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
    request = AddPartitionsToTxnRequest(transactions=[Transaction(
        transactional_id="tx", producer_id=producer[0], producer_epoch=producer[1], verify_only=True,
        topics=topics([("open", 0)]))])
    allow(secured, Op.WRITE, TXN, "tx")  # a client's rights do not make it a broker
    answer = (await call_as(secured, 4, request)).decoded
    assert (answer.error_code, answer.results_by_transaction) == (E.CLUSTER_AUTHORIZATION_FAILED, [])
    allow(secured, Op.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)
    answer = (await call_as(secured, 4, request)).decoded
    assert answer.error_code == E.NONE
    [result] = answer.results_by_transaction
    assert [(t.name, [r.partition_error_code for r in t.results_by_partition]) for t in result.topic_results] == [
        ("open", [E.NONE])]


# --- AddOffsetsToTxn ------------------------------------------------------------------------------------------------

async def test_add_offsets_needs_write_on_the_transactional_id_and_read_on_the_group(secured):
    await loaded(secured)
    producer = await init(secured, "tx")
    request = AddOffsetsToTxnRequest(transactional_id="tx", producer_id=producer[0], producer_epoch=producer[1],
                                     group_id="g")
    assert (await call_as(secured, 3, request)).decoded.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    allow(secured, Op.WRITE, TXN, "tx")
    assert (await call_as(secured, 3, request)).decoded.error_code == E.GROUP_AUTHORIZATION_FAILED
    assert state_of(secured).partitions == []
    allow(secured, Op.READ, GROUP, "g")
    assert (await call_as(secured, 3, request)).decoded.error_code == E.NONE
    assert [topic for topic, _ in state_of(secured).partitions] == [GROUP_METADATA_TOPIC]


# --- EndTxn ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [1, 5])
async def test_end_txn_needs_write_on_the_transactional_id(secured, version):
    await loaded(secured)
    producer = await open_transaction(secured)
    request = EndTxnRequest(transactional_id="tx", producer_id=producer[0], producer_epoch=producer[1], committed=True)
    answer = (await call_as(secured, version, request)).decoded
    assert answer.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if version >= 5:
        assert (answer.producer_id, answer.producer_epoch) == (-1, -1)
    assert state_of(secured).state == "Ongoing" and markers(secured, "open", 0) == []
    allow(secured, Op.WRITE, TXN, "tx")
    assert (await call_as(secured, version, request)).decoded.error_code == E.NONE
    assert [kind for _, _, kind, _ in markers(secured, "open", 0)] == ["COMMIT"]


# --- TxnOffsetCommit ------------------------------------------------------------------------------------------------

def txn_offset_commit(producer, *names, group: str = "g") -> TxnOffsetCommitRequest:
    Topic = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    Partition = TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition
    return TxnOffsetCommitRequest(transactional_id="tx", group_id=group, producer_id=producer[0],
                                  producer_epoch=producer[1], topics=[
                                      Topic(name=name, partitions=[Partition(partition_index=0, committed_offset=1)])
                                      for name in names])


def commit_codes(answer) -> dict[str, int]:
    return {topic.name: topic.partitions[0].error_code for topic in answer.decoded.topics}


def offsets_log_end(broker, group: str = "g") -> int:
    log = broker.get_log(GROUP_METADATA_TOPIC, partition_for_group(group, broker.config.offsets_topic_num_partitions))
    return 0 if log is None else log.log_end_offset


@pytest.mark.parametrize("version", [3, 5])
async def test_txn_offset_commit_needs_write_on_the_transactional_id_then_read_on_the_group(secured, version):
    await loaded(secured)
    producer = await init(secured, "tx")
    request = txn_offset_commit(producer, "open", "secret")
    before = offsets_log_end(secured)
    answer = await call_as(secured, version, request)
    assert commit_codes(answer) == dict.fromkeys(["open", "secret"], E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    allow(secured, Op.WRITE, TXN, "tx")
    answer = await call_as(secured, version, request)
    assert commit_codes(answer) == dict.fromkeys(["open", "secret"], E.GROUP_AUTHORIZATION_FAILED)
    assert state_of(secured).partitions == []  # v5 would have added the group's partition to the transaction
    assert offsets_log_end(secured) == before


async def test_txn_offset_commit_needs_read_on_each_topic(secured):
    await loaded(secured)
    await coordinator_of(secured).start()  # the group coordinator, with __consumer_offsets loaded
    producer = await init(secured, "tx")
    allow(secured, Op.WRITE, TXN, "tx")
    allow(secured, Op.READ, GROUP, "g")
    allow(secured, Op.READ, TOPIC, "open")
    answer = await call_as(secured, 5, txn_offset_commit(producer, "open", "secret", "missing"))
    assert commit_codes(answer) == {"open": E.NONE, "secret": E.TOPIC_AUTHORIZATION_FAILED,
                                    "missing": E.TOPIC_AUTHORIZATION_FAILED}


async def test_txn_offset_commit_of_only_refused_topics_stores_nothing(secured):
    await loaded(secured)
    producer = await init(secured, "tx")
    allow(secured, Op.WRITE, TXN, "tx")
    allow(secured, Op.READ, GROUP, "g")
    before = offsets_log_end(secured)
    answer = await call_as(secured, 5, txn_offset_commit(producer, "secret"))
    assert commit_codes(answer) == {"secret": E.TOPIC_AUTHORIZATION_FAILED}
    assert state_of(secured).partitions == [] and offsets_log_end(secured) == before


# --- WriteTxnMarkers ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("operation", [Op.CLUSTER_ACTION, Op.ALTER])
async def test_write_txn_markers_needs_cluster_action_or_alter(secured, operation):
    await loaded(secured)
    producer = await open_transaction(secured)
    request = WriteTxnMarkersRequest(markers=[marker(producer, True, {"open": [0], "nope": [0]})])
    allow(secured, Op.ALL, TOPIC, "*")  # topic rights do not count
    answer = (await call_as(secured, 1, request)).decoded
    assert results(answer) == [(producer[0], {("open", 0): E.CLUSTER_AUTHORIZATION_FAILED,
                                              ("nope", 0): E.CLUSTER_AUTHORIZATION_FAILED})]
    assert markers(secured, "open", 0) == []  # nothing written
    allow(secured, operation, CLUSTER, CLUSTER_NAME)
    answer = (await call_as(secured, 1, request)).decoded
    assert results(answer) == [(producer[0], {("open", 0): E.NONE, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION})]
    assert [kind for _, _, kind, _ in markers(secured, "open", 0)] == ["COMMIT"]


# --- DescribeTransactions and ListTransactions ----------------------------------------------------------------------

async def test_describe_transactions_needs_describe_on_each_id_and_hides_undescribable_topics(secured):
    await loaded(secured)
    producer = await open_transaction(secured)
    assert await add_partitions(secured, "tx", producer, [("secret", 1)]) == {("secret", 1): E.NONE}
    request = DescribeTransactionsRequest(transactional_ids=["tx", "unknown", ""])
    answer = (await call_as(secured, 0, request)).decoded
    assert [(state.transactional_id, state.error_code) for state in answer.transaction_states] == [
        ("tx", E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), ("unknown", E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        ("", E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)]
    refused = answer.transaction_states[0]
    assert (refused.transaction_state, refused.producer_id, refused.topics) == ("", 0, [])  # nothing disclosed

    allow(secured, Op.DESCRIBE, TXN, "*")
    allow(secured, Op.READ, TOPIC, "open")  # READ implies DESCRIBE
    answer = (await call_as(secured, 0, request)).decoded
    described, unknown, empty = answer.transaction_states
    assert (described.error_code, described.transaction_state, described.producer_id) == (E.NONE, "Ongoing",
                                                                                          producer[0])
    assert [(topic.topic, topic.partitions) for topic in described.topics] == [("open", [0])]  # not secret-1
    assert (unknown.error_code, empty.error_code) == (E.TRANSACTIONAL_ID_NOT_FOUND, E.INVALID_REQUEST)


async def test_list_transactions_lists_only_describable_ids(secured):
    await loaded(secured)
    for transactional_id in ("app-1", "app-2", "other"):
        await init(secured, transactional_id)
    allow(secured, Op.DESCRIBE, TXN, "app-", pattern=PatternType.PREFIXED)
    deny(secured, Op.DESCRIBE, TXN, "app-2")
    answer = (await call_as(secured, 1, ListTransactionsRequest())).decoded
    assert answer.error_code == E.NONE
    assert sorted(state.transactional_id for state in answer.transaction_states) == ["app-1"]
    super_user = (await call_as(secured, 1, ListTransactionsRequest(), principal="User:ANONYMOUS")).decoded
    assert sorted(state.transactional_id for state in super_user.transaction_states) == ["app-1", "app-2", "other"]
