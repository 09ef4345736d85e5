"""Fetch (API key 1), versions 0-18: read record batches, waiting for data when there is not enough yet.

Behaviour, as Kafka's:
- Reads whole batches from the one holding `fetch_offset`, from one segment, as file regions that the server sends
  with `os.sendfile`: a fetch inside a batch returns the whole batch and the client skips what it did not ask for.
- Size limits: `partition_max_bytes` per partition and, from v3, `max_bytes` for the response (capped by
  Kafka's default `fetch.max.bytes`, 55 MiB), partitions read in request order. From v3 the first partition with
  data returns at least one batch even when it exceeds the limits (KIP-74); later partitions only what fits.
  Versions 0-2 have hard limits: a first message larger than the limit is cut at the limit, the partial message
  by which old clients recognise a message too large for their fetch size.
- Long polling: the answer is sent at once if `max_wait_ms` <= 0, if at least `min_bytes` are available, or if a
  partition hit an error or a diverging epoch; otherwise the handler waits (`broker.wait_for_append`, woken by
  appends, never polling) until `min_bytes` are there or `max_wait_ms` has passed, then reads again. Partitions of
  unknown topics do not end the wait; appends and high watermark moves wake it (replication wakes a follower's
  waiters when its high watermark moves); a partition deleted during the wait (DeleteTopics) ends it, as in Kafka, and
  so does the client closing its connection (`ctx.client_gone`), so that its socket is not held for the wait.
- read_committed (v4+ `isolation_level` 1): only batches below the last stable offset (LSO) are returned, and
  `aborted_transactions` lists (producer id, first offset) of the aborted transactions overlapping the range
  returned, from the segments' `.txnindex` files (no record is read; the bytes still leave through sendfile). The
  upper bound of that range is the offset after the data returned (Kafka: LocalLog.addAbortedTransactions). For
  long polling, data above the LSO does not count: a commit or abort marker that moves the LSO wakes the waiter
  like any append.
- Which node serves (ReplicaManager): a consumer (replica id -1) from v11 may read from any replica of the
  partition, before v11 only from its leader, as a follower's fetch (replica id >= 0) must. A node that is not a
  replica, or not the leader where only the leader serves, answers NOT_LEADER_OR_FOLLOWER; from v16 that answer
  and FENCED_LEADER_EPOCH name the leader this node knows in `current_leader`, with its endpoint in
  `node_endpoints` when it is alive (KIP-951). A consumer's reads stop at this replica's high watermark (a
  follower's trails its leader's), or its last stable offset for read_committed; a follower's run to the log end.
- Fetch from follower (KIP-392): with `replica.selector.class` set to Kafka's RackAwareReplicaSelector, the leader
  answers a v11+ consumer that sends a `rack_id` with the replica to read from (`compatbroker.cluster.
  replica_selector`): a follower in the ISR in that rack is named as `preferred_read_replica`, with the offsets but
  no records, and the fetch answers at once; the consumer then fetches from that follower, which serves it.
- Per-partition answers: high watermark, last stable offset (v4+, for both isolation levels), log start offset
  (v5+), `aborted_transactions` (v4+: a list for read_committed, null for read_uncommitted), preferred read replica
  (v11+, -1 unless named as above). Errors: UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID (v13+ topic ids),
  NOT_LEADER_OR_FOLLOWER (above), INCONSISTENT_TOPIC_ID (a session's id no longer matches the topic of that name),
  OFFSET_OUT_OF_RANGE, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH (v9+ `current_leader_epoch` other than the
  partition's), and from v12 a `last_fetched_epoch` that does not match this replica's epochs answers
  `diverging_epoch`. An errored partition answers high watermark, last stable offset and log start offset -1.
- Authorization (KafkaApis.handleFetchRequest), once per request before any read: a follower's fetch (replica id
  >= 0) needs CLUSTER_ACTION on the cluster, else every partition answers TOPIC_AUTHORIZATION_FAILED; a consumer
  needs READ on each topic, else that topic's partitions answer TOPIC_AUTHORIZATION_FAILED (an unknown topic id
  stays UNKNOWN_TOPIC_ID; an unknown name the principal may not read does not show). Refused partitions do not
  end a long poll, as partitions of unknown topics do not.
- Fetch sessions (v7+, KIP-227) through `compatbroker.fetch_session`: full, incremental and sessionless fetches,
  forgotten topics, FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR. Each node
  keeps its own sessions, as each Kafka broker does.
- Old formats: versions 0-1 read magic 0 message sets, 2-3 magic 1; their records are converted
  (`records.convert.batches_to_legacy`, plus dropping the records before `fetch_offset` from an uncompressed first
  batch, as Kafka does), the one place record bytes pass through Python. Control batches are left out; zstd cannot
  be converted and answers UNSUPPORTED_COMPRESSION_TYPE. Versions 4-9 get the batches as stored, zstd ones too, as
  from Kafka 4.0 (which converts nothing); a broker emulating Kafka 3.x (`broker.emulated_release`) answers them
  UNSUPPORTED_COMPRESSION_TYPE for a topic whose `compression.type` is zstd, as 3.x did.

Counted in `broker.metrics` (compatbroker.metrics) for consumers' fetches, per topic: partitions read, failed
reads, record bytes sent; and the long polls waiting (Kafka's Fetch purgatory).

Deviations: Kafka may end a response with part of a batch (the client drops it); we send whole batches only, and
for versions 0-3 the converted size exactly, without Kafka's filler message. A fetch from a replica (`replica_id` >=
0) reads like a consumer's apart from the leader-only rule and the log end bound: the nodes of this process
replicate without Fetch requests, so the leader does not track such a fetcher's offsets.
"""
from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import fetch_session
from ..fetch_session import PartitionRequest
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import FetchResponse
from ..protocol.records.batch import iter_batches, iter_records
from ..protocol.records.compression import DEFAULT_MAX_UNCOMPRESSED_SIZE, Compression
from ..protocol.records.convert import batches_to_legacy
from ..protocol.records.errors import CorruptRecordError, InvalidRecordError, UnsupportedCompressionError
from ..protocol.records.legacy import encode_messages
from ..protocol.wire import ZERO_UUID
from ..cluster.replica_selector import NO_PREFERRED_REPLICA, preferred_read_replica, selector_enabled
from ..config_catalog import before_kafka_4
from ..security.acls.types import CLUSTER_NAME, AclOperation, ResourceType
from ..storage import OffsetOutOfRangeError
from .partition_leadership import leader_epoch_error, leader_hint

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 1
MIN_VERSION = 0
MAX_VERSION = 18

READ_COMMITTED = 1
INT32_MAX = 2**31 - 1
FETCH_MAX_BYTES = 57_671_680  # Kafka's default fetch.max.bytes
FIRST_VERSION_FROM_FOLLOWER = 11  # KIP-392: consumers may read from any replica, and rack_id is sent
FIRST_VERSION_WITH_NODE_ENDPOINTS = 16  # KIP-951: leader hints (KafkaApis fills them from v16)
_REDIRECTING_ERRORS = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)
# Read errors Kafka does not count in FailedFetchRequests (ReplicaManager.readFromLocalLog: the known ones, and
# OFFSET_OUT_OF_RANGE, answered by handleOffsetOutOfRangeError)
_EXPECTED_FETCH_ERRORS = {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
                          ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH,
                          ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.REPLICA_NOT_AVAILABLE,
                          ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.INCONSISTENT_TOPIC_ID,
                          ErrorCode.OFFSET_OUT_OF_RANGE}

TopicData = FetchResponse.FetchableTopicResponse
PartitionData = FetchResponse.PartitionData
AbortedTransaction = FetchResponse.AbortedTransaction
_NONE = ErrorCode.NONE
# The tagged fields' defaults, one object each for every partition answered (three objects fewer per partition).
# Never change one in place: a partition that needs its own (a diverging epoch, a leader hint) is assigned a new one.
_NO_DIVERGING_EPOCH = FetchResponse.EpochEndOffset()
_NO_LEADER = FetchResponse.LeaderIdAndEpoch()
_NO_SNAPSHOT = FetchResponse.SnapshotId()

# How a partition's read went, for the decision to answer at once.
OK, ERROR, DIVERGING, UNKNOWN, PREFERRED = "ok", "error", "diverging", "unknown", "preferred"


@dataclass(slots=True)
class _Read:
    """One partition's read: the request it answers, the response data, and what long polling needs to know."""

    request: PartitionRequest
    data: object  # FetchResponse.PartitionData
    outcome: str
    size: int = 0
    cut: int | None = None  # versions 0-2: where the hard size limit cuts the (converted) records


@dataclass(slots=True)
class _Limits:
    """What the request as a whole asks, and who asks it."""
    max_bytes: int
    min_bytes: int
    hard: bool  # versions 0-2: no batch beyond the limits, ever
    read_committed: bool
    consumer: bool  # replica id -1: reads stop at the high watermark
    only_leader: bool  # a follower's fetch, or a consumer's before v11: the leader serves it
    client_rack: str | None  # v11+ rack_id, when the leader may name a preferred read replica (KIP-392)
    denied: frozenset | set = frozenset()  # topics the principal may not READ (none without an authorizer)
    deny_all: bool = False  # a follower's fetch without CLUSTER_ACTION: every partition is refused


async def handle(ctx: RequestContext, request) -> FetchResponse:
    broker, version = ctx.broker, ctx.api_version
    context = fetch_session.new_context(
        broker.fetch_sessions, version=version, session_id=request.session_id, epoch=request.session_epoch,
        requested=_requested_partitions(broker, request, version), forgotten=_forgotten(request, version),
        now_ms=broker.now_ms())
    partitions = context.partitions()
    _resolve_topic_ids(broker, partitions)
    limits = _limits(broker, request, version)
    _authorize(ctx, partitions, limits)
    reads = _read_all(broker, partitions, limits)
    if request.max_wait_ms > 0 and not _ready(reads, limits):  # else no coroutine, no loop call: answer now
        reads = await _wait_for_data(broker, request, partitions, limits, reads, ctx.client_gone)
    error, session_id, selected = context.respond([(read.request, read.data, read) for read in reads],
                                                  broker.now_ms())
    finished = [_finish(broker, version, result[2]) for result in selected]
    if limits.consumer:
        _count(broker.metrics, reads, finished)
    endpoints = _leader_hints(ctx, finished) if version >= FIRST_VERSION_WITH_NODE_ENDPOINTS else []
    return FetchResponse(throttle_time_ms=0, error_code=error, session_id=session_id,
                         responses=_group_by_topic(finished), node_endpoints=endpoints)


# --- the request --------------------------------------------------------------------------------------------------

def _requested_partitions(broker, request, version: int) -> list[PartitionRequest]:
    """The partitions the request lists, topics resolved (name from v13 ids: None when unknown), each once."""
    wanted = {}
    for topic in request.topics:
        if version >= 13:
            info = broker.topic_by_id(topic.topic_id)
            name, topic_id = (info.name if info else None), topic.topic_id
        else:
            name, topic_id = topic.topic, ZERO_UUID  # names only: no id to check against the topic's
        for partition in topic.partitions:
            wanted[(topic_id if version >= 13 else name, partition.partition)] = PartitionRequest(
                topic=name, topic_id=topic_id, partition=partition.partition, fetch_offset=partition.fetch_offset,
                partition_max_bytes=partition.partition_max_bytes,
                current_leader_epoch=partition.current_leader_epoch, log_start_offset=partition.log_start_offset,
                last_fetched_epoch=partition.last_fetched_epoch)
    return list(wanted.values())


def _forgotten(request, version: int) -> list[tuple]:
    if version < 7:
        return []
    return [(topic.topic_id if version >= 13 else topic.topic, partition)
            for topic in request.forgotten_topics_data for partition in topic.partitions]


def _resolve_topic_ids(broker, partitions: list[PartitionRequest]) -> None:
    """A session may hold ids of topics created since: name them now."""
    for partition in partitions:
        if partition.topic is None:
            info = broker.topic_by_id(partition.topic_id)
            if info is not None:
                partition.topic = info.name


def _authorize(ctx: RequestContext, partitions: list[PartitionRequest], limits: _Limits) -> None:
    """Kafka's checks before reading, noted in `limits`: a follower needs CLUSTER_ACTION, a consumer READ on each
    topic. Without an authorizer this is one attribute check, nothing per partition."""
    if ctx.broker.security.authorizer is None:
        return
    if not limits.consumer:
        limits.deny_all = not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
        return
    names = {partition.topic for partition in partitions if partition.topic is not None}
    limits.denied = names - ctx.filter_authorized(AclOperation.READ, ResourceType.TOPIC, names)


def _limits(broker, request, version: int) -> _Limits:
    max_bytes = min(request.max_bytes if version >= 3 else INT32_MAX, FETCH_MAX_BYTES)
    replica_id = request.replica_state.replica_id if version >= 15 else request.replica_id
    consumer = replica_id < 0
    from_any_replica = consumer and version >= FIRST_VERSION_FROM_FOLLOWER
    rack = None
    if from_any_replica and request.rack_id and selector_enabled(broker.config.replica_selector_class):
        rack = request.rack_id
    return _Limits(max_bytes=max_bytes, min_bytes=min(request.min_bytes, max_bytes), hard=version <= 2,
                   read_committed=version >= 4 and request.isolation_level == READ_COMMITTED,
                   consumer=consumer, only_leader=not from_any_replica, client_rack=rack)


# --- reading and waiting ------------------------------------------------------------------------------------------

async def _wait_for_data(broker, request, partitions: list[PartitionRequest], limits: _Limits, reads: list[_Read],
                         client_gone: asyncio.Future | None = None) -> list[_Read]:
    """The long poll of a fetch whose first read, `reads`, was not worth answering: wait for appends until it is,
    `max_wait_ms` has passed, or the client has gone (nobody would read the answer, and its connection waits for it
    to close); returns the last read. The caller awaits this right after its read: the coroutine runs on without
    returning to the loop until it waits, so no append slips in between."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + request.max_wait_ms / 1000
    while not _ready(reads, limits):
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        watched = [(read.request.topic, read.request.partition) for read in reads if read.outcome != UNKNOWN]
        ends = _end_offsets(broker, watched)
        # No await between the read above and this call: an append cannot slip in unnoticed.
        broker.metrics.fetch_waiting += 1  # Kafka's Fetch purgatory
        try:
            await broker.wait_for_append(watched, remaining, until=client_gone)
        finally:
            broker.metrics.fetch_waiting -= 1
        if client_gone is not None and client_gone.done():
            break
        reads = _read_all(broker, partitions, limits)
        now = _end_offsets(broker, watched)
        if now == ends:
            break  # woken with nothing appended: the time is up, or the broker is shutting down
        if None in now:
            break  # a watched partition was deleted: Kafka completes such a fetch at once
    return reads


def _end_offsets(broker, watched: list[tuple[str, int]]) -> list[tuple[int, int] | None]:
    """(log end offset, high watermark) of each watched partition: either moving may make data readable."""
    logs = [broker.get_log(topic, partition) for topic, partition in watched]
    return [None if log is None else (log.log_end_offset, log.high_watermark) for log in logs]


def _ready(reads: list[_Read], limits: _Limits) -> bool:
    """Answer now: no partition of a known topic, one with an error, a diverging epoch or a preferred replica, or
    `min_bytes` of data in all."""
    known, size = False, 0
    for read in reads:
        outcome = read.outcome
        if outcome == OK:
            known, size = True, size + read.size
        elif outcome != UNKNOWN:
            return True  # ERROR, DIVERGING or PREFERRED
    return not known or size >= limits.min_bytes


def _read_all(broker, partitions: list[PartitionRequest], limits: _Limits) -> list[_Read]:
    remaining = limits.max_bytes
    first_batch_anyway = not limits.hard  # until a partition returns data (KIP-74)
    reads = []
    for partition in partitions:
        read = _read_partition(broker, partition, remaining, first_batch_anyway, limits)
        if read.size > 0:
            first_batch_anyway = False
            remaining = max(0, remaining - read.size)
        reads.append(read)
    return reads


def _read_partition(broker, request: PartitionRequest, remaining: int, first_batch_anyway: bool,
                    limits: _Limits) -> _Read:
    if limits.deny_all or (limits.denied and request.topic in limits.denied):
        return _Read(request, _error_data(request, ErrorCode.TOPIC_AUTHORIZATION_FAILED), UNKNOWN)
    if request.topic is None:
        return _Read(request, _error_data(request, ErrorCode.UNKNOWN_TOPIC_ID), UNKNOWN)
    state = broker.partition_state(request.topic, request.partition)
    if state is None:
        return _Read(request, _error_data(request, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), UNKNOWN)
    log = broker.get_log(request.topic, request.partition)
    problem = _partition_problem(broker, request, state, log, limits)
    if problem is not None:
        return _Read(request, _error_data(request, problem), ERROR)
    if limits.client_rack is not None and state.leader == broker.node_id:
        replica = preferred_read_replica(broker.cluster, state, limits.client_rack, request.fetch_offset)
        if replica != NO_PREFERRED_REPLICA:  # no read: the consumer goes to that replica
            return _Read(request, _offsets_data(request, log, preferred_read_replica=replica), PREFERRED)
    if request.last_fetched_epoch >= 0:
        diverged = _check_last_fetched_epoch(log, request)
        if diverged is not None:
            return diverged
    max_offset = _max_offset(log, limits)
    if request.fetch_offset == (log.log_end_offset if max_offset is None else max_offset) \
            and request.fetch_offset >= log.log_start_offset:
        return _Read(request, _caught_up_data(request, log, limits), OK)  # what log.read answers, without it
    limit = max(0, min(request.partition_max_bytes, remaining))
    try:
        # Hard limits (v0-2) still read the first batch: it is cut at the limit after conversion.
        result = log.read(request.fetch_offset, limit, min_one_batch=first_batch_anyway or limits.hard,
                          max_offset=max_offset, aborted=limits.read_committed)
    except OffsetOutOfRangeError:
        return _Read(request, _error_data(request, ErrorCode.OFFSET_OUT_OF_RANGE), ERROR)
    regions = result.regions
    region = regions[0] if regions else None  # one segment per fetch, as Kafka reads
    aborted = None
    if result.aborted_transactions is not None:
        aborted = [AbortedTransaction(producer_id=txn.producer_id, first_offset=txn.first_offset)
                   for txn in result.aborted_transactions]
    data = _partition_data(request.partition, _NONE, result.high_watermark, result.last_stable_offset,
                           result.log_start_offset, aborted, -1, b"" if region is None else region)
    size = 0 if region is None else region.length
    if limits.hard:
        return _Read(request, data, OK, min(size, limit), cut=limit)
    return _Read(request, data, OK, size)


def _max_offset(log, limits: _Limits) -> int | None:
    """Where a consumer's read stops, when that is below the log end: the last stable offset for read_committed,
    else the high watermark (of this replica: a follower's trails its leader's). Replicas read to the log end."""
    if not limits.consumer:
        return None
    bound = log.last_stable_offset if limits.read_committed else log.high_watermark
    return bound if bound < log.log_end_offset else None


def _partition_problem(broker, request: PartitionRequest, state, log, limits: _Limits) -> ErrorCode | None:
    """Kafka's checks in its order (ReplicaManager.readFromLocalLog): a replica here, the topic id, the leader
    epoch asserted, and the leader itself when only it may serve the fetch."""
    if log is None:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER  # the cluster has the partition, this node no replica of it
    if request.topic_id != ZERO_UUID:
        info = broker.topic(request.topic)
        if info is not None and info.topic_id != request.topic_id:  # deleted and created again since
            return ErrorCode.INCONSISTENT_TOPIC_ID
    if request.current_leader_epoch >= 0:  # any negative epoch means "not asserted" in a Fetch
        error = leader_epoch_error(state.leader_epoch, request.current_leader_epoch)
        if error is not None:
            return error
    if limits.only_leader and state.leader != broker.node_id:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return None


def _check_last_fetched_epoch(log, request: PartitionRequest) -> _Read | None:
    """v12+: the fetcher says which epoch wrote the last batch it has; if our log ended that epoch earlier, it must
    truncate (diverging_epoch). None when the logs agree."""
    epoch, end_offset = log.epochs.end_offset_for(request.last_fetched_epoch, log.log_end_offset)
    if epoch < 0 or end_offset < 0 or request.fetch_offset < log.log_start_offset:
        return _Read(request, _error_data(request, ErrorCode.OFFSET_OUT_OF_RANGE), ERROR)
    if epoch >= request.last_fetched_epoch and end_offset >= request.fetch_offset:
        return None
    data = _offsets_data(request, log)
    data.diverging_epoch = FetchResponse.EpochEndOffset(epoch=epoch, end_offset=end_offset)
    return _Read(request, data, DIVERGING)


def _offsets_data(request: PartitionRequest, log, *, preferred_read_replica: int = -1):
    """A partition's answer without records: its offsets (and the replica to read from instead)."""
    return _partition_data(request.partition, _NONE, log.high_watermark, log.last_stable_offset,
                           log.log_start_offset, None, preferred_read_replica, b"")


def _caught_up_data(request: PartitionRequest, log, limits: _Limits):
    """The answer of a partition read at the offset where reading stops (a consumer caught up, long polling): its
    offsets, no records, and for read_committed an empty list of aborted transactions."""
    return _partition_data(request.partition, _NONE, log.high_watermark, log.last_stable_offset,
                           log.log_start_offset, [] if limits.read_committed else None, -1, b"")


def _error_data(request: PartitionRequest, code: ErrorCode, *, records=b""):
    return _partition_data(request.partition, code, -1, -1, -1, None, -1, records)


def _partition_data(partition: int, error_code: int, high_watermark: int, last_stable_offset: int,
                    log_start_offset: int, aborted_transactions: list | None, preferred_read_replica: int, records):
    """A partition's answer, its tagged fields at their shared defaults."""
    return PartitionData(partition_index=partition, error_code=error_code, high_watermark=high_watermark,
                         last_stable_offset=last_stable_offset, log_start_offset=log_start_offset,
                         diverging_epoch=_NO_DIVERGING_EPOCH, current_leader=_NO_LEADER, snapshot_id=_NO_SNAPSHOT,
                         aborted_transactions=aborted_transactions, preferred_read_replica=preferred_read_replica,
                         records=records)


# --- the response -------------------------------------------------------------------------------------------------

def _finish(broker, version: int, read: _Read) -> _Read:
    """Apply what old versions need to a partition chosen for the response: conversion to magic 0/1 below v4, and
    Kafka 3.x's zstd-topic refusal below v10 where the broker emulates 3.x."""
    if version >= 10 or read.request.topic is None:
        return read
    log = broker.get_log(read.request.topic, read.request.partition)
    if log is not None and log.config.compression_type == "zstd" \
            and before_kafka_4(getattr(broker, "emulated_release", None)):
        read.data = _error_data(read.request, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, records=None)
    elif version < 4 and read.data.records:
        try:
            read.data.records = _down_convert(read.data.records, 0 if version <= 1 else 1,
                                              read.request.fetch_offset, read.cut)
        except UnsupportedCompressionError:
            read.data = _error_data(read.request, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, records=None)
        except (CorruptRecordError, InvalidRecordError):
            read.data = _error_data(read.request, ErrorCode.CORRUPT_MESSAGE)
    return read


def _down_convert(region, magic: int, fetch_offset: int, cut: int | None) -> bytes:
    """The batches of `region` as a magic 0/1 message set, without the records before `fetch_offset` of an
    uncompressed first batch (compressed ones stay whole, as a wrapper must), cut at `cut` bytes."""
    view = memoryview(os.pread(region.file.fileno(), region.length, region.position))
    head = b""
    _, first = next(iter_batches(view))
    if first.compression == Compression.NONE and not first.is_control and first.base_offset < fetch_offset:
        messages = [(record.offset, record.timestamp, record.key, record.value)
                    for record in iter_records(view[:first.size], max_size=DEFAULT_MAX_UNCOMPRESSED_SIZE)
                    if record.offset >= fetch_offset]
        if messages:
            head = encode_messages(messages, magic, timestamp_type=first.timestamp_type)
        view = view[first.size:]
    converted = head + batches_to_legacy(view, magic, max_size=DEFAULT_MAX_UNCOMPRESSED_SIZE)
    return converted if cut is None else converted[:cut]


def _leader_hints(ctx: RequestContext, reads: list[_Read]) -> list:
    """v16+ (KIP-951): a NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH partition names the leader this node knows,
    and the response carries the endpoints of those leaders."""
    endpoints = {}
    for read in reads:
        if read.data.error_code not in _REDIRECTING_ERRORS:
            continue
        hint = leader_hint(ctx, read.request.topic, read.request.partition)
        read.data.current_leader = FetchResponse.LeaderIdAndEpoch(leader_id=hint.leader_id,
                                                                  leader_epoch=hint.leader_epoch)
        if hint.endpoint is not None:
            node_id, host, port, rack = hint.endpoint
            endpoints[node_id] = FetchResponse.NodeEndpoint(node_id=node_id, host=host, port=port, rack=rack)
    return [endpoints[node_id] for node_id in sorted(endpoints)]


def _count(metrics, reads: list[_Read], finished: list[_Read]) -> None:
    """Kafka's BrokerTopicMetrics of a consumer's fetch: a fetch request per partition read (failed when its error
    is not one Kafka expects), and the record bytes the response carries. Partitions of unknown topics, or refused,
    count nothing."""
    for read in reads:
        if read.outcome == UNKNOWN:
            continue
        stats = metrics.topic(read.request.topic)
        stats.fetch_requests += 1
        if read.data.error_code and read.data.error_code not in _EXPECTED_FETCH_ERRORS:
            stats.failed_fetch_requests += 1
    for read in finished:
        records = read.data.records
        if records and read.outcome != UNKNOWN:
            metrics.topic(read.request.topic).bytes_out += len(records)


def _group_by_topic(reads: list[_Read]) -> list:
    """Consecutive partitions of one topic share a topic entry (a topic seen again later gets another)."""
    topics = []
    previous = None
    for read in reads:
        key = (read.request.topic, read.request.topic_id)
        if key != previous:
            topics.append(TopicData(topic=read.request.topic or "", topic_id=read.request.topic_id, partitions=[]))
            previous = key
        topics[-1].partitions.append(read.data)
    return topics
