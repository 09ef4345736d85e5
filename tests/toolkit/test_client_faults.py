"""Fault injection seen from real clients (kafka-python and confluent-kafka/librdkafka), each test on a broker of
its own from the plugin's `compatbroker_fresh` fixture.

For every fault: the client meets it as it would meet it from Apache Kafka (the injected error code where the client
reports errors, a cut connection, a slow answer, a vanished broker), and its own recovery (retry, metadata refresh,
reconnect) ends with the data stored once. Timings are measured on the client's side; nothing sleeps.
"""
from __future__ import annotations

import time
import uuid

import pytest

CLIENTS = ("kafka-python", "confluent-kafka")


# --- producers of both clients behind one small interface --------------------------------------------------------

class KafkaPythonProducer:
    def __init__(self, broker, **overrides):
        from kafka import KafkaProducer
        self.client_id = f"kp-{uuid.uuid4().hex[:6]}"
        config = {"bootstrap_servers": broker.bootstrap_servers, "client_id": self.client_id, "linger_ms": 0,
                  "request_timeout_ms": 10000, "max_block_ms": 10000, "retry_backoff_ms": 50}
        self._producer = KafkaProducer(**(config | overrides))

    def send(self, topic: str, value: bytes):
        return self._producer.send(topic, value=value, partition=0)

    def produce(self, topic: str, value: bytes, timeout_s: float = 30) -> int:
        """The offset of the acknowledged record; raises the client's error."""
        return self.send(topic, value).get(timeout=timeout_s).offset

    @staticmethod
    def delivered(pending, timeout_s: float) -> bool:
        from kafka.errors import KafkaTimeoutError
        try:
            pending.get(timeout=timeout_s)
        except KafkaTimeoutError:
            return False
        return True

    def close(self):
        self._producer.close(timeout=5)


class ConfluentProducer:
    def __init__(self, broker, **overrides):
        from confluent_kafka import Producer
        self.client_id = f"ck-{uuid.uuid4().hex[:6]}"
        config = {"bootstrap.servers": broker.bootstrap_servers, "client.id": self.client_id,
                  "broker.address.family": "v4", "linger.ms": 0, "retry.backoff.ms": 50,
                  "message.timeout.ms": 30000}
        self._producer = Producer(config | overrides)

    def send(self, topic: str, value: bytes) -> list:
        report: list = []
        self._producer.produce(topic, value=value, partition=0,
                               on_delivery=lambda err, msg: report.append((err, msg.offset())))
        return report

    def produce(self, topic: str, value: bytes, timeout_s: float = 30) -> int:
        report = self.send(topic, value)
        self._producer.flush(timeout_s)
        assert report, f"not delivered within {timeout_s} s"
        error, offset = report[0]
        if error is not None:
            raise ConfluentDeliveryError(error)
        return offset

    def delivered(self, report: list, timeout_s: float) -> bool:
        self._producer.flush(timeout_s)
        if report and report[0][0] is not None:
            raise ConfluentDeliveryError(report[0][0])
        return bool(report)

    def close(self):
        self._producer.flush(5)


class ConfluentDeliveryError(Exception):
    def __init__(self, error):
        super().__init__(str(error))
        self.code = error.code()


def producer(client: str, broker, **overrides):
    return (KafkaPythonProducer if client == "kafka-python" else ConfluentProducer)(broker, **overrides)


def no_retries(client: str) -> dict:
    if client == "kafka-python":
        return {"retries": 0, "enable_idempotence": False}
    return {"message.send.max.retries": 0, "enable.idempotence": False}


def error_code_of(exc: Exception) -> int:
    return exc.code if isinstance(exc, ConfluentDeliveryError) else exc.errno


@pytest.fixture
def topic(compatbroker_fresh) -> str:
    name = f"faults-{uuid.uuid4().hex[:8]}"
    compatbroker_fresh.create_topic(name, 1)
    return name


# --- injected errors ---------------------------------------------------------------------------------------------

# With retries off, the client reports the error of the one attempt. librdkafka retries a leader change
# (NOT_LEADER_OR_FOLLOWER) whatever its retry setting, so it shows it by refreshing its metadata (see below).
@pytest.mark.parametrize("client,error,code", [
    ("kafka-python", "NOT_LEADER_OR_FOLLOWER", 6), ("kafka-python", "NOT_ENOUGH_REPLICAS", 19),
    ("kafka-python", "REQUEST_TIMED_OUT", 7), ("confluent-kafka", "NOT_ENOUGH_REPLICAS", 19),
    ("confluent-kafka", "REQUEST_TIMED_OUT", 7), ("confluent-kafka", "TOPIC_AUTHORIZATION_FAILED", 29)])
def test_an_injected_produce_error_reaches_the_client_as_that_error(compatbroker_fresh, topic, client, error,
                                                                    code):
    sender = producer(client, compatbroker_fresh, **no_retries(client))
    try:
        sender.produce(topic, b"warm-up")  # connected, metadata known: the next request is the Produce
        compatbroker_fresh.inject_error("Produce", error, count=1)
        with pytest.raises(Exception) as failure:
            sender.produce(topic, b"refused")
    finally:
        sender.close()
    assert error_code_of(failure.value) == code
    assert [r.value for r in compatbroker_fresh.records(topic)] == [b"warm-up"]


@pytest.mark.parametrize("client", CLIENTS)
def test_the_producers_retry_recovers_from_three_injected_errors_and_stores_the_record_once(
        compatbroker_fresh, topic, client):
    compatbroker_fresh.inject_error("Produce", "NOT_LEADER_OR_FOLLOWER", count=3)
    sender = producer(client, compatbroker_fresh)
    try:
        offset = sender.produce(topic, b"once")
    finally:
        sender.close()
    assert offset == 0
    assert [(r.offset, r.value) for r in compatbroker_fresh.records(topic)] == [(0, b"once")]
    produce_log = compatbroker_fresh.requests(api="Produce")
    assert [entry.injected_error for entry in produce_log] == ["NOT_LEADER_OR_FOLLOWER"] * 3 + [None]
    # NOT_LEADER_OR_FOLLOWER makes Kafka's clients refresh their metadata before retrying
    first_error = produce_log[0].seq
    assert any(entry.seq > first_error for entry in compatbroker_fresh.requests(api="Metadata"))


def test_an_injected_coordinator_error_reaches_the_admin_client_which_then_succeeds(compatbroker_fresh, topic):
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
    from kafka.errors import CoordinatorLoadInProgressError
    from kafka.structs import OffsetAndMetadata

    group = f"g-{uuid.uuid4().hex[:6]}"
    consumer = KafkaConsumer(bootstrap_servers=compatbroker_fresh.bootstrap_servers, group_id=group,
                             enable_auto_commit=False, request_timeout_ms=15000)
    admin = KafkaAdminClient(bootstrap_servers=compatbroker_fresh.bootstrap_servers, request_timeout_ms=15000)
    try:
        compatbroker_fresh.inject_error("OffsetCommit", "COORDINATOR_LOAD_IN_PROGRESS", count=2)
        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(7, "", -1)})  # retried by the consumer
        compatbroker_fresh.inject_error("OffsetFetch", "COORDINATOR_LOAD_IN_PROGRESS", count=1)
        with pytest.raises(CoordinatorLoadInProgressError):
            admin.list_group_offsets({group: None})  # kafka-python's admin hands it to the caller
        found = admin.list_group_offsets({group: None})[group]
    finally:
        admin.close()
        consumer.close()
    assert {(tp.topic, tp.partition): meta.offset for tp, meta in found.items()} == {(topic, 0): 7}
    assert compatbroker_fresh.committed_offsets(group) == {(topic, 0): 7}
    commits = compatbroker_fresh.requests(api="OffsetCommit")
    assert [entry.injected_error for entry in commits] == ["COORDINATOR_LOAD_IN_PROGRESS"] * 2 + [None]


def test_an_injected_fetch_error_is_retried_by_the_consumer_which_reads_on(compatbroker_fresh, topic):
    from kafka import KafkaConsumer, TopicPartition

    sender = producer("kafka-python", compatbroker_fresh)
    try:
        for value in (b"a", b"b"):
            sender.produce(topic, value)
    finally:
        sender.close()
    compatbroker_fresh.inject_error("Fetch", "NOT_LEADER_OR_FOLLOWER", count=2, topic=topic)
    consumer = KafkaConsumer(bootstrap_servers=compatbroker_fresh.bootstrap_servers, group_id=None,
                             enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=100)
    got = []
    try:
        consumer.assign([TopicPartition(topic, 0)])
        deadline = time.monotonic() + 30
        while len(got) < 2 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(record.value for record in records)
    finally:
        consumer.close()
    assert got == [b"a", b"b"]
    fetches = compatbroker_fresh.requests(api="Fetch")
    assert [(entry.injected_error, entry.served) for entry in fetches[:3]] == \
        [("NOT_LEADER_OR_FOLLOWER", False)] * 2 + [(None, True)]


# --- latency, dropped connections, down and up -------------------------------------------------------------------

@pytest.mark.parametrize("client", CLIENTS)
def test_injected_latency_shows_in_the_clients_round_trip(compatbroker_fresh, topic, client):
    sender = producer(client, compatbroker_fresh)
    try:
        sender.produce(topic, b"warm-up")
        began = time.monotonic()
        sender.produce(topic, b"fast")
        fast = time.monotonic() - began
        compatbroker_fresh.inject_latency("Produce", 600)
        began = time.monotonic()
        sender.produce(topic, b"slow")
        slow = time.monotonic() - began
    finally:
        sender.close()
    assert slow >= 0.6  # never sooner than the injected delay
    assert slow - fast >= 0.3  # and clearly slower than without it, even on a loaded machine
    assert [entry.delay_ms for entry in compatbroker_fresh.requests(api="Produce")][-1] == 600


@pytest.mark.parametrize("client", CLIENTS)
def test_a_dropped_connection_makes_the_client_reconnect_and_deliver_once(compatbroker_fresh, topic, client):
    sender = producer(client, compatbroker_fresh)
    try:
        sender.produce(topic, b"warm-up")
        compatbroker_fresh.drop_connections_after(0, api="Produce")
        assert sender.produce(topic, b"after-drop") == 1
    finally:
        sender.close()
    assert [r.value for r in compatbroker_fresh.records(topic)] == [b"warm-up", b"after-drop"]
    dropped, retried = compatbroker_fresh.requests(api="Produce")[1:]
    assert (dropped.dropped, retried.dropped, retried.served) == (True, False, True)
    assert retried.peer != dropped.peer  # a new connection


@pytest.mark.parametrize("client", CLIENTS)
def test_a_broker_that_goes_down_and_up_gets_the_record_after_it_is_back(compatbroker_fresh, topic, client):
    sender = producer(client, compatbroker_fresh)
    try:
        sender.produce(topic, b"before")
        compatbroker_fresh.down()
        pending = sender.send(topic, b"while-down")
        assert not sender.delivered(pending, timeout_s=1.0)  # nobody there to answer
        assert not compatbroker_fresh.is_up
        compatbroker_fresh.up()
        assert sender.delivered(pending, timeout_s=30.0)
    finally:
        sender.close()
    assert [r.value for r in compatbroker_fresh.records(topic)] == [b"before", b"while-down"]


# --- the request log -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("client", CLIENTS)
def test_the_request_log_shows_the_clients_requests_with_versions_and_client_id(compatbroker_fresh, topic,
                                                                                client):
    sender = producer(client, compatbroker_fresh)
    try:
        sender.produce(topic, b"x")
    finally:
        sender.close()
    log = [entry for entry in compatbroker_fresh.requests() if entry.client_id == sender.client_id]
    apis = [entry.api for entry in log]
    assert apis.index("ApiVersions") < apis.index("Metadata") < apis.index("Produce")
    produce = next(entry for entry in log if entry.api == "Produce")
    assert produce.topics == (topic,) and produce.served
    versions = {entry.api: entry.api_version for entry in log}
    if client == "kafka-python":  # 3.0.12 caps these itself
        assert (versions["ApiVersions"], versions["Metadata"], versions["Produce"]) == (4, 13, 9)
    else:  # librdkafka sends ApiVersions v3 and negotiates Produce with the magic-2 batches of v3 and later
        assert versions["ApiVersions"] == 3 and versions["Produce"] >= 3
