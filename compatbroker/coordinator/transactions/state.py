"""A transactional id's state, as Kafka's transaction coordinator keeps it (TransactionMetadata).

States and their ids in `__transaction_state`: Empty 0, Ongoing 1, PrepareCommit 2, PrepareAbort 3, CompleteCommit 4,
CompleteAbort 5, Dead 6, PrepareEpochFence 7. A state may only be entered from the states Kafka lists as its valid
previous states (`VALID_PREVIOUS_STATES`); Kafka 4.x also lets a transactions-v2 client abort when no transaction
is open (Empty/CompleteCommit/CompleteAbort -> PrepareAbort), which bumps the epoch without writing markers.

`TransactionMetadata` is immutable: every change is a new value that the coordinator writes to the log first and
puts in memory only once it is durable. PrepareEpochFence and Dead are never written: the first is the pending
step of a fence (the coordinator writes PrepareAbort with the bumped epoch), the second a tombstone on its way.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import IntEnum

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_START_TIME = -1
LAST_USABLE_EPOCH = 32766  # Short.MAX_VALUE - 1: an epoch this high is "exhausted"; Kafka keeps 32767 for fencing


class TransactionState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name Kafka prints (DescribeTransactions, ListTransactions)."""
        return _NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)

    @property
    def is_prepare(self) -> bool:
        return self in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        return self in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)

    @property
    def expiration_allowed(self) -> bool:
        """Kafka's isExpirationAllowed: no transaction is open."""
        return self in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)


_NAMES = {
    TransactionState.EMPTY: "Empty", TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit", TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit", TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead", TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}

_S = TransactionState
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE, _S.EMPTY, _S.COMPLETE_COMMIT,
                                 _S.COMPLETE_ABORT}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


class IllegalTransition(Exception):
    """A transition Kafka does not allow: a bug in the coordinator, never the client's doing."""


def is_epoch_exhausted(producer_epoch: int) -> bool:
    return producer_epoch >= LAST_USABLE_EPOCH


@dataclass(frozen=True)
class TransactionMetadata:
    """One transactional id: its producer, its transaction (state, partitions, start time) and timestamps."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState = TransactionState.EMPTY
    partitions: frozenset[tuple[str, int]] = frozenset()
    transaction_start_time_ms: int = NO_START_TIME
    last_update_time_ms: int = 0
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID     # TV2: the id that replaces an exhausted one when the txn completes
    last_producer_epoch: int = NO_PRODUCER_EPOCH  # not stored in the log (as in Kafka): lost on restart
    client_transaction_version: int = 0

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def tv2(self) -> bool:
        return self.client_transaction_version >= 2

    def transition(self, state: TransactionState, **changes) -> TransactionMetadata:
        """The metadata after moving to `state` with `changes` (raises IllegalTransition when Kafka forbids it)."""
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalTransition(f"transactional id {self.transactional_id}: {self.state.kafka_name} -> "
                                    f"{state.kafka_name} is not a valid transition")
        return dataclasses.replace(self, state=state, **changes)
