"""Reading records from assigned partitions: where to start (offset specs resolved with ListOffsets), the Fetch
loop that follows partition leaders, and the decoding of what a broker returns.

    consumer = Consumer(client, isolation_level=READ_COMMITTED)
    consumer.assign([("orders", 0), ("orders", 1)], parse_offset_spec("-10"))
    while not consumer.at_end():
        for record in consumer.poll(max_records=500):
            ...

Offset specs (kcat's `-o`): `beginning`, `end`, an absolute offset `N` (kept within the log: past the end is the
end, before the log start is the log start), `-N` (N records before the end, not before the log start),
`@TIMESTAMP_MS` (the first record at or after that time, ListOffsets by timestamp; the end when no record is that
recent). `s@TIMESTAMP_MS` is accepted as kcat spells it.

Fetch: one full (session-less) Fetch per leader node and poll, topics by name or by id (v13+) as the negotiated
version wants. A partition whose leader moved (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_TOPIC_ID, ...)
makes the next poll refresh metadata first; OFFSET_OUT_OF_RANGE moves the position by the `reset` policy
(`earliest` or `latest`, as auto.offset.reset); any other partition error is raised as a KafkaError. A topic the
consumer has read that the metadata then says is gone (deleted) raises UNKNOWN_TOPIC_OR_PARTITION, unless
`wait_for_topics` is set (a consumer that follows a topic waits for it to be created again).

Decoding (`decode_records`) takes every format a broker may send: v2 record batches with any codec, and the legacy
magic 0/1 message sets (compressed wrappers included) that brokers older than 0.11 or down-converting ones return.
Batch CRCs are checked (check.crcs), a partial batch at the end of the data is skipped as Kafka's clients skip it,
records before the fetch offset (inside a batch that starts earlier) are dropped, control batches are never
returned, and with read_committed the records of aborted transactions are dropped using the response's aborted
transaction list, as the Java consumer does.

Positions advance only as records are handed out by `poll` (fetched records wait in a buffer), so a caller that
stops after N records commits exactly what it returned; `rewind` gives back records the caller could not use.
"""
from __future__ import annotations

import struct
import time
import uuid
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import FetchRequest
from compatbroker.protocol.records import (DEFAULT_MAX_UNCOMPRESSED_SIZE, ControlRecordType, CorruptRecordError,
                                           InvalidRecordError, UnsupportedCompressionError, check_batch_fields,
                                           iter_legacy_messages, iter_records, parse_control_key, read_batch_header)

from .admin import Admin
from .errors import KafkaConnectionError, KafkaError

__all__ = ["ConsumedRecord", "Consumer", "OffsetSpec", "READ_COMMITTED", "READ_UNCOMMITTED", "decode_records",
           "parse_offset_spec", "topic_uuid"]

READ_UNCOMMITTED = 0
READ_COMMITTED = 1
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
FETCH_KEY = 1
RETRY_BACKOFF_S = 0.1  # retry.backoff.ms
# errors after which the leader is looked up again before the partition is fetched once more
LEADER_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_ID,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.OFFSET_NOT_AVAILABLE,
    ErrorCode.INCONSISTENT_TOPIC_ID,
})
_CONNECTION_ERRORS = (ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT)
_LENGTH = struct.Struct(">i")
_ENTRY_OVERHEAD = 17  # offset, length, then crc and magic (v0/v1) or leader epoch and magic (v2)
_MAGIC_POSITION = 16
_MIN_ENTRY_LENGTH = 14  # the smallest legacy message; a v2 batch is longer and read_batch_header checks that
_ZERO_UUID = uuid.UUID(int=0)
TOPIC_IDS_FETCH_VERSION = 13  # Fetch names topics by id from v13


def topic_uuid(topic_id) -> uuid.UUID:
    """A topic id as the codecs want it (the client's metadata gives a string, or None before Metadata v10)."""
    if isinstance(topic_id, uuid.UUID):
        return topic_id
    return uuid.UUID(topic_id) if topic_id else _ZERO_UUID


@dataclass(slots=True)
class ConsumedRecord:
    """A record as read: `timestamp_type` 0 CreateTime, 1 LogAppendTime, None (magic 0 data: no timestamp)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int | None
    key: bytes | None
    value: bytes | None
    headers: list
    leader_epoch: int = -1


# --- offset specs -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class OffsetSpec:
    """Where to start: kind is `earliest`, `latest`, `offset` (value: the offset), `from_end` (value: how many
    records before the end) or `timestamp` (value: ms)."""

    kind: str
    value: int = 0


def parse_offset_spec(text: str) -> OffsetSpec:
    """An OffsetSpec from kcat-like text; ValueError naming the accepted forms otherwise."""
    spec = text.strip()
    if spec in ("beginning", "earliest", "start", "oldest"):
        return OffsetSpec("earliest")
    if spec in ("end", "latest", "newest"):
        return OffsetSpec("latest")
    for prefix in ("s@", "@"):
        if spec.startswith(prefix) and spec[len(prefix):].isdigit():
            return OffsetSpec("timestamp", int(spec[len(prefix):]))
    if spec.startswith("-") and spec[1:].isdigit():
        return OffsetSpec("from_end", int(spec[1:]))
    if spec.isdigit():
        return OffsetSpec("offset", int(spec))
    raise ValueError(f"{text!r} is not an offset: use beginning, end, N, -N or @TIMESTAMP_MS")


# --- decoding -----------------------------------------------------------------------------------------------------

class _AbortedTransactions:
    """The read_committed filter for one partition's fetched data (Kafka's consumer rules): a producer's
    transactional batches are dropped from the first offset of its aborted transaction up to its ABORT marker."""

    def __init__(self, aborted):
        self._pending = sorted(((a.first_offset, a.producer_id) for a in aborted or ()), reverse=True)
        self._aborting: set[int] = set()

    def skip_batch(self, header) -> bool:
        while self._pending and self._pending[-1][0] <= header.last_offset:
            self._aborting.add(self._pending.pop()[1])
        if header.is_control:
            return True
        return header.is_transactional and header.producer_id in self._aborting

    def control_record(self, header, record) -> None:
        if parse_control_key(record.key) == ControlRecordType.ABORT:
            self._aborting.discard(header.producer_id)


def decode_records(topic: str, partition: int, data, *, fetch_offset: int, aborted=None,
                   read_committed: bool = False, max_size: int = DEFAULT_MAX_UNCOMPRESSED_SIZE,
                   check_crcs: bool = True) -> tuple[list[ConsumedRecord], int]:
    """The records of one partition's fetched data at or after `fetch_offset`, and the offset to fetch next
    (past every whole batch read, skipped ones included). Raises KafkaError(CORRUPT_MESSAGE) for damaged data."""
    view = memoryview(data if data is not None else b"")
    records: list[ConsumedRecord] = []
    next_offset = fetch_offset
    filter_ = _AbortedTransactions(aborted) if read_committed else None
    pos, end = 0, len(view)
    try:
        while end - pos >= _ENTRY_OVERHEAD:
            length = _LENGTH.unpack_from(view, pos + 8)[0]
            if length < _MIN_ENTRY_LENGTH:
                raise CorruptRecordError(f"record entry length {length} at position {pos} is below the minimum")
            entry_end = pos + 12 + length
            if entry_end > end:
                break  # a partial batch ends the data: fetch it whole next time
            entry = view[pos:entry_end]
            if view[pos + _MAGIC_POSITION] == 2:
                next_offset = _decode_batch(topic, partition, entry, records, next_offset, filter_, max_size,
                                            check_crcs)
            else:
                next_offset = _decode_legacy(topic, partition, entry, records, next_offset, max_size)
            pos = entry_end
    except (CorruptRecordError, InvalidRecordError, UnsupportedCompressionError) as exc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE,
                         f"{topic}-{partition} at offset {next_offset}: {exc}") from None
    return records, next_offset


def _decode_batch(topic, partition, entry, records, next_offset, filter_, max_size, check_crcs) -> int:
    header = read_batch_header(entry)
    if header.next_offset <= next_offset:
        return next_offset  # entirely before the position (an earlier batch the broker included)
    if check_crcs:
        check_batch_fields(entry, header)
    if filter_ is not None and filter_.skip_batch(header):
        if header.is_control:
            for record in iter_records(entry, max_size=max_size):
                filter_.control_record(header, record)
        return header.next_offset
    if header.is_control:
        return header.next_offset
    timestamp_type = header.timestamp_type
    for record in iter_records(entry, max_size=max_size):
        if record.offset >= next_offset:
            records.append(ConsumedRecord(topic, partition, record.offset, record.timestamp, timestamp_type,
                                          record.key, record.value, record.headers, header.partition_leader_epoch))
    return header.next_offset


def _decode_legacy(topic, partition, entry, records, next_offset, max_size) -> int:
    for message in iter_legacy_messages(entry, max_size=max_size):
        if message.offset >= next_offset:
            records.append(ConsumedRecord(topic, partition, message.offset, message.timestamp,
                                          message.timestamp_type, message.key, message.value, []))
            next_offset = message.offset + 1
    return next_offset


# --- the consumer -------------------------------------------------------------------------------------------------

class _PartitionState:
    __slots__ = ("position", "buffer", "buffered_next", "end_offset", "reached_end")

    def __init__(self, position: int | None):
        self.position = position
        self.buffer: deque[ConsumedRecord] = deque()
        self.buffered_next: int | None = None  # position once the buffer is drained
        self.end_offset: int | None = None  # high watermark (or last stable offset) of the last fetch
        self.reached_end = False


class Consumer:
    """Fetches assigned partitions from their leaders. Not thread-safe; `client` is a KafkaClient."""

    def __init__(self, client, *, isolation_level: int = READ_UNCOMMITTED, reset: str = "earliest",
                 max_wait_ms: int = 500, min_bytes: int = 1, max_bytes: int = 52428800,
                 max_partition_bytes: int = 1048576, check_crcs: bool = True,
                 max_uncompressed_bytes: int = DEFAULT_MAX_UNCOMPRESSED_SIZE, wait_for_topics: bool = False):
        if reset not in ("earliest", "latest"):
            raise ValueError(f"reset must be earliest or latest, got {reset!r}")
        self.client = client
        self.isolation_level = isolation_level
        self.reset = reset
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.max_partition_bytes = max_partition_bytes
        self.check_crcs = check_crcs
        self.max_uncompressed_bytes = max_uncompressed_bytes
        self.wait_for_topics = wait_for_topics
        self._admin = Admin(client)
        self._partitions: dict[tuple[str, int], _PartitionState] = {}
        self._leaders: dict[tuple[str, int], int] = {}
        self._topic_ids: dict[str, object] = {}
        self._topic_names: dict[object, str] = {}
        self._stale = True

    # --- assignment and positions -------------------------------------------------------------------------------

    def assign(self, partitions: Iterable[tuple[str, int]], spec: OffsetSpec | None = None,
               positions: Mapping[tuple[str, int], int] | None = None) -> None:
        """Read these partitions (replacing the assignment): from `positions` where given, else from `spec`
        (default: the reset policy)."""
        self._partitions = {tp: _PartitionState(None) for tp in partitions}
        self._stale = True
        for tp, offset in (positions or {}).items():
            if tp in self._partitions:
                self.seek(tp, offset)
        missing = [tp for tp, state in self._partitions.items() if state.position is None]
        if missing:
            self.seek_to(missing, spec or OffsetSpec(self.reset))

    @property
    def assignment(self) -> list[tuple[str, int]]:
        return list(self._partitions)

    def seek(self, tp: tuple[str, int], offset: int) -> None:
        state = self._partitions[tp]
        state.position = offset
        state.buffer.clear()
        state.buffered_next = None
        state.reached_end = False

    def seek_to(self, partitions: list[tuple[str, int]], spec: OffsetSpec) -> None:
        """Move `partitions` to the offsets `spec` names, resolved with ListOffsets."""
        for tp, offset in self.resolve(partitions, spec).items():
            self.seek(tp, offset)

    def rewind(self, records: Iterable[ConsumedRecord]) -> None:
        """Take back records `poll` returned (the caller could not use them): each partition moves back to the
        first of them, and the next poll fetches them again."""
        first: dict[tuple[str, int], int] = {}
        for record in records:
            tp = (record.topic, record.partition)
            first[tp] = min(first.get(tp, record.offset), record.offset)
        self.rewind_to(first)

    def rewind_to(self, positions: dict[tuple[str, int], int]) -> None:
        """Move each assigned partition that went past its offset in `positions` back to it (records handed out
        since `positions()` was read that the caller never got)."""
        for tp, offset in positions.items():
            state = self._partitions.get(tp)
            if state is not None and state.position is not None and state.position > offset:
                self.seek(tp, offset)

    def positions(self) -> dict[tuple[str, int], int]:
        """The offset of the next record `poll` returns, per assigned partition whose position is known."""
        return {tp: state.position for tp, state in self._partitions.items() if state.position is not None}

    def resolve(self, partitions: list[tuple[str, int]], spec: OffsetSpec) -> dict[tuple[str, int], int]:
        """The offsets an OffsetSpec names for `partitions`."""
        if spec.kind == "earliest":
            return self.list_offsets(partitions, EARLIEST_TIMESTAMP)
        if spec.kind == "latest":
            return self.list_offsets(partitions, LATEST_TIMESTAMP)
        if spec.kind in ("offset", "from_end"):  # kept within the log: past its end is the end
            earliest = self.list_offsets(partitions, EARLIEST_TIMESTAMP)
            latest = self.list_offsets(partitions, LATEST_TIMESTAMP)
            wanted = {tp: spec.value if spec.kind == "offset" else latest[tp] - spec.value for tp in partitions}
            return {tp: max(earliest[tp], min(wanted[tp], latest[tp])) for tp in partitions}
        if spec.kind == "timestamp":
            found = self.list_offsets(partitions, spec.value)
            missing = [tp for tp, offset in found.items() if offset < 0]
            if missing:  # no record that recent: start at the end
                found.update(self.list_offsets(missing, LATEST_TIMESTAMP))
            return found
        raise ValueError(f"unknown offset spec {spec!r}")

    # --- ListOffsets ----------------------------------------------------------------------------------------------

    def list_offsets(self, partitions: list[tuple[str, int]], timestamp: int,
                     attempts: int = 10) -> dict[tuple[str, int], int]:
        """ListOffsets of `timestamp` (-2 earliest, -1 latest, else ms) at each partition's leader, as the admin
        client asks it; the latest offset is the last stable one under read_committed. Retries leader moves and
        lost connections; -1 where no record matches."""
        found: dict[tuple[str, int], int] = {}
        remaining = list(partitions)
        for attempt in range(attempts):
            if attempt:
                time.sleep(RETRY_BACKOFF_S)
                self._stale = True
            self._refresh_metadata(remaining)  # raises for a topic deleted meanwhile
            retry = []
            for topic, indexes in _by_topic(remaining).items():
                for result in self._admin.list_offsets(topic, indexes, timestamp,
                                                       read_committed=self.isolation_level == READ_COMMITTED):
                    tp, error = (topic, result.partition), result.error
                    if error is None:
                        found[tp] = result.offset
                    elif error.code in LEADER_ERRORS or error.code in _CONNECTION_ERRORS:
                        retry.append(tp)
                    else:
                        raise KafkaError(error.code, f"ListOffsets of {topic}-{result.partition}: {error.message}")
            remaining = retry
            if not remaining:
                return found
        raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE,
                         f"no leader answered ListOffsets for {_names(remaining)} after {attempts} attempts")

    # --- metadata -------------------------------------------------------------------------------------------------

    def _refresh_metadata(self, partitions) -> None:
        if not self._stale:
            return
        topics = sorted({topic for topic, _ in partitions} | {topic for topic, _ in self._partitions})
        cluster = self.client.metadata(topics)
        for name in topics:
            meta = cluster.topics.get(name)
            if meta is None or meta.error:
                code = meta.error.code if meta is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and name in self._topic_ids \
                        and not self.wait_for_topics:
                    raise KafkaError(code, f"topic {name} was deleted while it was being read")
                if code in LEADER_ERRORS:
                    continue  # not known yet (being created, a leader election): try again later
                raise KafkaError(code, f"topic {name}: {meta.error.message}")
            self._topic_ids[name] = topic_uuid(meta.topic_id)
            self._topic_names[self._topic_ids[name]] = name
            for index, partition in meta.partitions.items():
                self._leaders[(name, index)] = partition.leader
        self._stale = False

    def _by_leader(self, partitions, unknown: list) -> dict[int, list[tuple[str, int]]]:
        groups: dict[int, list[tuple[str, int]]] = {}
        for tp in partitions:
            leader = self._leaders.get(tp, -1)
            if leader is None or leader < 0:
                unknown.append(tp)
            else:
                groups.setdefault(leader, []).append(tp)
        return groups

    # --- fetching -------------------------------------------------------------------------------------------------

    def poll(self, max_records: int = 500, timeout_s: float | None = None) -> list[ConsumedRecord]:
        """Up to `max_records` records: buffered ones first, else one Fetch round to the leaders (each waiting at
        most max_wait_ms, or `timeout_s` when shorter). May return none."""
        records = self._drain(max_records)
        if records:
            return records
        self._fetch_round(self.max_wait_ms if timeout_s is None else min(self.max_wait_ms, int(timeout_s * 1000)))
        return self._drain(max_records)

    def at_end(self) -> bool:
        """True once every assigned partition has been read up to the end its last fetch reported (kcat -e)."""
        if not self._partitions:
            return False
        for state in self._partitions.values():
            if not state.reached_end and not state.buffer and state.end_offset is not None \
                    and state.position is not None and state.position >= state.end_offset:
                state.reached_end = True
        return all(state.reached_end for state in self._partitions.values())

    def _drain(self, max_records: int) -> list[ConsumedRecord]:
        out: list[ConsumedRecord] = []
        for state in self._partitions.values():
            while state.buffer and len(out) < max_records:
                record = state.buffer.popleft()
                out.append(record)
                state.position = record.offset + 1
            if not state.buffer and state.buffered_next is not None:
                state.position = max(state.position, state.buffered_next)
                state.buffered_next = None
            if len(out) >= max_records:
                break
        return out

    def _fetchable(self) -> list[tuple[str, int]]:
        return [tp for tp, state in self._partitions.items()
                if state.position is not None and not state.buffer and state.buffered_next is None]

    def _fetch_round(self, max_wait_ms: int) -> None:
        wanted = self._fetchable()
        if not wanted:
            return
        self._refresh_metadata(wanted)
        leaderless: list[tuple[str, int]] = []
        got_data = False
        for node, group in self._by_leader(wanted, leaderless).items():
            wait_ms = 0 if got_data else max_wait_ms
            try:
                response = self.client.send(self._fetch_request(group, wait_ms), node_id=node, api_key=FETCH_KEY,
                                            timeout_s=wait_ms / 1000 + self.client.config.request_timeout_s)
            except KafkaConnectionError:
                self._stale = True
                continue
            got_data |= self._read_fetch(response)
        if leaderless:
            self._stale = True
        if self._stale and not got_data:
            time.sleep(RETRY_BACKOFF_S)  # retry.backoff.ms before asking for metadata again

    def _fetch_request(self, group, max_wait_ms: int):
        """A function of the Fetch version: topics by name, or by id from v13."""
        topics: dict[str, list] = {}
        for topic, partition in group:
            topics.setdefault(topic, []).append(FetchRequest.FetchPartition(
                partition=partition, fetch_offset=self._partitions[(topic, partition)].position,
                partition_max_bytes=self.max_partition_bytes))

        def build(version: int):
            by_id = version >= TOPIC_IDS_FETCH_VERSION
            return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=self.min_bytes,
                                max_bytes=self.max_bytes, isolation_level=self.isolation_level, session_id=0,
                                session_epoch=-1, topics=[
                                    FetchRequest.FetchTopic(topic="" if by_id else name,
                                                            topic_id=self._topic_ids[name] if by_id else _ZERO_UUID,
                                                            partitions=parts)
                                    for name, parts in topics.items()])
        return build

    def _read_fetch(self, response) -> bool:
        if response.error_code:
            raise KafkaError(response.error_code, "Fetch")
        got_data = False
        for topic in response.responses:
            name = topic.topic or self._topic_names.get(topic.topic_id)
            for part in topic.partitions:
                state = self._partitions.get((name, part.partition_index))
                if state is not None and state.position is not None:
                    got_data |= self._read_partition(name, part, state)
        return got_data

    def _read_partition(self, topic: str, part, state: _PartitionState) -> bool:
        code = part.error_code
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            self.seek_to([(topic, part.partition_index)], OffsetSpec(self.reset))
            return False
        if code in LEADER_ERRORS:
            self._stale = True
            return False
        if code:
            raise KafkaError(code, f"Fetch of {topic}-{part.partition_index} at offset {state.position}")
        read_committed = self.isolation_level == READ_COMMITTED
        end = part.last_stable_offset if read_committed and part.last_stable_offset >= 0 else part.high_watermark
        state.end_offset = end
        records, next_offset = decode_records(
            topic, part.partition_index, part.records, fetch_offset=state.position,
            aborted=part.aborted_transactions, read_committed=read_committed,
            max_size=self.max_uncompressed_bytes, check_crcs=self.check_crcs)
        if records:
            state.buffer.extend(records)
            state.buffered_next = next_offset
        elif next_offset == state.position and part.records is not None \
                and len(part.records) >= self.max_partition_bytes:
            # an old broker (Fetch before v3, KIP-74) cut the next batch short: it can never be read whole
            raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                             f"the batch at {topic}-{part.partition_index} offset {state.position} is larger "
                             f"than max.partition.fetch.bytes ({self.max_partition_bytes})")
        else:
            state.position = max(state.position, next_offset)
        return bool(records)


def _by_topic(partitions) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for topic, partition in partitions:
        grouped.setdefault(topic, []).append(partition)
    return grouped


def _names(partitions) -> str:
    return ", ".join(f"{topic}-{partition}" for topic, partition in partitions)
