"""What the Spark tests do besides Spark: produce the records Spark reads (kafka-python), change topics through the
admin API, compare Spark rows with records, mark where the broker's request log stands, and wait for what the broker
does in the background.

Records are compared as `Record` tuples: Spark's columns (key, value, topic, partition, offset, timestamp in
milliseconds, timestampType, headers) hold exactly what kafka-python sent and the broker acknowledged.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import NamedTuple

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions

CLIENT_ID = "spark-tests-helper"  # the request log tells these apart from the Java client's requests
CREATE_TIME, LOG_APPEND_TIME = 0, 1
WAIT_TIMEOUT_S = 30.0
WAIT_INTERVAL_S = 0.05

# Spark's columns, with the timestamp in milliseconds: the form `records_of` expects rows in.
KAFKA_COLUMNS = ("topic", "partition", "offset", "key", "value", "unix_millis(timestamp) AS timestamp",
                 "timestampType", "headers")
WITHOUT_HEADERS = KAFKA_COLUMNS[:-1]  # a query without includeHeaders has no headers column


class Record(NamedTuple):
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    timestamp_type: int
    headers: tuple[tuple[str, bytes | None], ...] | None = ()


class KafkaTools:
    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap
        self._producers: dict[str | None, KafkaProducer] = {}  # by compression type
        self._admin: KafkaAdminClient | None = None

    def close(self) -> None:
        for producer in self._producers.values():
            producer.close(timeout=5)
        if self._admin is not None:
            self._admin.close()

    # --- producing ------------------------------------------------------------------------------------------------

    def produce(self, topic: str, records: Iterable[dict], *, compression: str | None = None,
                timestamp_type: int = CREATE_TIME) -> list[Record]:
        """Send `records` (dicts of partition, key, value, and optionally timestamp and headers) in order and
        return them as stored, each with the offset (and, for LogAppendTime topics, the time) the broker gave it."""
        producer = self._producer(compression)
        sent = []
        for item in records:
            headers = list(item.get("headers", ()))
            future = producer.send(topic, key=item.get("key"), value=item.get("value"), partition=item["partition"],
                                   timestamp_ms=item.get("timestamp"), headers=headers)
            sent.append((item, headers, future))
        producer.flush(timeout=WAIT_TIMEOUT_S)
        stored = []
        for item, headers, future in sent:
            metadata = future.get(timeout=WAIT_TIMEOUT_S)
            stamped = item.get("timestamp", metadata.timestamp)  # the producer's clock when not given
            if timestamp_type == LOG_APPEND_TIME:
                stamped = metadata.timestamp
            stored.append(Record(topic, metadata.partition, metadata.offset, item.get("key"), item.get("value"),
                                 stamped, timestamp_type, tuple(headers)))
        return stored

    def produce_values(self, topic: str, partition: int, values: Iterable[str], *, timestamp: int | None = None,
                       batch_per_record: bool = False) -> list[Record]:
        """Records with keys and values "<value>": the quick way to fill a partition. With `batch_per_record`
        every record is its own batch (flushed alone), so that small segments hold few records each."""
        now = int(time.time() * 1000) if timestamp is None else timestamp
        items = [{"partition": partition, "key": value.encode(), "value": value.encode(), "timestamp": now}
                 for value in values]
        if not batch_per_record:
            return self.produce(topic, items)
        return [record for item in items for record in self.produce(topic, [item])]

    def _producer(self, compression: str | None) -> KafkaProducer:
        if compression not in self._producers:
            # Records wait for the flush at the end of `produce`: the records of one call become one batch per
            # partition (up to 16 KiB), so that tests know where batches begin.
            self._producers[compression] = KafkaProducer(bootstrap_servers=self.bootstrap, client_id=CLIENT_ID,
                                                         compression_type=compression, linger_ms=5000, acks="all")
        return self._producers[compression]

    # --- topics ---------------------------------------------------------------------------------------------------

    @property
    def admin(self) -> KafkaAdminClient:
        if self._admin is None:
            self._admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id=CLIENT_ID)
        return self._admin

    def grow(self, topic: str, partitions: int) -> None:
        """CreatePartitions: `topic` gets `partitions` partitions in all. kafka-python's producer refuses partitions
        its cached metadata lacks, so the producers start afresh."""
        self.admin.create_partitions({topic: NewPartitions(total_count=partitions)})
        self._forget_producers()

    def _forget_producers(self) -> None:
        for producer in self._producers.values():
            producer.close(timeout=5)
        self._producers.clear()

    def delete_topic(self, topic: str) -> None:
        """DeleteTopics. The producers start afresh: an idempotent producer numbers its batches per partition name,
        and compatbroker answers UNKNOWN_PRODUCER_ID to a producer it has no state for whose batch does not start
        at sequence 0 (storage/producer_state.py), where Kafka 2.5+ accepts it."""
        self.admin.delete_topics([topic])
        self._forget_producers()

    def set_topic_configs(self, topic: str, configs: dict[str, str]) -> None:
        """AlterConfigs: the topic's overrides become exactly `configs`."""
        self.admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs=configs)])

    def producers(self, topic: str, partition: int) -> list:
        """DescribeProducers: the producers (id, epoch, last sequence...) the partition keeps state for."""
        found = self.admin.describe_producers([TopicPartition(topic, partition)])
        return list(found[TopicPartition(topic, partition)].active_producers)

    def offsets(self, topic: str, partitions: int) -> tuple[dict[int, int], dict[int, int]]:
        """({partition: earliest offset}, {partition: latest offset}) through ListOffsets."""
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, client_id=CLIENT_ID)
        try:
            wanted = [TopicPartition(topic, partition) for partition in range(partitions)]
            earliest = consumer.beginning_offsets(wanted)
            latest = consumer.end_offsets(wanted)
        finally:
            consumer.close()
        return ({tp.partition: offset for tp, offset in earliest.items()},
                {tp.partition: offset for tp, offset in latest.items()})


def records_of(rows) -> list[Record]:
    """Spark rows selected with KAFKA_COLUMNS (headers may be absent) as Records, in offset order per partition."""
    found = []
    for row in rows:
        fields = row.asDict()
        headers = None
        if "headers" in fields:  # only with includeHeaders; Spark gives a record without headers a null array
            headers = tuple((header["key"], _bytes(header["value"])) for header in fields["headers"] or ())
        found.append(Record(fields["topic"], fields["partition"], fields["offset"], _bytes(fields["key"]),
                            _bytes(fields["value"]), fields["timestamp"], fields["timestampType"], headers))
    return sorted(found)


def without_headers(records: Iterable[Record]) -> list[Record]:
    """The records as a query without includeHeaders shows them."""
    return [record._replace(headers=None) for record in records]


def _bytes(value) -> bytes | None:
    return None if value is None else bytes(value)


def last_seq(broker) -> int:
    """The sequence number of the broker's latest logged request: `broker.requests(since)` gives the later ones."""
    return max((entry.seq for entry in broker.requests()), default=0)


def wait_until(condition: Callable[[], object], what: str, timeout_s: float = WAIT_TIMEOUT_S):
    """Poll `condition` until it returns something true (which is returned): for work the broker does on its own
    schedule (retention), which a client can observe but not be told about."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(WAIT_INTERVAL_S)
