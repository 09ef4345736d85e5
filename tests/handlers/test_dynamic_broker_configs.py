"""Dynamic broker configs (compatbroker.dynamic_config) through AlterConfigs, IncrementalAlterConfigs and
DescribeConfigs: Kafka 4.x's rules, errors and messages, sources and synonyms, live application, persistence across
a restart, per-node values in a cluster; and the topic configs Kafka 4.0 removed, refused unless emulating 3.x."""
from __future__ import annotations

import json
import time

import pytest

from compatbroker import config_catalog
from compatbroker.dynamic_config import BROKER_CONFIGS_FILE
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import (AlterConfigsRequest, CreateTopicsRequest, DescribeConfigsRequest,
                                            IncrementalAlterConfigsRequest)

from .cluster_helpers import serving_cluster
from .helpers import batch, call, make_broker
from .test_alter_configs import incremental, legacy, produce

BROKER = 4
TOPIC = 2
SET, DELETE, APPEND = 0, 1, 2
TOPIC_CONFIG, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5
Resource = DescribeConfigsRequest.DescribeConfigsResource


async def alter(broker, resource, *, validate_only=False) -> tuple[int, str | None]:
    """(error code, message) of one resource through AlterConfigs v2 or IncrementalAlterConfigs v1."""
    if isinstance(resource, AlterConfigsRequest.AlterConfigsResource):
        answer = await call(broker, 2, AlterConfigsRequest(resources=[resource], validate_only=validate_only))
    else:
        answer = await call(broker, 1, IncrementalAlterConfigsRequest(resources=[resource],
                                                                      validate_only=validate_only))
    (result,) = answer.decoded.responses
    return result.error_code, result.error_message


def set_broker(name: str, api: str = "incremental", **configs):
    if api == "legacy":
        return legacy(name, BROKER, **configs)
    return incremental(name, *((key, SET, value) for key, value in configs.items()), resource_type=BROKER)


async def described(broker, name: str = "1", resource_type: int = BROKER) -> dict:
    resource = Resource(resource_type=resource_type, resource_name=name, configuration_keys=None)
    answer = await call(broker, 4, DescribeConfigsRequest(resources=[resource], include_synonyms=True))
    (result,) = answer.decoded.results
    assert result.error_code == 0, result.error_message
    return {entry.name: entry for entry in result.configs}


def synonyms(entry) -> list[tuple[str, str, int]]:
    return [(synonym.name, synonym.value, synonym.source) for synonym in entry.synonyms]


# --- Kafka's rules and messages -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name, configs, message", [
    ("1", {"advertised.listeners": "PLAINTEXT://h:9092"},  # read-only since Kafka 4.0 (KAFKA-18405)
     "Cannot update these configs dynamically: Set(advertised.listeners)"),
    ("", {"num.partitions": "3", "auto.create.topics.enable": "false"},
     "Cannot update these configs dynamically: Set(auto.create.topics.enable, num.partitions)"),
    ("1", {"ssl.keystore.location": "/x"},
     "These security configs can be dynamically updated only per-listener using the listener prefix: "
     "Set(ssl.keystore.location)"),
    ("", {"listeners": "PLAINTEXT://:9093"},
     "Cannot update these configs at default cluster level, broker id must be specified: Set(listeners)"),
    ("1", {"log.retention.ms": "soon"},
     "Invalid value soon for configuration log.retention.ms: Not a number of type LONG"),
    ("", {"message.max.bytes": "-1"}, "Invalid value -1 for configuration message.max.bytes: Value must be at least 0"),
    ("1", {"log.cleanup.policy": "delete,shred"},
     "Invalid value shred for configuration log.cleanup.policy: String must be one of: compact, delete"),
    ("1", {"unclean.leader.election.enable": "maybe"},
     "Invalid value maybe for configuration unclean.leader.election.enable: Expected value to be either true or "
     "false"),
    ("1", {"num.io.threads": "17"},
     "Invalid value org.apache.kafka.common.config.ConfigException: Dynamic thread count update validation failed "
     "for num.io.threads=17, value should not be greater than double the current value 8 for configuration "
     "Invalid dynamic configuration"),
    ("1", {"remote.log.reader.threads": "4"},
     "Invalid value org.apache.kafka.common.config.ConfigException: Dynamic thread count update validation failed "
     "for remote.log.reader.threads=4, value should be at least half the current value 10 for configuration "
     "Invalid dynamic configuration"),
    ("", {"log.cleaner.threads": "3"},
     "Invalid value org.apache.kafka.common.config.ConfigException: Log cleaner threads cannot be increased to more "
     "than double the current value 1 for configuration Invalid dynamic configuration"),
    ("2", {"message.max.bytes": "10"}, "Unexpected broker id, expected 1, but received 2"),
])
@pytest.mark.parametrize("api", ["legacy", "incremental"])
async def test_refused_changes_answer_kafkas_message(broker, name, configs, message, api):
    assert await alter(broker, set_broker(name, api, **configs)) == (ErrorCode.INVALID_REQUEST, message)
    assert config_catalog.broker_layers(broker)[0][0] == {} and config_catalog.broker_layers(broker)[1][0] == {}


async def test_incremental_list_operations_follow_kafka(broker):
    code = await alter(broker, incremental("1", ("log.cleanup.policy", APPEND, "compact"), resource_type=BROKER))
    assert code == (0, None)
    assert (await described(broker))["log.cleanup.policy"].value == "delete,compact"
    assert await alter(broker, incremental("1", ("message.max.bytes", APPEND, "1"), resource_type=BROKER)) == \
        (ErrorCode.INVALID_CONFIG, "Config value append is not allowed for config key: message.max.bytes")
    assert (await alter(broker, incremental("1", ("no.such.name", APPEND, "1"), resource_type=BROKER)))[0] == \
        ErrorCode.UNKNOWN_SERVER_ERROR
    assert await alter(broker, incremental("1", ("log.cleanup.policy", DELETE, None), resource_type=BROKER)) == \
        (0, None)
    assert (await described(broker))["log.cleanup.policy"].config_source == DEFAULT


async def test_validate_only_changes_nothing(broker, tmp_path):
    assert await alter(broker, set_broker("", **{"message.max.bytes": "100"}), validate_only=True) == (0, None)
    assert not (tmp_path / "data" / BROKER_CONFIGS_FILE).exists()
    assert broker.logs.default_config.max_message_bytes == 1_048_588


async def test_the_log_line_hides_secrets_and_custom_values_as_kafka_does(broker, caplog):
    configs = {"listener.name.plaintext.ssl.key.password": "s3cret", "my.custom.token": "t0ken",
               "message.max.bytes": "2000000"}
    with caplog.at_level("INFO", logger="compatbroker.dynamic_config"):
        assert await alter(broker, set_broker("1", **configs)) == (0, None)
    (line,) = [record.getMessage() for record in caplog.records if "dynamic broker configs" in record.getMessage()]
    assert "s3cret" not in line and "t0ken" not in line and "'message.max.bytes': '2000000'" in line


async def test_a_value_longer_than_kafkas_controller_takes_is_refused(broker):
    assert await alter(broker, set_broker("", **{"my.custom.config": "x" * 32768})) == (
        ErrorCode.INVALID_CONFIG,
        "The configuration value cannot be added because it exceeds the maximum value size of 32767 bytes.")
    assert await alter(broker, set_broker("", **{"my.custom.config": "x" * 32767})) == (0, None)


async def test_defaults_a_topics_overrides_contradict_are_refused(broker):
    broker.create_topic("lagged", 1, configs={"min.compaction.lag.ms": "1000"})
    code, message = await alter(broker, set_broker("", **{"log.cleaner.max.compaction.lag.ms": "500"}))
    assert (code, message) == (ErrorCode.INVALID_REQUEST,
                               "topic lagged: min.compaction.lag.ms (1000) exceeds max.compaction.lag.ms (500)")
    assert (await described(broker, "lagged", TOPIC))["max.compaction.lag.ms"].config_source == DEFAULT


async def test_a_file_the_disk_refuses_is_that_resources_error_and_nothing_changes(broker, monkeypatch):
    import compatbroker.dynamic_config as dynamic_config
    import compatbroker.storage.config_sets as config_sets

    def full_disk(path, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(dynamic_config, "write_atomically", full_disk)
    monkeypatch.setattr(config_sets, "write_atomically", full_disk)
    assert await alter(broker, set_broker("", **{"message.max.bytes": "100"})) == (ErrorCode.UNKNOWN_SERVER_ERROR, None)
    assert broker.logs.default_config.max_message_bytes == 1_048_588
    assert await alter(broker, incremental("sub", ("metrics", SET, "*"), resource_type=CLIENT_METRICS)) == \
        (ErrorCode.UNKNOWN_SERVER_ERROR, None)
    assert broker.client_telemetry.subscription_names() == []


# --- sources, synonyms, read-only flags ---------------------------------------------------------------------------

async def test_sources_and_synonyms_in_kafkas_order(broker_factory):
    broker = broker_factory(**{"message.max.bytes": "5000"})
    assert (await described(broker))["message.max.bytes"].config_source == STATIC
    assert await alter(broker, set_broker("", **{"message.max.bytes": "4000"})) == (0, None)
    entry = (await described(broker))["message.max.bytes"]
    assert (entry.value, entry.config_source, entry.read_only) == ("4000", DYNAMIC_DEFAULT, False)
    assert await alter(broker, set_broker("1", **{"message.max.bytes": "3000"})) == (0, None)
    entry = (await described(broker))["message.max.bytes"]
    assert (entry.value, entry.config_source) == ("3000", DYNAMIC_BROKER)
    assert synonyms(entry) == [("message.max.bytes", "3000", DYNAMIC_BROKER),
                               ("message.max.bytes", "4000", DYNAMIC_DEFAULT),
                               ("message.max.bytes", "5000", STATIC), ("message.max.bytes", "1048588", DEFAULT)]
    # the cluster default resource lists only what is set there, with its own layer
    default = await described(broker, "")
    assert list(default) == ["message.max.bytes"]
    assert synonyms(default["message.max.bytes"]) == [("message.max.bytes", "4000", DYNAMIC_DEFAULT)]
    # a topic without its own override inherits the per-node value, and says where it comes from
    broker.create_topic("t", 1)
    entry = (await described(broker, "t", TOPIC))["max.message.bytes"]
    assert (entry.value, entry.config_source) == ("3000", DYNAMIC_BROKER)


async def test_read_only_flags_follow_kafka_4(broker):
    found = await described(broker)
    assert found["advertised.listeners"].read_only and found["num.partitions"].read_only
    assert not any(found[name].read_only for name in ("message.max.bytes", "log.retention.ms", "num.io.threads",
                                                       "log.cleaner.threads", "max.connections", "listeners"))


async def test_no_op_and_custom_names_are_kept_and_described(broker):
    assert await alter(broker, set_broker("1", **{"num.io.threads": "16", "custom.setting": "x"})) == (0, None)
    found = await described(broker)
    assert (found["num.io.threads"].value, found["num.io.threads"].config_source) == ("16", DYNAMIC_BROKER)
    custom = found["custom.setting"]
    assert (custom.value, custom.config_source, custom.read_only, custom.config_type) == \
        ("x", DYNAMIC_BROKER, True, config_catalog.UNKNOWN_TYPE)


async def test_alter_configs_replaces_the_whole_set(broker):
    assert await alter(broker, set_broker("", "legacy", **{"log.retention.ms": "1000", "min.insync.replicas": "1"})) \
        == (0, None)
    assert await alter(broker, set_broker("", "legacy", **{"log.retention.ms": "2000"})) == (0, None)
    assert list(await described(broker, "")) == ["log.retention.ms"]
    assert await alter(broker, legacy("", BROKER)) == (0, None)
    assert await described(broker, "") == {}
    assert broker.logs.default_config.retention_ms == 604_800_000


# --- live application ---------------------------------------------------------------------------------------------

async def test_message_max_bytes_applies_to_the_next_produce(broker):
    broker.create_topic("t", 1)
    assert (await produce(broker, batch(b"x" * 2000))).error_code == 0
    assert await alter(broker, set_broker("", **{"message.max.bytes": "1000"})) == (0, None)
    assert (await produce(broker, batch(b"x" * 2000))).error_code == ErrorCode.MESSAGE_TOO_LARGE
    broker.create_topic("own", 1, {"max.message.bytes": "100000"})  # a topic override still wins
    assert (await produce(broker, batch(b"x" * 2000), topic="own")).error_code == 0


async def test_log_defaults_apply_to_existing_partitions(broker):
    broker.create_topic("t", 1)
    old = int(time.time() * 1000) - 3_600_000
    assert await alter(broker, set_broker("1", **{"log.segment.bytes": "400"})) == (0, None)
    for _ in range(3):
        assert (await produce(broker, batch(b"z" * 300, timestamp=old))).error_code == 0
    assert len(broker.get_log("t", 0).segments) == 3
    assert await broker.run_retention() == 0
    assert await alter(broker, set_broker("1", **{"log.segment.bytes": "400", "log.retention.ms": "60000"})) == \
        (0, None)
    assert await broker.run_retention() == 2


async def test_broker_level_settings_take_effect(broker):
    assert await alter(broker, set_broker("", **{"producer.id.expiration.ms": "1234",
                                                 "unclean.leader.election.enable": "true",
                                                 "max.connections.per.ip": "7"})) == (0, None)
    assert broker.config.producer_id_expiration_ms == 1234 and broker.config.max_connections_per_ip == 7
    assert broker.cluster.config.unclean_leader_election_enable


# --- persistence --------------------------------------------------------------------------------------------------

async def test_configs_survive_a_restart(tmp_path):
    broker = make_broker(tmp_path / "data")
    assert await alter(broker, set_broker("", **{"message.max.bytes": "2000"})) == (0, None)
    assert await alter(broker, set_broker("1", **{"log.retention.ms": "5000"})) == (0, None)
    broker.logs.shutdown()
    saved = json.loads((tmp_path / "data" / BROKER_CONFIGS_FILE).read_text())
    assert (saved["default"], saved["brokers"]) == ({"message.max.bytes": "2000"}, {"1": {"log.retention.ms": "5000"}})
    again = make_broker(tmp_path / "data")
    try:
        assert again.logs.default_config.max_message_bytes == 2000
        assert again.logs.default_config.retention_ms == 5000
        found = await described(again)
        assert found["log.retention.ms"].config_source == DYNAMIC_BROKER
        assert found["message.max.bytes"].config_source == DYNAMIC_DEFAULT
    finally:
        again.logs.shutdown()


def test_an_unreadable_store_stops_the_start(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / BROKER_CONFIGS_FILE).write_text("{not json")
    with pytest.raises(ValueError, match="unreadable dynamic broker configs"):
        make_broker(tmp_path / "data")


# --- cluster mode -------------------------------------------------------------------------------------------------

async def test_per_node_values_apply_to_that_node_only(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        node0, node1 = cluster.nodes[0], cluster.nodes[1]
        assert await alter(node1, set_broker("1", **{"message.max.bytes": "3000"})) == (0, None)
        assert node1.logs.default_config.max_message_bytes == 3000
        assert node0.logs.default_config.max_message_bytes == 1_048_588
        assert (await described(node0, "0"))["message.max.bytes"].config_source == DEFAULT
        assert (await alter(node0, set_broker("1", **{"message.max.bytes": "10"})))[0] == ErrorCode.INVALID_REQUEST
        assert await alter(node0, set_broker("", **{"message.max.bytes": "4000"})) == (0, None)
        assert [node.logs.default_config.max_message_bytes for node in cluster.nodes.values()] == [4000, 3000, 4000]


# --- topic configs Kafka 4.0 removed ------------------------------------------------------------------------------

REMOVED = {"message.format.version": "2.8", "message.downconversion.enable": "false",
           "message.timestamp.difference.max.ms": "60000"}


async def create(broker, name: str, configs: dict) -> tuple[int, str | None]:
    topic = CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=1, replication_factor=1, assignments=[],
        configs=[CreateTopicsRequest.CreatableTopicConfig(name=key, value=value) for key, value in configs.items()])
    answer = await call(broker, 7, CreateTopicsRequest(topics=[topic], timeout_ms=5000))
    (result,) = answer.decoded.topics
    return result.error_code, result.error_message


@pytest.mark.parametrize("name", sorted(REMOVED))
async def test_removed_topic_configs_are_refused_as_kafka_4_refuses_them(broker, name):
    expected = (ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
    assert await create(broker, "t", {name: REMOVED[name]}) == expected
    broker.create_topic("u", 1)
    for resource in (legacy("u", TOPIC, **{name: REMOVED[name]}), incremental("u", (name, SET, REMOVED[name]))):
        assert (await alter(broker, resource))[0] == ErrorCode.INVALID_CONFIG
    assert name not in await described(broker, "u", TOPIC)


@pytest.mark.parametrize("release, format_default", [("3.9", "3.0-IV1"), ("2.8", "2.8-IV1")])
async def test_removed_topic_configs_under_3x_emulation(broker, release, format_default):
    broker.emulated_release = release
    assert await create(broker, "t", REMOVED) == (0, None)
    found = await described(broker, "t", TOPIC)
    for name, value in REMOVED.items():
        assert (found[name].value, found[name].config_source) == (value, TOPIC_CONFIG)
    broker.create_topic("plain", 1)
    entry = (await described(broker, "plain", TOPIC))["message.format.version"]
    assert (entry.value, entry.config_source) == (format_default, DEFAULT)
    assert synonyms(entry) == [("log.message.format.version", "3.0-IV1", DEFAULT)]
    assert await alter(broker, incremental("plain", ("message.downconversion.enable", SET, "false"))) == (0, None)
    assert (await alter(broker, incremental("plain", ("message.format.version", SET, "9.9"))))[0] == \
        ErrorCode.INVALID_CONFIG


async def test_timestamp_difference_is_enforced_as_in_3x(broker):
    broker.emulated_release = "3.9"
    assert await create(broker, "t", {"message.timestamp.difference.max.ms": "60000"}) == (0, None)
    now = int(time.time() * 1000)
    assert (await produce(broker, batch(b"old", timestamp=now - 3_600_000))).error_code == ErrorCode.INVALID_TIMESTAMP
    assert (await produce(broker, batch(b"late", timestamp=now + 600_000))).error_code == ErrorCode.INVALID_TIMESTAMP
    assert (await produce(broker, batch(b"now", timestamp=now))).error_code == 0


# --- authorization ------------------------------------------------------------------------------------------------

async def test_broker_changes_need_alter_configs_on_the_cluster(broker_factory):
    from compatbroker.security.acls import AclOperation, ResourceType

    from .authz_helpers import AUTHORIZER_ON, allow, call_as

    broker = broker_factory(**AUTHORIZER_ON)
    message = IncrementalAlterConfigsRequest(resources=[set_broker("", **{"message.max.bytes": "1000"})])
    answer = await call_as(broker, 1, message)
    assert answer.decoded.responses[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert broker.logs.default_config.max_message_bytes == 1_048_588
    # Kafka's broker checks come before the controller's authorization
    refused = IncrementalAlterConfigsRequest(resources=[set_broker("", **{"num.partitions": "2"})])
    assert (await call_as(broker, 1, refused)).decoded.responses[0].error_code == ErrorCode.INVALID_REQUEST
    allow(broker, AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, "kafka-cluster")
    assert (await call_as(broker, 1, message)).decoded.responses[0].error_code == 0
    assert broker.logs.default_config.max_message_bytes == 1000


# --- the CLIENT_METRICS resource (KIP-714, compatbroker.telemetry.client_metrics_config) ---------------------------

CLIENT_METRICS, CLIENT_METRICS_CONFIG = 16, 7


async def test_client_metrics_subscriptions_through_the_config_apis(broker):
    subscription = {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"}
    resource = incremental("sub", *((key, SET, value) for key, value in subscription.items()),
                           resource_type=CLIENT_METRICS)
    assert await alter(broker, resource) == (0, None)
    found = await described(broker, "sub", CLIENT_METRICS)
    assert (found["interval.ms"].value, found["interval.ms"].config_source) == ("1000", CLIENT_METRICS_CONFIG)
    assert found["match"].config_source == DEFAULT
    assert (await alter(broker, incremental("sub", ("metrics", APPEND, "x"), resource_type=CLIENT_METRICS)))[0] == \
        ErrorCode.INVALID_CONFIG
    assert (await alter(broker, legacy("sub", CLIENT_METRICS, **{"interval.ms": "1"})))[0] != 0  # below 100
    assert await alter(broker, legacy("sub", CLIENT_METRICS, **{"interval.ms": "2000"})) == (0, None)
    found = await described(broker, "sub", CLIENT_METRICS)
    assert found["interval.ms"].value == "2000" and found["metrics"].config_source == DEFAULT
    resource = Resource(resource_type=CLIENT_METRICS, resource_name="", configuration_keys=None)
    answer = await call(broker, 4, DescribeConfigsRequest(resources=[resource]))
    assert (answer.decoded.results[0].error_code, answer.decoded.results[0].error_message) == \
        (ErrorCode.INVALID_REQUEST, "Client metrics subscription name must not be empty")


async def test_client_metrics_changes_need_alter_configs_on_the_cluster(broker_factory):
    from .authz_helpers import AUTHORIZER_ON, call_as

    broker = broker_factory(**AUTHORIZER_ON)
    message = AlterConfigsRequest(resources=[legacy("sub", CLIENT_METRICS, **{"interval.ms": "1000"})])
    assert (await call_as(broker, 2, message)).decoded.responses[0].error_code == \
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert (await described(broker, "sub", CLIENT_METRICS))["interval.ms"].config_source == DEFAULT


async def test_a_listeners_secret_is_kept_but_never_shown(broker, tmp_path):
    name = "listener.name.plaintext.plain.sasl.jaas.config"
    secret = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="s3cret";'
    assert await alter(broker, set_broker("1", **{name: secret})) == (0, None)
    entry = (await described(broker))[name]
    assert (entry.value, entry.is_sensitive, entry.read_only, entry.config_source) == (None, True, True,
                                                                                       DYNAMIC_BROKER)
    assert synonyms(entry)[0] == (name, None, DYNAMIC_BROKER)


def test_every_dynamic_config_is_catalogued_and_may_also_be_set_statically():
    from compatbroker.config import known_names
    from compatbroker.security.settings import is_security_name

    assert config_catalog.DYNAMIC_NAMES <= set(config_catalog.BROKER_CONFIGS)
    assert {name for name, key in config_catalog.BROKER_CONFIGS.items() if key.dynamic} == \
        config_catalog.DYNAMIC_NAMES
    static = {name for name in config_catalog.DYNAMIC_NAMES if name in known_names() or is_security_name(name)}
    assert config_catalog.DYNAMIC_NAMES - static == {"sasl.jaas.config"}  # taken per listener and mechanism only
