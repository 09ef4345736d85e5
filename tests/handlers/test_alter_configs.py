"""AlterConfigs and IncrementalAlterConfigs: each error Kafka answers, the replace-all and per-key semantics, live
application to the partitions, and persistence across a restart."""
from __future__ import annotations

import json
import logging
import time

import pytest

from compatbroker.handlers import alter_configs, incremental_alter_configs
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import (AlterConfigsRequest, DescribeConfigsRequest,
                                            IncrementalAlterConfigsRequest, ProduceRequest)
from compatbroker.protocol.records.batch import iter_batches
from compatbroker.protocol.records.compression import Compression
from compatbroker.storage.log_manager import TOPIC_CONFIGS_FILE

from .conftest import make_broker
from .helpers import batch, call, records_of

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
Legacy = AlterConfigsRequest.AlterConfigsResource
LegacyConfig = AlterConfigsRequest.AlterableConfig
Incremental = IncrementalAlterConfigsRequest.AlterConfigsResource
Operation = IncrementalAlterConfigsRequest.AlterableConfig


def legacy(name="t", resource_type=TOPIC, **configs) -> Legacy:
    return Legacy(resource_type=resource_type, resource_name=name,
                  configs=[LegacyConfig(name=key, value=value) for key, value in configs.items()])


def incremental(name="t", *operations, resource_type=TOPIC) -> Incremental:
    return Incremental(resource_type=resource_type, resource_name=name,
                       configs=[Operation(name=key, config_operation=code, value=value)
                                for key, code, value in operations])


def setting(api: str, name: str, configs: dict, resource_type=TOPIC):
    """A resource setting `configs`: an AlterConfigs one ("legacy") or SET operations ("incremental")."""
    if api == "legacy":
        return legacy(name, resource_type, **configs)
    return incremental(name, *((key, SET, value) for key, value in configs.items()), resource_type=resource_type)


async def alter(broker, *resources, validate_only=False, version=None) -> list[tuple[int, str]]:
    """[(error code, resource name)] of a legacy AlterConfigs (Legacy resources) or an IncrementalAlterConfigs."""
    if isinstance(resources[0], Legacy):
        message = AlterConfigsRequest(resources=list(resources), validate_only=validate_only)
        version = 2 if version is None else version
    else:
        message = IncrementalAlterConfigsRequest(resources=list(resources), validate_only=validate_only)
        version = 1 if version is None else version
    answer = await call(broker, version, message)
    return [(r.error_code, r.resource_name) for r in answer.decoded.responses]


async def one(broker, resource, **options) -> int:
    ((code, _),) = await alter(broker, resource, **options)
    return code


async def described(broker, name="t") -> dict[str, tuple[str, int]]:
    resource = DescribeConfigsRequest.DescribeConfigsResource(resource_type=TOPIC, resource_name=name,
                                                              configuration_keys=None)
    answer = await call(broker, 4, DescribeConfigsRequest(resources=[resource]))
    return {entry.name: (entry.value, entry.config_source) for entry in answer.decoded.results[0].configs}


async def produce(broker, records, topic="t"):
    data = ProduceRequest.TopicProduceData(name=topic, partition_data=[
        ProduceRequest.PartitionProduceData(index=0, records=records)])
    answer = await call(broker, 9, ProduceRequest(acks=1, timeout_ms=1000, topic_data=[data], transactional_id=None))
    return answer.decoded.responses[0].partition_responses[0]


def test_declarations():
    assert (alter_configs.API_KEY, alter_configs.MIN_VERSION, alter_configs.MAX_VERSION) == (33, 0, 2)
    assert (incremental_alter_configs.API_KEY, incremental_alter_configs.MIN_VERSION,
            incremental_alter_configs.MAX_VERSION) == (44, 0, 1)


# --- AlterConfigs: whole-set replacement --------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1, 2])
async def test_alter_configs_replaces_every_override(broker, version):
    broker.create_topic("t", 1, {"retention.ms": "1000", "cleanup.policy": "compact"})
    assert await one(broker, legacy(**{"segment.ms": "5000", "unclean.leader.election.enable": "true"}),
                     version=version) == 0
    assert broker.logs.topic_overrides["t"] == {"segment.ms": "5000", "unclean.leader.election.enable": "true"}
    found = await described(broker)
    assert found["retention.ms"] == ("604800000", 5) and found["cleanup.policy"] == ("delete", 5)
    assert found["segment.ms"] == ("5000", 1) and found["unclean.leader.election.enable"] == ("true", 1)
    assert broker.get_log("t", 0).config.segment_ms == 5000 and not broker.get_log("t", 0).config.compact
    assert await one(broker, legacy()) == 0  # an empty set removes every override
    assert "t" not in broker.logs.topic_overrides


# --- IncrementalAlterConfigs: one key at a time -------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1])
async def test_incremental_changes_only_the_named_keys(broker, version):
    broker.create_topic("t", 1, {"retention.ms": "1000", "segment.ms": "7000"})
    code = await one(broker, incremental("t", ("retention.ms", DELETE, None), ("max.message.bytes", SET, "5000"),
                                         ("flush.ms", DELETE, None)), version=version)
    assert code == 0
    assert broker.logs.topic_overrides["t"] == {"segment.ms": "7000", "max.message.bytes": "5000"}
    assert broker.get_log("t", 0).config.retention_ms == 604_800_000


async def test_append_and_subtract_work_on_list_values_from_the_default(broker):
    broker.create_topic("t", 1)
    assert await one(broker, incremental("t", ("cleanup.policy", APPEND, "compact"))) == 0
    assert broker.logs.topic_overrides["t"]["cleanup.policy"] == "delete,compact"
    assert broker.get_log("t", 0).config.compact and broker.get_log("t", 0).config.delete
    assert await one(broker, incremental("t", ("cleanup.policy", APPEND, "compact,delete"))) == 0
    assert broker.logs.topic_overrides["t"]["cleanup.policy"] == "delete,compact"  # no duplicates
    assert await one(broker, incremental("t", ("cleanup.policy", SUBTRACT, "delete"))) == 0
    assert (await described(broker))["cleanup.policy"] == ("compact", 1)
    assert await one(broker, incremental("t", ("leader.replication.throttled.replicas", APPEND, "0:1,0:2"))) == 0
    assert await one(broker, incremental("t", ("leader.replication.throttled.replicas", SUBTRACT, "0:1"))) == 0
    assert (await described(broker))["leader.replication.throttled.replicas"] == ("0:2", 1)


# --- errors -------------------------------------------------------------------------------------------------------

BAD_VALUES = [{"retention.ms": "soon"}, {"segment.bytes": "3000000000"}, {"cleanup.policy": "shred"},
              {"compression.type": "brotli"}, {"unclean.leader.election.enable": "maybe"},
              {"follower.replication.throttled.replicas": "x"}, {"min.cleanable.dirty.ratio": "2"},
              {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, {"remote.storage.enable": "true"},
              {"no.such.config": "1"}, {"log.retention.ms": "1"}]


@pytest.mark.parametrize("configs", BAD_VALUES)
@pytest.mark.parametrize("api", ["legacy", "incremental"])
async def test_unknown_keys_and_bad_values_are_invalid_config(broker, configs, api):
    broker.create_topic("t", 1, {"retention.ms": "1000"})
    assert await one(broker, setting(api, "t", configs)) == ErrorCode.INVALID_CONFIG
    assert broker.logs.topic_overrides["t"] == {"retention.ms": "1000"}


@pytest.mark.parametrize("api", ["legacy", "incremental"])
async def test_topic_resource_errors_in_kafkas_order(broker, api):
    broker.create_topic("t", 1)
    results = await alter(broker, setting(api, "missing", {"retention.ms": "1"}), setting(api, "bad name", {}),
                          setting(api, "", {}), setting(api, "gone", {"retention.ms": "x"}), setting(api, "t", {}))
    assert results == [(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "missing"),
                       (ErrorCode.INVALID_TOPIC_EXCEPTION, "bad name"), (ErrorCode.INVALID_REQUEST, ""),
                       (ErrorCode.INVALID_CONFIG, "gone"),  # values are checked before the topic's existence
                       (0, "t")]


@pytest.mark.parametrize("api", ["legacy", "incremental"])
async def test_a_resource_named_twice_is_refused_and_the_others_apply(broker, api):
    broker.create_topic("t", 1)
    broker.create_topic("u", 1)
    assert await alter(broker, *(setting(api, name, {"retention.ms": "5"}) for name in ("t", "u", "t"))) == [
        (ErrorCode.INVALID_REQUEST, "t"), (0, "u"), (ErrorCode.INVALID_REQUEST, "t")]
    assert "t" not in broker.logs.topic_overrides and broker.logs.topic_overrides["u"] == {"retention.ms": "5"}


async def test_a_key_named_twice_or_a_null_value_is_an_invalid_request(broker):
    broker.create_topic("t", 1)
    twice = Legacy(resource_type=TOPIC, resource_name="t", configs=[
        LegacyConfig(name="retention.ms", value="1"), LegacyConfig(name="retention.ms", value="2")])
    null = Legacy(resource_type=TOPIC, resource_name="t", configs=[LegacyConfig(name="retention.ms", value=None)])
    assert await one(broker, twice) == ErrorCode.INVALID_REQUEST
    assert await one(broker, null) == ErrorCode.INVALID_REQUEST
    assert await one(broker, incremental("t", ("retention.ms", SET, None))) == ErrorCode.INVALID_REQUEST
    assert await one(broker, incremental("t", ("retention.ms", SET, "1"), ("retention.ms", DELETE, None))) == \
        ErrorCode.INVALID_REQUEST
    assert await one(broker, incremental("t", ("retention.ms", DELETE, None))) == 0  # null is right for DELETE


@pytest.mark.parametrize("operation", [("retention.ms", APPEND, "1"), ("compression.type", SUBTRACT, "gzip"),
                                       ("no.such.config", APPEND, "a")])
async def test_append_and_subtract_need_a_list_config(broker, operation):
    broker.create_topic("t", 1)
    verb = "APPEND" if operation[1] == APPEND else "SUBTRACT"
    answer = await call(broker, 1, IncrementalAlterConfigsRequest(resources=[incremental("t", operation)]))
    (result,) = answer.decoded.responses
    assert (result.error_code, result.error_message) == (  # Kafka's controller's message
        ErrorCode.INVALID_CONFIG, f"Can't {verb} to key {operation[0]} because its type is not LIST.")


async def test_an_unknown_operation_is_an_invalid_request(broker):
    broker.create_topic("t", 1)
    assert await one(broker, incremental("t", ("retention.ms", 7, "1"))) == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("resource_type", [0, 3])  # GROUP (32): test_group_configs; 16: test_dynamic_broker_configs
async def test_resource_types_that_cannot_be_altered(broker, resource_type):
    assert await one(broker, legacy("x", resource_type)) == ErrorCode.INVALID_REQUEST
    assert await one(broker, incremental("x", ("a", SET, "b"), resource_type=resource_type)) == \
        ErrorCode.INVALID_REQUEST


async def test_validate_only_checks_without_changing_anything(broker, tmp_path):
    broker.create_topic("t", 1, {"retention.ms": "1000"})
    before = (tmp_path / "data" / TOPIC_CONFIGS_FILE).read_text()
    assert await one(broker, legacy(**{"segment.ms": "10"}), validate_only=True) == 0
    assert await one(broker, incremental("t", ("retention.ms", SET, "1")), validate_only=True) == 0
    assert await one(broker, incremental("t", ("retention.ms", SET, "x")), validate_only=True) == \
        ErrorCode.INVALID_CONFIG
    assert broker.logs.topic_overrides["t"] == {"retention.ms": "1000"}
    assert broker.get_log("t", 0).config.retention_ms == 1000
    assert (tmp_path / "data" / TOPIC_CONFIGS_FILE).read_text() == before


# --- the broker resource ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, configs, validate_only, code", [
    ("2", {"log.retention.ms": "1"}, True, ErrorCode.INVALID_REQUEST),
    ("one", {"log.retention.ms": "1"}, True, ErrorCode.INVALID_REQUEST),
    ("1", {"num.partitions": "3"}, True, ErrorCode.INVALID_REQUEST),          # not changeable at run time
    ("", {"auto.create.topics.enable": "false"}, True, ErrorCode.INVALID_REQUEST),
    ("1", {"log.retention.ms": "soon"}, True, ErrorCode.INVALID_REQUEST),     # Kafka's code for a bad value here
    ("", {"listeners": "PLAINTEXT://:9093"}, True, ErrorCode.INVALID_REQUEST),  # per broker only
    ("1", {"ssl.keystore.location": "/x"}, True, ErrorCode.INVALID_REQUEST),  # per listener only
    ("1", {"log.retention.ms": "1"}, True, 0),
    ("", {"log.cleanup.policy": "compact"}, True, 0),
    ("1", {"log.retention.ms": "1"}, False, 0),                               # kept and applied live
])
@pytest.mark.parametrize("api", ["legacy", "incremental"])
async def test_broker_config_changes(broker, name, configs, validate_only, code, api):
    assert await one(broker, setting(api, name, configs, BROKER), validate_only=validate_only) == code


async def test_broker_incremental_list_rules(broker):
    assert await one(broker, incremental("1", ("log.retention.ms", APPEND, "1"), resource_type=BROKER),
                     validate_only=True) == ErrorCode.INVALID_CONFIG
    assert await one(broker, incremental("1", ("num.partitions", DELETE, None), resource_type=BROKER)) == 0


# --- broker loggers -----------------------------------------------------------------------------------------------

@pytest.fixture
def test_logger():
    logger = logging.getLogger("compatbroker.alter-test")
    yield logger
    logger.setLevel(logging.NOTSET)


async def test_logger_levels_change_through_incremental_alter_only(broker, test_logger):
    logger = test_logger
    assert await one(broker, legacy("1", BROKER_LOGGER, **{logger.name: "DEBUG"})) == ErrorCode.INVALID_REQUEST
    assert await one(broker, incremental("1", (logger.name, SET, "TRACE"), resource_type=BROKER_LOGGER),
                     validate_only=True) == 0
    assert logger.level == logging.NOTSET
    assert await one(broker, incremental("1", (logger.name, SET, "TRACE"), resource_type=BROKER_LOGGER)) == 0
    assert logger.level == 5 and logger.isEnabledFor(5)
    assert await one(broker, incremental("1", (logger.name, DELETE, None), resource_type=BROKER_LOGGER)) == 0
    assert logger.level == logging.NOTSET


@pytest.mark.parametrize("name, operation, code", [
    ("1", ("compatbroker.alter-test", SET, "LOUD"), ErrorCode.INVALID_CONFIG),
    ("1", ("compatbroker.alter-test", SET, "debug"), ErrorCode.INVALID_CONFIG),
    ("1", ("no.such.logger.anywhere", SET, "INFO"), ErrorCode.INVALID_CONFIG),
    ("1", ("root", DELETE, None), ErrorCode.INVALID_REQUEST),
    ("1", ("compatbroker.alter-test", APPEND, "INFO"), ErrorCode.INVALID_REQUEST),
    ("2", ("compatbroker.alter-test", SET, "INFO"), ErrorCode.INVALID_REQUEST),
    ("", ("compatbroker.alter-test", SET, "INFO"), ErrorCode.INVALID_REQUEST),
])
async def test_logger_errors(broker, test_logger, name, operation, code):
    assert await one(broker, incremental(name, operation, resource_type=BROKER_LOGGER)) == code
    assert test_logger.level == logging.NOTSET


# --- live application ---------------------------------------------------------------------------------------------

async def test_lower_segment_bytes_rolls_at_the_next_append(broker):
    broker.create_topic("t", 1)
    assert (await produce(broker, batch(b"x" * 300))).error_code == 0
    assert len(broker.get_log("t", 0).segments) == 1
    assert await one(broker, incremental("t", ("segment.bytes", SET, "400"))) == 0
    for _ in range(3):
        assert (await produce(broker, batch(b"y" * 300))).error_code == 0
    assert len(broker.get_log("t", 0).segments) == 4


async def test_retention_ms_applies_at_the_next_retention_pass(broker):
    broker.create_topic("t", 1, {"segment.bytes": "400"})
    old = int(time.time() * 1000) - 3_600_000
    for _ in range(3):
        await produce(broker, batch(b"z" * 300, timestamp=old))
    assert await broker.run_retention() == 0
    assert await one(broker, legacy(**{"segment.bytes": "400", "retention.ms": "60000"})) == 0
    assert await broker.run_retention() == 2  # the active segment always stays
    assert broker.get_log("t", 0).log_start_offset == 2


async def test_log_append_time_changes_the_produce_answer(broker):
    broker.create_topic("t", 1)
    assert (await produce(broker, batch(b"a"))).log_append_time_ms == -1
    assert await one(broker, incremental("t", ("message.timestamp.type", SET, "LogAppendTime"))) == 0
    before = int(time.time() * 1000)
    answer = await produce(broker, batch(b"b", timestamp=1000))
    assert answer.log_append_time_ms >= before
    assert records_of(broker.get_log("t", 0).read_bytes(1, 1 << 20))[0].timestamp == answer.log_append_time_ms


async def test_max_message_bytes_and_cleanup_policy_apply_to_the_next_produce(broker):
    broker.create_topic("t", 1)
    assert await one(broker, incremental("t", ("max.message.bytes", SET, "200"),
                                         ("cleanup.policy", SET, "compact"))) == 0
    assert (await produce(broker, batch(b"x" * 300))).error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert (await produce(broker, batch(b"v", key=None))).error_code == ErrorCode.INVALID_RECORD
    assert (await produce(broker, batch(b"v"))).error_code == 0


async def test_compression_type_recompresses_on_append(broker):
    broker.create_topic("t", 1)
    assert await one(broker, legacy(**{"compression.type": "gzip"})) == 0
    assert (await produce(broker, batch(b"one", b"two", compression=Compression.SNAPPY))).error_code == 0
    stored = broker.get_log("t", 0).read_bytes(0, 1 << 20)
    assert [header.compression for _, header in iter_batches(stored)] == [Compression.GZIP]
    assert [record.value for record in records_of(stored)] == [b"one", b"two"]


# --- persistence --------------------------------------------------------------------------------------------------

async def test_changes_survive_a_broker_restart(tmp_path):
    broker = make_broker(tmp_path / "data")
    broker.create_topic("t", 1)
    assert await one(broker, incremental("t", ("retention.ms", SET, "1234"),
                                         ("unclean.leader.election.enable", SET, "true"))) == 0
    broker.logs.shutdown()
    saved = json.loads((tmp_path / "data" / TOPIC_CONFIGS_FILE).read_text())
    assert saved["t"] == {"retention.ms": "1234", "unclean.leader.election.enable": "true"}
    again = make_broker(tmp_path / "data")
    try:
        found = await described(again)
        assert found["retention.ms"] == ("1234", 1) and found["unclean.leader.election.enable"] == ("true", 1)
        assert again.get_log("t", 0).config.retention_ms == 1234
    finally:
        again.logs.shutdown()


async def test_a_config_file_the_disk_refuses_is_that_resources_error(broker, monkeypatch, caplog):
    broker.create_topic("full", 1)

    def full_disk(topic, overrides):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(broker.logs, "set_topic_config", full_disk)
    answer = await call(broker, 2, AlterConfigsRequest(resources=[
        Legacy(resource_type=2, resource_name="full", configs=[LegacyConfig(name="retention.ms", value="1000")])]))
    [result] = answer.decoded.responses
    assert (result.error_code, result.error_message) == (ErrorCode.UNKNOWN_SERVER_ERROR, None)
    assert [(r.levelname, r.exc_info) for r in caplog.records if r.levelno >= 30] == [("WARNING", None)]
