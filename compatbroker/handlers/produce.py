"""Produce (API key 0), versions 0-13: append record batches to partition logs.

Behaviour, as Kafka's:
- Versions 0-2 carry magic 0/1 message sets (sarama's default still sends v0), which storage converts to v2
  batches; from v3 a partition's records must be exactly one magic 2 batch (INVALID_RECORD otherwise), and before
  v7 it may not be zstd-compressed (UNSUPPORTED_COMPRESSION_TYPE). From v13 topics are named by id
  (UNKNOWN_TOPIC_ID for an unknown one); earlier by name (UNKNOWN_TOPIC_OR_PARTITION for an unknown topic or
  partition). Produce never creates topics (Metadata does).
- Per-partition errors from storage: CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE (a batch over
  `max.message.bytes`), RECORD_LIST_TOO_LARGE, INVALID_TIMESTAMP, UNSUPPORTED_COMPRESSION_TYPE. When records
  themselves are at fault (a timestamp out of bounds, a keyless record in a compacted topic), v8+ answers list them
  in `record_errors` with their index in the batch, and `error_message` says why; other errors carry no message.
  A client other than "__admin_client" may not write to an internal topic (INVALID_TOPIC_EXCEPTION).
- Only the partition's leader appends: another node answers NOT_LEADER_OR_FOLLOWER (checked before a transactional
  batch goes to the coordinator, as Kafka does), and from v10 names the leader it knows in `current_leader`, with
  that leader's endpoint in `node_endpoints` when it is alive (KIP-951).
- acks: 1 and -1 answer after the append and, when the append reached the topic's `flush.messages`, after the fsync
  that storage asks for (`AppendResult.flush_needed`, run off the event loop by `broker.make_durable`), as Kafka
  flushes inside its append; with Kafka's defaults nothing is flushed on the request path. -1 (all) on a partition
  with followers first needs an ISR of at least the effective `min.insync.replicas` (the topic's, at most the
  replica count) or appends nothing and answers NOT_ENOUGH_REPLICAS; after the append it waits, up to the
  request's `timeout_ms`, for the high watermark to pass the batch (`Replication.wait_for_isr`): REQUEST_TIMED_OUT
  when it does not, NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below the minimum meanwhile,
  NOT_LEADER_OR_FOLLOWER when leadership moved; these keep the append's offsets, as Kafka's DelayedProduce answers.
  A partition of one replica waits for nothing. 0 sends no response (a due fsync then runs in the background), and
  when a partition failed the connection is closed instead (the handler raises `UnacknowledgedProduceFailed`), so
  the producer notices and refreshes its metadata. Any other acks value answers INVALID_REQUIRED_ACKS for every
  partition that got that far, and nothing is appended.
- A successful partition answers its base offset, `log_append_time_ms` (-1 unless the topic uses LogAppendTime,
  v2+) and `log_start_offset` (v5+); a failed one -1 for the base offset and append time, and for the log start
  offset -1 or the log's, as Kafka does for that error. Each append wakes fetchers long-polling the partition.
- Idempotent producers (batches with a producer id): storage checks epochs and sequence numbers. A retry of one of
  the producer's last five batches writes nothing and answers NONE with the offsets the batch got the first time
  (and its append time on a LogAppendTime topic), so a retry never stores a batch twice. A stale epoch is
  INVALID_PRODUCER_EPOCH, a gap or step back in the sequence OUT_OF_ORDER_SEQUENCE_NUMBER (storage's
  UNKNOWN_PRODUCER_ID and INVALID_TXN_STATE pass through likewise); these answer the log's start offset and no
  message. A producer the partition has no state for must start at sequence 0 (UNKNOWN_PRODUCER_ID otherwise, as
  Kafka answered before 2.5; see storage/producer_state.py).
- Transactional batches (KIP-890): before the append, the transaction coordinator checks the partition
  (`TransactionCoordinator.verify_for_append`). Versions 0-11 follow transactions v1: the partition must already
  be in the producer's ongoing transaction (added by AddPartitionsToTxn), unless
  `transaction.partition.verification.enable` is false (true by default). Versions 12+ follow transactions v2
  (the client found `transaction.version` 2 finalized): the coordinator adds the partition itself, starting the
  transaction if needed, and a CONCURRENT_TRANSACTIONS answer (the previous transaction still completing) is
  retried every `add.partitions.to.txn.retry.backoff.ms` (20) for up to
  `add.partitions.to.txn.retry.backoff.max.ms` (100).
  As in Kafka, a partition that already has this producer's (id and epoch) transaction open is not asked about
  again. A failed check appends nothing and answers, per partition, with log start offset -1 (Kafka's
  translation for producers): PRODUCER_FENCED as INVALID_PRODUCER_EPOCH; TRANSACTION_ABORTABLE as itself from v11
  and as INVALID_TXN_STATE before (older clients do not know it); INVALID_TXN_STATE with the message "Partition
  was not added to the transaction"; NETWORK_EXCEPTION, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
  NOT_COORDINATOR, and below v12 CONCURRENT_TRANSACTIONS, as NOT_ENOUGH_REPLICAS ("Unable to verify the partition
  has been added to the transaction. Underlying error: ..."), a retriable code that old clients retry without a
  metadata refresh; any other code as itself. Messages go out from v8.
- Authorization (KafkaApis.handleProduceRequest), before anything is appended: a request with a transactional
  batch needs WRITE on its `transactional_id` (none, or not allowed: TRANSACTIONAL_ID_AUTHORIZATION_FAILED for
  every partition); then each topic needs WRITE, else its partitions answer TOPIC_AUTHORIZATION_FAILED (checked
  before the topic's existence, so an unknown topic does not show; an unknown v13 topic id is still
  UNKNOWN_TOPIC_ID). Idempotent batches need nothing more: Kafka checks IDEMPOTENT_WRITE in InitProducerId.
- A request whose transactional batches name more than one producer id and epoch answers
  INVALID_PRODUCER_ID_MAPPING for every partition; nothing of it is appended (with acks=0 the connection closes).
- Order: the appends of one connection happen in request order (the server starts handlers in arrival order and
  an append runs before the handler's first await). A transactional append that has to wait for the coordinator
  first takes its place in a queue per producer and partition, so a later pipelined request to the same partition
  appends after it, never before; a partition with no such wait pending appends at once.

Counted in `broker.metrics` (compatbroker.metrics), per topic as Kafka's BrokerTopicMetrics: partitions that reach
the append checks with valid acks, the unexpected failures among them (a too small ISR, invalid records), bytes and
records appended (the count from the batch header); and the acks=all requests waiting for their ISR (Kafka's
Produce purgatory).

Deviation: a retried batch on a CreateTime topic answers `log_append_time_ms` -1, where Kafka answers the batch's
largest timestamp.
"""
from __future__ import annotations

import asyncio
import logging
import struct
import time
import weakref
from typing import TYPE_CHECKING, NamedTuple

from .. import topic_names
from ..coordinator.transactions import transactions_of
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import ProduceResponse
from ..protocol.records.batch import (ATTRIBUTES_OFFSET, CREATE_TIME, LENGTH_OFFSET, LOG_OVERHEAD, MAGIC,
                                      MAGIC_OFFSET, NO_TIMESTAMP, PRODUCER_EPOCH_OFFSET, PRODUCER_ID_OFFSET,
                                      TRANSACTIONAL_MASK, iter_batches, iter_records)
from ..protocol.records.compression import CODEC_MASK, DEFAULT_MAX_UNCOMPRESSED_SIZE, Compression
from ..protocol.records.convert import legacy_to_batches
from ..protocol.records.errors import CorruptRecordError, InvalidRecordError, UnsupportedCompressionError
from ..security.acls.types import AclOperation, ResourceType
from ..storage import StorageError
from . import CloseConnection
from .partition_leadership import leader_hint, replica_error

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 0
MIN_VERSION = 0
MAX_VERSION = 13

ADMIN_CLIENT_ID = "__admin_client"  # the one client id Kafka lets write to internal topics
_MIN_BATCH_LENGTH = 14  # Kafka refuses a batch whose length field is below the smallest legacy message
_INT32 = struct.Struct(">i")
_PRODUCER = struct.Struct(">qh")  # producer id, producer epoch
_ATTRIBUTES_LOW_BYTE = ATTRIBUTES_OFFSET + 1  # the int16 attributes are big-endian: codec and flags are here
_NOT_LEADER = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
FIRST_VERSION_WITH_TRANSACTION_ABORTABLE = 11
FIRST_TRANSACTION_V2_VERSION = 12  # Kafka: ProduceRequest.LAST_STABLE_VERSION_BEFORE_TRANSACTION_V2 is 11
NOT_IN_TRANSACTION = "Partition was not added to the transaction"
UNVERIFIED = "Unable to verify the partition has been added to the transaction. Underlying error: {}"
# Coordinator answers that Kafka turns into NOT_ENOUGH_REPLICAS for producers (retriable, no metadata refresh).
_RETRIABLE_VERIFICATION = {ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                           ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR}

# Errors for which Kafka reports log start offset -1 rather than the log's.
_WITHOUT_LOG_START = {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.MESSAGE_TOO_LARGE,
                      ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR,
                      ErrorCode.INVALID_REQUIRED_ACKS, ErrorCode.INVALID_TOPIC_EXCEPTION,
                      ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                      ErrorCode.NOT_LEADER_OR_FOLLOWER}

# Append failures Kafka does not count in FailedProduceRequests (ReplicaManager.appendToLocalLog: the metric is for
# unexpected failures; record validation and producer state errors count).
_EXPECTED_FAILURES = {ErrorCode.CORRUPT_MESSAGE, ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE,
                      ErrorCode.KAFKA_STORAGE_ERROR}

TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = ProduceResponse.PartitionProduceResponse
RecordError = ProduceResponse.BatchIndexAndErrorMessage
log = logging.getLogger(__name__)


class UnacknowledgedProduceFailed(CloseConnection):
    """An acks=0 produce failed on some partition: there is no response to carry the error, so Kafka closes the
    connection; raising this makes the server do the same, with one WARNING line."""


async def handle(ctx: RequestContext, request) -> ProduceResponse | None:
    version = ctx.api_version
    broker = ctx.broker
    now_ms = broker.now_ms()
    producer = _transactional_producer(ctx, request)
    refused = producer if isinstance(producer, ErrorCode) else None  # the whole request's error
    names = [_topic_name(broker, topic_data, version) for topic_data in request.topic_data]
    denied = _unwritable_topics(ctx, names) if refused is None else _NOTHING
    appended = []
    waiting = []
    responses = []
    for topic_data, name in zip(request.topic_data, names):
        partitions = []
        for partition_data in topic_data.partition_data:
            if refused is not None:
                response, written = _error(partition_data.index, refused), None
            elif denied and name in denied:
                response, written = _error(partition_data.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED), None
            else:
                response, written = _produce_partition(ctx, request, name, partition_data, now_ms, producer)
                if response.__class__ is _Waiting:
                    waiting.append((response, partitions, len(partitions)))
            partitions.append(response)
            if written is not None:
                appended.append(written)
        responses.append(TopicResponse(name=topic_data.name, topic_id=topic_data.topic_id,
                                       partition_responses=partitions))
    if waiting:
        await _append_verified(ctx, request, waiting, producer, appended)
    due = _flush_due(appended)  # Kafka flushes inside its append: most often there is nothing to flush
    if request.acks == 0:
        _fail_silently_on_error(ctx, responses)
        if due:
            _flush_in_background(broker, due)
        return None
    if due:
        await broker.make_durable(due)  # off the event loop, before answering
    if request.acks == -1:
        waits = [written for written in appended if _has_followers(broker, written.log)]
        if waits:
            await _wait_for_isr(broker, waits, request.timeout_ms)
    return ProduceResponse(responses=responses, throttle_time_ms=0,
                           node_endpoints=_leader_hints(ctx, responses) if version >= 10 else [])


_NOTHING = frozenset()


def _unwritable_topics(ctx: RequestContext, names: list[str | None]) -> frozenset[str] | set[str]:
    """The named topics the principal may not WRITE to (unknown ids aside: they answer UNKNOWN_TOPIC_ID). With no
    authorizer this costs one attribute check per request, nothing per partition."""
    if ctx.broker.security.authorizer is None:
        return _NOTHING
    known = [name for name in names if name is not None]
    return set(known) - ctx.filter_authorized(AclOperation.WRITE, ResourceType.TOPIC, known)


def _topic_name(broker, topic_data, version: int) -> str | None:
    """The topic's name; None when a v13+ topic id is unknown."""
    if version < 13:
        return topic_data.name
    info = broker.topic_by_id(topic_data.topic_id)
    return None if info is None else info.name


def _produce_partition(ctx: RequestContext, request, name: str | None, partition_data, now_ms: int, producer):
    """The response for one partition, and (log appended to, whether its flush policy wants an fsync now), or
    None when nothing was appended. A transactional batch that needs the coordinator's check first answers a
    `_Waiting` in place of the response."""
    version, index = ctx.api_version, partition_data.index
    if name is None:
        return _error(index, ErrorCode.UNKNOWN_TOPIC_ID), None
    broker = ctx.broker
    state = broker.partition_state(name, index)
    if state is None:
        return _error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), None
    records = partition_data.records if partition_data.records is not None else b""
    if version >= 3:
        problem = _check_single_batch(records, version)
        if problem is not None:
            return _error(index, problem), None
    if producer is not None and _is_transactional(records):
        not_leader = replica_error(broker, name, index, None, require_leader=True)
        if not_leader is not None:  # Kafka asks the leader's partition before the coordinator
            return _error(index, not_leader), None
        log_ = broker.get_log(name, index)
        if _needs_verification(ctx, log_, producer):
            return _Waiting(ctx, log_, records, index, producer), None  # verified before acks, as in Kafka
    return _checked_append(ctx, request, name, records, index, now_ms, state)


def _checked_append(ctx: RequestContext, request, topic: str, records, index: int, now_ms: int, state=None):
    """Kafka's checks before an append (ReplicaManager.appendToLocalLog, Partition.appendRecordsToLeader), then
    the append. Counted in the topic's TotalProduceRequests once the acks are valid, as Kafka counts it; refused
    for a too small ISR, in its FailedProduceRequests too. `state`: the partition's, when the caller has just
    looked it up (None: look it up here, as after an await)."""
    acks = request.acks
    if acks not in (-1, 0, 1):
        return _error(index, ErrorCode.INVALID_REQUIRED_ACKS), None
    broker = ctx.broker
    stats = broker.metrics.topic(topic)
    stats.produce_requests += 1
    if topic_names.is_internal(topic) and ctx.client_id != ADMIN_CLIENT_ID:
        return _error(index, ErrorCode.INVALID_TOPIC_EXCEPTION), None
    if state is None:
        state = broker.partition_state(topic, index)
    log_ = broker.get_log(topic, index)
    if state is None or log_ is None or state.leader != broker.node_id:  # replica_error says which
        return _error(index, replica_error(broker, topic, index, None, require_leader=True)), None
    if acks == -1 and _isr_too_small(state, log_):
        stats.failed_produce_requests += 1
        return _error(index, ErrorCode.NOT_ENOUGH_REPLICAS, log_start_offset=log_.log_start_offset), None
    return _append(ctx, log_, records, index, now_ms, stats, state.leader_epoch)


def _isr_too_small(state, log_) -> bool:
    """acks=all refuses to append while the ISR is below the effective min.insync.replicas: the topic's value, at
    most the replica count (Kafka's effectiveMinIsr), so a partition of one replica always takes writes."""
    replicas = len(state.replicas)
    return replicas > 1 and len(state.isr) < min(log_.config.min_insync_replicas, replicas)


# --- transactional batches -----------------------------------------------------------------------------------

def _transactional_producer(ctx: RequestContext, request) -> tuple[int, int] | ErrorCode | None:
    """(producer id, epoch) of the request's transactional batches; None when it has none; the error of the whole
    request when they have no transactional id, one the principal may not WRITE, or more than one producer (Kafka
    checks these before anything)."""
    producers = set()
    for topic_data in request.topic_data:
        for partition_data in topic_data.partition_data:
            records = partition_data.records
            if records is not None and _is_transactional(records):
                producers.add(_PRODUCER.unpack_from(records, PRODUCER_ID_OFFSET))
    if not producers:
        return None
    if request.transactional_id is None or not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                                             request.transactional_id):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if len(producers) > 1:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    return producers.pop()


def _needs_verification(ctx: RequestContext, log_, producer: tuple[int, int]) -> bool:
    """Kafka asks the coordinator unless the partition already has this producer's transaction open; here also
    while an earlier request of the producer to the partition still waits (its append must come first)."""
    if _append_order(ctx.broker).busy((producer[0], log_.topic, log_.partition)):
        return True
    entry = log_.producer_state.entry(producer[0])
    return entry is None or entry.producer_epoch != producer[1] or entry.current_txn_start_offset < 0


class _Waiting:
    """A transactional partition of the request whose append waits for the coordinator's check. It takes its
    place in the producer's queue for the partition as it is made (before the handler's first await)."""

    def __init__(self, ctx: RequestContext, log_, records, index: int, producer: tuple[int, int]):
        self.log, self.records, self.index = log_, records, index
        self.key = (producer[0], log_.topic, log_.partition)
        self.order = _append_order(ctx.broker)
        self.previous, self.turn = self.order.enter(self.key)


async def _append_verified(ctx: RequestContext, request, waiting: list, producer, appended: list) -> None:
    """Check the waiting partitions with the coordinator, then append each in its turn."""
    try:
        codes = await asyncio.gather(*(_verify(ctx, request, entry.log, producer) for entry, _, _ in waiting))
        for (entry, partitions, position), code in zip(waiting, codes):
            if entry.previous is not None:
                await asyncio.shield(entry.previous)
            if code != ErrorCode.NONE:
                partitions[position] = _verification_error(entry.index, code, ctx.api_version)
            else:
                response, written = _checked_append(ctx, request, entry.log.topic, entry.records, entry.index,
                                                    ctx.broker.now_ms())
                partitions[position] = response
                if written is not None:
                    appended.append(written)
            entry.order.leave(entry.key, entry.turn)
    finally:
        for entry, _, _ in waiting:
            entry.order.leave(entry.key, entry.turn)


async def _verify(ctx: RequestContext, request, log_, producer: tuple[int, int]) -> ErrorCode:
    """The coordinator's answer for one partition; transactions v2 retries CONCURRENT_TRANSACTIONS a while."""
    coordinator = transactions_of(ctx.broker)
    tv2 = ctx.api_version >= FIRST_TRANSACTION_V2_VERSION
    config = ctx.broker.config
    deadline = time.monotonic() + config.add_partitions_to_txn_retry_backoff_max_ms / 1000
    while True:
        code = ErrorCode(await coordinator.verify_for_append(request.transactional_id, producer[0], producer[1],
                                                             log_.topic, log_.partition, tv2=tv2))
        if not tv2 or code != ErrorCode.CONCURRENT_TRANSACTIONS or time.monotonic() >= deadline:
            return code
        await asyncio.sleep(config.add_partitions_to_txn_retry_backoff_ms / 1000)


def _verification_error(index: int, code: ErrorCode, version: int):
    """Kafka's translation of a failed verification for the producer (AddPartitionsToTxnManager, ReplicaManager)."""
    if code == ErrorCode.PRODUCER_FENCED:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    elif code == ErrorCode.TRANSACTION_ABORTABLE and version < FIRST_VERSION_WITH_TRANSACTION_ABORTABLE:
        code = ErrorCode.INVALID_TXN_STATE
    message = None
    if code == ErrorCode.INVALID_TXN_STATE:
        message = NOT_IN_TRANSACTION
    elif code in _RETRIABLE_VERIFICATION or (code == ErrorCode.CONCURRENT_TRANSACTIONS
                                             and version < FIRST_TRANSACTION_V2_VERSION):
        code, message = ErrorCode.NOT_ENOUGH_REPLICAS, UNVERIFIED.format(code.name)
    response = _error(index, code)
    response.error_message = message
    return response


class _AppendOrder:
    """Per (producer id, topic, partition): the turn of the last transactional append still waiting. A request
    waits for the turn before its own, so appends that wait for the coordinator keep their arrival order."""

    def __init__(self):
        self._last: dict[tuple[int, str, int], asyncio.Future] = {}

    def busy(self, key) -> bool:
        return key in self._last

    def enter(self, key) -> tuple[asyncio.Future | None, asyncio.Future]:
        previous = self._last.get(key)
        turn = asyncio.get_running_loop().create_future()
        self._last[key] = turn
        return previous, turn

    def leave(self, key, turn: asyncio.Future) -> None:
        if not turn.done():
            turn.set_result(None)
        if self._last.get(key) is turn:
            del self._last[key]


_APPEND_ORDERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _append_order(broker) -> _AppendOrder:
    order = _APPEND_ORDERS.get(broker)
    if order is None:
        order = _APPEND_ORDERS[broker] = _AppendOrder()
    return order


def _append(ctx: RequestContext, log_, records, index: int, now_ms: int, stats, leader_epoch: int):
    """The append, counted in the topic's stats (`stats`) as Kafka's BrokerTopicMetrics count it: bytes and
    records in once appended (a retried duplicate too), a failure unless it is one Kafka expects (see
    `_EXPECTED_FAILURES`)."""
    broker = ctx.broker
    try:
        result = log_.append(records, leader_epoch=leader_epoch, now_ms=now_ms)
    except StorageError as exc:
        if exc.error_code not in _EXPECTED_FAILURES:
            stats.failed_produce_requests += 1
        return _storage_error(ctx, log_, records, index, exc, now_ms), None
    except OSError as exc:
        log.error("client %s: append to %s-%d failed: %s", ctx.client_id, log_.topic, index, exc)
        return _error(index, ErrorCode.KAFKA_STORAGE_ERROR), None
    if result.base_offset < 0:  # an empty payload appends nothing; Kafka reports no offsets at all
        return _error(index, ErrorCode.NONE), None
    stats.bytes_in += len(records)
    stats.messages_in += result.last_offset - result.base_offset + 1  # the batch header's count, no decoding
    if not result.duplicate:  # a retried batch already in the log wrote nothing: no fetcher to wake
        broker.notify_appended(log_.topic, index)
    response = PartitionResponse(index=index, error_code=ErrorCode.NONE, base_offset=result.base_offset,
                                 log_append_time_ms=result.log_append_time_ms, log_start_offset=result.log_start_offset)
    return response, _Written(log_, result.flush_needed, result.last_offset + 1, response)


def _storage_error(ctx: RequestContext, log_, records, index: int, exc: StorageError, now_ms: int):
    code = ErrorCode(exc.error_code)
    if code not in (ErrorCode.INVALID_TIMESTAMP, ErrorCode.INVALID_RECORD):
        return _error(index, code, log_start_offset=log_.log_start_offset)
    bad = _bad_records(records, log_.config, now_ms)
    if not bad:  # the batch itself is at fault: no record to point at, no message (as Kafka)
        return _error(index, code, log_start_offset=log_.log_start_offset)
    timestamps = any(kind == ErrorCode.INVALID_TIMESTAMP for _, kind, _ in bad)
    if timestamps:
        code, message = ErrorCode.INVALID_TIMESTAMP, "records were rejected: their timestamps are out of bounds"
    else:
        details = "; ".join(text for _, _, text in bad[:3])
        code, message = ErrorCode.INVALID_RECORD, f"{len(bad)} records were rejected, for example: {details}"
    response = _error(index, code, log_start_offset=log_.log_start_offset)
    response.record_errors = [RecordError(batch_index=position, batch_index_error_message=text)
                              for position, _, text in bad]
    response.error_message = message
    return response


def _error(index: int, code: ErrorCode, *, log_start_offset: int | None = None):
    if log_start_offset is None or code in _WITHOUT_LOG_START:
        log_start_offset = -1
    return PartitionResponse(index=index, error_code=code, base_offset=-1, log_append_time_ms=-1,
                             log_start_offset=log_start_offset)


def _check_single_batch(records, version: int) -> ErrorCode | None:
    """Kafka's rules for v3+ payloads: exactly one complete magic 2 batch, not zstd before v7."""
    view = records  # bytes, or a byte view of the request frame
    length = _batch_length(view, 0)
    if isinstance(length, ErrorCode):
        return length
    if length is None:
        return ErrorCode.INVALID_RECORD  # no complete batch at all
    if view[MAGIC_OFFSET] != MAGIC:
        return ErrorCode.INVALID_RECORD
    if version < 7 and view[_ATTRIBUTES_LOW_BYTE] & CODEC_MASK == Compression.ZSTD:
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    following = _batch_length(view, LOG_OVERHEAD + length)
    if isinstance(following, ErrorCode):
        return following
    return None if following is None else ErrorCode.INVALID_RECORD


def _is_transactional(records) -> bool:
    """Is the payload's (first) batch transactional? Only magic 2 batches can be; v3+ payloads hold one batch. A
    batch too short to name its producer is left for storage to refuse as corrupt. `records` is bytes or a view
    of the request frame: indexing either gives a byte."""
    return (len(records) >= PRODUCER_EPOCH_OFFSET + 2 and records[MAGIC_OFFSET] == MAGIC
            and bool(records[_ATTRIBUTES_LOW_BYTE] & TRANSACTIONAL_MASK))


def _batch_length(view: memoryview, position: int) -> int | ErrorCode | None:
    """The length field of a complete batch at `position`; None when no complete batch starts there (trailing
    bytes that do not make a batch are left for storage to judge); CORRUPT_MESSAGE for an impossible length."""
    if len(view) - position < LOG_OVERHEAD:
        return None
    length = _INT32.unpack_from(view, position + LENGTH_OFFSET)[0]
    if length < _MIN_BATCH_LENGTH:
        return ErrorCode.CORRUPT_MESSAGE
    if len(view) - position < LOG_OVERHEAD + length:
        return None
    return length


def _bad_records(records, config, now_ms: int) -> list[tuple[int, ErrorCode, str]]:
    """(index in its batch, error, reason) of each record Kafka's validator would name, for the first batch that
    has any. Runs only after storage refused the payload, so its cost does not matter."""
    view = memoryview(records).cast("B")
    try:
        if len(view) > MAGIC_OFFSET and view[MAGIC_OFFSET] in (0, 1):
            view = memoryview(legacy_to_batches(view, max_size=DEFAULT_MAX_UNCOMPRESSED_SIZE))
        for position, header in iter_batches(view):
            batch = view[position:position + header.size]
            bad = [(index, *problem) for index, record in
                   enumerate(iter_records(batch, max_size=DEFAULT_MAX_UNCOMPRESSED_SIZE))
                   if (problem := _record_problem(record, header, config, now_ms)) is not None]
            if bad:
                return bad
    except (CorruptRecordError, InvalidRecordError, UnsupportedCompressionError):
        pass
    return []


def _record_problem(record, header, config, now_ms: int) -> tuple[ErrorCode, str] | None:
    if config.compact and not header.is_control and record.key is None:
        delta = record.offset - header.base_offset
        return ErrorCode.INVALID_RECORD, f"record at offset delta {delta} has no key, which a compacted topic requires"
    if config.log_append_time or header.timestamp_type != CREATE_TIME or record.timestamp == NO_TIMESTAMP:
        return None
    earliest = now_ms - config.message_timestamp_before_max_ms
    latest = now_ms + config.message_timestamp_after_max_ms
    if earliest <= record.timestamp <= latest:
        return None
    return ErrorCode.INVALID_TIMESTAMP, f"timestamp {record.timestamp} is outside [{earliest}, {latest}]"


def _fail_silently_on_error(ctx: RequestContext, responses) -> None:
    failed = [f"{topic.name or topic.topic_id}-{partition.index}: {ErrorCode(partition.error_code).name}"
              for topic in responses for partition in topic.partition_responses if partition.error_code]
    if failed:
        raise UnacknowledgedProduceFailed(f"acks=0 produce from client {ctx.client_id} failed ({', '.join(failed)}); "
                                          "closing the connection so the producer notices")


def _flush_in_background(broker, due: list) -> None:
    task = asyncio.get_running_loop().create_task(broker.make_durable(due))
    task.add_done_callback(_log_flush_failure)


def _log_flush_failure(task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("flush after an acks=0 produce failed: %s", task.exception())


def _flush_due(appended: list) -> list:
    """The logs whose flush policy asked for an fsync (`flush.messages` reached), to run before answering. With
    Kafka's defaults none: durability is left to the page cache and recovery, as in Kafka."""
    if not any(written.flush_needed for written in appended):
        return []
    return list({id(written.log): written.log for written in appended if written.flush_needed}.values())


# --- acks=all and leader hints ---------------------------------------------------------------------------------

class _Written(NamedTuple):
    """A partition appended to: its log, whether its flush policy wants an fsync now, the offset the ISR must
    reach for acks=all, and the response to amend if it does not."""
    log: object
    flush_needed: bool
    required_offset: int
    response: object


async def _wait_for_isr(broker, waits: list, timeout_ms: int) -> None:
    """acks=all: each partition with followers (`waits`) answers once its high watermark reaches the append
    (Kafka's DelayedProduce, with the request's timeout); a partition of one replica has nothing to wait for."""
    replication = broker.cluster.replication
    broker.metrics.produce_waiting += 1  # Kafka's Produce purgatory
    try:
        codes = await asyncio.gather(*(replication.wait_for_isr(written.log.topic, written.log.partition,
                                                                 written.required_offset, timeout_ms / 1000)
                                       for written in waits))
    finally:
        broker.metrics.produce_waiting -= 1
    for written, code in zip(waits, codes):
        if code != ErrorCode.NONE:  # the offsets of the append stay, as Kafka answers them
            written.response.error_code = code


def _has_followers(broker, log_) -> bool:
    state = broker.partition_state(log_.topic, log_.partition)
    return state is not None and len(state.replicas) > 1


def _leader_hints(ctx: RequestContext, responses) -> list:
    """KIP-951 (v10+): each NOT_LEADER_OR_FOLLOWER partition names the leader this node knows, and the response
    carries the endpoints of those leaders."""
    if not any(partition.error_code == _NOT_LEADER for topic in responses for partition in topic.partition_responses):
        return []
    endpoints = {}
    for topic in responses:
        name = topic.name if ctx.api_version < 13 else _name_of(ctx.broker, topic.topic_id)
        for partition in topic.partition_responses:
            if partition.error_code != _NOT_LEADER:
                continue
            hint = leader_hint(ctx, name, partition.index)
            partition.current_leader = ProduceResponse.LeaderIdAndEpoch(leader_id=hint.leader_id,
                                                                        leader_epoch=hint.leader_epoch)
            if hint.endpoint is not None:
                node_id, host, port, rack = hint.endpoint
                endpoints[node_id] = ProduceResponse.NodeEndpoint(node_id=node_id, host=host, port=port, rack=rack)
    return [endpoints[node_id] for node_id in sorted(endpoints)]


def _name_of(broker, topic_id) -> str | None:
    info = broker.topic_by_id(topic_id)
    return None if info is None else info.name
