"""Producer ids: an allocator that never hands out the same id twice, even across crashes, and the transaction
coordinator's map from transactional id to producer id and epoch. InitProducerId is the only caller.

Allocation. Ids are claimed in blocks of 1000, the block size Kafka's controller hands to its brokers. Before the
first id of a block is handed out, the start of the following block is written to `<data dir>/producer-id-block`
(a temp file, fsync, rename, fsync of the directory), so after a crash or a restart allocation resumes beyond
every id that may have been used; the unused rest of a block is skipped, as in Kafka. The first block also starts
above every producer id that a partition log or the transactional map still knows, so a data directory without
the file (one written by Kafka, or one whose file was lost) cannot hand out an id the logs already track.

Transactional ids, by the rules of Kafka's transaction coordinator:
- a transactional id seen for the first time gets a new producer id with epoch 0;
- a later InitProducerId without a producer id and epoch (a new producer instance) bumps the epoch, which fences
  the previous instance;
- one with a producer id and epoch (KIP-360, a producer recovering from an error) is accepted when the producer id
  is the current one, or the previous one with a spent epoch (a retry after a producer id rotation); otherwise
  PRODUCER_FENCED. An accepted request bumps the epoch when it names the current epoch and returns the current
  epoch unchanged when it names the previous one (a retry of a bump whose response was lost); any other epoch is
  PRODUCER_FENCED;
- when the epoch has reached 32766 (Kafka keeps 32767 for fencing) the next bump rotates to a new producer id
  with epoch 0;
- the transaction timeout must be in (0, `transaction.max.timeout.ms`] (INVALID_TRANSACTION_TIMEOUT), and is
  stored with the id;
- while one InitProducerId for a transactional id is being written, another for the same id is answered
  CONCURRENT_TRANSACTIONS (retriable);
- a transactional id not touched for `transactional.id.expiration.ms` is forgotten by `expire_transactional_ids`.
A change is acknowledged only once it is durable.

Deviation: Kafka keeps the transactional map as records of `__transaction_state`; here it is one JSON file,
`<data dir>/transactional-ids.json`, replaced atomically on every change. Transactions themselves are not run by
this broker, so every transactional id is in Kafka's Empty state.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from .protocol.error_codes import ErrorCode
from .protocol.records.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from .storage.checkpoints import write_atomically

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)

BLOCK_SIZE = 1000
LAST_USABLE_EPOCH = 32766  # Short.MAX_VALUE - 1: Kafka keeps the maximum for fencing a producer
PRODUCER_ID_BLOCK_FILE = "producer-id-block"
TRANSACTIONAL_IDS_FILE = "transactional-ids.json"
_FORMAT_VERSION = 1


class ProducerIdsError(Exception):
    """A producer id file is unreadable: allocating ids without it could repeat one, so nothing is allocated."""


class ProducerIdBlockUnavailable(Exception):
    """No block of producer ids could be claimed because the disk refused the write (Kafka's broker answers
    COORDINATOR_LOAD_IN_PROGRESS while it has no block to allocate from)."""


@dataclass(frozen=True)
class ProducerIdSettings:
    """The broker settings of the transaction coordinator, with Kafka's defaults."""

    transactional_id_expiration_ms: int = 604_800_000  # 7 days
    transaction_max_timeout_ms: int = 900_000          # 15 minutes

    @classmethod
    def from_config(cls, config) -> ProducerIdSettings:
        return cls(transactional_id_expiration_ms=config.transactional_id_expiration_ms,
                   transaction_max_timeout_ms=config.transaction_max_timeout_ms)


@dataclass(frozen=True)
class TransactionalProducer:
    """What the coordinator keeps per transactional id (Kafka's TransactionMetadata, less the transaction)."""

    producer_id: int
    producer_epoch: int          # -1 only for an id created but not yet stored
    previous_producer_id: int    # the producer id before the last change: a retry after a rotation names it
    last_producer_epoch: int     # the epoch before the last bump asked for by a recovering producer, else -1
    transaction_timeout_ms: int
    last_update_ms: int


class InitResult(NamedTuple):
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


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


# --- transactional ids --------------------------------------------------------------------------------------------

class TransactionalIds:
    """The transactional id map: InitProducerId's state transitions, stored before they are acknowledged."""

    def __init__(self, path: str, settings: ProducerIdSettings, allocate: Callable[[], Awaitable[int]]):
        self.path = path
        self.settings = settings
        self._allocate = allocate
        self._entries: dict[str, TransactionalProducer] = read_transactional_ids(path)
        self._pending: set[str] = set()  # an InitProducerId for these is being decided or written
        self._writing = asyncio.Lock()   # one file write at a time, each holding every committed change

    def get(self, transactional_id: str) -> TransactionalProducer | None:
        return self._entries.get(transactional_id)

    def producer_ids(self) -> set[int]:
        return {pid for entry in self._entries.values() for pid in (entry.producer_id, entry.previous_producer_id)}

    async def init_producer_id(self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None,
                               now_ms: int) -> InitResult:
        """InitProducerId for a (non-empty) transactional id; `expected` is the request's producer id and epoch
        (KIP-360), None when it carries none."""
        if not 0 < timeout_ms <= self.settings.transaction_max_timeout_ms:
            return InitResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        if transactional_id in self._pending:
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        self._pending.add(transactional_id)  # before the first await: a concurrent request must see it
        try:
            current = self._entries.get(transactional_id)
            if current is None:
                current = TransactionalProducer(await self._allocate(), NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
                                                NO_PRODUCER_EPOCH, timeout_ms, now_ms)
            changed = await self._next_state(current, expected, timeout_ms, now_ms)
            if isinstance(changed, ErrorCode):
                return InitResult(changed)
            await self._store(transactional_id, changed)
        finally:
            self._pending.discard(transactional_id)
        log.info("transactional id %s: producer id %d, epoch %d", transactional_id, changed.producer_id,
                 changed.producer_epoch)
        return InitResult(ErrorCode.NONE, changed.producer_id, changed.producer_epoch)

    async def expire(self, now_ms: int) -> list[str]:
        """Forget the transactional ids idle for `transactional.id.expiration.ms`; returns them."""
        async with self._writing:
            deadline = now_ms - self.settings.transactional_id_expiration_ms
            expired = [transactional_id for transactional_id, entry in self._entries.items()
                       if entry.last_update_ms <= deadline and transactional_id not in self._pending]
            if not expired:
                return []
            gone = set(expired)
            kept = {tid: entry for tid, entry in self._entries.items() if tid not in gone}
            await asyncio.get_running_loop().run_in_executor(None, write_transactional_ids, self.path, kept)
            for transactional_id in expired:
                self._entries.pop(transactional_id, None)
        log.info("expired %d transactional id(s) idle for %d ms", len(expired),
                 self.settings.transactional_id_expiration_ms)
        return expired

    async def _next_state(self, current: TransactionalProducer, expected: tuple[int, int] | None, timeout_ms: int,
                          now_ms: int) -> TransactionalProducer | ErrorCode:
        if expected is not None and not _may_resume(current, *expected):
            return ErrorCode.PRODUCER_FENCED
        if current.producer_epoch >= LAST_USABLE_EPOCH and (expected is None or expected[1] == current.producer_epoch):
            last_epoch = current.producer_epoch if expected is not None else NO_PRODUCER_EPOCH
            return TransactionalProducer(await self._allocate(), 0, current.producer_id, last_epoch, timeout_ms,
                                         now_ms)
        return _bump_epoch(current, None if expected is None else expected[1], timeout_ms, now_ms)

    async def _store(self, transactional_id: str, entry: TransactionalProducer) -> None:
        async with self._writing:
            snapshot = dict(self._entries)
            snapshot[transactional_id] = entry
            await asyncio.get_running_loop().run_in_executor(None, write_transactional_ids, self.path, snapshot)
            self._entries[transactional_id] = entry  # under the lock: the next write's snapshot includes it


def _may_resume(current: TransactionalProducer, producer_id: int, producer_epoch: int) -> bool:
    """May a producer naming this id and epoch continue (Kafka's check before any epoch comparison)?"""
    return (current.producer_epoch == NO_PRODUCER_EPOCH or producer_id == current.producer_id
            or (producer_id == current.previous_producer_id and producer_epoch >= LAST_USABLE_EPOCH))


def _bump_epoch(current: TransactionalProducer, expected_epoch: int | None, timeout_ms: int,
                now_ms: int) -> TransactionalProducer | ErrorCode:
    bumped = current.producer_epoch + 1
    if expected_epoch is None:  # a new producer instance: fence every older one
        epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
    elif current.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == current.producer_epoch:
        epoch, last_epoch = bumped, current.producer_epoch
    elif expected_epoch == current.last_producer_epoch:  # a retry of the bump that made the current epoch
        epoch, last_epoch = current.producer_epoch, current.last_producer_epoch
    else:
        return ErrorCode.PRODUCER_FENCED
    return TransactionalProducer(current.producer_id, epoch, current.producer_id, last_epoch, timeout_ms, now_ms)


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
    """The broker's producer id manager: what InitProducerId and the periodic expiration use."""

    def __init__(self, data_dir: str, settings: ProducerIdSettings | None = None, *, log_producer_ids=()):
        """`log_producer_ids`: producer ids the partition logs still track (allocation starts above them)."""
        self.settings = settings or ProducerIdSettings()
        self.transactional = TransactionalIds(os.path.join(data_dir, TRANSACTIONAL_IDS_FILE), self.settings,
                                              self.new_producer_id)
        known = set(log_producer_ids) | self.transactional.producer_ids()
        self.blocks = ProducerIdBlocks(os.path.join(data_dir, PRODUCER_ID_BLOCK_FILE),
                                       floor=max(known, default=-1) + 1)

    async def new_producer_id(self) -> int:
        return await self.blocks.allocate()

    async def init_transactional(self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None,
                                 now_ms: int) -> InitResult:
        return await self.transactional.init_producer_id(transactional_id, timeout_ms, expected, now_ms)

    async def expire_transactional_ids(self, now_ms: int) -> list[str]:
        return await self.transactional.expire(now_ms)


def producer_ids_of(broker: Broker) -> ProducerIds:
    """The broker's producer id manager, made on first use from its data directory."""
    manager = getattr(broker, "producer_ids", None)
    if manager is None:
        manager = ProducerIds(broker.logs.data_dir, ProducerIdSettings.from_config(broker.config),
                              log_producer_ids=_producer_ids_in_logs(broker))
        broker.producer_ids = manager
    return manager


def _producer_ids_in_logs(broker: Broker) -> set[int]:
    return {entry.producer_id for partition_log in broker.logs.logs.values()
            for entry in partition_log.producer_state.active_producers()}
