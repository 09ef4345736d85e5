"""confluent-kafka (librdkafka, bundled in the wheel).

librdkafka insists on a group.id for every consumer, even one that only uses assign(); with it the client looks up
the group coordinator (FindCoordinator) in the background although no group is joined and nothing is committed.
"""
from __future__ import annotations

import os
import time
import uuid

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
    MemberInfo,
    error_outcome,
    next_offsets,
)


class ConfluentClient(ClientAdapter):
    name = "confluent-kafka"
    sends_null_header = True

    def _common(self, bootstrap: str, role: str) -> dict:
        """Settings of every client of this adapter, with its security settings (see ClientAdapter.secured)."""
        return {"bootstrap.servers": bootstrap, "client.id": f"compat-ck-{role}-{uuid.uuid4().hex[:6]}",
                "broker.address.family": "v4", "message.max.bytes": MAX_MESSAGE_BYTES, **(self.security or {})}

    def produce(self, bootstrap, topic, records, *, acks=-1, compression=None, timeout_s=DEFAULT_TIMEOUT_S):
        from confluent_kafka import Producer
        config = self._common(bootstrap, "p") | {
            "acks": str(acks), "enable.idempotence": False, "compression.type": compression or "none",
            "linger.ms": 5, "partitioner": "murmur2_random",  # the Java client's choice, as the other clients use
            "message.timeout.ms": int(timeout_s * 1000)}
        producer = Producer(config)
        reports: list = [None] * len(records)

        def delivered(i):
            return lambda err, msg: reports.__setitem__(i, (err, msg.partition(), msg.offset()))

        for i, r in enumerate(records):
            kwargs = {"partition": r.partition} if r.partition is not None else {}
            producer.produce(topic, value=r.value, key=r.key, headers=list(r.headers) or None,
                             timestamp=r.timestamp or 0, on_delivery=delivered(i), **kwargs)
        left = producer.flush(timeout_s)
        if left:
            raise ClientError(f"confluent-kafka producer: {left} records not delivered within {timeout_s} s")
        errors = [report[0] for report in reports if report[0] is not None]
        if errors:
            raise ClientError(f"confluent-kafka producer: {len(errors)} delivery errors, first {errors[0]}")
        return None if acks == 0 else [(partition, offset) for _, partition, offset in reports]

    def consumer(self, bootstrap: str, **overrides):
        from confluent_kafka import Consumer
        config = self._common(bootstrap, "c") | {
            "group.id": f"compat-{uuid.uuid4().hex[:8]}",  # required by librdkafka; no group is joined
            "enable.auto.commit": False, "enable.auto.offset.store": False, "auto.offset.reset": "earliest",
            "fetch.max.bytes": 2 * MAX_MESSAGE_BYTES, "receive.message.max.bytes": 3 * MAX_MESSAGE_BYTES}
        config.update(overrides)
        return Consumer(config)

    def consume(self, bootstrap, topic, count, *, partitions=(0,), start=EARLIEST, timeout_s=DEFAULT_TIMEOUT_S,
                fetch_wait_ms=None):
        from confluent_kafka import KafkaError
        consumer = self.consumer(bootstrap, **({"fetch.wait.max.ms": fetch_wait_ms} if fetch_wait_ms else {}))
        got: list[Consumed] = []
        try:
            consumer.assign(_positions(consumer, topic, partitions, start))
            deadline = time.monotonic() + timeout_s
            while len(got) < count and time.monotonic() < deadline:
                msg = consumer.poll(min(1.0, max(0.0, deadline - time.monotonic())))
                if msg is None:
                    continue
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise ClientError(f"confluent-kafka consumer: {msg.error()}")
                got.append(_consumed(msg))
        finally:
            consumer.close()
        if len(got) < count:
            raise ClientError(f"confluent-kafka consumer: {len(got)} of {count} records within {timeout_s} s")
        return got

    def list_offsets(self, bootstrap, topic, partition, timestamp):
        from confluent_kafka import TopicPartition
        consumer = self.consumer(bootstrap)
        try:
            earliest, latest = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=15,
                                                              cached=False)
            found = consumer.offsets_for_times([TopicPartition(topic, partition, timestamp)], timeout=15)[0]
        finally:
            consumer.close()
        return earliest, latest, None if found.offset < 0 else found.offset

    def metadata(self, bootstrap, topics=None, *, auto_create=False):
        # librdkafka lets the broker create a topic only when allow.auto.create.topics says so (by default: from
        # producer handles only); its metadata call names one topic at a time.
        admin = self.admin(bootstrap, **{"allow.auto.create.topics": auto_create})
        answers = [admin.list_topics(timeout=15)] if topics is None else [admin.list_topics(t, timeout=15)
                                                                          for t in topics]
        brokers = frozenset((b.id, b.host, b.port) for answer in answers for b in answer.brokers.values())
        return ClusterView(brokers, {name: {p.id: p.leader for p in described.partitions.values()}
                                     for answer in answers for name, described in answer.topics.items()
                                     if described.error is None})

    def list_topics(self, bootstrap):
        return set(self.admin(bootstrap).list_topics(timeout=15).topics)

    def connect_failure(self, bootstrap, *, timeout_s=20.0):
        # librdkafka retries by itself and tells the application through the error callback (served by poll()).
        from confluent_kafka import Producer
        errors: list = []
        producer = Producer(self._common(bootstrap, "p") | {"error_cb": errors.append, "reconnect.backoff.ms": 50,
                                                            "reconnect.backoff.max.ms": 500})
        deadline = time.monotonic() + timeout_s
        while not errors and time.monotonic() < deadline:
            producer.poll(0.2)
        producer.poll(0)
        if not errors:
            metadata = producer.list_topics(timeout=5)
            raise ClientError(f"confluent-kafka: no error within {timeout_s} s; brokers {metadata.brokers}")
        return ConnectFailure(errors[0].name(), "\n".join(error.str() for error in errors))

    # --- consumer groups -------------------------------------------------------------------------------------------

    def group_consume(self, bootstrap, topic, group, count, timeout_s=DEFAULT_TIMEOUT_S):
        from confluent_kafka import TopicPartition
        consumer = self.consumer(bootstrap, **{"group.id": group, "session.timeout.ms": 6000,
                                               "heartbeat.interval.ms": 1000, "fetch.wait.max.ms": 200})
        got: list[Consumed] = []
        try:
            consumer.subscribe([topic])
            deadline = time.monotonic() + timeout_s
            while len(got) < count and time.monotonic() < deadline:
                for msg in consumer.consume(num_messages=count - len(got),
                                            timeout=min(1.0, max(0.0, deadline - time.monotonic()))):
                    if msg.error():
                        raise ClientError(f"confluent-kafka group consumer: {msg.error()}")
                    got.append(_consumed(msg))
            if len(got) < count:
                raise ClientError(f"confluent-kafka group consumer: {len(got)} of {count} records within {timeout_s} s")
            consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in next_offsets(got).items()],
                            asynchronous=False)
        finally:
            consumer.close()
        return got

    def committed(self, bootstrap, group, topic, partitions):
        from confluent_kafka import TopicPartition
        consumer = self.consumer(bootstrap, **{"group.id": group})
        try:
            found = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=15)
        finally:
            consumer.close()
        return {tp.partition: tp.offset if tp.offset >= 0 else None for tp in found}  # none: OFFSET_INVALID

    def run_member(self, spec, session):
        from confluent_kafka import TopicPartition
        topic = spec["topic"]
        consumer = self.consumer(spec["bootstrap"], **_member_config(spec))

        def ours(tps):
            return [tp.partition for tp in tps if tp.topic == topic]

        # The callbacks (run inside consume()) apply the change themselves, cooperatively when the group is.
        def on_assign(consumer, partitions):
            if session.cooperative:
                consumer.incremental_assign(partitions)
            else:
                consumer.assign(partitions)
            session.assigned(ours(partitions))

        def on_revoke(consumer, partitions, kind="revoked"):
            if session.cooperative:
                consumer.incremental_unassign(partitions)
            else:
                consumer.unassign()
            session.revoked(ours(partitions), kind=kind)

        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke,
                           on_lost=lambda c, partitions: on_revoke(c, partitions, kind="lost"))

        def poll():
            messages = consumer.consume(num_messages=500, timeout=0.2)
            failed = [m.error() for m in messages if m.error()]
            if failed:
                raise ClientError(f"confluent-kafka member: {failed[0]}")
            session.delivered((m.partition(), m.offset(), m.value()) for m in messages)

        def commit(offsets):
            done = consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()],
                                   asynchronous=False)
            failed = [tp for tp in done or () if tp.error]
            if failed:
                raise ClientError(f"confluent-kafka commit: {failed[0].error} for partition {failed[0].partition}")

        session.serve(poll, commit, consumer.close)

    def admin(self, bootstrap: str, **overrides):
        from confluent_kafka.admin import AdminClient
        return AdminClient(self._common(bootstrap, "a") | overrides)

    def list_groups(self, bootstrap, states=()):
        from confluent_kafka import ConsumerGroupState
        by_name = {name: ConsumerGroupState[key] for key, name in _STATE_NAMES.items()}
        kwargs = {"states": {by_name[s] for s in states}} if states else {}
        admin = self.admin(bootstrap)  # referenced until the result is in: a collected client fails its requests
        result = admin.list_consumer_groups(request_timeout=15, **kwargs).result()
        if result.errors:
            raise ClientError(f"confluent-kafka list_consumer_groups: {result.errors}")
        # librdkafka reports no protocol type; a "simple" group is Kafka's empty protocol type
        return {g.group_id: GroupListing(g.group_id, _STATE_NAMES.get(g.state.name, g.state.name),
                                         "" if g.is_simple_consumer_group else "consumer")
                for g in result.valid}

    def describe_groups(self, bootstrap, group_ids):
        admin = self.admin(bootstrap)
        futures = admin.describe_consumer_groups(list(group_ids), request_timeout=15)
        return {group_id: _group_info(future.result()) for group_id, future in futures.items()}

    def group_offsets(self, bootstrap, group_id):
        from confluent_kafka import ConsumerGroupTopicPartitions
        admin = self.admin(bootstrap)
        futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id)], request_timeout=15)
        found = futures[group_id].result()
        failed = [tp for tp in found.topic_partitions if tp.error]
        if failed:
            raise ClientError(f"confluent-kafka list_consumer_group_offsets: {failed[0].error}")
        return {(tp.topic, tp.partition): tp.offset for tp in found.topic_partitions}


    # --- transactions ----------------------------------------------------------------------------------------------

    def run_transactional(self, bootstrap, topic, steps, *, timeout_s=DEFAULT_TIMEOUT_S):
        producers: dict = {}
        outcomes = []
        for step in steps:
            try:
                self._txn_step(bootstrap, topic, producers, step, timeout_s)
                outcomes.append(OK)
            except Exception as exc:  # noqa: BLE001 - the outcome names it
                outcomes.append(error_outcome(confluent_error_name(exc)))
            if step.op == "abandon":  # kept referenced: destroying the handle could end the transaction
                self.__dict__.setdefault("abandoned", []).append(producers[step.producer])
        return outcomes

    def _txn_step(self, bootstrap, topic, producers, step, timeout_s) -> None:
        from confluent_kafka import KafkaException, Producer
        if step.op == "init":
            producers[step.producer] = Producer(self._common(bootstrap, "t") | {
                "transactional.id": step.transactional_id, "transaction.timeout.ms": step.timeout_ms,
                "linger.ms": 5, "retry.backoff.ms": 50, "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 500})
            producers[step.producer].init_transactions(timeout_s)
            return
        producer = producers[step.producer]
        if step.op == "begin":
            producer.begin_transaction()
        elif step.op == "send":
            failures = []
            for r in step.records:
                producer.produce(topic, key=r.key, value=r.value, partition=r.partition,
                                 on_delivery=lambda err, _msg: err is not None and failures.append(err))
            if producer.flush(timeout_s):
                raise ClientError(f"confluent-kafka: records not delivered within {timeout_s} s")
            if failures:
                raise KafkaException(failures[0])
        elif step.op == "commit":
            producer.commit_transaction(timeout_s)
        elif step.op == "abort":
            producer.abort_transaction(timeout_s)
        elif step.op != "abandon":
            raise ValueError(f"unknown step {step.op!r}")

    def read_to_end(self, bootstrap, topic, until, *, read_committed, timeout_s=DEFAULT_TIMEOUT_S):
        from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition
        consumer = self.consumer(bootstrap, **{
            "isolation.level": "read_committed" if read_committed else "read_uncommitted",
            "fetch.wait.max.ms": 100, "enable.partition.eof": False})
        got: list[Consumed] = []
        try:
            tps = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in until]
            consumer.assign(tps)
            deadline = time.monotonic() + timeout_s
            positions = {p: -1 for p in until}
            while any(positions[p] < until[p] for p in until) and time.monotonic() < deadline:
                for msg in consumer.consume(num_messages=1000, timeout=0.2):
                    if msg.error():
                        if msg.error().code() == KafkaError._PARTITION_EOF:
                            continue
                        raise ClientError(f"confluent-kafka consumer: {msg.error()}")
                    got.append(_consumed(msg))
                positions = {tp.partition: tp.offset for tp in consumer.position([TopicPartition(topic, p)
                                                                                  for p in until])}
        finally:
            consumer.close()
        if any(positions[p] < until[p] for p in until):
            raise ClientError(f"confluent-kafka consumer: positions {positions}, expected {until} within {timeout_s} s")
        return got, positions


def _member_config(spec: dict) -> dict:
    """A group member's settings. With group.protocol=consumer (KIP-848) librdkafka refuses session.timeout.ms,
    heartbeat.interval.ms and partition.assignment.strategy: the broker decides them, and group.remote.assignor names
    the server-side assignor (unset: the broker's default)."""
    config = {"group.id": spec["group"], "client.id": spec["client_id"],
              "max.poll.interval.ms": spec["rebalance_timeout_ms"], "fetch.wait.max.ms": spec["fetch_wait_ms"]}
    protocol = spec.get("group_protocol", "classic")
    if protocol == "consumer":
        config["group.protocol"] = "consumer"
        if spec.get("remote_assignor") is not None:
            config["group.remote.assignor"] = spec["remote_assignor"]
    else:
        config |= {"group.protocol": protocol, "session.timeout.ms": spec["session_timeout_ms"],
                   "heartbeat.interval.ms": spec["heartbeat_interval_ms"]}
        if spec["strategy"] is not None:
            config["partition.assignment.strategy"] = spec["strategy"]
    if spec["instance_id"] is not None:
        config["group.instance.id"] = spec["instance_id"]
    if os.environ.get("COMPAT_LIBRDKAFKA_DEBUG"):  # e.g. "cgrp,protocol": librdkafka's log in the member's log file
        config["debug"] = os.environ["COMPAT_LIBRDKAFKA_DEBUG"]
    return config


def confluent_error_name(exc: BaseException) -> str:
    """librdkafka's name of the error (PRODUCER_FENCED, _FENCED ...), else the exception's class."""
    from confluent_kafka import KafkaException
    if isinstance(exc, KafkaException) and exc.args and hasattr(exc.args[0], "name"):
        return exc.args[0].name()
    return type(exc).__name__


# confluent-kafka's ConsumerGroupState members and Kafka's names of the same states
_STATE_NAMES = {"EMPTY": "Empty", "PREPARING_REBALANCING": "PreparingRebalance",
                "COMPLETING_REBALANCING": "CompletingRebalance", "STABLE": "Stable", "DEAD": "Dead"}


def _group_info(group) -> GroupInfo:
    members = tuple(MemberInfo(m.member_id, m.client_id, m.host, m.group_instance_id,
                               frozenset((tp.topic, tp.partition) for tp in m.assignment.topic_partitions))
                    for m in group.members)
    return GroupInfo(group.group_id, _STATE_NAMES.get(group.state.name, group.state.name),
                     "" if group.is_simple_consumer_group else "consumer", group.partition_assignor, members)


def _consumed(msg) -> Consumed:
    return Consumed(msg.partition(), msg.offset(), msg.key(), msg.value(), tuple(msg.headers() or ()),
                    msg.timestamp()[1])


def _positions(consumer, topic, partitions, start) -> list:
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition
    if start == EARLIEST:
        return [TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions]
    if start == LATEST:
        return [TopicPartition(topic, p, OFFSET_END) for p in partitions]
    if isinstance(start, AtOffset):
        return [TopicPartition(topic, p, start.offset) for p in partitions]
    if isinstance(start, AtTimestamp):
        found = consumer.offsets_for_times([TopicPartition(topic, p, start.timestamp) for p in partitions],
                                           timeout=15)
        return [TopicPartition(topic, f.partition, f.offset if f.offset >= 0 else OFFSET_END) for f in found]
    raise ValueError(f"unknown start {start!r}")
