"""OTLP MetricsData payloads built with opentelemetry-proto, as clients push them."""
from __future__ import annotations

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (AGGREGATION_TEMPORALITY_CUMULATIVE,
                                                        AGGREGATION_TEMPORALITY_DELTA, Gauge, Metric, MetricsData,
                                                        NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum)

LATENCY = "org.apache.kafka.producer.node.request.latency.avg"
CONNECTIONS = "org.apache.kafka.producer.connection.creation.total"


def _attributes(attributes: dict) -> list[KeyValue]:
    return [KeyValue(key=key, value=AnyValue(string_value=str(value))) for key, value in attributes.items()]


def gauge(name: str, value: float, **attributes) -> Metric:
    point = NumberDataPoint(as_double=value, attributes=_attributes(attributes), time_unix_nano=1)
    return Metric(name=name, description="a gauge", unit="ms", gauge=Gauge(data_points=[point]))


def counter(name: str, value: int, *, delta: bool = True, **attributes) -> Metric:
    point = NumberDataPoint(as_int=value, attributes=_attributes(attributes), time_unix_nano=1)
    temporality = AGGREGATION_TEMPORALITY_DELTA if delta else AGGREGATION_TEMPORALITY_CUMULATIVE
    return Metric(name=name, description="a counter", unit="1",
                  sum=Sum(data_points=[point], aggregation_temporality=temporality, is_monotonic=True))


def metrics_data(*metrics: Metric, resource: dict | None = None) -> bytes:
    resource_metrics = ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=list(metrics))])
    resource_metrics.resource.attributes.extend(_attributes(resource or {}))
    return MetricsData(resource_metrics=[resource_metrics]).SerializeToString()


def sample_payload(latency: float = 2.5, connections: int = 3) -> bytes:
    return metrics_data(gauge(LATENCY, latency, **{"node.id": "1"}), counter(CONNECTIONS, connections),
                        resource={"client_rack": "r1"})
