"""The Java Kafka client Spark carries (kafka-clients), driven directly through the SparkSession's py4j gateway.

Spark's source and sink use only part of what the Java client can do: they assign partitions and seek, so the
consumer never validates a position it got from a group, and the sink never runs a transaction. These wrappers
run the Java consumer, producer and admin client with the settings a test names, to reach the rest (committed
offsets with leader epochs, OffsetForLeaderEpoch, transactions with `transactional.id` and `isolation.level`, the
admin client's ListOffsets, DescribeCluster and config resources: DescribeConfigs, IncrementalAlterConfigs). Every
wrapper takes further client settings by their Kafka names, e.g. the security ones (`security.protocol`,
`ssl.truststore.type=PEM`, `sasl.jaas.config`, ...).
"""
from __future__ import annotations

import time
import uuid
from typing import NamedTuple

BYTES_DESERIALIZER = "org.apache.kafka.common.serialization.ByteArrayDeserializer"
BYTES_SERIALIZER = "org.apache.kafka.common.serialization.ByteArraySerializer"
POLL_MS = 200
DEADLINE_S = 30.0


class JavaRecord(NamedTuple):
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    leader_epoch: int | None


class JavaConsumer:
    def __init__(self, jvm, bootstrap: str, **config: str):
        self._jvm = jvm
        settings = {"bootstrap.servers": bootstrap, "key.deserializer": BYTES_DESERIALIZER,
                    "value.deserializer": BYTES_DESERIALIZER, "enable.auto.commit": "false",
                    "fetch.max.wait.ms": "100", "client.id": f"java-consumer-{uuid.uuid4().hex[:6]}", **config}
        self.client_id = settings["client.id"]
        properties = jvm.java.util.Properties()
        for name, value in settings.items():
            properties.setProperty(name, str(value))
        self._consumer = jvm.org.apache.kafka.clients.consumer.KafkaConsumer(properties)

    def partition(self, topic: str, partition: int):
        return self._jvm.org.apache.kafka.common.TopicPartition(topic, partition)

    def assign(self, topic: str, partitions: list[int]) -> None:
        self._consumer.assign([self.partition(topic, partition) for partition in partitions])

    def subscribe(self, topic: str) -> None:
        """Join the consumer's group (group.id) for `topic`; the group assigns the partitions."""
        self._consumer.subscribe([topic])

    def poll_once(self) -> list[JavaRecord]:
        polled = self._consumer.poll(self._jvm.java.time.Duration.ofMillis(POLL_MS))
        found = []
        for record in _items(polled):
            epoch = record.leaderEpoch()
            found.append(JavaRecord(record.partition(), record.offset(), _bytes(record.key()), _bytes(record.value()),
                                    epoch.get() if epoch.isPresent() else None))
        return found

    def poll_until(self, count: int) -> list[JavaRecord]:
        """Poll until `count` records have come (more is a failure too)."""
        found: list[JavaRecord] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(found) < count:
            assert time.monotonic() < deadline, f"{len(found)} of {count} records after {DEADLINE_S} s: {found}"
            found += self.poll_once()
        assert len(found) == count, found
        return found

    def poll_to_positions(self, topic: str, ends: dict[int, int]) -> list[JavaRecord]:
        """Poll until the position of each partition `p` of `topic` (assigned by `assign` or by the group) is
        `ends[p]`, and return every record polled. Unlike a record count, positions show that the consumer moved
        past what it does not return (transaction markers, and under read_committed aborted records)."""
        found: list[JavaRecord] = []
        deadline = time.monotonic() + DEADLINE_S
        while True:
            found += self.poll_once()
            assigned = {tp.partition() for tp in _items(self._consumer.assignment()) if tp.topic() == topic}
            positions = {partition: self.position(topic, partition) for partition in ends if partition in assigned}
            if positions == ends:
                return found
            assert time.monotonic() < deadline, f"positions {positions}, not {ends}, after {DEADLINE_S} s: {found}"

    def commit(self, topic: str, partition: int, offset: int, leader_epoch: int | None = None) -> None:
        optional = self._jvm.java.util.Optional
        epoch = optional.of(leader_epoch) if leader_epoch is not None else optional.empty()
        metadata = self._jvm.org.apache.kafka.clients.consumer.OffsetAndMetadata(offset, epoch, "")
        self._consumer.commitSync({self.partition(topic, partition): metadata})

    def commit_positions(self) -> None:
        """Commit the consumed positions (with the leader epoch of the last record read)."""
        self._consumer.commitSync()

    def committed(self, topic: str, partitions: list[int]) -> dict[int, int | None]:
        """The group's committed offsets (OffsetFetch), None where it has none."""
        wanted = self._jvm.java.util.HashSet()
        for partition in partitions:
            wanted.add(self.partition(topic, partition))
        found = self._consumer.committed(wanted)
        offsets = {}
        for partition in partitions:
            metadata = found.get(self.partition(topic, partition))
            offsets[partition] = None if metadata is None else metadata.offset()
        return offsets

    def group_metadata(self):
        """The consumer's ConsumerGroupMetadata (group, generation, member id), for send_offsets_to_transaction."""
        return self._consumer.groupMetadata()

    def position(self, topic: str, partition: int) -> int:
        return self._consumer.position(self.partition(topic, partition))

    def close(self) -> None:
        self._consumer.close()


class JavaProducer:
    """A Java KafkaProducer of byte keys and values; with `transactional.id` among its settings a transactional
    one, whose transactions the methods below run as an application does."""

    def __init__(self, jvm, bootstrap: str, **config: str):
        self._jvm = jvm
        settings = {"bootstrap.servers": bootstrap, "key.serializer": BYTES_SERIALIZER,
                    "value.serializer": BYTES_SERIALIZER, "client.id": f"java-producer-{uuid.uuid4().hex[:6]}",
                    "max.block.ms": str(int(DEADLINE_S * 1000)), **config}
        self.client_id = settings["client.id"]
        properties = jvm.java.util.Properties()
        for name, value in settings.items():
            properties.setProperty(name, str(value))
        self._producer = jvm.org.apache.kafka.clients.producer.KafkaProducer(properties)

    def init_transactions(self) -> None:
        self._producer.initTransactions()

    def begin_transaction(self) -> None:
        self._producer.beginTransaction()

    def send(self, topic: str, records: list[tuple[int, bytes | None, bytes | None]]) -> list[JavaRecord]:
        """Send (partition, key, value) records, flush, and return them with the offsets the broker gave them."""
        record_class = self._jvm.org.apache.kafka.clients.producer.ProducerRecord
        futures = [self._producer.send(record_class(topic, partition, key, value))
                   for partition, key, value in records]
        self._producer.flush()
        sent = []
        for (_, key, value), future in zip(records, futures):
            metadata = future.get()
            sent.append(JavaRecord(metadata.partition(), metadata.offset(), key, value, None))
        return sent

    def send_offsets_to_transaction(self, topic: str, offsets: dict[int, int], group_metadata) -> None:
        """Commit `offsets` ({partition: offset} of `topic`) for the consumer's group within the transaction."""
        kafka = self._jvm.org.apache.kafka
        self._producer.sendOffsetsToTransaction(
            {kafka.common.TopicPartition(topic, partition): kafka.clients.consumer.OffsetAndMetadata(offset)
             for partition, offset in offsets.items()}, group_metadata)

    def commit_transaction(self) -> None:
        self._producer.commitTransaction()

    def abort_transaction(self) -> None:
        self._producer.abortTransaction()

    def close(self) -> None:
        self._producer.close()


class JavaAdmin:
    def __init__(self, jvm, bootstrap: str, **config: str):
        self._jvm = jvm
        admin = jvm.org.apache.kafka.clients.admin
        settings = {"bootstrap.servers": bootstrap, "client.id": f"java-admin-{uuid.uuid4().hex[:6]}", **config}
        self.client_id = settings["client.id"]
        properties = jvm.java.util.Properties()
        for name, value in settings.items():
            properties.setProperty(name, str(value))
        self._admin = admin.Admin.create(properties)
        self._specs = admin.OffsetSpec

    def describe_cluster(self) -> tuple[str, list[tuple[int, str, int]], int]:
        """(cluster id, [(node id, host, port)], controller id)."""
        result = self._admin.describeCluster()
        nodes = [(node.id(), node.host(), node.port()) for node in _items(result.nodes().get())]
        return result.clusterId().get(), nodes, result.controller().get().id()

    def topic_id(self, topic: str) -> uuid.UUID:
        described = self._admin.describeTopics([topic]).allTopicNames().get().get(topic)
        java_id = described.topicId()
        return uuid.UUID(int=((java_id.getMostSignificantBits() & (2**64 - 1)) << 64)
                         | (java_id.getLeastSignificantBits() & (2**64 - 1)))

    def list_offsets(self, topic: str, partition: int, spec: str | int) -> tuple[int, int, int | None]:
        """(offset, timestamp, leader epoch) for "earliest", "latest", "max-timestamp" or a timestamp."""
        offset_spec = {"earliest": self._specs.earliest, "latest": self._specs.latest,
                       "max-timestamp": self._specs.maxTimestamp}.get(spec)
        offset_spec = offset_spec() if offset_spec is not None else self._specs.forTimestamp(spec)
        partition_id = self._jvm.org.apache.kafka.common.TopicPartition(topic, partition)
        info = self._admin.listOffsets({partition_id: offset_spec}).partitionResult(partition_id).get()
        epoch = info.leaderEpoch()
        return info.offset(), info.timestamp(), epoch.get() if epoch.isPresent() else None

    # Config resources by ConfigResource.Type's name ("BROKER" with a node id or "" for the cluster default,
    # "TOPIC", "CLIENT_METRICS", ...).

    def incremental_alter_configs(self, resource_type: str, name: str,
                                  changes: list[tuple[str, str, str | None]]) -> None:
        """IncrementalAlterConfigs of one resource: (config name, operation SET|DELETE|APPEND|SUBTRACT, value)."""
        admin = self._jvm.org.apache.kafka.clients.admin
        operations = [admin.AlterConfigOp(admin.ConfigEntry(key, value), admin.AlterConfigOp.OpType.valueOf(op))
                      for key, op, value in changes]
        self._admin.incrementalAlterConfigs({self._config_resource(resource_type, name): operations}).all().get()

    def describe_configs(self, resource_type: str, name: str) -> dict[str, tuple[str | None, str]]:
        """DescribeConfigs of one resource: {config name: (value, source by ConfigEntry.ConfigSource's name)}."""
        resource = self._config_resource(resource_type, name)
        config = self._admin.describeConfigs([resource]).all().get().get(resource)
        return {entry.name(): (entry.value(), entry.source().name()) for entry in _items(config.entries())}

    def _config_resource(self, resource_type: str, name: str):
        config = self._jvm.org.apache.kafka.common.config
        return config.ConfigResource(config.ConfigResource.Type.valueOf(resource_type), name)

    # ACL bindings as tuples of Kafka's names: (resource type, resource name, pattern type, principal, host,
    # operation, permission), e.g. ("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"). A filter is
    # the same with "ANY" (MATCH for the pattern type) or None (names, principal, host) for what it leaves open.

    def create_acls(self, bindings: list[tuple]) -> None:
        self._admin.createAcls([self._binding(*binding) for binding in bindings]).all().get()

    def describe_acls(self, acl_filter: tuple) -> set[tuple]:
        return {_binding_tuple(found) for found in _items(self._admin.describeAcls(self._filter(*acl_filter))
                                                           .values().get())}

    def delete_acls(self, acl_filter: tuple) -> set[tuple]:
        """The bindings the filter deleted."""
        return {_binding_tuple(found) for found in _items(self._admin.deleteAcls([self._filter(*acl_filter)])
                                                           .all().get())}

    def _binding(self, resource_type, name, pattern_type, principal, host, operation, permission):
        acl, resource = self._jvm.org.apache.kafka.common.acl, self._jvm.org.apache.kafka.common.resource
        return acl.AclBinding(resource.ResourcePattern(resource.ResourceType.valueOf(resource_type), name,
                                                       resource.PatternType.valueOf(pattern_type)),
                              acl.AccessControlEntry(principal, host, acl.AclOperation.valueOf(operation),
                                                     acl.AclPermissionType.valueOf(permission)))

    def _filter(self, resource_type, name, pattern_type, principal, host, operation, permission):
        acl, resource = self._jvm.org.apache.kafka.common.acl, self._jvm.org.apache.kafka.common.resource
        return acl.AclBindingFilter(
            resource.ResourcePatternFilter(resource.ResourceType.valueOf(resource_type), name,
                                           resource.PatternType.valueOf(pattern_type)),
            acl.AccessControlEntryFilter(principal, host, acl.AclOperation.valueOf(operation),
                                         acl.AclPermissionType.valueOf(permission)))

    def close(self) -> None:
        self._admin.close()


def java_exception_class(exc: BaseException) -> str:
    """The class name of the Java exception behind a py4j error ("" for other errors)."""
    java = getattr(exc, "java_exception", None)
    return java.getClass().getName() if java is not None else ""


def _binding_tuple(binding) -> tuple:
    pattern, entry = binding.pattern(), binding.entry()
    return (pattern.resourceType().name(), pattern.name(), pattern.patternType().name(), entry.principal(),
            entry.host(), entry.operation().name(), entry.permissionType().name())


def _items(iterable):
    """The elements of a Java Iterable (py4j does not make every one a Python iterable)."""
    iterator = iterable.iterator()
    while iterator.hasNext():
        yield iterator.next()


def _bytes(value) -> bytes | None:
    return None if value is None else bytes(value)
