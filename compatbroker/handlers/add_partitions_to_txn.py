"""AddPartitionsToTxn (API key 24), versions 0-5: partitions join a producer's ongoing transaction, so that the
transaction coordinator knows where to write its commit or abort markers.

Versions 0-3 carry one transaction (what clients send); versions 4+ carry a batch of `transactions`, each with
`verify_only`, which is what a partition leader sends to the coordinator (KIP-890 part 1). Kafka reserves v4+ for
brokers: with an authorizer the whole request needs CLUSTER_ACTION on the cluster, else it answers only the
top-level error CLUSTER_AUTHORIZATION_FAILED; without one a v4+ request from anyone is served.

Behaviour, per transaction, as Kafka's:
- Before v4 (clients) the transactional id needs WRITE, else every partition answers
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED; and each topic needs WRITE, else its partitions answer
  TOPIC_AUTHORIZATION_FAILED. An internal topic (`__consumer_offsets`, `__transaction_state`) always answers
  TOPIC_AUTHORIZATION_FAILED before v4, since Kafka leaves internal topics out of a client's authorized set (a
  client adds `__consumer_offsets` through AddOffsetsToTxn).
- Every asked partition must exist and be authorized. If one is not, it answers UNKNOWN_TOPIC_OR_PARTITION (or its
  authorization error) and every other one OPERATION_NOT_ATTEMPTED, and nothing is added.
- Otherwise the coordinator adds the partitions (`TransactionCoordinator.add_partitions`, one code for all of them:
  NONE, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS, INVALID_TXN_STATE,
  NOT_COORDINATOR, ...), or with `verify_only` only checks that each already is in the transaction
  (`verify_partitions`, a code per partition: NONE, or TRANSACTION_ABORTABLE for one that is not). An empty
  transactional id is INVALID_REQUEST. While `__transaction_state` is loading every partition answers
  COORDINATOR_LOAD_IN_PROGRESS.
- Transaction version, Kafka's rule (`TransactionVersion.transactionVersionForAddPartitionsToTxn`): an add of v4+
  comes from a partition leader serving a transactions-v2 producer (Produce v12+), so the transaction is marked
  as a v2 one; v0-3 adds are transactions v1.
- PRODUCER_FENCED is answered from v2; before, INVALID_PRODUCER_EPOCH, the code those clients understand.
- Partitions are answered once each, grouped by topic in the order first asked. v4+ answers the transactions in
  the order asked; the top-level `error_code` stays NONE, since Kafka sets it only for a failed cluster
  authorization.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from .. import topic_names
from ..coordinator.transactions import transactions_of
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import AddPartitionsToTxnResponse
from ..security.acls.types import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 24
MIN_VERSION = 0
MAX_VERSION = 5

FIRST_VERSION_WITH_PRODUCER_FENCED = 2
FIRST_BATCHED_VERSION = 4

TransactionResult = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
PartitionResult = AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult


async def handle(ctx: RequestContext, request) -> AddPartitionsToTxnResponse:
    if ctx.api_version < FIRST_BATCHED_VERSION:
        topics = await _transaction(ctx, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                                    request.v3_and_below_producer_epoch, request.v3_and_below_topics, False)
        return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=topics)
    if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                          results_by_transaction=[])
    answers = await asyncio.gather(*(
        _transaction(ctx, entry.transactional_id, entry.producer_id, entry.producer_epoch, entry.topics,
                     entry.verify_only) for entry in request.transactions))
    results = [TransactionResult(transactional_id=entry.transactional_id, topic_results=topics)
               for entry, topics in zip(request.transactions, answers)]
    return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, results_by_transaction=results)


async def _transaction(ctx: RequestContext, transactional_id: str, producer_id: int, producer_epoch: int, topics,
                       verify_only: bool) -> list:
    """The topic results of one transaction of the request."""
    partitions = _asked_partitions(topics)
    if ctx.api_version < FIRST_BATCHED_VERSION and not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                                                     transactional_id):
        return _results(dict.fromkeys(partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    problems = _partition_problems(ctx, partitions)
    if problems:
        return _results({tp: problems.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in partitions})
    codes = await _coordinator_codes(ctx, transactional_id, producer_id, producer_epoch, partitions, verify_only)
    if ctx.api_version < FIRST_VERSION_WITH_PRODUCER_FENCED:
        codes = {tp: ErrorCode.INVALID_PRODUCER_EPOCH if code == ErrorCode.PRODUCER_FENCED else code
                 for tp, code in codes.items()}
    return _results(codes)


def _asked_partitions(topics) -> list[tuple[str, int]]:
    """Each asked (topic, partition) once, in the order first asked."""
    return list(dict.fromkeys((topic.name, index) for topic in topics for index in topic.partitions))


def _partition_problems(ctx: RequestContext, partitions) -> dict[tuple[str, int], ErrorCode]:
    from_client = ctx.api_version < FIRST_BATCHED_VERSION  # a broker's request (v4+) was authorized as a whole
    writable = _writable_topics(ctx, partitions) if from_client else None
    problems = {}
    for topic, index in partitions:
        if from_client and topic not in writable:
            problems[topic, index] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif not ctx.broker.has_partition(topic, index):
            problems[topic, index] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return problems


def _writable_topics(ctx: RequestContext, partitions) -> set[str]:
    """The topics a client may add: never an internal one, else those it may WRITE."""
    candidates = {topic for topic, _ in partitions if not topic_names.is_internal(topic)}
    return ctx.filter_authorized(AclOperation.WRITE, ResourceType.TOPIC, candidates)


async def _coordinator_codes(ctx: RequestContext, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions, verify_only: bool) -> dict[tuple[str, int], ErrorCode]:
    coordinator = transactions_of(ctx.broker)
    if verify_only:
        verified = coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)
        return {tp: ErrorCode(verified[tp]) for tp in partitions}
    code = await coordinator.add_partitions(transactional_id, producer_id, producer_epoch, partitions,
                                            tv2=ctx.api_version >= FIRST_BATCHED_VERSION)
    return {tp: ErrorCode(code) for tp in partitions}


def _results(codes: dict[tuple[str, int], ErrorCode]) -> list:
    by_topic: dict[str, list] = {}
    for (topic, index), code in codes.items():
        by_topic.setdefault(topic, []).append(PartitionResult(partition_index=index, partition_error_code=code))
    return [TopicResult(name=topic, results_by_partition=results) for topic, results in by_topic.items()]
