"""SharePartitionManager: a node's share-partitions (KIP-932), by (group id, topic id, partition), for the
partitions this node leads, as Kafka's SharePartitionManager keeps them; the share sessions of this node; the
acquisition-lock timers; and the wake-ups of ShareFetch long polls when records become available again.

- A share-partition is made on first use from its persisted state (`state_store.py`, on the node leading its
  partition of `__share_group_state`), or, without one, at the position `share.auto.offset.reset` names (latest:
  the high watermark; earliest: the log start offset; by_duration: the first offset whose timestamp is at most that
  long ago, else the high watermark), which is persisted at once so that a restart does not move it. It leaves
  memory when this node no longer leads the partition (or its leader epoch changed meanwhile: the next leader
  reads the persisted state), and when the group's last share session on this node ends while it holds no lock.
- Acquisition reads whole batches from the log (from the share-partition's next fetch offset, below the high
  watermark, or the last stable offset for `share.isolation.level=read_committed`, where aborted transactions'
  batches are archived) and answers those holding acquired records, with their AcquiredRecords ranges. Control
  batches (transaction markers) are archived: they are never records for a consumer.
- Every change besides an acquisition (acknowledgements, releases, locks expiring, the start offset following
  the log start offset) is persisted as a snapshot; an acknowledgement is answered once that write is durable.
  A failed write answers its error; the change stays in memory (Kafka rolls it back).
- Records become available again on RELEASE, on a lock expiring (`share.record.lock.duration.ms`; one timer per
  share-partition, at its earliest lock deadline), and when a share session ends (epoch -1, or its connection
  closing): waiting ShareFetches wake then, and after any acknowledgement (it may make room under the in-flight
  limit), as Kafka completes its delayed share fetches. A member that leaves the group or is fenced keeps its
  records until its session ends or their locks expire, as with Kafka 4.2's group coordinator.

Everything runs on the event loop.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from dataclasses import dataclass, field

from ..coordinator.group_config import group_config, settings_of
from ..protocol.error_codes import ErrorCode
from ..protocol.records.batch import iter_batches
from ..protocol.records.errors import CorruptRecordError
from ..storage import OffsetOutOfRangeError
from .partition import (AckBatch, AcknowledgeType, AcquiredRange, LogBatch, RecordState, ShareAckError,
                        SharePartition)
from .sessions import ShareSession, ShareSessionCache
from .state_store import PersistedState, ShareStateError, store_for

log = logging.getLogger(__name__)

Key = tuple  # (group id, topic id, partition)
READ_COMMITTED = "read_committed"
FIRST_CHUNK_BYTES = 65_536  # the log is read in chunks from this size, doubling up to MAX_CHUNK_BYTES, so that
MAX_CHUNK_BYTES = 1_048_576  # a large MaxBytes does not read what the acquisition does not take


@dataclass
class PartitionFetch:
    """One partition's part of a ShareFetch answer."""

    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    records: bytes = b""
    acquired: list[AcquiredRange] = field(default_factory=list)
    count: int = 0


@dataclass(frozen=True)
class GroupLimits:
    """What one group's configs say about delivery, read once per request."""

    lock_duration_ms: int
    delivery_count_limit: int
    read_committed: bool
    auto_offset_reset: str
    reset_duration_ms: int | None
    max_record_locks: int


class SharePartitionManager:
    def __init__(self, host):
        self._host = host
        self.settings = settings_of(host)[1]
        self.sessions = ShareSessionCache(self.settings.max_share_sessions)
        self._partitions: dict[Key, SharePartition] = {}
        self._leader_epochs: dict[Key, int] = {}
        self._initializing: dict[Key, asyncio.Future] = {}
        self._waiters: dict[Key, set[asyncio.Future]] = {}
        self._timers: dict[Key, asyncio.TimerHandle] = {}  # the next lock check of each share-partition
        self._tasks: set[asyncio.Task] = set()
        self._by_connection: dict[asyncio.Future, set[ShareSession]] = {}  # sessions each connection opened
        self._stopped = False

    def limits(self, group_id: str) -> GroupLimits:
        config = group_config(self._host, group_id)
        return GroupLimits(config.share_record_lock_duration_ms, config.share_delivery_count_limit,
                           config.share_isolation_level == READ_COMMITTED, config.share_auto_offset_reset,
                           config.share_reset_duration_ms, self.settings.partition_max_record_locks)

    # --- share-partitions -----------------------------------------------------------------------------------------

    def cached(self, key: Key) -> SharePartition | None:
        return self._partitions.get(key)

    async def share_partition(self, group_id: str, topic, partition: int, limits: GroupLimits) -> SharePartition:
        """The share-partition, made from its persisted state on first use. Raises ShareStateError."""
        key = (group_id, topic.topic_id, partition)
        epoch = self._host.leader_epoch(topic.name, partition)
        existing = self._partitions.get(key)
        if existing is not None and self._leader_epochs.get(key) == epoch:
            return existing
        self._drop(key)
        pending = self._initializing.get(key)
        if pending is None:
            pending = self._initializing[key] = asyncio.ensure_future(self._initialize(key, topic, limits, epoch))
            pending.add_done_callback(lambda _done, key=key: self._initializing.pop(key, None))
        return await asyncio.shield(pending)

    async def _initialize(self, key: Key, topic, limits: GroupLimits, epoch: int) -> SharePartition:
        group_id, topic_id, partition = key
        partition_log = self._host.get_log(topic.name, partition)
        state = await store_for(self._host, key).read(key)
        if state is None:
            share_partition = SharePartition(group_id, topic_id, partition, self._initial_offset(partition_log,
                                                                                                 limits),
                                             created_ms=self._host.now_ms())
            share_partition.dirty = True
        else:
            share_partition = SharePartition(group_id, topic_id, partition, state.start_offset,
                                             state_epoch=state.state_epoch, batches=state.batches,
                                             created_ms=state.create_timestamp_ms)
        share_partition.move_start_to_log_start(partition_log.log_start_offset)
        if share_partition.dirty:
            await self._persist(key, share_partition)
        self._partitions[key] = share_partition
        self._leader_epochs[key] = epoch
        return share_partition

    def _initial_offset(self, partition_log, limits: GroupLimits) -> int:
        reset = limits.auto_offset_reset
        if reset == "earliest":
            return partition_log.log_start_offset
        if limits.reset_duration_ms is not None:
            found = partition_log.offset_for_timestamp(self._host.now_ms() - limits.reset_duration_ms)
            if found is not None:
                return min(found.offset, partition_log.high_watermark)
        return partition_log.high_watermark

    def _drop(self, key: Key) -> None:
        self._partitions.pop(key, None)
        self._leader_epochs.pop(key, None)

    def forget_topic(self, topic_id: uuid.UUID) -> None:
        """The topic is gone (deleted): so are its share-partitions here."""
        for key in [key for key in self._partitions if key[1] == topic_id]:
            self._drop(key)

    def forget_unled(self, topic: str, topic_id: uuid.UUID, partition: int) -> None:
        """This node does not lead the partition (any more): its share-partitions go; the leader has the state."""
        for key in [key for key in self._partitions if key[1] == topic_id and key[2] == partition]:
            self._drop(key)

    # --- persistence ----------------------------------------------------------------------------------------------

    def _state_of(self, key: Key, share_partition: SharePartition) -> PersistedState:
        """What to persist now (taken at once, so that writes land in the order of the changes)."""
        share_partition.dirty = False
        return PersistedState(share_partition.start_offset, share_partition.state_epoch,
                              self._leader_epochs.get(key, 0), tuple(share_partition.state_batches()),
                              share_partition.created_ms)

    async def _persist(self, key: Key, share_partition: SharePartition) -> None:
        """Write the share-partition's state, durably; raises ShareStateError (the change stays to be written)."""
        try:
            await store_for(self._host, key).write(key, self._state_of(key, share_partition))
        except ShareStateError:
            share_partition.dirty = True
            raise

    def _persist_soon(self, key: Key, share_partition: SharePartition) -> None:
        """Persist in the background (lock expiry, session end): a failure is logged, the next change retries."""
        if not share_partition.dirty or self._stopped:
            return
        self._spawn(self._write_quietly(key, share_partition, self._state_of(key, share_partition)))

    async def _write_quietly(self, key: Key, share_partition: SharePartition, state: PersistedState) -> None:
        try:
            await store_for(self._host, key).write(key, state)
        except ShareStateError as exc:
            share_partition.dirty = True
            log.warning("share-partition %s-%s-%d: state not persisted: %s", key[0], key[1], key[2], exc)

    def _spawn(self, coroutine) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- acquisition ----------------------------------------------------------------------------------------------

    async def acquire(self, group_id: str, member_id: str, topic, partition: int, limits: GroupLimits, *,
                      max_bytes: int, max_records: int, batch_size: int, strict: bool,
                      first: bool) -> PartitionFetch:
        """Acquire records of one partition this node leads for `member_id` and read their batches."""
        if not self._host.is_leader(topic.name, partition):  # it moved during a long poll: the new leader acquires
            self.forget_unled(topic.name, topic.topic_id, partition)
            return PartitionFetch(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        try:
            share_partition = await self.share_partition(group_id, topic, partition, limits)
        except ShareStateError as exc:
            return PartitionFetch(exc.error_code, str(exc))
        partition_log = self._host.get_log(topic.name, partition)
        if partition_log is None:
            return PartitionFetch(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        key = (group_id, topic.topic_id, partition)
        share_partition.move_start_to_log_start(partition_log.log_start_offset)
        fetch_offset = share_partition.next_fetch_offset()
        bound = partition_log.last_stable_offset if limits.read_committed else partition_log.high_watermark
        if fetch_offset >= bound or max_records <= 0 or not share_partition.can_acquire(limits.max_record_locks):
            return PartitionFetch()
        now_ms, parts, ranges, count = self._host.now_ms(), [], [], 0
        offset, bytes_left, chunk_bytes = fetch_offset, max_bytes, FIRST_CHUNK_BYTES
        while True:  # growing chunks: a fetch of a few records does not read (or parse) megabytes
            size = min(bytes_left, chunk_bytes)
            # A batch larger than the chunk is still read whole while the request's bytes allow more than it.
            whole = (first and not parts) or bytes_left > size
            try:
                chunk = _read_chunk(partition_log, offset, size, bound, whole, limits.read_committed)
            except (CorruptRecordError, OSError) as exc:  # answered for the partition; what was taken stays
                log.error("%s-%d: reading for share group %s failed: %s", topic.name, partition, group_id, exc)
                if ranges:
                    break
                code = ErrorCode.CORRUPT_MESSAGE if isinstance(exc, CorruptRecordError) \
                    else ErrorCode.KAFKA_STORAGE_ERROR
                return PartitionFetch(code, str(exc))
            if chunk is None:
                break
            data, headers, batches = chunk
            acquisition = share_partition.acquire(
                member_id, batches, fetch_offset=offset, max_records=max_records - count, batch_size=batch_size,
                strict=strict, max_record_locks=limits.max_record_locks, now_ms=now_ms,
                lock_duration_ms=limits.lock_duration_ms)
            _extend(ranges, acquisition.ranges, batch_size)
            count += acquisition.count
            held = _batches_holding(data, headers, acquisition.ranges)
            parts.append(held)
            bytes_left -= len(held)
            offset = headers[-1][1].next_offset
            chunk_bytes = min(chunk_bytes * 2, MAX_CHUNK_BYTES)
            if count >= max_records or bytes_left <= 0 or offset >= bound \
                    or acquisition.last_offset < headers[-1][1].last_offset:  # stopped inside this chunk
                break
        self._persist_soon(key, share_partition)  # archived aborted or compacted offsets
        if not ranges:
            return PartitionFetch()
        self._schedule_lock_check(key, limits.lock_duration_ms)
        return PartitionFetch(records=b"".join(parts), acquired=ranges, count=count)

    # --- acknowledgement ------------------------------------------------------------------------------------------

    async def acknowledge(self, group_id: str, member_id: str, topic, partition: int, batches: list[AckBatch],
                          limits: GroupLimits) -> tuple[ErrorCode, str | None]:
        """Apply one partition's acknowledgements and persist them; the partition's answer (code, message)."""
        key = (group_id, topic.topic_id, partition)
        if not self._host.is_leader(topic.name, partition):
            self.forget_unled(topic.name, topic.topic_id, partition)
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
        share_partition = self._partitions.get(key)
        if share_partition is None:  # Kafka: no share-partition in the cache
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        try:
            share_partition.acknowledge(member_id, batches, delivery_count_limit=limits.delivery_count_limit,
                                        now_ms=self._host.now_ms(), lock_duration_ms=limits.lock_duration_ms)
        except ShareAckError as exc:
            return exc.error_code, str(exc)
        if any(kind == AcknowledgeType.RENEW for batch in batches for kind in batch.types):  # a new deadline
            self._schedule_lock_check(key, limits.lock_duration_ms)
        self._wake(key)  # released records, or room under the in-flight limit: waiting fetches look again
        if share_partition.dirty:
            try:
                await self._persist(key, share_partition)
            except ShareStateError as exc:
                return exc.error_code, str(exc)
        return ErrorCode.NONE, None

    # --- releases -------------------------------------------------------------------------------------------------

    def open_session(self, group_id: str, member_id: str, partitions, connection: asyncio.Future | None
                     ) -> ShareSession:
        """A new session (ShareFetch epoch 0; raises ShareSessionError), ended with `connection` (the request's
        `client_gone`) as Kafka's ConnectionDisconnectListener ends it. The member's previous session is replaced
        without releasing anything, as Kafka does."""
        previous = self.sessions.get(group_id, member_id)
        session = self.sessions.open(group_id, member_id, partitions, connection)
        self._unbind(previous)
        if connection is not None:
            sessions = self._by_connection.get(connection)
            if sessions is None:
                sessions = self._by_connection[connection] = set()
                connection.add_done_callback(self._connection_closed)
            sessions.add(session)
        return session

    def close_session(self, session: ShareSession) -> None:
        """The session ends (epoch -1, or its connection closed): the member's records on its partitions go back."""
        self._unbind(session)
        self._end(session)

    def _end(self, session: ShareSession) -> None:
        if self.sessions.remove_session(session):
            self._release_session(session)
            self._forget_idle_group(session.group_id)

    def _release_session(self, session: ShareSession) -> None:
        """Release the member's acquired records on the session's partitions and wake the fetches they may
        serve; persisted in the background."""
        limit = group_config(self._host, session.group_id).share_delivery_count_limit
        for key, share_partition in list(self._partitions.items()):
            if key[0] == session.group_id and (key[1], key[2]) in session.partitions:
                if share_partition.release_member(session.member_id, limit):
                    self._wake(key)
                self._persist_soon(key, share_partition)

    def _forget_idle_group(self, group_id: str) -> None:
        """The group's last session here ended: its share-partitions holding no lock leave memory (their state is
        persisted; Kafka drops them too, on ShareGroupListener.onGroupEmpty)."""
        if self.sessions.sessions_of_group(group_id):
            return
        for key, share_partition in list(self._partitions.items()):
            if key[0] == group_id and not share_partition.has_acquired() and not share_partition.dirty:
                self._drop(key)

    def _unbind(self, session: ShareSession | None) -> None:
        if session is not None and session.connection in self._by_connection:
            self._by_connection[session.connection].discard(session)

    def _connection_closed(self, connection: asyncio.Future) -> None:
        for session in self._by_connection.pop(connection, ()):
            self._end(session)

    def _schedule_lock_check(self, key: Key, delay_ms: int) -> None:
        """Look for expired locks of the share-partition in `delay_ms`: one timer per share-partition, at its
        earliest deadline (a later check is replaced by an earlier one; each check schedules the next)."""
        if self._stopped:
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + delay_ms / 1000 + 0.001
        pending = self._timers.get(key)
        if pending is not None:
            if pending.when() <= when:
                return
            pending.cancel()

        def check() -> None:
            self._timers.pop(key, None)
            self._expire_locks(key)

        self._timers[key] = loop.call_at(when, check)

    def _expire_locks(self, key: Key) -> None:
        share_partition = self._partitions.get(key)
        if share_partition is None:
            return
        limit = group_config(self._host, key[0]).share_delivery_count_limit
        if share_partition.expire_locks(self._host.now_ms(), limit):
            self._wake(key)
        deadline = share_partition.earliest_deadline()
        if deadline is not None:  # renewed or later locks: look again then
            self._schedule_lock_check(key, max(deadline - self._host.now_ms(), 0))
        self._persist_soon(key, share_partition)

    # --- long polls -----------------------------------------------------------------------------------------------

    def release_waiter(self, keys: list[Key]) -> asyncio.Future:
        """A future resolved when records of one of `keys` become available again (not by an append: those wake
        through the node's append waiters). Pass it to `forget_waiter` when done."""
        future = asyncio.get_running_loop().create_future()
        for key in keys:
            self._waiters.setdefault(key, set()).add(future)
        future.keys = keys  # type: ignore[attr-defined]
        return future

    def forget_waiter(self, future: asyncio.Future) -> None:
        for key in getattr(future, "keys", ()):
            waiters = self._waiters.get(key)
            if waiters is not None:
                waiters.discard(future)
                if not waiters:
                    del self._waiters[key]

    def _wake(self, key: Key) -> None:
        for future in self._waiters.pop(key, ()):
            if not future.done():
                future.set_result(None)

    # --- administration (DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets) --------------

    async def read_offsets(self, group_id: str, topic_id: uuid.UUID, partitions: list[int]) -> dict:
        """{partition: (start offset, leader epoch, lag, error code)}; -1 for what is not known (no state)."""
        answers = {}
        topic = self._host.topic_by_id(topic_id)
        for partition in partitions:
            key = (group_id, topic_id, partition)
            if topic is None or not self._host.has_partition(topic.name, partition):
                answers[partition] = (-1, -1, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            epoch = self._host.leader_epoch(topic.name, partition)
            share_partition = self._partitions.get(key)
            try:
                state = None if share_partition is not None else await store_for(self._host, key).read(key)
            except ShareStateError as exc:
                answers[partition] = (-1, -1, -1, exc.error_code)
                continue
            if share_partition is None and state is None:
                answers[partition] = (-1, epoch, -1, ErrorCode.NONE)
                continue
            if share_partition is None:
                share_partition = SharePartition(group_id, topic_id, partition, state.start_offset,
                                                 batches=state.batches)
            answers[partition] = (share_partition.start_offset, epoch, self._lag(topic.name, partition,
                                                                                  share_partition),
                                  ErrorCode.NONE)
        return answers

    def _lag(self, topic: str, partition: int, share_partition: SharePartition) -> int:
        partition_log = self._host.get_log(topic, partition)
        if partition_log is None:
            return -1
        done = sum(1 for offset in range(share_partition.start_offset, share_partition.next_offset)
                   if (record := share_partition.record(offset)) is not None
                   and record.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED))
        return max(partition_log.high_watermark - share_partition.start_offset - done, 0)

    async def alter_start_offsets(self, group_id: str, offsets: dict) -> dict:
        """Start each share-partition afresh at the given offset (the group has no members), durably."""
        states = {}
        for (topic_id, partition), offset in offsets.items():
            key = (group_id, topic_id, partition)
            previous = self._partitions.get(key)
            epoch = previous.state_epoch + 1 if previous is not None else 0
            states[key] = PersistedState(offset, epoch, -1, ())
        return await self._replace_states(states)

    async def delete_state(self, group_id: str, keys) -> dict:
        """Forget the share-partitions' state (a tombstone), durably."""
        return await self._replace_states({(group_id, topic_id, partition): None for topic_id, partition in keys})

    async def _replace_states(self, states: dict) -> dict:
        """Drop each share-partition from memory and write its new persisted state (None: a tombstone), one at a
        time; {(topic id, partition): error code}."""
        errors = {}
        for key, state in states.items():
            self._drop(key)
            try:
                await store_for(self._host, key).write(key, state)
            except ShareStateError as exc:
                errors[key[1:]] = exc.error_code
            else:
                errors[key[1:]] = ErrorCode.NONE
        return errors

    # --- life cycle -----------------------------------------------------------------------------------------------

    async def stop(self) -> None:
        """Cancel the timers and wake the waiters; writes in flight finish (bounded by the node's shutdown). The
        node stops its state store afterwards."""
        self._stopped = True
        for handle in list(self._timers.values()):
            handle.cancel()
        self._timers.clear()
        for key in list(self._waiters):
            self._wake(key)
        tasks = list(self._tasks)
        if tasks:
            with contextlib.suppress(Exception):
                await asyncio.wait(tasks, timeout=2.0)


def _read_chunk(partition_log, offset: int, max_bytes: int, bound: int, first: bool, read_committed: bool):
    """(bytes, batch headers, LogBatches) of whole batches from `offset` below `bound`; None when nothing is read.
    Control batches and, for read_committed, aborted transactions' batches are marked for archiving."""
    try:
        result = partition_log.read(offset, max_bytes, min_one_batch=first,
                                    max_offset=bound if bound < partition_log.log_end_offset else None,
                                    aborted=read_committed)
    except OffsetOutOfRangeError:
        return None
    data = b"".join(os.pread(region.file.fileno(), region.length, region.position) for region in result.regions)
    headers = list(iter_batches(data, allow_partial_tail=True))
    if not headers:
        return None
    aborted = _aborted_batches(headers, result.aborted_transactions or [])
    batches = [LogBatch(header.base_offset, header.last_offset, header.is_control or index in aborted)
               for index, (_, header) in enumerate(headers)]
    return data, headers, batches


def _extend(ranges: list[AcquiredRange], more: list[AcquiredRange], batch_size: int) -> None:
    """Append the next chunk's ranges, joining the first to the last one when they continue it."""
    if ranges and more:
        last, following = ranges[-1], more[0]
        if (last.last_offset + 1 == following.first_offset and last.delivery_count == following.delivery_count
                and following.last_offset - last.first_offset < batch_size):
            ranges[-1] = last._replace(last_offset=following.last_offset)
            more = more[1:]
    ranges.extend(more)


def _aborted_batches(headers, aborted_transactions) -> set[int]:
    """Indexes of the batches of aborted transactions among `headers`, their abort markers included (the
    consumer's walk: a transaction's aborted range starts at its first offset and ends at its producer's
    marker)."""
    if not aborted_transactions:
        return set()
    pending = sorted(aborted_transactions, key=lambda txn: txn.first_offset)
    open_producers: set[int] = set()
    found = set()
    next_txn = 0
    for index, (_, header) in enumerate(headers):
        while next_txn < len(pending) and pending[next_txn].first_offset <= header.last_offset:
            open_producers.add(pending[next_txn].producer_id)
            next_txn += 1
        if header.producer_id not in open_producers:
            continue
        if header.is_control:
            found.add(index)  # the abort marker closing it
            open_producers.discard(header.producer_id)
        elif header.is_transactional:
            found.add(index)
    return found


def _batches_holding(data: bytes, headers, ranges: list[AcquiredRange]) -> bytes:
    """The bytes of the batches holding an acquired offset, in log order."""
    kept = []
    index = 0
    for position, header in headers:
        while index < len(ranges) and ranges[index].last_offset < header.base_offset:
            index += 1
        if index == len(ranges):
            break
        if ranges[index].first_offset <= header.last_offset:
            kept.append(data[position:position + header.size])
    return b"".join(kept)

