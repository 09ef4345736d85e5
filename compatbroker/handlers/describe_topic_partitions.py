"""DescribeTopicPartitions (API key 75), version 0: topics' partitions a page at a time (KIP-966), from the cluster
metadata any node holds.

Behaviour, as a Kafka broker answers:
- Topics are described in name order, each once. An empty topic list means every topic, and then topics that do
  not exist are not reported; a named topic that does not exist gets UNKNOWN_TOPIC_OR_PARTITION
  (INVALID_TOPIC_EXCEPTION for an illegal name) with no partitions.
- The cursor: topics before the cursor's topic are skipped, and that topic starts at the cursor's partition. With
  named topics the cursor's topic must be one of them, and its partition must not be negative; otherwise the
  request is refused: INVALID_REQUEST on every named topic.
- At most min(`response_partition_limit`, 2000: Kafka's default max.request.partition.size.limit, which is not
  configurable here), and at least 1, partitions are returned. When a topic is cut short, `next_cursor` names it
  and its next partition; when the limit is used up exactly at a topic's end and another topic follows,
  `next_cursor` names that topic at partition 0; null when everything was described.
- Per partition: leader (-1 while leaderless or its node is down, with error 0 as Kafka), leader epoch, replicas
  and ISR in the controller's order, offline replicas (on stopped nodes); eligible leader replicas and last known
  ELR are empty, as from a Kafka cluster that does not keep them (KIP-966's eligible.leader.replicas.version 0).
- Authorization, as Kafka's, after the cursor checks: only topics the principal may DESCRIBE are looked at, each
  checked in name order as the page reaches it (those past the end of the page are not checked, and the next cursor
  names a topic the principal may describe). With every topic asked for the others are left out; a named one
  answers TOPIC_AUTHORIZATION_FAILED with a zero topic id and no partitions (so it is not told whether the topic
  exists), after the page of described topics and not counted in its limit.
- Topic authorized operations of each described topic (unknown ones included): the operations the principal may do
  on it (`RequestContext.authorized_operations`; every topic operation when no authorizer is configured).
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from .. import topic_names
from ..cluster.metadata import NO_LEADER
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import DescribeTopicPartitionsResponse
from ..protocol.wire import ZERO_UUID
from ..security.acls.types import AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 75
MIN_VERSION = 0
MAX_VERSION = 0

MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000  # Kafka's default for max.request.partition.size.limit

TopicResult = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
PartitionResult = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition
Cursor = DescribeTopicPartitionsResponse.Cursor
log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request) -> DescribeTopicPartitionsResponse:
    every_topic = not request.topics
    cursor = request.cursor
    start_topic = cursor.topic_name if cursor is not None else ""
    names = set(ctx.broker.topics()) if every_topic else {topic.name for topic in request.topics}
    names = sorted(name for name in names if name >= start_topic)
    if cursor is not None and ((not every_topic and cursor.topic_name not in names) or cursor.partition_index < 0):
        log.info("client %s: DescribeTopicPartitions refused: cursor %s-%d is not among the asked topics or has a "
                 "negative partition", ctx.client_id, cursor.topic_name, cursor.partition_index)
        return _refused(request)
    limit = max(min(MAX_REQUEST_PARTITION_SIZE_LIMIT, request.response_partition_limit), 1)
    first_partition = {start_topic: cursor.partition_index} if cursor is not None else {}
    denied: list[str] = []
    topics, next_cursor = _page(ctx, _describable(ctx, names, denied), first_partition, limit,
                                report_unknown=not every_topic)
    if not every_topic:
        topics += [_denied(name) for name in denied]
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)


def _describable(ctx: RequestContext, names: list[str], denied: list[str]) -> Iterator[str]:
    """The names the principal may DESCRIBE, each checked only when the page asks for the next one (as Kafka's lazy
    stream of topics); the others are added to `denied`."""
    for name in names:
        if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            yield name
        else:
            denied.append(name)


def _page(ctx: RequestContext, names: Iterable[str], first_partition: dict[str, int], limit: int, *,
          report_unknown: bool):
    broker = ctx.broker
    alive = set(broker.alive_node_ids())
    remaining = limit
    topics = []
    for name in names:
        if remaining == 0:  # the previous topic ended exactly at the limit: continue at this one
            return topics, Cursor(topic_name=name, partition_index=0)
        info = broker.topic(name)
        if info is None:
            if report_unknown:
                topics.append(_unknown(ctx, name))
            continue
        states = broker.metadata.partitions(name)
        start = first_partition.get(name, 0)
        end = min(len(states), start + remaining)
        topics.append(TopicResult(error_code=ErrorCode.NONE, name=name, topic_id=info.topic_id,
                                  is_internal=info.is_internal, partitions=[_partition(s, alive)
                                                                            for s in states[start:end]],
                                  topic_authorized_operations=ctx.authorized_operations(ResourceType.TOPIC, name)))
        if end < len(states):
            return topics, Cursor(topic_name=name, partition_index=end)
        remaining -= max(end - start, 0)
    return topics, None


def _partition(state, alive: set[int]):
    leader = state.leader if state.leader in alive else NO_LEADER
    return PartitionResult(error_code=ErrorCode.NONE, partition_index=state.partition, leader_id=leader,
                           leader_epoch=state.leader_epoch, replica_nodes=list(state.replicas),
                           isr_nodes=list(state.isr), eligible_leader_replicas=[], last_known_elr=[],
                           offline_replicas=state.offline_replicas(alive))


def _unknown(ctx: RequestContext, name: str):
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if topic_names.is_valid(name) else ErrorCode.INVALID_TOPIC_EXCEPTION
    return TopicResult(error_code=code, name=name, topic_id=ZERO_UUID, is_internal=topic_names.is_internal(name),
                       partitions=[],
                       topic_authorized_operations=ctx.authorized_operations(ResourceType.TOPIC, name))


def _denied(name: str):
    """A named topic the principal may not describe (the schema's default authorized operations: none given)."""
    return TopicResult(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=ZERO_UUID,
                       is_internal=False, partitions=[])


def _refused(request) -> DescribeTopicPartitionsResponse:
    return DescribeTopicPartitionsResponse(
        throttle_time_ms=0, next_cursor=None,
        topics=[TopicResult(error_code=ErrorCode.INVALID_REQUEST, name=topic.name, topic_id=ZERO_UUID,
                            is_internal=False, partitions=[]) for topic in request.topics])
