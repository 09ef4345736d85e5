"""Committed offsets: each group's offsets in memory, kept durable as records of the internal compacted topic
`__consumer_offsets`, laid out as Kafka lays them out (so a data directory keeps its meaning for Kafka's tools).

Records (a key and a value, each opening with an int16 version):
- key version 0 or 1: an offset commit, OffsetCommitKey (group, topic, partition); Kafka writes 1, and so do we.
  key version 2: a classic group's metadata, GroupMetadataKey (group). Key versions 3 to 16 are the records of
  KIP-848 consumer groups and KIP-932 share groups (`group_records.py`): `parse_record` decodes them as
  `TypedRecord`s, their groups write them with `store_records`. Higher ones (streams groups) are skipped.
- OffsetCommitValue is written as version 4 (flexible; the topic id in tagged field 0), as Kafka 4.1 and later
  write it, or as version 1 when the commit carries an expire timestamp (OffsetCommit v2-4 with a retention
  time). GroupMetadataValue is written as version 3, Kafka's choice. Every version from 0 is read; a value version
  newer than ours is read with our newest flexible version, since newer versions only add tagged fields (KIP-915).
- A null value (tombstone) deletes the key: compaction then drops both.

The group maps to partition `abs(java hashCode(group id)) % partitions` (Kafka's `Utils.abs`, which maps
Integer.MIN_VALUE to 0); `partitions` is the topic's actual count when it exists, else `offsets.topic.num.partitions`.
The topic is created compacted, with Kafka's segment size for it and `offsets.topic.replication.factor` replicas
(at most the live nodes): by FindCoordinator in a cluster, on the first write on a single node; when storage cannot
create it (out of file descriptors, disk full) nothing is left of it and the write fails with
COORDINATOR_NOT_AVAILABLE. The partitions this node leads are replayed when it gains them (`ownership.py`,
`loader.py`).

Writes: each operation (one OffsetCommit request, one group store, one deletion) appends one batch, so it is
atomic; only the node leading the group's partition writes (`error_for`: NOT_COORDINATOR elsewhere). It is
acknowledged, and becomes visible to OffsetFetch, only after the batch is durable under the flush policy (with
`flush.messages` or `flush.ms` configured the partition is fsynced first, `make_durable`; with Kafka's defaults the
page cache and recovery are trusted, as in Kafka) and, with several replicas, once the in-sync replicas have it
(acks=-1 up to `offsets.commit.timeout.ms`, `appends.py`; a write they do not confirm answers
COORDINATOR_NOT_AVAILABLE and stays invisible until a later confirmed write of its partition). Operations
become visible in log order even when their fsyncs finish out of order (see `_PendingWrites`).

Transactional commits (TxnOffsetCommit, `commit_transactional`): one batch with the transactional bit, the producer
id and epoch, and base sequence 0, as Kafka's group coordinator writes it. Its offsets stay pending for their
producer (invisible to OffsetFetch; `has_unstable_offset` reports them at once, from the append) until the
transaction coordinator has written the marker to the group's partition and calls `complete_transaction`: a
commit makes each offset visible unless a newer record of the same partition (by log position) is already visible
- Kafka keeps the most recent of a mix of regular and transactional commits - and an abort drops them. A tombstone
(OffsetDelete, DeleteGroups, retention) also removes the pending commits written before it; retention leaves an
offset with a pending commit alone, and a group with an open transaction is not removed.

Retention (`offsets.retention.minutes`, checked every `offsets.retention.check.interval.ms`), as Kafka's
coordinator does it: in an Empty group, offsets expire once the retention has passed since the group became
Empty; in a group without a protocol type (commits from assign() consumers), since each offset's commit; in a
Stable `consumer` group, offsets of topics no member subscribes to, since their commit; in a KIP-848 consumer
group, in any state, offsets of topics no member subscribes to, since their commit (Kafka's ConsumerGroup); a share
group's are left alone; an offset with an expire timestamp (OffsetCommit v2-4) expires at that time; offsets of
subscribed topics never expire. Expired offsets get tombstones. After each pass every group without offsets is
reported to the coordinator (`on_offsets_deleted`), which drops it if it is Empty, as Kafka's cleanup does.

What is read from a group (the coordinator's `Group`, or a consumer or share group): `group_type`, `state`,
`protocol_type` (None for a group that only holds offsets), `current_state_timestamp` (ms, or None),
`is_subscribed(topic)`, `subscribed_topics()` (None when unknown), and for a classic group's metadata record the
generation, protocol, leader and members.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, NamedTuple

from ..config import ConfigError
from ..protocol import DecodeError, decode_message, encode_message
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey, OffsetCommitValue
from ..protocol.records.batch import build_batch
from ..protocol.wire import ZERO_UUID
from ..storage import StorageError
from ..storage.log_config import LONG_MAX
from ..storage.validator import COORDINATOR
from ..topic_names import GROUP_METADATA_TOPIC
from .appends import COORDINATOR_APPEND_ERRORS, check_before_append, coordinator_error, wait_for_replicas
from .group import CONSUMER_PROTOCOL_TYPE, GroupState
from .group import GROUP_TYPE as CLASSIC_GROUP_TYPE
from .group_records import TypedRecord, parse_typed
from .host import CoordinatorHost
from .ownership import PartitionOwnership

if TYPE_CHECKING:
    from ..storage import Log

__all__ = ["COORDINATOR_APPEND_ERRORS", "CommittedOffset", "OffsetStore", "OffsetWriteError", "OffsetsConfig",
           "partition_for_group"]

log = logging.getLogger(__name__)

# Key versions: 0 and 1 both mean an offset commit (Kafka writes 1); 2 a classic group's metadata.
OFFSET_COMMIT_KEY_VERSIONS = (0, 1)
OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
# Value versions written.
OFFSET_COMMIT_VALUE_VERSION = 4
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

NO_OFFSET = -1
TXN_OFFSET_COMMIT_BASE_SEQUENCE = 0  # Kafka's group coordinator writes its transactional batches with it
NO_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

CONSUMER_GROUP_TYPE = "consumer"  # consumer_group.model.GROUP_TYPE (that package imports this module)

_VERSION = struct.Struct(">h")
_INT32_MIN = -(2**31)


# --- configuration ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class OffsetsConfig:
    """The broker settings of the offsets topic and of offset retention, with Kafka's defaults."""

    num_partitions: int = 50                      # offsets.topic.num.partitions
    segment_bytes: int = 104_857_600              # offsets.topic.segment.bytes
    retention_ms: int = 10_080 * 60_000           # offsets.retention.minutes (7 days)
    retention_check_interval_ms: int = 600_000    # offsets.retention.check.interval.ms
    metadata_max_bytes: int = 4096                # offset.metadata.max.bytes

    @classmethod
    def from_properties(cls, get: Callable[[str], object]) -> OffsetsConfig:
        """Read each Kafka name through `get` (BrokerConfig.get); a name it does not know keeps Kafka's default."""
        values = {}
        for field_name, name, unit in _SETTINGS:
            try:
                value = get(name)
            except ConfigError:
                value = None
            if value is not None:
                values[field_name] = int(value) * unit
        config = cls(**values)
        if config.num_partitions < 1:
            raise ConfigError(f"offsets.topic.num.partitions must be at least 1, got {config.num_partitions}")
        return config

    def topic_configs(self) -> dict[str, str]:
        """Topic-level overrides Kafka gives `__consumer_offsets`."""
        return {"cleanup.policy": "compact", "segment.bytes": str(self.segment_bytes),
                "compression.type": "producer"}


_SETTINGS = (("num_partitions", "offsets.topic.num.partitions", 1),
             ("segment_bytes", "offsets.topic.segment.bytes", 1),
             ("retention_ms", "offsets.retention.minutes", 60_000),
             ("retention_check_interval_ms", "offsets.retention.check.interval.ms", 1),
             ("metadata_max_bytes", "offset.metadata.max.bytes", 1))


# --- what is stored -----------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """One partition's committed position. A commit timestamp of -1 is stamped with the broker's clock on commit;
    an expire timestamp of -1 means the broker's retention applies."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""
    commit_timestamp_ms: int = NO_TIMESTAMP
    expire_timestamp_ms: int = NO_TIMESTAMP
    topic_id: uuid.UUID = ZERO_UUID

    @property
    def key(self) -> tuple[str, int]:
        return self.topic, self.partition


class OffsetWriteError(Exception):
    """A write to `__consumer_offsets` failed; `error_code` is what Kafka's coordinator answers for it."""

    def __init__(self, error_code: ErrorCode, message: str = ""):
        super().__init__(message or error_code.name)
        self.error_code = error_code


# --- group to partition -------------------------------------------------------------------------------------------

def java_string_hash(text: str) -> int:
    """Java's String.hashCode: 31-based over UTF-16 code units, as a signed 32-bit int."""
    units = text.encode("utf-16-be")
    value = 0
    for unit in struct.unpack(f">{len(units) // 2}H", units):
        value = (value * 31 + unit) & 0xFFFFFFFF
    return value - 2**32 if value & 0x80000000 else value


def partition_for_group(group_id: str, partitions: int) -> int:
    code = java_string_hash(group_id)
    positive = 0 if code == _INT32_MIN else abs(code)  # Kafka's Utils.abs
    return positive % partitions


# --- record codec -------------------------------------------------------------------------------------------------

def offset_commit_key(group_id: str, topic: str, partition: int) -> bytes:
    body = encode_message(OffsetCommitKey, 0, OffsetCommitKey(group=group_id, topic=topic, partition=partition))
    return _VERSION.pack(OFFSET_COMMIT_KEY_VERSION) + body


def offset_commit_value(committed: CommittedOffset) -> bytes:
    with_expiry = committed.expire_timestamp_ms != NO_TIMESTAMP
    version = OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY if with_expiry else OFFSET_COMMIT_VALUE_VERSION
    value = OffsetCommitValue(offset=committed.offset, leader_epoch=committed.leader_epoch,
                              metadata=committed.metadata, commit_timestamp=committed.commit_timestamp_ms,
                              expire_timestamp=committed.expire_timestamp_ms, topic_id=committed.topic_id)
    return _VERSION.pack(version) + encode_message(OffsetCommitValue, version, value)


def _commit_records(group_id: str, offsets: list[CommittedOffset]) -> list[tuple[bytes, bytes]]:
    return [(offset_commit_key(group_id, c.topic, c.partition), offset_commit_value(c)) for c in offsets]


def group_metadata_key(group_id: str) -> bytes:
    return _VERSION.pack(GROUP_METADATA_KEY_VERSION) + encode_message(GroupMetadataKey, 0,
                                                                      GroupMetadataKey(group=group_id))


def group_metadata_record_value(value: GroupMetadataValue) -> bytes:
    version = GROUP_METADATA_VALUE_VERSION
    return _VERSION.pack(version) + encode_message(GroupMetadataValue, version, value)


class OffsetRecord(NamedTuple):
    """A decoded offset commit record; `committed` is None for a tombstone."""

    group_id: str
    topic: str
    partition: int
    committed: CommittedOffset | None


class GroupRecord(NamedTuple):
    """A decoded group metadata record; `value` is None for a tombstone."""

    group_id: str
    value: GroupMetadataValue | None


def parse_record(key: bytes | None, value: bytes | None) -> OffsetRecord | GroupRecord | TypedRecord | None:
    """Decode one record of `__consumer_offsets`: a consumer or share group record (key version 3 and up) as a
    `TypedRecord`; None for record types this broker does not keep. Raises DecodeError for a malformed record."""
    if key is None or len(key) < _VERSION.size:
        raise DecodeError("a __consumer_offsets record needs a key with a version")
    key_version = _VERSION.unpack_from(key)[0]
    body = memoryview(key)[_VERSION.size:]
    if key_version in OFFSET_COMMIT_KEY_VERSIONS:
        parsed = decode_message(OffsetCommitKey, 0, body)
        committed = None if value is None else _committed_offset(parsed.topic, parsed.partition, value)
        return OffsetRecord(parsed.group, parsed.topic, parsed.partition, committed)
    if key_version == GROUP_METADATA_KEY_VERSION:
        parsed = decode_message(GroupMetadataKey, 0, body)
        return GroupRecord(parsed.group, None if value is None else _decode_value(GroupMetadataValue, value))
    return parse_typed(key_version, body, value)


def _committed_offset(topic: str, partition: int, value: bytes) -> CommittedOffset:
    decoded = _decode_value(OffsetCommitValue, value)
    return CommittedOffset(topic, partition, decoded.offset, decoded.leader_epoch, decoded.metadata,
                           decoded.commit_timestamp, decoded.expire_timestamp, decoded.topic_id)


def _decode_value(cls, value: bytes):
    if len(value) < _VERSION.size:
        raise DecodeError(f"{cls.NAME} value is shorter than its version")
    version = _VERSION.unpack_from(value)[0]
    newest = cls.VALID_VERSIONS[1]
    if version < 0:
        raise DecodeError(f"{cls.NAME} value has negative version {version}")
    return decode_message(cls, min(version, newest), memoryview(value)[_VERSION.size:])


# --- group metadata from a coordinator group ----------------------------------------------------------------------

def group_metadata_value(group) -> GroupMetadataValue:
    """The GroupMetadataValue Kafka writes for a classic group: its generation, protocol, leader and members,
    each member with the subscription of the chosen protocol and its assignment (-1: state time unknown)."""
    protocol = group.protocol_name
    members = []
    for member in group.members.values():
        members.append(GroupMetadataValue.MemberMetadata(
            member_id=member.member_id, group_instance_id=member.group_instance_id, client_id=member.client_id,
            client_host=member.client_host, rebalance_timeout=member.rebalance_timeout_ms,
            session_timeout=member.session_timeout_ms,
            subscription=member.metadata(protocol) if protocol is not None else b"",
            assignment=member.assignment or b""))
    timestamp = group.current_state_timestamp
    return GroupMetadataValue(protocol_type=group.protocol_type or "", generation=group.generation_id,
                              protocol=protocol, leader=group.leader_id,
                              current_state_timestamp=NO_TIMESTAMP if timestamp is None else timestamp,
                              members=members)


# --- the store ----------------------------------------------------------------------------------------------------

class PendingCommit(NamedTuple):
    """A transactional commit awaiting its marker, and the offset of its record in `__consumer_offsets`."""

    committed: CommittedOffset
    position: int


# Open transactions' commits: by (partition of __consumer_offsets, producer id), then group, then topic-partition.
OpenTransactions = dict[tuple[int, int], dict[str, dict[tuple[str, int], PendingCommit]]]


class _Written(NamedTuple):
    log: Log
    base_offset: int
    last_offset: int


class _PendingWrites:
    """Writes of one partition appended but not yet visible, in log order. A write is made visible once it is
    durable; since an fsync covers everything before it, that also settles every earlier write still waiting, so
    memory always follows the order of the log."""

    def __init__(self):
        self._queue: deque[tuple[int, Callable[[], None]]] = deque()

    def add(self, last_offset: int, apply: Callable[[], None]) -> None:
        self._queue.append((last_offset, apply))

    def settle(self, up_to: int) -> None:
        while self._queue and self._queue[0][0] <= up_to:
            _, apply = self._queue.popleft()
            apply()


class OffsetStore:
    """The committed offsets of every group, backed by `__consumer_offsets`. Everything runs on the event loop."""

    def __init__(self, broker: CoordinatorHost, coordinator, config: OffsetsConfig | None = None):
        self._broker = broker
        self._coordinator = coordinator
        self.config = config or OffsetsConfig.from_properties(broker.config.get)
        self.loaded = False  # the first load (every partition this node led then) is done
        self.ownership = PartitionOwnership(broker, GROUP_METADATA_TOPIC, load=self._load_partition,
                                            unload=self._unload_partition)
        self._loading: asyncio.Task | None = None
        self._offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        self._positions: dict[str, dict[tuple[str, int], int]] = {}  # record offset of each visible offset
        self._transactions: OpenTransactions = {}
        self._open_by_group: dict[str, set[tuple[int, int]]] = {}  # keys of _transactions holding the group
        self._pending: dict[int, _PendingWrites] = {}  # by partition of __consumer_offsets
        self._in_flight: dict[str, Counter] = {}  # keys of commits appended but not visible yet, per group
        self._expiry_task: asyncio.Task | None = None

    # --- life cycle -----------------------------------------------------------------------------------------------

    async def load(self) -> None:
        """Replay the partitions of `__consumer_offsets` this node leads (if the topic exists), hand each group's
        metadata to the coordinator, then accept requests and start the retention timer. Calling it again waits
        for the first load. Partitions gained later are loaded on their own (`ownership`)."""
        if self._loading is None:
            self._loading = asyncio.ensure_future(self._load())
        await asyncio.shield(self._loading)

    async def _load(self) -> None:
        self.ownership.refresh()
        await self.ownership.wait_loaded()
        self.loaded = True
        interval = self.config.retention_check_interval_ms
        if 0 < interval < LONG_MAX:
            self._expiry_task = asyncio.create_task(self._expire_periodically(interval / 1000),
                                                    name="compatbroker offsets retention")

    async def stop(self) -> None:
        """Stop the retention timer and the loads (the broker closes the storage itself)."""
        for task in (self._expiry_task, self._loading):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._expiry_task = None
        await self.ownership.stop()

    # --- which groups this node coordinates -----------------------------------------------------------------------

    def is_loading(self) -> bool:
        """Whether a partition this node leads is still being replayed."""
        return bool(self.ownership.loading)

    def error_for(self, group_id: str) -> ErrorCode:
        """NONE when this node coordinates the group, COORDINATOR_LOAD_IN_PROGRESS while its partition loads,
        NOT_COORDINATOR when another node leads that partition."""
        if not self.loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return self.ownership.error_for(self.partition_for(group_id))

    async def _load_partition(self, partition: int) -> None:
        """Replay one partition this node now leads (in an executor) and take what it holds."""
        from .loader import Replayed, replay_partition  # here: the loader imports this module

        partition_log = self._broker.get_log(GROUP_METADATA_TOPIC, partition)
        replayed = Replayed()
        await asyncio.get_running_loop().run_in_executor(None, replay_partition, partition_log,
                                                         partition_log.log_end_offset, replayed)
        for group_id, offsets in replayed.offsets.items():
            if offsets:
                self._offsets[group_id] = offsets
                self._positions[group_id] = replayed.positions[group_id]
        for transaction, by_group in replayed.transactions.items():
            for group_id, pending in by_group.items():
                if pending:
                    self._add_pending(transaction, group_id, pending)
        for group_id, value in replayed.groups.items():
            self._coordinator.load_group_metadata(group_id, value)
        typed_groups = self._hand_over_typed(replayed.typed.values())
        log.info("replayed %d record(s) of %s-%d: %d group(s) with committed offsets, %d group metadata record(s), "
                 "%d consumer/share group(s), %d open transaction(s)", replayed.records, GROUP_METADATA_TOPIC,
                 partition, sum(1 for offsets in replayed.offsets.values() if offsets), len(replayed.groups),
                 len(typed_groups), len(replayed.transactions))

    def _hand_over_typed(self, records: Iterable[TypedRecord]) -> list[str]:
        """Give the coordinator the consumer and share group records, in log order, then the ids of their groups
        (so that it starts their timers); returns those ids. A record its group cannot take is skipped with an
        error in the log, as a record that does not decode is, rather than a partition that cannot load."""
        group_ids: dict[str, None] = {}
        for record in records:
            group_ids[record.group_id] = None
            try:
                self._coordinator.replay_typed(record)
            except Exception:  # noqa: BLE001 - one bad record must not keep the partition's other groups away
                log.exception("group %s: skipping a record of type %d that cannot be replayed", record.group_id,
                              record.record_type)
        if group_ids:
            self._coordinator.on_groups_loaded(list(group_ids))
        return list(group_ids)

    def _unload_partition(self, partition: int) -> None:
        """Forget the groups of a partition this node no longer leads: their offsets, open transactions, writes
        not yet visible (the new leader replays them from its replica) and the groups themselves."""
        doomed = {group_id for group_id in (set(self._offsets) | set(self._open_by_group) | set(self._in_flight))
                  if self.partition_for(group_id) == partition}
        for transaction in [key for key in self._transactions if key[0] == partition]:
            for group_id in self._transactions.pop(transaction):
                self._open_by_group.get(group_id, set()).discard(transaction)
        for group_id in doomed:
            for by_group in (self._offsets, self._positions, self._open_by_group, self._in_flight):
                by_group.pop(group_id, None)
        self._pending.pop(partition, None)
        self._coordinator.unload_groups(partition)

    # --- reads ----------------------------------------------------------------------------------------------------

    @property
    def topic_partitions(self) -> int:
        """Partitions of `__consumer_offsets`: the existing topic's, or the configured count before it exists."""
        info = self._broker.topic(GROUP_METADATA_TOPIC)
        return info.partitions if info is not None else self.config.num_partitions

    def partition_for(self, group_id: str) -> int:
        return partition_for_group(group_id, self.topic_partitions)

    def fetch(self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None
              ) -> dict[tuple[str, int], CommittedOffset]:
        """The visible committed offsets of `partitions` (all of the group's when None); absent ones are left out."""
        offsets = self._offsets.get(group_id, {})
        if partitions is None:
            return dict(offsets)
        return {key: offsets[key] for key in partitions if key in offsets}

    def has_unstable_offset(self, group_id: str, topic: str, partition: int) -> bool:
        """Whether a transactional commit of this partition awaits its transaction's end, from its append on
        (OffsetFetch require_stable answers UNSTABLE_OFFSET_COMMIT for it)."""
        key = (topic, partition)
        return any(key in self._transactions[transaction][group_id]
                   for transaction in self._open_by_group.get(group_id, ()))

    def groups_with_offsets(self) -> set[str]:
        """Groups with a visible offset or an open transaction's commit (Kafka materialises a simple group for
        both, and removes neither while a transaction is open)."""
        return set(self._offsets) | set(self._open_by_group)

    # --- writes ---------------------------------------------------------------------------------------------------

    async def commit(self, group_id: str, offsets: list[CommittedOffset]) -> None:
        """Append the commits as one batch, wait until it is durable, then make them visible. Commits without a
        commit timestamp get the broker's clock. Raises OffsetWriteError when nothing can be stored."""
        if not offsets:
            return
        now_ms = self._broker.now_ms()
        stamped = [c if c.commit_timestamp_ms != NO_TIMESTAMP else replace(c, commit_timestamp_ms=now_ms)
                   for c in offsets]
        written = self._append(group_id, _commit_records(group_id, stamped), now_ms)
        in_flight = self._in_flight.setdefault(group_id, Counter())
        in_flight.update(c.key for c in stamped)

        def apply() -> None:
            for position, committed in enumerate(stamped, written.base_offset):
                self._materialize(group_id, committed, position)
            in_flight.subtract(c.key for c in stamped)
            self._forget_if_empty(group_id)

        await self._visible_when_durable(written, apply)

    async def commit_transactional(self, group_id: str, producer_id: int, producer_epoch: int,
                                   offsets: list[CommittedOffset]) -> None:
        """Append the commits as one transactional batch of the producer; they are pending (see the module
        docstring) from the append on, and this returns once the batch is durable. Raises OffsetWriteError when
        nothing can be stored."""
        if not offsets:
            return
        now_ms = self._broker.now_ms()
        stamped = [c if c.commit_timestamp_ms != NO_TIMESTAMP else replace(c, commit_timestamp_ms=now_ms)
                   for c in offsets]
        written = self._append(group_id, _commit_records(group_id, stamped), now_ms,
                               producer=(producer_id, producer_epoch))
        # Pending at once, not when durable: the marker may complete the transaction before our fsync settles.
        self._add_pending((written.log.partition, producer_id), group_id, {
            c.key: PendingCommit(c, position) for position, c in enumerate(stamped, written.base_offset)})
        await self._visible_when_durable(written, lambda: None)

    async def complete_transaction(self, producer_id: int, partition: int, commit: bool) -> None:
        """The producer's marker is in `__consumer_offsets` partition `partition` (and durable): make its pending
        commits there visible (commit) or drop them (abort). A marker without pending commits changes nothing."""
        loading = self.ownership.loading.get(partition)
        if loading is not None:
            # The replay stops at the end the log had when it began, so it may leave this marker's commits open:
            # complete them once it is done (a failed load has logged its error; then there is nothing here).
            await asyncio.wait([loading])
        by_group = self._transactions.pop((partition, producer_id), {})
        for group_id, pending in by_group.items():
            open_here = self._open_by_group.get(group_id, set())
            open_here.discard((partition, producer_id))
            if commit:
                for item in pending.values():
                    self._materialize(group_id, item.committed, item.position)
            self._forget_if_empty(group_id)
        if by_group:
            log.info("%s transactional offset commit(s) of producer %d in group(s) %s",
                     "committed" if commit else "aborted", producer_id, ", ".join(sorted(by_group)))

    def _materialize(self, group_id: str, committed: CommittedOffset, position: int) -> None:
        """Make `committed` (its record at `position`) visible unless a newer record's offset already is."""
        positions = self._positions.setdefault(group_id, {})
        if position > positions.get(committed.key, -1):
            self._offsets.setdefault(group_id, {})[committed.key] = committed
            positions[committed.key] = position

    def _add_pending(self, transaction: tuple[int, int], group_id: str,
                     pending: dict[tuple[str, int], PendingCommit]) -> None:
        self._transactions.setdefault(transaction, {}).setdefault(group_id, {}).update(pending)
        self._open_by_group.setdefault(group_id, set()).add(transaction)

    async def store_group(self, group) -> None:
        """Write the group's metadata record (after a rebalance completes, a member leaves, ...), durably."""
        records = [(group_metadata_key(group.group_id), group_metadata_record_value(group_metadata_value(group)))]
        await self._visible_when_durable(self._append(group.group_id, records, self._broker.now_ms()),
                                         lambda: None)

    async def store_records(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> None:
        """Write a consumer or share group's records (`group_records.typed_record`, tombstones included) as one
        batch on the group's partition and return once it is durable (and replicated), like `commit`; the caller
        applies what they say to memory only then. Raises OffsetWriteError when nothing can be stored."""
        if not records:
            return
        written = self._append(group_id, records, self._broker.now_ms())
        await self._visible_when_durable(written, lambda: None)

    async def delete_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]]) -> None:
        """Tombstones for those of `partitions` that have an offset: committed, still on its way to visibility,
        or in an open transaction."""
        present = self._known_keys(group_id)
        await self._delete(group_id, [key for key in dict.fromkeys(partitions) if key in present], with_group=False)

    async def delete_group(self, group_id: str, group_records: list[tuple[bytes, None]] | None = None) -> None:
        """Tombstones for every offset of the group and for its metadata (DeleteGroups, or an emptied group), in
        one batch: the classic GroupMetadata tombstone, or `group_records` when given (a consumer or share group's
        tombstones, `tombstones(group_id)` of its manager)."""
        await self._delete(group_id, sorted(self._known_keys(group_id)), with_group=True, group_records=group_records)

    def _known_keys(self, group_id: str) -> set[tuple[str, int]]:
        in_flight = {key for key, count in self._in_flight.get(group_id, {}).items() if count > 0}
        pending = {key for transaction in self._open_by_group.get(group_id, ())
                   for key in self._transactions[transaction][group_id]}
        return set(self._offsets.get(group_id, ())) | in_flight | pending

    async def _delete(self, group_id: str, doomed: list[tuple[str, int]], *, with_group: bool,
                      group_records: list[tuple[bytes, None]] | None = None) -> None:
        records = [(offset_commit_key(group_id, topic, partition), None) for topic, partition in doomed]
        if group_records is not None:
            records.extend(group_records)
        elif with_group:
            records.append((group_metadata_key(group_id), None))
        if not records:
            return
        written = self._append(group_id, records, self._broker.now_ms())

        def apply() -> None:
            for position, key in enumerate(doomed, written.base_offset):
                self._remove_before(group_id, key, position)
            self._forget_if_empty(group_id)

        await self._visible_when_durable(written, apply)

    def _remove_before(self, group_id: str, key: tuple[str, int], tombstone: int) -> None:
        """A tombstone at offset `tombstone` removes the visible offset and the pending commits written before it
        (Kafka's replay of a tombstone; later records are not its to remove)."""
        positions = self._positions.get(group_id, {})
        if positions.get(key, -1) < tombstone:
            self._offsets.get(group_id, {}).pop(key, None)
            positions.pop(key, None)
        for transaction in self._open_by_group.get(group_id, ()):
            pending = self._transactions[transaction][group_id]
            if key in pending and pending[key].position < tombstone:
                del pending[key]

    def _forget_if_empty(self, group_id: str) -> None:
        for transaction in list(self._open_by_group.get(group_id, ())):
            if not self._transactions[transaction][group_id]:
                self._drop_pending(transaction, group_id)
        for by_group in (self._offsets, self._positions, self._open_by_group):
            if not by_group.get(group_id):
                by_group.pop(group_id, None)
        in_flight = self._in_flight.get(group_id)
        if in_flight is not None and not +in_flight:
            del self._in_flight[group_id]

    def _drop_pending(self, transaction: tuple[int, int], group_id: str) -> None:
        by_group = self._transactions[transaction]
        del by_group[group_id]
        if not by_group:
            del self._transactions[transaction]
        self._open_by_group[group_id].discard(transaction)

    def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]], now_ms: int, *,
                producer: tuple[int, int] | None = None) -> _Written:
        """Append one batch to the group's partition, a transactional one of `producer` (id, epoch) when given
        (nothing is written when this raises OffsetWriteError)."""
        error = self.error_for(group_id)
        if error is not ErrorCode.NONE:
            raise OffsetWriteError(error)
        partition_log = self._partition_log(group_id)
        error = check_before_append(self._broker, GROUP_METADATA_TOPIC, partition_log.partition, partition_log)
        if error is not ErrorCode.NONE:
            raise OffsetWriteError(coordinator_error(error))
        entries = [(key, value, (), now_ms) for key, value in records]
        if producer is None:
            batch = build_batch(entries)
        else:  # Kafka's coordinator writes base sequence 0 (it checks no sequence of its own batches)
            batch = build_batch(entries, producer_id=producer[0], producer_epoch=producer[1],
                                base_sequence=TXN_OFFSET_COMMIT_BASE_SEQUENCE, is_transactional=True)
        try:
            result = partition_log.append(batch, now_ms=now_ms, origin=COORDINATOR,
                                          leader_epoch=self._broker.leader_epoch(GROUP_METADATA_TOPIC,
                                                                                 partition_log.partition))
        except StorageError as exc:
            raise OffsetWriteError(coordinator_error(ErrorCode(exc.error_code)), str(exc)) from exc
        except OSError as exc:
            log.warning("append to %s-%d failed: %s", GROUP_METADATA_TOPIC, partition_log.partition, exc)
            raise OffsetWriteError(ErrorCode.NOT_COORDINATOR, str(exc)) from exc
        self._broker.notify_appended(GROUP_METADATA_TOPIC, partition_log.partition)
        return _Written(partition_log, result.base_offset, result.last_offset)

    async def _visible_when_durable(self, written: _Written, apply: Callable[[], None]) -> None:
        """Queue `apply` behind the partition's earlier writes; run it (and them) once the write is durable."""
        pending = self._pending.setdefault(written.log.partition, _PendingWrites())
        pending.add(written.last_offset, apply)
        # Shielded: a cancelled request (its client went away) still makes its write visible once durable.
        await asyncio.shield(self._settle_when_durable(written.log, pending, written.last_offset))

    async def _settle_when_durable(self, partition_log: Log, pending: _PendingWrites, last_offset: int) -> None:
        if partition_log.config.has_flush_policy and partition_log.recovery_point <= last_offset:
            try:
                await self._broker.make_durable([partition_log])
            except OSError as exc:
                # Left pending: a later durable write of this partition makes it visible.
                log.error("fsync of %s-%d failed: %s", GROUP_METADATA_TOPIC, partition_log.partition, exc)
                raise OffsetWriteError(ErrorCode.NOT_COORDINATOR, str(exc)) from exc
        # acks=-1 (Kafka 4 has no offsets.commit.required.acks any more). Left pending when the replicas do not
        # confirm it: the record is in the log, and a later write they confirm makes it visible (or the next leader
        # replays it).
        error = await wait_for_replicas(self._broker, GROUP_METADATA_TOPIC, partition_log.partition,
                                        last_offset + 1, self._broker.config.offsets_commit_timeout_ms)
        if error is not ErrorCode.NONE:
            raise OffsetWriteError(coordinator_error(error))
        if self._pending.get(partition_log.partition) is pending:  # else the partition was unloaded meanwhile
            pending.settle(last_offset)

    def _partition_log(self, group_id: str) -> Log:
        """The log of the group's partition, creating `__consumer_offsets` on the first write."""
        if self._broker.topic(GROUP_METADATA_TOPIC) is None:
            try:
                self.create_topic()
            except (OSError, StorageError) as exc:  # e.g. out of file descriptors: nothing was created
                log.warning("could not create %s: %s", GROUP_METADATA_TOPIC, exc)
                raise OffsetWriteError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc)) from exc
        partition = self.partition_for(group_id)
        partition_log = self._broker.get_log(GROUP_METADATA_TOPIC, partition)
        if partition_log is None:
            raise OffsetWriteError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        error = self.ownership.error_for(partition)
        if error is not ErrorCode.NONE:  # the new topic's leaders were placed elsewhere
            raise OffsetWriteError(error)
        return partition_log

    def create_topic(self) -> None:
        """Create `__consumer_offsets` (if it does not exist) with `offsets.topic.replication.factor` replicas, or
        as many as there are live nodes, and take the partitions this node leads (new, so empty: nothing to load).
        Raises what the node's create_topic raises."""
        replication_factor = min(self._broker.config.offsets_topic_replication_factor,
                                 max(len(self._broker.alive_node_ids()), 1))
        self._broker.create_topic(GROUP_METADATA_TOPIC, self.config.num_partitions,
                                  configs=self.config.topic_configs(), replication_factor=replication_factor)
        self.ownership.refresh()

    # --- retention ------------------------------------------------------------------------------------------------

    async def _expire_periodically(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.expire_offsets()
            except Exception:  # a failed pass is retried at the next interval
                log.exception("offset retention pass failed")

    async def expire_offsets(self) -> int:
        """One retention pass; returns how many offsets expired. A group left without offsets (now, or earlier by
        OffsetDelete) is reported to the coordinator, which drops it if it is Empty, as Kafka's cleanup does."""
        now_ms = self._broker.now_ms()
        expired = 0
        for group_id in list(self._offsets):
            if group_id not in self._offsets:  # emptied (OffsetDelete, DeleteGroups) while this pass waited
                continue
            doomed = self._expired(group_id, now_ms)
            if not doomed:
                continue
            try:
                await self._delete(group_id, doomed, with_group=False)
            except OffsetWriteError as exc:
                log.warning("could not expire offsets of group %s: %s", group_id, exc)
                continue
            expired += len(doomed)
            log.info("expired %d committed offset(s) of group %s", len(doomed), group_id)
        self._report_groups_without_offsets()
        return expired

    def _report_groups_without_offsets(self) -> None:
        keep = self.groups_with_offsets()  # including groups with an open transaction, as Kafka keeps them
        for group in self._coordinator.all_groups():
            if group.group_id not in keep:
                self._coordinator.on_offsets_deleted(group.group_id)

    def _expired(self, group_id: str, now_ms: int) -> list[tuple[str, int]]:
        group = self._coordinator.group(group_id)
        base_of = _expiry_base(group)
        if base_of is None:
            return []
        doomed = []
        for key, committed in self._offsets[group_id].items():
            if group is not None and group.is_subscribed(key[0]):
                continue
            if self.has_unstable_offset(group_id, *key):  # Kafka waits for the transaction to end
                continue
            if committed.expire_timestamp_ms != NO_TIMESTAMP:
                if now_ms >= committed.expire_timestamp_ms:
                    doomed.append(key)
            elif now_ms - base_of(committed) >= self.config.retention_ms:
                doomed.append(key)
        return doomed


def _expiry_base(group) -> Callable[[CommittedOffset], int] | None:
    """From when an offset's retention runs in this group, or None when its offsets do not expire now (Kafka's
    offset expiration condition of each group type)."""
    group_type = getattr(group, "group_type", CLASSIC_GROUP_TYPE)
    if group_type == CONSUMER_GROUP_TYPE:  # in any state, from each commit (topics a member subscribes to stay)
        return lambda committed: committed.commit_timestamp_ms
    if group_type != CLASSIC_GROUP_TYPE:  # a share group keeps no offsets here (Kafka has no condition for it)
        return None
    if group is None or not group.protocol_type:  # a group that only holds offsets: from each commit
        return lambda committed: committed.commit_timestamp_ms
    if group.state == GroupState.EMPTY:
        since = group.current_state_timestamp
        if since is not None and since >= 0:
            return lambda committed: since
        return lambda committed: committed.commit_timestamp_ms
    if (group.state == GroupState.STABLE and group.protocol_type == CONSUMER_PROTOCOL_TYPE
            and group.subscribed_topics() is not None):
        return lambda committed: committed.commit_timestamp_ms
    return None
