"""The metrics clients pushed (KIP-714), re-exported as Prometheus metric families for /metrics.

`metric_families(runtime)` yields `prometheus_client` families (the metrics collector includes them):
- one family per OTLP metric name, the name with every character Prometheus does not allow (dots included) made
  an underscore: `org.apache.kafka.producer.node.request.latency.avg` ->
  `org_apache_kafka_producer_node_request_latency_avg`. Gauges and non-monotonic sums are gauges; monotonic sums are
  counters (sample name `<name>_total`; a client's delta pushes are summed into a running total). Labels:
  `client_instance_id`, `client_id`, then the data point's attributes (names sanitized the same way, e.g.
  `node_id`). A name pushed as a gauge by one client and a counter by another keeps the kind seen first.
- `kafka_client_telemetry_pushes_total{client_instance_id,client_id,client_software_name,client_software_version}`:
  pushes taken from each client still known.
- `kafka_client_telemetry_last_push_timestamp_seconds{...same labels}`: when each client last pushed.

`runtime` is anything with a `client_telemetry` (a ClusterRuntime, a Broker) or the ClientTelemetry itself; a
runtime not started yields nothing.
"""
from __future__ import annotations

import re
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from .payload import SUM
from .store import PushedClient

CLIENT_LABELS = ("client_instance_id", "client_id", "client_software_name", "client_software_version")
_NOT_ALLOWED = re.compile(r"[^a-zA-Z0-9_:]")
_LABEL_NOT_ALLOWED = re.compile(r"[^a-zA-Z0-9_]")


def metric_families(runtime) -> Iterator[Metric]:
    telemetry = _telemetry(runtime)
    if telemetry is None:
        return
    clients = telemetry.pushed()
    yield from _pushed_families(clients)
    pushes = CounterMetricFamily("kafka_client_telemetry_pushes", "Metrics pushes (KIP-714) taken from the client.",
                                 labels=CLIENT_LABELS)
    last = GaugeMetricFamily("kafka_client_telemetry_last_push_timestamp_seconds",
                             "When the client last pushed its metrics (KIP-714).", labels=CLIENT_LABELS)
    for entry in clients:
        labels = _client_labels(entry)
        pushes.add_metric(labels, entry.pushes)
        last.add_metric(labels, entry.last_push_ms / 1000)
    yield pushes
    yield last


def metric_name(otlp_name: str, *, counter: bool = False) -> str:
    """The family name of an OTLP metric (a counter's without `_total`, which its sample adds): never empty and
    never starting with a digit, which prometheus_client would refuse at scrape time."""
    name = _NOT_ALLOWED.sub("_", otlp_name)
    if counter:
        name = name.removesuffix("_total")
    return name if name and not name[0].isdigit() else "_" + name


def label_name(attribute: str) -> str:
    name = _LABEL_NOT_ALLOWED.sub("_", attribute)
    if name[:1].isdigit() or name.startswith("__") or not name:
        name = "a_" + name
    return name


def _pushed_families(clients: list[PushedClient]) -> Iterator[Metric]:
    families: dict[str, Metric] = {}
    for entry in clients:
        base = {"client_instance_id": str(entry.client_instance_id), "client_id": entry.info.client_id or ""}
        for point in entry.exported_points():
            counter = point.kind == SUM and point.monotonic
            name = metric_name(point.name, counter=counter)
            family = families.get(name)
            if family is None:
                family = families[name] = Metric(name, point.description or point.name,
                                                 "counter" if counter else "gauge")
            if (family.type == "counter") != counter:
                continue  # the kind seen first wins
            labels = dict(base)
            for key, value in point.attributes:
                labels.setdefault(label_name(key), value)
            family.add_sample(name + "_total" if counter else name, labels, point.value)
    yield from families.values()


def _client_labels(entry: PushedClient) -> list[str]:
    info = entry.info
    return [str(entry.client_instance_id), info.client_id or "", info.software_name or "",
            info.software_version or ""]


def _telemetry(runtime):
    if hasattr(runtime, "pushed"):
        return runtime
    try:
        return runtime.client_telemetry
    except AttributeError:
        return None
