"""BrokerConfig: Kafka's names and defaults, server.properties syntax, overrides and errors."""
from __future__ import annotations

import os

import pytest

from compatbroker.config import BrokerConfig, ConfigError, Endpoint, parse_endpoint, parse_properties


def test_defaults_are_kafkas_except_the_documented_development_ones(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    config = BrokerConfig()
    assert config.listeners == (Endpoint("PLAINTEXT", "localhost", 9092),)
    assert config.advertised_listeners == ()
    assert config.data_dir == str(tmp_path / "compatbroker")
    assert (config.node_id, config.num_partitions, config.default_replication_factor) == (1, 1, 1)
    assert config.auto_create_topics_enable is True
    assert config.socket_request_max_bytes == 104_857_600
    assert config.queued_max_requests == 500
    assert config.connections_max_idle_ms == 600_000
    assert config.message_max_bytes == 1_048_588
    assert config.max_incremental_fetch_session_cache_slots == 1000
    assert config.group_initial_rebalance_delay_ms == 0
    assert config.get("log.retention.ms") == 7 * 24 * 3_600_000
    assert config.get("log.segment.bytes") == 1_073_741_824
    assert config.get("log.retention.check.interval.ms") == 300_000
    assert config.get("log.retention.hours") == 168


def test_default_data_dir_without_xdg_is_under_the_home_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert BrokerConfig().data_dir == str(tmp_path / ".local" / "share" / "compatbroker")


def test_values_are_typed_and_reach_storage():
    config = BrokerConfig({"num.partitions": "4", "auto.create.topics.enable": "FALSE", "node.id": 3,
                           "message.max.bytes": "2000000", "log.retention.hours": "2", "log.cleaner.enable": "false"})
    assert (config.num_partitions, config.auto_create_topics_enable, config.node_id) == (4, False, 3)
    assert config.log_defaults.max_message_bytes == 2_000_000
    assert config.get("log.retention.ms") == 2 * 3_600_000  # storage's fallback from hours to milliseconds
    assert config.storage.log_cleaner_enable is False
    assert config.storage_properties() == {"message.max.bytes": "2000000", "log.retention.hours": "2",
                                           "log.cleaner.enable": "false"}


@pytest.mark.parametrize("properties, message", [
    ({"num.partition": "2"}, "unknown configuration key 'num.partition' (did you mean num.partitions?)"),
    ({"num.partitions": "0"}, "num.partitions=0 is below the minimum 1"),
    ({"num.partitions": "many"}, "invalid value 'many' for num.partitions"),
    ({"auto.create.topics.enable": "yes"}, "invalid value 'yes' for auto.create.topics.enable"),
    ({"log.segment.bytes": "huge"}, "segment.bytes"),
    ({"log.retention.check.interval.ms": "soon"}, "log.retention.check.interval.ms"),
    ({"log.dirs": "/a,/b,/a"}, "each directory may appear once"),
    ({"listeners": "SSL://:9093"}, "a TLS listener needs a key store"),
    ({"listeners": "OTHER://:9093"}, "No security protocol defined for listener OTHER"),
    ({"listeners": "PLAINTEXT://:1,PLAINTEXT://:2"}, "each listener name may appear once"),
    ({"listeners": "localhost"}, "is not HOST:PORT"),
    ({"listeners": "::1:9092"}, "brackets"),
    ({"advertised.listeners": "OTHER://h:1"}, "OTHER is not one of the listeners"),
    ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "not an address clients can use"),
    ({"group.consumer.assignors": "range,uniform,range"}, "values must not be duplicated"),
    ({"group.coordinator.rebalance.protocols": "consumer"}, "Disabling the 'classic' protocol is not supported."),
    ({"group.share.max.share.sessions": "100"},
     "group.share.max.share.sessions must be greater than or equal to group.share.max.size"),
    ({"group.coordinator.rebalance.protocols": "classic,queues"},
     "String must be one of: consumer, classic, share, streams"),
    ({"group.share.delivery.count.limit": "11"}, "group.share.delivery.count.limit=11 is above the maximum 10"),
    ({"group.share.record.lock.duration.ms": "2000"},
     "group.share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"),
    ({"group.consumer.min.session.timeout.ms": "6000", "group.consumer.session.timeout.ms": "6000",
      "group.consumer.heartbeat.interval.ms": "6000"},
     "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms"),
])
def test_bad_settings_are_clear_errors(properties, message):
    with pytest.raises(ConfigError) as error:
        BrokerConfig(properties)
    assert message in str(error.value)


def test_several_log_dirs_make_a_jbod_node_whose_first_dir_holds_the_node_files(tmp_path):
    config = BrokerConfig({"log.dirs": f"{tmp_path / 'a'},{tmp_path / 'b'}"})
    assert config.data_dirs == (str(tmp_path / "a"), str(tmp_path / "b"))
    assert config.data_dir == str(tmp_path / "a")


def test_get_refuses_unknown_names():
    with pytest.raises(ConfigError, match="unknown configuration key"):
        BrokerConfig().get("no.such.setting")


def test_listener_syntax():
    assert parse_endpoint("PLAINTEXT://[::1]:9092") == Endpoint("PLAINTEXT", "::1", 9092)
    assert parse_endpoint("127.0.0.1:0") == Endpoint("PLAINTEXT", "127.0.0.1", 0)
    assert parse_endpoint("client://:19092") == Endpoint("CLIENT", "", 19092)
    config = BrokerConfig({"listeners": "PLAINTEXT://:9092,CONTROLLER://:9093,INTERNAL://127.0.0.1:9094",
                           "controller.listener.names": "CONTROLLER",
                           "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,"
                                                             "INTERNAL:PLAINTEXT",
                           "advertised.listeners": "PLAINTEXT://localhost:9092,INTERNAL://broker:9094"})
    assert [endpoint.name for endpoint in config.listeners] == ["PLAINTEXT", "INTERNAL"]  # no controller endpoint
    assert config.advertised_for(config.listeners[1]) == Endpoint("INTERNAL", "broker", 9094)


def test_properties_file_syntax():
    text = "\n".join([
        "# a comment",
        "! another comment",
        "",
        "num.partitions=3",
        "  auto.create.topics.enable : false",
        "node.id 5",
        "listeners = PLAINTEXT://localhost:9092,\\",
        "            INTERNAL://localhost:9094",
        "weird\\=key=value\\twith tab \\u0041",
        "empty=",
    ])
    assert parse_properties(text) == {
        "num.partitions": "3", "auto.create.topics.enable": "false", "node.id": "5",
        "listeners": "PLAINTEXT://localhost:9092,INTERNAL://localhost:9094",
        "weird=key": "value\twith tab A", "empty": "",
    }


def test_kafkas_own_kraft_server_properties_is_accepted(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("""
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
""")
    config = BrokerConfig.from_sources(config_file=str(path))
    assert config.listeners == (Endpoint("PLAINTEXT", "", 9092),)
    assert config.data_dir == "/tmp/kraft-combined-logs"
    assert config.get("num.io.threads") == "8"  # accepted, unused


def test_sources_apply_in_order_file_then_set_then_options(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=2\nnode.id=4\nlog.dirs=/from/file\nlisteners=PLAINTEXT://localhost:1\n")
    config = BrokerConfig.from_sources(config_file=str(path), overrides=["num.partitions=6", "log.dirs=/from/set"],
                                       listen="[::1]:0", advertised_listener="example.com:9092",
                                       data_dir=str(tmp_path / "d"))
    assert (config.num_partitions, config.node_id) == (6, 4)
    assert config.data_dir == str(tmp_path / "d")
    assert config.listeners == (Endpoint("PLAINTEXT", "::1", 0),)
    assert config.advertised_listeners == (Endpoint("PLAINTEXT", "example.com", 9092),)


def test_source_errors_are_clear(tmp_path):
    with pytest.raises(ConfigError, match="--set expects name=value"):
        BrokerConfig.from_sources(overrides=["num.partitions"])
    with pytest.raises(ConfigError, match="cannot read config file"):
        BrokerConfig.from_sources(config_file=str(tmp_path / "missing.properties"))
    with pytest.raises(ConfigError, match="--listen"):
        BrokerConfig.from_sources(listen="nonsense")
    path = tmp_path / "typo.properties"
    path.write_text("log.retention.hour=1\n")
    with pytest.raises(ConfigError, match="did you mean log.retention.hours"):
        BrokerConfig.from_sources(config_file=str(path))


def test_data_dir_comes_from_log_dir_when_log_dirs_is_unset(tmp_path):
    assert BrokerConfig({"log.dir": str(tmp_path / "x")}).data_dir == str(tmp_path / "x")
    assert BrokerConfig({"log.dirs": "~/k"}).data_dir == os.path.expanduser("~/k")


def test_an_unknown_replica_selector_class_is_refused_as_kafka_refuses_to_load_it():
    with pytest.raises(ConfigError, match="replica.selector.class: Class com.example.Nearest could not be found"):
        BrokerConfig({"replica.selector.class": "com.example.Nearest"})
    rack_aware = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
    assert BrokerConfig({"replica.selector.class": rack_aware}).replica_selector_class == rack_aware


def test_group_settings_defaults_are_the_broker_configs():
    from compatbroker.coordinator.settings import ConsumerGroupSettings, ShareGroupSettings

    config = BrokerConfig({})
    assert ConsumerGroupSettings.from_config(config) == ConsumerGroupSettings()
    assert ShareGroupSettings.from_config(config) == ShareGroupSettings()
