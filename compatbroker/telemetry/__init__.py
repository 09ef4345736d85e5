"""Client telemetry (KIP-714), as Apache Kafka 4.x serves it with a telemetry receiver configured.

Clients (librdkafka 2.x, the Java client from 3.7) ask GetTelemetrySubscriptions which metrics to push and push
them with PushTelemetry, as OTLP MetricsData. An operator says which clients push what through client metrics
subscriptions, Kafka's CLIENT_METRICS config resource (IncrementalAlterConfigs / AlterConfigs / DescribeConfigs,
listed by ListConfigResources, formerly ListClientMetricsResources).

- `subscriptions`: the CLIENT_METRICS configs (`metrics`, `interval.ms`, `match`), their validation and storage in
  `<data dir>/client-metrics.json`.
- `client_metrics_config`: describe / validate / apply of the resource, for the config handlers.
- `client_telemetry.ClientTelemetry`: one per cluster (`telemetry_of(cluster)`, reached as
  `broker.client_telemetry` and `runtime.client_telemetry`): client instances, subscription ids, push checks.
- `payload`: decompression and OTLP decoding; `store`: what each client pushed last, bounded and expiring.
- `export.metric_families(runtime)`: the pushed metrics as Prometheus metric families for /metrics.

Kafka advertises GetTelemetrySubscriptions and PushTelemetry only when a metrics reporter implementing
ClientTelemetry is configured; compatbroker always has its receiver (the store above, shown by the console and
/metrics), so it advertises them as such a Kafka does. `--emulate` of a release stands for a default Kafka broker,
which does not (the release tables leave them out).
"""
from __future__ import annotations

from .client_telemetry import ClientTelemetry, TelemetryError
from .store import ClientInfo

__all__ = ["ClientInfo", "ClientTelemetry", "TelemetryError", "telemetry_of"]


def telemetry_of(cluster) -> ClientTelemetry:
    """The cluster's client telemetry, made (with its subscriptions read from the data directory) on first use;
    ValueError when the stored subscriptions are unreadable."""
    telemetry = getattr(cluster, "client_telemetry", None)
    if telemetry is None:
        config = cluster.config
        telemetry = ClientTelemetry(config.data_dir, telemetry_max_bytes=config.telemetry_max_bytes)
        cluster.client_telemetry = telemetry
    return telemetry
