"""Producer ids: an allocator that never hands out the same id twice in the cluster, even across crashes.
InitProducerId (directly for idempotent producers, through the transaction coordinator for transactional ones) is
the only caller.

Allocation. Each node hands out ids from blocks of 1000 it claims from the controller, as Kafka's brokers do
with AllocateProducerIds: `host.cluster.controller.allocate_producer_id_block(floor)` (the controller's side is
compatbroker/cluster/producer_id_blocks.py). The controller records the start of the following block in
`<data dir>/producer-id-block` (the cluster's data directory; a single node's is its own) before answering, so
after a crash or a restart allocation resumes beyond every id that may have been used; the unused rest of a
block is skipped, as in Kafka. A node's first claim also starts above every producer id its partition logs or
`transactional-ids.json` still know, and the transaction coordinator raises the floor above the ids of
`__transaction_state` once it has loaded a partition (`raise_floor`), so a data directory without the block file
(one written by Kafka, or one whose file was lost) cannot hand out an id in use.

`transactional-ids.json`: earlier versions of compatbroker kept the transactional ids here, in a JSON file replaced
atomically on every change. The transaction coordinator (compatbroker.coordinator.transactions) now keeps them in
`__transaction_state`; it migrates the file once at start and deletes it. Its format (read_transactional_ids,
write_transactional_ids, TransactionalProducer) stays here for that migration:
`{"version": 1, "transactional_ids": {id: {producer_id, producer_epoch, previous_producer_id, last_producer_epoch,
transaction_timeout_ms, last_update_ms}}}`.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .storage.checkpoints import write_atomically

if TYPE_CHECKING:
    from .coordinator.host import CoordinatorHost

log = logging.getLogger(__name__)

BLOCK_SIZE = 1000
PRODUCER_ID_BLOCK_FILE = "producer-id-block"
TRANSACTIONAL_IDS_FILE = "transactional-ids.json"
_FORMAT_VERSION = 1


class ProducerIdsError(Exception):
    """A producer id file is unreadable: allocating ids without it could repeat one, so nothing is allocated."""


class ProducerIdBlockUnavailable(Exception):
    """No block of producer ids could be claimed because the disk refused the write (Kafka's broker answers
    COORDINATOR_LOAD_IN_PROGRESS while it has no block to allocate from)."""


@dataclass(frozen=True)
class TransactionalProducer:
    """One entry of `transactional-ids.json` (what the coordinator kept per transactional id in earlier versions)."""

    producer_id: int
    producer_epoch: int          # -1 only for an id created but not yet stored
    previous_producer_id: int    # the producer id before the last change: a retry after a rotation names it
    last_producer_epoch: int     # the epoch before the last bump asked for by a recovering producer, else -1
    transaction_timeout_ms: int
    last_update_ms: int


# --- allocation ---------------------------------------------------------------------------------------------------

ClaimBlock = Callable[[int], Awaitable[range]]
"""Claims the next block of ids at or above a floor (the controller's `allocate_producer_id_block`)."""


class ProducerIds:
    """A node's producer id manager: hands out the ids of the block it holds, and claims the next one when it is
    spent."""

    def __init__(self, claim_block: ClaimBlock, *, floor: int = 0):
        """`floor`: no id below it is handed out (producer ids this node's data still knows)."""
        self._claim_block = claim_block
        self._floor = floor
        self._next_id = 0
        self._block_end = 0  # no block held yet
        self._claiming = asyncio.Lock()

    async def new_producer_id(self) -> int:
        """An id never handed out before in the cluster. Raises ProducerIdBlockUnavailable when a block is needed
        and the controller cannot record one, ProducerIdsError when its file is unreadable."""
        while self._next_id >= self._block_end:
            async with self._claiming:
                if self._next_id >= self._block_end:
                    block = await self._claim_block(self._floor)
                    self._next_id, self._block_end = max(block.start, self._floor), block.stop
        producer_id = self._next_id
        self._next_id += 1
        return producer_id

    def raise_floor(self, floor: int) -> None:
        """Never hand out an id below `floor` from now on: the rest of the current block too when it is below."""
        self._floor = max(self._floor, floor)
        if self._next_id < floor:
            self._next_id = self._block_end  # the next allocation claims a block at or above the floor


def read_next_block(path: str) -> int:
    """The first producer id no block has claimed yet (0 when the file does not exist)."""
    document = _read_json(path)
    if document is None:
        return 0
    value = document.get("next_producer_id")
    if not isinstance(value, int) or value < 0:
        raise ProducerIdsError(f"{path}: next_producer_id is missing or invalid")
    return value


def write_next_block(path: str, next_producer_id: int) -> None:
    write_atomically(path, json.dumps({"version": _FORMAT_VERSION, "next_producer_id": next_producer_id}) + "\n")


# --- transactional-ids.json (migrated by the transaction coordinator) ------------------------------------------

_ENTRY_FIELDS = ("producer_id", "producer_epoch", "previous_producer_id", "last_producer_epoch",
                 "transaction_timeout_ms", "last_update_ms")


def read_transactional_ids(path: str) -> dict[str, TransactionalProducer]:
    document = _read_json(path)
    if document is None:
        return {}
    entries = document.get("transactional_ids")
    if not isinstance(entries, dict):
        raise ProducerIdsError(f"{path}: transactional_ids is missing")
    try:
        return {transactional_id: TransactionalProducer(**{name: int(fields[name]) for name in _ENTRY_FIELDS})
                for transactional_id, fields in entries.items()}
    except (KeyError, TypeError, ValueError) as exc:
        raise ProducerIdsError(f"{path}: a transactional id entry is invalid: {exc!r}") from None


def write_transactional_ids(path: str, entries: dict[str, TransactionalProducer]) -> None:
    document = {"version": _FORMAT_VERSION,
                "transactional_ids": {transactional_id: {name: getattr(entry, name) for name in _ENTRY_FIELDS}
                                      for transactional_id, entry in sorted(entries.items())}}
    write_atomically(path, json.dumps(document, indent=1) + "\n")


def _read_json(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as source:
            document = json.load(source)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ProducerIdsError(f"cannot read {path}: {exc}") from None
    if not isinstance(document, dict) or document.get("version") != _FORMAT_VERSION:
        raise ProducerIdsError(f"{path}: not a version {_FORMAT_VERSION} producer id file")
    return document


# --- the node's manager -------------------------------------------------------------------------------------------

def producer_ids_of(host: CoordinatorHost) -> ProducerIds:
    """The node's producer id manager, made on first use; its first claim starts above the producer ids the node's
    logs and `transactional-ids.json` know. Raises ProducerIdsError when that file is unreadable."""
    manager = host.producer_ids
    if manager is None:
        known = _producer_ids_in_logs(host) | _producer_ids_in_file(os.path.join(host.logs.data_dir,
                                                                                 TRANSACTIONAL_IDS_FILE))
        manager = ProducerIds(host.cluster.controller.allocate_producer_id_block, floor=max(known, default=-1) + 1)
        host.producer_ids = manager
    return manager


def _producer_ids_in_file(path: str) -> set[int]:
    return {pid for entry in read_transactional_ids(path).values()
            for pid in (entry.producer_id, entry.previous_producer_id)}


def _producer_ids_in_logs(host: CoordinatorHost) -> set[int]:
    return {entry.producer_id for partition_log in host.logs.logs.values()
            for entry in partition_log.producer_state.active_producers()}
