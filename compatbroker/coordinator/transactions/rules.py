"""Kafka's decisions for InitProducerId and EndTxn, as pure functions of a transactional id's metadata (the
coordinator writes what they return; see coordinator.py for the rules in words)."""
from __future__ import annotations

from ...protocol.error_codes import ErrorCode
from .state import LAST_USABLE_EPOCH, NO_PRODUCER_EPOCH, NO_START_TIME, TransactionMetadata, is_epoch_exhausted
from .state import TransactionState as S


def may_resume(current: TransactionMetadata, producer_id: int, producer_epoch: int) -> bool:
    """May a producer naming this id and epoch continue (Kafka's isValidProducerId, before any epoch check)?"""
    return (current.producer_epoch == NO_PRODUCER_EPOCH or producer_id == current.producer_id
            or (producer_id == current.previous_producer_id and is_epoch_exhausted(producer_epoch)))


def bump_epoch(current: TransactionMetadata, expected_epoch: int | None, timeout_ms: int,
               now_ms: int) -> TransactionMetadata | ErrorCode:
    """Kafka's prepareIncrementProducerEpoch: a new instance fences every older one; a recovering producer (KIP-360)
    bumps its current epoch, or repeats the bump it made last time (its response was lost)."""
    bumped = current.producer_epoch + 1
    if expected_epoch is None:
        epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
    elif current.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == current.producer_epoch:
        epoch, last_epoch = bumped, current.producer_epoch
    elif expected_epoch == current.last_producer_epoch:
        epoch, last_epoch = current.producer_epoch, current.last_producer_epoch
    else:
        return ErrorCode.PRODUCER_FENCED
    return current.transition(S.EMPTY, producer_epoch=epoch, last_producer_epoch=last_epoch,
                              previous_producer_id=current.producer_id, transaction_timeout_ms=timeout_ms,
                              partitions=frozenset(), transaction_start_time_ms=NO_START_TIME,
                              last_update_time_ms=now_ms)


def end_decision(current: TransactionMetadata, producer_id: int, producer_epoch: int, commit: bool, tv2: bool,
                 pending: bool) -> ErrorCode | None:
    """EndTxn's answer when no transition is written, or None to prepare the end (Kafka 4.x, KIP-890). The
    checks run in Kafka's order: producer id, a transition in progress, epoch, then the state."""
    retry_on_overflow = (current.tv2 and current.previous_producer_id == producer_id
                         and producer_epoch == LAST_USABLE_EPOCH and current.producer_epoch == 0)
    retry_on_bump = current.tv2 and current.producer_epoch == producer_epoch + 1
    if current.producer_id != producer_id and not retry_on_overflow:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if pending:
        return ErrorCode.CONCURRENT_TRANSACTIONS
    state = current.state
    is_current = producer_epoch == current.producer_epoch and current.producer_id == producer_id
    if state is S.ONGOING:
        return None if is_current else ErrorCode.PRODUCER_FENCED
    same_result = state in ((S.PREPARE_COMMIT, S.COMPLETE_COMMIT) if commit else (S.PREPARE_ABORT, S.COMPLETE_ABORT))
    if not tv2:
        if not is_current:
            return ErrorCode.PRODUCER_FENCED
        if state.is_prepare:
            return ErrorCode.CONCURRENT_TRANSACTIONS if same_result else ErrorCode.INVALID_TXN_STATE
        return ErrorCode.NONE if same_result else ErrorCode.INVALID_TXN_STATE
    if state.is_prepare:  # TV2: only a retry of the end that bumped the epoch may find it preparing
        if not retry_on_bump:
            return ErrorCode.PRODUCER_FENCED
        return ErrorCode.CONCURRENT_TRANSACTIONS if same_result else ErrorCode.INVALID_TXN_STATE
    # Empty, CompleteCommit, CompleteAbort with TV2: the current epoch may abort (an epoch bump with an empty
    # transaction); a retry finds its own result done. Empty answers a retried abort PRODUCER_FENCED.
    if is_current:
        return ErrorCode.INVALID_TXN_STATE if commit else None
    if retry_on_bump or retry_on_overflow:
        if state is S.EMPTY and not commit:
            return ErrorCode.PRODUCER_FENCED
        return ErrorCode.NONE if same_result else ErrorCode.INVALID_TXN_STATE
    return ErrorCode.PRODUCER_FENCED
