"""kafka-python 3.x (pure Python; the same library is the suite's reference producer and reader).

The "kafka-python-2.2" row runs this adapter with kafka-python 2.2 in a venv of its own (older_python.py); the
branches on KAFKA_PYTHON_MAJOR cover what 2.x does differently."""
from __future__ import annotations

import importlib.metadata
import time
import uuid
from collections.abc import Sequence

from ..records import EARLIEST, LATEST, MAX_MESSAGE_BYTES, AtOffset, AtTimestamp, Consumed
from .base import (
    DEFAULT_TIMEOUT_S,
    OK,
    ClientAdapter,
    ClientError,
    ClusterView,
    ConnectFailure,
    GroupInfo,
    GroupListing,
    LogCapture,
    MemberInfo,
    error_outcome,
    next_offsets,
)


def _major_version() -> int:
    """kafka-python's major version (0 when absent); the "kafka-python-2.2" row runs this adapter with 2.2."""
    try:
        return int(importlib.metadata.version("kafka-python").split(".")[0])
    except importlib.metadata.PackageNotFoundError:
        return 0


KAFKA_PYTHON_MAJOR = _major_version()
# The timeout of the consumer's offset lookups; 2.x's take none (they wait up to request_timeout_ms).
LOOKUP_TIMEOUT = {"timeout_ms": 15000} if KAFKA_PYTHON_MAJOR >= 3 else {}


class KafkaPythonClient(ClientAdapter):
    name = "kafka-python"
    # 3.x's default (KIP-679), kept; it turns idempotence off itself for acks other than -1. 2.x's producer is plain.
    idempotent = KAFKA_PYTHON_MAJOR >= 3

    def producer(self, bootstrap: str, **overrides):
        from kafka import KafkaProducer
        config = {"bootstrap_servers": bootstrap, "client_id": f"compat-kp-{uuid.uuid4().hex[:6]}",
                  "max_request_size": MAX_MESSAGE_BYTES, "linger_ms": 5, "request_timeout_ms": 15000,
                  "max_block_ms": 15000}
        return KafkaProducer(**(config | (self.security or {}) | overrides))

    def produce(self, bootstrap, topic, records, *, acks=-1, compression=None, timeout_s=DEFAULT_TIMEOUT_S):
        producer = self.producer(bootstrap, acks=acks, compression_type=compression)
        try:
            futures = [producer.send(topic, key=r.key, value=r.value, headers=list(r.headers) or None,
                                     partition=r.partition, timestamp_ms=r.timestamp) for r in records]
            producer.flush(timeout=timeout_s)
            metadata = [future.get(timeout=timeout_s) for future in futures]
            if acks == 0 and KAFKA_PYTHON_MAJOR < 3:
                _write_queued_requests(producer, timeout_s)
        except Exception as exc:
            raise ClientError(f"kafka-python producer: {exc!r}") from exc
        finally:
            producer.close(timeout=5)
        if acks == 0:
            return None  # no response, so no offsets
        return [(m.partition, m.offset) for m in metadata]

    def consumer(self, bootstrap: str, **overrides):
        from kafka import KafkaConsumer
        config = {"bootstrap_servers": bootstrap, "group_id": None, "enable_auto_commit": False,
                  "client_id": f"compat-kc-{uuid.uuid4().hex[:6]}", "request_timeout_ms": 40000}
        return KafkaConsumer(**(config | (self.security or {}) | overrides))

    def consume(self, bootstrap, topic, count, *, partitions=(0,), start=EARLIEST, timeout_s=DEFAULT_TIMEOUT_S,
                fetch_wait_ms=None):
        from kafka import TopicPartition
        consumer = self.consumer(bootstrap, fetch_max_wait_ms=fetch_wait_ms or 500)
        try:
            tps = [TopicPartition(topic, p) for p in partitions]
            consumer.assign(tps)
            _seek(consumer, tps, start)
            return _poll_for(consumer, count, timeout_s)
        finally:
            consumer.close()

    def list_offsets(self, bootstrap, topic, partition, timestamp):
        from kafka import TopicPartition
        consumer = self.consumer(bootstrap)
        try:
            tp = TopicPartition(topic, partition)
            earliest = consumer.beginning_offsets([tp], **LOOKUP_TIMEOUT)[tp]
            latest = consumer.end_offsets([tp], **LOOKUP_TIMEOUT)[tp]
            found = consumer.offsets_for_times({tp: timestamp}, **LOOKUP_TIMEOUT)[tp]
        finally:
            consumer.close()
        return earliest, latest, None if found is None else found.offset

    def end_offsets(self, bootstrap: str, topic: str, partitions) -> dict[int, int]:
        """The latest offset (ListOffsets -1) of each partition, in one request."""
        from kafka import TopicPartition
        consumer = self.consumer(bootstrap)
        try:
            found = consumer.end_offsets([TopicPartition(topic, p) for p in partitions], **LOOKUP_TIMEOUT)
        finally:
            consumer.close()
        return {tp.partition: offset for tp, offset in found.items()}

    def metadata(self, bootstrap, topics=None, *, auto_create=False):
        if auto_create and topics:
            # The admin client never lets the broker create a topic; a producer's Metadata request does.
            producer = self.producer(bootstrap, enable_idempotence=False)
            try:
                for topic in topics:
                    producer.partitions_for(topic)
            finally:
                producer.close(timeout=5)
        admin = self.admin(bootstrap)
        try:
            described = admin.describe_topics(None if topics is None else list(topics))
            cluster = admin.describe_cluster()
        finally:
            admin.close()
        # 3.x answers with the field names of Kafka's current schemas, 2.x with those of its Metadata v5 classes
        broker, topic, partition, leader = (("broker_id", "name", "partition_index", "leader_id")
                                            if KAFKA_PYTHON_MAJOR >= 3 else ("node_id", "topic", "partition", "leader"))
        return ClusterView(frozenset((b[broker], b["host"], b["port"]) for b in cluster["brokers"]),
                           {t[topic]: {p[partition]: p[leader] for p in t["partitions"]}
                            for t in described if t["error_code"] == 0})

    def list_topics(self, bootstrap):
        consumer = self.consumer(bootstrap)
        try:
            return set(consumer.topics())
        finally:
            consumer.close()

    def partitions_for(self, bootstrap: str, topic: str) -> set[int]:
        """Creates the topic if needed (Metadata with auto-creation) and returns its partitions."""
        producer = self.producer(bootstrap)
        try:
            return set(producer.partitions_for(topic))
        finally:
            producer.close(timeout=5)

    def connect_failure(self, bootstrap, *, timeout_s=20.0):
        # A consumer bootstraps when it is made; what failed is only logged when the bootstrap gives up.
        from kafka.errors import KafkaError
        with LogCapture("kafka") as log:
            try:
                consumer = self.consumer(bootstrap, bootstrap_timeout_ms=int(timeout_s * 1000),
                                         reconnect_backoff_ms=50, reconnect_backoff_max_ms=500)
            except KafkaError as exc:
                return ConnectFailure(type(exc).__name__, "\n".join([str(exc), *log.lines]))
        consumer.close()
        raise ClientError("kafka-python consumer: connected, expected a failure")

    # --- consumer groups -------------------------------------------------------------------------------------------

    def run_member(self, spec, session):
        from kafka import ConsumerRebalanceListener, OffsetAndMetadata, TopicPartition
        topic = spec["topic"]

        def ours(tps):
            return [tp.partition for tp in tps if tp.topic == topic]

        class Listener(ConsumerRebalanceListener):  # called from poll(), in this thread
            def on_partitions_revoked(self, revoked):
                session.revoked(ours(revoked))

            def on_partitions_assigned(self, assigned):
                session.assigned(ours(assigned))

            def on_partitions_lost(self, lost):
                session.revoked(ours(lost), kind="lost")

        consumer = self.consumer(spec["bootstrap"], **_member_config(spec))
        consumer.subscribe([topic], listener=Listener())
        # Works around a kafka-python 3.0.12 bug. A leader rejoins when the topic metadata it sees differs from the
        # metadata it assigned with, and if a poll() times out while that rejoin is in flight, the finished join is
        # never applied: no assignment, heartbeats stay off until the session expires. A member that joins before
        # its first metadata response does exactly that; topics() fetches the metadata (after subscribe(), so that
        # the consumer notes the subscribed topic's partitions) before the first poll() joins.
        consumer.topics()

        def poll():
            for records in consumer.poll(timeout_ms=200).values():
                session.delivered((r.partition, r.offset, r.value) for r in records)

        def commit(offsets):
            consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})

        session.serve(poll, commit, lambda: consumer.close(autocommit=False))

    def group_consume(self, bootstrap, topic, group, count, timeout_s=DEFAULT_TIMEOUT_S):
        from kafka import OffsetAndMetadata, TopicPartition
        consumer = self.consumer(bootstrap, group_id=group, auto_offset_reset="earliest", session_timeout_ms=6000,
                                 heartbeat_interval_ms=1000, fetch_max_wait_ms=200)
        try:
            consumer.subscribe([topic])
            consumer.topics()  # metadata before the first join (see run_member)
            got = _poll_for(consumer, count, timeout_s)
            consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1)
                             for p, o in next_offsets(got).items()})
        finally:
            consumer.close(autocommit=False)
        return got

    def committed(self, bootstrap, group, topic, partitions):
        from kafka import TopicPartition
        consumer = self.consumer(bootstrap, group_id=group)
        try:
            return {p: consumer.committed(TopicPartition(topic, p)) for p in partitions}
        finally:
            consumer.close(autocommit=False)

    def admin(self, bootstrap: str, **overrides):
        from kafka import KafkaAdminClient
        config = {"bootstrap_servers": bootstrap, "client_id": f"compat-ka-{uuid.uuid4().hex[:6]}",
                  "request_timeout_ms": 15000}
        return KafkaAdminClient(**(config | (self.security or {}) | overrides))

    def create_topics(self, bootstrap: str, topics: dict[str, int]) -> None:
        """CreateTopics: each named topic with its partition count."""
        admin = self.admin(bootstrap)
        try:
            admin.create_topics({name: {"num_partitions": count} for name, count in topics.items()})
        finally:
            admin.close()

    def list_groups(self, bootstrap, states=()):
        admin = self.admin(bootstrap)
        try:
            found = admin.list_groups(states_filter=list(states) or None)
        finally:
            admin.close()
        return {g["group_id"]: GroupListing(g["group_id"], g.get("group_state") or "", g["protocol_type"])
                for g in found}

    def describe_groups(self, bootstrap, group_ids):
        admin = self.admin(bootstrap)
        try:
            found = admin.describe_groups(list(group_ids))
        finally:
            admin.close()
        return {group_id: _group_info(group) for group_id, group in found.items()}

    def group_offsets(self, bootstrap, group_id, timeout_s=15.0):
        # kafka-python's admin raises retriable errors (COORDINATOR_LOAD_IN_PROGRESS just after a broker start)
        # instead of retrying them as the Java admin client does; retried here until the deadline.
        from kafka.errors import KafkaError
        deadline = time.monotonic() + timeout_s
        admin = self.admin(bootstrap)
        try:
            while True:
                try:
                    found = admin.list_group_offsets({group_id: None})[group_id]
                    break
                except KafkaError as exc:
                    if not exc.retriable or time.monotonic() > deadline:
                        raise
        finally:
            admin.close()
        return {(tp.topic, tp.partition): meta.offset for tp, meta in found.items()}


    # --- transactions ----------------------------------------------------------------------------------------------

    def run_transactional(self, bootstrap, topic, steps, *, timeout_s=DEFAULT_TIMEOUT_S):
        producers: dict = {}
        abandoned: set[str] = set()
        outcomes = []
        try:
            for step in steps:
                try:
                    self._txn_step(bootstrap, topic, producers, step, timeout_s)
                    outcomes.append(OK)
                except Exception as exc:  # noqa: BLE001 - the outcome names it
                    outcomes.append(error_outcome(kafka_error_name(exc)))
                if step.op == "abandon":
                    abandoned.add(step.producer)
        finally:
            for name, producer in producers.items():
                if name in abandoned:  # kept referenced, unclosed: a close would abort the transaction
                    self.__dict__.setdefault("abandoned", []).append(producer)
                else:
                    producer.close(timeout=5)
        return outcomes

    def _txn_step(self, bootstrap, topic, producers, step, timeout_s) -> None:
        if step.op == "init":
            producers[step.producer] = self.producer(
                bootstrap, transactional_id=step.transactional_id, transaction_timeout_ms=step.timeout_ms,
                retry_backoff_ms=50, reconnect_backoff_ms=50, reconnect_backoff_max_ms=500)
            producers[step.producer].init_transactions()
            return
        producer = producers[step.producer]
        if step.op == "begin":
            producer.begin_transaction()
        elif step.op == "send":
            futures = [producer.send(topic, key=r.key, value=r.value, partition=r.partition) for r in step.records]
            producer.flush(timeout=timeout_s)
            for future in futures:
                future.get(timeout=timeout_s)
        elif step.op == "commit":
            producer.commit_transaction()
        elif step.op == "abort":
            producer.abort_transaction()
        elif step.op != "abandon":
            raise ValueError(f"unknown step {step.op!r}")

    def read_to_end(self, bootstrap, topic, until, *, read_committed, timeout_s=DEFAULT_TIMEOUT_S):
        from kafka import TopicPartition
        consumer = self.consumer(bootstrap, fetch_max_wait_ms=100, retry_backoff_ms=50,
                                 isolation_level="read_committed" if read_committed else "read_uncommitted")
        got: list[Consumed] = []
        try:
            tps = {p: TopicPartition(topic, p) for p in until}
            consumer.assign(list(tps.values()))
            consumer.seek_to_beginning(*tps.values())
            deadline = time.monotonic() + timeout_s
            positions = {p: consumer.position(tp) for p, tp in tps.items()}
            while any(positions[p] < until[p] for p in until) and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=200).values():
                    got.extend(_consumed(r) for r in records)
                positions = {p: consumer.position(tp) for p, tp in tps.items()}
        finally:
            consumer.close()
        if any(positions[p] < until[p] for p in until):
            raise ClientError(f"kafka-python consumer: positions {positions}, expected {until} within {timeout_s} s")
        return got, positions


def _write_queued_requests(producer, timeout_s: float) -> None:
    """Waits until the producer's connections have written every request they queued (kafka-python 2.x only).

    kafka-python 2.2.21's KafkaClient.send() registers a connection for writing only when the request's future is
    not done yet; an acks=0 Produce's future is done when queued, so that request stays unwritten until a later
    request on the same connection, and close() drops it. An application that keeps producing loses only its last
    acks=0 request; this registers the connections as send() does for other requests. (3.x rewrote the I/O.)"""
    client = producer._sender._client
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        queued = [c for c in list(client._conns.values()) if c._send_buffer or c._protocol.bytes_to_send]
        if not queued:
            return
        # not under client._lock: the I/O thread holds it while it waits in select(), until wakeup()
        client._sending.update(queued)
        client.wakeup()
        time.sleep(0.01)  # polls the condition above
    raise ClientError(f"kafka-python producer: acks=0 requests still unwritten after {timeout_s} s")


def kafka_error_name(exc: BaseException) -> str:
    """Kafka's name of the error a kafka-python call raised (PRODUCER_FENCED ...), else the exception's class."""
    from kafka.errors import BrokerResponseError
    if isinstance(exc, BrokerResponseError):
        return exc.message
    return type(exc).__name__


# kafka-python names its assignors by class; the specs use Kafka's names.
def _assignors(strategy: str | None) -> dict:
    if strategy is None:
        return {}
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    by_name = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
               "cooperative-sticky": CooperativeStickyAssignor}
    return {"partition_assignment_strategy": [by_name[strategy]]}


def _member_config(spec: dict) -> dict:
    config = {"group_id": spec["group"], "client_id": spec["client_id"], "group_instance_id": spec["instance_id"],
              "session_timeout_ms": spec["session_timeout_ms"], "heartbeat_interval_ms": spec["heartbeat_interval_ms"],
              "max_poll_interval_ms": spec["rebalance_timeout_ms"], "auto_offset_reset": "earliest",
              "fetch_max_wait_ms": spec["fetch_wait_ms"]} | _assignors(spec["strategy"])
    if KAFKA_PYTHON_MAJOR < 3:
        if spec["instance_id"] is None:
            del config["group_instance_id"]  # 2.2 refuses the setting: static membership came in 2.3
        # 2.x refuses a request timeout that is not above the session timeout
        config["request_timeout_ms"] = max(40000, spec["session_timeout_ms"] + 5000)
    return config


def _group_info(group: dict) -> GroupInfo:
    if group.get("error"):
        raise ClientError(f"kafka-python describe_groups: {group['group_id']}: {group['error']}")
    members = []
    for member in group["members"]:
        # kafka-python decodes a "consumer" group's assignment, and to_dict() turns it into plain dicts
        assignment = member["member_assignment"] or {"assigned_partitions": []}
        pairs = frozenset((t["topic"], p) for t in assignment["assigned_partitions"] for p in t["partitions"])
        members.append(MemberInfo(member["member_id"], member["client_id"], member["client_host"],
                                  member.get("group_instance_id"), pairs))
    return GroupInfo(group["group_id"], group["group_state"], group["protocol_type"], group["protocol_data"],
                     tuple(members))


def _poll_for(consumer, count: int, timeout_s: float) -> list[Consumed]:
    """Exactly `count` records from an assigned or subscribed consumer; ClientError when fewer come in time."""
    got: list[Consumed] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        batches = consumer.poll(timeout_ms=int(max(0.0, deadline - time.monotonic()) * 1000) + 1,
                                max_records=count - len(got))
        for records in batches.values():
            got.extend(_consumed(r) for r in records)
    if len(got) < count:
        raise ClientError(f"kafka-python consumer: {len(got)} of {count} records within {timeout_s} s")
    return got


def _seek(consumer, tps: Sequence, start) -> None:
    if start == EARLIEST:
        consumer.seek_to_beginning(*tps)
    elif start == LATEST:
        consumer.seek_to_end(*tps)
    elif isinstance(start, AtOffset):
        for tp in tps:
            consumer.seek(tp, start.offset)
    elif isinstance(start, AtTimestamp):
        found = consumer.offsets_for_times({tp: start.timestamp for tp in tps}, **LOOKUP_TIMEOUT)
        for tp in tps:
            if found[tp] is None:
                consumer.seek_to_end(tp)
            else:
                consumer.seek(tp, found[tp].offset)
    else:
        raise ValueError(f"unknown start {start!r}")


def _consumed(record) -> Consumed:
    return Consumed(record.partition, record.offset, record.key, record.value,
                    tuple((name, value) for name, value in record.headers), record.timestamp)
