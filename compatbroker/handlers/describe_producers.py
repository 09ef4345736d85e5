"""DescribeProducers (API key 61), version 0: the producers each partition's log tracks (KIP-664).

Each asked partition answers its active producers, in producer id order: producer id, epoch, last sequence, last
timestamp, coordinator epoch and the first offset of the transaction it has open (-1 without one), as storage's
producer state holds them. A producer drops out once storage expires it (`producer.id.expiration.ms`).

Errors, as Kafka's: an illegal topic name is INVALID_TOPIC_EXCEPTION with the reason as the message; a topic the
principal may not READ is TOPIC_AUTHORIZATION_FAILED with that error's message (whether it exists or not); an
unknown topic is UNKNOWN_TOPIC_OR_PARTITION with that error's message; a partition the topic does not have is
UNKNOWN_TOPIC_OR_PARTITION without one. Any replica answers from its own producer state, as Kafka's
ReplicaManager.activeProducerState does (the admin client asks the leader unless told a broker id); a node hosting
no replica of the partition answers NOT_LEADER_OR_FOLLOWER. Topics and partitions are answered in the order asked,
repeats included.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .. import topic_names
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import DescribeProducersResponse
from ..security.acls.types import AclOperation, ResourceType
from .partition_leadership import replica_error

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 61
MIN_VERSION = 0
MAX_VERSION = 0

TopicResponse = DescribeProducersResponse.TopicResponse
PartitionResponse = DescribeProducersResponse.PartitionResponse
ProducerState = DescribeProducersResponse.ProducerState


async def handle(ctx: RequestContext, request) -> DescribeProducersResponse:
    topics = [TopicResponse(name=topic.name, partitions=_describe_topic(ctx, topic)) for topic in request.topics]
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)


def _describe_topic(ctx: RequestContext, topic) -> list:
    broker = ctx.broker
    problem = _topic_problem(ctx, topic.name)
    if problem is not None:
        code, message = problem
        return [PartitionResponse(partition_index=index, error_code=code, error_message=message,
                                  active_producers=[]) for index in topic.partition_indexes]
    return [_describe_partition(broker, topic.name, index) for index in topic.partition_indexes]


def _topic_problem(ctx: RequestContext, name: str) -> tuple[ErrorCode, str] | None:
    try:
        topic_names.validate(name)
    except topic_names.InvalidTopicName as exc:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, str(exc)
    if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.TOPIC_AUTHORIZATION_FAILED.message
    if ctx.broker.topic(name) is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.message
    return None


def _describe_partition(broker, topic: str, index: int):
    problem = replica_error(broker, topic, index, None, require_leader=False)
    if problem is not None:
        return PartitionResponse(partition_index=index, error_code=problem, error_message=None, active_producers=[])
    partition_log = broker.get_log(topic, index)
    producers = sorted(partition_log.producer_state.active_producers(), key=lambda entry: entry.producer_id)
    return PartitionResponse(partition_index=index, error_code=ErrorCode.NONE, error_message=None,
                             active_producers=[_producer(entry) for entry in producers])


def _producer(entry):
    return ProducerState(producer_id=entry.producer_id, producer_epoch=entry.producer_epoch,
                         last_sequence=entry.last_sequence, last_timestamp=entry.last_timestamp,
                         coordinator_epoch=entry.coordinator_epoch,
                         current_txn_start_offset=entry.current_txn_start_offset)
