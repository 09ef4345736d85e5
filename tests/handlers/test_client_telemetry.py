"""GetTelemetrySubscriptions (71), PushTelemetry (72) and ListConfigResources (74) through their handlers, with
requests as clients encode them (KIP-714)."""
from __future__ import annotations

import uuid

from compatbroker.handlers import api_versions, default_registry, get_telemetry_subscriptions
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import (ApiVersionsRequest, GetTelemetrySubscriptionsRequest,
                                            ListConfigResourcesRequest, PushTelemetryRequest)
from compatbroker.protocol.records.compression import compress
from compatbroker.security.acls import AclOperation, ResourceType
from compatbroker.telemetry import client_metrics_config
from compatbroker.toolkit.emulation import emulated_registry
from tests.telemetry.payloads import LATENCY, sample_payload

from .authz_helpers import AUTHORIZER_ON, allow, call_as
from .helpers import call, context, make_broker

ZERO = uuid.UUID(int=0)


def subscribe_all(broker, interval_ms: int = 100, match: str = "") -> None:
    configs = {"metrics": "*", "interval.ms": str(interval_ms)}
    if match:
        configs["match"] = match
    client_metrics_config.apply(broker, "all", configs)


async def get_subscriptions(broker, instance_id=ZERO, client_id="handler-tests"):
    return (await call(broker, 0, GetTelemetrySubscriptionsRequest(client_instance_id=instance_id),
                       client_id=client_id)).decoded


async def push(broker, answer, data: bytes, compression: int = 0, terminating: bool = False):
    request = PushTelemetryRequest(client_instance_id=answer.client_instance_id, subscription_id=answer.subscription_id,
                                   terminating=terminating, compression_type=compression, metrics=data)
    return (await call(broker, 0, request)).decoded


async def test_a_new_client_gets_an_id_and_an_empty_subscription_when_none_exists(broker):
    answer = await get_subscriptions(broker)
    assert answer.error_code == ErrorCode.NONE
    assert answer.client_instance_id != ZERO
    assert (answer.requested_metrics, answer.push_interval_ms) == ([], 300_000)
    assert answer.accepted_compression_types == [4, 3, 1, 2]
    assert answer.telemetry_max_bytes == 1_048_576 and answer.delta_temporality


async def test_a_push_of_the_subscribed_metrics_reaches_the_store(broker):
    subscribe_all(broker)
    answer = await get_subscriptions(broker)
    assert (answer.requested_metrics, answer.push_interval_ms) == (["*"], 100)
    pushed = await push(broker, answer, compress(4, sample_payload(latency=4.0)), compression=4)
    assert pushed.error_code == ErrorCode.NONE
    (client,) = broker.client_telemetry.clients()
    assert client["client_id"] == "handler-tests" and client["client_source_address"] == "127.0.0.1"
    assert client["client_source_port"] == 50000
    assert {m["name"]: m["value"] for m in client["metrics"]}[LATENCY] == 4.0


async def test_push_errors_come_back_as_kafkas_codes(broker):
    subscribe_all(broker)
    answer = await get_subscriptions(broker)
    assert (await push(broker, answer, b"\x01garbage")).error_code == ErrorCode.INVALID_RECORD
    again = await get_subscriptions(broker, answer.client_instance_id)
    assert again.error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED and again.client_instance_id == ZERO
    answer.subscription_id += 1
    assert (await push(broker, answer, sample_payload())).error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED


async def test_the_software_name_from_api_versions_is_matched(broker):
    subscribe_all(broker, match="client_software_name=confluent-kafka-python")
    ctx = context(broker, 18, 3)
    await api_versions.handle(ctx, ApiVersionsRequest(client_software_name="confluent-kafka-python",
                                                      client_software_version="2.16.1"))
    matched = await get_telemetry_subscriptions.handle(_with_session(broker, ctx),
                                                       GetTelemetrySubscriptionsRequest(client_instance_id=ZERO))
    unmatched = await get_subscriptions(broker)
    assert matched.requested_metrics == ["*"]
    assert unmatched.requested_metrics == []


def _with_session(broker, earlier):
    """A GetTelemetrySubscriptions context on the same connection (session) as `earlier`."""
    ctx = context(broker, 71, 0)
    ctx.session = earlier.session
    return ctx


async def test_list_config_resources_v0_lists_subscriptions(broker):
    subscribe_all(broker)
    client_metrics_config.apply(broker, "other", {"metrics": "org."})
    answer = (await call(broker, 0, ListConfigResourcesRequest())).decoded
    assert answer.error_code == ErrorCode.NONE
    assert [(r.resource_name, r.resource_type) for r in answer.config_resources] == [("all", 16), ("other", 16)]


async def test_list_config_resources_v1_lists_the_types_asked_in_kafkas_order(broker):
    subscribe_all(broker)
    broker.create_topic("t", 1)
    every = (await call(broker, 1, ListConfigResourcesRequest(resource_types=[]))).decoded
    listed = [(r.resource_type, r.resource_name) for r in every.config_resources]
    assert listed == [(16, "all"), (8, "1"), (4, "1"), (2, "t")]
    topics = (await call(broker, 1, ListConfigResourcesRequest(resource_types=[2]))).decoded
    assert [r.resource_name for r in topics.config_resources] == ["t"]
    unknown = (await call(broker, 1, ListConfigResourcesRequest(resource_types=[64]))).decoded
    assert (unknown.error_code, unknown.config_resources) == (ErrorCode.UNSUPPORTED_VERSION, [])


async def test_list_config_resources_needs_describe_configs_on_the_cluster(broker_factory):
    broker = broker_factory(**AUTHORIZER_ON)
    denied = (await call_as(broker, 1, ListConfigResourcesRequest())).decoded
    assert denied.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    allow(broker, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, "kafka-cluster")
    assert (await call_as(broker, 1, ListConfigResourcesRequest())).decoded.error_code == ErrorCode.NONE


async def test_subscriptions_survive_a_restart(tmp_path):
    first = make_broker(tmp_path / "data")
    subscribe_all(first, interval_ms=500)
    first.logs.shutdown()
    second = make_broker(tmp_path / "data")
    try:
        answer = await get_subscriptions(second)
        assert (answer.requested_metrics, answer.push_interval_ms) == (["*"], 500)
    finally:
        second.logs.shutdown()


async def test_telemetry_max_bytes_is_the_brokers_setting(broker_factory):
    broker = broker_factory(**{"telemetry.max.bytes": "64"})
    subscribe_all(broker)
    answer = await get_subscriptions(broker)
    assert answer.telemetry_max_bytes == 64
    assert (await push(broker, answer, sample_payload())).error_code == ErrorCode.TELEMETRY_TOO_LARGE


def test_the_telemetry_apis_are_advertised_but_not_by_an_emulated_default_kafka():
    ours = {key: (m.MIN_VERSION, m.MAX_VERSION) for key, m in default_registry().items()}
    assert (ours[71], ours[72], ours[74]) == ((0, 0), (0, 0), (0, 1))
    emulated = emulated_registry(default_registry(), "4.1")
    assert 71 not in emulated and 72 not in emulated
    assert (emulated[74].MIN_VERSION, emulated[74].MAX_VERSION) == (0, 1)
