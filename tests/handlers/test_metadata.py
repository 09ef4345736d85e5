"""Metadata: which topics, auto-creation, errors, ids, and what each version carries."""
from __future__ import annotations

import uuid

import pytest

from compatbroker.handlers import metadata
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import MetadataRequest

from .helpers import call

Wanted = MetadataRequest.MetadataRequestTopic
ALL_VERSIONS = range(metadata.MIN_VERSION, metadata.MAX_VERSION + 1)
INT32_MIN = -2**31


def named(*names, version: int = 13, allow: bool = True) -> MetadataRequest:
    return MetadataRequest(topics=[Wanted(name=name) for name in names],
                           allow_auto_topic_creation=allow if version >= 4 else True)


def test_declares_every_schema_version():
    assert (metadata.API_KEY, metadata.MIN_VERSION, metadata.MAX_VERSION) == (3, 0, 13)
    assert MetadataRequest.VALID_VERSIONS == (0, 13)


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_describes_an_existing_topic_at_every_version(broker, version):
    info = broker.create_topic("orders", 3)
    answer = (await call(broker, version, named("orders", version=version))).decoded
    assert [(b.node_id, b.host, b.port) for b in answer.brokers] == [(1, "localhost", 9092)]
    [topic] = answer.topics
    assert (topic.error_code, topic.name) == (0, "orders")
    assert [p.partition_index for p in topic.partitions] == [0, 1, 2]
    for partition in topic.partitions:
        assert (partition.error_code, partition.leader_id) == (0, 1)
        assert partition.replica_nodes == [1] and partition.isr_nodes == [1]
        assert partition.leader_epoch == (0 if version >= 7 else -1)
        assert partition.offline_replicas == []
    assert answer.controller_id == (1 if version >= 1 else -1)
    assert answer.cluster_id == (broker.cluster_id if version >= 2 else None)
    assert broker.cluster_id
    assert topic.topic_id == (info.topic_id if version >= 10 else uuid.UUID(int=0))
    assert topic.topic_authorized_operations == INT32_MIN


async def test_v0_empty_list_means_every_topic_and_v1_empty_list_means_none(broker):
    broker.create_topic("b-topic", 1)
    broker.create_topic("a-topic", 2)
    v0 = (await call(broker, 0, MetadataRequest(topics=[]))).decoded
    assert [t.name for t in v0.topics] == ["a-topic", "b-topic"]
    v1 = (await call(broker, 1, MetadataRequest(topics=[]))).decoded
    assert v1.topics == []
    assert v1.brokers and v1.controller_id == 1


@pytest.mark.parametrize("version", [1, 4, 9, 13])
async def test_null_topics_means_every_topic_and_creates_nothing(broker, version):
    broker.create_topic("only", 1)
    answer = (await call(broker, version, MetadataRequest(topics=None, allow_auto_topic_creation=True))).decoded
    assert [t.name for t in answer.topics] == ["only"]
    assert list(broker.topics()) == ["only"]


@pytest.mark.parametrize("version", [0, 3, 4, 12])
async def test_auto_creation_answers_leader_not_available_then_describes(broker_factory, version):
    broker = broker_factory(**{"num.partitions": 3})
    first = (await call(broker, version, named("fresh", version=version))).decoded
    assert [(t.name, t.error_code, t.partitions) for t in first.topics] == [("fresh", 5, [])]
    assert broker.topic("fresh").partitions == 3
    second = (await call(broker, version, named("fresh", version=version))).decoded
    assert second.topics[0].error_code == 0
    assert len(second.topics[0].partitions) == 3


async def test_v4_client_may_refuse_auto_creation(broker):
    answer = (await call(broker, 4, named("absent", allow=False))).decoded
    assert answer.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert broker.topic("absent") is None


@pytest.mark.parametrize("version", [0, 7])
async def test_broker_setting_disables_auto_creation(broker_factory, version):
    broker = broker_factory(**{"auto.create.topics.enable": "false"})
    answer = (await call(broker, version, named("absent", version=version))).decoded
    assert answer.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert broker.topics() == {}


@pytest.mark.parametrize("name", ["", ".", "..", "has space", "ünïcode", "x" * 250, "a/b"])
@pytest.mark.parametrize("allow", [True, False])
async def test_illegal_names_answer_invalid_topic_exception(broker, name, allow):
    answer = (await call(broker, 9, named(name, allow=allow))).decoded
    assert [(t.name, t.error_code) for t in answer.topics] == [(name, ErrorCode.INVALID_TOPIC_EXCEPTION)]
    assert broker.topics() == {}


async def test_longest_legal_name_is_created(broker):
    name = "a-Z_0." + "x" * 243
    await call(broker, 9, named(name))
    assert broker.topic(name) is not None


async def test_name_colliding_with_existing_topic_is_refused(broker):
    broker.create_topic("metrics.cpu", 1)
    answer = (await call(broker, 9, named("metrics_cpu"))).decoded
    assert answer.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert broker.topic("metrics_cpu") is None


async def test_duplicate_names_are_answered_once_in_request_order(broker):
    broker.create_topic("one", 1)
    broker.create_topic("two", 1)
    answer = (await call(broker, 9, named("two", "one", "two"))).decoded
    assert [t.name for t in answer.topics] == ["two", "one"]


async def test_internal_topic_is_created_with_its_own_settings(broker):
    first = (await call(broker, 9, named("__consumer_offsets"))).decoded
    assert first.topics[0].error_code == ErrorCode.LEADER_NOT_AVAILABLE
    assert first.topics[0].is_internal is True
    info = broker.topic("__consumer_offsets")
    assert info.partitions == 50 and info.is_internal
    config = broker.get_log("__consumer_offsets", 0).config
    assert config.compact and config.segment_bytes == 104_857_600
    again = (await call(broker, 9, named("__consumer_offsets"))).decoded
    assert again.topics[0].is_internal is True and len(again.topics[0].partitions) == 50


async def test_v12_topics_by_id(broker):
    known = broker.create_topic("by-id", 2)
    stranger = uuid.uuid4()
    request = MetadataRequest(topics=[Wanted(topic_id=stranger, name=None), Wanted(topic_id=known.topic_id, name=None)])
    answer = (await call(broker, 12, request)).decoded
    assert [(t.error_code, t.name, t.topic_id) for t in answer.topics] == [
        (ErrorCode.UNKNOWN_TOPIC_ID, None, stranger), (0, "by-id", known.topic_id)]
    assert len(answer.topics[1].partitions) == 2


@pytest.mark.parametrize("version", [10, 11])
async def test_v10_and_v11_refuse_topic_ids(broker, version):
    request = MetadataRequest(topics=[Wanted(topic_id=uuid.uuid4(), name="x"), Wanted(name="y")])
    answer = (await call(broker, version, request)).decoded
    assert [(t.name, t.error_code) for t in answer.topics] == [("x", ErrorCode.INVALID_REQUEST),
                                                               ("y", ErrorCode.INVALID_REQUEST)]
    assert answer.brokers == [] and broker.topics() == {}


@pytest.mark.parametrize("version", [8, 10, 11, 13])
async def test_authorized_operations_when_asked(broker, version):
    broker.create_topic("acl", 1)
    request = MetadataRequest(topics=[Wanted(name="acl")], include_topic_authorized_operations=True,
                              include_cluster_authorized_operations=version <= 10)
    answer = (await call(broker, version, request)).decoded
    assert answer.topics[0].topic_authorized_operations == 3576
    assert answer.cluster_authorized_operations == (8096 if version <= 10 else INT32_MIN)
    plain = (await call(broker, version, MetadataRequest(topics=[Wanted(name="acl")]))).decoded
    assert plain.topics[0].topic_authorized_operations == INT32_MIN
    assert plain.cluster_authorized_operations == INT32_MIN


async def test_advertised_endpoint_of_the_listener(broker_factory):
    broker = broker_factory(**{"listeners": "PLAINTEXT://localhost:9092",
                               "advertised.listeners": "PLAINTEXT://broker.example:19092"})
    broker.register_listener(broker.config.listeners[0], 9092)
    answer = (await call(broker, 13, MetadataRequest(topics=[]))).decoded
    assert [(b.node_id, b.host, b.port, b.rack) for b in answer.brokers] == [(1, "broker.example", 19092, None)]
    assert answer.error_code == 0
