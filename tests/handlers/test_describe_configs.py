"""DescribeConfigs: every topic and broker config with values, sources, synonyms, types and documentation, through
every version, and each error Kafka answers."""
from __future__ import annotations

import logging

import pytest

from compatbroker.config_catalog import BROKER_CONFIGS, TOPIC_CONFIGS
from compatbroker.handlers import describe_configs
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import DescribeConfigsRequest

from .helpers import call

Resource = DescribeConfigsRequest.DescribeConfigsResource
TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
TOPIC_CONFIG, STATIC_BROKER, DEFAULT, LOGGER = 1, 4, 5, 6
ALL_VERSIONS = range(5)


def request(*resources, synonyms=False, documentation=False, version=4) -> DescribeConfigsRequest:
    return DescribeConfigsRequest(resources=list(resources), include_synonyms=synonyms and version >= 1,
                                  include_documentation=documentation and version >= 3)


def topic(name="t", keys=None) -> Resource:
    return Resource(resource_type=TOPIC, resource_name=name, configuration_keys=keys)


async def describe(broker, *resources, version=4, **options):
    answer = await call(broker, version, request(*resources, version=version, **options))
    return answer.decoded.results


async def entries(broker, resource, **options) -> dict:
    (result,) = await describe(broker, resource, **options)
    assert (result.error_code, result.resource_type, result.resource_name) == (0, resource.resource_type,
                                                                               resource.resource_name)
    return {entry.name: entry for entry in result.configs}


def test_declares_every_schema_version():
    assert (describe_configs.API_KEY, describe_configs.MIN_VERSION, describe_configs.MAX_VERSION) == (32, 0, 4)


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_a_topic_lists_every_kafka_topic_config_with_its_default(broker, version):
    broker.create_topic("t", 1)
    found = await entries(broker, topic(), version=version)
    assert sorted(found) == sorted(TOPIC_CONFIGS) and len(found) == 33
    expected = {"retention.ms": "604800000", "cleanup.policy": "delete", "segment.bytes": "1073741824",
                "max.message.bytes": "1048588", "compression.type": "producer", "min.cleanable.dirty.ratio": "0.5",
                "unclean.leader.election.enable": "false", "local.retention.ms": "-2",
                "message.timestamp.after.max.ms": "3600000", "flush.ms": "9223372036854775807",
                "leader.replication.throttled.replicas": ""}
    assert {name: found[name].value for name in expected} == expected
    assert not any(entry.read_only or entry.is_sensitive for entry in found.values())
    if version == 0:
        assert all(entry.is_default for entry in found.values())
    else:
        assert {entry.config_source for entry in found.values()} == {DEFAULT}
        assert all(entry.synonyms == [] for entry in found.values())  # not asked for


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_an_override_is_a_topic_config_with_its_synonyms(broker, version):
    broker.create_topic("t", 1, {"retention.ms": "1000", "cleanup.policy": "delete, compact"})
    found = await entries(broker, topic(), version=version, synonyms=True)
    assert (found["retention.ms"].value, found["cleanup.policy"].value) == ("1000", "delete,compact")
    if version == 0:
        assert not found["retention.ms"].is_default and found["segment.bytes"].is_default
        return
    assert found["retention.ms"].config_source == TOPIC_CONFIG
    synonyms = [(s.name, s.value, s.source) for s in found["cleanup.policy"].synonyms]
    assert synonyms == [("cleanup.policy", "delete,compact", TOPIC_CONFIG), ("log.cleanup.policy", "delete", DEFAULT)]
    assert [(s.name, s.value, s.source) for s in found["segment.bytes"].synonyms] == [
        ("log.segment.bytes", "1073741824", DEFAULT)]


async def test_broker_properties_are_static_synonyms_with_kafkas_quirk_for_time_units(broker_factory):
    broker = broker_factory(**{"message.max.bytes": "2000", "log.retention.hours": "24"})
    broker.create_topic("t", 1)
    found = await entries(broker, topic(), synonyms=True)
    assert (found["max.message.bytes"].value, found["max.message.bytes"].config_source) == ("2000", STATIC_BROKER)
    assert [(s.name, s.value, s.source) for s in found["max.message.bytes"].synonyms] == [
        ("message.max.bytes", "2000", STATIC_BROKER), ("message.max.bytes", "1048588", DEFAULT)]
    # the hours form is in force, but Kafka's synonym list starts at log.retention.ms, so the source reads default
    assert (found["retention.ms"].value, found["retention.ms"].config_source) == ("86400000", DEFAULT)
    assert found["retention.ms"].synonyms == []


async def test_types_and_documentation_from_version_3(broker):
    broker.create_topic("t", 1)
    found = await entries(broker, topic(), documentation=True)
    types = {name: found[name].config_type for name in ("preallocate", "compression.type", "segment.bytes",
                                                         "retention.ms", "min.cleanable.dirty.ratio",
                                                         "cleanup.policy")}
    assert types == {"preallocate": 1, "compression.type": 2, "segment.bytes": 3, "retention.ms": 5,
                     "min.cleanable.dirty.ratio": 6, "cleanup.policy": 7}
    assert all(entry.documentation for entry in found.values())
    assert all(entry.documentation is None for entry in (await entries(broker, topic())).values())
    old = await entries(broker, topic(), version=2, documentation=True)
    assert {entry.config_type for entry in old.values()} == {0}  # v2 has neither field


@pytest.mark.parametrize("keys, expected", [(["retention.ms", "no.such.key"], ["retention.ms"]),
                                            ([], sorted(TOPIC_CONFIGS)), (None, sorted(TOPIC_CONFIGS))])
async def test_configuration_keys_filter(broker, keys, expected):
    broker.create_topic("t", 1)
    assert sorted(await entries(broker, topic(keys=keys))) == expected


@pytest.mark.parametrize("name, code", [("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                        ("bad name", ErrorCode.INVALID_TOPIC_EXCEPTION),
                                        ("", ErrorCode.INVALID_TOPIC_EXCEPTION)])
@pytest.mark.parametrize("version", [0, 4])
async def test_topic_errors(broker, name, code, version):
    broker.create_topic("t", 1)
    results = await describe(broker, topic(name), topic("t"), version=version)
    assert [(r.error_code, r.resource_name, len(r.configs)) for r in results] == [(code, name, 0), (0, "t", 33)]


async def test_the_broker_lists_its_configs_with_read_only_flags(broker_factory):
    broker = broker_factory(**{"num.partitions": "3"})
    found = await entries(broker, Resource(resource_type=BROKER, resource_name="1"), synonyms=True)
    assert set(found) == set(BROKER_CONFIGS)
    assert (found["num.partitions"].value, found["num.partitions"].config_source) == ("3", STATIC_BROKER)
    assert found["num.partitions"].read_only and not found["log.retention.ms"].read_only
    assert (found["log.retention.ms"].value, found["log.retention.hours"].value) == (None, "168")
    assert (found["node.id"].value, found["broker.id"].value) == ("1", "1")
    assert found["group.initial.rebalance.delay.ms"].value == "0"  # our documented default
    secret = found["ssl.keystore.password"]
    assert (secret.value, secret.is_sensitive, secret.config_type) == (None, True, 9)
    assert found["log.cleaner.io.max.bytes.per.second"].value == "1.7976931348623157E308"


def test_every_name_the_broker_accepts_is_catalogued():
    from compatbroker.config import known_names
    assert known_names() <= set(BROKER_CONFIGS)


@pytest.mark.parametrize("name, code", [("2", ErrorCode.INVALID_REQUEST), ("one", ErrorCode.INVALID_REQUEST)])
async def test_another_broker_id_is_an_invalid_request(broker, name, code):
    (result,) = await describe(broker, Resource(resource_type=BROKER, resource_name=name))
    assert (result.error_code, result.configs) == (code, [])


async def test_the_cluster_default_broker_resource_has_no_dynamic_configs(broker):
    (result,) = await describe(broker, Resource(resource_type=BROKER, resource_name=""))
    assert (result.error_code, result.configs) == (0, [])


async def test_broker_loggers_and_their_levels(broker):
    logging.getLogger("compatbroker.describe-test")
    found = await entries(broker, Resource(resource_type=BROKER_LOGGER, resource_name="1"))
    assert {"root", "compatbroker.describe-test"} <= set(found)
    assert found["root"].value in ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF", "ALL")
    assert {entry.config_source for entry in found.values()} == {LOGGER}
    for name in ("", "7"):
        (result,) = await describe(broker, Resource(resource_type=BROKER_LOGGER, resource_name=name))
        assert result.error_code == ErrorCode.INVALID_REQUEST


async def test_an_unknown_resource_type_fails_every_resource(broker):
    broker.create_topic("t", 1)
    results = await describe(broker, topic("t"), Resource(resource_type=3, resource_name="x"))
    assert [r.error_code for r in results] == [ErrorCode.INVALID_REQUEST] * 2


async def test_group_configs_are_described_beside_topics(broker):
    broker.create_topic("t", 1)
    results = await describe(broker, Resource(resource_type=GROUP, resource_name="g"), topic("t"))
    assert [r.error_code for r in results] == [0, 0]
    assert "consumer.session.timeout.ms" in {entry.name for entry in results[0].configs}  # tests: test_group_configs
