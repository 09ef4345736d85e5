"""Prometheus metrics: see `collector` for every metric served and how they are named.

- `counting.py`: what a node counts as it serves (`BrokerMetrics`, `broker.metrics`), always on and cheap;
- `collector.py`: the Prometheus families, built at scrape time from those counts and the broker's state;
- `exporter.py`: `MetricsExporter("HOST:PORT")`, the `GET /metrics` endpoint on the broker's event loop
  (`compatbroker serve --metrics-listen`).

Only `counting` is imported with the broker; prometheus_client is loaded by the collector and the exporter.
"""
from __future__ import annotations

from .counting import BrokerMetrics

__all__ = ["BrokerMetrics"]
