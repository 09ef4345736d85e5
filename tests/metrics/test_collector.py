"""Counting where the work happens (the Produce and Fetch handlers, the connection) and the families the collector
builds from it, on a real Broker without sockets."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from compatbroker.metrics.collector import BrokerCollector
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import FetchRequest, ProduceRequest
from tests.handlers.cluster_helpers import create_topic, in_sync, serving_cluster
from tests.handlers.helpers import batch, call, make_broker, start

from .helpers import Scrape


@pytest.fixture
def broker(tmp_path):
    broker = make_broker(tmp_path / "data")
    yield broker
    broker.logs.shutdown()


def _produce(topic: str, partition: int, records: bytes, *, acks: int = 1) -> ProduceRequest:
    return ProduceRequest(acks=acks, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=records)])])


def _fetch(topic: str, offset: int, *, max_wait_ms: int = 0) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, topics=[
        FetchRequest.FetchTopic(topic=topic, partitions=[
            FetchRequest.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])])


def _scrape(broker) -> Scrape:
    registry = CollectorRegistry()
    registry.register(BrokerCollector(SimpleNamespace(cluster=broker.cluster)))
    return Scrape(generate_latest(registry).decode())


async def test_produce_and_fetch_count_records_and_bytes_per_topic(broker):
    broker.create_topic("t", 1)
    records = batch(b"a", b"bb", b"ccc")
    answer = await call(broker, 9, _produce("t", 0, records))
    assert answer.decoded.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    stats = broker.metrics.topics["t"]
    assert (stats.messages_in, stats.bytes_in, stats.produce_requests) == (3, len(records), 1)
    await call(broker, 12, _fetch("t", 0))
    assert (stats.fetch_requests, stats.bytes_out, stats.failed_fetch_requests) == (1, len(records), 0)

    found = _scrape(broker)
    assert found.value("kafka_server_brokertopicmetrics_messagesin_total", topic="t") == 3
    assert found.value("kafka_server_brokertopicmetrics_bytesin_total", topic="t") == len(records)
    assert found.value("kafka_server_brokertopicmetrics_bytesout_total", topic="t") == len(records)
    assert found.value("kafka_log_log_size", topic="t", partition=0) == len(records)
    assert found.value("kafka_log_log_logendoffset", topic="t", partition=0) == 3
    assert found.value("kafka_log_log_numlogsegments", topic="t", partition=0) == 1


async def test_unknown_topics_and_invalid_records_are_counted_as_kafka_counts_them(broker):
    broker.create_topic("t", 1)
    answer = await call(broker, 9, _produce("nope", 0, batch(b"x")))
    assert answer.decoded.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    await call(broker, 12, _fetch("nope", 0))
    assert "nope" not in broker.metrics.topics  # no table for a topic that does not exist
    broker.create_topic("compacted", 1, {"cleanup.policy": "compact"})
    answer = await call(broker, 9, _produce("compacted", 0, batch(b"x", key=None)))
    assert answer.decoded.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_RECORD
    stats = broker.metrics.topics["compacted"]
    assert (stats.produce_requests, stats.failed_produce_requests, stats.messages_in) == (1, 1, 0)
    answer = await call(broker, 12, _fetch("t", 99))
    assert answer.decoded.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    stats = broker.metrics.topics["t"]  # an expected error (ReplicaManager.handleOffsetOutOfRangeError): not failed
    assert (stats.fetch_requests, stats.failed_fetch_requests) == (1, 0)


async def test_invalid_acks_count_no_produce_request_and_a_too_small_isr_a_failed_one(broker, tmp_path):
    """Kafka refuses invalid acks before ReplicaManager.appendToLocalLog counts anything; NOT_ENOUGH_REPLICAS is
    thrown within it, among the unexpected failures."""
    broker.create_topic("t", 1)
    answer = await call(broker, 9, _produce("t", 0, batch(b"x"), acks=2))
    assert answer.decoded.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_REQUIRED_ACKS
    assert broker.metrics.topic("t").produce_requests == 0
    async with serving_cluster(tmp_path / "cluster") as cluster:
        create_topic(cluster, configs={"min.insync.replicas": "2"})
        await in_sync(cluster)
        cluster.stop_node(1)
        cluster.stop_node(2)
        answer = await call(cluster.nodes[0], 9, _produce("t", 0, batch(b"x"), acks=-1))
        assert answer.decoded.responses[0].partition_responses[0].error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        stats = cluster.nodes[0].metrics.topics["t"]
        assert (stats.produce_requests, stats.failed_produce_requests, stats.messages_in) == (1, 1, 0)


async def test_a_long_poll_is_in_the_fetch_purgatory_while_it_waits(broker):
    broker.create_topic("t", 1)
    poll = asyncio.create_task(start(broker, 12, _fetch("t", 0, max_wait_ms=20_000)))
    for _ in range(1000):  # until the handler waits (each pass lets it run)
        if broker.metrics.fetch_waiting:
            break
        await asyncio.sleep(0)
    assert _scrape(broker).value("kafka_server_delayedoperationpurgatory_purgatorysize",
                                 delayedOperation="Fetch") == 1
    await call(broker, 9, _produce("t", 0, batch(b"wake")))
    await asyncio.wait_for(poll, 10)
    assert broker.metrics.fetch_waiting == 0
    assert _scrape(broker).value("kafka_server_delayedoperationpurgatory_purgatorysize",
                                 delayedOperation="Fetch") == 0


async def test_requests_errors_and_latency_become_families(broker):
    stats = broker.metrics.request_stats(0, 9)
    stats.record(0.002, None)
    stats.record(0.004, None)
    stats.errors.update({0: 5, int(ErrorCode.NOT_LEADER_OR_FOLLOWER): 2})
    broker.metrics.request_stats(0, 10).errors.update({0: 1})
    found = _scrape(broker)
    assert found.value("kafka_network_requestmetrics_requests_total", request="Produce", version=9) == 2
    assert found.value("kafka_network_requestmetrics_errors_total", request="Produce", error="NONE") == 6
    assert found.value("kafka_network_requestmetrics_errors_total", request="Produce",
                       error="NOT_LEADER_OR_FOLLOWER") == 2
    assert found.value("kafka_network_requestmetrics_totaltimems_bucket", request="Produce", version=9,
                       le="2.5") == 1
    assert found.value("kafka_network_requestmetrics_totaltimems_bucket", request="Produce", version=9,
                       le="5.0") == 2
    assert found.value("kafka_network_requestmetrics_totaltimems_count", request="Produce", version=9) == 2
    assert abs(found.value("kafka_network_requestmetrics_totaltimems_sum", request="Produce", version=9) - 6) < 1e-6


async def test_error_codes_kafka_does_not_know_share_one_series(broker):
    broker.metrics.request_stats(0, 9).errors.update({9998: 1, 9999: 2, int(ErrorCode.UNKNOWN_SERVER_ERROR): 4})
    found = _scrape(broker)
    assert found.labels_of("kafka_network_requestmetrics_errors_total") == \
        [{"request": "Produce", "error": "UNKNOWN_SERVER_ERROR"}]
    assert found.text.count('error="UNKNOWN_SERVER_ERROR"') == 1
    assert found.value("kafka_network_requestmetrics_errors_total", request="Produce",
                       error="UNKNOWN_SERVER_ERROR") == 7


async def test_a_failing_client_telemetry_export_leaves_the_broker_metrics_served(broker, monkeypatch, caplog):
    from compatbroker.telemetry import export

    def broken(runtime):
        raise RuntimeError("broken export")
        yield  # a generator, as the real one

    monkeypatch.setattr(export, "metric_families", broken)
    broker.create_topic("t", 1)
    found = _scrape(broker)
    assert found.value("kafka_log_log_logendoffset", topic="t", partition=0) == 0
    assert [record.getMessage() for record in caplog.records if record.name == "compatbroker.metrics.collector"] \
        == ["client telemetry metrics could not be exported"]
