"""acks=all against min.insync.replicas=2 on a three-node cluster, with two nodes stopped: each client surfaces
NOT_ENOUGH_REPLICAS, nothing is written, and once the nodes are back writes resume.

For each client, on a topic of one partition with replication factor 3:
1. a record is written while every replica is in sync;
2. both followers stop (the ISR is the leader alone): a producer that does not retry is refused with the client's
   form of NOT_ENOUGH_REPLICAS (the broker checks the ISR before appending, so nothing is stored);
3. an idempotent producer that retries (the client's defaults, a long delivery timeout) sends one record and keeps
   being refused (its Produce requests reach the leader again and again);
4. the followers start again and catch up: that pending record is acknowledged, and a new producer writes one more.
The log then holds exactly the three accepted records, each once.

What each client surfaces for the refusal without retries:
- kafka-python (retries=0): the future fails with NotEnoughReplicasError (NOT_ENOUGH_REPLICAS);
- aiokafka (no retry setting: a plain producer retries until its batch expires after request_timeout_ms): then
  NotEnoughReplicasError, the last error it was answered;
- confluent-kafka (retries=0): the delivery report's error is NOT_ENOUGH_REPLICAS;
- kcat (-X retries=0): "Delivery failed for message: Broker: Not enough in-sync replicas" on stderr.
With their default retries and a delivery timeout instead (measured, not asserted here: it is the clients' own
timeout path), kafka-python fails the record with KafkaTimeoutError ("Expiring 1 record(s) ..."), confluent-kafka
and kcat with _MSG_TIMED_OUT ("Local: Message timed out"), and aiokafka still with NotEnoughReplicasError.
"""
from __future__ import annotations

import asyncio
import subprocess
import threading
import uuid

import pytest

from compatbroker import EmbeddedBroker

from . import clients
from .cluster_scenario import CLUSTER_SETTINGS, METADATA_MAX_AGE_MS, ClusterUnderTest
from .clients.kcat_client import KcatClient

pytestmark = pytest.mark.matrix(flow="cluster acks")

OK = "OK"
REFUSED = "NOT_ENOUGH_REPLICAS"
CLIENTS = ("kafka-python", "aiokafka", "confluent-kafka", "kcat")
SEND_TIMEOUT_S = 120.0  # a bound: every send ends as soon as it is answered
PLAIN_TIMEOUT_MS = 5000  # aiokafka's batch lifetime without idempotence (it retries until then)
RETRIED_REQUESTS = 3  # Produce requests the retrying producer must have sent before the followers return


@pytest.fixture(scope="module")
def cluster():
    with EmbeddedBroker(CLUSTER_SETTINGS, nodes=3) as embedded:
        yield ClusterUnderTest(embedded)


# --- one send per client: "OK" or Kafka's error name -----------------------------------------------------------------

def send(client_name: str, bootstrap: str, topic: str, value: bytes, *, retrying: bool, client_id: str) -> str:
    return SENDERS[client_name](bootstrap, topic, value, retrying=retrying, client_id=client_id)


def kafka_python_send(bootstrap, topic, value, *, retrying, client_id) -> str:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError
    options = ({"enable_idempotence": True, "delivery_timeout_ms": int(SEND_TIMEOUT_S * 1000)} if retrying
               else {"enable_idempotence": False, "retries": 0})
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id=client_id, acks="all",
                             metadata_max_age_ms=METADATA_MAX_AGE_MS, request_timeout_ms=10_000, retry_backoff_ms=100,
                             **options)
    try:
        producer.send(topic, value=value, partition=0).get(timeout=SEND_TIMEOUT_S)
        return OK
    except KafkaError as exc:
        return getattr(exc, "message", type(exc).__name__)
    finally:
        producer.close(timeout=10)


def aiokafka_send(bootstrap, topic, value, *, retrying, client_id) -> str:
    return asyncio.run(_aiokafka_send(bootstrap, topic, value, retrying, client_id))


async def _aiokafka_send(bootstrap, topic, value, retrying, client_id) -> str:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id=client_id, acks="all",
                                enable_idempotence=retrying, metadata_max_age_ms=METADATA_MAX_AGE_MS,
                                request_timeout_ms=10_000 if retrying else PLAIN_TIMEOUT_MS, retry_backoff_ms=100)
    await producer.start()
    try:
        await asyncio.wait_for(await producer.send(topic, value=value, partition=0), SEND_TIMEOUT_S)
        return OK
    except KafkaError as exc:
        return getattr(exc, "message", type(exc).__name__)
    finally:
        await producer.stop()


def confluent_send(bootstrap, topic, value, *, retrying, client_id) -> str:
    from confluent_kafka import Producer
    options = {"enable.idempotence": True} if retrying else {"enable.idempotence": False, "retries": 0}
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "broker.address.family": "v4",
                         "acks": "all", "topic.metadata.refresh.interval.ms": METADATA_MAX_AGE_MS,
                         "message.timeout.ms": int(SEND_TIMEOUT_S * 1000), **options})
    outcome: list[str] = []
    producer.produce(topic, value=value, partition=0,
                     on_delivery=lambda err, _msg: outcome.append(OK if err is None else err.name()))
    left = producer.flush(SEND_TIMEOUT_S)
    return outcome[0] if outcome else f"not answered ({left} queued)"


def kcat_send(bootstrap, topic, value, *, retrying, client_id) -> str:
    options = ["-X", "enable.idempotence=true"] if retrying else ["-X", "retries=0"]
    cmd = KcatClient()._base(bootstrap) + [
        "-P", "-t", topic, "-p", "0", "-X", f"client.id={client_id}", "-X", "acks=all",
        "-X", f"message.timeout.ms={int(SEND_TIMEOUT_S * 1000)}", *options]
    done = subprocess.run(cmd, input=value, capture_output=True, timeout=SEND_TIMEOUT_S + 30, check=False)
    stderr = done.stderr.decode(errors="replace")
    if "Broker: Not enough in-sync replicas" in stderr:
        return REFUSED
    return OK if done.returncode == 0 and "Delivery failed" not in stderr else f"exit {done.returncode}: {stderr}"


SENDERS = {"kafka-python": kafka_python_send, "aiokafka": aiokafka_send, "confluent-kafka": confluent_send,
           "kcat": kcat_send}


# --- the test ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("acks_client", CLIENTS)
def test_acks_all_refused_below_min_insync_replicas_then_writes_resume(cluster, acks_client, topic):
    clients.load_or_fail(acks_client)
    cluster.create_topic(topic, 1, {"min.insync.replicas": "2"})
    bootstrap = cluster.bootstrap_servers
    tag = uuid.uuid4().hex[:6]
    assert send(acks_client, bootstrap, topic, b"before", retrying=False, client_id=f"acks-before-{tag}") == OK

    leader = cluster.leader_of(topic, 0)
    followers = [node for node in cluster.partition(topic, 0)["replicas"] if node != leader]
    for node in followers:
        cluster.stop_node(node)
    try:
        assert cluster.isr(topic, 0) == [leader] and cluster.leader_of(topic, 0) == leader
        live = cluster.live_bootstrap()  # kafka-python 3.0.12 may keep retrying refused bootstrap addresses only
        refused = send(acks_client, live, topic, b"refused", retrying=False, client_id=f"acks-plain-{tag}")
        assert refused == REFUSED, f"{acks_client} surfaced {refused!r}"

        retrier_id = f"acks-retrying-{tag}"
        pending = _in_thread(lambda: send(acks_client, live, topic, b"pending", retrying=True,
                                          client_id=retrier_id))
        cluster.wait_until(lambda: len(_produces(cluster, retrier_id, topic)) >= RETRIED_REQUESTS or pending.done,
                           f"{acks_client}'s retrying producer sent {RETRIED_REQUESTS} Produce requests")
        assert not pending.done, f"the pending record was answered while the ISR was short: {pending.result}"
        assert {entry.node_id for entry in _produces(cluster, retrier_id, topic)} == {leader}
    finally:
        for node in followers:
            cluster.start_node(node)
    cluster.wait_until(lambda: len(cluster.isr(topic, 0)) == 3, "the followers back in the ISR")
    assert pending.wait(SEND_TIMEOUT_S + 60) == OK, f"the pending record: {pending.result}"
    assert send(acks_client, bootstrap, topic, b"after", retrying=False, client_id=f"acks-after-{tag}") == OK
    assert [r.value for r in cluster.all_records(topic, 0)] == [b"before", b"pending", b"after"]


def _produces(cluster: ClusterUnderTest, client_id: str, topic: str) -> list:
    return [entry for entry in cluster.requests(api="Produce")
            if entry.client_id == client_id and topic in entry.topics]


class _Outcome:
    def __init__(self):
        self.finished = threading.Event()
        self.result: str | None = None

    @property
    def done(self) -> bool:
        return self.finished.is_set()

    def wait(self, timeout_s: float) -> str | None:
        self.finished.wait(timeout_s)
        return self.result


def _in_thread(call) -> _Outcome:
    outcome = _Outcome()

    def body():
        try:
            outcome.result = call()
        except Exception as exc:  # noqa: BLE001 - the test compares the outcome
            outcome.result = repr(exc)
        finally:
            outcome.finished.set()

    threading.Thread(target=body, daemon=True).start()
    return outcome
