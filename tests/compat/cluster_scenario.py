"""The failover scenario of issue 16, written once and run with each client: a three-node cluster, a topic of three
partitions with replication factor 3 and min.insync.replicas=2, an idempotent producer (acks=all) writing numbered
records while a consumer group reads them, and meanwhile:

1. the leader of every partition moves to another in-sync replica;
2. a node (not the group's coordinator) stops, 3. starts again and catches up (back in every ISR);
4. every leader moves again;
5. the group's coordinator node (the leader of the group's `__consumer_offsets` partition) stops.

Each fault waits until the group has read a share of the records, so it lands while records are in flight: the
producer keeps at most WINDOW records ahead of what the group has read. `check()` then asserts Kafka's promises:
every acknowledged record was read by the group, none twice, in order within each partition; the log holds each
record once at the offset its producer was told; the group committed its final offsets through the new coordinator,
which took the group over as it was (the consumer was assigned its partitions once: no rejoin, as with Kafka, whose
new coordinator loads the group's members from `__consumer_offsets`).

The record number is the record's key and value (`%06d`), so that duplicates and order are judged by number.
Clients: `PRODUCERS` and `CONSUMERS` by adapter name (kafka-python, aiokafka, confluent-kafka, kcat). Every client's
metadata refresh is set low (METADATA_MAX_AGE_MS) and its session long (SESSION_TIMEOUT_MS), so that a stopped
coordinator is found again before the member's session could run out.
"""
from __future__ import annotations

import asyncio
import collections
import dataclasses
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable

from compatbroker.coordinator.offsets import partition_for_group

from .clients.kcat_client import OUTPUT_FORMAT, PARTITION_ITEM, REBALANCE_LINE, KcatClient, read_record

PARTITIONS = 3
REPLICATION_FACTOR = 3
COUNT = 5000
WINDOW = 100  # records the producer may be ahead of the group
TOPIC_CONFIG = {"min.insync.replicas": "2"}
CLUSTER_SETTINGS = {"default.replication.factor": str(REPLICATION_FACTOR), "num.partitions": str(PARTITIONS),
                    "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "50"}
OFFSETS_TOPIC = "__consumer_offsets"
GROUP_APIS = ("JoinGroup", "SyncGroup", "Heartbeat", "OffsetFetch", "OffsetCommit")  # sent to the coordinator
METADATA_MAX_AGE_MS = 1500
SESSION_TIMEOUT_MS = 30_000
DELIVERY_TIMEOUT_MS = 120_000
WAIT_S = 120.0  # a bound on each wait, not a pace: each ends as soon as its condition holds
RUN_TIMEOUT_S = 300.0
CRASH = "crashed:"  # how Run.problems marks what a client thread raised


def number(value: bytes) -> int:
    return int(value)


def encoded(n: int) -> bytes:
    return b"%06d" % n


class Run:
    """What the producer, the consumer and the test share: acknowledgements, failures and deliveries by record
    number, and the gate that keeps the producer at most WINDOW records ahead of the group."""

    def __init__(self, count: int = COUNT, window: int = WINDOW):
        self.count = count
        self.window = window
        self.changed = threading.Condition()
        self.acked: dict[int, tuple[int, int] | None] = {}  # number -> (partition, offset), None when unreported
        self.failed: dict[int, str] = {}
        self.delivered: list[tuple[int, int, int]] = []  # (partition, offset, number) in delivery order
        self.seen: set[int] = set()
        self.problems: list[str] = []  # what a client thread reported, beyond records
        self.assignments: list[list[int]] = []  # each assignment the consumer's rebalance callback reported
        self.sending = 0  # the number of the record the producer sends next
        self.stop = threading.Event()  # the consumer closes when set
        self.producer_done = threading.Event()

    # --- producer side --------------------------------------------------------------------------------------------

    def may_send(self, n: int) -> bool:
        with self.changed:
            return n - len(self.seen) - len(self.failed) < self.window or self.stop.is_set()

    def wait_to_send(self, n: int, serve: Callable[[], object] | None = None) -> None:
        """Blocks until record `n` may be sent; `serve` runs between checks (a client's poll for callbacks)."""
        while not self.may_send(n):
            if serve is not None:
                serve()
            else:
                with self.changed:
                    self.changed.wait(0.5)
        self.sending = n

    def ack(self, n: int, partition: int | None = None, offset: int | None = None) -> None:
        with self.changed:
            self.acked[n] = None if partition is None else (partition, offset)
            self.changed.notify_all()

    def fail(self, n: int, error: str) -> None:
        with self.changed:
            self.failed[n] = error
            self.changed.notify_all()

    # --- consumer side --------------------------------------------------------------------------------------------

    def deliver(self, records) -> None:
        """records: (partition, offset, value) as the application was handed them."""
        with self.changed:
            for partition, offset, value in records:
                n = number(value)
                self.delivered.append((partition, offset, n))
                self.seen.add(n)
            self.changed.notify_all()

    def assigned(self, partitions) -> None:
        """The consumer's rebalance callback handed it `partitions` (a join of the group)."""
        with self.changed:
            self.assignments.append(sorted(partitions))
            self.changed.notify_all()

    @property
    def crashed(self) -> list[str]:
        """What a client thread raised (its run is over)."""
        return [text for text in self.problems if text.startswith(CRASH)]

    def problem(self, text: str) -> None:
        with self.changed:
            self.problems.append(text)
            self.changed.notify_all()

    def wait_until(self, condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout_s
        with self.changed:
            while not condition():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"not within {timeout_s} s: {what}; {self.summary()}")
                self.changed.wait(min(left, 1.0))

    def summary(self) -> str:
        missing = sorted(set(self.acked) - self.seen)
        return (f"{len(self.acked)} acked, {len(self.failed)} failed, {len(self.delivered)} delivered "
                f"({len(self.seen)} distinct), missing {missing[:10]}{'...' if len(missing) > 10 else ''}, "
                f"problems {self.problems[-5:]}, failures {list(self.failed.items())[:3]}")


# --- the cluster under test -----------------------------------------------------------------------------------------

class ClusterUnderTest:
    """The toolkit's EmbeddedBroker(nodes=3) with what these tests ask of it in one place: node faults, leaders and
    ISRs, stored records and the request log."""

    POLL_S = 0.05  # between two looks at the cluster's state while waiting for a condition (bounded by a deadline)

    def __init__(self, embedded):
        self.embedded = embedded

    @property
    def bootstrap_servers(self) -> str:
        return self.embedded.bootstrap_servers

    def create_topic(self, name: str, partitions: int, config: dict | None = None,
                     replication_factor: int = REPLICATION_FACTOR) -> None:
        self.embedded.create_topic(name, partitions, config, replication_factor=replication_factor)

    def partition(self, topic: str, partition: int) -> dict:
        """{"leader", "leader_epoch", "replicas", "isr", ...} as the controller has them now."""
        return self.embedded.partition_state(topic, partition)

    def leader_of(self, topic: str, partition: int) -> int:
        return self.embedded.leader_of(topic, partition)

    def isr(self, topic: str, partition: int) -> list[int]:
        return list(self.partition(topic, partition)["isr"])

    def move_leader(self, topic: str, partition: int, node_id: int) -> None:
        self.embedded.move_leader(topic, partition, node_id)

    def stop_node(self, node_id: int) -> None:
        self.embedded.stop_node(node_id)

    def start_node(self, node_id: int) -> None:
        self.embedded.start_node(node_id)

    def alive_nodes(self) -> list[int]:
        return [node.node_id for node in self.embedded.nodes_status() if node.alive]

    def node_in_rack(self, rack: str) -> int:
        (node,) = [node.node_id for node in self.embedded.nodes_status() if node.rack == rack]
        return node

    def live_bootstrap(self) -> str:
        """The addresses of the nodes alive now (a tool such as kcat -L reports a refused bootstrap as an error)."""
        return ",".join(node.address for node in self.embedded.nodes_status() if node.alive)

    def address_of(self, node_id: int) -> str:
        (address,) = [node.address for node in self.embedded.nodes_status() if node.node_id == node_id]
        return address

    def all_records(self, topic: str, partition: int) -> list:
        found, offset = [], 0
        while True:
            page = self.embedded.records(topic, partition, offset=offset, limit=1000)
            found += page
            if len(page) < 1000:
                return found
            offset = page[-1].offset + 1

    def committed_offsets(self, group: str) -> dict[tuple[str, int], int]:
        return self.embedded.committed_offsets(group)

    def requests(self, since: int = 0, api: str | None = None) -> list:
        return self.embedded.requests(since, api)

    def last_request_seq(self) -> int:
        found = self.embedded.requests()
        return found[-1].seq if found else 0

    def wait_until(self, condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout_s
        stopped = threading.Event()  # never set: its wait() is the pause between two looks
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"not within {timeout_s} s: {what}")
            stopped.wait(self.POLL_S)


# --- the clients ----------------------------------------------------------------------------------------------------

def kafka_python_producer(run: Run, bootstrap: str, topic: str) -> None:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id=f"failover-kp-{uuid.uuid4().hex[:6]}",
                             acks="all", enable_idempotence=True, linger_ms=5, metadata_max_age_ms=METADATA_MAX_AGE_MS,
                             request_timeout_ms=10_000, delivery_timeout_ms=DELIVERY_TIMEOUT_MS, retry_backoff_ms=100,
                             reconnect_backoff_max_ms=1000, max_block_ms=60_000)
    try:
        for n in range(run.count):
            run.wait_to_send(n)
            future = producer.send(topic, key=encoded(n), value=encoded(n), partition=n % PARTITIONS)
            future.add_callback(lambda meta, n=n: run.ack(n, meta.partition, meta.offset))
            future.add_errback(lambda exc, n=n: run.fail(n, repr(exc)))
        producer.flush(timeout=DELIVERY_TIMEOUT_MS / 1000)
    finally:
        producer.close(timeout=10)


def kafka_python_consumer(run: Run, bootstrap: str, topic: str, group: str) -> None:
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                             client_id=f"failover-kc-{uuid.uuid4().hex[:6]}", enable_auto_commit=False,
                             auto_offset_reset="earliest", metadata_max_age_ms=METADATA_MAX_AGE_MS,
                             session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=1000,
                             fetch_max_wait_ms=200, request_timeout_ms=40_000, retry_backoff_ms=100,
                             reconnect_backoff_max_ms=1000)
    try:
        consumer.subscribe([topic], listener=_kafka_python_listener(run))
        consumer.topics()  # metadata before the first join (see KafkaPythonClient.run_member)
        while not run.stop.is_set():
            batches = consumer.poll(timeout_ms=200)
            run.deliver((r.partition, r.offset, r.value) for records in batches.values() for r in records)
            if batches:
                try:
                    consumer.commit()
                except KafkaError as exc:  # a commit lost to a moving coordinator; the next one covers it
                    run.problem(f"commit: {exc!r}")
        consumer.commit()
    finally:
        consumer.close(autocommit=False)


def _kafka_python_listener(run: Run):
    """A rebalance listener telling `run` of each assignment."""
    from kafka import ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            pass

        def on_partitions_assigned(self, assigned):
            run.assigned(tp.partition for tp in assigned)

    return Listener()


def aiokafka_producer(run: Run, bootstrap: str, topic: str) -> None:
    asyncio.run(_aiokafka_produce(run, bootstrap, topic))


async def _aiokafka_produce(run: Run, bootstrap: str, topic: str) -> None:
    from aiokafka import AIOKafkaProducer
    # An idempotent aiokafka producer never expires a batch: it retries until the broker takes it.
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id=f"failover-aio-{uuid.uuid4().hex[:6]}",
                                acks="all", enable_idempotence=True, linger_ms=5,
                                metadata_max_age_ms=METADATA_MAX_AGE_MS, request_timeout_ms=10_000,
                                retry_backoff_ms=100)
    await producer.start()
    try:
        futures = []
        for n in range(run.count):
            if not run.may_send(n):
                await asyncio.to_thread(run.wait_to_send, n)
            future = await producer.send(topic, key=encoded(n), value=encoded(n), partition=n % PARTITIONS)
            future.add_done_callback(lambda done, n=n: _aiokafka_report(run, n, done))
            futures.append(future)
        await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), DELIVERY_TIMEOUT_MS / 1000)
    finally:
        await producer.stop()


def _aiokafka_report(run: Run, n: int, done: asyncio.Future) -> None:
    if done.exception() is not None:
        run.fail(n, repr(done.exception()))
    else:
        run.ack(n, done.result().partition, done.result().offset)


def aiokafka_consumer(run: Run, bootstrap: str, topic: str, group: str) -> None:
    asyncio.run(_aiokafka_consume(run, bootstrap, topic, group))


async def _aiokafka_consume(run: Run, bootstrap: str, topic: str, group: str) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.errors import KafkaError
    from aiokafka.abc import ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            pass

        def on_partitions_assigned(self, assigned):
            run.assigned(tp.partition for tp in assigned)

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                client_id=f"failover-aioc-{uuid.uuid4().hex[:6]}", enable_auto_commit=False,
                                auto_offset_reset="earliest", metadata_max_age_ms=METADATA_MAX_AGE_MS,
                                session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=1000,
                                fetch_max_wait_ms=200, request_timeout_ms=40_000, retry_backoff_ms=100)
    consumer.subscribe([topic], listener=Listener())
    await consumer.start()
    try:
        while not run.stop.is_set():
            batches = await consumer.getmany(timeout_ms=200)
            run.deliver((r.partition, r.offset, r.value) for records in batches.values() for r in records)
            if batches:
                try:
                    await consumer.commit()
                except KafkaError as exc:
                    run.problem(f"commit: {exc!r}")
        await consumer.commit()
    finally:
        await consumer.stop()


def _confluent_common(bootstrap: str, role: str) -> dict:
    return {"bootstrap.servers": bootstrap, "client.id": f"failover-ck-{role}-{uuid.uuid4().hex[:6]}",
            "broker.address.family": "v4", "topic.metadata.refresh.interval.ms": METADATA_MAX_AGE_MS,
            "reconnect.backoff.max.ms": 1000}


def confluent_producer(run: Run, bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer
    producer = Producer(_confluent_common(bootstrap, "p") | {
        "enable.idempotence": True, "acks": "all", "linger.ms": 5, "message.timeout.ms": DELIVERY_TIMEOUT_MS})

    def report(n: int):
        def delivered(err, msg):
            if err is not None:
                run.fail(n, str(err))
            else:
                run.ack(n, msg.partition(), msg.offset())
        return delivered

    for n in range(run.count):
        run.wait_to_send(n, serve=lambda: producer.poll(0.1))
        producer.produce(topic, key=encoded(n), value=encoded(n), partition=n % PARTITIONS, on_delivery=report(n))
        producer.poll(0)
    left = producer.flush(DELIVERY_TIMEOUT_MS / 1000)
    if left:
        run.problem(f"confluent-kafka producer: {left} records still queued after flush")


def confluent_consumer(run: Run, bootstrap: str, topic: str, group: str) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException
    consumer = Consumer(_confluent_common(bootstrap, "c") | {
        "group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": 1000, "fetch.wait.max.ms": 200})
    try:
        consumer.subscribe([topic], on_assign=lambda _consumer, tps: run.assigned(tp.partition for tp in tps))
        while not run.stop.is_set():
            messages = consumer.consume(num_messages=500, timeout=0.2)
            good = []
            for msg in messages:
                if msg.error():
                    run.problem(f"consume: {msg.error()}")
                else:
                    good.append((msg.partition(), msg.offset(), msg.value()))
            run.deliver(good)
            if good:
                try:
                    consumer.commit(asynchronous=False)
                except KafkaException as exc:
                    if exc.args[0].code() != KafkaError._NO_OFFSET:
                        run.problem(f"commit: {exc.args[0]}")
        try:
            consumer.commit(asynchronous=False)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._NO_OFFSET:
                raise
    finally:
        consumer.close()


def kcat_producer(run: Run, bootstrap: str, topic: str) -> None:
    """kcat -P fed record by record on its stdin (key and value the record number, partitioned by key); kcat reports
    no offsets, and its exit status and stderr say whether every record was delivered."""
    cmd = KcatClient()._base(bootstrap) + [
        "-P", "-t", topic, "-E", "-K", ":", "-X", "enable.idempotence=true", "-X", "acks=all", "-X", "linger.ms=5",
        "-X", "partitioner=murmur2_random", "-X", f"message.timeout.ms={DELIVERY_TIMEOUT_MS}",
        "-X", f"topic.metadata.refresh.interval.ms={METADATA_MAX_AGE_MS}", "-X", "reconnect.backoff.max.ms=1000"]
    kcat = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr: list[bytes] = []
    reader = threading.Thread(target=lambda: stderr.extend(kcat.stderr), daemon=True)
    reader.start()
    try:
        for n in range(run.count):
            run.wait_to_send(n)
            kcat.stdin.write(encoded(n) + b":" + encoded(n) + b"\n")
            kcat.stdin.flush()
        kcat.stdin.close()
        code = kcat.wait(timeout=DELIVERY_TIMEOUT_MS / 1000 + 30)
    finally:
        if kcat.poll() is None:
            kcat.kill()
            kcat.wait()
    reader.join(timeout=10)
    text = b"".join(stderr).decode(errors="replace")
    if code != 0 or "Delivery failed" in text:
        for n in range(run.count):
            run.fail(n, f"kcat exited {code}: {text[-1500:]}")
        return
    for n in range(run.count):  # kcat flushed every record before exiting 0
        run.ack(n)


def kcat_consumer(run: Run, bootstrap: str, topic: str, group: str) -> None:
    """kcat -G: librdkafka's group consumer, committing by itself (every auto.commit.interval.ms, and on SIGTERM)."""
    cmd = KcatClient()._base(bootstrap) + [
        "-G", group, topic, "-u", "-f", OUTPUT_FORMAT, "-X", "auto.offset.reset=earliest",
        "-X", f"session.timeout.ms={SESSION_TIMEOUT_MS}", "-X", "heartbeat.interval.ms=1000",
        "-X", "fetch.wait.max.ms=200", "-X", "auto.commit.interval.ms=200",
        "-X", f"topic.metadata.refresh.interval.ms={METADATA_MAX_AGE_MS}", "-X", "reconnect.backoff.max.ms=1000"]
    kcat = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def read_records():
        for record in iter(lambda: read_record(kcat.stdout), None):
            run.deliver([(record.partition, record.offset, record.value)])

    def read_stderr():  # rebalances, and errors except the lost and refused connections to a stopped node
        for line in kcat.stderr:
            text = line.decode(errors="replace").strip()
            rebalance = REBALANCE_LINE.match(text)
            if rebalance and rebalance[1] == "assigned":
                run.assigned(int(p) for name, p in PARTITION_ITEM.findall(rebalance[2]) if name == topic)
            elif text.startswith("% ERROR") and "Broker transport failure" not in text:
                run.problem(f"kcat -G: {text}")

    readers = [threading.Thread(target=read_records, daemon=True), threading.Thread(target=read_stderr, daemon=True)]
    for reader in readers:
        reader.start()
    try:
        run.stop.wait()
    finally:
        kcat.send_signal(signal.SIGTERM)  # kcat commits and leaves the group on SIGTERM
        try:
            code = kcat.wait(timeout=30)
        except subprocess.TimeoutExpired:
            kcat.kill()
            code = kcat.wait()
        for reader in readers:
            reader.join(timeout=10)
    if code != 0:
        run.problem(f"kcat -G exited {code} on SIGTERM")


PRODUCERS = {"kafka-python": kafka_python_producer, "aiokafka": aiokafka_producer,
             "confluent-kafka": confluent_producer, "kcat": kcat_producer}
CONSUMERS = {"kafka-python": kafka_python_consumer, "aiokafka": aiokafka_consumer,
             "confluent-kafka": confluent_consumer, "kcat": kcat_consumer}
REPORTS_OFFSETS = {"kafka-python", "aiokafka", "confluent-kafka"}  # producers that report each record's offset
REPORTS_ASSIGNMENTS = {"kafka-python", "aiokafka", "confluent-kafka", "kcat"}  # consumers telling Run.assigned


# --- the cluster side -----------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Faults:
    """What the scenario did to the cluster, for the checks and for a failure's message."""
    stopped_node: int | None = None
    coordinator: int | None = None  # the node that was the group's coordinator when it was stopped
    new_coordinator: int | None = None
    moves: list[tuple[int, int, int]] = dataclasses.field(default_factory=list)  # (partition, from, to)
    seq_at_coordinator_stop: int = 0
    group_nodes_before: set[int] = dataclasses.field(default_factory=set)  # nodes that served GROUP_APIS until then
    # per fault: (what, seconds since the start, records read by the group, records sent but not yet acknowledged)
    timeline: list[tuple[str, float, int, int]] = dataclasses.field(default_factory=list)
    started: float = dataclasses.field(default_factory=time.monotonic)


def coordinator_partition(group: str, partitions: int = 50) -> int:
    return partition_for_group(group, partitions)


def move_every_leader(broker, topic: str, faults: Faults) -> None:
    """Each partition's leader moves to the next in-sync replica (in node order) that is not the leader."""
    for partition in range(PARTITIONS):
        leader = broker.leader_of(topic, partition)
        others = [node for node in sorted(broker.isr(topic, partition)) if node != leader]
        assert others, f"partition {partition}: no other in-sync replica to move the leader to"
        target = next((node for node in others if node > leader), others[0])
        broker.move_leader(topic, partition, target)
        faults.moves.append((partition, leader, target))
        assert broker.leader_of(topic, partition) == target


def wait_in_every_isr(broker, partitions: list[tuple[str, int]], node: int, timeout_s: float = WAIT_S) -> None:
    """Until `node` is back in the ISR of each of `partitions` (caught up with its leader)."""
    broker.wait_until(lambda: all(node in broker.isr(*tp) for tp in partitions),
                      f"node {node} back in the ISR of {partitions}", timeout_s)


def run_scenario(broker, producer_name: str, consumer_name: str, topic: str, group: str,
                 count: int = COUNT) -> tuple[Run, Faults]:
    """Runs the producer and the group consumer in threads while the faults happen; returns once the group has
    read every acknowledged record and closed (committing), with the stopped coordinator node started again."""
    broker.create_topic(topic, PARTITIONS, TOPIC_CONFIG)
    run = Run(count)
    faults = Faults()
    bootstrap = broker.bootstrap_servers
    threads = [_thread(run, "producer", PRODUCERS[producer_name], bootstrap, topic, on_end=run.producer_done.set),
               _thread(run, "consumer", CONSUMERS[consumer_name], bootstrap, topic, group)]
    for thread in threads:
        thread.start()
    try:
        _inject_faults(broker, run, faults, topic, group)
        run.wait_until(lambda: run.producer_done.is_set() or run.crashed, "the producer finished", RUN_TIMEOUT_S)
        run.wait_until(lambda: set(run.acked) <= run.seen or run.crashed, "the group read every acknowledged record")
    finally:
        run.stop.set()
        for thread in threads:
            thread.join(timeout=60)
        if faults.coordinator is not None and faults.coordinator not in broker.alive_nodes():
            broker.start_node(faults.coordinator)
    assert not any(thread.is_alive() for thread in threads), "a client did not close within 60 s"
    return run, faults


def _thread(run: Run, role: str, target, *args, on_end: Callable[[], None] | None = None) -> threading.Thread:
    def body():
        try:
            target(run, *args)
        except BaseException as exc:  # noqa: BLE001 - the test fails with it
            run.problem(f"{CRASH} {role}: {exc!r}")
        finally:
            if on_end is not None:
                on_end()
    return threading.Thread(target=body, name=f"failover-{role}", daemon=True)


def _inject_faults(broker, run: Run, faults: Faults, topic: str, group: str) -> None:
    share = run.count // 6

    def after(k: int, what: str) -> None:
        run.wait_until(lambda: len(run.seen) >= k * share or bool(run.crashed),
                       f"the group read {k * share} records before: {what}")
        with run.changed:
            faults.timeline.append((what, round(time.monotonic() - faults.started, 1), len(run.seen),
                                    run.sending + 1 - len(run.acked)))

    after(1, "the first leader moves")
    move_every_leader(broker, topic, faults)
    offsets_partition = (OFFSETS_TOPIC, coordinator_partition(group))
    coordinator = broker.leader_of(*offsets_partition)
    after(2, "stopping a node")
    faults.stopped_node = next(node for node in broker.alive_nodes() if node != coordinator)
    broker.stop_node(faults.stopped_node)
    after(3, "starting it again")
    broker.start_node(faults.stopped_node)
    wait_in_every_isr(broker, [(topic, p) for p in range(PARTITIONS)] + [offsets_partition], faults.stopped_node)
    after(4, "the second leader moves")
    move_every_leader(broker, topic, faults)
    after(5, "stopping the group's coordinator")
    faults.coordinator = broker.leader_of(*offsets_partition)
    faults.seq_at_coordinator_stop = broker.last_request_seq()
    faults.group_nodes_before = {entry.node_id for api in GROUP_APIS for entry in broker.requests(api=api)}
    broker.stop_node(faults.coordinator)
    faults.new_coordinator = broker.leader_of(*offsets_partition)


# --- the checks -----------------------------------------------------------------------------------------------------

def check(broker, run: Run, faults: Faults, topic: str, group: str, producer_name: str, consumer_name: str) -> None:
    assert not run.failed, f"records not acknowledged: {run.summary()}"
    assert not run.crashed, f"a client failed: {run.crashed}"
    assert len(run.acked) == run.count, run.summary()
    assert faults.group_nodes_before == {faults.coordinator}, (
        f"before the stop, the group's requests were served by {faults.group_nodes_before}, not only by the leader "
        f"of the group's {OFFSETS_TOPIC} partition, node {faults.coordinator}")
    assert faults.new_coordinator not in (None, -1, faults.coordinator), (
        f"the group's coordinator did not move off node {faults.coordinator}: {faults.new_coordinator}")
    _check_group_stream(run)
    stored = _check_log(broker, run, topic, producer_name)
    _check_carried_on(broker, faults, group, topic, stored)
    if consumer_name in REPORTS_ASSIGNMENTS:  # the new coordinator took the group over as it was: no rejoin
        assert run.assignments == [list(range(PARTITIONS))], f"rebalances: {run.assignments}"


def _check_group_stream(run: Run) -> None:
    """Every acknowledged record read, none twice, and in offset and number order within each partition."""
    twice = sorted(n for n, times in collections.Counter(n for _, _, n in run.delivered).items() if times > 1)
    assert not twice, f"records delivered more than once: {twice[:20]}; {run.summary()}"
    assert set(run.acked) <= run.seen, run.summary()
    for partition in range(PARTITIONS):
        mine = [(offset, n) for p, offset, n in run.delivered if p == partition]
        assert mine == sorted(mine) and [n for _, n in mine] == sorted(n for _, n in mine), (
            f"partition {partition} delivered out of order: {mine[:50]}")


def _check_log(broker, run: Run, topic: str, producer_name: str) -> dict[int, list[tuple[int, int]]]:
    """Each record is stored once, in number order within its partition, where its producer was told."""
    stored: dict[int, list[tuple[int, int]]] = {}
    for partition in range(PARTITIONS):
        records = broker.all_records(topic, partition)
        stored[partition] = [(r.offset, number(r.value)) for r in records]
        numbers = [n for _, n in stored[partition]]
        wrong = next((i for i in range(1, len(numbers)) if numbers[i] <= numbers[i - 1]), None)
        assert wrong is None, (f"partition {partition}: stored out of order or twice at offset {wrong}: "
                               f"{stored[partition][max(0, wrong - 3):wrong + 3]}")
        assert [o for o, _ in stored[partition]] == list(range(len(numbers))), f"partition {partition}: gaps"
    where = {n: (p, o) for p, pairs in stored.items() for o, n in pairs}
    assert set(run.acked) <= set(where), f"acknowledged but not stored: {sorted(set(run.acked) - set(where))[:20]}"
    if producer_name in REPORTS_OFFSETS:
        misplaced = {n: (told, where[n]) for n, told in run.acked.items() if told != where[n]}
        assert not misplaced, (f"stored elsewhere than the producer was told (told, stored): "
                               f"{list(misplaced.items())[:10]}")
    return stored


def _check_carried_on(broker, faults: Faults, group: str, topic: str, stored) -> None:
    """After its coordinator stopped, the group committed its final offsets through the new one."""
    committed = broker.committed_offsets(group)
    ends = {partition: len(pairs) for partition, pairs in stored.items()}
    assert {p: committed.get((topic, p)) for p in ends} == ends, f"committed {committed}, log ends {ends}"
    commits = [entry.node_id for entry in broker.requests(since=faults.seq_at_coordinator_stop, api="OffsetCommit")]
    assert faults.new_coordinator in commits, (
        f"no OffsetCommit served by the new coordinator {faults.new_coordinator} after node {faults.coordinator} "
        f"stopped; served by {sorted(set(commits))}")
