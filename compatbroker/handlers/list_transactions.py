"""ListTransactions (API key 66), versions 0-2: the transactional ids this node's coordinator knows, filtered
(KIP-664, `kafka-transactions.sh list`; in a cluster, clients ask every node).

Behaviour, as Kafka's: every transactional id except those being expired (state Dead) is listed with its producer
id and state, when it passes every filter given:
- `state_filters` (Kafka's state names): the id is in one of them. A name Kafka does not know is echoed in
  `unknown_state_filters` (once, in the order asked) and matches nothing, so filters that are all unknown list
  nothing.
- `producer_id_filters`: the id's producer id is one of them.
- `duration_filter` (v1+, KIP-994): when not negative, only transactions started more than that many
  milliseconds ago (Kafka compares with the transaction's start time whatever the state).
- `transactional_id_pattern` (v2+, KIP-1152): when neither null nor empty, a regular expression the whole id must
  match; one that does not compile is INVALID_REGULAR_EXPRESSION with nothing listed.
While `__transaction_state` is loading (any partition this node leads) the answer is COORDINATOR_LOAD_IN_PROGRESS
with nothing listed. Only the ids the principal may DESCRIBE are listed; the others are left out.

The pattern is compiled as Kafka's RE2/J compiles it (`compatbroker/re2j.py`, RE2: matching takes linear time, so
no pattern a client sends can stall the broker).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..coordinator.transactions import transactions_of
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import ListTransactionsResponse
from ..re2j import PatternError, compile_pattern
from ..security.acls.types import AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 66
MIN_VERSION = 0
MAX_VERSION = 2

# Kafka's TransactionState names (Dead is a state too, though never listed).
STATE_NAMES = frozenset({"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
                         "Dead", "PrepareEpochFence"})
DEAD = "Dead"

Listed = ListTransactionsResponse.TransactionState


class InvalidPattern(ValueError):
    pass


async def handle(ctx: RequestContext, request) -> ListTransactionsResponse:
    coordinator = transactions_of(ctx.broker)
    if not coordinator.loaded or coordinator.ownership.loading:
        return ListTransactionsResponse(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    asked = list(dict.fromkeys(request.state_filters))
    unknown = [name for name in asked if name not in STATE_NAMES]
    try:
        pattern = _pattern(request.transactional_id_pattern if ctx.api_version >= 2 else None)
    except InvalidPattern:
        return ListTransactionsResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_REGULAR_EXPRESSION,
                                        unknown_state_filters=unknown)
    listed = []
    if not asked or len(unknown) < len(asked):
        views = coordinator.list(states=set(asked) - set(unknown), producer_ids=set(request.producer_id_filters),
                                 duration_filter_ms=request.duration_filter if ctx.api_version >= 1 else -1)
        listed = [Listed(transactional_id=view.transactional_id, producer_id=view.producer_id,
                         transaction_state=view.state) for view in views
                  if view.state != DEAD and (pattern is None or pattern.fullmatch(view.transactional_id))
                  and ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, view.transactional_id)]
    return ListTransactionsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, unknown_state_filters=unknown,
                                    transaction_states=listed)


def _pattern(text: str | None):
    """The compiled transactional id pattern; None when there is no filter."""
    if not text:
        return None
    try:
        return compile_pattern(text)
    except PatternError as exc:
        raise InvalidPattern(text) from exc
