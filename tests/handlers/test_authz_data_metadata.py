"""Authorization of Metadata with Kafka's StandardAuthorizer on (KafkaApis.handleTopicMetadataRequest): topics the
principal may not DESCRIBE are hidden or refused, auto-creation needs CREATE, and the authorized operations fields."""
from __future__ import annotations

import uuid

import pytest

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import MetadataRequest
from compatbroker.security.acls import CLUSTER_NAME, AclOperation, PatternType, ResourceType
from compatbroker.security.operations import operations_field, supported_operations

from .authz_helpers import AUTHORIZER_ON, INT32_MIN, allow, call_as, deny

Op = AclOperation
TOPIC, CLUSTER = ResourceType.TOPIC, ResourceType.CLUSTER
Wanted = MetadataRequest.MetadataRequestTopic


@pytest.fixture
def secured(broker_factory):
    """Authorizer on, auto-creation on (Kafka's default), topics "open" and "secret"."""
    broker = broker_factory(**AUTHORIZER_ON)
    broker.create_topic("open", 1)
    broker.create_topic("secret", 1)
    allow(broker, Op.DESCRIBE, TOPIC, "open")
    return broker


def named(*names, allow_creation: bool = True, **fields) -> MetadataRequest:
    return MetadataRequest(topics=[Wanted(name=name) for name in names], allow_auto_topic_creation=allow_creation,
                           **fields)


def summary(answer) -> list[tuple]:
    return [(topic.error_code, topic.name, len(topic.partitions)) for topic in answer.decoded.topics]


@pytest.mark.parametrize("version, request_all", [(0, MetadataRequest(topics=[])), (1, MetadataRequest(topics=None)),
                                                  (12, MetadataRequest(topics=None))])
async def test_all_topics_hides_those_the_principal_may_not_describe(secured, version, request_all):
    answer = await call_as(secured, version, request_all)
    assert summary(answer) == [(ErrorCode.NONE, "open", 1)]


@pytest.mark.parametrize("version", [1, 4, 9, 12])
async def test_a_named_topic_without_describe_is_refused_whether_it_exists_or_not(secured, version):
    # versions 0-3 always allow auto-creation: refused description comes first, so nothing is created either
    answer = await call_as(secured, version, named("secret", "open", "nowhere", allow_creation=version < 4))
    assert summary(answer) == [(ErrorCode.NONE, "open", 1), (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "secret", 0),
                               (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "nowhere", 0)]
    refused = answer.decoded.topics[1]
    assert (refused.topic_id, refused.is_internal) == (uuid.UUID(int=0), False)  # nothing disclosed
    assert secured.topic("nowhere") is None


async def test_internal_topics_without_describe_look_like_any_other(secured):
    answer = await call_as(secured, 9, named("__consumer_offsets", allow_creation=False))
    [topic] = answer.decoded.topics
    assert (topic.error_code, topic.is_internal) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, False)


async def test_by_topic_id_a_refused_topic_is_named_by_its_id_only(secured):
    stranger = uuid.uuid4()
    request = MetadataRequest(topics=[Wanted(topic_id=secured.topic("secret").topic_id, name=None),
                                      Wanted(topic_id=stranger, name=None),
                                      Wanted(topic_id=secured.topic("open").topic_id, name=None)])
    answer = await call_as(secured, 12, request)
    assert [(topic.error_code, topic.name, topic.topic_id) for topic in answer.decoded.topics] == [
        (ErrorCode.UNKNOWN_TOPIC_ID, None, stranger),
        (ErrorCode.NONE, "open", secured.topic("open").topic_id),
        (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None, secured.topic("secret").topic_id)]


async def test_auto_creation_needs_create_on_the_topic_or_the_cluster(secured):
    allow(secured, Op.DESCRIBE, TOPIC, "new-", pattern=PatternType.PREFIXED)
    answer = await call_as(secured, 9, named("new-a"))
    [topic] = answer.decoded.topics
    assert (topic.error_code, topic.name, topic.partitions) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "new-a", [])
    assert secured.topic("new-a") is None  # nothing created

    allow(secured, Op.CREATE, TOPIC, "new-a")
    answer = await call_as(secured, 9, named("new-a", "new-b"))
    assert summary(answer) == [(ErrorCode.LEADER_NOT_AVAILABLE, "new-a", 0),
                               (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "new-b", 0)]
    assert secured.topic("new-a") is not None and secured.topic("new-b") is None

    allow(secured, Op.CREATE, CLUSTER, CLUSTER_NAME)
    answer = await call_as(secured, 9, named("new-b"))
    assert summary(answer) == [(ErrorCode.LEADER_NOT_AVAILABLE, "new-b", 0)]
    assert secured.topic("new-b") is not None


async def test_without_auto_creation_a_missing_describable_topic_is_unknown(secured):
    allow(secured, Op.DESCRIBE, TOPIC, "*")
    answer = await call_as(secured, 9, named("nowhere", allow_creation=False))
    assert summary(answer) == [(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "nowhere", 0)]


async def test_create_refused_for_an_internal_topic_reports_it_internal(secured):
    allow(secured, Op.DESCRIBE, TOPIC, "__transaction_state")
    answer = await call_as(secured, 9, named("__transaction_state"))
    [topic] = answer.decoded.topics
    assert (topic.error_code, topic.is_internal) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, True)
    assert secured.topic("__transaction_state") is None


@pytest.mark.parametrize("version", [8, 10, 12])
async def test_topic_authorized_operations_follow_the_acls(secured, version):
    allow(secured, Op.READ, TOPIC, "open")  # READ implies DESCRIBE
    request = named("open", "secret", allow_creation=False, include_topic_authorized_operations=True)
    answer = await call_as(secured, version, request)
    shown, refused = answer.decoded.topics
    assert shown.topic_authorized_operations == operations_field([Op.READ, Op.DESCRIBE])
    assert refused.topic_authorized_operations == INT32_MIN  # a refused topic reports nothing


async def test_topic_authorized_operations_not_asked_for_are_int32_min(secured):
    answer = await call_as(secured, 9, named("open", allow_creation=False))
    assert answer.decoded.topics[0].topic_authorized_operations == INT32_MIN


@pytest.mark.parametrize("version", [8, 10])
async def test_cluster_authorized_operations_need_describe_on_the_cluster(secured, version):
    request = named(allow_creation=False, include_cluster_authorized_operations=True)
    answer = await call_as(secured, version, request)
    assert answer.decoded.cluster_authorized_operations == 0
    allow(secured, Op.ALTER, CLUSTER, CLUSTER_NAME)  # ALTER implies DESCRIBE
    deny(secured, Op.CREATE, CLUSTER, CLUSTER_NAME)
    answer = await call_as(secured, version, request)
    assert answer.decoded.cluster_authorized_operations == operations_field([Op.ALTER, Op.DESCRIBE])
    answer = await call_as(secured, version, named(allow_creation=False))
    assert answer.decoded.cluster_authorized_operations == INT32_MIN


async def test_super_users_see_everything_with_every_operation(secured):
    request = MetadataRequest(topics=None, include_topic_authorized_operations=True)
    answer = await call_as(secured, 10, request, principal="User:ANONYMOUS")  # AUTHORIZER_ON's super user
    every = operations_field(supported_operations(TOPIC))
    assert [(topic.name, topic.topic_authorized_operations) for topic in answer.decoded.topics] == [
        ("open", every), ("secret", every)]


async def test_without_an_authorizer_every_operation_is_reported(broker):
    broker.create_topic("t", 1)
    request = named("t", allow_creation=False, include_topic_authorized_operations=True,
                    include_cluster_authorized_operations=True)
    answer = await call_as(broker, 10, request)
    assert answer.decoded.topics[0].topic_authorized_operations == 3576
    assert answer.decoded.cluster_authorized_operations == 8096
