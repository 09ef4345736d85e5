"""The Broker: one node of a cluster, tying its configuration, storage and the request handlers together.

It owns
- the LogManager of its data directory (start-up, shutdown) and with it `meta.properties`, which keeps the cluster
  id (generated on first start) and the node id;
- the view handlers need of the cluster (`compatbroker.cluster`): the topic registry (name, persistent topic id,
  partition count, internal or not), each partition's state (replicas, ISR, leader, leader epoch) and whether this
  node leads it, and the other nodes' advertised endpoints. Topics are created, grown and deleted through the
  cluster, all or nothing across its nodes; a broker made on its own (`Broker(config)`) is a cluster of one;
- append notification: a Fetch long poll awaits `wait_for_append`, which Produce wakes through `notify_appended`;
- the periodic storage work Kafka runs on its scheduler: time-based flushes, checkpoints, retention and compaction,
  each at its configured interval, with the blocking parts (fsync, cleaning) in executor threads; checkpoint
  writes (periodic, or after a topic deletion) run one at a time, those asked for meanwhile coalesced into one;
- the fetch session cache (KIP-227);
- the coordinators' periodic work: transactional id expiration and the abort of timed-out transactions, and the
  `transaction.version` feature level finalized (`finalized_transaction_version`);
- share groups' data path (`compatbroker.share`: share-partitions, share sessions, `__share_group_state`), made on
  first use and stopped at shutdown.
- what it counts as it serves (`metrics`, a `compatbroker.metrics.BrokerMetrics`), which Prometheus reads.
- its configuration in force (`config`): the static one (`static_config`) with the dynamic broker configs laid over
  it (`compatbroker.dynamic_config`, loaded before the logs); and the Kafka release the toolkit emulates
  (`emulated_release`: a 3.x release takes the topic configs Kafka 4.0 removed).

Everything here runs on the event loop thread except the executor jobs, which only fsync or read sealed segments.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable

from . import config_catalog, dynamic_config
from .cluster import Cluster
from .cluster.cluster import node_data_dirs
from .cluster.metadata import PartitionState, TopicInfo
from .config import BrokerConfig, Endpoint
from .fetch_session import FetchSessionCache
from .metrics import BrokerMetrics
from .storage import Log, LogManager
from .storage.checkpoints import PARTITION_METADATA, write_partition_metadata
from .storage.log_config import LONG_MAX, ConfigError
from .storage.log_manager import write_checkpoints
from .telemetry import telemetry_of
from .topic_names import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC

log = logging.getLogger(__name__)

_BACKGROUND_STOP_GRACE_S = 2.0


ROLL_FLUSH_CHECK_MS = 1000


class Broker:
    def __init__(self, config: BrokerConfig, *, cluster: Cluster | None = None):
        self.config = config  # in force: static_config with the dynamic broker configs (compatbroker.dynamic_config)
        self.static_config = config  # server.properties and --set, as started
        self.emulated_release: str | None = None  # the Kafka release `--emulate` stands in for (None: 4.x)
        self.node_id = config.node_id
        self.rack = config.broker_rack
        self.cluster = cluster if cluster is not None else Cluster(config)
        self.cluster.add_node(self)
        self.cluster_id: str | None = None  # read from (or written to) meta.properties by startup()
        self.logs = LogManager(config.data_dirs, broker_properties=config.storage_properties(),
                               node_id=config.node_id)
        self.fetch_sessions: FetchSessionCache = FetchSessionCache(
            config.max_incremental_fetch_session_cache_slots)
        self.coordinator = None  # the group coordinator (compatbroker.coordinator), made when serving starts
        self.producer_ids = None  # producer id allocation (compatbroker.producer_ids), made on first InitProducerId
        self.transactions = None  # the transaction coordinator (compatbroker.coordinator.transactions)
        self.share_partitions = None  # share groups' data path (compatbroker.share), made on first use
        self.share_state_store = None  # this node's part of __share_group_state (compatbroker.share.state_store)
        self.metrics = BrokerMetrics(topic_exists=self.topic)  # what this node counts (compatbroker.metrics)
        # The finalized level of the `transaction.version` feature (2: KIP-890 transactions v2); `--emulate` of a
        # release that does not finalize it sets it lower.
        self.finalized_transaction_version: int = 2
        self._append_waiters: dict[tuple[str, int], set[asyncio.Future]] = {}
        self._advertised_by_port: dict[int, Endpoint] = {}
        self._bound_listeners: list[tuple[Endpoint, int]] = []  # (configured listener, bound port)
        self._background: list[asyncio.Task] = []
        self._stopping: asyncio.Event | None = None
        self._closing = False
        self._checkpoint_writer: asyncio.Task | None = None   # the task writing checkpoints, one write at a time
        self._checkpoint_wanted: asyncio.Future | None = None  # resolved by the next write, made after the current

    # --- life cycle -----------------------------------------------------------------------------------------------

    def startup(self) -> None:
        """Load every partition (recovering after a crash) and the topic registry: the whole cluster's start-up,
        which loads every node once."""
        self.cluster.startup()

    def load_logs(self) -> None:
        """This node's part of the start-up (the cluster calls it): the dynamic broker configs, then the logs."""
        dynamic_config.start(self)
        self.logs.startup(self.now_ms())
        self.cluster_id = self.logs.cluster_id

    def start_background_work(self) -> None:
        """Start the periodic storage work; call from the running event loop after startup()."""
        self._stopping = asyncio.Event()
        storage = self.config.storage
        jobs: list[tuple[int, Callable[[], Awaitable]]] = [
            # at least every second: besides flush.ms, a rolled segment waits here for its fsync (Kafka schedules
            # that flush at roll time)
            (min(int(self.config.get("log.flush.scheduler.interval.ms")), ROLL_FLUSH_CHECK_MS), self.flush_due_logs),
            (self._checkpoint_interval_ms(), self.checkpoint),
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

    def _checkpoint_interval_ms(self) -> int:
        """Recovery points and log start offsets are checkpointed at their intervals; replicated partitions' high
        watermarks (in the same pass) at replica.high.watermark.checkpoint.interval.ms."""
        storage = self.config.storage
        interval = min(storage.log_flush_offset_checkpoint_interval_ms,
                       storage.log_flush_start_offset_checkpoint_interval_ms)
        if self.cluster.multi_node:
            interval = min(interval, self.config.replica_high_watermark_checkpoint_interval_ms)
        return interval

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
        if self.share_partitions is not None:  # its lock timers and long polls; its state is durable already
            await self.share_partitions.stop()
        if self.share_state_store is not None:  # its loads; made by this node's share partitions or another node's
            await self.share_state_store.stop()
        if self._checkpoint_writer is not None:  # its write must not overlap the final one of logs.shutdown
            await asyncio.gather(self._checkpoint_writer, return_exceptions=True)
        await asyncio.get_running_loop().run_in_executor(None, self.logs.shutdown)

    # --- identity and addresses -----------------------------------------------------------------------------------

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    @property
    def security(self):
        """The cluster's security state (compatbroker.security.BrokerSecurity): listeners' TLS and SASL, ACLs."""
        return self.cluster.security

    @property
    def client_telemetry(self):
        """The cluster's client telemetry (KIP-714, compatbroker.telemetry.ClientTelemetry), made on first use."""
        return telemetry_of(self.cluster)

    def register_listener(self, listener: Endpoint, bound_port: int) -> None:
        """Called by the server once a listener is bound: requests arriving on `bound_port` are told the listener's
        advertised endpoint (port 0 there means the bound port)."""
        advertised = self.config.advertised_for(listener)
        if advertised is not None:
            self._advertised_by_port[bound_port] = advertised
        self._bound_listeners = [entry for entry in self._bound_listeners if entry[0].name != listener.name]
        self._bound_listeners.append((listener, bound_port))

    def advertised_endpoint(self, listener_host: str, listener_port: int) -> tuple[str, int]:
        """The host and port clients must use to reach this broker through the listener a request arrived on."""
        advertised = self._advertised_by_port.get(listener_port)
        if advertised is None:
            return listener_host, listener_port
        return advertised.host, advertised.port or listener_port

    def endpoint_of(self, node_id: int, listener_host: str, listener_port: int) -> tuple[str, int] | None:
        """Where a client that reached this node on (`listener_host`, `listener_port`) finds node `node_id` (its
        listener of the same name); None for a node that has never listened."""
        if node_id == self.node_id:
            return self.advertised_endpoint(listener_host, listener_port)
        node = self.cluster.nodes.get(node_id)
        if node is None or not node._bound_listeners:
            return None
        name = next((listener.name for listener, port in self._bound_listeners if port == listener_port), None)
        listener, port = next(((listener, port) for listener, port in node._bound_listeners
                               if listener.name == name), node._bound_listeners[0])
        advertised = node._advertised_by_port.get(port)
        if advertised is not None:
            return advertised.host, advertised.port or port
        # a wildcard listener advertises the address the client used to reach us, as the server does for its own
        return (listener_host if listener.is_wildcard else listener.host), port

    def alive_node_ids(self) -> list[int]:
        return self.cluster.metadata.alive_nodes()

    # --- topics and partitions (the cluster's metadata) ----------------------------------------------------------

    @property
    def metadata(self):
        return self.cluster.metadata

    @property
    def controller(self):
        return self.cluster.controller

    def topics(self) -> dict[str, TopicInfo]:
        return self.cluster.metadata.topics()

    def topic(self, name: str) -> TopicInfo | None:
        return self.cluster.metadata.topic(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self.cluster.metadata.topic_by_id(topic_id)

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        return self.cluster.metadata.partition(topic, partition)

    def is_leader(self, topic: str, partition: int) -> bool:
        state = self.cluster.metadata.partition(topic, partition)
        return state is not None and state.leader == self.node_id

    def create_topic(self, name: str, partitions: int | None = None, configs: dict | None = None, *,
                     replication_factor: int | None = None,
                     assignment: dict[int, list[int]] | None = None) -> TopicInfo:
        """Create a topic with `partitions` (default num.partitions), `replication_factor` (default
        default.replication.factor) or a manual `assignment` (partition -> node ids), and topic-level config
        overrides; returns the existing topic unchanged if there is one. The name is not checked here (handlers
        validate it first); a bad override raises storage's ConfigError, an impossible placement the controller's
        ControllerError, before anything is written. All or nothing across the nodes: when storage fails (OSError,
        StorageError) what was made is removed, the topic is not registered, and the error is raised."""
        existing = self.topic(name)
        if existing is not None:
            return existing
        count = self.config.num_partitions if partitions is None else partitions
        if count < 1 and not assignment:
            raise ValueError(f"a topic needs at least one partition, got {count}")
        factor = self.config.default_replication_factor if replication_factor is None else replication_factor
        self._refuse_removed_topic_configs(configs)
        return self.cluster.create_topic(name, count, factor, configs=configs, assignment=assignment)

    def check_topic_configs(self, configs: dict) -> None:
        """Raise storage's ConfigError unless `configs` are valid topic-level overrides (nothing is changed); the
        topic configs Kafka 4.0 removed only pass when emulating Kafka 3.x."""
        self._refuse_removed_topic_configs(configs)
        self.logs.default_config.with_overrides({name: str(value) for name, value in configs.items()})

    def _refuse_removed_topic_configs(self, configs: dict | None) -> None:
        refused = config_catalog.refused_topic_config(configs or {}, self.emulated_release)
        if refused is not None:
            raise ConfigError(f"Unknown topic config name: {refused}")

    def set_topic_config(self, topic: str, overrides: dict) -> None:
        """Make `overrides` the topic's whole override set on every node (persisted, applied live); OSError when a
        node's disk refuses it (the nodes before it have it)."""
        for node in self.cluster.nodes.values():
            node.logs.set_topic_config(topic, overrides)

    def add_partitions(self, name: str, count: int, *, assignment: list[list[int]] | None = None) -> TopicInfo:
        """Grow topic `name` to `count` partitions (CreatePartitions), placed like the topic's or by `assignment`;
        the new ones start empty. All or nothing across the nodes (OSError, StorageError, ControllerError)."""
        return self.cluster.add_partitions(name, count, assignment=assignment)

    async def delete_topic(self, name: str) -> TopicInfo | None:
        """Delete topic `name` on every node; returns what it was, or None when there is no such topic.

        Before the first await the topic leaves the metadata (so Produce, Fetch and ListOffsets answer it as
        unknown), every node renames its replicas' directories for deletion and removes them, and the long polls
        waiting on it wake up and answer; storage's errors there are raised (the topic has left the registry by
        then). Then each node rewrites its checkpoints without those partitions (a failure there is logged: the
        periodic checkpoint retries), and, as Kafka's group coordinator does when partitions are deleted, every
        group's committed offsets of its partitions get tombstones. A topic of the same name created later gets a
        new topic id and starts empty."""
        info = self.cluster.remove_topic(name)
        if info is None:
            return None
        failure = None
        for node in self.cluster.nodes.values():
            try:
                node.drop_topic(info)
            except (OSError, Exception) as exc:  # noqa: BLE001 - every node drops its replicas; the first error is raised
                failure = failure or exc
        log.info("deleted topic %s (id %s, %d partition(s))", name, info.topic_id, info.partitions)
        for node in self.cluster.nodes.values():
            await node.forget_topic(info)
        if failure is not None:
            raise failure
        return info

    def drop_topic(self, info: TopicInfo) -> None:
        """This node's replicas of a deleted topic go, and the long polls on them answer."""
        self.logs.delete_topic(info.name)
        for partition in range(info.partitions):
            self.notify_appended(info.name, partition)  # a fetch waiting on a deleted partition answers now

    async def forget_topic(self, info: TopicInfo) -> None:
        try:  # no recovery point of the old partitions may apply to a topic re-created later
            await self.checkpoint()
        except OSError as exc:  # the topic is gone either way; the periodic checkpoint writes again
            log.warning("checkpoint after deleting topic %s failed: %s", info.name, exc)
        await self._delete_committed_offsets(info)

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
        """This node's replica of the partition, leader or follower; None when it hosts none."""
        return self.logs.get_log(topic, partition)

    def has_partition(self, topic: str, partition: int) -> bool:
        return self.cluster.metadata.partition(topic, partition) is not None

    def leader_epoch(self, topic: str, partition: int) -> int:
        state = self.cluster.metadata.partition(topic, partition)
        return 0 if state is None else state.leader_epoch

    def assign_topic_id(self, topic: str, partitions: int) -> uuid.UUID:
        """Give a topic found without `partition.metadata` files (data from a Kafka before 2.8) a topic id."""
        topic_id = self.logs.topic_ids[topic] = uuid.uuid4()
        for partition in range(partitions):
            directory = self.logs.get_log(topic, partition).directory
            write_partition_metadata(os.path.join(directory, PARTITION_METADATA), topic_id)
        return topic_id

    def on_partitions_changed(self, changed: list[PartitionState]) -> None:
        """The controller changed these partitions: long polls on them answer (a follower's reader must learn that
        its leader moved), and the coordinators learn which partitions of their topics this node now leads."""
        gained: dict[str, set[int]] = {}
        lost: dict[str, set[int]] = {}
        for state in changed:
            self.notify_appended(state.topic, state.partition, replicate=False)
            if state.topic in (GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC):
                target = gained if state.leader == self.node_id else lost
                target.setdefault(state.topic, set()).add(state.partition)
        for topic, coordinator in ((GROUP_METADATA_TOPIC, self.coordinator),
                                   (TRANSACTION_STATE_TOPIC, self.transactions)):
            if coordinator is not None and (topic in gained or topic in lost):  # None: made later, it catches up
                coordinator.on_leadership_change(gained.get(topic, set()), lost.get(topic, set()))

    # --- long polls -----------------------------------------------------------------------------------------------

    def notify_appended(self, topic: str, partition: int, *, replicate: bool = True) -> None:
        """Wake the long polls waiting on this partition (Produce calls this after each successful append), and
        the followers copying it."""
        if replicate and self.cluster.multi_node:
            self.cluster.replication.on_leader_append(topic, partition)
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
                await loop.run_in_executor(None, write_checkpoints, manager.log_dirs, dict(manager.logs),
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


def build_cluster(config: BrokerConfig, *, nodes: int | None = None, node_ids: list[int] | None = None,
                  racks: list[str | None] | None = None,
                  node_listeners: list[tuple[Endpoint, ...]] | None = None) -> Cluster:
    """A cluster of brokers in this process: `nodes` brokers with ids 0..nodes-1 (or `node_ids`), each with its
    listeners (`node_listeners`, one tuple per node; default: the configured ones), its rack (`racks`; default
    `broker.rack`) and its logs in `<log dir>/node-<id>/`. Without `nodes` and `node_ids`: the single broker of
    `config`, with today's layout. Call `startup()` on the result before serving."""
    if nodes is None and node_ids is None:
        cluster = Cluster(config)
        Broker(config, cluster=cluster)
        return cluster
    ids = list(node_ids) if node_ids is not None else list(range(nodes))
    if nodes is not None and len(ids) != nodes:
        raise ValueError(f"{nodes} nodes but {len(ids)} node ids")
    if not ids or len(set(ids)) != len(ids) or min(ids) < 0:
        raise ValueError(f"node ids must be distinct and not negative, got {ids}")
    for name, values in (("racks", racks), ("listeners", node_listeners)):
        if values is not None and len(values) != len(ids):
            raise ValueError(f"{len(ids)} nodes but {len(values)} {name}")
    cluster = Cluster(config, multi_node=True)
    for index, node_id in enumerate(ids):
        node_config = config.for_node(
            node_id, listeners=node_listeners[index] if node_listeners is not None else config.listeners,
            data_dirs=node_data_dirs(config, node_id), rack=racks[index] if racks is not None else config.broker_rack)
        Broker(node_config, cluster=cluster)
    return cluster
