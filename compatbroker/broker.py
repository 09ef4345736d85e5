"""The Broker: the one object that ties configuration, storage and the request handlers together.

It owns
- the LogManager of the data directory (start-up, shutdown) and with it `meta.properties`, which keeps the cluster
  id (generated on first start) and the node id;
- the topic registry: name, persistent topic id, partition count and whether Kafka treats it as internal; topics
  are created, grown (CreatePartitions) and deleted here, so that storage, long polls and committed offsets follow;
  creating and growing are all or nothing (a storage failure leaves no partition and no registry entry behind);
- append notification: a Fetch long poll awaits `wait_for_append`, which Produce wakes through `notify_appended`;
- the periodic storage work Kafka runs on its scheduler: time-based flushes, checkpoints, retention and compaction,
  each at its configured interval, with the blocking parts (fsync, cleaning) in executor threads; checkpoint
  writes (periodic, or after a topic deletion) run one at a time, those asked for meanwhile coalesced into one;
- the fetch session cache (KIP-227);
- the coordinators' periodic work: transactional id expiration and the abort of timed-out transactions, and the
  `transaction.version` feature level finalized (`finalized_transaction_version`).

Everything here runs on the event loop thread except the executor jobs, which only fsync or read sealed segments.
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from . import topic_names
from .config import BrokerConfig, Endpoint
from .fetch_session import FetchSessionCache
from .storage import Log, LogManager
from .storage.checkpoints import PARTITION_METADATA, write_partition_metadata
from .storage.log_manager import write_checkpoints
from .storage.log_config import LONG_MAX

log = logging.getLogger(__name__)

_BACKGROUND_STOP_GRACE_S = 2.0


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    is_internal: bool


ROLL_FLUSH_CHECK_MS = 1000


class Broker:
    def __init__(self, config: BrokerConfig):
        self.config = config
        self.node_id = config.node_id
        self.cluster_id: str | None = None  # read from (or written to) meta.properties by startup()
        self.logs = LogManager(config.data_dir, broker_properties=config.storage_properties(),
                               node_id=config.node_id)
        self.fetch_sessions: FetchSessionCache = FetchSessionCache(
            config.max_incremental_fetch_session_cache_slots)
        self.coordinator = None  # the group coordinator (compatbroker.coordinator), made when serving starts
        self.producer_ids = None  # producer id allocation (compatbroker.producer_ids), made on first InitProducerId
        self.transactions = None  # the transaction coordinator (compatbroker.coordinator.transactions)
        # The finalized level of the `transaction.version` feature (2: KIP-890 transactions v2); `--emulate` of a
        # release that does not finalize it sets it lower.
        self.finalized_transaction_version: int = 2
        self._topics: dict[str, TopicInfo] = {}
        self._topics_by_id: dict[uuid.UUID, TopicInfo] = {}
        self._append_waiters: dict[tuple[str, int], set[asyncio.Future]] = {}
        self._advertised_by_port: dict[int, Endpoint] = {}
        self._background: list[asyncio.Task] = []
        self._stopping: asyncio.Event | None = None
        self._closing = False
        self._checkpoint_writer: asyncio.Task | None = None   # the task writing checkpoints, one write at a time
        self._checkpoint_wanted: asyncio.Future | None = None  # resolved by the next write, made after the current

    # --- life cycle -----------------------------------------------------------------------------------------------

    def startup(self) -> None:
        """Load every partition (recovering after a crash) and the topic registry."""
        self.logs.startup(self.now_ms())
        self.cluster_id = self.logs.cluster_id
        self._load_topics()

    def start_background_work(self) -> None:
        """Start the periodic storage work; call from the running event loop after startup()."""
        self._stopping = asyncio.Event()
        storage = self.config.storage
        jobs: list[tuple[int, Callable[[], Awaitable]]] = [
            # at least every second: besides flush.ms, a rolled segment waits here for its fsync (Kafka schedules
            # that flush at roll time)
            (min(int(self.config.get("log.flush.scheduler.interval.ms")), ROLL_FLUSH_CHECK_MS), self.flush_due_logs),
            (min(storage.log_flush_offset_checkpoint_interval_ms,
                 storage.log_flush_start_offset_checkpoint_interval_ms), self.checkpoint),
            (storage.log_retention_check_interval_ms, self.run_retention),
            (self.config.producer_id_expiration_check_interval_ms, self.expire_producers),
            (self.config.transaction_remove_expired_transaction_cleanup_interval_ms, self.expire_transactional_ids),
            (self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
             self.abort_timed_out_transactions),
        ]
        if storage.log_cleaner_enable:
            jobs.append((storage.log_cleaner_backoff_ms, self.run_cleaner))
        for interval_ms, job in jobs:
            if 0 < interval_ms < LONG_MAX:  # Kafka's Long.MAX_VALUE means "never"
                self._background.append(asyncio.create_task(self._every(interval_ms, job),
                                                            name=f"compatbroker {job.__name__}"))
        from .coordinator import coordinator_of  # the coordinator builds on the broker, not the other way round
        from .coordinator.transactions import transactions_of
        coordinator_of(self)  # loads __consumer_offsets in the background; group requests wait for it
        transactions_of(self)  # loads __transaction_state likewise

    def begin_shutdown(self) -> None:
        """Answer every long poll now and make later ones return at once (the server is draining)."""
        self._closing = True
        for waiters in self._append_waiters.values():
            for future in waiters:
                _resolve(future)
        self._append_waiters.clear()

    async def shutdown(self) -> None:
        """Stop the periodic work (letting a running job finish briefly), then flush, checkpoint and close."""
        self.begin_shutdown()
        if self._stopping is not None:
            self._stopping.set()
        if self._background:
            _, pending = await asyncio.wait(self._background, timeout=_BACKGROUND_STOP_GRACE_S)
            for task in pending:
                task.cancel()
            await asyncio.gather(*self._background, return_exceptions=True)
            self._background = []
        if self.transactions is not None:  # first: completing a transaction calls the group coordinator
            await self.transactions.stop()
        if self.coordinator is not None:
            await self.coordinator.stop()
        if self._checkpoint_writer is not None:  # its write must not overlap the final one of logs.shutdown
            await asyncio.gather(self._checkpoint_writer, return_exceptions=True)
        await asyncio.get_running_loop().run_in_executor(None, self.logs.shutdown)

    # --- identity and addresses -----------------------------------------------------------------------------------

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def register_listener(self, listener: Endpoint, bound_port: int) -> None:
        """Called by the server once a listener is bound: requests arriving on `bound_port` are told the listener's
        advertised endpoint (port 0 there means the bound port)."""
        advertised = self.config.advertised_for(listener)
        if advertised is not None:
            self._advertised_by_port[bound_port] = advertised

    def advertised_endpoint(self, listener_host: str, listener_port: int) -> tuple[str, int]:
        """The host and port clients must use to reach this broker through the listener a request arrived on."""
        advertised = self._advertised_by_port.get(listener_port)
        if advertised is None:
            return listener_host, listener_port
        return advertised.host, advertised.port or listener_port

    # --- topics ---------------------------------------------------------------------------------------------------

    def topics(self) -> dict[str, TopicInfo]:
        return dict(self._topics)

    def topic(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._topics_by_id.get(topic_id)

    def create_topic(self, name: str, partitions: int | None = None, configs: dict | None = None) -> TopicInfo:
        """Create a topic with `partitions` (default num.partitions) and topic-level config overrides; returns the
        existing topic unchanged if there is one. The name is not checked here (handlers validate it first); a bad
        override raises storage's ConfigError before anything is written. All or nothing: when storage fails
        (OSError, StorageError) it has removed what it made, the topic is not registered, and the error is raised."""
        existing = self._topics.get(name)
        if existing is not None:
            return existing
        count = self.config.num_partitions if partitions is None else partitions
        if count < 1:
            raise ValueError(f"a topic needs at least one partition, got {count}")
        topic_id = self.logs.create_topic(name, count, now_ms=self.now_ms(), overrides=configs)
        info = TopicInfo(name, topic_id, count, topic_names.is_internal(name))
        self._register(info)
        log.info("created topic %s with %d partition(s), id %s", name, count, topic_id)
        return info

    def check_topic_configs(self, configs: dict) -> None:
        """Raise storage's ConfigError unless `configs` are valid topic-level overrides (nothing is changed)."""
        self.logs.default_config.with_overrides({name: str(value) for name, value in configs.items()})

    def add_partitions(self, name: str, count: int) -> TopicInfo:
        """Grow topic `name` to `count` partitions (CreatePartitions); the new ones start empty. TopicInfo is
        frozen, so the registry gets a new one; Metadata reports the new count from then on. All or nothing: when a
        new partition cannot be created, those this call made are deleted again, the topic keeps its count, and
        the error (OSError, StorageError) is raised."""
        info = self._topics[name]
        if count <= info.partitions:
            raise ValueError(f"topic {name} has {info.partitions} partition(s): {count} would not be an increase")
        self.logs.create_partitions(name, range(info.partitions, count), now_ms=self.now_ms())
        grown = dataclasses.replace(info, partitions=count)
        self._register(grown)
        log.info("topic %s grown from %d to %d partition(s)", name, info.partitions, count)
        return grown

    async def delete_topic(self, name: str) -> TopicInfo | None:
        """Delete topic `name`; returns what it was, or None when there is no such topic.

        Before the first await the topic leaves the registry (so Produce, Fetch and ListOffsets answer it as
        unknown), its partition directories are renamed for deletion and removed, and the long polls waiting on it
        wake up and answer; storage's errors there are raised (the topic has left the registry by then). Then the
        checkpoints are rewritten without its partitions (a failure there is logged: the periodic checkpoint
        retries), and, as Kafka's group coordinator does when partitions are deleted, every group's committed
        offsets of its partitions get tombstones. A topic of the same name created later gets a new topic id and
        starts empty."""
        info = self._topics.pop(name, None)
        if info is None:
            return None
        self._topics_by_id.pop(info.topic_id, None)
        self.logs.delete_topic(name)
        for partition in range(info.partitions):
            self.notify_appended(name, partition)  # a fetch waiting on a deleted partition answers now
        log.info("deleted topic %s (id %s, %d partition(s))", name, info.topic_id, info.partitions)
        try:  # no recovery point of the old partitions may apply to a topic re-created later
            await self.checkpoint()
        except OSError as exc:  # the topic is gone either way; the periodic checkpoint writes again
            log.warning("checkpoint after deleting topic %s failed: %s", name, exc)
        await self._delete_committed_offsets(info)
        return info

    async def _delete_committed_offsets(self, info: TopicInfo) -> None:
        coordinator = self.coordinator
        if coordinator is None:  # a broker that is not serving (tests): no offsets are loaded to delete
            return
        partitions = [(info.name, partition) for partition in range(info.partitions)]
        for group_id in sorted(coordinator.offsets.groups_with_offsets()):
            try:  # only partitions the group has offsets for get a tombstone
                await coordinator.offsets.delete_offsets(group_id, partitions)
            except Exception as exc:  # noqa: BLE001 - the topic is gone either way; retention drops them later
                log.warning("group %s: could not delete the committed offsets of deleted topic %s: %s",
                            group_id, info.name, exc)

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.logs.get_log(topic, partition)

    def has_partition(self, topic: str, partition: int) -> bool:
        info = self._topics.get(topic)
        return info is not None and 0 <= partition < info.partitions

    def leader_epoch(self, topic: str, partition: int) -> int:
        """Always 0: this broker has led every partition since its creation, and no election ever bumps it."""
        return 0

    def _load_topics(self) -> None:
        """Rebuild the registry from the partition directories found by the LogManager."""
        counts: dict[str, int] = {}
        for topic, partition in self.logs.logs:
            counts[topic] = max(counts.get(topic, 0), partition + 1)
        now_ms = self.now_ms()
        for topic, count in sorted(counts.items()):
            for partition in range(count):  # a lost partition directory comes back empty, as a gap would confuse
                self.logs.create_log(topic, partition, now_ms=now_ms)  # every client
            topic_id = self.logs.topic_ids.get(topic) or self._assign_topic_id(topic, count)
            self._register(TopicInfo(topic, topic_id, count, topic_names.is_internal(topic)))

    def _assign_topic_id(self, topic: str, partitions: int) -> uuid.UUID:
        """Give a topic found without `partition.metadata` files (data from a Kafka before 2.8) a topic id."""
        topic_id = self.logs.topic_ids[topic] = uuid.uuid4()
        for partition in range(partitions):
            directory = self.logs.get_log(topic, partition).directory
            write_partition_metadata(os.path.join(directory, PARTITION_METADATA), topic_id)
        return topic_id

    def _register(self, info: TopicInfo) -> None:
        self._topics[info.name] = info
        self._topics_by_id[info.topic_id] = info

    # --- long polls -----------------------------------------------------------------------------------------------

    def notify_appended(self, topic: str, partition: int) -> None:
        """Wake the long polls waiting on this partition (Produce calls this after each successful append)."""
        waiters = self._append_waiters.pop((topic, partition), None)
        if waiters:
            for future in waiters:
                _resolve(future)

    async def wait_for_append(self, partitions: list[tuple[str, int]], timeout_s: float, *,
                              until: asyncio.Future | None = None) -> None:
        """Return when any of `partitions` is appended to, after `timeout_s`, or once `until` (the client's
        departure) is done, whichever comes first."""
        if self._closing or timeout_s <= 0 or not partitions or (until is not None and until.done()):
            return
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        keys = set(partitions)
        for key in keys:
            self._append_waiters.setdefault(key, set()).add(future)
        timer = loop.call_later(timeout_s, _resolve, future)
        wake = None
        if until is not None:
            def wake(_done, future=future):
                _resolve(future)
            until.add_done_callback(wake)
        try:
            await future
        finally:
            if wake is not None:
                until.remove_done_callback(wake)
            timer.cancel()
            for key in keys:
                waiters = self._append_waiters.get(key)
                if waiters is not None:
                    waiters.discard(future)
                    if not waiters:
                        del self._append_waiters[key]

    # --- durability -----------------------------------------------------------------------------------------------

    async def make_durable(self, logs: list[Log]) -> None:
        """fsync what has been appended to `logs`, off the event loop."""
        if logs:
            await asyncio.get_running_loop().run_in_executor(None, _flush_logs, list(logs), self.now_ms())

    # --- periodic storage work (each also callable on its own, e.g. by tests) --------------------------------------

    async def flush_due_logs(self) -> int:
        """Flush the logs whose flush.ms has passed since their last flush, and segments rolled since."""
        now_ms = self.now_ms()
        due = [partition_log for partition_log in self.logs.logs.values() if partition_log.flush_due(now_ms)]
        await self.make_durable(due)
        return len(due)

    async def checkpoint(self) -> None:
        """Write the recovery-point, log-start-offset and cleaner checkpoints (fsync: in an executor); returns once
        a write that started after this call has finished, and raises what that write raised.

        One write runs at a time. Calls made while one runs share exactly one more write after it, whose state is
        taken when it starts, so the newest state always lands last however many deletions and periodic passes
        ask at once."""
        if self._checkpoint_wanted is None:
            self._checkpoint_wanted = asyncio.get_running_loop().create_future()
            self._checkpoint_wanted.add_done_callback(_retrieve)  # a waiter may be gone: no "never retrieved"
            if self._checkpoint_writer is None or self._checkpoint_writer.done():
                self._checkpoint_writer = asyncio.create_task(self._write_wanted_checkpoints(),
                                                              name="compatbroker checkpoint writer")
        await asyncio.shield(self._checkpoint_wanted)

    async def _write_wanted_checkpoints(self) -> None:
        loop = asyncio.get_running_loop()
        while self._checkpoint_wanted is not None:
            waiters, self._checkpoint_wanted = self._checkpoint_wanted, None
            # The dicts are copied on the loop, at the write's start: the executor thread must not iterate one the
            # loop is changing, and the copy is the newest state any waiter asked for.
            manager = self.logs
            try:
                await loop.run_in_executor(None, write_checkpoints, manager.data_dir, dict(manager.logs),
                                           dict(manager.first_dirty_offsets))
            except asyncio.CancelledError:
                for future in (waiters, self._checkpoint_wanted):
                    if future is not None:
                        future.cancel()
                self._checkpoint_wanted = None
                raise
            except Exception as exc:  # noqa: BLE001 - handed to every caller waiting for this write
                if not waiters.done():
                    waiters.set_exception(exc)
            else:
                _resolve(waiters)

    async def run_retention(self) -> int:
        """Delete expired segments (renames and unlinks only, on the loop); returns how many went."""
        return self.logs.run_retention(self.now_ms())

    async def expire_producers(self) -> int:
        """Forget producers idle for producer.id.expiration.ms in every partition; returns how many went."""
        now_ms, expiration_ms = self.now_ms(), self.config.producer_id_expiration_ms
        return sum(partition_log.expire_producers(now_ms, expiration_ms)
                   for partition_log in list(self.logs.logs.values()))

    async def expire_transactional_ids(self) -> int:
        """Forget transactional ids unused for transactional.id.expiration.ms; returns how many went."""
        from .coordinator.transactions import transactions_of  # made on first use, like the coordinator
        return len(await transactions_of(self).expire_transactional_ids())

    async def abort_timed_out_transactions(self) -> int:
        """Abort the transactions open longer than their timeout; returns how many."""
        from .coordinator.transactions import transactions_of
        return len(await transactions_of(self).abort_timed_out_transactions())

    async def run_cleaner(self) -> int:
        """Compact the logs that need it: each pass is prepared in an executor and committed on the loop."""
        loop = asyncio.get_running_loop()
        cleaned = 0
        for tp in list(self.logs.logs):
            now_ms = self.now_ms()
            plan = await loop.run_in_executor(None, self.logs.prepare_clean, tp, now_ms)
            if plan is not None and self.logs.commit_clean(tp, plan, self.now_ms()):
                cleaned += 1
        return cleaned

    async def _every(self, interval_ms: int, job: Callable[[], Awaitable]) -> None:
        stopping = self._stopping
        while not stopping.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stopping.wait(), interval_ms / 1000)
                return
            try:
                await job()
            except OSError as exc:  # a full disk, too many open files: expected, retried at the next interval
                log.warning("periodic %s failed: %s", job.__name__, exc)
            except Exception:  # noqa: BLE001 - a bug; the pass is retried at the next interval
                log.exception("periodic %s failed", job.__name__)


def _flush_logs(logs: list[Log], now_ms: int) -> None:
    for partition_log in logs:
        partition_log.flush(now_ms=now_ms)


def _resolve(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)


def _retrieve(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()
