"""DescribeTransactions (API key 65), version 0: the coordinator's state of each asked transactional id (KIP-664,
`kafka-transactions.sh describe`).

Each id answers, in the order asked (repeats included), as Kafka's coordinator does: its state by Kafka's name
("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "PrepareEpochFence"),
producer id and epoch, transaction timeout, the start time of the current transaction (-1 when none was started)
and the partitions in it, grouped by topic in partition order. An id the coordinator does not know, or one being
expired (state Dead), is TRANSACTIONAL_ID_NOT_FOUND; an empty id INVALID_REQUEST; every id answers
COORDINATOR_LOAD_IN_PROGRESS while `__transaction_state` is loading, NOT_COORDINATOR when another node coordinates
it. An error carries only the id.

Authorization: an id the principal may not DESCRIBE answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED before anything
else is looked at (empty or unknown ids included), and a described transaction lists only the topics the principal
may DESCRIBE.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..coordinator.transactions import transactions_of
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import DescribeTransactionsResponse
from ..security.acls.types import AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 65
MIN_VERSION = 0
MAX_VERSION = 0

TransactionState = DescribeTransactionsResponse.TransactionState
TopicData = DescribeTransactionsResponse.TopicData
DEAD = "Dead"


async def handle(ctx: RequestContext, request) -> DescribeTransactionsResponse:
    coordinator = transactions_of(ctx.broker)
    states = [_describe(ctx, coordinator, transactional_id) for transactional_id in request.transactional_ids]
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)


def _describe(ctx: RequestContext, coordinator, transactional_id: str):
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return _error(transactional_id, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not transactional_id:
        return _error(transactional_id, ErrorCode.INVALID_REQUEST)
    error = coordinator.error_for(transactional_id)
    if error is not ErrorCode.NONE:
        return _error(transactional_id, error)
    view = coordinator.describe(transactional_id)
    if view is None or view.state == DEAD:
        return _error(transactional_id, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
    return TransactionState(error_code=ErrorCode.NONE, transactional_id=transactional_id,
                            transaction_state=view.state, transaction_timeout_ms=view.transaction_timeout_ms,
                            transaction_start_time_ms=view.transaction_start_time_ms,
                            producer_id=view.producer_id, producer_epoch=view.producer_epoch,
                            topics=_topics(ctx, view.partitions))


def _topics(ctx: RequestContext, partitions) -> list:
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(partitions):
        by_topic.setdefault(topic, []).append(index)
    return [TopicData(topic=topic, partitions=indexes) for topic, indexes in by_topic.items()
            if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)]


def _error(transactional_id: str, code: ErrorCode):
    return TransactionState(error_code=code, transactional_id=transactional_id)
