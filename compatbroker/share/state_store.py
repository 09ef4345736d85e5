"""Share-partition state kept durable in `__share_group_state`, laid out as Kafka's share coordinator lays it out.

Records (key and value each open with an int16): the key's is the record type, 0 for ShareSnapshotKey and 1 for
ShareUpdateKey (group id, topic id, partition); the value's is its version, 0 (ShareSnapshotValue: state epoch,
leader epoch, start offset, create and write timestamps, and the state batches; ShareUpdateValue: the batches that
changed, start offset -1 when unchanged). We write a snapshot of the whole share-partition on each change (Kafka
writes updates and a snapshot every `share.coordinator.snapshot.update.records.per.snapshot`), and read both: an
update is laid over the last snapshot. A null value (written under the snapshot key) deletes the state.

A share-partition's state lives in partition `abs(java hashCode("groupId:topicId:partition")) % partitions` of
the topic (Kafka's SharePartitionKey.asCoordinatorKey, the topic id in Kafka's base64 text). The node leading that
partition keeps its states in memory (`ownership.py`: replayed from its replica when it gains the partition,
dropped when it loses it); others answer NOT_COORDINATOR. Writes go to that node's store in this process
(`store_for`).

The topic is made on first use as Kafka's ShareCoordinatorService configures it: `cleanup.policy=delete` with
`retention.ms=-1` (KIP-932; not compacted), `compression.type=producer`, `segment.bytes` from
`share.coordinator.state.topic.segment.bytes`, `share.coordinator.state.topic.num.partitions` partitions,
`share.coordinator.state.topic.replication.factor` replicas (at most the live nodes) and `min.insync.replicas`
from `share.coordinator.state.topic.min.isr` (at most the replication factor, so that a single node can write).
Since nothing compacts it, the log start offset is moved past records every key has superseded (Kafka's
ShareCoordinatorOffsetsManager prunes the same way), at most once per `PRUNE_EVERY_RECORDS` appended records.

A write is answered once durable: fsync under the flush policy, and acks=-1 with several replicas
(`coordinator/appends.py`, up to `offsets.commit.timeout.ms`, whose 5 s default Kafka's
`share.coordinator.write.timeout.ms` shares). Errors map to Kafka's coordinator answers (COORDINATOR_NOT_AVAILABLE,
NOT_COORDINATOR).
"""
from __future__ import annotations

import asyncio
import logging
import struct
import uuid
from collections.abc import Iterable
from typing import NamedTuple

from ..coordinator.appends import check_before_append, coordinator_error, wait_for_replicas
from ..coordinator.offsets import java_string_hash
from ..coordinator.ownership import PartitionOwnership
from ..coordinator.replay import MAX_RECORDS_BYTES, record_bytes, replay_batches
from ..coordinator.group_config import settings_of
from ..protocol import DecodeError, decode_message, encode_message
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import ShareSnapshotKey, ShareSnapshotValue, ShareUpdateKey, ShareUpdateValue
from ..protocol.records.batch import build_batch, iter_records
from ..storage import StorageError
from ..storage.checkpoints import uuid_to_string
from ..storage.validator import COORDINATOR
from ..topic_names import SHARE_GROUP_STATE_TOPIC
from .partition import StateBatch

log = logging.getLogger(__name__)

SNAPSHOT_RECORD_TYPE = 0
UPDATE_RECORD_TYPE = 1
VALUE_VERSION = 0
LOAD_BUFFER_BYTES = 5_242_880
PRUNE_EVERY_RECORDS = 1000
NO_TIMESTAMP = -1
_INT16 = struct.Struct(">h")
_INT32_MIN = -(2**31)
_COMPLETE_STATES = (2, 4)  # ACKNOWLEDGED, ARCHIVED

StateKey = tuple  # (group id, topic id, partition)


class PersistedState(NamedTuple):
    start_offset: int
    state_epoch: int
    leader_epoch: int
    batches: tuple[StateBatch, ...]
    create_timestamp_ms: int = NO_TIMESTAMP


class ShareStateError(Exception):
    """The state could not be read or written; `error_code` is Kafka's answer for it."""

    def __init__(self, error_code: ErrorCode, message: str = ""):
        super().__init__(message or error_code.name)
        self.error_code = error_code


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    return f"{group_id}:{uuid_to_string(topic_id)}:{partition}"


def partition_for(group_id: str, topic_id: uuid.UUID, partition: int, partitions: int) -> int:
    code = java_string_hash(coordinator_key(group_id, topic_id, partition))
    return (0 if code == _INT32_MIN else abs(code)) % partitions


# --- records ------------------------------------------------------------------------------------------------------

def snapshot_record(key: StateKey, state: PersistedState | None, now_ms: int) -> tuple[bytes, bytes | None]:
    group_id, topic_id, partition = key
    encoded_key = _INT16.pack(SNAPSHOT_RECORD_TYPE) + encode_message(
        ShareSnapshotKey, 0, ShareSnapshotKey(group_id=group_id, topic_id=topic_id, partition=partition))
    if state is None:
        return encoded_key, None
    value = ShareSnapshotValue(
        snapshot_epoch=0, state_epoch=state.state_epoch, leader_epoch=state.leader_epoch,
        start_offset=state.start_offset, create_timestamp=state.create_timestamp_ms, write_timestamp=now_ms,
        delivery_complete_count=sum(b.last_offset - b.first_offset + 1 for b in state.batches
                                    if b.delivery_state in _COMPLETE_STATES),
        state_batches=[ShareSnapshotValue.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                                     delivery_state=b.delivery_state,
                                                     delivery_count=b.delivery_count) for b in state.batches])
    return encoded_key, _INT16.pack(VALUE_VERSION) + encode_message(ShareSnapshotValue, VALUE_VERSION, value)


def apply_record(states: dict, key_bytes: bytes | None, value_bytes: bytes | None) -> StateKey | None:
    """Replay one record into `states` (key -> PersistedState); returns its key (None for a record type this
    store does not know). Raises DecodeError for a malformed record."""
    if key_bytes is None or len(key_bytes) < _INT16.size:
        raise DecodeError("a __share_group_state record needs a key with a record type")
    record_type = _INT16.unpack_from(key_bytes)[0]
    key_cls = {SNAPSHOT_RECORD_TYPE: ShareSnapshotKey, UPDATE_RECORD_TYPE: ShareUpdateKey}.get(record_type)
    if key_cls is None:
        return None
    decoded = decode_message(key_cls, 0, memoryview(key_bytes)[_INT16.size:])
    key = (decoded.group_id, decoded.topic_id, decoded.partition)
    if value_bytes is None:
        states.pop(key, None)
    elif record_type == SNAPSHOT_RECORD_TYPE:
        value = _decode_value(ShareSnapshotValue, value_bytes)
        states[key] = PersistedState(value.start_offset, value.state_epoch, value.leader_epoch,
                                     tuple(_batches(value.state_batches)), value.create_timestamp)
    else:
        previous = states.get(key)
        if previous is not None:  # an update without a snapshot before it has nothing to apply to
            states[key] = _merge(previous, _decode_value(ShareUpdateValue, value_bytes))
    return key


def _decode_value(cls, value_bytes: bytes):
    if len(value_bytes) < _INT16.size or _INT16.unpack_from(value_bytes)[0] < 0:
        raise DecodeError(f"{cls.NAME} value without a valid version")
    return decode_message(cls, VALUE_VERSION, memoryview(value_bytes)[_INT16.size:])


def _batches(state_batches) -> Iterable[StateBatch]:
    return (StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in state_batches)


def _merge(previous: PersistedState, update) -> PersistedState:
    """An update's batches replace what they cover of the snapshot's; its start offset (unless -1) replaces the
    snapshot's, dropping what lies below it."""
    start = previous.start_offset if update.start_offset < 0 else update.start_offset
    covered = [(b.first_offset, b.last_offset) for b in update.state_batches]
    kept = [b for b in previous.batches
            if not any(first <= b.last_offset and b.first_offset <= last for first, last in covered)]
    merged = sorted([*kept, *_batches(update.state_batches)], key=lambda b: b.first_offset)
    merged = [b for b in merged if b.last_offset >= start]
    return previous._replace(start_offset=start, leader_epoch=update.leader_epoch, batches=tuple(merged))


# --- the store ----------------------------------------------------------------------------------------------------

class ShareStateStore:
    """The share-partition states of the partitions of `__share_group_state` this node leads."""

    def __init__(self, host):
        self._host = host
        self.settings = settings_of(host)[1]
        self.ownership = PartitionOwnership(host, SHARE_GROUP_STATE_TOPIC, load=self._load_partition,
                                            unload=self._unload_partition)
        self._states: dict[StateKey, PersistedState] = {}
        self._latest: dict[int, dict[StateKey, int]] = {}  # per partition: offset of each key's last snapshot
        self._since_prune: dict[int, int] = {}

    # --- placement ------------------------------------------------------------------------------------------------

    @property
    def topic_partitions(self) -> int:
        info = self._host.topic(SHARE_GROUP_STATE_TOPIC)
        return info.partitions if info is not None else self.settings.state_topic_partitions

    def partition_of(self, key: StateKey) -> int:
        return partition_for(*key, self.topic_partitions)

    async def _ready(self, partition: int) -> None:
        """Raise ShareStateError unless this node coordinates `partition` (waiting while it loads)."""
        self.ownership.refresh()  # follow leadership moves of the topic's partitions (gained: replayed)
        loading = self.ownership.loading.get(partition)
        if loading is not None:
            await asyncio.wait([loading])
        error = self.ownership.error_for(partition)
        if error is not ErrorCode.NONE:
            raise ShareStateError(error)

    # --- reads and writes -----------------------------------------------------------------------------------------

    async def read(self, key: StateKey) -> PersistedState | None:
        await self._ready(self.partition_of(key))
        return self._states.get(key)

    async def write(self, key: StateKey, state: PersistedState | None) -> None:
        """Store the share-partition's whole state (None: delete it), durably. Raises ShareStateError."""
        partition_log = self._partition_log(key)
        await self._ready(partition_log.partition)
        now_ms = self._host.now_ms()
        record = snapshot_record(key, state, now_ms)
        written = self._append(partition_log, [record], now_ms)
        if state is None:
            self._states.pop(key, None)
            self._latest.get(partition_log.partition, {}).pop(key, None)
        else:
            self._states[key] = state
            self._latest.setdefault(partition_log.partition, {})[key] = written
        await self._durable(partition_log, written)
        self._maybe_prune(partition_log)

    def _append(self, partition_log, records: list[tuple[bytes, bytes | None]], now_ms: int) -> int:
        topic, partition = SHARE_GROUP_STATE_TOPIC, partition_log.partition
        error = check_before_append(self._host, topic, partition, partition_log)
        if error is not ErrorCode.NONE:
            raise ShareStateError(coordinator_error(error))
        batch = build_batch([(key, value, (), now_ms) for key, value in records])
        try:
            result = partition_log.append(batch, now_ms=now_ms, origin=COORDINATOR,
                                          leader_epoch=self._host.leader_epoch(topic, partition))
        except StorageError as exc:
            raise ShareStateError(coordinator_error(ErrorCode(exc.error_code)), str(exc)) from exc
        except OSError as exc:
            log.warning("append to %s-%d failed: %s", topic, partition, exc)
            raise ShareStateError(ErrorCode.NOT_COORDINATOR, str(exc)) from exc
        self._host.notify_appended(topic, partition)
        return result.last_offset

    async def _durable(self, partition_log, last_offset: int) -> None:
        if partition_log.config.has_flush_policy and partition_log.recovery_point <= last_offset:
            try:
                await self._host.make_durable([partition_log])
            except OSError as exc:
                raise ShareStateError(ErrorCode.NOT_COORDINATOR, str(exc)) from exc
        error = await wait_for_replicas(self._host, SHARE_GROUP_STATE_TOPIC, partition_log.partition,
                                        last_offset + 1, self._host.config.offsets_commit_timeout_ms)
        if error is not ErrorCode.NONE:
            raise ShareStateError(coordinator_error(error))

    def _partition_log(self, key: StateKey):
        """The log of the key's partition, creating the topic on the first write."""
        self.ensure_topic()
        partition_log = self._host.get_log(SHARE_GROUP_STATE_TOPIC, self.partition_of(key))
        if partition_log is None:
            raise ShareStateError(ErrorCode.NOT_COORDINATOR)
        return partition_log

    def ensure_topic(self) -> None:
        """Create the topic unless it exists; ShareStateError(COORDINATOR_NOT_AVAILABLE) when that fails."""
        if self._host.topic(SHARE_GROUP_STATE_TOPIC) is not None:
            return
        try:
            self.create_topic()
        except Exception as exc:  # noqa: BLE001 - storage (no disk, no descriptors) or the controller refused
            log.warning("could not create %s: %s", SHARE_GROUP_STATE_TOPIC, exc)
            raise ShareStateError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc)) from exc

    def create_topic(self) -> None:
        settings = self.settings
        replication_factor = min(settings.state_topic_replication_factor,
                                 max(len(self._host.alive_node_ids()), 1))
        configs = {"cleanup.policy": "delete", "retention.ms": "-1", "compression.type": "producer",
                   "segment.bytes": str(settings.state_topic_segment_bytes),
                   "min.insync.replicas": str(min(settings.state_topic_min_isr, replication_factor))}
        self._host.create_topic(SHARE_GROUP_STATE_TOPIC, settings.state_topic_partitions, configs=configs,
                                replication_factor=replication_factor)
        self.ownership.refresh()

    # --- pruning --------------------------------------------------------------------------------------------------

    def _maybe_prune(self, partition_log) -> None:
        partition = partition_log.partition
        self._since_prune[partition] = self._since_prune.get(partition, 0) + 1
        if self._since_prune[partition] < PRUNE_EVERY_RECORDS:
            return
        self._since_prune[partition] = 0
        latest = self._latest.get(partition, {})
        safe = min(latest.values(), default=partition_log.high_watermark)
        safe = min(safe, partition_log.high_watermark)
        if safe <= partition_log.log_start_offset:
            return
        try:
            self._host.logs.delete_records(SHARE_GROUP_STATE_TOPIC, partition, safe, now_ms=self._host.now_ms())
        except (OSError, StorageError) as exc:  # pruning is an optimisation: the next pass retries
            log.warning("could not prune %s-%d below %d: %s", SHARE_GROUP_STATE_TOPIC, partition, safe, exc)
            return
        if self._host.cluster.multi_node:
            self._host.cluster.replication.on_leader_append(SHARE_GROUP_STATE_TOPIC, partition)

    # --- loading --------------------------------------------------------------------------------------------------

    async def _load_partition(self, partition: int) -> None:
        partition_log = self._host.get_log(SHARE_GROUP_STATE_TOPIC, partition)
        states: dict[StateKey, PersistedState] = {}
        latest: dict[StateKey, int] = {}
        await asyncio.get_running_loop().run_in_executor(None, _replay_partition, partition_log,
                                                         partition_log.log_end_offset, states, latest)
        self._states.update(states)
        self._latest[partition] = latest
        log.info("replayed %s-%d: %d share-partition state(s)", SHARE_GROUP_STATE_TOPIC, partition, len(states))

    def _unload_partition(self, partition: int) -> None:
        for key in [key for key in self._states if self.partition_of(key) == partition]:
            del self._states[key]
        self._latest.pop(partition, None)

    async def stop(self) -> None:
        await self.ownership.stop()


def _replay_partition(partition_log, end: int, states: dict, latest: dict) -> None:
    """Read one partition below `end` into `states` (runs in an executor; changes nothing else)."""
    def apply(batch, header) -> None:
        if header.is_control:
            return
        for record in iter_records(batch, max_size=MAX_RECORDS_BYTES):
            try:
                key = apply_record(states, record_bytes(record.key), record_bytes(record.value))
            except DecodeError as exc:
                log.error("%s-%d: skipping the record at offset %d, which does not decode: %s",
                          SHARE_GROUP_STATE_TOPIC, partition_log.partition, record.offset, exc)
                continue
            if key is not None:
                if key in states:
                    latest[key] = record.offset
                else:
                    latest.pop(key, None)

    replay_batches(partition_log, end, LOAD_BUFFER_BYTES, apply)


def state_store_of(host) -> ShareStateStore:
    """The node's share state store, made on first use."""
    store = getattr(host, "share_state_store", None)
    if store is None:
        store = ShareStateStore(host)
        host.share_state_store = store
    return store


def store_for(host, key: StateKey) -> ShareStateStore:
    """The store of the node leading the key's partition of `__share_group_state`: this node's while it leads it
    (or nobody does: its write then answers the error), and on a single node before the topic exists (made on the
    first write). A cluster makes the topic first, so that its partitions get leaders. Raises ShareStateError."""
    own = state_store_of(host)
    if host.topic(SHARE_GROUP_STATE_TOPIC) is None:
        if len(host.cluster.nodes) == 1:
            return own
        own.ensure_topic()
    state = host.partition_state(SHARE_GROUP_STATE_TOPIC, own.partition_of(key))
    if state is None or state.leader == host.node_id or state.leader not in host.cluster.nodes:
        return own
    return state_store_of(host.cluster.nodes[state.leader])
