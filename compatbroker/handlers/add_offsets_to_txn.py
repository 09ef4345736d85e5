"""AddOffsetsToTxn (API key 25), versions 0-4: a consumer group's offsets partition joins the producer's ongoing
transaction, before the producer commits the group's offsets in it with TxnOffsetCommit
(`send_offsets_to_transaction`).

Behaviour, as Kafka's: the coordinator adds the `__consumer_offsets` partition of the group (Kafka's
`abs(hashCode(group id)) % offsets.topic.num.partitions`) to the transaction exactly as AddPartitionsToTxn adds a
partition (`TransactionCoordinator.add_offsets`), so the commit or abort marker also lands there and the group's
transactional offsets become visible, or are dropped, with it. The answer is that one code: NONE,
INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS, INVALID_TXN_STATE, NOT_COORDINATOR, ...;
an empty transactional id is INVALID_REQUEST, and COORDINATOR_LOAD_IN_PROGRESS is answered while
`__transaction_state` is loading. PRODUCER_FENCED is answered from v2; before, INVALID_PRODUCER_EPOCH, the code
those clients understand. Version 4 only tells the broker that the client knows TRANSACTION_ABORTABLE.

Authorization comes first: WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ
on the group (else GROUP_AUTHORIZATION_FAILED); a refused request adds nothing.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..coordinator.transactions import transactions_of
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import AddOffsetsToTxnResponse
from ..security.acls.types import AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 25
MIN_VERSION = 0
MAX_VERSION = 4

FIRST_VERSION_WITH_PRODUCER_FENCED = 2


async def handle(ctx: RequestContext, request) -> AddOffsetsToTxnResponse:
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    code = ErrorCode(await transactions_of(ctx.broker).add_offsets(request.transactional_id, request.producer_id,
                                                                   request.producer_epoch, request.group_id))
    if code == ErrorCode.PRODUCER_FENCED and ctx.api_version < FIRST_VERSION_WITH_PRODUCER_FENCED:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=code)

