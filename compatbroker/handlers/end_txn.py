"""EndTxn (API key 26), versions 0-5: the producer commits or aborts its ongoing transaction.

Behaviour, as Kafka's: the transaction coordinator (`TransactionCoordinator.end_transaction`) moves the
transaction to PrepareCommit or PrepareAbort in `__transaction_state`, writes the COMMIT or ABORT marker to every
partition of the transaction (and to the group's `__consumer_offsets` partition for offsets committed in it), then
to CompleteCommit or CompleteAbort. Its codes pass through: NONE, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED,
INVALID_TXN_STATE (for example a commit asked of a transaction the coordinator is aborting),
CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, TRANSACTION_ABORTABLE, ...; an empty transactional id is INVALID_REQUEST
and COORDINATOR_LOAD_IN_PROGRESS is answered while `__transaction_state` is loading. PRODUCER_FENCED is answered
from v2; before, INVALID_PRODUCER_EPOCH, the code those clients understand.

Transaction version (KIP-890): as in Kafka, the request's version alone decides. v5 comes from a client that
found `transaction.version` 2 finalized in ApiVersions and follows transactions v2: the coordinator bumps the
producer epoch at the end of every transaction, and the response carries the producer id and epoch to use next
(a new producer id when the epoch is spent). v0-4 follow transactions v1: the epoch stays, and the response has no
such fields. An error answers producer id -1 and epoch -1.

Authorization comes first: WRITE on the transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED and the
transaction is left as it is.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..coordinator.transactions import transactions_of
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import EndTxnResponse
from ..security.acls.types import AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 26
MIN_VERSION = 0
MAX_VERSION = 5

FIRST_VERSION_WITH_PRODUCER_FENCED = 2
FIRST_TRANSACTION_V2_VERSION = 5  # Kafka: EndTxnRequest.LAST_STABLE_VERSION_BEFORE_TRANSACTION_V2 is 4


async def handle(ctx: RequestContext, request) -> EndTxnResponse:
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return EndTxnResponse(throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                              producer_id=-1, producer_epoch=-1)
    result = await transactions_of(ctx.broker).end_transaction(
        request.transactional_id, request.producer_id, request.producer_epoch, request.committed,
        tv2=ctx.api_version >= FIRST_TRANSACTION_V2_VERSION)
    code = ErrorCode(result.error)
    if code == ErrorCode.PRODUCER_FENCED and ctx.api_version < FIRST_VERSION_WITH_PRODUCER_FENCED:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    if code != ErrorCode.NONE:
        return EndTxnResponse(throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)
    return EndTxnResponse(throttle_time_ms=0, error_code=code, producer_id=result.producer_id,
                          producer_epoch=result.producer_epoch)

