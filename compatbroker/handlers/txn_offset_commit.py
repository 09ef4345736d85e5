"""TxnOffsetCommit (API key 28), versions 0-5: a transactional producer stores a group's offsets inside its
transaction; they become visible to OffsetFetch only when the transaction commits (see `coordinator.offsets`).

Behaviour, as Kafka 4.3's (KafkaApis.handleTxnOffsetCommitRequest, the group coordinator's
commitTransactionalOffsets):
- Authorization first: WRITE on the transactional id, else every partition answers
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED; READ on the group, else GROUP_AUTHORIZATION_FAILED; nothing is stored
  then. Each topic needs READ, else its partitions answer TOPIC_AUTHORIZATION_FAILED (before its existence is
  looked at) and the rest goes on.
- An unknown topic, or a partition the topic does not have, answers UNKNOWN_TOPIC_OR_PARTITION; the rest goes on,
  and when nothing is left the group is not looked at. An empty group id answers INVALID_GROUP_ID.
- A group another node coordinates answers NOT_COORDINATOR before anything else. The producer is verified with
  the transaction coordinator first (`verify_for_append` on the group's `__consumer_offsets` partition, answered by
  the node that coordinates the transactional id). Kafka's TransactionSupportedOperation follows the request
  version alone: v5+ adds the partition to the transaction (transactions v2, no AddOffsetsToTxn needed; a client
  sends v5 only when `transaction.version` 2 is finalized), v0-4 only verify that AddOffsetsToTxn added it. Its
  errors are answered as Kafka's partition leader translates them: PRODUCER_FENCED as INVALID_PRODUCER_EPOCH,
  TRANSACTION_ABORTABLE as INVALID_TXN_STATE below v4 (older clients do not know it), NETWORK_EXCEPTION as
  COORDINATOR_LOAD_IN_PROGRESS.
- Then the group (the coordinator's `validate_offset_commit`, transactional): while `__consumer_offsets` loads,
  COORDINATOR_LOAD_IN_PROGRESS; from v3 (KIP-447) the member id, group instance id and generation are checked when
  given (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION; a generation >= 0 for an unknown group is
  ILLEGAL_GENERATION); without them (v0-2 always) any group state is accepted, and a rebalance in progress is no
  error. A group error is answered for every partition that passed the topic checks. For a KIP-848 consumer group
  the generation is the member epoch: an unknown member answers UNKNOWN_MEMBER_ID and another epoch
  ILLEGAL_GENERATION (Kafka turns STALE_MEMBER_EPOCH into it for transactional commits); a share group answers
  GROUP_ID_NOT_FOUND.
- A metadata string longer than `offset.metadata.max.bytes` answers OFFSET_METADATA_TOO_LARGE for its partition.
  Stored per partition: the offset, the leader epoch (v2+, else -1), the metadata (null as ""), the broker's clock
  as commit time, the topic id.
- v0-1: COORDINATOR_LOAD_IN_PROGRESS is answered as COORDINATOR_NOT_AVAILABLE (clients before 2.0 did not handle it).
- The answer comes once the transactional batch is durable; a failed write answers Kafka's translation of the
  storage error (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, UNKNOWN_SERVER_ERROR).

Deviation: partitions are answered in the request's order.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..coordinator import coordinator_of
from ..coordinator.offsets import CommittedOffset
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import TxnOffsetCommitResponse
from ..security.acls.types import AclOperation, ResourceType
from ..topic_names import GROUP_METADATA_TOPIC
from .offset_commit import Wanted, store_offsets

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 28
MIN_VERSION = 0
MAX_VERSION = 5

FIRST_ADD_PARTITION_VERSION = 5      # Kafka: ADD_PARTITION above v4
FIRST_ABORTABLE_ERROR_VERSION = 4    # Kafka: GENERIC_ERROR_SUPPORTED above v3
FIRST_LOAD_ERROR_VERSION = 2         # KAFKA-7296: older clients get COORDINATOR_NOT_AVAILABLE instead
FIRST_LEADER_EPOCH_VERSION = 2

log = logging.getLogger(__name__)

TopicResponse = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
PartitionResponse = TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition


async def handle(ctx: RequestContext, request) -> TxnOffsetCommitResponse:
    version = ctx.api_version
    refused = _request_refused(ctx, request)
    if refused is not None:
        return _response(request, [[refused] * len(topic.partitions) for topic in request.topics])
    readable = ctx.filter_authorized(AclOperation.READ, ResourceType.TOPIC, [topic.name for topic in request.topics])
    answers = [[ErrorCode.NONE] * len(topic.partitions) for topic in request.topics]
    wanted = []
    for t, topic in enumerate(request.topics):
        for p, partition in enumerate(topic.partitions):
            if topic.name not in readable:
                answers[t][p] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif ctx.broker.has_partition(topic.name, partition.partition_index):
                wanted.append(Wanted(t, p, partition, topic.name, ctx.broker.topic(topic.name).topic_id))
            else:
                answers[t][p] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if wanted:
        for item, error in zip(wanted, await _commit(ctx, request, wanted), strict=True):
            if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and version < FIRST_LOAD_ERROR_VERSION:
                error = ErrorCode.COORDINATOR_NOT_AVAILABLE
            answers[item.topic_index][item.partition_index] = error
    return _response(request, answers)


def _request_refused(ctx: RequestContext, request) -> ErrorCode | None:
    """Kafka's checks of the whole request: the transactional id (the producer id goes with it), then the group."""
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    return None


def _response(request, answers: list[list[ErrorCode]]) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
        TopicResponse(name=topic.name, partitions=[
            PartitionResponse(partition_index=partition.partition_index, error_code=error)
            for partition, error in zip(topic.partitions, answers[t], strict=True)])
        for t, topic in enumerate(request.topics)])


async def _commit(ctx: RequestContext, request, wanted: list[Wanted]) -> list[ErrorCode]:
    """Check the group id, the producer and the group, then store what passes; the answer of each of `wanted`."""
    if not request.group_id:
        return [ErrorCode.INVALID_GROUP_ID] * len(wanted)
    coordinator = coordinator_of(ctx.broker)
    store = coordinator.offsets
    if coordinator.error_for(request.group_id) is ErrorCode.NOT_COORDINATOR:
        return [ErrorCode.NOT_COORDINATOR] * len(wanted)  # before verifying: TV2 would add the partition
    error = await _verify(ctx, request, store.partition_for(request.group_id))
    if error == ErrorCode.NONE:
        error = ErrorCode(coordinator.validate_offset_commit(
            request.group_id, request.generation_id, request.member_id, request.group_instance_id,
            api_version=ctx.api_version, transactional=True))
        if error == ErrorCode.STALE_MEMBER_EPOCH:  # a consumer group's answer, as Kafka's offset manager maps it
            error = ErrorCode.ILLEGAL_GENERATION
    if error != ErrorCode.NONE:
        return [error] * len(wanted)

    def committed(item: Wanted, metadata: str) -> CommittedOffset:
        partition = item.partition
        return CommittedOffset(
            item.name, partition.partition_index, partition.committed_offset,
            leader_epoch=partition.committed_leader_epoch if ctx.api_version >= FIRST_LEADER_EPOCH_VERSION else -1,
            metadata=metadata, topic_id=item.topic_id)

    return await store_offsets(store, wanted, committed, lambda offsets: store.commit_transactional(
        request.group_id, request.producer_id, request.producer_epoch, offsets))


async def _verify(ctx: RequestContext, request, offsets_partition: int) -> ErrorCode:
    """The transaction coordinator's verdict on the producer writing to the group's partition, as Kafka's
    partition leader answers it for this version."""
    version = ctx.api_version
    error = ErrorCode(await _transactions(ctx.broker).verify_for_append(
        request.transactional_id, request.producer_id, request.producer_epoch, GROUP_METADATA_TOPIC,
        offsets_partition, tv2=version >= FIRST_ADD_PARTITION_VERSION))
    if error == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if error == ErrorCode.TRANSACTION_ABORTABLE and version < FIRST_ABORTABLE_ERROR_VERSION:
        return ErrorCode.INVALID_TXN_STATE
    if error == ErrorCode.NETWORK_EXCEPTION:
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    if error != ErrorCode.NONE:
        log.debug("TxnOffsetCommit of %s (producer %d, epoch %d) for group %s refused: %s",
                  request.transactional_id, request.producer_id, request.producer_epoch, request.group_id,
                  error.name)
    return error


def _transactions(broker):
    """The broker's transaction coordinator (made on first use)."""
    from ..coordinator.transactions import transactions_of  # imported late: a handler module loads cheaply

    return transactions_of(broker)
