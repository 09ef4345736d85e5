"""GROUP config resources (KIP-848, KIP-932) through DescribeConfigs, IncrementalAlterConfigs and AlterConfigs:
Kafka 4.2's names and defaults, its checks with their messages, authorization on the group, the typed view the
coordinators read, and persistence across a restart."""
from __future__ import annotations

import json

import pytest

from compatbroker.cluster.metadata import GROUP_CONFIGS_FILE
from compatbroker.coordinator.group_config import duration_ms, group_config, is_share_auto_offset_reset
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import (AlterConfigsRequest, DescribeConfigsRequest,
                                            IncrementalAlterConfigsRequest)
from compatbroker.security.acls import AclOperation, ResourceType

from .authz_helpers import AUTHORIZER_ON, allow, call_as
from .conftest import make_broker
from .helpers import call

GROUP = 32
SET, DELETE, APPEND = 0, 1, 2
GROUP_CONFIG_SOURCE, DEFAULT_CONFIG = 8, 5
INT, STRING = 3, 2
KAFKA_42_GROUP_CONFIGS = {  # name -> default, without streams.* (no streams groups here)
    # the broker's group.consumer.heartbeat.interval.ms: compatbroker's development default 500 (Kafka: 5000)
    "consumer.heartbeat.interval.ms": "500", "consumer.session.timeout.ms": "45000",
    "share.auto.offset.reset": "latest", "share.heartbeat.interval.ms": "5000",
    "share.isolation.level": "read_uncommitted", "share.record.lock.duration.ms": "30000",
    "share.session.timeout.ms": "45000"}


def setting(group="g", **configs):
    return IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=GROUP, resource_name=group,
        configs=[IncrementalAlterConfigsRequest.AlterableConfig(name=name.replace("_", "."), config_operation=SET,
                                                               value=value) for name, value in configs.items()])


def operations(group, *ops):
    return IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=GROUP, resource_name=group,
        configs=[IncrementalAlterConfigsRequest.AlterableConfig(name=name, config_operation=code, value=value)
                 for name, code, value in ops])


async def incremental(broker, *resources, validate_only=False, as_alice=False):
    request = IncrementalAlterConfigsRequest(resources=list(resources), validate_only=validate_only)
    answer = await (call_as(broker, 1, request) if as_alice else call(broker, 1, request))
    return [(r.error_code, r.error_message) for r in answer.decoded.responses]


async def legacy(broker, group, configs: dict, validate_only=False):
    resource = AlterConfigsRequest.AlterConfigsResource(
        resource_type=GROUP, resource_name=group,
        configs=[AlterConfigsRequest.AlterableConfig(name=k, value=v) for k, v in configs.items()])
    answer = await call(broker, 2, AlterConfigsRequest(resources=[resource], validate_only=validate_only))
    return [(r.error_code, r.error_message) for r in answer.decoded.responses]


async def describe(broker, group="g", *, version=4, keys=None, as_alice=False):
    request = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=GROUP, resource_name=group, configuration_keys=keys)], include_synonyms=version >= 1,
        include_documentation=version >= 3)
    answer = await (call_as(broker, version, request) if as_alice else call(broker, version, request))
    return answer.decoded.results[0]


async def values(broker, group="g") -> dict[str, tuple[str, int]]:
    result = await describe(broker, group)
    assert result.error_code == 0
    return {entry.name: (entry.value, entry.config_source) for entry in result.configs}


# --- DescribeConfigs ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(5))
async def test_every_group_config_of_kafka_42_is_described_with_its_default(broker, version):
    result = await describe(broker, "no-such-group", version=version)
    assert result.error_code == 0
    configs = {entry.name: entry for entry in result.configs}
    assert {name: entry.value for name, entry in configs.items()} == KAFKA_42_GROUP_CONFIGS
    for entry in configs.values():
        assert not entry.read_only and not entry.is_sensitive
        if version == 0:
            assert entry.is_default
            continue
        assert entry.config_source == DEFAULT_CONFIG
        assert [(s.name, s.value, s.config_source if hasattr(s, "config_source") else s.source)
                for s in entry.synonyms] == [(entry.name, entry.value, DEFAULT_CONFIG)]
        if version >= 3:
            assert entry.config_type == (STRING if entry.name.endswith((".reset", ".level")) else INT)
            assert entry.documentation


async def test_defaults_follow_the_broker_settings(broker_factory):
    broker = broker_factory(**{"group.consumer.session.timeout.ms": "50000",
                               "group.share.record.lock.duration.ms": "20000"})
    found = await values(broker)
    assert found["consumer.session.timeout.ms"] == ("50000", DEFAULT_CONFIG)
    assert found["share.record.lock.duration.ms"] == ("20000", DEFAULT_CONFIG)


async def test_an_empty_group_name_is_an_invalid_request(broker):
    result = await describe(broker, "")
    assert (result.error_code, result.error_message) == (ErrorCode.INVALID_REQUEST, "Group name must not be empty")


async def test_only_the_keys_asked_for_are_described(broker):
    result = await describe(broker, keys=["share.isolation.level", "nope"])
    assert [entry.name for entry in result.configs] == ["share.isolation.level"]


# --- changing them ------------------------------------------------------------------------------------------------

async def test_a_set_value_is_described_as_the_groups_own_and_read_by_the_coordinators(broker):
    assert await incremental(broker, setting(consumer_session_timeout_ms="50000",
                                             share_auto_offset_reset="by_duration:PT1H")) == [(0, None)]
    found = await values(broker)
    assert found["consumer.session.timeout.ms"] == ("50000", GROUP_CONFIG_SOURCE)
    assert found["share.auto.offset.reset"] == ("by_duration:PT1H", GROUP_CONFIG_SOURCE)
    assert found["share.session.timeout.ms"] == ("45000", DEFAULT_CONFIG)
    config = group_config(broker, "g")
    assert config.consumer_session_timeout_ms == 50_000 and config.share_reset_duration_ms == 3_600_000
    assert group_config(broker, "other").consumer_session_timeout_ms == 45_000


async def test_delete_goes_back_to_the_broker_value_and_other_keys_stay(broker):
    await incremental(broker, setting(consumer_session_timeout_ms="50000", share_isolation_level="read_committed"))
    assert await incremental(broker, operations("g", ("consumer.session.timeout.ms", DELETE, None),
                                                ("share.session.timeout.ms", DELETE, None))) == [(0, None)]
    found = await values(broker)
    assert found["consumer.session.timeout.ms"] == ("45000", DEFAULT_CONFIG)
    assert found["share.isolation.level"] == ("read_committed", GROUP_CONFIG_SOURCE)


async def test_alter_configs_replaces_the_whole_set(broker):
    await incremental(broker, setting(consumer_session_timeout_ms="50000"))
    assert await legacy(broker, "g", {"share.isolation.level": "read_committed"}) == [(0, None)]
    found = await values(broker)
    assert found["consumer.session.timeout.ms"] == ("45000", DEFAULT_CONFIG)
    assert found["share.isolation.level"] == ("read_committed", GROUP_CONFIG_SOURCE)


@pytest.mark.parametrize("configs, message", [
    ({"streams.session.timeout.ms": "50000"}, "Unknown group config name: streams.session.timeout.ms"),
    ({"consumer.session.timeout.ms": "40000"},
     "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
    ({"consumer.session.timeout.ms": "60001"},
     "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
    ({"consumer.heartbeat.interval.ms": "499"},
     "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"),
    ({"share.session.timeout.ms": "60001"},
     "share.session.timeout.ms must be less than or equal to group.share.max.session.timeout.ms"),
    ({"share.heartbeat.interval.ms": "15001"},
     "share.heartbeat.interval.ms must be less than or equal to group.share.max.heartbeat.interval.ms"),
    ({"share.record.lock.duration.ms": "14999"},
     "share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"),
    ({"share.record.lock.duration.ms": "60001"},
     "share.record.lock.duration.ms must be less than or equal to group.share.max.record.lock.duration.ms"),
    ({"share.record.lock.duration.ms": "999"},
     "Invalid value 999 for configuration share.record.lock.duration.ms: Value must be at least 1000"),
    ({"consumer.session.timeout.ms": "soon"},
     "Invalid value soon for configuration consumer.session.timeout.ms: Not a number of type INT"),
    pytest.param({"consumer.session.timeout.ms": "9" * 5000},
                 f"Invalid value {'9' * 5000} for configuration consumer.session.timeout.ms: Not a number of type INT",
                 id="more-digits-than-python-int-reads"),
    ({"share.isolation.level": "read_dirty"},
     "Invalid value read_dirty for configuration share.isolation.level: String must be one of: read_committed, "
     "read_uncommitted"),
])
async def test_kafkas_checks_answer_invalid_config_and_change_nothing(broker, configs, message):
    for answer in (await incremental(broker, setting(**{k.replace(".", "_"): v for k, v in configs.items()})),
                   await legacy(broker, "g", configs)):
        assert answer == [(ErrorCode.INVALID_CONFIG, message)]
    assert all(source == DEFAULT_CONFIG for _, source in (await values(broker)).values())


async def test_leading_zeros_are_read_as_java_reads_them(broker):
    assert await incremental(broker, setting(consumer_session_timeout_ms="0" * 5000 + "50000")) == [(0, None)]
    assert (await values(broker))["consumer.session.timeout.ms"] == ("50000", GROUP_CONFIG_SOURCE)


async def test_the_session_timeout_must_stay_above_the_heartbeat_interval(broker_factory):
    broker = broker_factory(**{"group.consumer.min.session.timeout.ms": "1000",
                               "group.consumer.heartbeat.interval.ms": "5000"})
    assert await incremental(broker, setting(consumer_session_timeout_ms="5000")) == [
        (ErrorCode.INVALID_CONFIG, "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms")]
    assert await incremental(broker, setting(consumer_session_timeout_ms="6000")) == [(0, None)]


@pytest.mark.parametrize("value, valid", [
    ("latest", True), ("EARLIEST", True), ("by_duration:PT1H", True), ("by_duration:P1DT2H3M4.5S", True),
    ("by_duration:PT0S", True), ("by_duration:-PT1H", False), ("by_duration:", False), ("by_duration:PT", False),
    ("by_duration:1h", False), ("none", False), ("", False),
    ("by_duration:P106751991167300D", True), ("by_duration:P106751991167301D", False)])  # seconds in a Java long
async def test_share_auto_offset_reset_takes_kafkas_values(broker, value, valid):
    assert is_share_auto_offset_reset(value) is valid
    (answer,) = await incremental(broker, setting(share_auto_offset_reset=value))
    assert answer[0] == (ErrorCode.NONE if valid else ErrorCode.INVALID_CONFIG)


def test_durations_read_as_java_reads_them():
    assert duration_ms("P1DT2H3M4.5S") == ((24 + 2) * 3600 + 3 * 60 + 4) * 1000 + 500
    assert duration_ms("pt90m") == 5_400_000
    with pytest.raises(ValueError):
        duration_ms("1 hour")


async def test_invalid_requests(broker):
    assert (await incremental(broker, setting("", consumer_session_timeout_ms="50000")))[0] == (
        ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
    answer = await incremental(broker, operations("g", ("share.isolation.level", APPEND, "read_committed")))
    assert answer[0][0] == ErrorCode.INVALID_CONFIG  # no group config is a LIST


async def test_validate_only_changes_nothing(broker):
    assert await incremental(broker, setting(consumer_session_timeout_ms="50000"), validate_only=True) == [(0, None)]
    assert await legacy(broker, "g", {"share.isolation.level": "read_committed"}, validate_only=True) == [(0, None)]
    assert all(source == DEFAULT_CONFIG for _, source in (await values(broker)).values())


# --- authorization ------------------------------------------------------------------------------------------------

async def test_alter_and_describe_need_their_operations_on_the_group(broker_factory):
    secured = broker_factory(**AUTHORIZER_ON)
    assert (await incremental(secured, setting(consumer_session_timeout_ms="50000"), as_alice=True))[0][0] == \
        ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert (await describe(secured, as_alice=True)).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    allow(secured, AclOperation.ALTER_CONFIGS, ResourceType.GROUP, "g")
    allow(secured, AclOperation.DESCRIBE_CONFIGS, ResourceType.GROUP, "g")
    assert await incremental(secured, setting(consumer_session_timeout_ms="50000"), as_alice=True) == [(0, None)]
    result = await describe(secured, as_alice=True)
    assert result.error_code == 0
    assert {e.name: e.value for e in result.configs}["consumer.session.timeout.ms"] == "50000"


# --- persistence --------------------------------------------------------------------------------------------------

async def test_group_configs_survive_a_restart(tmp_path):
    broker = make_broker(tmp_path / "data")
    assert await incremental(broker, setting(share_record_lock_duration_ms=" 20000 ")) == [(0, None)]
    broker.logs.shutdown()
    saved = json.loads((tmp_path / "data" / GROUP_CONFIGS_FILE).read_text())
    assert saved["groups"] == {"g": {"share.record.lock.duration.ms": "20000"}}
    again = make_broker(tmp_path / "data")
    try:
        assert (await values(again))["share.record.lock.duration.ms"] == ("20000", GROUP_CONFIG_SOURCE)
        assert group_config(again, "g").share_record_lock_duration_ms == 20_000
    finally:
        again.logs.shutdown()


async def test_a_file_the_disk_refuses_is_that_resources_error_and_nothing_changes(broker, monkeypatch):
    import compatbroker.storage.config_sets as config_sets

    def full_disk(path, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(config_sets, "write_atomically", full_disk)
    assert await incremental(broker, setting(consumer_session_timeout_ms="50000")) == [
        (ErrorCode.UNKNOWN_SERVER_ERROR, None)]
    assert (await values(broker))["consumer.session.timeout.ms"] == ("45000", DEFAULT_CONFIG)


async def test_a_cluster_shares_group_configs_and_keeps_them_over_a_restart(tmp_path):
    from .cluster_helpers import serving_cluster

    async with serving_cluster(tmp_path) as cluster:
        assert await incremental(cluster.nodes[1], setting(share_isolation_level="read_committed")) == [(0, None)]
        for node in cluster.nodes.values():  # any node answers with the cluster-wide value
            assert (await values(node))["share.isolation.level"] == ("read_committed", GROUP_CONFIG_SOURCE)
            assert group_config(node, "g").share_isolation_level == "read_committed"
    async with serving_cluster(tmp_path) as cluster:
        assert group_config(cluster.nodes[2], "g").share_isolation_level == "read_committed"


async def test_a_hand_edited_value_that_is_not_valid_falls_back_to_the_broker_value(tmp_path, caplog):
    data = tmp_path / "data"
    make_broker(data).logs.shutdown()
    (data / GROUP_CONFIGS_FILE).write_text(json.dumps({"version": 1, "groups": {"g": {
        "consumer.session.timeout.ms": "soon", "share.isolation.level": "read_committed", "bogus": "1"}}}))
    broker = make_broker(data)
    try:
        config = group_config(broker, "g")
        assert (config.consumer_session_timeout_ms, config.share_isolation_level) == (45_000, "read_committed")
        group_config(broker, "g")
        assert len([r for r in caplog.records if "ignoring its stored config" in r.message]) == 2  # once each
    finally:
        broker.logs.shutdown()


def test_an_unreadable_group_configs_file_stops_the_start_with_the_reason(tmp_path):
    data = tmp_path / "data"
    make_broker(data).logs.shutdown()
    (data / GROUP_CONFIGS_FILE).write_text(json.dumps({"groups": ["g"]}))
    with pytest.raises(ValueError, match="unreadable group configs"):
        make_broker(data)
