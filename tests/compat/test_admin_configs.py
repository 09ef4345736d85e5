"""Topic and broker configs through real admin clients: kafka-python's KafkaAdminClient, confluent-kafka's
AdminClient, kafkajs' admin and sarama's ClusterAdmin describe and alter configs, the values round-trip and survive a
broker restart, and a topic's compression.type recompresses what producers send, which every client then reads back
unchanged."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from . import clients
from .records import CODEC_IDS, CODECS, MAX_MESSAGE_BYTES, assert_same, numbered, stored_batches

TIMEOUT_S = 60  # a bound on each admin call, generous for loaded machines


def create(bootstrap: str, reference, topic: str) -> None:
    """The topic, made by auto-creation: one record produced by kafka-python."""
    reference.produce(bootstrap, topic, numbered(1, "seed"))


@pytest.fixture
def kafka_python_admin(fresh_broker):
    from kafka.admin import KafkaAdminClient
    made = []

    def connect():
        made.append(KafkaAdminClient(bootstrap_servers=fresh_broker.bootstrap, request_timeout_ms=TIMEOUT_S * 1000))
        return made[-1]
    yield connect
    for admin in made:
        admin.close()


def confluent_admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap})


def settled(futures: dict) -> dict:
    """The results of a confluent-kafka futures dict, keyed by resource name."""
    return {resource.name: future.result(timeout=TIMEOUT_S) for resource, future in futures.items()}


# --- kafka-python -------------------------------------------------------------------------------------------------

def test_kafka_python_describes_alters_and_keeps_topic_configs(fresh_broker, reference, topic, kafka_python_admin):
    from kafka.admin import ConfigResource
    from kafka.errors import InvalidConfigurationError
    create(fresh_broker.bootstrap, reference, topic)
    admin = kafka_python_admin()
    everything = admin.describe_configs([ConfigResource("TOPIC", topic)], config_filter="all")["topic"][topic]
    assert len(everything) == 33
    assert everything["retention.ms"]["value"] == "604800000"
    assert everything["retention.ms"]["config_source"] == "DEFAULT_CONFIG"

    changes = {"retention.ms": "123456", "cleanup.policy": ("APPEND", "compact")}
    assert admin.alter_configs([ConfigResource("TOPIC", topic, configs=changes)]) == {"topic": {topic: "OK"}}
    legacy = admin.alter_configs([ConfigResource("TOPIC", topic, configs={"segment.ms": "99999"})],
                                 incremental=False)  # kafka-python re-sends the other overrides itself
    assert legacy == {"topic": {topic: "OK"}}
    refused = admin.alter_configs([ConfigResource("TOPIC", topic, configs={"retention.ms": "soon"})])
    assert f"[Error 40] {InvalidConfigurationError.__name__}" in refused["topic"][topic]

    expected = {"retention.ms": "123456", "cleanup.policy": "delete,compact", "segment.ms": "99999"}
    modified = admin.describe_configs([ConfigResource("TOPIC", topic)])["topic"][topic]
    assert {name: entry["value"] for name, entry in modified.items()} == expected
    assert {entry["config_source"] for entry in modified.values()} == {"DYNAMIC_TOPIC_CONFIG"}
    admin.close()

    fresh_broker.restart()
    again = kafka_python_admin().describe_configs([ConfigResource("TOPIC", topic)])["topic"][topic]
    assert {name: entry["value"] for name, entry in again.items()} == expected


def test_kafka_python_describes_the_broker(fresh_broker, kafka_python_admin):
    from kafka.admin import ConfigResource
    found = kafka_python_admin().describe_configs([ConfigResource("BROKER", "1")], config_filter="all",
                                                  include_synonyms=True)["broker"]["1"]
    assert found["num.partitions"]["value"] == "1" and found["num.partitions"]["read_only"]
    assert found["message.max.bytes"]["config_source"] == "STATIC_BROKER_CONFIG"  # the fixture sets it
    assert not found["log.retention.ms"]["read_only"] and found["log.retention.hours"]["value"] == "168"


# --- confluent-kafka ----------------------------------------------------------------------------------------------

def test_confluent_describe_alter_and_incremental_alter(fresh_broker, reference, topic):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType
    create(fresh_broker.bootstrap, reference, topic)
    admin = confluent_admin(fresh_broker.bootstrap)
    found = settled(admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]))[topic]
    assert len(found) == 33 and found["segment.bytes"].value == "1073741824"
    assert found["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert not found["segment.bytes"].is_read_only

    operations = [ConfigEntry("retention.ms", "777", incremental_operation=AlterConfigOpType.SET),
                  ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
                  ConfigEntry("max.message.bytes", "64000", incremental_operation=AlterConfigOpType.SET)]
    settled(admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, topic,
                                                            incremental_configs=operations)]))
    settled(admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("max.message.bytes", None, incremental_operation=AlterConfigOpType.DELETE)])]))
    found = settled(admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]))[topic]
    assert (found["retention.ms"].value, found["cleanup.policy"].value) == ("777", "delete,compact")
    assert found["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert (found["max.message.bytes"].value, found["max.message.bytes"].source) == (
        str(MAX_MESSAGE_BYTES), ConfigSource.STATIC_BROKER_CONFIG.value)  # back to the broker's message.max.bytes

    with pytest.raises(KafkaException) as append_to_a_number:
        settled(admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND)])]))
    assert append_to_a_number.value.args[0].code() == KafkaError.INVALID_CONFIG
    with pytest.raises(KafkaException) as missing:
        settled(admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic + ".missing")]))
    assert missing.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    fresh_broker.restart()
    admin = confluent_admin(fresh_broker.bootstrap)
    found = settled(admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]))[topic]
    assert (found["retention.ms"].value, found["cleanup.policy"].value) == ("777", "delete,compact")
    settled(admin.alter_configs([ConfigResource(ResourceType.TOPIC, topic, set_config={"segment.ms": "5000"})]))
    found = settled(admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]))[topic]
    assert found["segment.ms"].value == "5000"
    assert found["retention.ms"].value == "604800000"  # AlterConfigs replaced the whole set


def test_confluent_broker_configs_and_the_dynamic_change_refusal(fresh_broker):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    admin = confluent_admin(fresh_broker.bootstrap)
    found = settled(admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")]))["1"]
    assert found["auto.create.topics.enable"].value == "true" and found["auto.create.topics.enable"].is_read_only
    assert found["ssl.key.password"].is_sensitive and found["ssl.key.password"].value is None
    with pytest.raises(KafkaException) as static:
        settled(admin.incremental_alter_configs([ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
            ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)])]))
    assert static.value.args[0].code() == KafkaError.INVALID_REQUEST


# --- kafkajs ------------------------------------------------------------------------------------------------------

KAFKAJS_SCRIPT = r"""
'use strict'
const { Kafka, ConfigResourceTypes, logLevel } = require('kafkajs')
const spec = JSON.parse(process.argv[1])
const admin = new Kafka({ clientId: 'compat-configs', brokers: [spec.brokers], logLevel: logLevel.ERROR }).admin()
async function main () {
  await admin.connect()
  try {
    const type = ConfigResourceTypes[spec.type]
    if (spec.alter) {
      await admin.alterConfigs({ validateOnly: false, resources: [{ type, name: spec.name,
        configEntries: Object.entries(spec.alter).map(([name, value]) => ({ name, value })) }] })
    }
    const described = await admin.describeConfigs({ includeSynonyms: true,
      resources: [{ type, name: spec.name }] })
    const resource = described.resources[0]
    const entries = {}
    for (const entry of resource.configEntries) {
      entries[entry.configName] = { value: entry.configValue, readOnly: entry.readOnly, source: entry.configSource,
        synonyms: entry.configSynonyms.map(s => s.configName) }
    }
    console.log('RESULT ' + JSON.stringify({ errorCode: resource.errorCode, entries }))
  } finally {
    await admin.disconnect()
  }
}
main().catch(error => { console.log('ERROR ' + JSON.stringify({ name: error.name, message: error.message,
  type: error.type })); process.exit(1) })
"""


def kafkajs(bootstrap: str, **spec) -> dict:
    client = clients.load("kafkajs")  # fails with the install command when kafkajs is missing
    done = subprocess.run([client.node, "-e", KAFKAJS_SCRIPT, json.dumps({"brokers": bootstrap, **spec})],
                          capture_output=True, timeout=60, check=False,
                          env=dict(os.environ, NODE_PATH=str(client.node_modules)))
    lines = done.stdout.decode(errors="replace").splitlines()
    result = next((line for line in lines if line.startswith(("RESULT ", "ERROR "))), None)
    assert result is not None, f"kafkajs printed no result: {done.stderr.decode(errors='replace')[-1500:]}"
    kind, _, payload = result.partition(" ")
    return {"error": json.loads(payload)} if kind == "ERROR" else json.loads(payload)


def test_kafkajs_describe_and_alter_configs(fresh_broker, reference, topic):
    create(fresh_broker.bootstrap, reference, topic)
    first = kafkajs(fresh_broker.bootstrap, type="TOPIC", name=topic)
    assert first["errorCode"] == 0 and len(first["entries"]) == 33
    assert first["entries"]["retention.ms"]["value"] == "604800000"
    changed = kafkajs(fresh_broker.bootstrap, type="TOPIC", name=topic,
                      alter={"retention.ms": "4242", "compression.type": "lz4"})
    assert changed["entries"]["retention.ms"] == {"value": "4242", "readOnly": False, "source": 1,
                                                  "synonyms": ["retention.ms"]}
    assert changed["entries"]["compression.type"]["value"] == "lz4"
    refused = kafkajs(fresh_broker.bootstrap, type="TOPIC", name=topic, alter={"retention.ms": "soon"})
    assert refused["error"]["type"] == "INVALID_CONFIG"
    broker_side = kafkajs(fresh_broker.bootstrap, type="BROKER", name="1")
    assert broker_side["entries"]["num.partitions"]["readOnly"]

    fresh_broker.restart()
    again = kafkajs(fresh_broker.bootstrap, type="TOPIC", name=topic)
    assert (again["entries"]["retention.ms"]["value"], again["entries"]["compression.type"]["value"]) == (
        "4242", "lz4")


# --- sarama -------------------------------------------------------------------------------------------------------

def test_sarama_describes_alters_and_keeps_topic_configs(fresh_broker, reference, topic):
    """sarama 1.22's ClusterAdmin sends DescribeConfigs v0 (is_default instead of a source) and AlterConfigs v0, whose
    new set of overrides replaces the old one. It reports a resource's error only when the broker adds a message."""
    sarama = clients.load_or_fail("sarama")
    bootstrap = fresh_broker.bootstrap
    create(bootstrap, reference, topic)

    def describe(name: str = topic, resource_type: str = "topic") -> dict:
        [found] = sarama.admin_results(bootstrap, {"call": "describe_config", "resource_type": resource_type,
                                                   "name": name})
        return found

    def alter(configs: dict, **options) -> dict:
        [answer] = sarama.admin(bootstrap, {"call": "alter_config", "resource_type": "topic", "name": topic,
                                            "configs": configs, **options})
        return answer

    def non_defaults() -> dict:
        return {name: entry["value"] for name, entry in describe().items() if not entry["default"]}

    everything = describe()
    assert len(everything) == 33
    assert everything["retention.ms"] == {"value": "604800000", "default": True, "read_only": False,
                                          "sensitive": False}
    assert everything["max.message.bytes"]["default"] is False  # from the broker's properties, not Kafka's default

    assert alter({"retention.ms": "123456", "cleanup.policy": "compact"})["error"] is None
    assert alter({"segment.ms": "1"}, validate_only=True)["error"] is None
    refused = alter({"retention.ms": "soon"})["error"]
    assert refused and "retention.ms" in refused, refused
    expected = {"retention.ms": "123456", "cleanup.policy": "compact", "max.message.bytes": str(MAX_MESSAGE_BYTES)}
    assert non_defaults() == expected

    fresh_broker.restart()
    assert non_defaults() == expected
    assert alter({"segment.ms": "5000"})["error"] is None  # the whole set: retention.ms and cleanup.policy go back
    assert non_defaults() == {"segment.ms": "5000", "max.message.bytes": str(MAX_MESSAGE_BYTES)}
    assert describe(topic + ".missing") == {}  # UNKNOWN_TOPIC_OR_PARTITION without a message: sarama sees none

    broker_side = describe("1", "broker")  # Kafka's BROKER resource type (4), sarama's ClusterResource
    assert (broker_side["num.partitions"]["value"], broker_side["num.partitions"]["read_only"]) == ("1", True)
    assert broker_side["message.max.bytes"]["default"] is False  # the fixture sets it
    [sarama_broker] = sarama.admin(bootstrap, {"call": "describe_config", "resource_type": "sarama-broker",
                                               "name": "1"})  # sarama 1.22's own BrokerResource: type 5
    assert sarama_broker["error"], "a config resource of type 5 must be refused (INVALID_REQUEST)"


# --- recompression, read back by every client ---------------------------------------------------------------------

def test_topics_recompress_what_producers_send_and_every_client_reads_it_back(broker, reference, client, topic):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    admin = confluent_admin(broker.bootstrap)
    sent = numbered(20, "recompressed", key_every=3, size=200)
    for codec, produced_with in zip(CODECS, (None, "gzip", "snappy", "lz4")):
        name = f"{topic}.{codec}"
        create(broker.bootstrap, reference, name)
        settled(admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
            ConfigEntry("compression.type", codec, incremental_operation=AlterConfigOpType.SET)])]))
        reference.produce(broker.bootstrap, name, sent, compression=produced_with)
        stored = stored_batches(broker.segment_files(name, 0))
        assert {batch.codec for batch in stored[1:]} == {CODEC_IDS[codec]}  # the seed record predates the config
        got = client.consume(broker.bootstrap, name, len(sent) + 1, timeout_s=TIMEOUT_S)
        assert_same(sent, got[1:])
