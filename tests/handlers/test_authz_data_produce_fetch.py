"""Authorization of Produce and Fetch with Kafka's StandardAuthorizer on (KafkaApis.handleProduceRequest,
handleFetchRequest): which ACL each needs, the error each refused partition answers, and that nothing is appended
or read for a refused one."""
from __future__ import annotations

import uuid

import pytest

from compatbroker.handlers import CloseConnection
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import ProduceRequest
from compatbroker.security.acls import CLUSTER_NAME, AclOperation, PatternType, ResourceType

from .authz_helpers import AUTHORIZER_ON, allow, call_as, deny
from .helpers import batch, records_of
from .test_fetch import append, fetch_request
from .txn_helpers import init, loaded, txn_batch

READ, WRITE = AclOperation.READ, AclOperation.WRITE
TOPIC, CLUSTER = ResourceType.TOPIC, ResourceType.CLUSTER


@pytest.fixture
def secured(broker_factory):
    """A broker with the authorizer on and topics "allowed" and "secret" (2 partitions each)."""
    broker = broker_factory(**AUTHORIZER_ON)
    broker.create_topic("allowed", 2)
    broker.create_topic("secret", 2)
    return broker


def produce_request(*topics, acks: int = -1, transactional_id: str | None = None) -> ProduceRequest:
    """`topics`: (name, {partition: records}) pairs."""
    return ProduceRequest(transactional_id=transactional_id, acks=acks, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name=name, partition_data=[
            ProduceRequest.PartitionProduceData(index=index, records=records) for index, records in parts.items()])
        for name, parts in topics])


def errors_of(answer) -> dict[tuple[str, int], int]:
    return {(topic.name, partition.index): partition.error_code
            for topic in answer.decoded.responses for partition in topic.partition_responses}


def log_end(broker, topic: str, partition: int = 0) -> int:
    return broker.get_log(topic, partition).log_end_offset


# --- Produce --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [3, 9, 12])
async def test_produce_needs_write_on_each_topic(secured, version):
    allow(secured, WRITE, TOPIC, "allowed")
    answer = await call_as(secured, version, produce_request(("allowed", {0: batch(b"a")}),
                                                             ("secret", {0: batch(b"s"), 1: batch(b"s")})))
    assert errors_of(answer) == {("allowed", 0): ErrorCode.NONE, ("secret", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                 ("secret", 1): ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    refused = answer.decoded.responses[1].partition_responses[0]
    assert (refused.base_offset, refused.log_append_time_ms, refused.log_start_offset) == (-1, -1, -1)
    assert log_end(secured, "allowed") == 1
    assert (log_end(secured, "secret", 0), log_end(secured, "secret", 1)) == (0, 0)  # nothing appended


async def test_produce_to_an_unknown_topic_without_write_does_not_reveal_it_is_missing(secured):
    answer = await call_as(secured, 9, produce_request(("missing", {0: batch(b"x")})))
    assert errors_of(answer) == {("missing", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    allow(secured, WRITE, TOPIC, "miss", pattern=PatternType.PREFIXED)
    answer = await call_as(secured, 9, produce_request(("missing", {0: batch(b"x")})))
    assert errors_of(answer) == {("missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


async def test_produce_v13_unknown_topic_id_stays_unknown_topic_id(secured):
    request = produce_request(("", {0: batch(b"x")}))
    request.topic_data[0].topic_id = uuid.uuid4()
    answer = await call_as(secured, 13, request)
    assert answer.decoded.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


async def test_produce_v13_by_topic_id_needs_write_on_the_named_topic(secured):
    request = produce_request(("", {0: batch(b"x")}))
    request.topic_data[0].topic_id = secured.topic("secret").topic_id
    answer = await call_as(secured, 13, request)
    assert answer.decoded.responses[0].partition_responses[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert log_end(secured, "secret") == 0
    allow(secured, WRITE, TOPIC, "secret")
    answer = await call_as(secured, 13, request)
    assert answer.decoded.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    assert log_end(secured, "secret") == 1


async def test_deny_wins_over_a_wildcard_allow(secured):
    allow(secured, WRITE, TOPIC, "*")  # every topic
    deny(secured, WRITE, TOPIC, "sec", pattern=PatternType.PREFIXED)
    answer = await call_as(secured, 9, produce_request(("allowed", {0: batch(b"a")}), ("secret", {0: batch(b"s")})))
    assert errors_of(answer) == {("allowed", 0): ErrorCode.NONE, ("secret", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED}


async def test_a_refused_acks_0_produce_closes_the_connection_and_appends_nothing(secured):
    with pytest.raises(CloseConnection, match="TOPIC_AUTHORIZATION_FAILED"):
        await call_as(secured, 9, produce_request(("secret", {0: batch(b"s")}), acks=0))
    assert log_end(secured, "secret") == 0


async def test_transactional_produce_needs_write_on_the_transactional_id(secured):
    await loaded(secured)
    producer = await init(secured, "tx")  # as the super user
    allow(secured, WRITE, TOPIC, "allowed")
    request = produce_request(("allowed", {0: txn_batch(producer, 0, b"a"), 1: txn_batch(producer, 0, b"b")}),
                              transactional_id="tx")
    answer = await call_as(secured, 12, request)
    assert errors_of(answer) == {("allowed", 0): ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                 ("allowed", 1): ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    assert (log_end(secured, "allowed", 0), log_end(secured, "allowed", 1)) == (0, 0)
    assert (await loaded(secured)).describe("tx").partitions == []  # the coordinator was not asked to add

    allow(secured, WRITE, ResourceType.TRANSACTIONAL_ID, "tx")
    answer = await call_as(secured, 12, request)  # transactions v2: the coordinator adds the partitions
    assert errors_of(answer) == {("allowed", 0): ErrorCode.NONE, ("allowed", 1): ErrorCode.NONE}
    assert log_end(secured, "allowed", 0) == 1


async def test_transactional_produce_refused_with_acks_0_closes_the_connection(secured):
    await loaded(secured)
    producer = await init(secured, "tx")
    allow(secured, WRITE, TOPIC, "allowed")
    request = produce_request(("allowed", {0: txn_batch(producer, 0, b"a")}), transactional_id="tx", acks=0)
    with pytest.raises(CloseConnection, match="TRANSACTIONAL_ID_AUTHORIZATION_FAILED"):
        await call_as(secured, 12, request)
    assert log_end(secured, "allowed") == 0


async def test_an_idempotent_produce_needs_only_write_on_the_topic(secured):
    producer = (1000, 0)  # a producer new to the partition starts at sequence 0
    allow(secured, WRITE, TOPIC, "allowed")
    records = batch(b"a", producer_id=producer[0], producer_epoch=producer[1], base_sequence=0)
    answer = await call_as(secured, 9, produce_request(("allowed", {0: records})))
    assert errors_of(answer) == {("allowed", 0): ErrorCode.NONE}


# --- Fetch ----------------------------------------------------------------------------------------------------------

def fetch_errors(answer) -> dict[tuple[str, int], int]:
    return {(topic.topic, partition.partition_index): partition.error_code
            for topic in answer.decoded.responses for partition in topic.partitions}


@pytest.mark.parametrize("version", [4, 11, 12])
async def test_a_consumer_fetch_needs_read_on_each_topic(secured, version):
    append(secured, batch(b"a"), "allowed")
    append(secured, batch(b"s"), "secret")
    allow(secured, READ, TOPIC, "allowed")
    request = fetch_request(secured, version, ("allowed", 0, 0, 1 << 20), ("secret", 0, 0, 1 << 20),
                            ("missing", 0, 0, 1 << 20))
    answer = await call_as(secured, version, request)
    assert fetch_errors(answer) == {("allowed", 0): ErrorCode.NONE,
                                    ("secret", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                    ("missing", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    allowed, secret, _ = (topic.partitions[0] for topic in answer.decoded.responses)
    assert [record.value for record in records_of(allowed.records)] == [b"a"]
    assert not secret.records and (secret.high_watermark, secret.log_start_offset) == (-1, -1)


async def test_fetch_by_topic_id_needs_read_and_unknown_ids_stay_unknown(secured):
    append(secured, batch(b"s"), "secret")
    unknown = uuid.uuid4()
    request = fetch_request(secured, 13, ("secret", 0, 0, 1 << 20), ("gone", 0, 0, 1 << 20),
                            topic_ids={"gone": unknown})
    answer = await call_as(secured, 13, request)
    codes = {topic.topic_id: topic.partitions[0].error_code for topic in answer.decoded.responses}
    assert codes == {secured.topic("secret").topic_id: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                     unknown: ErrorCode.UNKNOWN_TOPIC_ID}
    allow(secured, READ, TOPIC, "secret")
    answer = await call_as(secured, 13, request)
    assert answer.decoded.responses[0].partitions[0].error_code == ErrorCode.NONE
    assert [record.value for record in records_of(answer.decoded.responses[0].partitions[0].records)] == [b"s"]


async def test_a_fetch_of_only_refused_partitions_answers_at_once(secured):
    # max_wait_ms beyond the test's time limit: waiting for it would fail the test
    request = fetch_request(secured, 11, ("secret", 0, 0, 1 << 20), max_wait_ms=120_000, min_bytes=1)
    answer = await call_as(secured, 11, request)
    assert fetch_errors(answer) == {("secret", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED}


async def test_a_follower_fetch_needs_cluster_action(secured):
    append(secured, batch(b"a"), "allowed")
    allow(secured, READ, TOPIC, "allowed")  # a consumer's right is not enough for a replica
    request = fetch_request(secured, 11, ("allowed", 0, 0, 1 << 20), ("missing", 0, 0, 1 << 20))
    request.replica_id = 2
    answer = await call_as(secured, 11, request)
    assert fetch_errors(answer) == {("allowed", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                    ("missing", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    allow(secured, AclOperation.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)
    answer = await call_as(secured, 11, request)
    assert fetch_errors(answer) == {("allowed", 0): ErrorCode.NONE,
                                    ("missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


async def test_a_fetch_session_answers_the_refused_partition_each_time(secured):
    append(secured, batch(b"a"), "allowed")
    allow(secured, READ, TOPIC, "allowed")
    request = fetch_request(secured, 12, ("allowed", 0, 0, 1 << 20), ("secret", 0, 0, 1 << 20), session_epoch=0)
    first = await call_as(secured, 12, request)
    assert fetch_errors(first) == {("allowed", 0): ErrorCode.NONE, ("secret", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    incremental = fetch_request(secured, 12, session_id=first.decoded.session_id, session_epoch=1)
    second = await call_as(secured, 12, incremental)
    assert second.decoded.error_code == ErrorCode.NONE
    assert fetch_errors(second)[("secret", 0)] == ErrorCode.TOPIC_AUTHORIZATION_FAILED  # errors always answer


async def test_without_an_authorizer_everyone_may_produce_and_fetch(broker):
    broker.create_topic("t", 1)
    answer = await call_as(broker, 9, produce_request(("t", {0: batch(b"a")})))
    assert errors_of(answer) == {("t", 0): ErrorCode.NONE}
    answer = await call_as(broker, 11, fetch_request(broker, 11, ("t", 0, 0, 1 << 20)))
    assert fetch_errors(answer) == {("t", 0): ErrorCode.NONE}
