"""CreateTopics: counts and defaults, replica assignments, configs, names, validate_only, and what each version
answers. Every error Kafka's controller produces is sent here and its exact code (and message) checked."""
from __future__ import annotations

import os
import uuid

import pytest

from compatbroker import config_catalog
from compatbroker.handlers import create_topics
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import CreateTopicsRequest, MetadataRequest

from .helpers import call, fail_partition_creation

Topic = CreateTopicsRequest.CreatableTopic
Assignment = CreateTopicsRequest.CreatableReplicaAssignment
Config = CreateTopicsRequest.CreatableTopicConfig
ALL_VERSIONS = range(create_topics.MIN_VERSION, create_topics.MAX_VERSION + 1)
ZERO_UUID = uuid.UUID(int=0)
E = ErrorCode


def topic(name: str, partitions: int = 1, replication_factor: int = 1, *, assignments=None, configs=None):
    return Topic(name=name, num_partitions=partitions, replication_factor=replication_factor,
                 assignments=[Assignment(partition_index=index, broker_ids=brokers)
                              for index, brokers in (assignments or {}).items()],
                 configs=[Config(name=key, value=value) for key, value in (configs or {}).items()])


async def create(broker, *topics, version: int = 7, validate_only: bool = False) -> dict:
    """name -> result, after the request went through the codec both ways."""
    answer = await call(broker, version, CreateTopicsRequest(topics=list(topics), timeout_ms=5000,
                                                             validate_only=validate_only))
    return {result.name: result for result in answer.decoded.topics}


async def refused(broker, spec, code: ErrorCode, message: str | None = None, *, version: int = 7):
    """Assert that creating `spec` fails with `code` (and `message`), and that nothing was created."""
    result = (await create(broker, spec, version=version))[spec.name]
    assert (result.error_code, result.topic_id, result.num_partitions) == (code, ZERO_UUID, -1)
    if message is not None:
        assert result.error_message == message
    assert broker.topic(spec.name) is None
    return result


def partition_dirs(broker, name: str) -> list[str]:
    return sorted(entry for entry in os.listdir(broker.logs.data_dir) if entry.rpartition("-")[0] == name)


def test_declares_every_schema_version():
    assert (create_topics.API_KEY, create_topics.MIN_VERSION, create_topics.MAX_VERSION) == (19, 0, 7)
    assert CreateTopicsRequest.VALID_VERSIONS == (0, 7)


# --- creation ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_creates_a_topic_at_every_version(broker, version):
    result = (await create(broker, topic("orders", 3), version=version))["orders"]
    info = broker.topic("orders")
    assert info is not None and info.partitions == 3 and not info.is_internal
    assert partition_dirs(broker, "orders") == ["orders-0", "orders-1", "orders-2"]
    assert result.error_code == E.NONE
    assert result.error_message == (None if version >= 1 else "")  # v0 has no message field
    assert result.topic_id == (info.topic_id if version >= 7 else ZERO_UUID)
    assert (result.num_partitions, result.replication_factor) == ((3, 1) if version >= 5 else (-1, -1))
    assert bool(result.configs) == (version >= 5)


async def test_minus_one_takes_the_broker_defaults(broker_factory):
    broker = broker_factory(**{"num.partitions": 4})
    result = (await create(broker, topic("defaults", -1, -1)))["defaults"]
    assert (result.error_code, result.num_partitions, result.replication_factor) == (E.NONE, 4, 1)
    assert broker.topic("defaults").partitions == 4


async def test_a_created_topic_is_in_metadata_with_its_id(broker):
    result = (await create(broker, topic("listed", 2)))["listed"]
    answer = (await call(broker, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="listed")],
                                                     allow_auto_topic_creation=False))).decoded
    [described] = answer.topics
    assert (described.error_code, described.topic_id, len(described.partitions)) == (E.NONE, result.topic_id, 2)


async def test_one_bad_topic_does_not_stop_the_others(broker):
    results = await create(broker, topic("good"), topic("bad", 0), topic("also-good", 2))
    assert [(name, r.error_code) for name, r in results.items()] == [
        ("good", E.NONE), ("bad", E.INVALID_PARTITIONS), ("also-good", E.NONE)]
    assert sorted(broker.topics()) == ["also-good", "good"]


async def test_metadata_still_creates_topics_automatically(broker):
    await create(broker, topic("explicit"))
    answer = (await call(broker, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="implicit")],
                                                     allow_auto_topic_creation=True))).decoded
    assert answer.topics[0].error_code == E.LEADER_NOT_AVAILABLE
    assert broker.topic("implicit").partitions == 1


# --- replication factor and partition count ---------------------------------------------------------------------------

async def test_more_replicas_than_brokers(broker):
    await refused(broker, topic("r3", 1, 3), E.INVALID_REPLICATION_FACTOR,
                  "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be "
                  "reached because only 1 broker(s) are registered.")


async def test_default_replication_factor_above_one_broker(broker_factory):
    broker = broker_factory(**{"default.replication.factor": 2})
    await refused(broker, topic("r-default", 1, -1), E.INVALID_REPLICATION_FACTOR)


@pytest.mark.parametrize("replication_factor", [0, -2])
async def test_non_positive_replication_factor(broker, replication_factor):
    await refused(broker, topic("r0", 1, replication_factor), E.INVALID_REPLICATION_FACTOR,
                  "Replication factor must be larger than 0, or -1 to use the default value.")


@pytest.mark.parametrize("partitions", [0, -2])
async def test_non_positive_partition_count(broker, partitions):
    await refused(broker, topic("p0", partitions, 1), E.INVALID_PARTITIONS,
                  "Number of partitions was set to an invalid non-positive value.")


async def test_the_replication_factor_is_checked_before_the_partition_count(broker):
    await refused(broker, topic("both-bad", 0, 0), E.INVALID_REPLICATION_FACTOR)


# --- explicit assignments ---------------------------------------------------------------------------------------------

async def test_explicit_assignments_make_the_partitions(broker):
    result = (await create(broker, topic("manual", -1, -1, assignments={0: [1], 1: [1], 2: [1]})))["manual"]
    assert (result.error_code, result.num_partitions, result.replication_factor) == (E.NONE, 3, 1)
    assert broker.topic("manual").partitions == 3


async def test_assignments_with_a_replication_factor(broker):
    await refused(broker, topic("m1", -1, 1, assignments={0: [1]}), E.INVALID_REQUEST,
                  "A manual partition assignment was specified, but replication factor was not set to -1.")


async def test_assignments_with_a_partition_count(broker):
    await refused(broker, topic("m2", 1, -1, assignments={0: [1]}), E.INVALID_REQUEST,
                  "A manual partition assignment was specified, but numPartitions was not set to -1.")


async def test_assignment_to_another_broker(broker):
    await refused(broker, topic("m3", -1, -1, assignments={0: [2]}), E.INVALID_REPLICA_ASSIGNMENT,
                  "The manual partition assignment includes broker 2, but no such broker is registered.")


async def test_assignment_naming_this_broker_twice(broker):
    await refused(broker, topic("m4", -1, -1, assignments={0: [1, 1]}), E.INVALID_REPLICA_ASSIGNMENT,
                  "The manual partition assignment includes the broker 1 more than once.")


async def test_assignment_with_no_replicas(broker):
    await refused(broker, topic("m5", -1, -1, assignments={0: []}), E.INVALID_REPLICA_ASSIGNMENT,
                  "The manual partition assignment includes an empty replica list.")


async def test_assignments_not_from_zero(broker):
    await refused(broker, topic("m6", -1, -1, assignments={1: [1], 2: [1]}), E.INVALID_REPLICA_ASSIGNMENT,
                  "partitions should be a consecutive 0-based integer sequence")


async def test_two_assignments_for_one_partition(broker):
    spec = Topic(name="m7", num_partitions=-1, replication_factor=-1,
                 assignments=[Assignment(partition_index=0, broker_ids=[1]),
                              Assignment(partition_index=0, broker_ids=[1])])
    await refused(broker, spec, E.INVALID_REPLICA_ASSIGNMENT,
                  "Found multiple manual partition assignments for partition 0")


# --- names ------------------------------------------------------------------------------------------------------------

async def test_existing_topic(broker):
    broker.create_topic("there", 2)
    result = (await create(broker, topic("there", 5)))["there"]
    assert (result.error_code, result.error_message) == (E.TOPIC_ALREADY_EXISTS, "Topic 'there' already exists.")
    assert broker.topic("there").partitions == 2


async def test_duplicate_names_in_one_request(broker):
    results = await call(broker, 7, CreateTopicsRequest(topics=[topic("twice"), topic("once"), topic("twice", 2)]))
    answered = [(r.name, r.error_code, r.error_message) for r in results.decoded.topics]
    assert answered == [("once", E.NONE, None), ("twice", E.INVALID_REQUEST, "Duplicate topic name.")]
    assert broker.topic("twice") is None and broker.topic("once") is not None


@pytest.mark.parametrize("name, reason", [
    ("", "the empty string is not allowed"),
    (".", "'.' is not allowed"),
    ("..", "'..' is not allowed"),
    ("x" * 250, f"the length of '{'x' * 250}' is longer than the max allowed length 249"),
    ("white space", "'white space' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
    ("slash/ed", "'slash/ed' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
])
async def test_illegal_names(broker, name, reason):
    await refused(broker, topic(name), E.INVALID_TOPIC_EXCEPTION, f"Topic name is invalid: {reason}")
    assert os.listdir(broker.logs.data_dir).count(f"{name}-0") == 0


async def test_longest_legal_name(broker):
    name = "y" * 249
    assert (await create(broker, topic(name)))[name].error_code == E.NONE


async def test_dot_and_underscore_collide(broker):
    broker.create_topic("metrics.cpu", 1)
    await refused(broker, topic("metrics_cpu"), E.INVALID_TOPIC_EXCEPTION,
                  "Topic 'metrics_cpu' collides with existing topic: metrics.cpu")


async def test_cluster_metadata_topic_is_prohibited(broker):
    await refused(broker, topic("__cluster_metadata"), E.INVALID_REQUEST,
                  "Creation of internal topic __cluster_metadata is prohibited.")


async def test_an_internal_topic_may_be_created_and_is_internal(broker):
    assert (await create(broker, topic("__transaction_state", 2)))["__transaction_state"].error_code == E.NONE
    assert broker.topic("__transaction_state").is_internal


# --- configs ----------------------------------------------------------------------------------------------------------

async def test_configs_apply_to_the_new_topic(broker):
    result = (await create(broker, topic("configured", configs={"retention.ms": "1234",
                                                                "cleanup.policy": "compact"})))["configured"]
    assert result.error_code == E.NONE
    assert broker.logs.log_config("configured").retention_ms == 1234
    assert broker.get_log("configured", 0).config.compact
    by_name = {config.name: config for config in result.configs}
    assert (by_name["retention.ms"].value, by_name["retention.ms"].config_source) == (
        "1234", config_catalog.DYNAMIC_TOPIC_CONFIG)
    assert by_name["segment.bytes"].config_source == config_catalog.DEFAULT_CONFIG
    assert [config.name for config in result.configs] == sorted(by_name)


async def test_configs_match_describe_configs(broker):
    result = (await create(broker, topic("described", configs={"max.message.bytes": "2000"})))["described"]
    described = config_catalog.describe_topic_configs(broker, "described")
    assert [(c.name, c.value, c.config_source, c.read_only, c.is_sensitive) for c in result.configs] == [
        (e.name, e.value, e.source, e.read_only, e.is_sensitive) for e in described]


async def test_null_config_value(broker):
    await refused(broker, topic("nulls", configs={"retention.ms": None, "segment.ms": None}), E.INVALID_CONFIG,
                  "Null value not supported for topic configs: retention.ms,segment.ms")


@pytest.mark.parametrize("configs", [{"retention.ms": "soon"}, {"no.such.config": "1"},
                                     {"cleanup.policy": "shred"}])
async def test_invalid_config(broker, configs):
    result = await refused(broker, topic("bad-config", configs=configs), E.INVALID_CONFIG)
    assert result.error_message
    assert not partition_dirs(broker, "bad-config")


async def test_config_errors_come_after_name_errors(broker):
    broker.create_topic("taken", 1)
    result = (await create(broker, topic("taken", configs={"retention.ms": "soon"})))["taken"]
    assert result.error_code == E.TOPIC_ALREADY_EXISTS


# --- validate_only ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [1, 4, 5, 7])
async def test_validate_only_creates_nothing(broker, version):
    result = (await create(broker, topic("dry-run", 3, configs={"retention.ms": "999"}), version=version,
                           validate_only=True))["dry-run"]
    assert result.error_code == E.NONE
    assert broker.topic("dry-run") is None
    assert partition_dirs(broker, "dry-run") == []
    assert "dry-run" not in broker.logs.topic_overrides
    if version >= 5:
        by_name = {config.name: config for config in result.configs}
        assert (result.num_partitions, result.replication_factor) == (3, 1)
        assert (by_name["retention.ms"].value, by_name["retention.ms"].config_source) == (
            "999", config_catalog.DYNAMIC_TOPIC_CONFIG)
    if version >= 7:
        assert result.topic_id != ZERO_UUID and broker.topic_by_id(result.topic_id) is None


async def test_validate_only_reports_the_errors_a_creation_would(broker):
    broker.create_topic("exists", 1)
    results = await create(broker, topic("exists"), topic("r2", 1, 2), topic("fine"), validate_only=True)
    assert [(name, r.error_code) for name, r in results.items()] == [
        ("exists", E.TOPIC_ALREADY_EXISTS), ("r2", E.INVALID_REPLICATION_FACTOR), ("fine", E.NONE)]
    assert broker.topic("fine") is None


# --- Kafka's cap on partitions per request, and all or nothing --------------------------------------------------------

TOO_MANY = "Excessively large number of partitions per request."


async def test_ten_thousand_partitions_per_request_are_allowed(broker):
    results = await create(broker, topic("a", 6000), topic("b", 4000), validate_only=True)
    assert [r.error_code for r in results.values()] == [E.NONE, E.NONE]


@pytest.mark.parametrize("version", [0, 1, 7])
async def test_more_than_ten_thousand_partitions_refuse_every_topic(broker, version):
    answer = await call(broker, version, CreateTopicsRequest(
        topics=[topic("a", 6000), topic("d", 1), topic("b", 4000), topic("c", 1), topic("d", 1)], timeout_ms=5000))
    assert [(r.name, r.error_code) for r in answer.decoded.topics] == [
        (name, E.POLICY_VIOLATION) for name in ("a", "d", "b", "c", "d")]
    if version >= 1:  # v0 has no message
        assert {r.error_message for r in answer.decoded.topics} == {TOO_MANY}
    assert broker.topics() == {} and os.listdir(broker.logs.data_dir).count("c-0") == 0


async def test_the_largest_count_a_request_can_carry_is_refused(broker):
    results = await create(broker, topic("huge", 2**31 - 1), topic("small", 1))
    assert [(r.error_code, r.error_message) for r in results.values()] == [(E.POLICY_VIOLATION, TOO_MANY)] * 2
    assert broker.topics() == {}


async def test_the_default_count_and_assignments_count_towards_the_cap(broker_factory):
    broker = broker_factory(**{"num.partitions": 9998})
    results = await create(broker, topic("default", -1, -1), topic("assigned", -1, -1, assignments={0: [1], 1: [1]}),
                           topic("bad", 0), validate_only=True)  # an invalid count counts for nothing
    assert [r.error_code for r in results.values()] == [E.NONE, E.NONE, E.INVALID_PARTITIONS]
    results = await create(broker, topic("default2", -1, -1),
                           topic("assigned2", -1, -1, assignments={0: [1], 1: [1], 2: [1]}), validate_only=True)
    assert [r.error_code for r in results.values()] == [E.POLICY_VIOLATION] * 2


async def test_duplicates_are_not_counted_towards_the_cap(broker):
    results = await create(broker, topic("twice", 9000), topic("twice", 9000), topic("once", 1), validate_only=True)
    assert [(name, r.error_code) for name, r in results.items()] == [("once", E.NONE), ("twice", E.INVALID_REQUEST)]


async def test_a_topic_that_fails_halfway_leaves_nothing_behind(broker, monkeypatch, caplog):
    refused = fail_partition_creation(monkeypatch, after=3)
    results = await create(broker, topic("half", 5), topic("whole", 1))
    assert refused == ["half-3", "whole-0"]
    # an expected condition: one WARNING line per topic, no traceback
    assert [(r.levelname, r.exc_info) for r in caplog.records if r.levelno >= 30] == [("WARNING", None)] * 2
    half = results["half"]
    assert (half.error_code, half.error_message, half.topic_id, half.num_partitions) == (
        E.UNKNOWN_SERVER_ERROR, None, ZERO_UUID, -1)
    assert results["whole"].error_code == E.UNKNOWN_SERVER_ERROR  # every later partition fails too
    assert broker.topic("half") is None and broker.topic("whole") is None
    assert partition_dirs(broker, "half") == [] and broker.logs.get_log("half", 0) is None
    assert "half" not in broker.logs.topic_ids
    monkeypatch.undo()
    results = await create(broker, topic("half", 5))  # the name is free again
    assert results["half"].error_code == E.NONE and partition_dirs(broker, "half") == [f"half-{p}" for p in range(5)]


async def test_a_failed_topic_does_not_stop_the_others(broker, monkeypatch):
    fail_partition_creation(monkeypatch, after=2)
    results = await create(broker, topic("first", 2), topic("second", 3, configs={"retention.ms": "1000"}))
    assert [r.error_code for r in results.values()] == [E.NONE, E.UNKNOWN_SERVER_ERROR]
    assert broker.topic("first").partitions == 2 and broker.topic("second") is None
    assert partition_dirs(broker, "second") == [] and "second" not in broker.logs.topic_overrides
