"""Topic administration with real clients: kafka-python's KafkaAdminClient, aiokafka's AIOKafkaAdminClient,
confluent-kafka's AdminClient, kafkajs's admin and sarama's ClusterAdmin create topics, grow them, delete records and
delete the topics, and describe the cluster (and, where the client can, the log dirs); `kcat -L` lists what they
made. A consumer group's members notice partitions that CreatePartitions added and rebalance onto them.

Every client here uses its admin API as an application would; errors are checked through the client's own
exception types or error codes.
"""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Callable

import pytest

from . import clients
from .records import MAX_MESSAGE_BYTES, Record

WAIT_S = 90.0  # a bound, not a pace: every wait ends as soon as its condition holds (loaded 2-core CI machines)
# The in-process members below share the test's interpreter: on a loaded machine a thread may not run for seconds,
# so their sessions are long (closing sends LeaveGroup, so a long session costs nothing when all goes well).
MEMBER_SESSION_MS = 30_000
KAFKAJS_ADMIN_SCRIPT = r"""
'use strict'
// One kafkajs admin session over a topic, printing `RESULT <json>` (or `ERROR <json>` and exit 1).
const { Kafka, logLevel } = require('kafkajs')

const errorTypes = e => (e.errors || [e]).map(error => error.type || error.name)

async function main () {
  const spec = JSON.parse(require('fs').readFileSync(0, 'utf8'))
  const topic = spec.topic
  const kafka = new Kafka({ clientId: 'compat-kafkajs-admin', brokers: [spec.brokers], logLevel: logLevel.NOTHING,
    retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1000 } })
  const admin = kafka.admin()
  await admin.connect()
  const out = {}
  try {
    out.created = await admin.createTopics({ topics: [{ topic, numPartitions: 2, replicationFactor: 1,
      configEntries: [{ name: 'retention.ms', value: '3600000' }] }] })
    out.createdAgain = await admin.createTopics({ topics: [{ topic, numPartitions: 2 }] })
    try {
      await admin.createTopics({ topics: [{ topic: topic + '.r3', numPartitions: 1, replicationFactor: 3 }] })
      out.threeReplicas = ['created']
    } catch (e) {
      out.threeReplicas = errorTypes(e)
    }
    out.validated = await admin.createTopics({ validateOnly: true, waitForLeaders: false,
      topics: [{ topic: topic + '.dry', numPartitions: 1 }] })
    await admin.createPartitions({ topicPartitions: [{ topic, count: 4 }] })
    const metadata = await admin.fetchTopicMetadata({ topics: [topic] })
    out.partitions = metadata.topics[0].partitions.map(p => p.partitionId).sort()
    const producer = kafka.producer()
    await producer.connect()
    await producer.send({ topic, messages: [0, 1, 2, 3, 4].map(i => ({ value: `v${i}`, partition: 3 })) })
    await producer.disconnect()
    await admin.deleteTopicRecords({ topic, partitions: [{ partition: 3, offset: '2' }] })
    const offsets = await admin.fetchTopicOffsets(topic)
    out.offsets = offsets.map(o => ({ partition: o.partition, low: o.low, high: o.high }))
    out.cluster = await admin.describeCluster()
    out.listedBefore = await admin.listTopics()
    await admin.deleteTopics({ topics: [topic] })
    out.listedAfter = await admin.listTopics()
  } finally {
    await admin.disconnect()
  }
  console.log('RESULT ' + JSON.stringify(out))
}

main().catch(e => {
  console.log('ERROR ' + JSON.stringify({ name: e.name, message: e.message, types: errorTypes(e) }))
  process.exit(1)
})
"""


def partition_dirs(broker, topic: str) -> list[str]:
    """The partition directories of `topic` in the broker's data directory, `-delete` ones included."""
    return sorted(entry.name for entry in broker.data_dir.iterdir() if entry.name.rpartition("-")[0] == topic
                  or entry.name.startswith(f"{topic}-") and entry.name.endswith("-delete"))


def kcat_topics(broker) -> dict[str, int]:
    """Topic -> partition count, as `kcat -L` lists every topic."""
    kcat = clients.require_executable("kcat")
    listed = subprocess.run([kcat, "-b", broker.bootstrap, "-X", "broker.address.family=v4", "-L", "-J"],
                            capture_output=True, text=True, timeout=30, check=True).stdout
    return {entry["topic"]: len(entry["partitions"]) for entry in json.loads(listed)["topics"]}


# --- kafka-python -----------------------------------------------------------------------------------------------------

def test_kafka_python_creates_grows_trims_and_deletes_a_topic(broker, reference, kafka_python_admin, topic):
    from kafka import TopicPartition
    admin = kafka_python_admin
    created = admin.create_topics({topic: {"num_partitions": 3, "replication_factor": 1,
                                           "configs": {"retention.ms": "3600000"}}})
    [result] = created["topics"]
    assert (result["error_code"], result["num_partitions"], result["replication_factor"]) == (0, 3, 1)
    assert result["configs"]["retention.ms"]["value"] == "3600000"
    assert result["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert kcat_topics(broker)[topic] == 3
    assert partition_dirs(broker, topic) == [f"{topic}-{p}" for p in range(3)]

    admin.create_partitions({topic: 5})
    [described] = admin.describe_topics([topic])
    assert sorted(p["partition_index"] for p in described["partitions"]) == [0, 1, 2, 3, 4]
    assert kcat_topics(broker)[topic] == 5

    reference.produce(broker.bootstrap, topic, [Record(None, f"v{i}".encode(), partition=4) for i in range(6)])
    trimmed = admin.delete_records({TopicPartition(topic, 4): 4})
    assert trimmed[TopicPartition(topic, 4)]["low_watermark"] == 4
    assert reference.list_offsets(broker.bootstrap, topic, 4, 0)[:2] == (4, 6)

    [dirs] = admin.describe_log_dirs()
    [log_dir] = dirs["log_dirs"]
    assert log_dir["log_dir"] == os.path.abspath(broker.data_dir)
    sizes = {p["partition_index"]: p["partition_size"] for t in log_dir["topics"] if t["name"] == topic
             for p in t["partitions"]}
    assert sorted(sizes) == [0, 1, 2, 3, 4] and sizes[4] > 0 and sizes[0] == 0
    assert log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0

    deleted = admin.delete_topics([uuid.UUID(result["topic_id"])])  # by topic id (DeleteTopics v6)
    assert [(t["name"], t["error_code"]) for t in deleted["topics"]] == [(topic, 0)]
    assert topic not in admin.list_topics()
    assert topic not in kcat_topics(broker)
    assert partition_dirs(broker, topic) == []


def test_kafka_python_sees_kafkas_errors(broker, kafka_python_admin, topic):
    from kafka.errors import (InvalidPartitionsError, InvalidReplicationFactorError, InvalidTopicError,
                              TopicAlreadyExistsError, UnknownTopicOrPartitionError)
    admin = kafka_python_admin
    admin.create_topics({topic: {"num_partitions": 2}})
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics({topic: {"num_partitions": 2}})
    with pytest.raises(InvalidReplicationFactorError):
        admin.create_topics({f"{topic}.r3": {"num_partitions": 1, "replication_factor": 3}})
    with pytest.raises(InvalidTopicError):
        admin.create_topics({"not a topic": {"num_partitions": 1}})
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({topic: 2})
    dry = admin.create_topics({f"{topic}.dry": {"num_partitions": 1}}, validate_only=True)
    assert dry["topics"][0]["error_code"] == 0
    assert f"{topic}.dry" not in admin.list_topics()
    admin.delete_topics([topic])
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics([topic])


def test_kafka_python_describes_the_cluster(broker, kafka_python_admin):
    cluster = kafka_python_admin.describe_cluster()
    assert cluster["controller_id"] == 1
    assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [(1, broker.host, broker.port)]
    assert f"cluster.id={cluster['cluster_id']}\n" in (broker.data_dir / "meta.properties").read_text()


def test_a_deleted_topic_comes_back_empty(broker, reference, kafka_python_admin, topic):
    admin = kafka_python_admin
    first = admin.create_topics({topic: {"num_partitions": 1}})["topics"][0]["topic_id"]
    reference.produce(broker.bootstrap, topic, [Record(None, b"before")])
    admin.delete_topics([topic])
    second = admin.create_topics({topic: {"num_partitions": 1}})["topics"][0]["topic_id"]
    assert second != first
    assert reference.list_offsets(broker.bootstrap, topic, 0, 0)[:2] == (0, 0)
    reference.produce(broker.bootstrap, topic, [Record(None, b"after")])
    assert [c.value for c in reference.consume(broker.bootstrap, topic, 1)] == [b"after"]


# --- confluent-kafka --------------------------------------------------------------------------------------------------

@pytest.fixture
def confluent_admin(broker):
    clients.load_or_fail("confluent-kafka")
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4"})


def test_confluent_kafka_creates_grows_trims_and_deletes_a_topic(broker, reference, confluent_admin, topic):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import NewPartitions, NewTopic
    admin = confluent_admin
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1,
                                  config={"cleanup.policy": "delete", "retention.ms": "3600000"})],
                        request_timeout=15)[topic].result()
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 2
    admin.create_partitions([NewPartitions(topic, 4)], request_timeout=15)[topic].result()
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 4
    assert kcat_topics(broker)[topic] == 4

    reference.produce(broker.bootstrap, topic, [Record(None, f"v{i}".encode(), partition=3) for i in range(5)])
    deleted = admin.delete_records([TopicPartition(topic, 3, 3)], request_timeout=15)
    assert [(tp.partition, future.result().low_watermark) for tp, future in deleted.items()] == [(3, 3)]

    cluster = admin.describe_cluster(request_timeout=15).result()
    assert cluster.controller.id == 1 and [node.id for node in cluster.nodes] == [1]
    assert cluster.cluster_id and cluster.cluster_id == admin.list_topics(timeout=10).cluster_id

    admin.delete_topics([topic], request_timeout=15)[topic].result()
    assert topic not in admin.list_topics(timeout=10).topics
    assert partition_dirs(broker, topic) == []


def test_confluent_kafka_sees_kafkas_errors(broker, confluent_admin, topic):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewPartitions, NewTopic
    admin = confluent_admin

    def error_of(future) -> int:
        with pytest.raises(KafkaException) as raised:
            future.result()
        return raised.value.args[0].code()

    admin.create_topics([NewTopic(topic, num_partitions=1)], request_timeout=15)[topic].result()
    existing = admin.create_topics([NewTopic(topic, num_partitions=1)], request_timeout=15)[topic]
    assert error_of(existing) == KafkaError.TOPIC_ALREADY_EXISTS
    three = admin.create_topics([NewTopic(f"{topic}.r3", num_partitions=1, replication_factor=3)],
                                request_timeout=15)[f"{topic}.r3"]
    assert error_of(three) == KafkaError.INVALID_REPLICATION_FACTOR
    bad_config = admin.create_topics([NewTopic(f"{topic}.cfg", num_partitions=1, config={"retention.ms": "soon"})],
                                     request_timeout=15)[f"{topic}.cfg"]
    assert error_of(bad_config) == KafkaError.INVALID_CONFIG
    shrink = admin.create_partitions([NewPartitions(topic, 1)], request_timeout=15)[topic]
    assert error_of(shrink) == KafkaError.INVALID_PARTITIONS
    admin.create_topics([NewTopic(f"{topic}.dry", num_partitions=1)], validate_only=True,
                        request_timeout=15)[f"{topic}.dry"].result()
    assert f"{topic}.dry" not in admin.list_topics(timeout=10).topics
    missing = admin.delete_topics([f"{topic}.missing"], request_timeout=15)[f"{topic}.missing"]
    assert error_of(missing) == KafkaError.UNKNOWN_TOPIC_OR_PART


# --- kafkajs ----------------------------------------------------------------------------------------------------------

def test_kafkajs_admin(broker, topic, tmp_path):
    adapter = clients.load_or_fail("kafkajs")
    script = tmp_path / "kafkajs_admin.js"
    script.write_text(KAFKAJS_ADMIN_SCRIPT)
    done = subprocess.run([adapter.node, str(script)], input=json.dumps({"brokers": broker.bootstrap,
                                                                         "topic": topic}).encode(),
                          capture_output=True, timeout=90, env=dict(os.environ, NODE_PATH=str(adapter.node_modules)),
                          check=False)
    lines = done.stdout.decode(errors="replace").splitlines()
    results = [json.loads(line[len("RESULT "):]) for line in lines if line.startswith("RESULT ")]
    assert done.returncode == 0 and results, f"kafkajs: {lines}\n{done.stderr.decode(errors='replace')[-2000:]}"
    out = results[0]
    assert (out["created"], out["createdAgain"], out["validated"]) == (True, False, True)
    assert out["threeReplicas"] == ["INVALID_REPLICATION_FACTOR"]
    assert out["partitions"] == [0, 1, 2, 3]
    offsets = {o["partition"]: (o["low"], o["high"]) for o in out["offsets"]}
    assert offsets == {0: ("0", "0"), 1: ("0", "0"), 2: ("0", "0"), 3: ("2", "5")}
    assert out["cluster"]["controller"] == 1
    assert [(b["nodeId"], b["port"]) for b in out["cluster"]["brokers"]] == [(1, broker.port)]
    assert topic in out["listedBefore"] and f"{topic}.dry" not in out["listedBefore"]
    assert topic not in out["listedAfter"]
    assert partition_dirs(broker, topic) == []


# --- aiokafka ---------------------------------------------------------------------------------------------------------

# Kafka's error codes, as aiokafka hands them over (its create_topics and delete_topics return the responses)
TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR = 36, 37, 38


def test_aiokafka_creates_grows_trims_and_deletes_a_topic(broker, reference, topic):
    clients.load_or_fail("aiokafka")
    out = asyncio.run(_aiokafka_admin_session(broker.bootstrap, topic, reference))
    assert out["created"] == [(topic, 0)]
    assert out["again"] == [(topic, TOPIC_ALREADY_EXISTS)]
    assert out["three_replicas"] == [(f"{topic}.r3", INVALID_REPLICATION_FACTOR)]
    assert out["dry_run"] == [(f"{topic}.dry", 0)] and f"{topic}.dry" not in out["listed_before"]
    assert out["shrink"] == "InvalidPartitionsError"
    assert out["partitions"] == [0, 1, 2, 3, 4]
    assert out["low_watermarks"] == {4: 4} and out["offsets_after_trim"] == (4, 6)
    assert (out["cluster"]["controller_id"], out["cluster"]["brokers"]) == (1, [(1, broker.host, broker.port)])
    assert topic in out["listed_before"] and topic not in out["listed_after"]
    assert out["deleted"] == [(topic, 0)]
    assert topic not in kcat_topics(broker)
    assert partition_dirs(broker, topic) == []


async def _aiokafka_admin_session(bootstrap: str, topic: str, reference) -> dict:
    """One AIOKafkaAdminClient through the whole life of a topic; what each step answered."""
    from aiokafka import TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
    from aiokafka.errors import KafkaError

    def errors(response) -> list[tuple[str, int]]:
        return [(name, code) for name, code, *_ in response.topic_errors]

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    await admin.start()
    out: dict = {}
    try:
        created = await admin.create_topics([NewTopic(topic, 3, 1, topic_configs={"retention.ms": "3600000"})])
        out["created"] = errors(created)
        out["again"] = errors(await admin.create_topics([NewTopic(topic, 3, 1)]))
        out["three_replicas"] = errors(await admin.create_topics([NewTopic(f"{topic}.r3", 1, 3)]))
        out["dry_run"] = errors(await admin.create_topics([NewTopic(f"{topic}.dry", 1, 1)], validate_only=True))
        await admin.create_partitions({topic: NewPartitions(5)})
        try:
            await admin.create_partitions({topic: NewPartitions(2)})
            out["shrink"] = "accepted"
        except KafkaError as exc:  # aiokafka raises the error class of the code
            out["shrink"] = type(exc).__name__
        [described] = await admin.describe_topics([topic])
        out["partitions"] = sorted(p["partition"] for p in described["partitions"])
        await asyncio.to_thread(reference.produce, bootstrap, topic,
                                [Record(None, f"v{i}".encode(), partition=4) for i in range(6)])
        trimmed = await admin.delete_records({TopicPartition(topic, 4): RecordsToDelete(before_offset=4)})
        out["low_watermarks"] = {tp.partition: low for tp, low in trimmed.items()}
        out["offsets_after_trim"] = (await asyncio.to_thread(reference.list_offsets, bootstrap, topic, 4, 0))[:2]
        cluster = await admin.describe_cluster()
        out["cluster"] = {"controller_id": cluster["controller_id"],
                          "brokers": [(b["node_id"], b["host"], b["port"]) for b in cluster["brokers"]]}
        out["listed_before"] = await admin.list_topics()
        out["deleted"] = errors_of_deletion(await admin.delete_topics([topic]))
        out["listed_after"] = await admin.list_topics()
    finally:
        await admin.close()
    return out


def errors_of_deletion(response) -> list[tuple[str, int]]:
    return [(name, code) for name, code, *_ in response.topic_error_codes]


# --- sarama -----------------------------------------------------------------------------------------------------------

UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION = 3, 17


def test_sarama_creates_grows_trims_and_deletes_a_topic(broker, reference, topic):
    """sarama 1.22's ClusterAdmin with its 2.1 protocol: CreateTopics v2, CreatePartitions v0, DeleteRecords v0,
    Metadata v5 (and v0 to list), DescribeConfigs v0, DeleteTopics v1."""
    sarama = clients.load_or_fail("sarama")
    calls = [
        {"call": "create_topic", "topic": topic, "partitions": 3, "replication": 1,
         "configs": {"retention.ms": "3600000"}},
        {"call": "create_topic", "topic": topic, "partitions": 3, "replication": 1},
        {"call": "create_topic", "topic": f"{topic}.r3", "partitions": 1, "replication": 3},
        {"call": "create_topic", "topic": "not a topic", "partitions": 1, "replication": 1},
        {"call": "create_topic", "topic": f"{topic}.dry", "partitions": 1, "replication": 1, "validate_only": True},
        {"call": "create_partitions", "topic": topic, "partitions": 5},
        {"call": "create_partitions", "topic": topic, "partitions": 2},
        {"call": "describe_topics", "topics": [topic]},
        {"call": "list_topics"},
        {"call": "describe_cluster"},
    ]
    answers = sarama.admin(broker.bootstrap, *calls)
    codes = [answer["error_code"] if answer["error"] else 0 for answer in answers]
    assert codes[:7] == [0, TOPIC_ALREADY_EXISTS, INVALID_REPLICATION_FACTOR, INVALID_TOPIC_EXCEPTION, 0, 0,
                         INVALID_PARTITIONS], [answer["error"] for answer in answers]
    described, listed, cluster = (answer["result"] for answer in answers[7:])
    assert described[topic] == {"error": 0, "leaders": {str(p): 1 for p in range(5)}}
    # ListTopics keeps the configs that DescribeConfigs v0 does not mark as defaults: the topic's own, and the one
    # that comes from the broker's properties (the fixture sets message.max.bytes)
    assert listed[topic] == {"partitions": 5, "replication": 1, "configs": {
        "retention.ms": "3600000", "max.message.bytes": str(MAX_MESSAGE_BYTES)}}
    assert f"{topic}.dry" not in listed and f"{topic}.r3" not in listed
    # DescribeCluster asks Metadata v0, which has no controller field (sarama reports -1, against Kafka too);
    # NewClusterAdmin found the controller with its v5 request, or no call would have been made
    assert cluster == {"controller": -1, "brokers": {"1": f"{broker.host}:{broker.port}"}}
    assert kcat_topics(broker)[topic] == 5

    reference.produce(broker.bootstrap, topic, [Record(None, f"v{i}".encode(), partition=4) for i in range(6)])
    sarama.admin_results(broker.bootstrap, {"call": "delete_records", "topic": topic, "offsets": {"4": 4}})
    assert reference.list_offsets(broker.bootstrap, topic, 4, 0)[:2] == (4, 6)  # sarama ignores partition errors
    sarama.admin_results(broker.bootstrap, {"call": "delete_topic", "topic": topic})
    assert topic not in kcat_topics(broker)
    assert partition_dirs(broker, topic) == []
    [missing] = sarama.admin(broker.bootstrap, {"call": "delete_topic", "topic": topic})
    assert missing["error_code"] == UNKNOWN_TOPIC_OR_PARTITION, missing


# --- kcat -------------------------------------------------------------------------------------------------------------

def test_kcat_lists_created_topics_and_forgets_deleted_ones(broker, kafka_python_admin, topic):
    kafka_python_admin.create_topics({f"{topic}.a": {"num_partitions": 2}, f"{topic}.b": {"num_partitions": 7}})
    listed = kcat_topics(broker)
    assert (listed[f"{topic}.a"], listed[f"{topic}.b"]) == (2, 7)
    kafka_python_admin.delete_topics([f"{topic}.a"])
    listed = kcat_topics(broker)
    assert f"{topic}.a" not in listed and listed[f"{topic}.b"] == 7


# --- a consumer group notices new partitions --------------------------------------------------------------------------

class _Member(threading.Thread):
    """A subscribed consumer polling in a thread of its own. It publishes its assignment and what it read under the
    shared condition, and stops when asked. Metadata is refreshed every 500 ms (Kafka's clients wait 5 minutes by
    default), so that the group notices new partitions while the test waits."""

    def __init__(self, client: str, bootstrap: str, topic: str, group: str, changed: threading.Condition):
        super().__init__(daemon=True)
        self.client, self.bootstrap, self.topic, self.group = client, bootstrap, topic, group
        self.changed = changed
        self.assignment: frozenset[int] = frozenset()
        self.read: set[tuple[int, bytes]] = set()
        self.failure: BaseException | None = None
        self.stopping = threading.Event()

    def run(self) -> None:
        try:
            poll, assignment, close = (self._kafka_python if self.client == "kafka-python" else self._confluent)()
            try:
                while not self.stopping.is_set():
                    got = poll()
                    with self.changed:
                        self.read.update(got)
                        self.assignment = frozenset(assignment())
                        self.changed.notify_all()
            finally:
                close()
        except BaseException as exc:  # noqa: BLE001 - reported to the waiting test
            with self.changed:
                self.failure = exc
                self.changed.notify_all()

    def _kafka_python(self):
        from kafka import KafkaConsumer
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.group, metadata_max_age_ms=500,
                                 auto_offset_reset="earliest", session_timeout_ms=MEMBER_SESSION_MS,
                                 heartbeat_interval_ms=1000, client_id=f"compat-grow-{uuid.uuid4().hex[:6]}")
        consumer.subscribe([self.topic])
        consumer.topics()  # metadata before the first join (see kafka_python_client.run_member)

        def poll():
            return {(r.partition, r.value) for records in consumer.poll(timeout_ms=200).values() for r in records}

        return poll, lambda: {tp.partition for tp in consumer.assignment()}, consumer.close

    def _confluent(self):
        from confluent_kafka import Consumer
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                             "broker.address.family": "v4", "topic.metadata.refresh.interval.ms": 500,
                             "auto.offset.reset": "earliest", "session.timeout.ms": MEMBER_SESSION_MS,
                             "heartbeat.interval.ms": 1000})
        consumer.subscribe([self.topic])

        def poll():
            messages = consumer.consume(num_messages=100, timeout=0.2)
            failed = [m.error() for m in messages if m.error()]
            if failed:
                raise AssertionError(f"confluent-kafka member: {failed[0]}")
            return {(m.partition(), m.value()) for m in messages}

        return poll, lambda: {tp.partition for tp in consumer.assignment()}, consumer.close


def _wait_until(members: list[_Member], condition: Callable[[], object], what: str):
    changed = members[0].changed
    deadline = time.monotonic() + WAIT_S
    with changed:
        while True:
            failed = [m.failure for m in members if m.failure is not None]
            if failed:
                raise AssertionError(f"a member failed while waiting until {what}") from failed[0]
            result = condition()
            if result:
                return result
            left = deadline - time.monotonic()
            assert left > 0, f"not within {WAIT_S} s: {what}; assignments {[sorted(m.assignment) for m in members]}"
            changed.wait(left)


def _split(members: list[_Member], partitions: set[int]) -> bool:
    owned = [m.assignment for m in members]
    return sum(map(len, owned)) == len(partitions) and set().union(*owned) == partitions and all(owned)


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka"])
def test_a_group_rebalances_onto_added_partitions(broker, reference, kafka_python_admin, topic, client):
    clients.load_or_fail(client)
    kafka_python_admin.create_topics({topic: {"num_partitions": 2}})
    changed = threading.Condition()
    members = [_Member(client, broker.bootstrap, topic, f"group.{topic}", changed) for _ in range(2)]
    for member in members:
        member.start()
    try:
        _wait_until(members, lambda: _split(members, {0, 1}), "the two members own a partition each")
        kafka_python_admin.create_partitions({topic: 4})
        _wait_until(members, lambda: _split(members, {0, 1, 2, 3}), "the members share the four partitions")
        reference.produce(broker.bootstrap, topic, [Record(None, b"new-partition", partition=3)])
        owner = _wait_until(members, lambda: next((m for m in members if (3, b"new-partition") in m.read), None),
                            "a member reads the record of partition 3")
        assert 3 in owner.assignment
    finally:
        for member in members:
            member.stopping.set()
        for member in members:
            member.join(timeout=WAIT_S)
