"""InitProducerId (API key 22), versions 0-5: the producer id and epoch an idempotent or transactional producer
stamps on its batches.

Behaviour, as Kafka's:
- Without a transactional id: a producer id never handed out before, with epoch 0, whatever producer id and epoch
  the request names (`compatbroker.producer_ids`: blocks claimed from the controller, so unique across the nodes
  of a cluster). An idempotent producer bumps its epoch on its own and asks for a
  new id when it needs one (KIP-360), so Kafka answers every such request alike.
- With a transactional id (on the node FindCoordinator key type 1 names; another node answers NOT_COORDINATOR): the
  transaction coordinator's rules (`compatbroker.coordinator.transactions`): the id's producer id with a bumped
  epoch, a new producer id when the epoch is spent, the KIP-360 checks of a producer id and epoch named by the
  request (v3+), and fencing: an open transaction of the previous producer is aborted first (CONCURRENT_TRANSACTIONS
  while that completes, so the client retries).
- Authorization before anything else (KafkaApis.handleInitProducerIdRequest): a transactional id needs WRITE on
  it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, even for an empty one); an idempotent producer needs IDEMPOTENT_WRITE
  on the cluster or WRITE on some topic (an ALLOW on any topic pattern that no DENY cancels), else
  CLUSTER_AUTHORIZATION_FAILED.
- A producer id without an epoch, or an epoch without a producer id, is INVALID_REQUEST, and so is an empty
  transactional id. A transaction timeout outside (0, `transaction.max.timeout.ms`] is
  INVALID_TRANSACTION_TIMEOUT. A stale producer is PRODUCER_FENCED from v4 and INVALID_PRODUCER_EPOCH before, the
  code older clients understand (as Kafka maps it). While `__transaction_state` is still being loaded the answer
  is COORDINATOR_LOAD_IN_PROGRESS; when the coordinator cannot write the id's new state, Kafka's mapping of the
  append error (NOT_COORDINATOR for a failing disk, COORDINATOR_NOT_AVAILABLE when the in-sync replicas are too
  few or do not confirm it in time).
- When the disk refuses to record a block of producer ids the answer is COORDINATOR_LOAD_IN_PROGRESS, Kafka's
  answer while it has no block to allocate from. An unreadable producer id file (see `compatbroker.producer_ids`)
  is UNKNOWN_SERVER_ERROR: no id is handed out that could repeat one.
- Every error answers producer id -1 and epoch -1. Version 6 (KIP-939, two-phase commit) is unstable in Kafka
  and not offered.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..coordinator.transactions import InitResult, transactions_of
from ..producer_ids import ProducerIdBlockUnavailable, ProducerIdsError, producer_ids_of
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import InitProducerIdResponse
from ..protocol.records.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from ..security.acls.types import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5

FIRST_VERSION_WITH_PRODUCER_FENCED = 4
log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request) -> InitProducerIdResponse:
    refused = _authorization_error(ctx, request.transactional_id)
    if refused is not None:
        return _response(InitResult(refused))
    expected = _expected_producer(request)
    if expected is ErrorCode.INVALID_REQUEST or request.transactional_id == "":
        return _response(InitResult(ErrorCode.INVALID_REQUEST))
    try:
        result = await _init(ctx, request, expected)
    except ProducerIdBlockUnavailable as exc:
        log.warning("client %s: no producer id to hand out: %s", ctx.client_id, exc)
        result = InitResult(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    except OSError as exc:
        log.warning("client %s: transactional id %s: its new state could not be written: %s", ctx.client_id,
                    request.transactional_id, exc)
        result = InitResult(ErrorCode.NOT_COORDINATOR)
    except ProducerIdsError as exc:
        log.error("client %s: InitProducerId refused: %s", ctx.client_id, exc)
        result = InitResult(ErrorCode.UNKNOWN_SERVER_ERROR)
    if result.error == ErrorCode.PRODUCER_FENCED and ctx.api_version < FIRST_VERSION_WITH_PRODUCER_FENCED:
        result = InitResult(ErrorCode.INVALID_PRODUCER_EPOCH)
    return _response(result)


async def _init(ctx: RequestContext, request, expected: tuple[int, int] | None) -> InitResult:
    if request.transactional_id is None:
        return InitResult(ErrorCode.NONE, await producer_ids_of(ctx.broker).new_producer_id(), 0)
    return await transactions_of(ctx.broker).init_producer_id(request.transactional_id, request.transaction_timeout_ms,
                                                              expected)


def _authorization_error(ctx: RequestContext, transactional_id: str | None) -> ErrorCode | None:
    if transactional_id is not None:
        if ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return None
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if ctx.authorize(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=False):
        return None
    if ctx.authorize_by_resource_type(AclOperation.WRITE, ResourceType.TOPIC):
        return None
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def _expected_producer(request) -> tuple[int, int] | ErrorCode | None:
    """The producer id and epoch the request names (v3+; older versions decode both as -1)."""
    producer_id, epoch = request.producer_id, request.producer_epoch
    if producer_id == NO_PRODUCER_ID and epoch == NO_PRODUCER_EPOCH:
        return None
    if producer_id == NO_PRODUCER_ID or epoch == NO_PRODUCER_EPOCH:
        return ErrorCode.INVALID_REQUEST
    return producer_id, epoch


def _response(result: InitResult) -> InitProducerIdResponse:
    if result.error != ErrorCode.NONE:
        result = InitResult(ErrorCode(result.error))  # an error never carries a producer id or epoch
    return InitProducerIdResponse(throttle_time_ms=0, error_code=result.error, producer_id=result.producer_id,
                                  producer_epoch=result.producer_epoch)
