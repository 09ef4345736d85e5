"""Idempotent producers: retries never store a batch twice and never reorder.

- confluent-kafka (enable.idempotence=true) and kafka-python (idempotent by default) each send 100,000 records
  through a proxy that drops Produce responses and cuts connections (fault_proxy.py), so that they retry batches
  the broker has already written; a consumer then finds every record exactly once, in the order sent.
- aiokafka (enable_idempotence=True), kcat (-X enable.idempotence=true, librdkafka 2.0.2), kafkajs (idempotent: true)
  and sarama (Producer.Idempotent with its 2.1 protocol, one request in flight) do the same with 20,000 records, in
  requests of about 100 records so that every producer meets several faults.
- A raw client produces, the broker restarts (SIGTERM) or is killed (SIGKILL), and the client resends its last
  batch: the broker answers its first offsets and writes nothing twice; producer ids are never reused.
"""
from __future__ import annotations

import time

import pytest

from compatbroker.protocol.messages import InitProducerIdRequest, ProduceRequest
from compatbroker.protocol.records.batch import build_batch

from . import clients
from .clients import catalog
from .broker_process import BrokerProcess
from .checks import read_exactly
from .conftest import BROKER_SETTINGS
from .fault_proxy import CUT_AFTER_REQUEST, DROP_RESPONSE, FaultProxy, advertising
from .raw_client import RawClient
from .records import stored_batches

COUNT = 100_000
FAULT_EVERY = 7  # produce requests between two faults
PRODUCE_TIMEOUT_S = 240
ADAPTER_COUNT = 20_000  # for the clients driven through their adapters: enough requests, less time
ADAPTER_BATCH_RECORDS = 100


@pytest.fixture(scope="module")
def proxied(tmp_path_factory):
    """A broker that advertises a fault-injecting proxy in front of it."""
    data_dir = tmp_path_factory.mktemp("proxied") / "data"
    with (FaultProxy(every=FAULT_EVERY) as proxy,
          BrokerProcess(data_dir, BROKER_SETTINGS | advertising(proxy)) as broker):
        yield broker, proxy.start(broker.host, broker.port)


def values(count: int = COUNT) -> list[bytes]:
    return [b"%06d" % n for n in range(count)]


def assert_faults_injected(proxy: FaultProxy, before) -> None:
    """Both kinds of fault hit this producer, more than once each."""
    injected = {kind: proxy.counts[kind] - before[kind] for kind in (DROP_RESPONSE, CUT_AFTER_REQUEST)}
    assert min(injected.values()) >= 2, f"too few faults injected: {injected} in {proxy.counts['produce']} requests"


def assert_stored_once_in_order(reference, broker: BrokerProcess, topic: str, count: int = COUNT) -> None:
    got = read_exactly(reference, broker, topic, count)  # asserts offsets 0..count-1, nothing more in the log
    assert [record.value for record in got] == values(count)
    producers = {batch.producer_id for batch in stored_batches(broker.segment_files(topic, 0))}
    assert producers and min(producers) >= 0, f"batches without a producer id: {producers}"


def test_confluent_kafka_idempotent_producer_under_faults(proxied, reference, topic):
    from confluent_kafka import Producer
    broker, proxy = proxied
    before = proxy.counts.copy()
    producer = Producer({"bootstrap.servers": proxy.bootstrap, "enable.idempotence": True,
                         "client.id": "idempotence-ck", "broker.address.family": "v4", "linger.ms": 5,
                         "batch.size": 16384, "message.timeout.ms": PRODUCE_TIMEOUT_S * 1000})
    failures = []

    def delivered(err, _msg):
        if err is not None:
            failures.append(err)

    for value in values():
        while True:
            try:
                producer.produce(topic, value=value, partition=0, on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(PRODUCE_TIMEOUT_S) == 0, "records left undelivered"
    assert failures == []
    assert_faults_injected(proxy, before)
    assert_stored_once_in_order(reference, broker, topic)


def test_kafka_python_idempotent_producer_under_faults(proxied, reference, topic):
    from kafka import KafkaProducer
    broker, proxy = proxied
    before = proxy.counts.copy()
    producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, client_id="idempotence-kp", linger_ms=5,
                             request_timeout_ms=30_000, max_block_ms=60_000,
                             delivery_timeout_ms=PRODUCE_TIMEOUT_S * 1000)  # idempotent: kafka-python's default
    try:
        assert producer.config["enable_idempotence"]
        futures = [producer.send(topic, value=value, partition=0) for value in values()]
        producer.flush(timeout=PRODUCE_TIMEOUT_S)
        failed = [future.exception for future in futures if not future.succeeded()]
    finally:
        producer.close(timeout=10)
    assert failed == []
    assert_faults_injected(proxy, before)
    assert_stored_once_in_order(reference, broker, topic)


@pytest.mark.parametrize("idempotent_client", catalog.with_tag("idempotent"))
def test_idempotent_producer_under_faults(proxied, reference, topic, idempotent_client):
    client = clients.load_or_fail(idempotent_client)
    broker, proxy = proxied
    before = proxy.counts.copy()
    client.produce_idempotent(proxy.bootstrap, topic, values(ADAPTER_COUNT), batch_records=ADAPTER_BATCH_RECORDS,
                              timeout_s=PRODUCE_TIMEOUT_S)
    assert_faults_injected(proxy, before)
    assert_stored_once_in_order(reference, broker, topic, ADAPTER_COUNT)


# --- a retry that spans a restart ---------------------------------------------------------------------------------

class ProducerClient(RawClient):
    """InitProducerId and Produce with batches built here, so that a test can resend one exactly."""

    def __init__(self, broker: BrokerProcess):
        super().__init__(broker, "idempotence-raw")

    def init_producer_id(self) -> tuple[int, int]:
        answer = self.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000), 4)
        assert answer.error_code == 0
        return answer.producer_id, answer.producer_epoch

    def produce(self, topic: str, records: bytes):
        data = ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=records)])
        answer = self.call(ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[data]), 9)
        return answer.responses[0].partition_responses[0]


def batch_of(producer: tuple[int, int], sequence: int, count: int = 10) -> bytes:
    now = int(time.time() * 1000)
    records = [(None, b"%06d" % (sequence + n), (), now) for n in range(count)]
    return build_batch(records, producer_id=producer[0], producer_epoch=producer[1], base_sequence=sequence)


@pytest.mark.parametrize("hard", [False, True], ids=["sigterm", "sigkill"])
def test_a_retry_after_a_restart_is_recognised(fresh_broker, reference, topic, hard):
    reference.partitions_for(fresh_broker.bootstrap, topic)  # creates the topic (one partition)
    client = ProducerClient(fresh_broker)
    producer = client.init_producer_id()
    batches = [batch_of(producer, sequence) for sequence in range(0, 40, 10)]
    offsets = [client.produce(topic, records).base_offset for records in batches]
    assert offsets == [0, 10, 20, 30]
    client.close()

    fresh_broker.restart(hard=hard)  # the responses were "lost": the producer resends after the restart

    client = ProducerClient(fresh_broker)
    for _ in range(2):  # the last batch survives a restart in the producer state (Kafka keeps only that one)
        answer = client.produce(topic, batches[-1])
        assert (answer.error_code, answer.base_offset) == (0, offsets[-1])
    following = client.produce(topic, batch_of(producer, 40))
    assert (following.error_code, following.base_offset) == (0, 40)
    assert client.init_producer_id()[0] > producer[0]  # ids are never handed out twice
    client.close()
    got = read_exactly(reference, fresh_broker, topic, 50)
    assert [record.value for record in got] == [b"%06d" % n for n in range(50)]
