"""Replication between the nodes of one in-process cluster, with Apache Kafka's rules.

Followers copy their leader's batches byte for byte: a follower node reads the leader node's log from its own log
end offset (LEO) and appends what it read with `Log.append_as_follower`, which keeps offsets, leader epochs and
producer ids (and checks each batch's CRC once). There is no network between nodes and no polling loop: the leader's
appends (`on_leader_append`, called by `Broker.notify_appended`) wake one copier task per follower node, which
coalesces the wake-ups of a produce burst into few passes of at most `replica.fetch.max.bytes` per partition.

What each copy pass does is what Kafka's ReplicaFetcherThread and the leader's Partition do for one fetch:
- Truncation by leader epoch (KIP-101/KIP-279, checked on every pass as a fetch with `lastFetchedEpoch` is): the
  leader answers the follower's latest epoch with `epochs.end_offset_for`; when the follower's log diverges it is
  truncated to the end offset of the last epoch both share (an old leader coming back after an unclean election
  loses what the new leader never had). A follower ahead of the leader without usable epochs truncates to the
  leader's LEO; one behind the leader's log start offset starts over there.
- The follower's high watermark (HW) is min(leader's HW, its LEO); its log start offset follows the leader's
  (DeleteRecords, retention) once its HW has reached it. A replica honours `flush.messages` (fsync in an executor)
  before the leader counts what it copied.
- The leader records the follower's LEO and `lastCaughtUpTimeMs` (Kafka's ReplicaState rules), adds an eligible
  follower back to the ISR (`controller.expand_isr`) once its LEO reaches the leader's HW and the start of the
  leader's current epoch, and advances its HW to the smallest LEO of the ISR and of the replicas that are caught up
  and alive - but only while the ISR holds at least the effective `min.insync.replicas` (min of the topic's value
  and the replica count: Kafka's strict min ISR rule since 3.7).
- Every `replica.lag.time.max.ms` / 2 the leaders drop from their ISR the followers not caught up for
  `replica.lag.time.max.ms` (`controller.shrink_isr`), as Kafka's isr-expiration task does.

acks=all waits in `wait_for_isr` until the leader's HW reaches the offset (Kafka's DelayedProduce: NONE, or
NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR is below min.insync.replicas by then; REQUEST_TIMED_OUT after the
timeout; NOT_LEADER_OR_FOLLOWER once another node leads or the partition is offline or deleted).

Controller changes (`on_partitions_changed`, a controller listener): a new leader epoch makes the new leader record
the epoch's start offset (Kafka's makeLeader) and reset its view of the followers, which are woken to truncate and
copy; replicas added by a reassignment get a log (same topic id and config), replicas removed lose theirs.

Faults: a stopped node (`NodeInfo.alive` False) and an isolated one (`isolated`) neither copy nor are copied from;
the controller takes stopped nodes out of ISRs, the lag check isolated ones. `delay_follower` makes a node wait
before each copy pass.

A partition with a single replica (every partition of a single node) has nothing to replicate: storage keeps its
HW at its LEO and `wait_for_isr` answers at once. Every partition with several replicas (or that had several: its HW
was set) has a `_PartitionLeader` here while it has a leader, and its HW is set by this module only.

Everything runs on the event loop; a copy pass is synchronous (reads and writes of the page cache, as the leader's
own appends are).
"""
from __future__ import annotations

import asyncio
import logging
import os
import struct
import time
from dataclasses import dataclass, field

from ..protocol.error_codes import ErrorCode
from ..storage.errors import StorageError
from ..storage.leader_epoch import UNDEFINED_EPOCH
from .controller import ControllerError
from .metadata import NO_LEADER, PartitionState

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

UNKNOWN_OFFSET = -1
_BASE_OFFSET = struct.Struct(">q")
_MIN_ISR_CHECK_INTERVAL_MS = 10  # replica.lag.time.max.ms may be tiny in tests: no busier check than this
_MAX_TRUNCATION_ROUNDS = 16  # each round drops at least one epoch: a log has few


def _monotonic_ms() -> float:
    return time.monotonic() * 1000


@dataclass
class _FollowerState:
    """The leader's view of one follower (Kafka's ReplicaState)."""

    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_fetch_leader_log_end_offset: int = 0
    last_fetch_time_ms: float = 0.0
    # The latest time at which the follower had everything the leader had (when it last fetched, or before).
    last_caught_up_time_ms: float = 0.0

    def is_caught_up(self, leader_end_offset: int, now_ms: float, max_lag_ms: int) -> bool:
        return leader_end_offset == self.log_end_offset or now_ms - self.last_caught_up_time_ms <= max_lag_ms

    def record_fetch(self, fetch_offset: int, log_start_offset: int, now_ms: float, leader_end_offset: int) -> None:
        """A copy pass ended with the follower at `fetch_offset` while the leader ended at `leader_end_offset`
        (Kafka's updateFetchStateOrThrow: a fetch from the leader's end catches up now; one from at least where the
        leader ended at the previous fetch catches up as of that fetch)."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.last_fetch_leader_log_end_offset = max(leader_end_offset, self.last_fetch_leader_log_end_offset)
        self.last_fetch_time_ms = now_ms

    def reset(self, now_ms: float, leader_end_offset: int, *, new_leader: bool, in_sync: bool) -> None:
        """A leader epoch starts (Kafka's resetReplicaState): an in-sync follower counts as caught up now, another
        not at all (so it holds back no HW); a new leader knows nothing of the follower's log yet."""
        self.last_caught_up_time_ms = now_ms if in_sync else 0.0
        if new_leader:
            self.log_end_offset = self.log_start_offset = UNKNOWN_OFFSET
            self.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
            self.last_fetch_time_ms = 0.0
        else:
            self.last_fetch_leader_log_end_offset = leader_end_offset
            self.last_fetch_time_ms = now_ms if in_sync else 0.0


@dataclass
class _Waiter:
    required_offset: int
    future: asyncio.Future


@dataclass
class _PartitionLeader:
    """The leader's side of one partition: its epoch, its view of the followers, the acks=all waiting on it."""

    leader_id: int
    leader_epoch: int
    epoch_start_offset: int
    followers: dict[int, _FollowerState] = field(default_factory=dict)
    waiters: list[_Waiter] = field(default_factory=list)

    def fail_waiters(self, code: ErrorCode) -> None:
        waiters, self.waiters = self.waiters, []
        for waiter in waiters:
            _resolve(waiter.future, code)


@dataclass
class _Fetcher:
    """The copier task of one follower node and the partitions it has been woken for."""

    node_id: int
    task: asyncio.Task | None = None
    pending: dict[TopicPartition, None] = field(default_factory=dict)  # insertion-ordered set
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    delay_ms: float = 0.0
    delay_changed: asyncio.Event = field(default_factory=asyncio.Event)


class Replication:
    """Replication for every partition of one cluster (see the module docstring)."""

    def __init__(self, cluster):
        self.cluster = cluster
        config = cluster.config
        self._lag_ms = config.replica_lag_time_max_ms
        self._fetch_max_bytes = config.replica_fetch_max_bytes
        self._managed = cluster.multi_node  # a single node's HW is storage's (its LEO)
        self._leaders: dict[TopicPartition, _PartitionLeader] = {}
        self._fetchers: dict[int, _Fetcher] = {}
        self._delays: dict[int, float] = {}
        self._connected = self._connected_nodes()
        self._failing: set[tuple[int, TopicPartition]] = set()  # passes that failed: logged once until one succeeds
        self._isr_task: asyncio.Task | None = None
        self._running = False
        if self._managed:
            for state in self._metadata.all_partitions():
                self._partition_changed(state)

    @property
    def _metadata(self):
        return self.cluster.metadata

    # --- life cycle -----------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start copying (on the running loop): every follower catches up once, then on wake-ups."""
        if self._running or not self._managed:
            return
        self._running = True
        self._isr_task = asyncio.create_task(self._run_isr_expiration(), name="compatbroker isr-expiration")
        for state in self._metadata.all_partitions():
            self._wake_followers(state)

    async def stop(self) -> None:
        """Stop the copier tasks; acks=all still waiting answer NOT_LEADER_OR_FOLLOWER (the node goes away)."""
        self._running = False
        tasks = [task for task in [self._isr_task] + [f.task for f in self._fetchers.values()] if task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._isr_task = None
        self._fetchers.clear()
        for leader in self._leaders.values():
            leader.fail_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)

    # --- the leader's side ----------------------------------------------------------------------------------------

    def on_leader_append(self, topic: str, partition: int) -> None:
        """The leader's log grew: wake its followers, and advance the HW if the ISR is the leader alone."""
        tp = (topic, partition)
        leader = self._leaders.get(tp)
        if leader is None:
            return
        state = self._metadata.partition(topic, partition)
        if state is None or state.leader != leader.leader_id:
            return
        if self._running and leader.leader_id in self._connected:
            for node_id in leader.followers:
                if node_id in self._connected:
                    self._wake(node_id, tp)
        self._maybe_increment_hw(tp, state, leader)

    async def wait_for_isr(self, topic: str, partition: int, required_offset: int, timeout_s: float) -> ErrorCode:
        """acks=all: wait until the leader's HW reaches `required_offset` (the append's last offset + 1)."""
        state = self._metadata.partition(topic, partition)
        if state is None or state.leader == NO_LEADER:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        leader_log = self._log(state.leader, (topic, partition))
        if leader_log is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        verdict = self._verdict(state, leader_log, required_offset)
        if verdict is not None:
            return verdict
        leader = self._leaders.get((topic, partition))
        if leader is None or leader.leader_id != state.leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        self.on_leader_append(topic, partition)  # the followers copy even if the appender did not tell us
        verdict = self._verdict(state, leader_log, required_offset)
        if verdict is not None:
            return verdict
        return await self._wait((topic, partition), leader, required_offset, timeout_s)

    async def _wait(self, tp: TopicPartition, leader: _PartitionLeader, required_offset: int,
                    timeout_s: float) -> ErrorCode:
        loop = asyncio.get_running_loop()
        waiter = _Waiter(required_offset, loop.create_future())
        leader.waiters.append(waiter)
        timer = loop.call_later(max(timeout_s, 0.0), _resolve, waiter.future, ErrorCode.REQUEST_TIMED_OUT)
        try:
            return await waiter.future
        finally:
            timer.cancel()
            current = self._leaders.get(tp)  # a new epoch of the same leader took the waiters over
            for holder in (leader, current):
                if holder is not None and waiter in holder.waiters:
                    holder.waiters.remove(waiter)

    def _verdict(self, state: PartitionState, leader_log, required_offset: int) -> ErrorCode | None:
        """Kafka's checkEnoughReplicasReachOffset: None while the HW is below `required_offset`."""
        if leader_log.high_watermark < required_offset:
            return None
        if len(state.isr) < effective_min_isr(state, leader_log):
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    def _maybe_increment_hw(self, tp: TopicPartition, state: PartitionState, leader: _PartitionLeader,
                            now_ms: float | None = None) -> None:
        """Kafka's maybeIncrementLeaderHW: the smallest LEO of the ISR and of the replicas caught up and alive,
        never while the ISR is below the effective min.insync.replicas; then complete what waited for it."""
        if self._leaders.get(tp) is not leader or state.leader != leader.leader_id:
            return  # the leader changed meanwhile (an ISR change completed a reassignment)
        leader_log = self._log(leader.leader_id, tp)
        if leader_log is None or len(state.isr) < effective_min_isr(state, leader_log):
            return
        now_ms = _monotonic_ms() if now_ms is None else now_ms
        leader_end = leader_log.log_end_offset
        high_watermark = leader_end
        for node_id, follower in leader.followers.items():
            if follower.log_end_offset < high_watermark and (
                    node_id in state.isr or (follower.is_caught_up(leader_end, now_ms, self._lag_ms)
                                             and self._metadata.is_alive(node_id))):
                high_watermark = follower.log_end_offset
        if high_watermark > leader_log.high_watermark:
            leader_log.update_high_watermark(high_watermark)
            self._high_watermark_advanced(tp, state, leader, leader_log)

    def _high_watermark_advanced(self, tp: TopicPartition, state: PartitionState, leader: _PartitionLeader,
                                 leader_log) -> None:
        self._complete_waiters(state, leader, leader_log)
        self.cluster.nodes[leader.leader_id].notify_appended(*tp, replicate=False)  # consumers may read further
        if leader.leader_id not in self._connected:
            return
        for node_id in leader.followers:  # as the next fetch response would tell them
            if node_id in self._connected:
                follower_log = self._log(node_id, tp)
                if follower_log is not None:
                    self._set_follower_high_watermark(node_id, tp, follower_log, leader_log.high_watermark,
                                                      only_up=True)

    def _complete_waiters(self, state: PartitionState, leader: _PartitionLeader, leader_log) -> None:
        if not leader.waiters:
            return
        kept = []
        for waiter in leader.waiters:
            verdict = self._verdict(state, leader_log, waiter.required_offset)
            if verdict is None:
                kept.append(waiter)
            else:
                _resolve(waiter.future, verdict)
        leader.waiters = kept

    # --- ISR expiration -------------------------------------------------------------------------------------------

    async def _run_isr_expiration(self) -> None:
        interval_s = max(self._lag_ms / 2, _MIN_ISR_CHECK_INTERVAL_MS) / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                self.maybe_shrink_isr()
            except Exception:  # noqa: BLE001 - a bug: logged, and the next check runs as usual
                log.exception("ISR expiration check failed")

    def maybe_shrink_isr(self) -> int:
        """Drop from each ISR the followers not caught up for replica.lag.time.max.ms (Kafka's isr-expiration);
        also wake followers known to be behind (a wake-up missed, or the leader's log start moved by retention):
        Kafka's followers fetch all the time. Returns how many left an ISR."""
        now_ms = _monotonic_ms()
        out_of_sync = []
        for tp, leader in list(self._leaders.items()):
            state = self._metadata.partition(*tp)
            leader_log = self._log(leader.leader_id, tp)
            if state is None or state.leader != leader.leader_id or leader_log is None:
                continue
            leader_end = leader_log.log_end_offset
            for node_id, follower in leader.followers.items():
                if node_id in state.isr and not follower.is_caught_up(leader_end, now_ms, self._lag_ms):
                    out_of_sync.append((tp, node_id, follower, leader_end))
                elif self._can_copy(node_id, leader.leader_id) and (
                        follower.log_end_offset < leader_end
                        or follower.log_start_offset < leader_log.log_start_offset):  # retention on the leader
                    self._wake(node_id, tp)
        shrunk = 0
        for (topic, partition), node_id, follower, leader_end in out_of_sync:
            log.info("%s-%d: follower %d is out of sync (end offset %d, leader's %d, last caught up %.0f ms ago)",
                     topic, partition, node_id, follower.log_end_offset, leader_end,
                     now_ms - follower.last_caught_up_time_ms)
            try:
                shrunk += bool(self.cluster.controller.shrink_isr(topic, partition, node_id))
            except ControllerError as exc:
                log.warning("%s-%d: cannot shrink the ISR: %s", topic, partition, exc)
        return shrunk

    # --- the followers' side --------------------------------------------------------------------------------------

    def delay_follower(self, node_id: int, delay_ms: float) -> None:
        """Fault: node `node_id` waits `delay_ms` before each copy pass (0 ends the delay)."""
        self._delays[node_id] = max(float(delay_ms), 0.0)
        fetcher = self._fetchers.get(node_id)
        if fetcher is not None:
            fetcher.delay_ms = self._delays[node_id]
            fetcher.delay_changed.set()

    def _wake(self, node_id: int, tp: TopicPartition) -> None:
        if not self._running:
            return
        fetcher = self._fetchers.get(node_id)
        if fetcher is None:
            fetcher = self._fetchers[node_id] = _Fetcher(node_id, delay_ms=self._delays.get(node_id, 0))
            fetcher.task = asyncio.create_task(self._run_fetcher(fetcher), name=f"compatbroker replica fetcher "
                                                                               f"{node_id}")
        fetcher.pending[tp] = None
        fetcher.wake.set()

    def _wake_followers(self, state: PartitionState) -> None:
        leader = self._leaders.get((state.topic, state.partition))
        if leader is None or state.leader != leader.leader_id:
            return
        for node_id in leader.followers:
            if self._can_copy(node_id, leader.leader_id):
                self._wake(node_id, (state.topic, state.partition))

    async def _run_fetcher(self, fetcher: _Fetcher) -> None:
        while True:
            await fetcher.wake.wait()
            await self._delay(fetcher)
            fetcher.wake.clear()
            pending, fetcher.pending = fetcher.pending, {}
            for tp in pending:
                if await self._fetch_once(fetcher.node_id, tp):
                    fetcher.pending[tp] = None
            if fetcher.pending:
                fetcher.wake.set()
                await asyncio.sleep(0)  # more to copy: let requests run between passes

    async def _delay(self, fetcher: _Fetcher) -> None:
        while fetcher.delay_ms > 0:
            fetcher.delay_changed.clear()
            try:
                await asyncio.wait_for(fetcher.delay_changed.wait(), fetcher.delay_ms / 1000)
            except asyncio.TimeoutError:
                return

    async def _fetch_once(self, node_id: int, tp: TopicPartition) -> bool:
        """One copy pass; returns whether the follower is still behind. A failure is logged (once until a pass
        succeeds) and ends the pass: the next append or ISR check tries again."""
        try:
            follower_log = self._copy(node_id, tp)
            if follower_log is None:
                return False
            if follower_log.log_end_offset - follower_log.recovery_point >= follower_log.config.flush_messages:
                # flush.messages applies to replicas too; the leader counts the copy once it is durable
                await self.cluster.nodes[node_id].make_durable([follower_log])
            more = self._report_fetch(node_id, tp, follower_log)
        except (StorageError, OSError) as exc:
            self._log_failure(node_id, tp, exc)
            return False
        except Exception as exc:  # noqa: BLE001 - a bug must not stop the node's other partitions
            self._log_failure(node_id, tp, exc, bug=True)
            return False
        self._failing.discard((node_id, tp))
        return more

    def _log_failure(self, node_id: int, tp: TopicPartition, exc: Exception, *, bug: bool = False) -> None:
        if (node_id, tp) in self._failing:
            return
        self._failing.add((node_id, tp))
        if bug:
            log.exception("node %d: copying %s-%d failed", node_id, *tp)
        else:
            log.warning("node %d: copying %s-%d failed: %s", node_id, *tp, exc)

    def _copy(self, node_id: int, tp: TopicPartition):
        """The follower's side of a pass: truncate where it diverges, append what the leader has past its end,
        take the leader's HW and log start offset. Returns the follower's log, or None when it may not copy."""
        leader = self._leader_of_follower(node_id, tp)
        if leader is None:
            return None
        leader_log = self._log(leader.leader_id, tp)
        follower_log = self._log(node_id, tp)
        if leader_log is None or follower_log is None:
            return None
        now_ms = self.cluster.nodes[node_id].now_ms()
        _truncate_diverging(node_id, follower_log, leader_log, now_ms)
        _copy_batches(node_id, follower_log, leader_log, self._fetch_max_bytes, now_ms)
        self._follow_leader_offsets(node_id, tp, follower_log, leader_log, now_ms)
        return follower_log

    def _report_fetch(self, node_id: int, tp: TopicPartition, follower_log) -> bool:
        """The leader's side of a pass (Kafka's updateFollowerFetchState): record where the follower is, maybe
        take it back into the ISR, maybe advance the HW. Returns whether the follower is still behind."""
        leader = self._leader_of_follower(node_id, tp)
        leader_log = None if leader is None else self._log(leader.leader_id, tp)
        if leader_log is None or self._log(node_id, tp) is not follower_log:
            return False
        state = self._metadata.partition(*tp)
        now_ms = _monotonic_ms()
        leader.followers[node_id].record_fetch(follower_log.log_end_offset, follower_log.log_start_offset, now_ms,
                                               leader_log.log_end_offset)
        self._maybe_expand_isr(tp, state, leader, node_id, leader_log)
        self._maybe_increment_hw(tp, state, leader, now_ms)
        return follower_log.log_end_offset < leader_log.log_end_offset

    def _leader_of_follower(self, node_id: int, tp: TopicPartition) -> _PartitionLeader | None:
        """The partition's leader state when `node_id` is one of its followers and may copy from it now."""
        state = self._metadata.partition(*tp)
        leader = self._leaders.get(tp)
        if (state is None or leader is None or state.leader != leader.leader_id or node_id not in leader.followers
                or not self._can_copy(node_id, leader.leader_id)):
            return None
        return leader

    def _follow_leader_offsets(self, node_id: int, tp: TopicPartition, follower_log, leader_log, now_ms: int) -> None:
        """The follower's HW from the leader's, and its log start offset up to the leader's once its HW is there
        (Kafka's maybeIncrementLogStartOffset refuses a start offset beyond the HW)."""
        self._set_follower_high_watermark(node_id, tp, follower_log, leader_log.high_watermark)
        start = leader_log.log_start_offset
        if follower_log.log_start_offset < start <= follower_log.high_watermark:
            follower_log.advance_log_start_offset(start)
            follower_log.delete_segments_below_start(now_ms)
            self.cluster.nodes[node_id].notify_appended(*tp, replicate=False)  # DeleteRecords waits for it

    def _set_follower_high_watermark(self, node_id: int, tp: TopicPartition, follower_log, leader_high_watermark: int,
                                     *, only_up: bool = False) -> None:
        target = min(leader_high_watermark, follower_log.log_end_offset)
        current = follower_log.high_watermark
        if target == current or (only_up and target < current):
            return
        follower_log.update_high_watermark(target)
        if target > current:
            self.cluster.nodes[node_id].notify_appended(*tp, replicate=False)  # a consumer reading from it

    def _maybe_expand_isr(self, tp: TopicPartition, state: PartitionState, leader: _PartitionLeader, node_id: int,
                          leader_log) -> None:
        """Kafka's maybeExpandIsr: a live follower whose LEO has reached the leader's HW and an offset of the
        leader's current epoch rejoins the ISR."""
        if node_id in state.isr or not self._metadata.is_alive(node_id):
            return
        end = leader.followers[node_id].log_end_offset
        if end >= leader_log.high_watermark and end >= leader.epoch_start_offset:
            try:
                self.cluster.controller.expand_isr(tp[0], tp[1], node_id)
            except ControllerError as exc:
                log.warning("%s-%d: cannot add node %d to the ISR: %s", tp[0], tp[1], node_id, exc)

    # --- controller changes ---------------------------------------------------------------------------------------

    def on_partitions_changed(self, changed: list[PartitionState]) -> None:
        """A controller listener: nodes that came back are woken, and each changed partition gets its leader's
        state (a new epoch), its replica logs (reassignments), its HW and its followers woken."""
        if not self._managed:
            return
        self._nodes_changed()
        for state in changed:
            try:
                self._partition_changed(state)
            except Exception:  # noqa: BLE001 - a bug here must not keep the change from the other listeners
                log.exception("%s-%d: replication could not follow the change", state.topic, state.partition)

    def _nodes_changed(self) -> None:
        connected = self._connected_nodes()
        returned = connected - self._connected
        self._connected = connected
        for node_id in sorted(returned):
            self._node_returned(node_id)

    def _connected_nodes(self) -> set[int]:
        return {node_id for node_id, node in self._metadata.nodes.items() if node.alive and not node.isolated}

    def _node_returned(self, node_id: int) -> None:
        """A node started again or is no longer isolated: its replica logs are brought in line with the metadata,
        and it copies again, and is copied from."""
        self._delete_stray_logs(node_id)
        for state in self._metadata.all_partitions():
            if node_id in state.replicas:
                self._ensure_replica_log(node_id, state)
                self._wake_followers(state)

    def _partition_changed(self, state: PartitionState) -> None:
        tp = (state.topic, state.partition)
        current = self._metadata.partition(*tp)
        if current is None or current.leader == NO_LEADER:  # deleted, or offline
            leader = self._leaders.pop(tp, None)
            if leader is not None:
                leader.fail_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return
        self._sync_replica_logs(current)
        leader = self._leaders.get(tp)
        if leader is None and not self._replicated(current):
            return  # one replica: storage keeps its HW at its LEO, as on a single node
        if leader is None or leader.leader_id != current.leader or leader.leader_epoch != current.leader_epoch:
            leader = self._become_leader(tp, current, leader)
            if leader is None:
                return
        else:
            self._sync_followers(leader, current)
        self._maybe_increment_hw(tp, current, leader)
        leader_log = self._log(leader.leader_id, tp)
        if leader_log is not None:
            self._complete_waiters(current, leader, leader_log)
        self._wake_followers(current)

    def _replicated(self, state: PartitionState) -> bool:
        """Whether this module keeps the partition's HW: it has several replicas, or had (its HW was set)."""
        if len(state.replicas) > 1:
            return True
        leader_log = self._log(state.leader, (state.topic, state.partition))
        return leader_log is not None and leader_log.high_watermark_set

    def _become_leader(self, tp: TopicPartition, state: PartitionState,
                       previous: _PartitionLeader | None) -> _PartitionLeader | None:
        """A new leader epoch (Kafka's makeLeader): the epoch's start offset is recorded in the leader's epoch
        cache (so that followers with later entries of an older epoch find where to truncate), the HW is taken in
        hand, and the followers' state reset."""
        if previous is not None and previous.leader_id != state.leader:
            previous.fail_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        leader_log = self._log(state.leader, tp)
        if leader_log is None:
            self._leaders.pop(tp, None)
            log.warning("%s-%d: leader %d has no replica log", tp[0], tp[1], state.leader)
            return None
        start_offset = leader_log.log_end_offset
        if start_offset > 0:  # an empty log records the epoch with its first batch
            leader_log.epochs.assign(state.leader_epoch, start_offset)
        leader_log.update_high_watermark(leader_log.high_watermark)  # from now on set here, not storage's LEO
        new_leader = previous is None or previous.leader_id != state.leader
        leader = _PartitionLeader(state.leader, state.leader_epoch, start_offset,
                                  waiters=[] if new_leader else previous.waiters)
        now_ms = _monotonic_ms()
        for node_id in state.replicas:
            if node_id != state.leader:
                follower = _FollowerState() if new_leader else previous.followers.get(node_id, _FollowerState())
                follower.reset(now_ms, start_offset, new_leader=new_leader, in_sync=node_id in state.isr)
                leader.followers[node_id] = follower
        self._leaders[tp] = leader
        return leader

    def _sync_followers(self, leader: _PartitionLeader, state: PartitionState) -> None:
        """The replica set changed (reassignment): followers come and go."""
        for node_id in state.replicas:
            if node_id != leader.leader_id and node_id not in leader.followers:
                leader.followers[node_id] = _FollowerState()
        for node_id in [node_id for node_id in leader.followers if node_id not in state.replicas]:
            del leader.followers[node_id]

    # --- replica logs ---------------------------------------------------------------------------------------------

    def _sync_replica_logs(self, state: PartitionState) -> None:
        """Live nodes host a log for each replica they are assigned (a reassignment adds some) and none for the
        partitions they no longer are a replica of (a reassignment completed)."""
        tp = (state.topic, state.partition)
        for node_id, node in self.cluster.nodes.items():
            if not self._metadata.is_alive(node_id):
                continue
            if node_id in state.replicas:
                self._ensure_replica_log(node_id, state)
            elif node.get_log(*tp) is not None:
                self._delete_replica_log(node_id, *tp)

    def _ensure_replica_log(self, node_id: int, state: PartitionState) -> None:
        node = self.cluster.nodes.get(node_id)
        if node is None or node.get_log(state.topic, state.partition) is not None:
            return
        info = self._metadata.topic(state.topic)
        if info is None:
            return
        node.logs.topic_ids.setdefault(state.topic, info.topic_id)  # the replica's partition.metadata carries it
        try:
            node.logs.create_log(state.topic, state.partition, now_ms=node.now_ms())
        except (OSError, StorageError) as exc:  # the node stays out of the ISR; its next return tries again
            log.warning("node %d: cannot create the replica log of %s-%d: %s", node_id, state.topic,
                        state.partition, exc)
            return
        log.info("node %d: created replica log of %s-%d", node_id, state.topic, state.partition)

    def _delete_replica_log(self, node_id: int, topic: str, partition: int) -> None:
        log.info("node %d: deleting %s-%d, no longer one of its replicas", node_id, topic, partition)
        try:
            self.cluster.nodes[node_id].logs.delete_log(topic, partition)
        except OSError as exc:  # what is left is deleted at the next start, as a partition no one hosts
            log.warning("node %d: cannot delete %s-%d: %s", node_id, topic, partition, exc)

    def _delete_stray_logs(self, node_id: int) -> None:
        node = self.cluster.nodes.get(node_id)
        if node is None:
            return
        for topic, partition in list(node.logs.logs):
            state = self._metadata.partition(topic, partition)
            if state is not None and node_id not in state.replicas:
                self._delete_replica_log(node_id, topic, partition)

    # --- helpers --------------------------------------------------------------------------------------------------

    def _log(self, node_id: int, tp: TopicPartition):
        node = self.cluster.nodes.get(node_id)
        return None if node is None else node.get_log(*tp)

    def _can_copy(self, follower_id: int, leader_id: int) -> bool:
        return follower_id in self._connected and leader_id in self._connected


def effective_min_isr(state: PartitionState, leader_log) -> int:
    """Kafka's effectiveMinIsr: min.insync.replicas, at most the replica count (what Produce checks before an
    acks=all append and what the HW needs to advance)."""
    return min(leader_log.config.min_insync_replicas, len(state.replicas))


def _truncate_diverging(node_id: int, follower_log, leader_log, now_ms: int) -> None:
    """Truncation by leader epoch (Kafka's truncation on fetch, KIP-595/KIP-279 rules): while the leader's end
    offset for the follower's latest epoch shows the logs diverge, cut the follower back to the end offset of the
    largest epoch both know."""
    for _ in range(_MAX_TRUNCATION_ROUNDS):
        fetch_offset = follower_log.log_end_offset
        last_epoch = follower_log.epochs.latest_epoch
        if last_epoch == UNDEFINED_EPOCH:
            return
        epoch, end_offset = leader_log.epochs.end_offset_for(last_epoch, leader_log.log_end_offset)
        if epoch == UNDEFINED_EPOCH:
            _reset_out_of_range(node_id, follower_log, leader_log, now_ms)
            return
        if epoch == last_epoch and end_offset >= fetch_offset:
            return  # no divergence
        follower_epoch, follower_end = follower_log.epochs.end_offset_for(epoch, fetch_offset)
        if follower_epoch == UNDEFINED_EPOCH:
            target, done = min(end_offset, fetch_offset), True
        elif follower_epoch != epoch:  # an epoch the follower never had: cut back to what it has, ask again
            target, done = min(follower_end, fetch_offset), False
        else:
            target, done = min(follower_end, end_offset, fetch_offset), True
        _truncate(node_id, follower_log, target, f"diverges from the leader at epoch {epoch}")
        if done or follower_log.log_end_offset >= fetch_offset:
            return


def _reset_out_of_range(node_id: int, follower_log, leader_log, now_ms: int) -> None:
    """Kafka's fetchOffsetAndTruncate: a follower ahead of the leader truncates to the leader's end; one below the
    leader's log start offset starts over there."""
    leader_end, follower_end = leader_log.log_end_offset, follower_log.log_end_offset
    if leader_end < follower_end:
        _truncate(node_id, follower_log, leader_end, "is ahead of the leader")
    elif leader_log.log_start_offset > follower_end:
        log.info("node %d: %s-%d starts over at the leader's log start offset %d", node_id, follower_log.topic,
                 follower_log.partition, leader_log.log_start_offset)
        follower_log.truncate_fully_and_start_at(leader_log.log_start_offset, now_ms=now_ms)


def _truncate(node_id: int, follower_log, offset: int, why: str) -> None:
    if offset >= follower_log.log_end_offset:
        return
    level = logging.WARNING if offset < follower_log.high_watermark else logging.INFO
    log.log(level, "node %d: truncating %s-%d from %d to %d (it %s; high watermark %d)", node_id, follower_log.topic,
            follower_log.partition, follower_log.log_end_offset, offset, why, follower_log.high_watermark)
    follower_log.truncate_to(offset)  # pulls the HW down with it


def _copy_batches(node_id: int, follower_log, leader_log, max_bytes: int, now_ms: int) -> None:
    """Append the leader's batches from the follower's LEO, up to `max_bytes` (at least one batch)."""
    for _ in range(_MAX_TRUNCATION_ROUNDS):
        offset = follower_log.log_end_offset
        if offset > leader_log.log_end_offset or offset < leader_log.log_start_offset:
            _reset_out_of_range(node_id, follower_log, leader_log, now_ms)
            offset = follower_log.log_end_offset
        if offset >= leader_log.log_end_offset:
            return
        data = _read(leader_log, offset, max_bytes)
        if not data:
            return
        base_offset = _BASE_OFFSET.unpack_from(data)[0]
        if base_offset >= offset:
            follower_log.append_as_follower(data, now_ms=now_ms)
            return
        # The leader's batch holding our end starts below it: our last batch is not the leader's (an unclean
        # election cut it elsewhere). Drop ours from there and copy the leader's.
        if base_offset >= follower_log.log_start_offset and follower_log.log_end_offset > follower_log.log_start_offset:
            _truncate(node_id, follower_log, base_offset, "ends inside one of the leader's batches")
        else:
            follower_log.truncate_fully_and_start_at(base_offset, now_ms=now_ms)


def _read(leader_log, offset: int, max_bytes: int) -> bytes:
    regions = leader_log.read(offset, max_bytes).regions
    chunks = [os.pread(region.file.fileno(), region.length, region.position) for region in regions]
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _resolve(future: asyncio.Future, code: ErrorCode) -> None:
    if not future.done():
        future.set_result(code)
