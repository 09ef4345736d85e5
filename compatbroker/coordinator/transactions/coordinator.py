"""The transaction coordinator: Kafka's rules for transactional ids and their transactions, kept durable in
`__transaction_state` (internal, compacted, `transaction.state.log.num.partitions` partitions; a transactional id
lives in partition `abs(hashCode(id)) % partitions`, as a group does in `__consumer_offsets`).

Every state change is one batch of `__transaction_state` (origin COORDINATOR), and is acknowledged and applied in
memory only once durable under the flush policy (as the group coordinator's offsets are). While a change of a
transactional id is being written the id has a pending transition, and requests for it answer
CONCURRENT_TRANSACTIONS (retriable). A failed write answers Kafka's mapping of the append error (NOT_COORDINATOR
for a failing disk) and leaves memory unchanged.

Rules (Kafka's TransactionCoordinator; 4.x with KIP-890):
- InitProducerId: a new id gets a new producer id with epoch 0; otherwise the epoch is bumped (fencing older
  instances), with the KIP-360 checks of a producer id and epoch named by the request; an exhausted epoch (32766)
  rotates to a new producer id. An Ongoing transaction is aborted first (its epoch bumped, PrepareAbort written,
  markers written with the bumped epoch, CompleteAbort written) and the request answered CONCURRENT_TRANSACTIONS;
  the client retries and then gets the next epoch. PrepareCommit/PrepareAbort: CONCURRENT_TRANSACTIONS.
- AddPartitionsToTxn / AddOffsetsToTxn: Empty/CompleteX -> Ongoing (the start time set), partitions already in the
  transaction need no write; wrong producer id INVALID_PRODUCER_ID_MAPPING; other epoch PRODUCER_FENCED;
  PrepareX CONCURRENT_TRANSACTIONS.
- Verification before a transactional append (`verify_for_append`): a request is transactions v2 ("TV2") when its
  API version is new enough (Produce >= 12, TxnOffsetCommit >= 5, EndTxn >= 5, AddPartitionsToTxn >= 5: Kafka's
  "version > 4") and the broker's finalized `transaction.version` (Broker.finalized_transaction_version) is >= 2;
  the handlers decide and pass `tv2` (the transaction records the client's version, as Kafka 4.x does). TV2
  adds the partition implicitly (durably, starting the transaction if needed); TV1 only verifies it is in the
  Ongoing transaction (TRANSACTION_ABORTABLE when not) if `transaction.partition.verification.enable` is true.
- EndTxn: Ongoing -> PrepareX (durable), markers to every partition, CompleteX (durable). The answer comes once
  PrepareX is durable and one attempt to complete has run (Kafka answers after PrepareX; a failed completion is
  retried in the background until it succeeds). A repeated EndTxn of the finished result answers NONE, of the other
  result INVALID_TXN_STATE; Empty INVALID_TXN_STATE. With TV2 the epoch is bumped at every end (an exhausted one
  rotates the producer id when the transaction completes) and the result carries the producer id and epoch to use;
  an EndTxn one epoch older than the current one is a retry (KIP-890), and an abort with the current epoch in
  Empty/CompleteCommit/CompleteAbort is an epoch bump without markers (Kafka 4.x's table in
  TransactionCoordinator: a retried abort in Empty is PRODUCER_FENCED, a retry of the other result
  INVALID_TXN_STATE). Fencing an Ongoing transaction bumps the epoch once, also with TV2 (KAFKA-19367).
  Marker errors: a partition that no longer exists is done (Kafka skips it), an epoch or coordinator-epoch refusal
  is logged and done (retrying cannot help), other errors are retried, for the failed partitions only.
- Timeouts: every `transaction.abort.timed.out.transaction.cleanup.interval.ms` the broker calls
  `abort_timed_out_transactions`: an Ongoing transaction older than its timeout is aborted with a bumped epoch
  (its producer is fenced). Every `transaction.remove.expired.transaction.cleanup.interval.ms`,
  `expire_transactional_ids` writes tombstones for ids without an open transaction idle for
  `transactional.id.expiration.ms`.
- Coordinators move with leadership: a node coordinates the transactional ids of the partitions of
  `__transaction_state` it leads (`ownership.py`; `on_leadership_change`, called by the node). A partition gained
  is replayed from the node's replica (loader.py): PrepareCommit/PrepareAbort transactions get their markers
  (re)written and are completed; Ongoing ones stay open (their timeout applies); producer id allocation is raised
  above every producer id it knows. Requests for its ids answer COORDINATOR_LOAD_IN_PROGRESS meanwhile. A partition
  lost drops its ids (their marker retries stop: the new coordinator completes them), and requests for them answer
  NOT_COORDINATOR, as does a write that finds its partition gone once it is durable. The coordinator epoch in
  markers is the partition's leader epoch when it was gained, as in Kafka.
- Writes go to this node's replica while it leads the partition and are acknowledged once the in-sync replicas
  have them (`appends.py`, waiting up to Kafka's `request.timeout.ms` default); markers go to each data
  partition's leader node (markers.py). AddPartitionsToTxn verification asked of a node that does not coordinate
  the id (a partition leader checking a Produce or TxnOffsetCommit) is passed to the node that does, as Kafka's
  partition leaders send it to the coordinator.
- Start: the partitions this node leads are loaded; `<data dir>/transactional-ids.json` (the map earlier versions
  of compatbroker kept, see producer_ids.py) is then migrated once (Empty state, same producer id and epoch) and
  deleted.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from ...producer_ids import (TRANSACTIONAL_IDS_FILE, ProducerIdBlockUnavailable, ProducerIdsError, producer_ids_of,
                             read_transactional_ids)
from ...protocol.error_codes import ErrorCode
from ...protocol.records.batch import build_batch
from ...storage import StorageError
from ...storage.validator import COORDINATOR
from ...topic_names import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC
from ..appends import check_before_append, coordinator_error, wait_for_replicas
from ..host import CoordinatorHost
from ..offsets import partition_for_group
from ..ownership import PartitionOwnership, is_cluster_of_one
from .loader import replay_partition
from .markers import write_markers
from .records import encode_key, encode_value
from .rules import bump_epoch, end_decision, may_resume
from .state import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_START_TIME, TransactionMetadata, TransactionState

if TYPE_CHECKING:
    from ...storage import Log

log = logging.getLogger(__name__)

S = TransactionState
APPEND_TIMEOUT_MS = 30_000  # Kafka waits for the replicas of a transaction log append up to request.timeout.ms
_MARKER_RETRY_BACKOFF_S = (0.1, 5.0)  # first and longest wait before writing markers again
# Marker errors after which the partition counts as done: gone, or refused for good (Kafka stops sending too).
_MARKER_DONE = frozenset({ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_PRODUCER_EPOCH,
                          ErrorCode.TRANSACTION_COORDINATOR_FENCED})

Partition = tuple[str, int]


class InitResult(NamedTuple):
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


class EndResult(NamedTuple):
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


class TransactionView(NamedTuple):
    """What DescribeTransactions, ListTransactions and the toolkit show of a transactional id."""

    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int
    partitions: list[Partition]  # sorted


@dataclass(frozen=True)
class TransactionConfig:
    """The broker settings of the transaction coordinator (Kafka's names in config.py, Kafka's defaults)."""

    max_timeout_ms: int = 900_000                 # transaction.max.timeout.ms
    transactional_id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    num_partitions: int = 50                      # transaction.state.log.num.partitions
    segment_bytes: int = 104_857_600              # transaction.state.log.segment.bytes

    @classmethod
    def from_config(cls, config) -> TransactionConfig:
        return cls(max_timeout_ms=config.transaction_max_timeout_ms,
                   transactional_id_expiration_ms=config.transactional_id_expiration_ms,
                   num_partitions=config.transaction_state_log_num_partitions,
                   segment_bytes=config.transaction_state_log_segment_bytes)

    def topic_configs(self) -> dict[str, str]:
        """Topic-level overrides Kafka gives `__transaction_state`."""
        return {"cleanup.policy": "compact", "segment.bytes": str(self.segment_bytes),
                "compression.type": "uncompressed"}


class TransactionWriteError(Exception):
    """A write to `__transaction_state` failed; `error_code` is what Kafka's coordinator answers."""

    def __init__(self, error_code: ErrorCode, message: str = ""):
        super().__init__(message or error_code.name)
        self.error_code = error_code


class TransactionCoordinator:
    """The broker's transaction coordinator. Everything runs on the event loop."""

    def __init__(self, broker: CoordinatorHost, config: TransactionConfig | None = None):
        self.broker = broker
        self.config = config or TransactionConfig.from_config(broker.config)
        self.loaded = False  # the first load (every partition this node led then) is done
        self.ownership = PartitionOwnership(broker, TRANSACTION_STATE_TOPIC, load=self._load_partition,
                                            unload=self._unload_partition)
        self._metadata: dict[str, TransactionMetadata] = {}
        self._pending: set[str] = set()        # ids with a transition being decided or written
        self._completing: set[str] = set()     # ids whose markers are being written
        self._markers_written: dict[str, set[Partition]] = {}  # partitions of a prepared txn that have their marker
        self._loading: asyncio.Task | None = None
        self._retries: dict[str, asyncio.Task] = {}

    # --- life cycle -----------------------------------------------------------------------------------------------

    def start_soon(self) -> None:
        """Start loading in the background (from a running event loop)."""
        if self._loading is None:
            self._loading = asyncio.get_running_loop().create_task(self._load(),
                                                                   name="compatbroker transactions load")
            self._loading.add_done_callback(_log_load_failure)

    async def start(self) -> None:
        """Replay `__transaction_state` (as the group Coordinator.start does); calling it again waits for the first
        load."""
        self.start_soon()
        await asyncio.shield(self._loading)

    async def load(self) -> None:
        """start() under the name OffsetStore uses for its replay."""
        await self.start()

    async def _load(self) -> None:
        self.ownership.refresh()
        await self.ownership.wait_loaded()
        await self._migrate_transactional_ids_file()
        self.loaded = True

    def on_leadership_change(self, led, lost) -> None:
        """The node now leads the partitions `led` of `__transaction_state` and no longer leads `lost`."""
        self.ownership.on_leadership_change(led, lost)

    def error_for(self, transactional_id: str) -> ErrorCode:
        """NONE when this node coordinates the transactional id and has loaded it, else NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS."""
        if not self.loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return self.ownership.error_for(self.partition_for(transactional_id))

    async def _load_partition(self, partition: int) -> None:
        """Replay a partition this node now leads; complete the transactions it left prepared."""
        partition_log = self.broker.get_log(TRANSACTION_STATE_TOPIC, partition)
        states: dict[str, TransactionMetadata] = {}
        await asyncio.get_running_loop().run_in_executor(
            None, replay_partition, partition_log, partition_log.log_end_offset, states,
            self.broker.config.transaction_state_log_load_buffer_size)
        self._metadata.update(states)
        self._raise_producer_id_floor(states.values())
        log.info("loaded %d transactional id(s) from %s-%d", len(states), TRANSACTION_STATE_TOPIC, partition)
        for transactional_id, metadata in states.items():
            if metadata.state.is_prepare:  # its markers may be missing: write them (again) and complete it
                self._retry_completion(transactional_id, first_delay_s=0.0)

    def _unload_partition(self, partition: int) -> None:
        doomed = [transactional_id for transactional_id in self._metadata
                  if self.partition_for(transactional_id) == partition]
        for transactional_id in doomed:
            del self._metadata[transactional_id]
            self._markers_written.pop(transactional_id, None)
            task = self._retries.pop(transactional_id, None)
            if task is not None:
                task.cancel()
        if doomed:
            log.info("no longer coordinating %d transactional id(s) of %s-%d", len(doomed), TRANSACTION_STATE_TOPIC,
                     partition)

    async def stop(self) -> None:
        """Stop loading and the marker retries (storage is the broker's to close)."""
        tasks = [task for task in (self._loading, *self._retries.values()) if task is not None and not task.done()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._retries.clear()
        await self.ownership.stop()

    # --- InitProducerId -------------------------------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, transaction_timeout_ms: int,
                               expected: tuple[int, int] | None) -> InitResult:
        """InitProducerId for a transactional id; `expected` is the (producer id, epoch) the request names (KIP-360),
        None when it names none."""
        error = self.error_for(transactional_id)
        if error is not ErrorCode.NONE:
            return InitResult(error)
        if not transactional_id:
            return InitResult(ErrorCode.INVALID_REQUEST)
        if not 0 < transaction_timeout_ms <= self.config.max_timeout_ms:
            return InitResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        if transactional_id in self._pending:
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        self._pending.add(transactional_id)  # before the first await: a concurrent request must see it
        try:
            return await self._init(transactional_id, transaction_timeout_ms, expected)
        except ProducerIdBlockUnavailable as exc:
            log.warning("transactional id %s: no producer id to hand out: %s", transactional_id, exc)
            return InitResult(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        except ProducerIdsError as exc:
            log.error("transactional id %s: InitProducerId refused: %s", transactional_id, exc)
            return InitResult(ErrorCode.UNKNOWN_SERVER_ERROR)
        except TransactionWriteError as exc:
            return InitResult(exc.error_code)
        finally:
            self._pending.discard(transactional_id)

    async def _init(self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None) -> InitResult:
        now_ms = self.broker.now_ms()
        current = self._metadata.get(transactional_id)
        if current is None:
            current = TransactionMetadata(transactional_id, await self._new_producer_id(), NO_PRODUCER_EPOCH,
                                          timeout_ms, last_update_time_ms=now_ms)
        if expected is not None and not may_resume(current, *expected):
            return InitResult(ErrorCode.PRODUCER_FENCED)
        if current.state.is_prepare:
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if current.state is S.ONGOING:
            return await self._fence_ongoing(current)
        if current.epoch_exhausted and (expected is None or expected[1] == current.producer_epoch):
            changed = current.transition(
                S.EMPTY, producer_id=await self._new_producer_id(), producer_epoch=0,
                previous_producer_id=current.producer_id,
                last_producer_epoch=current.producer_epoch if expected is not None else NO_PRODUCER_EPOCH,
                transaction_timeout_ms=timeout_ms, partitions=frozenset(), transaction_start_time_ms=NO_START_TIME,
                last_update_time_ms=now_ms)
        else:
            changed = bump_epoch(current, None if expected is None else expected[1], timeout_ms, now_ms)
            if isinstance(changed, ErrorCode):
                return InitResult(changed)
        await self._write([(transactional_id, changed)])
        log.info("transactional id %s: producer id %d, epoch %d", transactional_id, changed.producer_id,
                 changed.producer_epoch)
        return InitResult(ErrorCode.NONE, changed.producer_id, changed.producer_epoch)

    async def _fence_ongoing(self, current: TransactionMetadata) -> InitResult:
        """A new producer instance while a transaction is open: abort it with a bumped epoch; the producer retries."""
        error = await self._abort_with_fence(current, "a new producer instance")
        return InitResult(error if error is not ErrorCode.NONE else ErrorCode.CONCURRENT_TRANSACTIONS)

    # --- adding partitions ----------------------------------------------------------------------------------------

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: list[Partition], *, tv2: bool = False) -> ErrorCode:
        """AddPartitionsToTxn (and the implicit add of TV2): one code for all partitions."""
        error = self.error_for(transactional_id)
        if error is not ErrorCode.NONE:
            return error
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        current = self._metadata.get(transactional_id)
        error = self._check_producer(current, producer_id, producer_epoch)
        if error is not ErrorCode.NONE:
            return error
        if transactional_id in self._pending or current.state.is_prepare:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        added = frozenset(partitions)
        if current.state is S.ONGOING and added <= current.partitions:
            return ErrorCode.NONE
        now_ms = self.broker.now_ms()
        starts = current.state is not S.ONGOING
        changed = current.transition(
            S.ONGOING, partitions=current.partitions | added, last_update_time_ms=now_ms,
            transaction_start_time_ms=now_ms if starts else current.transaction_start_time_ms,
            client_transaction_version=2 if tv2 else (current.client_transaction_version if not starts else 0))
        self._pending.add(transactional_id)
        try:
            await self._write([(transactional_id, changed)])
        except TransactionWriteError as exc:
            return exc.error_code
        finally:
            self._pending.discard(transactional_id)
        return ErrorCode.NONE

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: list[Partition]) -> dict[Partition, ErrorCode]:
        """AddPartitionsToTxn with verify_only: NONE for each partition in the Ongoing transaction, else
        TRANSACTION_ABORTABLE; the same error for all when the producer or the state is wrong."""
        error = self.error_for(transactional_id)
        if error is ErrorCode.NONE and not transactional_id:
            error = ErrorCode.INVALID_REQUEST
        elif error is ErrorCode.NONE:
            current = self._metadata.get(transactional_id)
            error = self._check_producer(current, producer_id, producer_epoch)
            if error is ErrorCode.NONE and current.state.is_prepare:
                error = ErrorCode.CONCURRENT_TRANSACTIONS
            if error is ErrorCode.NONE:
                return {partition: ErrorCode.NONE if partition in current.partitions
                        else ErrorCode.TRANSACTION_ABORTABLE for partition in partitions}
        return {partition: error for partition in partitions}

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          group_id: str) -> ErrorCode:
        """AddOffsetsToTxn: the group's partition of `__consumer_offsets` joins the transaction."""
        partition = partition_for_group(group_id, self._offsets_topic_partitions())
        return await self.add_partitions(transactional_id, producer_id, producer_epoch,
                                         [(GROUP_METADATA_TOPIC, partition)])

    async def verify_for_append(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
                                partition: int, *, tv2: bool, forwarded: bool = False) -> ErrorCode:
        """The check before a transactional append (Produce) or transactional offset commit: TV2 adds the
        partition (starting the transaction if needed); TV1 verifies it is in the transaction when
        `transaction.partition.verification.enable` is true. Asked of a node that does not coordinate the id, the
        check goes to the node that does (COORDINATOR_NOT_AVAILABLE when none leads its partition)."""
        if not forwarded and self.error_for(transactional_id) is ErrorCode.NOT_COORDINATOR:
            coordinator = self._coordinator_node(transactional_id)
            if coordinator is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            return await coordinator.verify_for_append(transactional_id, producer_id, producer_epoch, topic,
                                                       partition, tv2=tv2, forwarded=True)
        if tv2:
            return await self.add_partitions(transactional_id, producer_id, producer_epoch, [(topic, partition)],
                                             tv2=True)
        if not self.broker.config.transaction_partition_verification_enable:
            return ErrorCode.NONE
        return self.verify_partitions(transactional_id, producer_id, producer_epoch, [(topic, partition)])[
            (topic, partition)]

    # --- ending a transaction -------------------------------------------------------------------------------------

    async def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                              *, tv2: bool) -> EndResult:
        """EndTxn: commit or abort the Ongoing transaction (see the module docstring for the rules)."""
        error = self.error_for(transactional_id)
        if error is not ErrorCode.NONE:
            return EndResult(error)
        if not transactional_id:
            return EndResult(ErrorCode.INVALID_REQUEST)
        current = self._metadata.get(transactional_id)
        if current is None:
            return EndResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        outcome = end_decision(current, producer_id, producer_epoch, commit, tv2,
                               transactional_id in self._pending)
        if outcome is ErrorCode.NONE:  # a retry of the end that completed
            return EndResult(ErrorCode.NONE, current.producer_id, current.producer_epoch)
        if outcome is not None:
            return EndResult(outcome)
        self._pending.add(transactional_id)
        try:
            prepared = await self._prepare_end(current, commit, tv2)
        except (ProducerIdBlockUnavailable, ProducerIdsError) as exc:
            log.warning("transactional id %s: no producer id for the rotation: %s", transactional_id, exc)
            return EndResult(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        except TransactionWriteError as exc:
            return EndResult(exc.error_code)
        finally:
            self._pending.discard(transactional_id)
        await self._complete_or_retry(transactional_id)
        if prepared.next_producer_id != NO_PRODUCER_ID:
            return EndResult(ErrorCode.NONE, prepared.next_producer_id, 0)
        return EndResult(ErrorCode.NONE, prepared.producer_id, prepared.producer_epoch)

    async def _prepare_end(self, current: TransactionMetadata, commit: bool, tv2: bool) -> TransactionMetadata:
        next_producer_id = NO_PRODUCER_ID
        if tv2 and current.epoch_exhausted:
            next_producer_id = await self._new_producer_id()
        epoch, last_epoch = ((current.producer_epoch + 1, current.producer_epoch) if tv2
                             else (current.producer_epoch, current.last_producer_epoch))
        prepared = current.transition(
            S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, producer_epoch=epoch, last_producer_epoch=last_epoch,
            next_producer_id=next_producer_id, last_update_time_ms=self.broker.now_ms(),
            client_transaction_version=2 if tv2 else current.client_transaction_version,
            partitions=current.partitions if current.state is S.ONGOING else frozenset(),
            transaction_start_time_ms=(current.transaction_start_time_ms if current.state is S.ONGOING
                                       else self.broker.now_ms()))
        await self._write([(current.transactional_id, prepared)])
        return prepared

    # --- completing: markers, then CompleteCommit/CompleteAbort ---------------------------------------------------

    async def _complete_or_retry(self, transactional_id: str) -> None:
        """One attempt to complete the prepared transaction (shielded: a cancelled request does not stop it);
        when it fails, retries continue in the background."""
        try:
            completed = await asyncio.shield(self._complete(transactional_id))
        except Exception:  # noqa: BLE001 - a bug; the request is answered and the retries go on
            log.exception("transactional id %s: completing the transaction failed", transactional_id)
            completed = False
        if not completed:
            self._retry_completion(transactional_id)

    async def _complete(self, transactional_id: str) -> bool:
        """Write the markers of the prepared transaction, then its CompleteX; False when something must be retried."""
        prepared = self._metadata.get(transactional_id)
        if prepared is None or not prepared.state.is_prepare:
            return True
        if transactional_id in self._completing:
            return False
        self._completing.add(transactional_id)
        try:
            commit = prepared.state is S.PREPARE_COMMIT
            done = self._markers_written.setdefault(transactional_id, set())
            results = await write_markers(self.broker, producer_id=prepared.producer_id,
                                          producer_epoch=prepared.producer_epoch,
                                          coordinator_epoch=self.ownership.coordinator_epoch(
                                              self.partition_for(transactional_id)),
                                          commit=commit,
                                          partitions=sorted(prepared.partitions - done))
            done.update(partition for partition, code in results.items() if code in _MARKER_DONE)
            failed = {partition: code for partition, code in results.items() if code not in _MARKER_DONE}
            if failed:  # only these get their marker again (Kafka drops a partition once its marker is written)
                log.warning("transactional id %s: markers not written yet to %s", transactional_id, failed)
                return False
            if not await self._write_complete(prepared, commit):
                return False
            self._markers_written.pop(transactional_id, None)
            return True
        finally:
            self._completing.discard(transactional_id)

    async def _write_complete(self, prepared: TransactionMetadata, commit: bool) -> bool:
        rotated = prepared.tv2 and prepared.next_producer_id != NO_PRODUCER_ID
        completed = prepared.transition(
            S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT, partitions=frozenset(),
            producer_id=prepared.next_producer_id if rotated else prepared.producer_id,
            producer_epoch=0 if rotated else prepared.producer_epoch,
            previous_producer_id=prepared.producer_id if prepared.tv2 else prepared.previous_producer_id,
            last_producer_epoch=prepared.producer_epoch if prepared.tv2 else prepared.last_producer_epoch,
            next_producer_id=NO_PRODUCER_ID,
            last_update_time_ms=self.broker.now_ms())
        transactional_id = prepared.transactional_id
        self._pending.add(transactional_id)
        try:
            await self._write([(transactional_id, completed)])
        except TransactionWriteError as exc:
            log.warning("transactional id %s: %s not written: %s", transactional_id, completed.state.kafka_name, exc)
            return False
        finally:
            self._pending.discard(transactional_id)
        log.info("transactional id %s: transaction %s", transactional_id,
                 "committed" if commit else "aborted")
        return True

    def _retry_completion(self, transactional_id: str, first_delay_s: float | None = None) -> None:
        task = self._retries.get(transactional_id)
        if task is not None and not task.done():
            return
        self._retries[transactional_id] = asyncio.get_running_loop().create_task(
            self._complete_eventually(transactional_id, first_delay_s),
            name=f"compatbroker transaction completion {transactional_id}")

    async def _complete_eventually(self, transactional_id: str, first_delay_s: float | None) -> None:
        delay_s, longest_s = _MARKER_RETRY_BACKOFF_S
        if first_delay_s is not None:
            delay_s = first_delay_s
        try:
            while True:
                await asyncio.sleep(delay_s)
                try:
                    if await self._complete(transactional_id):
                        return
                except Exception:  # noqa: BLE001 - a bug must not stop the retries of an open transaction
                    log.exception("transactional id %s: completing the transaction failed", transactional_id)
                delay_s = min(max(delay_s * 2, _MARKER_RETRY_BACKOFF_S[0]), longest_s)
        finally:
            if self._retries.get(transactional_id) is asyncio.current_task():
                del self._retries[transactional_id]

    async def _abort_with_fence(self, current: TransactionMetadata, why: str) -> ErrorCode:
        """Abort the Ongoing transaction with a bumped epoch (Kafka's PrepareEpochFence, then PrepareAbort): the
        producer that owned it is fenced. NONE once PrepareAbort is durable (completion follows)."""
        transactional_id = current.transactional_id
        # A failed attempt left memory unchanged, so the retry bumps from the same epoch: the epoch moves once
        # (what Kafka's hasFailedEpochFence ensures for its in-memory bump).
        epoch = current.producer_epoch + 1
        prepared = current.transition(S.PREPARE_ABORT, producer_epoch=epoch, last_producer_epoch=NO_PRODUCER_EPOCH,
                                      last_update_time_ms=self.broker.now_ms())
        try:
            await self._write([(transactional_id, prepared)])
        except TransactionWriteError as exc:
            log.warning("transactional id %s: could not abort its transaction (%s): %s", transactional_id, why, exc)
            return exc.error_code
        log.info("transactional id %s: aborting its transaction (%s), producer epoch bumped to %d",
                 transactional_id, why, epoch)
        self._pending.discard(transactional_id)  # the state (PrepareAbort) now answers others
        await self._complete_or_retry(transactional_id)
        return ErrorCode.NONE

    # --- periodic work --------------------------------------------------------------------------------------------

    async def abort_timed_out_transactions(self) -> list[str]:
        """Abort every Ongoing transaction open longer than its timeout (its producer is fenced); returns the ids."""
        if not self.loaded:
            return []
        now_ms = self.broker.now_ms()
        timed_out = [metadata for transactional_id, metadata in self._metadata.items()
                     if metadata.state is S.ONGOING and transactional_id not in self._pending
                     and metadata.transaction_start_time_ms + metadata.transaction_timeout_ms < now_ms]
        aborted = []
        for metadata in timed_out:
            transactional_id = metadata.transactional_id
            if self._metadata.get(transactional_id) is not metadata or transactional_id in self._pending:
                continue  # changed while an earlier one was aborted
            self._pending.add(transactional_id)
            try:
                error = await self._abort_with_fence(metadata, "timed out")
            finally:
                self._pending.discard(transactional_id)
            if error is ErrorCode.NONE:
                aborted.append(transactional_id)
        return aborted

    async def expire_transactional_ids(self) -> list[str]:
        """Tombstones for the ids without an open transaction idle for `transactional.id.expiration.ms`."""
        if not self.loaded:
            return []
        deadline = self.broker.now_ms() - self.config.transactional_id_expiration_ms
        expired = [transactional_id for transactional_id, metadata in self._metadata.items()
                   if metadata.state.expiration_allowed and metadata.last_update_time_ms <= deadline
                   and transactional_id not in self._pending and transactional_id not in self._completing]
        if not expired:
            return []
        self._pending.update(expired)
        try:
            await self._write([(transactional_id, None) for transactional_id in expired])
        except TransactionWriteError as exc:  # retried at the next pass
            log.warning("could not expire transactional ids: %s", exc)
        finally:
            self._pending.difference_update(expired)
        expired = [transactional_id for transactional_id in expired if transactional_id not in self._metadata]
        if not expired:
            return []
        log.info("expired %d transactional id(s) idle for %d ms", len(expired),
                 self.config.transactional_id_expiration_ms)
        return expired

    # --- reads ----------------------------------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> TransactionView | None:
        metadata = self._metadata.get(transactional_id)
        return None if metadata is None else _view(metadata)

    def list(self, *, states: set[str] = frozenset(), producer_ids: set[int] = frozenset(),
             duration_filter_ms: int = -1) -> list[TransactionView]:
        """ListTransactions: filters by state names, producer ids and (v1) transactions running longer than
        `duration_filter_ms` (negative: no filter)."""
        now_ms = self.broker.now_ms()
        return [_view(metadata) for metadata in self._sorted()
                if metadata.state is not S.DEAD
                and (not producer_ids or metadata.producer_id in producer_ids)
                and (not states or metadata.state.kafka_name in states)
                and (duration_filter_ms < 0 or now_ms - metadata.transaction_start_time_ms > duration_filter_ms)]

    def views(self) -> list[TransactionView]:
        return [_view(metadata) for metadata in self._sorted()]

    def metadata(self, transactional_id: str) -> TransactionMetadata | None:
        """The full state of a transactional id (tests, the toolkit)."""
        return self._metadata.get(transactional_id)

    def partition_for(self, transactional_id: str) -> int:
        """The partition of `__transaction_state` holding the transactional id."""
        info = self.broker.topic(TRANSACTION_STATE_TOPIC)
        return partition_for_group(transactional_id, info.partitions if info is not None
                                   else self.config.num_partitions)

    def _sorted(self) -> list[TransactionMetadata]:
        return [self._metadata[transactional_id] for transactional_id in sorted(self._metadata)]

    # --- internals ------------------------------------------------------------------------------------------------

    def _coordinator_node(self, transactional_id: str) -> TransactionCoordinator | None:
        """The transaction coordinator of the node leading the id's partition; None when no node does."""
        state = self.broker.partition_state(TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id))
        node = None if state is None else self.broker.cluster.nodes.get(state.leader)
        return None if node is None else transactions_of(node)

    def _check_producer(self, current: TransactionMetadata | None, producer_id: int,
                        producer_epoch: int) -> ErrorCode:
        if current is None or current.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if current.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        return ErrorCode.NONE

    async def _new_producer_id(self) -> int:
        return await producer_ids_of(self.broker).new_producer_id()

    def _offsets_topic_partitions(self) -> int:
        offsets = getattr(self.broker.coordinator, "offsets", None)
        if offsets is not None:
            return offsets.topic_partitions
        info = self.broker.topic(GROUP_METADATA_TOPIC)
        return info.partitions if info is not None else self.broker.config.offsets_topic_num_partitions

    async def _write(self, changes: list[tuple[str, TransactionMetadata | None]]) -> None:
        """Append the changes (None: a tombstone), one batch per partition of `__transaction_state`, wait until
        durable, then apply them in memory. Raises TransactionWriteError when that fails; memory then keeps the
        changes of no partition whose batch failed."""
        by_partition: dict[int, list[tuple[str, TransactionMetadata | None]]] = {}
        for transactional_id, metadata in changes:
            by_partition.setdefault(self.partition_for(transactional_id), []).append((transactional_id, metadata))
        written, failure = [], None
        for partition, batch in by_partition.items():
            try:
                written.append((self._append(partition, batch), batch))
            except TransactionWriteError as exc:
                failure = exc
        await self._make_durable([location for location, _ in written])
        for (partition_log, last_offset), batch in written:
            error = await wait_for_replicas(self.broker, TRANSACTION_STATE_TOPIC, partition_log.partition,
                                            last_offset + 1, APPEND_TIMEOUT_MS)
            if error is ErrorCode.NONE and self.ownership.error_for(partition_log.partition) is not ErrorCode.NONE:
                error = ErrorCode.NOT_COORDINATOR  # the partition moved away while the write was on its way
            if error is not ErrorCode.NONE:
                failure = TransactionWriteError(coordinator_error(error))
                continue
            for transactional_id, metadata in batch:
                if metadata is None:
                    self._metadata.pop(transactional_id, None)
                else:
                    self._metadata[transactional_id] = metadata
        if failure is not None:
            raise failure

    def _append(self, partition: int, changes: list[tuple[str, TransactionMetadata | None]]) -> tuple[Log, int]:
        partition_log = self._partition_log(partition)
        error = check_before_append(self.broker, TRANSACTION_STATE_TOPIC, partition, partition_log)
        if error is not ErrorCode.NONE:
            raise TransactionWriteError(coordinator_error(error))
        now_ms = self.broker.now_ms()
        batch = build_batch([(encode_key(transactional_id), None if metadata is None else encode_value(metadata),
                              (), now_ms) for transactional_id, metadata in changes])
        try:
            result = partition_log.append(batch, now_ms=now_ms, origin=COORDINATOR,
                                          leader_epoch=self.broker.leader_epoch(TRANSACTION_STATE_TOPIC, partition))
        except StorageError as exc:
            log.warning("append to %s-%d failed: %s", TRANSACTION_STATE_TOPIC, partition, exc)
            raise TransactionWriteError(coordinator_error(ErrorCode(exc.error_code)), str(exc)) from exc
        except OSError as exc:
            log.warning("append to %s-%d failed: %s", TRANSACTION_STATE_TOPIC, partition, exc)
            raise TransactionWriteError(ErrorCode.NOT_COORDINATOR, str(exc)) from exc
        return partition_log, result.last_offset

    async def _make_durable(self, written: list[tuple[Log, int]]) -> None:
        due = [partition_log for partition_log, last_offset in written
               if partition_log.config.has_flush_policy and partition_log.recovery_point <= last_offset]
        if not due:
            return
        try:
            await self.broker.make_durable(due)
        except OSError as exc:
            log.error("fsync of %s failed: %s", TRANSACTION_STATE_TOPIC, exc)
            raise TransactionWriteError(ErrorCode.NOT_COORDINATOR, str(exc)) from exc

    def _partition_log(self, partition: int) -> Log:
        """The log of a partition this node coordinates, creating `__transaction_state` on the first write."""
        if self.broker.topic(TRANSACTION_STATE_TOPIC) is None:
            if not is_cluster_of_one(self.broker):  # FindCoordinator creates it in a cluster
                raise TransactionWriteError(ErrorCode.NOT_COORDINATOR)
            try:
                self.create_topic()
            except (OSError, StorageError) as exc:
                log.warning("could not create %s: %s", TRANSACTION_STATE_TOPIC, exc)
                raise TransactionWriteError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc)) from exc
        error = self.ownership.error_for(partition)
        if error is not ErrorCode.NONE:
            raise TransactionWriteError(error)
        partition_log = self.broker.get_log(TRANSACTION_STATE_TOPIC, partition)
        if partition_log is None:
            raise TransactionWriteError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return partition_log

    def create_topic(self) -> None:
        """Create `__transaction_state` (if it does not exist) with `transaction.state.log.replication.factor`
        replicas, or as many as there are live nodes, and `min.insync.replicas` of `transaction.state.log.min.isr`
        (at most the replication factor, so that a smaller cluster can write), then take the partitions this node
        leads (new, so empty: nothing to load). Raises what the node's create_topic raises."""
        config = self.broker.config
        replication_factor = min(config.transaction_state_log_replication_factor,
                                 max(len(self.broker.alive_node_ids()), 1))
        configs = {**self.config.topic_configs(),
                   "min.insync.replicas": str(min(config.transaction_state_log_min_isr, replication_factor))}
        self.broker.create_topic(TRANSACTION_STATE_TOPIC, self.config.num_partitions, configs=configs,
                                 replication_factor=replication_factor)
        self.ownership.refresh()

    # --- start-up -------------------------------------------------------------------------------------------------

    async def _migrate_transactional_ids_file(self) -> None:
        """Move the ids of `transactional-ids.json` (from earlier versions) into the log, once, then delete it."""
        path = os.path.join(self.broker.logs.data_dir, TRANSACTIONAL_IDS_FILE)
        if not os.path.exists(path):
            return
        try:
            entries = read_transactional_ids(path)
        except ProducerIdsError as exc:
            log.error("not migrating %s: %s", path, exc)
            return
        migrated = [(transactional_id, TransactionMetadata(
            transactional_id, entry.producer_id, entry.producer_epoch, entry.transaction_timeout_ms,
            last_update_time_ms=entry.last_update_ms, previous_producer_id=entry.previous_producer_id,
            last_producer_epoch=entry.last_producer_epoch))
            for transactional_id, entry in sorted(entries.items())
            if transactional_id not in self._metadata and entry.producer_epoch >= 0]
        if migrated:
            try:
                await self._write(migrated)
            except TransactionWriteError as exc:  # the file stays: the next start migrates again
                log.error("could not migrate %s into %s: %s", path, TRANSACTION_STATE_TOPIC, exc)
                return
            self._raise_producer_id_floor(metadata for _, metadata in migrated)
        os.remove(path)
        log.info("migrated %d transactional id(s) from %s into %s", len(migrated), path, TRANSACTION_STATE_TOPIC)

    def _raise_producer_id_floor(self, states) -> None:
        known = [producer_id for metadata in states
                 for producer_id in (metadata.producer_id, metadata.previous_producer_id, metadata.next_producer_id)]
        if not known:
            return
        try:
            producer_ids_of(self.broker).raise_floor(max(known) + 1)
        except ProducerIdsError as exc:  # allocation refuses to run anyway (InitProducerId answers the error)
            log.error("producer id allocation unavailable: %s", exc)


def _view(metadata: TransactionMetadata) -> TransactionView:
    return TransactionView(metadata.transactional_id, metadata.state.kafka_name, metadata.producer_id,
                           metadata.producer_epoch, metadata.transaction_timeout_ms,
                           metadata.transaction_start_time_ms, sorted(metadata.partitions))


def transactions_of(broker: CoordinatorHost) -> TransactionCoordinator:
    """The node's transaction coordinator, made on first use (and then loaded in the background)."""
    coordinator = getattr(broker, "transactions", None)
    if coordinator is None:
        coordinator = TransactionCoordinator(broker)
        broker.transactions = coordinator
        with contextlib.suppress(RuntimeError):  # no running loop: whoever made the broker calls start()
            coordinator.start_soon()
    return coordinator


def _log_load_failure(task: asyncio.Task) -> None:
    if task.cancelled() or task.exception() is None:
        return
    exc = task.exception()
    if isinstance(exc, (OSError, TransactionWriteError)):
        log.error("loading %s failed: %s", TRANSACTION_STATE_TOPIC, exc)
    else:
        log.error("loading %s failed", TRANSACTION_STATE_TOPIC, exc_info=exc)
