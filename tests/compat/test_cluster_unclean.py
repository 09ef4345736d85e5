"""Unclean leader election on a three-node cluster, seen by real clients.

Each test makes the same history on a topic of one partition, replication factor 3, min.insync.replicas=1:
five records `a0..a4` reach every replica; both followers stop (the ISR is the leader alone); five records
`b0..b4` reach only the leader; the leader stops. The partition is offline: no leader, the ISR naming the stopped
leader (Kafka's KRaft rule: the last ISR member stays in it). Then one out-of-sync follower starts:

- unclean.leader.election.enable=false (Kafka's default): it may not lead; the partition stays offline (Metadata:
  leader -1, LEADER_NOT_AVAILABLE, in every client's view) until the in-sync replica returns, with nothing lost;
- unclean.leader.election.enable=true (topic config): it is elected with an ISR of itself, and the documented loss
  follows: `b0..b4`, which only the old leader had, are gone. The new leader takes three records `c0..c2` (offsets
  5..7, where the old leader has `b0..b2`); the old leader, back, truncates by leader epoch to where the logs
  diverge and copies them (no replica keeps a `b`). A consumer whose position (10) is now beyond the log end (8)
  resets by its auto.offset.reset: earliest reads `a0..a4, c0..c2` from offset 0, latest reads only what is written
  after its reset.
"""
from __future__ import annotations

import asyncio
import threading
import types
import uuid

import pytest

from compatbroker import EmbeddedBroker
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import MetadataRequest

from . import clients
from .cluster_scenario import CLUSTER_SETTINGS, METADATA_MAX_AGE_MS, ClusterUnderTest
from .raw_client import RawClient
from .records import Record

pytestmark = pytest.mark.matrix(flow="cluster unclean")

NO_LEADER = -1
OLD_END = 10  # a0..a4, b0..b4
METADATA_CLIENTS = ("kafka-python", "aiokafka", "confluent-kafka", "kcat")
RESET_CLIENTS = ("kafka-python", "aiokafka", "confluent-kafka")
READ_WAIT_S = 60.0  # a bound on each wait for records
NUDGE_WAIT_S = 1.0  # latest: how long a written record is given to arrive before the next is written


@pytest.fixture
def cluster():
    with EmbeddedBroker(CLUSTER_SETTINGS, nodes=3) as embedded:
        yield ClusterUnderTest(embedded)


def values(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(count)]


def write(reference, cluster: ClusterUnderTest, topic: str, prefix: str, count: int, *,
          batch_each: bool = False) -> None:
    """Records `<prefix>0..`, in one batch or (`batch_each`) a batch of their own each. The producer bootstraps from
    the live nodes only: kafka-python 3.0.12 may keep retrying refused bootstrap addresses until it gives up."""
    records = [Record(None, v, partition=0) for v in values(prefix, count)]
    for run in ([r] for r in records) if batch_each else [records]:
        reference.produce(cluster.live_bootstrap(), topic, run)


def stored(cluster: ClusterUnderTest, topic: str) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value) for r in cluster.all_records(topic, 0)]


def only_the_leader_has_the_last_records(reference, cluster: ClusterUnderTest, topic: str, unclean: bool):
    """The history of the module docstring, up to the stopped leader; returns (old leader, followers)."""
    cluster.create_topic(topic, 1, {"min.insync.replicas": "1",
                                    "unclean.leader.election.enable": str(unclean).lower()})
    write(reference, cluster, topic, "a", 5)
    cluster.wait_until(lambda: len(cluster.isr(topic, 0)) == 3, "every replica in sync")
    leader = cluster.leader_of(topic, 0)
    followers = [node for node in cluster.partition(topic, 0)["replicas"] if node != leader]
    for node in followers:
        cluster.stop_node(node)
    write(reference, cluster, topic, "b", 5, batch_each=True)  # so that a log may be cut between any two
    assert stored(cluster, topic) == list(enumerate(values("a", 5) + values("b", 5)))
    cluster.stop_node(leader)
    state = cluster.partition(topic, 0)
    assert (state["leader"], state["isr"]) == (NO_LEADER, [leader]), f"after the last ISR member stopped: {state}"
    return leader, followers


def partition_error(cluster: ClusterUnderTest, node: int, topic: str) -> tuple[int, int]:
    """(error code, leader) of partition 0 in a Metadata v12 answer from `node`."""
    host, _, port = cluster.address_of(node).rpartition(":")
    with RawClient(types.SimpleNamespace(host=host, port=int(port)), "unclean-metadata") as raw:
        answer = raw.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                          allow_auto_topic_creation=False), 12)
    (found,) = answer.topics
    (partition,) = found.partitions
    return partition.error_code, partition.leader_id


# --- disabled ---------------------------------------------------------------------------------------------------------

def test_without_unclean_election_the_partition_stays_offline_until_an_in_sync_replica_returns(cluster, reference,
                                                                                                 topic):
    leader, (first, second) = only_the_leader_has_the_last_records(reference, cluster, topic, unclean=False)
    cluster.start_node(first)  # out of sync: it may not lead
    assert cluster.leader_of(topic, 0) == NO_LEADER
    assert partition_error(cluster, first, topic) == (ErrorCode.LEADER_NOT_AVAILABLE, NO_LEADER)
    for name in METADATA_CLIENTS:
        seen = clients.load_or_fail(name).metadata(cluster.live_bootstrap(), [topic]).topics
        assert seen.get(topic, {}).get(0) == NO_LEADER, f"{name} sees partitions {seen.get(topic)}"

    cluster.start_node(leader)  # the in-sync replica returns, with everything
    assert cluster.leader_of(topic, 0) == leader
    cluster.start_node(second)
    cluster.wait_until(lambda: len(cluster.isr(topic, 0)) == 3, "both followers caught up")
    assert stored(cluster, topic) == list(enumerate(values("a", 5) + values("b", 5)))
    got = reference.consume(cluster.bootstrap_servers, topic, 10)
    assert [(r.offset, r.value) for r in got] == list(enumerate(values("a", 5) + values("b", 5)))


# --- enabled ----------------------------------------------------------------------------------------------------------

def unclean_election_with_loss(reference, cluster: ClusterUnderTest, topic: str) -> None:
    leader, (first, second) = only_the_leader_has_the_last_records(reference, cluster, topic, unclean=True)
    epoch = cluster.partition(topic, 0)["leader_epoch"]
    cluster.start_node(first)
    state = cluster.partition(topic, 0)
    assert (state["leader"], state["isr"]) == (first, [first]), f"no unclean election: {state}"
    assert state["leader_epoch"] > epoch
    assert stored(cluster, topic) == list(enumerate(values("a", 5))), "the new leader has only what it had"
    write(reference, cluster, topic, "c", 3)  # at offsets 5..7, where the old leader has b0..b2
    expected = list(enumerate(values("a", 5) + values("c", 3)))
    assert stored(cluster, topic) == expected

    # The old leader truncates by leader epoch to where its log diverges (offset 5), copies c0..c2, and rejoins.
    cluster.start_node(leader)
    cluster.start_node(second)
    cluster.wait_until(lambda: len(cluster.isr(topic, 0)) == 3, "both returning replicas caught up")
    assert stored(cluster, topic) == expected
    cluster.move_leader(topic, 0, leader)  # what the old leader holds now: b0..b4 gone for good
    assert stored(cluster, topic) == expected


@pytest.mark.parametrize("reset_client", RESET_CLIENTS)
def test_unclean_election_loses_what_only_the_old_leader_had_and_earliest_consumers_start_over(
        cluster, reference, topic, reset_client):
    unclean_election_with_loss(reference, cluster, topic)
    with Reader(reset_client, cluster.bootstrap_servers, topic, "earliest") as reader:
        reader.wait_for(8)
    assert reader.got[:8] == list(enumerate(values("a", 5) + values("c", 3))), "reset to the log start"
    assert len(reader.got) == 8


@pytest.mark.parametrize("reset_client", RESET_CLIENTS)
def test_unclean_election_moves_the_end_back_and_latest_consumers_reset_to_it(cluster, reference, topic,
                                                                              reset_client):
    unclean_election_with_loss(reference, cluster, topic)
    with Reader(reset_client, cluster.bootstrap_servers, topic, "latest") as reader:
        written = 0
        while not reader.got:  # records written before the reset are skipped, so write until one arrives
            assert written < READ_WAIT_S / NUDGE_WAIT_S, f"{reset_client} read nothing of {written} records"
            write(reference, cluster, topic, f"d{written}-", 1)
            written += 1
            reader.wait_for(1, NUDGE_WAIT_S, fail=False)
        reader.wait_for(1)
    offsets = [offset for offset, _ in reader.got]
    assert offsets[0] >= 8 and offsets == list(range(offsets[0], offsets[0] + len(offsets))), offsets
    assert all(value.startswith(b"d") for _, value in reader.got), f"read records from before the reset: {reader.got}"


# --- a consumer positioned at the old end ---------------------------------------------------------------------------

class Reader:
    """A consumer of `client_name` assigned partition 0 at offset OLD_END, with `policy` as auto.offset.reset,
    collecting (offset, value) in a thread until the block ends."""

    def __init__(self, client_name: str, bootstrap: str, topic: str, policy: str):
        clients.load_or_fail(client_name)
        self.got: list[tuple[int, bytes]] = []
        self.errors: list[str] = []
        self.changed = threading.Condition()
        self.stop = threading.Event()
        target = {"kafka-python": self._kafka_python, "aiokafka": self._aiokafka,
                  "confluent-kafka": self._confluent}[client_name]
        self.thread = threading.Thread(target=self._run, args=(target, bootstrap, topic, policy), daemon=True)
        self.client_name = client_name

    def __enter__(self) -> Reader:
        self.thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop.set()
        self.thread.join(timeout=30)
        assert not self.errors, f"{self.client_name} consumer: {self.errors}"

    def wait_for(self, count: int, timeout_s: float = READ_WAIT_S, *, fail: bool = True) -> None:
        with self.changed:
            self.changed.wait_for(lambda: len(self.got) >= count or self.errors, timeout_s)
        assert not self.errors, f"{self.client_name} consumer: {self.errors}"
        if fail:
            assert len(self.got) >= count, f"{self.client_name} read {self.got} within {timeout_s} s"

    def _add(self, pairs) -> None:
        with self.changed:
            self.got.extend(pairs)
            self.changed.notify_all()

    def _run(self, target, *args) -> None:
        try:
            target(*args)
        except Exception as exc:  # noqa: BLE001 - reported by wait_for and __exit__
            with self.changed:
                self.errors.append(repr(exc))
                self.changed.notify_all()

    def _kafka_python(self, bootstrap, topic, policy) -> None:
        from kafka import KafkaConsumer, TopicPartition
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, auto_offset_reset=policy,
                                 enable_auto_commit=False, metadata_max_age_ms=METADATA_MAX_AGE_MS,
                                 fetch_max_wait_ms=100, client_id=f"unclean-kc-{uuid.uuid4().hex[:6]}")
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek(tp, OLD_END)
            while not self.stop.is_set():
                for records in consumer.poll(timeout_ms=100).values():
                    self._add((r.offset, r.value) for r in records)
        finally:
            consumer.close()

    def _aiokafka(self, bootstrap, topic, policy) -> None:
        asyncio.run(self._aiokafka_read(bootstrap, topic, policy))

    async def _aiokafka_read(self, bootstrap, topic, policy) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, auto_offset_reset=policy,
                                    enable_auto_commit=False, metadata_max_age_ms=METADATA_MAX_AGE_MS,
                                    fetch_max_wait_ms=100, client_id=f"unclean-aio-{uuid.uuid4().hex[:6]}")
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek(tp, OLD_END)
            while not self.stop.is_set():
                for records in (await consumer.getmany(timeout_ms=100)).values():
                    self._add((r.offset, r.value) for r in records)
        finally:
            await consumer.stop()

    def _confluent(self, bootstrap, topic, policy) -> None:
        from confluent_kafka import Consumer, KafkaError, TopicPartition
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"unclean-{uuid.uuid4().hex[:8]}",
                             "client.id": f"unclean-ck-{uuid.uuid4().hex[:6]}", "broker.address.family": "v4",
                             "auto.offset.reset": policy, "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                             "topic.metadata.refresh.interval.ms": METADATA_MAX_AGE_MS})
        try:
            consumer.assign([TopicPartition(topic, 0, OLD_END)])
            while not self.stop.is_set():
                msg = consumer.poll(0.1)
                if msg is None:
                    continue
                if msg.error():
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        raise AssertionError(str(msg.error()))
                    continue
                self._add([(msg.offset(), msg.value())])
        finally:
            consumer.close()
