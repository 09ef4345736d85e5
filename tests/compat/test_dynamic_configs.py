"""Dynamic broker configs through real admin clients: confluent-kafka's AdminClient and kafka-python's
KafkaAdminClient alter `message.max.bytes` of the broker (neither can name the cluster default, the BROKER resource
"": librdkafka refuses an empty resource name, kafka-python routes BROKER resources by their numeric name), and a
cluster-wide default set as `kafka-configs.sh --entity-default` does holds for both; the new limit holds for each
client's next produce at once, and again after a restart. And the topic configs Kafka 4.0 removed:
created and described as Kafka 3.9 does under `emulate="3.9"`, refused as Kafka 4.x refuses them otherwise."""
from __future__ import annotations

import pytest

from compatbroker import EmbeddedBroker

TIMEOUT_S = 60  # a bound on each client call, generous for loaded machines
LIMIT = 5000    # the lowered message.max.bytes
VALUE = b"v" * 20_000  # larger than LIMIT, far below every default limit


@pytest.fixture
def embedded():
    with EmbeddedBroker() as broker:
        broker.create_topic("sized", partitions=1)
        yield broker


def settled(futures: dict) -> dict:
    return {resource.name: future.result(timeout=TIMEOUT_S) for resource, future in futures.items()}


def confluent_produce(bootstrap: str, value: bytes):
    """The delivery error of one record (None when it was written)."""
    from confluent_kafka import Producer
    outcome = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 1_000_000, "retries": 0})
    producer.produce("sized", value, on_delivery=lambda error, _message: outcome.append(error))
    assert producer.flush(TIMEOUT_S) == 0
    return outcome[0]


def kafka_python_produce(bootstrap: str, value: bytes):
    """The exception of one send (None when it was written)."""
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, retries=0, max_request_size=1_000_000)
    try:
        producer.send("sized", value).get(timeout=TIMEOUT_S)
        return None
    except Exception as exc:  # noqa: BLE001 - the test looks at which error it is
        return exc
    finally:
        producer.close()


@pytest.mark.matrix(client="confluent-kafka", flow="admin_configs")
def test_confluent_alters_message_max_bytes_live_and_after_restart(embedded):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                       ResourceType)
    admin = AdminClient({"bootstrap.servers": embedded.bootstrap_servers})
    assert confluent_produce(embedded.bootstrap_servers, VALUE) is None
    settled(admin.incremental_alter_configs([ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("message.max.bytes", str(LIMIT), incremental_operation=AlterConfigOpType.SET)])]))
    assert confluent_produce(embedded.bootstrap_servers, VALUE).code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert confluent_produce(embedded.bootstrap_servers, b"small") is None
    found = settled(admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")]))["1"]["message.max.bytes"]
    assert (found.value, found.source) == (str(LIMIT), ConfigSource.DYNAMIC_BROKER_CONFIG.value)

    embedded.restart()
    assert confluent_produce(embedded.bootstrap_servers, VALUE).code() == KafkaError.MSG_SIZE_TOO_LARGE
    admin = AdminClient({"bootstrap.servers": embedded.bootstrap_servers})
    settled(admin.incremental_alter_configs([ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("message.max.bytes", None, incremental_operation=AlterConfigOpType.DELETE)])]))
    assert confluent_produce(embedded.bootstrap_servers, VALUE) is None


@pytest.mark.matrix(client="confluent-kafka", flow="admin_configs")
def test_a_cluster_wide_default_holds_for_every_client_live_and_after_restart(embedded):
    """librdkafka and kafka-python cannot name the cluster default (an empty BROKER resource name), so it is set as
    `kafka-configs.sh --entity-default` sets it, here through compatbroker's own admin client."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType
    from kafka.errors import MessageSizeTooLargeError

    from compatbroker.client import ClientConfig, KafkaClient
    from compatbroker.client.admin import Admin

    def set_default(value):
        with KafkaClient(ClientConfig(bootstrap=embedded.bootstrap_servers)) as client:
            Admin(client).incremental_alter_configs("BROKER", "", [("message.max.bytes", "SET", value)])

    set_default(str(LIMIT))
    assert confluent_produce(embedded.bootstrap_servers, VALUE).code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert isinstance(kafka_python_produce(embedded.bootstrap_servers, VALUE), MessageSizeTooLargeError)
    admin = AdminClient({"bootstrap.servers": embedded.bootstrap_servers})
    found = settled(admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")]))["1"]["message.max.bytes"]
    assert (found.value, found.source) == (str(LIMIT), ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    embedded.restart()
    assert confluent_produce(embedded.bootstrap_servers, VALUE).code() == KafkaError.MSG_SIZE_TOO_LARGE
    set_default("100000")
    assert confluent_produce(embedded.bootstrap_servers, VALUE) is None
    assert kafka_python_produce(embedded.bootstrap_servers, VALUE) is None


@pytest.mark.matrix(client="kafka-python", flow="admin_configs")
def test_kafka_python_alters_message_max_bytes_live_and_after_restart(embedded):
    from kafka.admin import ConfigResource, KafkaAdminClient
    from kafka.errors import MessageSizeTooLargeError

    def admin():
        return KafkaAdminClient(bootstrap_servers=embedded.bootstrap_servers, request_timeout_ms=TIMEOUT_S * 1000)

    client = admin()
    assert kafka_python_produce(embedded.bootstrap_servers, VALUE) is None
    answer = client.alter_configs([ConfigResource("BROKER", "1", configs={"message.max.bytes": str(LIMIT)})])
    assert answer == {"broker": {"1": "OK"}}
    assert isinstance(kafka_python_produce(embedded.bootstrap_servers, VALUE), MessageSizeTooLargeError)
    found = client.describe_configs([ConfigResource("BROKER", "1")])["broker"]["1"]["message.max.bytes"]
    assert (found["value"], found["config_source"]) == (str(LIMIT), "DYNAMIC_BROKER_CONFIG")
    refused = client.alter_configs([ConfigResource("BROKER", "1", configs={"advertised.listeners": "x:1"})],
                                   raise_on_unknown=False)
    assert "Cannot update these configs dynamically: Set(advertised.listeners)" in refused["broker"]["1"]
    client.close()

    embedded.restart()
    assert isinstance(kafka_python_produce(embedded.bootstrap_servers, VALUE), MessageSizeTooLargeError)
    client = admin()
    client.alter_configs([ConfigResource("BROKER", "1", configs={"message.max.bytes": "100000"})])
    assert kafka_python_produce(embedded.bootstrap_servers, VALUE) is None
    client.close()


# --- topic configs Kafka 4.0 removed ------------------------------------------------------------------------------

REMOVED = {"message.format.version": "2.8", "message.timestamp.difference.max.ms": "3600000",
           "message.downconversion.enable": "false"}


def confluent_create(bootstrap: str, name: str, configs: dict):
    """The exception of creating topic `name` (None when it was created)."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1, config=configs)])
    try:
        futures[name].result(timeout=TIMEOUT_S)
        return None
    except Exception as exc:  # noqa: BLE001 - the test looks at which error it is
        return exc


@pytest.mark.matrix(client="confluent-kafka", flow="admin_configs")
def test_confluent_creates_topics_with_removed_configs_only_under_3x_emulation():
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType
    with EmbeddedBroker() as broker:
        refused = confluent_create(broker.bootstrap_servers, "legacy", REMOVED)
        error = refused.args[0]
        assert error.code() == KafkaError.INVALID_CONFIG
        assert error.str().startswith("Unknown topic config name: message.")
    with EmbeddedBroker(emulate="3.9") as broker:
        assert confluent_create(broker.bootstrap_servers, "legacy", REMOVED) is None
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        found = settled(admin.describe_configs([ConfigResource(ResourceType.TOPIC, "legacy")]))["legacy"]
        for name, value in REMOVED.items():
            assert (found[name].value, found[name].source) == (value, ConfigSource.DYNAMIC_TOPIC_CONFIG.value)


@pytest.mark.matrix(client="kafka-python", flow="admin_configs")
def test_kafka_python_creates_topics_with_removed_configs_only_under_3x_emulation():
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import InvalidConfigurationError

    def create(broker):
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=TIMEOUT_S * 1000)
        try:
            admin.create_topics([NewTopic("legacy", 1, 1, topic_configs={"message.format.version": "2.8"})])
        finally:
            admin.close()

    with EmbeddedBroker() as broker:
        with pytest.raises(InvalidConfigurationError, match="Unknown topic config name: message.format.version"):
            create(broker)
    with EmbeddedBroker(emulate="3.9") as broker:
        create(broker)
        assert "legacy" in broker.topics()
