"""ShareFetch (API key 78), versions 1-2 (KIP-932; v2: ShareAcquireMode, KIP-1206, and IsRenewAck, KIP-1222):
acquire records of share-partitions for a share group member, with acknowledgements piggybacked. Version 0 was
Kafka 4.0's early access and is gone from 4.1, as here.

Behaviour, as Kafka 4.2's KafkaApis.handleShareFetchRequest and SharePartitionManager (compatbroker.share):
- GROUP READ on the group first (GROUP_AUTHORIZATION_FAILED for the whole request). A missing member id is
  INVALID_REQUEST. Membership is not checked (Kafka does not either): a member fetches from the partitions it
  names; the share group's assignment only tells it which ones to name.
- The share session (`compatbroker.share.sessions`): epoch 0 opens one (acknowledgements in it are
  INVALID_REQUEST; at `group.share.max.share.sessions` the answer, after MaxWaitMs, is SHARE_SESSION_LIMIT_REACHED),
  a later epoch continues it (SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH as top-level errors), adding the
  request's partitions and removing its forgotten topics; -1 closes it: its acknowledgements are applied, nothing
  is fetched, then the member's acquired records of the session's partitions are released. A session also ends
  with the connection that opened it.
- Acknowledgements first (per partition: INVALID_REQUEST for malformed batches - first > last, overlapping or
  unordered batches, no types, a type count other than 1 or the batch's length, a type outside 0-3, or 0-4 with v2
  IsRenewAck -; UNKNOWN_TOPIC_ID, TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION,
  NOT_LEADER_OR_FOLLOWER, INVALID_RECORD_STATE), answered in AcknowledgeErrorCode; then the fetch over the
  session's partitions (TOPIC READ per topic: TOPIC_AUTHORIZATION_FAILED; UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION,
  NOT_LEADER_OR_FOLLOWER with the leader in CurrentLeader and NodeEndpoints), the partitions taken round-robin from
  the session epoch. IsRenewAck (v2) requests only renew locks: MaxBytes, MinBytes, MaxRecords and MaxWaitMs must
  be 0 (INVALID_REQUEST) and nothing is fetched.
- MaxRecords bounds the records acquired across partitions: a soft limit aligned to log batches
  (ShareAcquireMode 0, batch_optimized; the only mode of v1) or exact (1, record_limit); BatchSize cuts the
  AcquiredRecords ranges. MaxBytes (capped at `fetch.max.bytes`' default) bounds the bytes read, the first
  partition with data returning at least one batch. AcquisitionLockTimeoutMs is the group's
  `share.record.lock.duration.ms`.
- Long polling: with nothing acquired the request waits up to MaxWaitMs for an append to one of its partitions or
  records becoming available again (a release, a lock expiring), never polling; the client leaving ends the wait.
- The answer names, for epoch 0, every session partition; later, only partitions with records, an error, an
  acknowledgement result, or newly added to the session.

Deviations: MinBytes is met by any acquired record (Kafka also waits for MinBytes of readable data); acquired
offsets the log does not hold (compacted away) and transaction markers are archived rather than handed to the
client to acknowledge as gaps.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import ShareFetchResponse
from ..security.acls.types import AclOperation, ResourceType
from ..share import share_partitions_of
from ..share.manager import PartitionFetch
from ..share.sessions import FINAL_EPOCH, INITIAL_EPOCH, ShareSessionError
from .fetch import FETCH_MAX_BYTES
from .partition_leadership import leader_hint
from .share_acknowledge import ack_batches, acknowledge_all

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 78
MIN_VERSION = 1
MAX_VERSION = 2

RECORD_LIMIT = 1  # ShareAcquireMode 1: MaxRecords is exact (KIP-1206)

TopicResponse = ShareFetchResponse.ShareFetchableTopicResponse
PartitionData = ShareFetchResponse.PartitionData


@dataclass(slots=True)
class _Target:
    topic_id: object
    partition: int
    topic: object | None  # TopicView; None: unknown topic id
    result: PartitionFetch | None = None


async def handle(ctx: RequestContext, request) -> ShareFetchResponse:
    broker, version = ctx.broker, ctx.api_version
    manager = share_partitions_of(broker)
    group_id, member_id, epoch = request.group_id or "", request.member_id, request.share_session_epoch
    limits = manager.limits(group_id)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return _error(ErrorCode.GROUP_AUTHORIZATION_FAILED, limits)
    renew = version >= 2 and request.is_renew_ack
    if not member_id or (renew and (request.max_bytes or request.min_bytes or request.max_records
                                    or request.max_wait_ms)):
        return _error(ErrorCode.INVALID_REQUEST, limits)
    requested = [(topic.topic_id, partition.partition_index) for topic in request.topics
                 for partition in topic.partitions]
    acks = {(topic.topic_id, partition.partition_index): partition.acknowledgement_batches
            for topic in request.topics for partition in topic.partitions if partition.acknowledgement_batches}
    try:
        session = _session(ctx, manager, request, requested, bool(acks))
    except ShareSessionError as exc:
        if exc.error_code == ErrorCode.SHARE_SESSION_LIMIT_REACHED and request.max_wait_ms > 0:
            await _sleep_unless_gone(ctx, request.max_wait_ms / 1000)  # Kafka's idle share fetch timer
        return _error(exc.error_code, limits, str(exc))
    ack_results = await acknowledge_all(ctx, manager, group_id, member_id, limits,
                                        ack_batches(acks, renew))
    targets: list[_Target] = []
    if epoch == FINAL_EPOCH:
        manager.close_session(session)
    elif not renew:
        targets = await _fetch(ctx, manager, request, session, limits)
    return _response(ctx, session, epoch, targets, ack_results, limits)


# --- the session --------------------------------------------------------------------------------------------------

def _session(ctx, manager, request, requested, acks_present: bool):
    sessions, group_id, member_id = manager.sessions, request.group_id or "", request.member_id
    epoch = request.share_session_epoch
    if epoch == INITIAL_EPOCH:
        if acks_present:
            raise ShareSessionError(ErrorCode.INVALID_REQUEST, "Acknowledge data present in an initial request.")
        return manager.open_session(group_id, member_id, requested, ctx.client_gone)
    session = sessions.existing(group_id, member_id, epoch)
    if epoch != FINAL_EPOCH:
        forgotten = [(topic.topic_id, partition) for topic in request.forgotten_topics_data
                     for partition in topic.partitions]
        session.update(requested, forgotten)
        sessions.advance(session)
    return session


async def _sleep_unless_gone(ctx, seconds: float) -> None:
    if ctx.client_gone is None:
        await asyncio.sleep(seconds)
        return
    await asyncio.wait([ctx.client_gone], timeout=seconds)


# --- the fetch ----------------------------------------------------------------------------------------------------

async def _fetch(ctx, manager, request, session, limits) -> list[_Target]:
    broker = ctx.broker
    targets = [_Target(topic_id, partition, broker.topic_by_id(topic_id)) for topic_id, partition in session.partitions]
    _check_partitions(ctx, manager, targets)
    ready = [target for target in targets if target.result is None]
    if ready:  # round-robin from the session epoch, as Kafka's PartitionRotateStrategy
        start = session.epoch % len(ready)
        ready = ready[start:] + ready[:start]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(request.max_wait_ms, 0) / 1000
    while True:
        acquired = await _acquire_all(manager, request, session, ready, limits)
        remaining = deadline - loop.time()
        if acquired or not ready or remaining <= 0 or ctx.client_gone is not None and ctx.client_gone.done():
            return targets
        if not await _wait(ctx, manager, session.group_id, ready, remaining):
            return targets  # woken with nothing new: the time is up, or the broker is shutting down


def _check_partitions(ctx, manager, targets: list[_Target]) -> None:
    """Kafka's checks before reading: the topic id, TOPIC READ, the partition, leadership here."""
    broker = ctx.broker
    names = {target.topic.name for target in targets if target.topic is not None}
    allowed = ctx.filter_authorized(AclOperation.READ, ResourceType.TOPIC, names) if names else set()
    for target in targets:
        if target.topic is None:
            manager.forget_topic(target.topic_id)  # deleted since it was fetched, perhaps
            target.result = PartitionFetch(ErrorCode.UNKNOWN_TOPIC_ID)
        elif target.topic.name not in allowed:
            target.result = PartitionFetch(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        elif not broker.has_partition(target.topic.name, target.partition):
            target.result = PartitionFetch(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        elif not broker.is_leader(target.topic.name, target.partition):
            manager.forget_unled(target.topic.name, target.topic.topic_id, target.partition)
            target.result = PartitionFetch(ErrorCode.NOT_LEADER_OR_FOLLOWER)


async def _acquire_all(manager, request, session, ready: list[_Target], limits) -> int:
    """One pass over the partitions; returns how many records were acquired."""
    max_bytes = min(request.max_bytes, FETCH_MAX_BYTES)
    records_left = request.max_records
    strict = request.share_acquire_mode == RECORD_LIMIT  # always 0 (batch_optimized) in v1
    first, total = True, 0
    for target in ready:
        if records_left <= 0 or max_bytes <= 0 and not first:
            target.result = PartitionFetch()
            continue
        result = await manager.acquire(session.group_id, session.member_id, target.topic, target.partition, limits,
                                       max_bytes=max_bytes, max_records=records_left,
                                       batch_size=request.batch_size, strict=strict, first=first)
        target.result = result
        if result.records:
            first = False
            max_bytes -= len(result.records)
        records_left -= result.count
        total += result.count
    return total


async def _wait(ctx, manager, group_id: str, ready: list[_Target], remaining: float) -> bool:
    """Until an append to a partition, records becoming available again, the client leaving, or `remaining`;
    True when something that may be acquired has happened."""
    keys = [(group_id, target.topic.topic_id, target.partition) for target in ready]
    watched = [(target.topic.name, target.partition) for target in ready]
    before = _end_offsets(ctx.broker, watched)
    woken = manager.release_waiter(keys)
    released = manager.release_waiter(keys)  # stays unresolved by the client leaving: tells the two apart

    def forward(_done, woken=woken):
        if not woken.done():
            woken.set_result(None)
    if ctx.client_gone is not None:
        ctx.client_gone.add_done_callback(forward)
    try:
        await ctx.broker.wait_for_append(watched, remaining, until=woken)
    finally:
        manager.forget_waiter(woken)
        manager.forget_waiter(released)
        if ctx.client_gone is not None:
            ctx.client_gone.remove_done_callback(forward)
    return released.done() or _end_offsets(ctx.broker, watched) != before


def _end_offsets(broker, watched) -> list:
    """(log end offset, high watermark, last stable offset) of each partition: any may make records acquirable."""
    logs = [broker.get_log(topic, partition) for topic, partition in watched]
    return [None if log is None else (log.log_end_offset, log.high_watermark, log.last_stable_offset)
            for log in logs]


# --- the response -------------------------------------------------------------------------------------------------

def _response(ctx, session, epoch: int, targets: list[_Target], ack_results: dict, limits) -> ShareFetchResponse:
    partitions: dict[tuple, PartitionData] = {}
    endpoints = {}
    for target in targets:
        key = (target.topic_id, target.partition)
        result = target.result or PartitionFetch()
        needed = session.partitions.get(key, False)
        if epoch != INITIAL_EPOCH and not needed and not result.acquired and result.error_code == ErrorCode.NONE \
                and key not in ack_results:
            continue
        if key in session.partitions:
            session.partitions[key] = result.error_code != ErrorCode.NONE  # named again next time after an error
        partitions[key] = _partition_data(ctx, target, result, endpoints)
    for key, (code, message) in ack_results.items():
        data = partitions.get(key)
        if data is None:
            data = partitions[key] = _empty(key[1])
        data.acknowledge_error_code, data.acknowledge_error_message = code, message
    topics: dict = {}
    for (topic_id, _), data in partitions.items():
        topics.setdefault(topic_id, TopicResponse(topic_id=topic_id, partitions=[])).partitions.append(data)
    return ShareFetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                              acquisition_lock_timeout_ms=limits.lock_duration_ms, responses=list(topics.values()),
                              node_endpoints=[endpoints[node_id] for node_id in sorted(endpoints)])


def _partition_data(ctx, target: _Target, result: PartitionFetch, endpoints: dict) -> PartitionData:
    data = _empty(target.partition)
    data.error_code, data.error_message = result.error_code, result.error_message
    data.records = result.records
    data.acquired_records = [ShareFetchResponse.AcquiredRecords(first_offset=item.first_offset,
                                                                last_offset=item.last_offset,
                                                                delivery_count=item.delivery_count)
                             for item in result.acquired]
    if result.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
        hint = leader_hint(ctx, target.topic.name, target.partition)
        data.current_leader = ShareFetchResponse.LeaderIdAndEpoch(leader_id=hint.leader_id,
                                                                  leader_epoch=hint.leader_epoch)
        if hint.endpoint is not None:
            node_id, host, port, rack = hint.endpoint
            endpoints[node_id] = ShareFetchResponse.NodeEndpoint(node_id=node_id, host=host, port=port, rack=rack)
    return data


def _empty(partition: int) -> PartitionData:
    return PartitionData(partition_index=partition, error_code=ErrorCode.NONE,
                         current_leader=ShareFetchResponse.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
                         records=b"", acquired_records=[])


def _error(code: ErrorCode, limits, message: str | None = None) -> ShareFetchResponse:
    return ShareFetchResponse(throttle_time_ms=0, error_code=code, error_message=message,
                              acquisition_lock_timeout_ms=limits.lock_duration_ms, responses=[], node_endpoints=[])
