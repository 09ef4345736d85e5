"""Authorization of ListOffsets, OffsetForLeaderEpoch, DeleteRecords and DescribeProducers with Kafka's
StandardAuthorizer on: the ACL each needs, the per-partition error when refused, and no deletion when refused."""
from __future__ import annotations

import pytest

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import (DeleteRecordsRequest, DescribeProducersRequest, ListOffsetsRequest,
                                            OffsetForLeaderEpochRequest)
from compatbroker.security.acls import CLUSTER_NAME, AclOperation, ResourceType

from .authz_helpers import AUTHORIZER_ON, allow, call_as
from .helpers import batch
from .test_fetch import append

Op = AclOperation
TOPIC, CLUSTER = ResourceType.TOPIC, ResourceType.CLUSTER


@pytest.fixture
def secured(broker_factory):
    """Authorizer on, topics "open" and "secret" of 2 partitions with 3 records in partition 0."""
    broker = broker_factory(**AUTHORIZER_ON)
    for name in ("open", "secret"):
        broker.create_topic(name, 2)
        append(broker, batch(b"a", b"b", b"c"), name)
    return broker


# --- ListOffsets ----------------------------------------------------------------------------------------------------

def list_offsets(*names, timestamp: int = -1) -> ListOffsetsRequest:
    return ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(name=name, partitions=[
        ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=timestamp, max_num_offsets=1)])
        for name in names])


@pytest.mark.parametrize("version", [1, 4, 7, 11])
async def test_list_offsets_needs_describe_on_each_topic(secured, version):
    allow(secured, Op.DESCRIBE, TOPIC, "open")
    answer = await call_as(secured, version, list_offsets("open", "secret", "missing"))
    results = [(topic.name, topic.partitions[0].error_code, topic.partitions[0].offset)
               for topic in answer.decoded.topics]
    assert results == [("open", ErrorCode.NONE, 3), ("secret", ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1),
                       ("missing", ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1)]
    assert answer.decoded.topics[1].partitions[0].timestamp == -1


async def test_list_offsets_v0_refused_topic_has_no_offsets(secured):
    allow(secured, Op.DESCRIBE, TOPIC, "open")
    answer = await call_as(secured, 0, list_offsets("open", "secret"))
    results = [(topic.name, topic.partitions[0].error_code, topic.partitions[0].old_style_offsets)
               for topic in answer.decoded.topics]
    assert results == [("open", ErrorCode.NONE, [3]), ("secret", ErrorCode.TOPIC_AUTHORIZATION_FAILED, [])]


async def test_a_refused_topic_named_twice_is_refused_not_invalid(secured):
    request = list_offsets("secret")
    request.topics[0].partitions *= 2
    answer = await call_as(secured, 5, request)
    assert [p.error_code for p in answer.decoded.topics[0].partitions] == [ErrorCode.TOPIC_AUTHORIZATION_FAILED] * 2


# --- OffsetForLeaderEpoch -------------------------------------------------------------------------------------------

def epoch_request(*names) -> OffsetForLeaderEpochRequest:
    Topic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    Partition = OffsetForLeaderEpochRequest.OffsetForLeaderPartition
    return OffsetForLeaderEpochRequest(replica_id=-1, topics=[
        Topic(topic=name, partitions=[Partition(partition=0, leader_epoch=0)]) for name in names])


def epoch_results(answer) -> list[tuple]:
    return [(topic.topic, topic.partitions[0].error_code, topic.partitions[0].end_offset)
            for topic in answer.decoded.topics]


@pytest.mark.parametrize("version", [2, 3, 4])
async def test_offset_for_leader_epoch_needs_describe_on_each_topic(secured, version):
    allow(secured, Op.DESCRIBE, TOPIC, "open")
    answer = await call_as(secured, version, epoch_request("open", "secret"))
    assert epoch_results(answer) == [("open", ErrorCode.NONE, 3), ("secret", ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1)]
    assert answer.decoded.topics[1].partitions[0].leader_epoch == -1


async def test_offset_for_leader_epoch_with_cluster_action_needs_no_topic_acl(secured):
    allow(secured, Op.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)
    answer = await call_as(secured, 4, epoch_request("open", "secret", "missing"))
    assert epoch_results(answer) == [("open", ErrorCode.NONE, 3), ("secret", ErrorCode.NONE, 3),
                                     ("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)]


# --- DeleteRecords --------------------------------------------------------------------------------------------------

def delete_request(*names, offset: int = 2) -> DeleteRecordsRequest:
    return DeleteRecordsRequest(timeout_ms=5000, topics=[DeleteRecordsRequest.DeleteRecordsTopic(name=name, partitions=[
        DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=offset)]) for name in names])


@pytest.mark.parametrize("version", [0, 2])
async def test_delete_records_needs_delete_on_each_topic_and_deletes_nothing_refused(secured, version):
    allow(secured, Op.DELETE, TOPIC, "open")
    allow(secured, Op.ALTER, TOPIC, "secret")  # not DELETE
    answer = await call_as(secured, version, delete_request("open", "secret", "missing"))
    results = [(topic.name, topic.partitions[0].error_code, topic.partitions[0].low_watermark)
               for topic in answer.decoded.topics]
    assert results == [("open", ErrorCode.NONE, 2), ("secret", ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1),
                       ("missing", ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1)]
    assert secured.get_log("open", 0).log_start_offset == 2
    assert secured.get_log("secret", 0).log_start_offset == 0  # nothing deleted


# --- DescribeProducers ----------------------------------------------------------------------------------------------

async def test_describe_producers_needs_read_on_the_topic(secured):
    allow(secured, Op.READ, TOPIC, "open")
    allow(secured, Op.DESCRIBE, TOPIC, "secret")  # not enough: Kafka asks for READ
    TopicRequest = DescribeProducersRequest.TopicRequest
    request = DescribeProducersRequest(topics=[TopicRequest(name=name, partition_indexes=[0, 1])
                                               for name in ("open", "secret", "missing", "bad name")])
    answer = await call_as(secured, 0, request)
    results = [(topic.name, [(p.partition_index, p.error_code) for p in topic.partitions])
               for topic in answer.decoded.topics]
    refused = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert results == [("open", [(0, ErrorCode.NONE), (1, ErrorCode.NONE)]), ("secret", [(0, refused), (1, refused)]),
                       ("missing", [(0, refused), (1, refused)]),
                       ("bad name", [(0, ErrorCode.INVALID_TOPIC_EXCEPTION), (1, ErrorCode.INVALID_TOPIC_EXCEPTION)])]
    assert answer.decoded.topics[1].partitions[0].error_message == ErrorCode.TOPIC_AUTHORIZATION_FAILED.message
