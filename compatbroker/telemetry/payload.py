"""Reading a PushTelemetry payload: decompression, then OTLP MetricsData (opentelemetry-proto) into data points.

`decode(compression_type, data, max_points=..., max_bytes=...)` returns a `Payload`: the resource attributes the
client reports about itself and its metrics' data points, each a `DataPoint` (OTLP metric name, kind, attributes,
value, and for sums whether they are monotonic deltas). Gauges and sums are kept (what librdkafka and the Java
client push); histograms, exponential histograms and summaries are counted in `Payload.skipped` and left out. At
most `max_points` points are kept (the rest counted in `skipped` too).

Decompression is bounded by `max_bytes`: parsing OTLP costs up to ~40 bytes of memory per byte of payload (a
payload of empty data points), so a few compressed kilobytes must not decompress into hundreds of megabytes of
points. The broker passes the larger of `telemetry.max.bytes` and `MIN_UNCOMPRESSED_LIMIT`, ample for the clients'
pushes (a data point is about a hundred bytes). A payload that does not decompress or parse raises
`UndecodablePayload`, which the broker answers INVALID_RECORD as Kafka does when its receiver fails.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from ..protocol.records.compression import decompress
from ..protocol.records.errors import CorruptRecordError, UnsupportedCompressionError

MIN_UNCOMPRESSED_LIMIT = 2 * 1024 * 1024

GAUGE = "gauge"
SUM = "sum"
# OTLP AggregationTemporality
TEMPORALITY_DELTA = 1
TEMPORALITY_CUMULATIVE = 2


class UndecodablePayload(ValueError):
    """The metrics payload cannot be decompressed or is not an OTLP MetricsData message."""


class DataPoint(NamedTuple):
    name: str                              # the OTLP name, e.g. org.apache.kafka.producer.node.request.latency.avg
    kind: str                              # GAUGE or SUM
    attributes: tuple[tuple[str, str], ...]  # the data point's attributes (e.g. node.id), sorted
    value: float
    monotonic: bool = False                # SUM only: a counter
    delta: bool = False                    # SUM only: the change since the previous push (else cumulative)
    description: str = ""
    unit: str = ""


@dataclass
class Payload:
    resource: dict[str, str] = field(default_factory=dict)
    points: list[DataPoint] = field(default_factory=list)
    skipped: int = 0                       # points of other kinds, or beyond max_points


def decode(compression_type: int, data: bytes, *, max_points: int, max_bytes: int) -> Payload:
    """The payload of a push (UndecodablePayload when it is not one, or decompresses to more than `max_bytes`)."""
    raw = _decompressed(compression_type, data, max_bytes)
    from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData  # only when a client pushes
    from google.protobuf.message import DecodeError
    message = MetricsData()
    try:
        message.ParseFromString(raw)
    except (DecodeError, ValueError) as exc:  # upb raises DecodeError; some builds a ValueError subclass
        raise UndecodablePayload(f"not an OTLP MetricsData message: {exc}") from None
    payload = Payload()
    for resource_metrics in message.resource_metrics:
        payload.resource.update(_attributes(resource_metrics.resource.attributes))
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                _add_points(payload, metric, max_points)
    return payload


def _decompressed(compression_type: int, data: bytes, max_bytes: int) -> bytes:
    try:
        return decompress(compression_type, data, max_size=max_bytes)
    except (CorruptRecordError, UnsupportedCompressionError) as exc:
        raise UndecodablePayload(f"cannot decompress the metrics: {exc}") from None


def _add_points(payload: Payload, metric, max_points: int) -> None:
    kind = metric.WhichOneof("data")
    if kind == GAUGE:
        points, monotonic, delta = metric.gauge.data_points, False, False
    elif kind == SUM:
        points = metric.sum.data_points
        monotonic = metric.sum.is_monotonic
        delta = metric.sum.aggregation_temporality == TEMPORALITY_DELTA
    else:  # histograms and summaries: not pushed by the clients of today, not re-exported
        payload.skipped += _count_points(metric, kind)
        return
    for point in points:
        if len(payload.points) >= max_points:
            payload.skipped += 1
            continue
        value = point.as_double if point.WhichOneof("value") == "as_double" else float(point.as_int)
        payload.points.append(DataPoint(metric.name, kind, tuple(sorted(_attributes(point.attributes).items())),
                                        value, monotonic, delta, metric.description, metric.unit))


def _count_points(metric, kind: str | None) -> int:
    return len(getattr(metric, kind).data_points) if kind else 0


def _attributes(key_values) -> dict[str, str]:
    return {item.key: _any_value_text(item.value) for item in key_values}


def _any_value_text(value) -> str:
    kind = value.WhichOneof("value")
    if kind is None:
        return ""
    if kind == "array_value":
        return ",".join(_any_value_text(item) for item in value.array_value.values)
    if kind == "kvlist_value":
        return ",".join(f"{item.key}={_any_value_text(item.value)}" for item in value.kvlist_value.values)
    if kind == "bytes_value":
        return value.bytes_value.hex()
    if kind == "bool_value":
        return "true" if value.bool_value else "false"
    return str(getattr(value, kind))
