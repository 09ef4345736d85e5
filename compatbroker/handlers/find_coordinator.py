"""FindCoordinator (API key 10), versions 0-6: which broker coordinates a group or a transactional id.

This broker leads every partition of `__consumer_offsets` and `__transaction_state`, so it answers itself (its
node id and the advertised endpoint of the listener the request came in on) for key type 0 (group) and 1
(transaction), whatever the key. Versions 0-3 ask for one key (v0 always a group); from v4 a batch of keys, each
answered on its own (KIP-699). Versions 1-3 carry an error message: "NONE" on success, as Kafka sends.

Errors: key type 2 (share group) is INVALID_REQUEST, as Kafka answers without a share coordinator (and before
v6 always); so is any other key type.

Deviation: Kafka answers COORDINATOR_NOT_AVAILABLE while it creates `__consumer_offsets` on the first lookup;
here the coordinator is available at once (the topic is created on its first write).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..coordinator import coordinator_of
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import FindCoordinatorResponse

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 6

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
SERVED_KEY_TYPES = frozenset({GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE})
NO_NODE = (-1, "", -1)  # Kafka's Node.noNode(): id, host, port
SUCCESS_MESSAGE = "NONE"  # Kafka's Errors.NONE.message()

Coordinator = FindCoordinatorResponse.Coordinator


async def handle(ctx: RequestContext, request) -> FindCoordinatorResponse:
    coordinator_of(ctx.broker)  # a client's first group request follows: have the coordinator loading already
    error = ErrorCode.NONE if request.key_type in SERVED_KEY_TYPES else ErrorCode.INVALID_REQUEST
    if error is ErrorCode.NONE:
        node_id = ctx.broker.node_id
        host, port = ctx.broker.advertised_endpoint(ctx.listener_host, ctx.listener_port)
    else:
        node_id, host, port = NO_NODE
    if ctx.api_version >= 4:
        message = "" if error is ErrorCode.NONE else error.message
        return FindCoordinatorResponse(coordinators=[
            Coordinator(key=key, node_id=node_id, host=host, port=port, error_code=error, error_message=message)
            for key in request.coordinator_keys])
    message = SUCCESS_MESSAGE if error is ErrorCode.NONE else error.message
    return FindCoordinatorResponse(error_code=error, error_message=message, node_id=node_id, host=host, port=port)
