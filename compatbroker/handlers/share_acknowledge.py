"""ShareAcknowledge (API key 79), versions 1-2 (KIP-932; v2: IsRenewAck, KIP-1222, and AcquisitionLockTimeoutMs
in the response): acknowledge records a share group member acquired, without fetching. Version 0 was Kafka 4.0's
early access and is gone from 4.1, as here.

Behaviour, as Kafka 4.2's KafkaApis.handleShareAcknowledgeRequest and SharePartitionManager (compatbroker.share):
- GROUP READ on the group first (GROUP_AUTHORIZATION_FAILED for the whole request); a missing member id is
  INVALID_REQUEST.
- The share session must exist (SHARE_SESSION_NOT_FOUND); epoch 0 is INVALID_SHARE_SESSION_EPOCH (an
  acknowledgement cannot open a session), a later epoch must be the session's (INVALID_SHARE_SESSION_EPOCH) and
  moves it on; -1 closes the session once the acknowledgements are applied, releasing the member's other acquired
  records of its partitions.
- Per partition, in Kafka's order: UNKNOWN_TOPIC_ID; INVALID_REQUEST for malformed batches (first offset after the
  last, a batch starting before the previous one's last offset, no types, several types but not one per offset, a
  type outside 0-3 - GAP, ACCEPT, RELEASE, REJECT - or 0-4 with v2 IsRenewAck, RENEW extending the lock);
  TOPIC_AUTHORIZATION_FAILED without TOPIC READ; UNKNOWN_TOPIC_OR_PARTITION; NOT_LEADER_OR_FOLLOWER (with the
  leader in CurrentLeader and NodeEndpoints); then the share-partition's answer (INVALID_RECORD_STATE for records
  this member has not acquired, INVALID_REQUEST past the acquired records, all or nothing per partition). The
  answer is sent once the new state is durable in `__share_group_state`.

`acknowledge_all` and `ack_batches` are shared with ShareFetch, which carries acknowledgements too.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import ShareAcknowledgeResponse
from ..security.acls.types import AclOperation, ResourceType
from ..share import share_partitions_of
from ..share.partition import AckBatch, AcknowledgeType
from ..share.sessions import FINAL_EPOCH, INITIAL_EPOCH, ShareSessionError
from .partition_leadership import leader_hint

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 79
MIN_VERSION = 1
MAX_VERSION = 2

TopicResponse = ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse
PartitionData = ShareAcknowledgeResponse.PartitionData


async def handle(ctx: RequestContext, request) -> ShareAcknowledgeResponse:
    manager = share_partitions_of(ctx.broker)
    group_id, member_id, epoch = request.group_id or "", request.member_id, request.share_session_epoch
    limits = manager.limits(group_id)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return _error(ErrorCode.GROUP_AUTHORIZATION_FAILED, limits)
    if not member_id:
        return _error(ErrorCode.INVALID_REQUEST, limits)
    try:
        session = _session(manager, group_id, member_id, epoch)
    except ShareSessionError as exc:
        return _error(exc.error_code, limits, str(exc))
    renew = ctx.api_version >= 2 and request.is_renew_ack
    acks = {}
    for topic in request.topics:
        for partition in topic.partitions:
            acks[(topic.topic_id, partition.partition_index)] = partition.acknowledgement_batches
    results = await acknowledge_all(ctx, manager, group_id, member_id, limits, ack_batches(acks, renew))
    if epoch == FINAL_EPOCH:
        manager.close_session(session)
    return _response(ctx, results, limits)


def _session(manager, group_id: str, member_id: str, epoch: int):
    if epoch == INITIAL_EPOCH:
        raise ShareSessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                "A share acknowledge request cannot open a share session.")
    session = manager.sessions.existing(group_id, member_id, epoch)
    if epoch != FINAL_EPOCH:
        manager.sessions.advance(session)
    return session


# --- shared with ShareFetch ---------------------------------------------------------------------------------------

def ack_batches(acks: dict, renew: bool) -> dict:
    """{(topic id, partition): [AckBatch]} from the request's batches, or the ErrorCode of a malformed list
    (Kafka's validateAcknowledgementBatches)."""
    highest = AcknowledgeType.RENEW if renew else AcknowledgeType.REJECT
    parsed = {}
    for key, batches in acks.items():
        result, previous_last = [], -1
        for batch in batches:
            types = tuple(batch.acknowledge_types)
            if (batch.first_offset > batch.last_offset or batch.first_offset < previous_last or not types
                    or len(types) > 1 and len(types) != batch.last_offset - batch.first_offset + 1
                    or any(kind < 0 or kind > highest for kind in types)):
                result = ErrorCode.INVALID_REQUEST
                break
            previous_last = batch.last_offset
            result.append(AckBatch(batch.first_offset, batch.last_offset, types))
        parsed[key] = result
    return parsed


async def acknowledge_all(ctx, manager, group_id: str, member_id: str, limits, acks: dict) -> dict:
    """Apply the acknowledgements of each partition; {(topic id, partition): (ErrorCode, message or None)}."""
    broker = ctx.broker
    topics = {topic_id: broker.topic_by_id(topic_id) for topic_id, _ in acks}
    names = {topic.name for topic in topics.values() if topic is not None}
    allowed = ctx.filter_authorized(AclOperation.READ, ResourceType.TOPIC, names) if names else set()
    results = {}
    for key, batches in acks.items():
        topic_id, partition = key
        topic = topics[topic_id]
        if topic is None:
            results[key] = (ErrorCode.UNKNOWN_TOPIC_ID, None)
        elif isinstance(batches, ErrorCode):
            results[key] = (batches, None)
        elif topic.name not in allowed:
            results[key] = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
        elif not broker.has_partition(topic.name, partition):
            results[key] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
        elif not batches:
            results[key] = (ErrorCode.NONE, None)
        else:
            results[key] = await manager.acknowledge(group_id, member_id, topic, partition, batches, limits)
    return results


# --- the response -------------------------------------------------------------------------------------------------

def _response(ctx, results: dict, limits) -> ShareAcknowledgeResponse:
    topics: dict = {}
    endpoints = {}
    for (topic_id, partition), (code, message) in results.items():
        data = PartitionData(partition_index=partition, error_code=code, error_message=message,
                             current_leader=ShareAcknowledgeResponse.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1))
        if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            topic = ctx.broker.topic_by_id(topic_id)
            hint = leader_hint(ctx, topic.name if topic else None, partition)
            data.current_leader = ShareAcknowledgeResponse.LeaderIdAndEpoch(leader_id=hint.leader_id,
                                                                            leader_epoch=hint.leader_epoch)
            if hint.endpoint is not None:
                node_id, host, port, rack = hint.endpoint
                endpoints[node_id] = ShareAcknowledgeResponse.NodeEndpoint(node_id=node_id, host=host, port=port,
                                                                           rack=rack)
        topics.setdefault(topic_id, TopicResponse(topic_id=topic_id, partitions=[])).partitions.append(data)
    return ShareAcknowledgeResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                    acquisition_lock_timeout_ms=limits.lock_duration_ms,
                                    responses=list(topics.values()),
                                    node_endpoints=[endpoints[node_id] for node_id in sorted(endpoints)])


def _error(code: ErrorCode, limits, message: str | None = None) -> ShareAcknowledgeResponse:
    return ShareAcknowledgeResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                    acquisition_lock_timeout_ms=limits.lock_duration_ms, responses=[],
                                    node_endpoints=[])
