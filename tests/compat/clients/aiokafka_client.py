"""aiokafka (asyncio). Each call runs its own event loop, so calls from several threads stay independent.

The "aiokafka-0.10" row runs this adapter with aiokafka 0.10 in a venv of its own (older_python.py); the branches on
_version() cover what it does differently."""
from __future__ import annotations

import asyncio
import importlib.metadata
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
    LogCapture,
    error_outcome,
    next_offsets,
)


def _version() -> tuple[int, ...]:
    """aiokafka's installed version (0 when absent); the "aiokafka-0.10" row runs this adapter with 0.10."""
    try:
        return tuple(int(part) for part in importlib.metadata.version("aiokafka").split(".")[:2])
    except importlib.metadata.PackageNotFoundError:
        return (0,)


class AiokafkaClient(ClientAdapter):
    name = "aiokafka"
    sends_null_header = True
    # aiokafka 0.13+'s Metadata requests (v5 at most) always set allow_auto_topic_creation: naming a topic creates
    # it. Up to 0.12 its admin client left that field unset, which encodes as false.
    can_refuse_auto_creation = _version() < (0, 13)

    def _connect(self, bootstrap: str) -> dict:
        """Where and how every AIOKafka* client of this adapter connects: the bootstrap servers and the adapter's
        security settings (see ClientAdapter.secured)."""
        return {"bootstrap_servers": bootstrap, **(self.security or {})}

    def produce(self, bootstrap, topic, records, *, acks=-1, compression=None, timeout_s=DEFAULT_TIMEOUT_S):
        try:
            return asyncio.run(asyncio.wait_for(self._produce(bootstrap, topic, records, acks, compression),
                                                timeout_s))
        except Exception as exc:
            raise ClientError(f"aiokafka producer: {exc!r}") from exc

    async def _produce(self, bootstrap, topic, records, acks, compression):
        from aiokafka import AIOKafkaProducer
        producer = AIOKafkaProducer(**self._connect(bootstrap), acks=acks, compression_type=compression,
                                    enable_idempotence=False, max_request_size=MAX_MESSAGE_BYTES, linger_ms=5,
                                    client_id=f"compat-aio-{uuid.uuid4().hex[:6]}")
        await producer.start()
        try:
            futures = [await producer.send(topic, key=r.key, value=r.value, partition=r.partition,
                                           timestamp_ms=r.timestamp, headers=list(r.headers) or None)
                       for r in records]
            metadata = await asyncio.gather(*futures)
        finally:
            await producer.stop()
        return None if acks == 0 else [(m.partition, m.offset) for m in metadata]

    def consume(self, bootstrap, topic, count, *, partitions=(0,), start=EARLIEST, timeout_s=DEFAULT_TIMEOUT_S,
                fetch_wait_ms=None):
        got: list[Consumed] = []
        try:
            asyncio.run(self._consume(bootstrap, topic, count, partitions, start, timeout_s, fetch_wait_ms, got))
        except Exception as exc:
            raise ClientError(f"aiokafka consumer: {exc!r} after {len(got)} of {count} records") from exc
        if len(got) < count:
            raise ClientError(f"aiokafka consumer: {len(got)} of {count} records within {timeout_s} s")
        return got

    async def _consume(self, bootstrap, topic, count, partitions, start, timeout_s, fetch_wait_ms, got):
        from aiokafka import AIOKafkaConsumer, TopicPartition
        consumer = AIOKafkaConsumer(**self._connect(bootstrap), group_id=None, enable_auto_commit=False,
                                    fetch_max_wait_ms=fetch_wait_ms or 500, request_timeout_ms=40000,
                                    client_id=f"compat-aioc-{uuid.uuid4().hex[:6]}")
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in partitions]
            consumer.assign(tps)
            await _seek(consumer, tps, start)
            await _read(consumer, count, timeout_s, got)
        finally:
            await consumer.stop()

    def list_offsets(self, bootstrap, topic, partition, timestamp):
        return asyncio.run(self._list_offsets(bootstrap, topic, partition, timestamp))

    async def _list_offsets(self, bootstrap, topic, partition, timestamp):
        from aiokafka import AIOKafkaConsumer, TopicPartition
        consumer = AIOKafkaConsumer(**self._connect(bootstrap), group_id=None, request_timeout_ms=15000)
        await consumer.start()
        try:
            tp = TopicPartition(topic, partition)
            earliest = (await consumer.beginning_offsets([tp]))[tp]
            latest = (await consumer.end_offsets([tp]))[tp]
            found = (await consumer.offsets_for_times({tp: timestamp}))[tp]
        finally:
            await consumer.stop()
        return earliest, latest, None if found is None else found.offset

    def metadata(self, bootstrap, topics=None, *, auto_create=False):
        return asyncio.run(self._metadata(bootstrap, topics, auto_create))

    async def _metadata(self, bootstrap, topics, auto_create):
        from aiokafka import AIOKafkaProducer
        from aiokafka.admin import AIOKafkaAdminClient
        if auto_create and topics:
            # Every request of aiokafka allows creation, but Kafka answers the first LEADER_NOT_AVAILABLE while it
            # creates the topics; a producer waits until they have partitions, as an application would.
            producer = AIOKafkaProducer(**self._connect(bootstrap), request_timeout_ms=15000)
            await producer.start()
            try:
                for topic in topics:
                    await producer.partitions_for(topic)
            finally:
                await producer.stop()
        admin = AIOKafkaAdminClient(**self._connect(bootstrap), request_timeout_ms=15000,
                                    client_id=f"compat-aioa-{uuid.uuid4().hex[:6]}")
        await admin.start()
        try:
            described = await admin.describe_topics(None if topics is None else list(topics))
            cluster = await admin.describe_cluster()
        finally:
            await admin.close()
        return ClusterView(frozenset((b["node_id"], b["host"], b["port"]) for b in cluster["brokers"]),
                           {t["topic"]: {p["partition"]: p["leader"] for p in t["partitions"]}
                            for t in described if t["error_code"] == 0})

    def list_topics(self, bootstrap):
        return asyncio.run(self._list_topics(bootstrap))

    async def _list_topics(self, bootstrap):
        from aiokafka import AIOKafkaConsumer
        consumer = AIOKafkaConsumer(**self._connect(bootstrap), group_id=None, request_timeout_ms=15000)
        await consumer.start()
        try:
            return set(await consumer.topics())
        finally:
            await consumer.stop()

    def connect_failure(self, bootstrap, *, timeout_s=20.0):
        # start() tries each bootstrap address once; what failed is only logged.
        from aiokafka.errors import KafkaError
        with LogCapture("aiokafka") as log:
            try:
                asyncio.run(asyncio.wait_for(self._topics_or_failure(bootstrap), timeout_s))
            except KafkaError as exc:
                return ConnectFailure(type(exc).__name__, "\n".join([str(exc), *log.lines]))
        raise ClientError("aiokafka consumer: connected, expected a failure")

    async def _topics_or_failure(self, bootstrap):
        """_list_topics, except that the consumer's stop() cannot hide the failure: aiokafka 0.14's stop() after a
        failed topics() raises CancelledError from its group coordinator."""
        from aiokafka import AIOKafkaConsumer
        consumer = AIOKafkaConsumer(**self._connect(bootstrap), group_id=None, request_timeout_ms=15000)
        await consumer.start()
        try:
            return set(await consumer.topics())
        finally:
            try:
                await consumer.stop()
            except asyncio.CancelledError:
                pass

    def group_consume(self, bootstrap, topic, group, count, timeout_s=DEFAULT_TIMEOUT_S):
        got: list[Consumed] = []
        try:
            asyncio.run(self._group_consume(bootstrap, topic, group, count, timeout_s, got))
        except Exception as exc:
            raise ClientError(f"aiokafka group consumer: {exc!r} after {len(got)} of {count} records") from exc
        return got

    async def _group_consume(self, bootstrap, topic, group, count, timeout_s, got):
        from aiokafka import AIOKafkaConsumer, TopicPartition
        consumer = AIOKafkaConsumer(topic, **self._connect(bootstrap), group_id=group, enable_auto_commit=False,
                                    auto_offset_reset="earliest", session_timeout_ms=6000,
                                    heartbeat_interval_ms=1000, fetch_max_wait_ms=200,
                                    client_id=f"compat-aiog-{uuid.uuid4().hex[:6]}")
        await consumer.start()
        try:
            await _read(consumer, count, timeout_s, got)
            if len(got) < count:
                raise ClientError(f"{len(got)} of {count} records within {timeout_s} s")
            await consumer.commit({TopicPartition(topic, p): o for p, o in next_offsets(got).items()})
        finally:
            await consumer.stop()

    def committed(self, bootstrap, group, topic, partitions):
        return asyncio.run(self._committed(bootstrap, group, topic, partitions))

    async def _committed(self, bootstrap, group, topic, partitions):
        from aiokafka import AIOKafkaConsumer, TopicPartition
        consumer = AIOKafkaConsumer(**self._connect(bootstrap), group_id=group, enable_auto_commit=False,
                                    request_timeout_ms=15000)
        await consumer.start()
        try:
            return {p: await consumer.committed(TopicPartition(topic, p)) for p in partitions}
        finally:
            await consumer.stop()

    def produce_idempotent(self, bootstrap, topic, values, *, batch_records, timeout_s):
        try:
            asyncio.run(asyncio.wait_for(self._produce_idempotent(bootstrap, topic, values, batch_records),
                                         timeout_s))
        except Exception as exc:
            raise ClientError(f"aiokafka idempotent producer: {exc!r}") from exc

    async def _produce_idempotent(self, bootstrap, topic, values, batch_records):
        from aiokafka import AIOKafkaProducer
        # aiokafka batches by bytes: a v2 batch header is 61 bytes, and a small record takes about 10 more than
        # its value
        batch_bytes = 61 + batch_records * (10 + max(map(len, values)))
        producer = AIOKafkaProducer(**self._connect(bootstrap), enable_idempotence=True, linger_ms=5,
                                    max_batch_size=batch_bytes, retry_backoff_ms=20, request_timeout_ms=15000,
                                    client_id=f"compat-aioi-{uuid.uuid4().hex[:6]}")
        await producer.start()
        try:
            sent = [await producer.send(topic, value=value, partition=0) for value in values]
            await asyncio.gather(*sent)
        finally:
            await producer.stop()

    def run_member(self, spec, session):
        asyncio.run(self._run_member(spec, session))

    async def _run_member(self, spec, session):
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor
        from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        topic = spec["topic"]
        assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
        strategy = {} if spec["strategy"] is None else {"partition_assignment_strategy": [assignors[spec["strategy"]]]}

        def ours(tps):
            return [tp.partition for tp in tps if tp.topic == topic]

        class Listener(ConsumerRebalanceListener):  # aiokafka is eager: each callback has the whole assignment
            async def on_partitions_revoked(self, revoked):
                session.revoked(ours(revoked))

            async def on_partitions_assigned(self, assigned):
                session.assigned(ours(assigned))

        consumer = AIOKafkaConsumer(
            bootstrap_servers=spec["bootstrap"], group_id=spec["group"], client_id=spec["client_id"],
            group_instance_id=spec["instance_id"], session_timeout_ms=spec["session_timeout_ms"],
            heartbeat_interval_ms=spec["heartbeat_interval_ms"], max_poll_interval_ms=spec["rebalance_timeout_ms"],
            rebalance_timeout_ms=spec["rebalance_timeout_ms"], enable_auto_commit=False,
            auto_offset_reset="earliest", fetch_max_wait_ms=spec["fetch_wait_ms"], **strategy)
        await consumer.start()
        consumer.subscribe([topic], listener=Listener())

        async def poll():
            for records in (await consumer.getmany(timeout_ms=200)).values():
                session.delivered((r.partition, r.offset, r.value) for r in records)

        async def commit(offsets):
            await consumer.commit({TopicPartition(topic, p): o for p, o in offsets.items()})

        await session.serve_async(poll, commit, consumer.stop)


    # --- transactions ----------------------------------------------------------------------------------------------

    def run_transactional(self, bootstrap, topic, steps, *, timeout_s=DEFAULT_TIMEOUT_S):
        return asyncio.run(self._run_transactional(bootstrap, topic, steps, timeout_s))

    async def _run_transactional(self, bootstrap, topic, steps, timeout_s):
        producers: dict = {}
        abandoned: set[str] = set()
        outcomes = []
        try:
            for step in steps:
                try:
                    await asyncio.wait_for(self._txn_step(bootstrap, topic, producers, step), timeout_s)
                    outcomes.append(OK)
                except Exception as exc:  # noqa: BLE001 - the outcome names it
                    outcomes.append(error_outcome(aiokafka_error_name(exc)))
                if step.op == "abandon":
                    abandoned.add(step.producer)
        finally:
            for name, producer in producers.items():
                if name in abandoned:  # left unstopped: stop() would abort the transaction
                    self.__dict__.setdefault("abandoned", []).append(producer)
                else:
                    await producer.stop()
        return outcomes

    async def _txn_step(self, bootstrap, topic, producers, step) -> None:
        from aiokafka import AIOKafkaProducer
        if step.op == "init":
            producer = AIOKafkaProducer(**self._connect(bootstrap), transactional_id=step.transactional_id,
                                        transaction_timeout_ms=step.timeout_ms, enable_idempotence=True,
                                        linger_ms=5, retry_backoff_ms=50, request_timeout_ms=15000,
                                        client_id=f"compat-aiot-{uuid.uuid4().hex[:6]}")
            producers[step.producer] = producer
            await producer.start()  # InitProducerId
            return
        producer = producers[step.producer]
        if step.op == "begin":
            await producer.begin_transaction()
        elif step.op == "send":
            sent = [await producer.send(topic, key=r.key, value=r.value, partition=r.partition)
                    for r in step.records]
            await asyncio.gather(*sent)
        elif step.op == "commit":
            await producer.commit_transaction()
        elif step.op == "abort":
            await producer.abort_transaction()
        elif step.op != "abandon":
            raise ValueError(f"unknown step {step.op!r}")

    def read_to_end(self, bootstrap, topic, until, *, read_committed, timeout_s=DEFAULT_TIMEOUT_S):
        got: list[Consumed] = []
        positions: dict[int, int] = {}
        try:
            asyncio.run(self._read_to_end(bootstrap, topic, until, read_committed, timeout_s, got, positions))
        except Exception as exc:
            raise ClientError(f"aiokafka consumer: {exc!r} after {len(got)} records") from exc
        if any(positions.get(p, -1) < until[p] for p in until):
            raise ClientError(f"aiokafka consumer: positions {positions}, expected {until} within {timeout_s} s")
        return got, positions

    async def _read_to_end(self, bootstrap, topic, until, read_committed, timeout_s, got, positions):
        from aiokafka import AIOKafkaConsumer, TopicPartition
        consumer = AIOKafkaConsumer(**self._connect(bootstrap), group_id=None, enable_auto_commit=False,
                                    fetch_max_wait_ms=100, retry_backoff_ms=50, request_timeout_ms=40000,
                                    isolation_level="read_committed" if read_committed else "read_uncommitted",
                                    client_id=f"compat-aioc-{uuid.uuid4().hex[:6]}")
        await consumer.start()
        try:
            tps = {p: TopicPartition(topic, p) for p in until}
            consumer.assign(list(tps.values()))
            await consumer.seek_to_beginning(*tps.values())
            deadline = time.monotonic() + timeout_s
            while True:
                positions.update({p: await consumer.position(tp) for p, tp in tps.items()})
                if all(positions[p] >= until[p] for p in until) or time.monotonic() > deadline:
                    return
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    got.extend(Consumed(r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp)
                               for r in records)
        finally:
            await consumer.stop()


def aiokafka_error_name(exc: BaseException) -> str:
    """Kafka's name of an aiokafka error (its broker errors carry `message`), else the exception's class."""
    from aiokafka.errors import BrokerResponseError
    if isinstance(exc, BrokerResponseError):
        return exc.message
    return type(exc).__name__


async def _read(consumer, count: int, timeout_s: float, got: list[Consumed]) -> None:
    """Adds records from an assigned or subscribed consumer to `got` until it holds `count` or time is up."""
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        batches = await consumer.getmany(timeout_ms=int(max(0.0, deadline - time.monotonic()) * 1000) + 1,
                                         max_records=count - len(got))
        for records in batches.values():
            got.extend(Consumed(r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp)
                       for r in records)


async def _seek(consumer, tps, start) -> None:
    if start == EARLIEST:
        await consumer.seek_to_beginning(*tps)
    elif start == LATEST:
        await consumer.seek_to_end(*tps)
    elif isinstance(start, AtOffset):
        for tp in tps:
            consumer.seek(tp, start.offset)
    elif isinstance(start, AtTimestamp):
        found = await consumer.offsets_for_times({tp: start.timestamp for tp in tps})
        for tp in tps:
            if found[tp] is None:
                await consumer.seek_to_end(tp)
            else:
                consumer.seek(tp, found[tp].offset)
    else:
        raise ValueError(f"unknown start {start!r}")
