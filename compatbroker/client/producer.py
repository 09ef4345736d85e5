"""Writing records: per-partition batches (v2 record batches built by compatbroker.protocol.records), sent to each
partition's leader in Produce requests, with the Java producer's settings and defaults:

| setting | default | meaning |
| --- | --- | --- |
| acks | -1 (all) | 0: no answer awaited (offsets unknown, reported as -1); 1: the leader; -1: every in-sync replica |
| compression.type | none | none, gzip, snappy, lz4, zstd (zstd needs Produce v7+, as Kafka requires) |
| linger.ms | 5 | how long a batch that is not full waits for more records (Kafka 4.0's default) |
| batch.size | 16384 | bytes (uncompressed estimate) at which a batch is full; a bigger record gets a batch of its own |
| max.request.size | 1048576 | bytes of batches in one Produce request; a bigger record fails with MESSAGE_TOO_LARGE |
| buffer.memory | 33554432 | bytes of records queued and not acknowledged; `send()` blocks while they would exceed it |
| max.block.ms | 60000 | how long `send()` blocks for buffer.memory before the record fails (KafkaTimeoutError) |
| retries, delivery.timeout.ms | unlimited, 120000 | retriable errors are retried until the delivery timeout |
| enable.idempotence | False | InitProducerId, then sequence numbers per partition (needs acks=-1); off, as kcat |

The partitioner (`compatbroker.client.partitioner`) places records without an explicit partition.

Synchronous: `send()` only queues, and sends batches that are full (when buffer.memory is used up it sends and waits
for answers instead: backpressure on the caller, as the Java producer's send() blocks); `poll()` also sends those
whose linger.ms has passed; `flush()` sends everything and waits for every answer. One request is in flight at a
time, so a retried batch keeps its place: it goes back to the head of its partition's queue. Retriable errors
(NOT_LEADER_OR_FOLLOWER, a lost connection, ...) refresh metadata and retry after retry.backoff.ms; other errors
fail the batch's records.
Each record's outcome goes to `on_delivery(RecordMetadata)`, in order within a partition.
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import InitProducerIdRequest, ProduceRequest
from compatbroker.protocol.records import Compression, build_batch

from .consumer import topic_uuid
from .errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from .partitioner import make_partitioner

__all__ = ["COMPRESSION_TYPES", "Producer", "RecordMetadata"]

PRODUCE_KEY = 0
MIN_PRODUCE_VERSION = 3  # the first to carry v2 record batches
TOPIC_IDS_PRODUCE_VERSION = 13  # Produce names topics by id from v13
ZSTD_MIN_PRODUCE_VERSION = 7
RETRY_BACKOFF_S = 0.1  # retry.backoff.ms
COMPRESSION_TYPES = {"none": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY,
                     "lz4": Compression.LZ4, "zstd": Compression.ZSTD}
RECORD_OVERHEAD = 21  # a record's length, attributes, deltas and counts, at most (varints)
BATCH_OVERHEAD = 61
# errors after which the producer refreshes metadata before retrying (the leader may have moved)
METADATA_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
                             ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
                             ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_ENOUGH_REPLICAS})


@dataclass(slots=True)
class RecordMetadata:
    """A record's outcome: its offset (-1 with acks=0), or the KafkaError that failed it; `size` counts the bytes
    of its key and value."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    size: int
    error: KafkaError | None = None


class _Batch:
    __slots__ = ("topic", "partition", "records", "size", "created", "base_sequence", "attempts", "retry_at")

    def __init__(self, topic: str, partition: int):
        self.topic, self.partition = topic, partition
        self.records: list[tuple] = []  # (key, value, headers, timestamp)
        self.size = BATCH_OVERHEAD
        self.created = time.monotonic()
        self.base_sequence = -1
        self.attempts = 0
        self.retry_at = 0.0


def _record_size(key, value, headers) -> int:
    size = RECORD_OVERHEAD + len(key or b"") + len(value or b"")
    return size + sum(len(name) + len(data or b"") + 10 for name, data in headers)


class Producer:
    """Batches records per partition and sends them to the leaders. Not thread-safe; `client` is a KafkaClient."""

    def __init__(self, client, *, acks: int = -1, compression: str = "none", linger_ms: int = 5,
                 batch_size: int = 16384, max_request_size: int = 1048576, partitioner: str = "murmur2",
                 retries: int = 2147483647, delivery_timeout_ms: int = 120000, request_timeout_ms: int = 30000,
                 enable_idempotence: bool = False, buffer_memory: int = 33554432, max_block_ms: int = 60000,
                 on_delivery: Callable[[RecordMetadata], None] | None = None):
        if acks not in (-1, 0, 1):
            raise ValueError(f"acks must be -1, 0 or 1, got {acks}")
        if compression not in COMPRESSION_TYPES:
            raise ValueError(f"compression.type must be one of {', '.join(COMPRESSION_TYPES)}, got {compression!r}")
        if enable_idempotence and acks != -1:
            raise ValueError("enable.idempotence needs acks=-1 (all), as Kafka's producer requires")
        self.client = client
        self.acks = acks
        self.compression = COMPRESSION_TYPES[compression]
        self.linger_s = linger_ms / 1000
        self.batch_size = batch_size
        self.max_request_size = max_request_size
        self.buffer_memory = buffer_memory
        self.max_block_s = max_block_ms / 1000
        self._buffered = 0  # bytes of the queued batches (their size estimates), at most buffer.memory
        self.partitioner = make_partitioner(partitioner, batch_size)
        self.retries = retries
        self.delivery_timeout_s = delivery_timeout_ms / 1000
        self.request_timeout_ms = request_timeout_ms
        self.idempotent = enable_idempotence
        self.on_delivery = on_delivery or (lambda result: None)
        self._queues: dict[tuple[str, int], deque[_Batch]] = {}
        self._partitions: dict[str, int] = {}  # topic -> partition count
        self._available: dict[str, list[int]] = {}  # topic -> partitions with a leader
        self._leaders: dict[tuple[str, int], int] = {}
        self._topic_ids: dict[str, object] = {}
        self._topic_names: dict[object, str] = {}
        self._stale = False
        self._last_refresh = 0.0
        self._producer_id, self._producer_epoch = -1, -1
        self._sequences: dict[tuple[str, int], int] = {}
        self._version: int | None = None

    # --- queueing -------------------------------------------------------------------------------------------------

    def partitions_for(self, topic: str) -> int:
        """The topic's partition count. Metadata is asked for when it is unknown, allowing the broker to create the
        topic (auto.create.topics.enable), as the Java producer does; a topic being created (LEADER_NOT_AVAILABLE)
        is waited for up to request.timeout.ms. Raises the topic's KafkaError (UNKNOWN_TOPIC_OR_PARTITION, ...)."""
        deadline = time.monotonic() + self.client.config.request_timeout_s
        while topic not in self._partitions:
            meta = self.client.metadata([topic], allow_auto_topic_creation=True).topics.get(topic)
            if meta is not None and not meta.error and meta.partitions:
                self._learn(topic, meta)
                break
            code = meta.error.code if meta is not None and meta.error else ErrorCode.LEADER_NOT_AVAILABLE
            if code != ErrorCode.LEADER_NOT_AVAILABLE or time.monotonic() >= deadline:
                raise KafkaError(code, f"topic {topic}: {meta.error.message if meta and meta.error else 'no leader'}")
            time.sleep(RETRY_BACKOFF_S)
        return self._partitions[topic]

    def send(self, topic: str, value: bytes | None, key: bytes | None = None, headers: Iterable = (),
             partition: int | None = None, timestamp: int | None = None) -> None:
        """Queue a record (CreateTime now unless `timestamp`); full batches are sent at once."""
        headers = list(headers)
        count = self.partitions_for(topic)
        size = _record_size(key, value, headers)
        if partition is None:
            partition = self.partitioner.partition(topic, key, size, count, self._available.get(topic, ()))
        elif not 0 <= partition < count:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"partition {partition} is not in topic {topic} (partitions 0-{count - 1})")
        timestamp = int(time.time() * 1000) if timestamp is None else timestamp
        error = self._too_large(size + BATCH_OVERHEAD) or self._wait_for_memory(size + BATCH_OVERHEAD)
        if error is not None:
            self.on_delivery(RecordMetadata(topic, partition, -1, timestamp, len(key or b"") + len(value or b""),
                                            error))
            return
        queue = self._queues.setdefault((topic, partition), deque())
        if not queue or queue[-1].attempts or queue[-1].size + size > self.batch_size:
            queue.append(_Batch(topic, partition))
            self._buffered += BATCH_OVERHEAD
        batch = queue[-1]
        batch.records.append((key, value, headers, timestamp))
        batch.size += size
        self._buffered += size
        if batch.size >= self.batch_size or len(queue) > 1:
            self._send_ready(time.monotonic(), flushing=False)

    def _too_large(self, size: int) -> KafkaError | None:
        """The Java producer's record size checks: MESSAGE_TOO_LARGE (RecordTooLargeException)."""
        for limit, what in ((self.max_request_size, "max.request.size"), (self.buffer_memory, "buffer.memory")):
            if size > limit:
                return KafkaError(ErrorCode.MESSAGE_TOO_LARGE, f"The message is {size} bytes when serialized which "
                                                               f"is larger than {limit}, which is the value of the "
                                                               f"{what} configuration.")
        return None

    def _wait_for_memory(self, size: int) -> KafkaError | None:
        """Backpressure: while queued records would exceed buffer.memory, send batches and wait for their answers
        (or for leaders to come back), up to max.block.ms; then the record fails with a timeout, as the Java
        producer's BufferExhaustedException."""
        deadline = time.monotonic() + self.max_block_s
        while self._buffered + size > self.buffer_memory:
            if time.monotonic() >= deadline:
                return KafkaTimeoutError(
                    f"Failed to allocate {size} bytes within the configured max blocking time "
                    f"{int(self.max_block_s * 1000)} ms. Total memory: {self.buffer_memory} bytes. Available memory: "
                    f"{max(0, self.buffer_memory - self._buffered)} bytes.")
            before = self._buffered
            self._send_ready(time.monotonic(), flushing=True)
            if self._buffered == before:
                time.sleep(RETRY_BACKOFF_S)  # retry.backoff.ms: leaders unknown or a retriable error
        return None

    @property
    def buffered_bytes(self) -> int:
        """Bytes of records queued and not yet acknowledged (bounded by buffer.memory)."""
        return self._buffered

    @property
    def pending(self) -> int:
        """Records queued and not yet acknowledged."""
        return sum(len(batch.records) for queue in self._queues.values() for batch in queue)

    def time_until_ready(self) -> float | None:
        """Seconds until the oldest waiting batch is due (0: now), None when nothing waits."""
        oldest = min((queue[0].created for queue in self._queues.values() if queue), default=None)
        if oldest is None:
            return None
        return max(0.0, oldest + self.linger_s - time.monotonic())

    def poll(self) -> None:
        """Send the batches that are full or have waited linger.ms."""
        self._send_ready(time.monotonic(), flushing=False)

    def flush(self) -> None:
        """Send every queued record and wait until each is acknowledged or failed."""
        while self.pending:
            before = self.pending
            self._send_ready(time.monotonic(), flushing=True)
            if self.pending == before:
                time.sleep(RETRY_BACKOFF_S)  # retry.backoff.ms: leaders unknown or a retriable error

    def close(self) -> None:
        self.flush()

    # --- sending --------------------------------------------------------------------------------------------------

    def _ready(self, now: float, flushing: bool) -> list[_Batch]:
        ready = []
        for queue in self._queues.values():
            if not queue:
                continue
            head = queue[0]
            if now < head.retry_at:
                continue
            if flushing or len(queue) > 1 or head.size >= self.batch_size or now - head.created >= self.linger_s:
                ready.append(head)
        return ready

    def _send_ready(self, now: float, flushing: bool) -> None:
        """Send one request per leader holding ready batches."""
        self._expire(now)
        self._refresh_metadata(list({batch.topic for queue in self._queues.values() for batch in queue}))
        if self.idempotent and self._producer_id < 0:
            self._init_producer_id()
        by_node: dict[int, list[_Batch]] = {}
        for batch in self._ready(now, flushing):
            leader = self._leaders.get((batch.topic, batch.partition), -1)
            if leader is None or leader < 0:
                self._stale = True
            else:
                by_node.setdefault(leader, []).append(batch)
        for node, batches in by_node.items():
            self._send_to(node, self._fit_request(batches))

    def _fit_request(self, batches: list[_Batch]) -> list[_Batch]:
        chosen, total = [], 0
        for batch in batches:
            if chosen and total + batch.size > self.max_request_size:
                break
            chosen.append(batch)
            total += batch.size
        return chosen

    def _batch_bytes(self, batch: _Batch) -> bytes:
        tp = (batch.topic, batch.partition)
        if self.idempotent and batch.base_sequence < 0:
            batch.base_sequence = self._sequences.get(tp, 0)
            self._sequences[tp] = (batch.base_sequence + len(batch.records)) % 2**31
        return build_batch(batch.records, compression=self.compression, producer_id=self._producer_id,
                           producer_epoch=self._producer_epoch, base_sequence=batch.base_sequence)

    def _check_version(self, node: int) -> None:
        """Produce v3+ (record batches), v7+ for zstd, as Kafka requires; checked once."""
        if self._version is None:
            version = self.client.version_for(PRODUCE_KEY, node, min_version=MIN_PRODUCE_VERSION)
            if self.compression == Compression.ZSTD and version < ZSTD_MIN_PRODUCE_VERSION:
                raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                                 f"zstd needs Produce v7; the broker offers up to v{version}")
            self._version = version

    def _send_to(self, node: int, batches: list[_Batch]) -> None:
        self._check_version(node)
        topics: dict[str, list] = {}
        for batch in batches:
            batch.attempts += 1
            topics.setdefault(batch.topic, []).append(ProduceRequest.PartitionProduceData(
                index=batch.partition, records=self._batch_bytes(batch)))

        def build(version: int):
            by_id = version >= TOPIC_IDS_PRODUCE_VERSION
            return ProduceRequest(transactional_id=None, acks=self.acks, timeout_ms=self.request_timeout_ms,
                                  topic_data=[ProduceRequest.TopicProduceData(
                                      name="" if by_id else name,
                                      topic_id=self._topic_ids[name] if by_id else topic_uuid(None),
                                      partition_data=parts) for name, parts in topics.items()])
        try:
            response = self.client.send(build, node_id=node, api_key=PRODUCE_KEY, min_version=MIN_PRODUCE_VERSION)
        except KafkaConnectionError as exc:
            for batch in batches:
                self._retry_or_fail(batch, exc)
            return
        if response is None:  # acks=0: nothing comes back
            for batch in batches:
                self._complete(batch, -1, None)
            return
        self._read_response(response, {(b.topic, b.partition): b for b in batches})

    def _read_response(self, response, batches: dict[tuple[str, int], _Batch]) -> None:
        for topic in response.responses:
            name = topic.name or self._topic_names.get(topic.topic_id)
            for part in topic.partition_responses:
                batch = batches.pop((name, part.index), None)
                if batch is None:
                    continue
                code = part.error_code
                if code in (0, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):  # a duplicate: written by an earlier try
                    self._complete(batch, part.base_offset, None)
                else:
                    self._retry_or_fail(batch, KafkaError(code, part.error_message or None))
        for batch in batches.values():  # a partition the broker did not answer for
            self._retry_or_fail(batch, KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                                  "the Produce response left this partition out"))

    def _retry_or_fail(self, batch: _Batch, error: KafkaError) -> None:
        retriable = error.retriable or isinstance(error, KafkaConnectionError)
        if error.code in METADATA_ERRORS or isinstance(error, KafkaConnectionError):
            self._stale = True
        expired = time.monotonic() - batch.created >= self.delivery_timeout_s
        if retriable and batch.attempts <= self.retries and not expired:
            batch.retry_at = time.monotonic() + RETRY_BACKOFF_S
            return  # stays at the head of its queue and goes again
        self._complete(batch, -1, error)

    def _complete(self, batch: _Batch, base_offset: int, error: KafkaError | None) -> None:
        queue = self._queues[(batch.topic, batch.partition)]
        if queue and queue[0] is batch:
            queue.popleft()
            self._buffered -= batch.size
        for index, (key, value, headers, timestamp) in enumerate(batch.records):
            offset = base_offset + index if error is None and base_offset >= 0 else -1
            self.on_delivery(RecordMetadata(batch.topic, batch.partition, offset, timestamp,
                                            len(key or b"") + len(value or b""), error))

    def _expire(self, now: float) -> None:
        for queue in self._queues.values():
            while queue and now - queue[0].created >= self.delivery_timeout_s:
                batch = queue[0]
                self._complete(batch, -1, KafkaTimeoutError(
                    f"{len(batch.records)} record(s) for {batch.topic}-{batch.partition} expired: "
                    f"delivery.timeout.ms ({int(self.delivery_timeout_s * 1000)}) has passed"))

    # --- metadata and producer id ---------------------------------------------------------------------------------

    def _refresh_metadata(self, topics: list[str]) -> None:
        """Metadata of `topics` when some are unknown, or when a leader moved (at most once per retry.backoff.ms,
        so that records for a leaderless partition do not each ask)."""
        unknown = [topic for topic in topics if topic not in self._partitions]
        now = time.monotonic()
        if not topics or not (unknown or (self._stale and now >= self._last_refresh + RETRY_BACKOFF_S)):
            return
        self._last_refresh = now
        cluster = self.client.metadata(sorted(set(topics) | set(self._partitions)))
        for name, meta in cluster.topics.items():
            if not meta.error and meta.partitions:
                self._learn(name, meta)
        self._stale = False

    def _learn(self, name: str, meta) -> None:
        self._partitions[name] = len(meta.partitions)
        self._topic_ids[name] = topic_uuid(meta.topic_id)
        self._topic_names[self._topic_ids[name]] = name
        self._available[name] = sorted(p for p, info in meta.partitions.items() if info.leader >= 0)
        for index, info in meta.partitions.items():
            self._leaders[(name, index)] = info.leader

    def _init_producer_id(self) -> None:
        response = self.client.send(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000,
                                                          producer_id=-1, producer_epoch=-1))
        if response.error_code:
            raise KafkaError(response.error_code, "InitProducerId")
        self._producer_id, self._producer_epoch = response.producer_id, response.producer_epoch
