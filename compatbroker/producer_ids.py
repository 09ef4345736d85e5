"""Producer ids: an allocator that never hands out the same id twice, even across crashes. InitProducerId (directly
for idempotent producers, through the transaction coordinator for transactional ones) is the only caller.

Allocation. Ids are claimed in blocks of 1000, the block size Kafka's controller hands to its brokers. Before the
first id of a block is handed out, the start of the following block is written to `<data dir>/producer-id-block`
(a temp file, fsync, rename, fsync of the directory), so after a crash or a restart allocation resumes beyond
every id that may have been used; the unused rest of a block is skipped, as in Kafka. The first block also starts
above every producer id that a partition log or `transactional-ids.json` still knows, and the transaction
coordinator raises the floor above the ids of `__transaction_state` once it has loaded (`raise_floor`), so a data
directory without the block file (one written by Kafka, or one whose file was lost) cannot hand out an id in use.

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
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .storage.checkpoints import write_atomically

if TYPE_CHECKING:
    from .broker import Broker

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

class ProducerIdBlocks:
    """Hands out producer ids from blocks that are claimed durably before their first id is used."""

    def __init__(self, path: str, floor: int = 0):
        self.path = path
        self._next_block = max(read_next_block(path), floor)
        self._next_id = 0
        self._block_end = 0  # no block claimed yet
        self._claiming = asyncio.Lock()

    async def allocate(self) -> int:
        """A producer id never handed out before by this data directory. Raises ProducerIdBlockUnavailable when a
        new block is needed and cannot be recorded."""
        while self._next_id >= self._block_end:
            async with self._claiming:
                if self._next_id >= self._block_end:
                    await self._claim_block()
        producer_id = self._next_id
        self._next_id += 1
        return producer_id

    def raise_floor(self, floor: int) -> None:
        """Skip every id below `floor`: the rest of the current block too when it starts below it."""
        self._next_block = max(self._next_block, floor)
        if self._next_id < floor:
            self._next_id = self._block_end  # the next allocation claims a block at or above the floor

    async def _claim_block(self) -> None:
        start = self._next_block
        end = start + BLOCK_SIZE
        try:
            await asyncio.get_running_loop().run_in_executor(None, write_next_block, self.path, end)
        except OSError as exc:
            raise ProducerIdBlockUnavailable(f"cannot record producer id block {start}-{end - 1}: {exc}") from exc
        self._next_block = end
        self._next_id, self._block_end = start, end
        log.info("claimed producer ids %d-%d", start, end - 1)


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


# --- the broker's manager -----------------------------------------------------------------------------------------

class ProducerIds:
    """The broker's producer id manager."""

    def __init__(self, data_dir: str, *, log_producer_ids=()):
        """`log_producer_ids`: producer ids the partition logs still track (allocation starts above them)."""
        known = set(log_producer_ids) | _producer_ids_in_file(os.path.join(data_dir, TRANSACTIONAL_IDS_FILE))
        self.blocks = ProducerIdBlocks(os.path.join(data_dir, PRODUCER_ID_BLOCK_FILE),
                                       floor=max(known, default=-1) + 1)

    async def new_producer_id(self) -> int:
        return await self.blocks.allocate()

    def raise_floor(self, floor: int) -> None:
        """Never hand out an id below `floor` from now on (ids learned after start, e.g. from the transaction log)."""
        self.blocks.raise_floor(floor)


def _producer_ids_in_file(path: str) -> set[int]:
    return {pid for entry in read_transactional_ids(path).values()
            for pid in (entry.producer_id, entry.previous_producer_id)}


def producer_ids_of(broker: Broker) -> ProducerIds:
    """The broker's producer id manager, made on first use from its data directory."""
    manager = getattr(broker, "producer_ids", None)
    if manager is None:
        manager = ProducerIds(broker.logs.data_dir, log_producer_ids=_producer_ids_in_logs(broker))
        broker.producer_ids = manager
    return manager


def _producer_ids_in_logs(broker: Broker) -> set[int]:
    return {entry.producer_id for partition_log in broker.logs.logs.values()
            for entry in partition_log.producer_state.active_producers()}
