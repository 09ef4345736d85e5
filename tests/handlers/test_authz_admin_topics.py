"""Authorization of the topic and config admin APIs with Kafka's StandardAuthorizer on (Kafka's ControllerApis for
CreateTopics, DeleteTopics, CreatePartitions and the config changes it receives; KafkaApis/ConfigHelper for
DescribeConfigs; DescribeTopicPartitionsRequestHandler): the ACL each needs, the error a denied resource answers,
and that nothing changes for it.

Set-up runs as the anonymous super user; the principal under test is ALICE (`authz_helpers.call_as`).
"""
from __future__ import annotations

import logging

import pytest

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import (AlterConfigsRequest, CreatePartitionsRequest, CreateTopicsRequest,
                                            DeleteTopicsRequest, DescribeConfigsRequest,
                                            DescribeTopicPartitionsRequest, IncrementalAlterConfigsRequest)
from compatbroker.protocol.wire import ZERO_UUID
from compatbroker.security.acls import CLUSTER_NAME, AclOperation, PatternType, ResourceType

from .authz_helpers import AUTHORIZER_ON, INT32_MIN, allow, call_as, deny
from .test_create_partitions import grow
from .test_create_topics import topic

Op = AclOperation
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
TOPIC_CONFIG, BROKER_CONFIG, BROKER_LOGGER_CONFIG, GROUP_CONFIG = 2, 4, 8, 32  # config resource types
SET = 0
E = ErrorCode


@pytest.fixture
def secured(broker_factory):
    """A broker with the authorizer on and topics "allowed" and "secret" (1 partition each)."""
    broker = broker_factory(**AUTHORIZER_ON)
    broker.create_topic("allowed", 1)
    broker.create_topic("secret", 1)
    return broker


def bits(*operations: AclOperation) -> int:
    return sum(1 << operation for operation in operations)


# --- CreateTopics ---------------------------------------------------------------------------------------------------

async def create(broker, *topics, version: int = 7, validate_only: bool = False) -> dict:
    answer = await call_as(broker, version, CreateTopicsRequest(topics=list(topics), timeout_ms=5000,
                                                                validate_only=validate_only))
    return {result.name: result for result in answer.decoded.topics}


@pytest.mark.parametrize("version", [0, 1, 5, 7])
async def test_create_topics_needs_create_on_each_topic(secured, version):
    allow(secured, Op.CREATE, TOPIC, "new-", pattern=PatternType.PREFIXED)
    results = await create(secured, topic("new-a"), topic("other"), version=version)
    assert results["new-a"].error_code == E.NONE
    assert results["other"].error_code == E.TOPIC_AUTHORIZATION_FAILED
    if version >= 1:
        assert results["other"].error_message == "Authorization failed."
    assert secured.topic("new-a") is not None
    assert secured.topic("other") is None


async def test_create_on_the_cluster_allows_every_topic(secured, caplog):
    caplog.set_level("INFO", logger="compatbroker.authorizer")
    allow(secured, Op.CREATE, CLUSTER, CLUSTER_NAME)
    results = await create(secured, topic("a"), topic("b"))
    assert [results[name].error_code for name in ("a", "b")] == [E.NONE, E.NONE]
    assert "is Denied" not in caplog.text


async def test_a_denied_name_is_refused_before_it_is_checked(secured):
    # an existing topic and an illegal name alike: the principal learns nothing about them
    results = await create(secured, topic("allowed"), topic("bad name"), topic("t", partitions=0))
    assert [results[n].error_code for n in ("allowed", "bad name", "t")] == [E.TOPIC_AUTHORIZATION_FAILED] * 3


async def test_duplicates_and_the_metadata_topic_are_refused_without_authorization(secured):
    results = await create(secured, topic("dup"), topic("dup"), topic("__cluster_metadata"))
    assert (results["dup"].error_code, results["dup"].error_message) == (E.INVALID_REQUEST, "Duplicate topic name.")
    assert results["__cluster_metadata"].error_code == E.INVALID_REQUEST


@pytest.mark.parametrize("validate_only", [False, True])
async def test_configs_of_a_new_topic_need_describe_configs(secured, validate_only):
    allow(secured, Op.CREATE, CLUSTER, CLUSTER_NAME)
    allow(secured, Op.DESCRIBE_CONFIGS, TOPIC, "seen")
    results = await create(secured, topic("seen", 2), topic("unseen", 2), version=7, validate_only=validate_only)
    seen, unseen = results["seen"], results["unseen"]
    assert (seen.error_code, seen.topic_config_error_code, seen.num_partitions, seen.replication_factor) == (
        E.NONE, E.NONE, 2, 1)
    assert any(config.name == "cleanup.policy" for config in seen.configs)
    assert (unseen.error_code, unseen.topic_config_error_code, unseen.num_partitions, unseen.replication_factor,
            unseen.configs) == (E.NONE, E.TOPIC_AUTHORIZATION_FAILED, -1, -1, [])
    assert unseen.topic_id != ZERO_UUID
    assert (secured.topic("unseen") is not None) == (not validate_only)


async def test_the_partition_cap_counts_only_the_topics_the_principal_may_create(secured):
    allow(secured, Op.CREATE, TOPIC, "small")
    results = await create(secured, topic("small", 2), topic("huge", 20_000))
    assert (results["small"].error_code, results["huge"].error_code) == (E.NONE, E.TOPIC_AUTHORIZATION_FAILED)


# --- DeleteTopics ---------------------------------------------------------------------------------------------------

async def delete(broker, *entries, version: int = 6) -> list[tuple]:
    """entries: names, or (name, id) states for v6. Answers (name, id, error) in request order."""
    if version < 6:
        request = DeleteTopicsRequest(topic_names=list(entries), timeout_ms=5000)
    else:
        request = DeleteTopicsRequest(timeout_ms=5000, topics=[
            DeleteTopicsRequest.DeleteTopicState(name=entry, topic_id=ZERO_UUID) if isinstance(entry, str) else
            DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=entry) for entry in entries])
    answer = await call_as(broker, version, request)
    return [(r.name, r.topic_id, r.error_code) for r in answer.decoded.responses]


@pytest.mark.parametrize("version", [0, 5, 6])
async def test_delete_topics_needs_delete_on_each_topic(secured, version):
    allow(secured, Op.DELETE, TOPIC, "allowed")
    allow(secured, Op.DESCRIBE, TOPIC, "secret")  # DESCRIBE is not enough
    results = await delete(secured, "allowed", "secret", "absent", version=version)
    assert [(name, code) for name, _, code in results] == [
        ("allowed", E.NONE), ("secret", E.TOPIC_AUTHORIZATION_FAILED),
        ("absent", E.TOPIC_AUTHORIZATION_FAILED)]  # not UNKNOWN_TOPIC_OR_PARTITION: existence is not disclosed
    assert (secured.topic("allowed"), secured.topic("secret") is not None) == (None, True)


async def test_an_unknown_topic_the_principal_may_describe_is_answered_unknown(secured):
    allow(secured, Op.DESCRIBE, TOPIC, "absent")
    assert [code for _, _, code in await delete(secured, "absent")] == [E.UNKNOWN_TOPIC_OR_PARTITION]


async def test_delete_by_id_names_the_topic_only_when_the_principal_may_describe_it(secured):
    secret_id = secured.topic("secret").topic_id
    allowed_id = secured.topic("allowed").topic_id
    hidden = await delete(secured, secret_id)
    assert hidden == [(None, secret_id, E.TOPIC_AUTHORIZATION_FAILED)]
    allow(secured, Op.DESCRIBE, TOPIC, "secret")
    assert await delete(secured, secret_id) == [("secret", secret_id, E.TOPIC_AUTHORIZATION_FAILED)]
    allow(secured, Op.DELETE, TOPIC, "allowed")
    assert await delete(secured, allowed_id) == [("allowed", allowed_id, E.NONE)]
    assert secured.topic("secret") is not None


async def test_delete_on_the_cluster_allows_every_topic(secured):
    allow(secured, Op.DELETE, CLUSTER, CLUSTER_NAME)
    results = await delete(secured, "allowed", "secret")
    assert [code for _, _, code in results] == [E.NONE, E.NONE]
    assert (secured.topic("allowed"), secured.topic("secret")) == (None, None)


async def test_deny_wins_over_allow_for_deletion(secured):
    allow(secured, Op.DELETE, TOPIC, "*")
    deny(secured, Op.DELETE, TOPIC, "secret")
    results = await delete(secured, "allowed", "secret")
    assert [code for _, _, code in results] == [E.NONE, E.TOPIC_AUTHORIZATION_FAILED]
    assert secured.topic("secret") is not None


# --- CreatePartitions -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 3])
async def test_create_partitions_needs_alter_on_each_topic(secured, version):
    allow(secured, Op.ALTER, TOPIC, "allowed")
    allow(secured, Op.DESCRIBE, TOPIC, "secret")
    request = CreatePartitionsRequest(topics=[grow("allowed", 3), grow("secret", 3), grow("absent", 3)],
                                      timeout_ms=5000, validate_only=False)
    answer = (await call_as(secured, version, request)).decoded
    assert [(r.name, r.error_code, r.error_message) for r in answer.results] == [
        ("allowed", E.NONE, None), ("secret", E.TOPIC_AUTHORIZATION_FAILED, None),
        ("absent", E.TOPIC_AUTHORIZATION_FAILED, None)]
    assert (secured.topic("allowed").partitions, secured.topic("secret").partitions) == (3, 1)


# --- DescribeConfigs ------------------------------------------------------------------------------------------------

def config_resource(resource_type: int, name: str):
    return DescribeConfigsRequest.DescribeConfigsResource(resource_type=resource_type, resource_name=name,
                                                          configuration_keys=None)


@pytest.mark.parametrize("version", [0, 4])
async def test_describe_configs_needs_describe_configs_on_each_resource(secured, version):
    allow(secured, Op.DESCRIBE_CONFIGS, TOPIC, "allowed")
    allow(secured, Op.DESCRIBE, TOPIC, "secret")  # DESCRIBE is not enough
    node = str(secured.node_id)
    request = DescribeConfigsRequest(resources=[
        config_resource(TOPIC_CONFIG, "allowed"), config_resource(TOPIC_CONFIG, "secret"),
        config_resource(TOPIC_CONFIG, "absent"), config_resource(BROKER_CONFIG, node),
        config_resource(BROKER_LOGGER_CONFIG, node), config_resource(GROUP_CONFIG, "g")],
        include_synonyms=False, include_documentation=False)
    results = (await call_as(secured, version, request)).decoded.results
    assert [(r.resource_name, r.error_code) for r in results] == [
        ("allowed", E.NONE), ("secret", E.TOPIC_AUTHORIZATION_FAILED), ("absent", E.TOPIC_AUTHORIZATION_FAILED),
        (node, E.CLUSTER_AUTHORIZATION_FAILED), (node, E.CLUSTER_AUTHORIZATION_FAILED),
        ("g", E.GROUP_AUTHORIZATION_FAILED)]
    assert results[0].configs
    assert all(r.configs == [] and r.error_message for r in results[1:])


async def test_alter_configs_on_a_topic_implies_describe_configs(secured):
    allow(secured, Op.ALTER_CONFIGS, TOPIC, "allowed")
    allow(secured, Op.DESCRIBE_CONFIGS, CLUSTER, CLUSTER_NAME)
    request = DescribeConfigsRequest(resources=[config_resource(TOPIC_CONFIG, "allowed"),
                                                config_resource(BROKER_CONFIG, str(secured.node_id))])
    results = (await call_as(secured, 4, request)).decoded.results
    assert [r.error_code for r in results] == [E.NONE, E.NONE]


# --- AlterConfigs and IncrementalAlterConfigs ----------------------------------------------------------------------

def legacy(resource_type: int, name: str, **configs):
    return AlterConfigsRequest.AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[AlterConfigsRequest.AlterableConfig(name=k.replace("_", "."), value=v) for k, v in configs.items()])


def incremental(resource_type: int, name: str, **configs):
    return IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[IncrementalAlterConfigsRequest.AlterableConfig(name=k.replace("_", "."), config_operation=SET,
                                                                value=v) for k, v in configs.items()])


async def alter(broker, *resources, validate_only: bool = False) -> list[tuple[str, int]]:
    if isinstance(resources[0], AlterConfigsRequest.AlterConfigsResource):
        request, version = AlterConfigsRequest(resources=list(resources), validate_only=validate_only), 2
    else:
        request, version = IncrementalAlterConfigsRequest(resources=list(resources), validate_only=validate_only), 1
    answer = (await call_as(broker, version, request)).decoded
    return [(r.resource_name, r.error_code) for r in answer.responses]


@pytest.mark.parametrize("make", [legacy, incremental])
async def test_altering_a_topic_config_needs_alter_configs_on_the_topic(secured, make):
    allow(secured, Op.ALTER_CONFIGS, TOPIC, "allowed")
    allow(secured, Op.DESCRIBE_CONFIGS, TOPIC, "secret")  # DESCRIBE_CONFIGS is not enough
    answers = await alter(secured, make(TOPIC_CONFIG, "allowed", retention_ms="1000"),
                          make(TOPIC_CONFIG, "secret", retention_ms="1000"),
                          make(TOPIC_CONFIG, "absent", retention_ms="1000"))
    assert answers == [("allowed", E.NONE), ("secret", E.TOPIC_AUTHORIZATION_FAILED),
                       ("absent", E.TOPIC_AUTHORIZATION_FAILED)]
    overrides = secured.logs.topic_overrides
    assert overrides.get("allowed") == {"retention.ms": "1000"}
    assert "retention.ms" not in overrides.get("secret", {})


@pytest.mark.parametrize("make", [legacy, incremental])
async def test_a_denied_topic_is_refused_before_its_configs_are_checked(secured, make):
    [(_, code)] = await alter(secured, make(TOPIC_CONFIG, "secret", no_such_config="x"))
    assert code == E.TOPIC_AUTHORIZATION_FAILED


@pytest.mark.parametrize("make", [legacy, incremental])
async def test_altering_broker_configs_needs_alter_configs_on_the_cluster(secured, make):
    node = str(secured.node_id)
    change = make(BROKER_CONFIG, node, max_connections="100")
    assert await alter(secured, change, validate_only=True) == [(node, E.CLUSTER_AUTHORIZATION_FAILED)]
    # the checks a Kafka broker makes before forwarding come first: a key that cannot change at run time
    assert await alter(secured, make(BROKER_CONFIG, node, broker_rack="r")) == [(node, E.INVALID_REQUEST)]
    allow(secured, Op.ALTER_CONFIGS, CLUSTER, CLUSTER_NAME)
    assert await alter(secured, change, validate_only=True) == [(node, E.NONE)]


async def test_altering_a_logger_needs_alter_configs_on_the_cluster(secured):
    logger = logging.getLogger("compatbroker.authz-admin-test")
    logger.setLevel(logging.INFO)
    try:
        node = str(secured.node_id)
        change = incremental(BROKER_LOGGER_CONFIG, node, **{"compatbroker.authz-admin-test": "DEBUG"})
        assert await alter(secured, change) == [(node, E.CLUSTER_AUTHORIZATION_FAILED)]
        assert logger.level == logging.INFO
        # authorized before the logger's name is checked: another node's id is refused as unauthorized too
        assert await alter(secured, incremental(BROKER_LOGGER_CONFIG, "999", root="DEBUG")) == [
            ("999", E.CLUSTER_AUTHORIZATION_FAILED)]
        allow(secured, Op.ALTER_CONFIGS, CLUSTER, CLUSTER_NAME)
        assert await alter(secured, change) == [(node, E.NONE)]
        assert logger.level == logging.DEBUG
    finally:
        logger.setLevel(logging.NOTSET)


@pytest.mark.parametrize("make", [legacy, incremental])
async def test_a_group_config_resource_needs_alter_configs_on_the_group(secured, make):
    assert await alter(secured, make(GROUP_CONFIG, "g", some_config="1")) == [("g", E.GROUP_AUTHORIZATION_FAILED)]


# --- DescribeTopicPartitions ----------------------------------------------------------------------------------------

def describe_partitions(*names: str) -> DescribeTopicPartitionsRequest:
    return DescribeTopicPartitionsRequest(
        topics=[DescribeTopicPartitionsRequest.TopicRequest(name=name) for name in names],
        response_partition_limit=2000, cursor=None)


async def test_describe_topic_partitions_refuses_named_topics_the_principal_may_not_describe(secured):
    allow(secured, Op.READ, TOPIC, "allowed")
    answer = (await call_as(secured, 0, describe_partitions("secret", "allowed", "absent"))).decoded
    assert [(t.name, t.error_code) for t in answer.topics] == [
        ("allowed", E.NONE), ("absent", E.TOPIC_AUTHORIZATION_FAILED), ("secret", E.TOPIC_AUTHORIZATION_FAILED)]
    allowed, *denied = answer.topics
    assert allowed.topic_authorized_operations == bits(Op.READ, Op.DESCRIBE)  # READ implies DESCRIBE
    assert [len(allowed.partitions)] == [1]
    for topic_answer in denied:  # told nothing: no id, no partitions, no operations
        assert (topic_answer.topic_id, topic_answer.partitions, topic_answer.is_internal,
                topic_answer.topic_authorized_operations) == (ZERO_UUID, [], False, INT32_MIN)


async def test_describe_topic_partitions_of_every_topic_leaves_out_the_others(secured):
    allow(secured, Op.DESCRIBE, TOPIC, "allowed")
    answer = (await call_as(secured, 0, describe_partitions())).decoded
    assert [(t.name, t.error_code) for t in answer.topics] == [("allowed", E.NONE)]
    assert answer.topics[0].topic_authorized_operations == bits(Op.DESCRIBE)


async def test_describe_topic_partitions_checks_topics_only_as_far_as_the_page_goes(secured, caplog):
    for name in ("a", "b", "c", "d"):
        secured.create_topic(name, 1)
    allow(secured, Op.DESCRIBE, TOPIC, "a")
    allow(secured, Op.DESCRIBE, TOPIC, "d")
    caplog.set_level("INFO", logger="compatbroker.authorizer")
    request = describe_partitions("a", "b", "c", "d", "secret")
    request.response_partition_limit = 1
    answer = (await call_as(secured, 0, request)).decoded
    # "a" fills the page; "b" and "c" were checked on the way to the next topic, which the cursor names
    assert [(t.name, t.error_code) for t in answer.topics] == [
        ("a", E.NONE), ("b", E.TOPIC_AUTHORIZATION_FAILED), ("c", E.TOPIC_AUTHORIZATION_FAILED)]
    assert (answer.next_cursor.topic_name, answer.next_cursor.partition_index) == ("d", 0)
    assert "resource = Topic:LITERAL:c" in caplog.text
    assert "resource = Topic:LITERAL:secret" not in caplog.text  # past the page: never checked
