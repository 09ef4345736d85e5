"""The metrics clients pushed, per client instance: what the console's /clients page and /metrics show.

This is the broker's built-in receiver (in Kafka, a ClientTelemetryReceiver plugin gets each push's payload). It
keeps, per client instance, the data points of its last push, running totals of its delta counters (so that a
counter re-exported to Prometheus only goes up), who the client is (client id, software name and version, source
address and port), its subscription (metric prefixes, push interval) and when it last pushed.

Bounded: at most `MAX_CLIENTS` instances and `MAX_STORED_BYTES` of kept data (an estimate: the text of the points
and resource attributes plus a fixed cost per point), the instance that pushed least recently dropped first, and
`MAX_POINTS_PER_CLIENT` data points per instance (more in one push are counted as skipped). An instance is
forgotten `max(60 s, 3 x its push interval)` after its last push, the time Kafka's client instance cache keeps
it; expired instances are dropped when the store is next used.
"""
from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

from .payload import SUM, DataPoint, Payload

MAX_CLIENTS = 1000
MAX_POINTS_PER_CLIENT = 1000
MAX_STORED_BYTES = 64 * 1024 * 1024
MIN_RETENTION_MS = 60_000  # Kafka's client instance cache expiry (ClientMetricsManager)
_POINT_COST = 200  # bytes a kept point costs beyond its text (its tuples, floats and strings' headers), roughly


@dataclass(frozen=True)
class ClientInfo:
    """Who a client is, from its connection and requests (Kafka's ClientMetricsInstanceMetadata)."""

    client_id: str | None = None
    software_name: str | None = None       # from ApiVersions v3+ (KIP-511)
    software_version: str | None = None
    source_address: str | None = None      # as Java's InetAddress.getHostAddress writes it
    source_port: int | None = None


@dataclass
class PushedClient:
    client_instance_id: uuid.UUID
    info: ClientInfo
    metrics: tuple[str, ...]               # the prefixes of its subscription
    push_interval_ms: int
    first_push_ms: int                     # wall-clock milliseconds
    last_push_ms: int
    expires_at: int                        # on the store's clock
    pushes: int = 0
    terminating: bool = False
    resource: dict[str, str] = field(default_factory=dict)
    points: list[DataPoint] = field(default_factory=list)
    skipped: int = 0                       # points of its last push not kept
    totals: dict[tuple, float] = field(default_factory=dict)  # (name, attributes) -> running total of a delta sum
    footprint: int = 0                     # estimated bytes kept (MAX_STORED_BYTES)

    def exported_points(self) -> list[DataPoint]:
        """The last push's points, delta counters replaced by their running totals."""
        return [_with_total(point, self.totals) for point in self.points]


class PushedMetricsStore:
    def __init__(self, *, max_clients: int = MAX_CLIENTS, max_points: int = MAX_POINTS_PER_CLIENT,
                 max_bytes: int = MAX_STORED_BYTES):
        self.max_clients = max_clients
        self.max_points = max_points
        self.max_bytes = max_bytes
        self._clients: OrderedDict[uuid.UUID, PushedClient] = OrderedDict()  # least recently pushed first
        self._bytes = 0  # the clients' footprints summed

    def record(self, instance_id: uuid.UUID, info: ClientInfo, payload: Payload, *, metrics: tuple[str, ...],
               push_interval_ms: int, terminating: bool, now: int, wall_ms: int) -> None:
        """Keep a push's payload as the instance's latest."""
        entry = self._pop(instance_id)
        if entry is None:
            entry = PushedClient(instance_id, info, metrics, push_interval_ms, wall_ms, wall_ms, 0)
        entry.info, entry.metrics, entry.push_interval_ms = info, metrics, push_interval_ms
        entry.last_push_ms, entry.terminating = wall_ms, terminating
        entry.expires_at = now + max(MIN_RETENTION_MS, 3 * push_interval_ms)
        entry.pushes += 1
        entry.resource = dict(payload.resource)
        entry.points = payload.points[:self.max_points]
        entry.skipped = payload.skipped + len(payload.points) - len(entry.points)
        _add_deltas(entry)
        entry.footprint = _footprint(entry)
        self._clients[instance_id] = entry
        self._bytes += entry.footprint
        while len(self._clients) > 1 and (len(self._clients) > self.max_clients or self._bytes > self.max_bytes):
            self._pop(next(iter(self._clients)))

    def clients(self, now: int) -> list[PushedClient]:
        """The instances not expired at `now`, least recently pushed first."""
        self.expire(now)
        return list(self._clients.values())

    def expire(self, now: int) -> None:
        for instance_id in [key for key, entry in self._clients.items() if entry.expires_at <= now]:
            self._pop(instance_id)

    def stored_bytes(self) -> int:
        """The estimated bytes kept, all clients together."""
        return self._bytes

    def _pop(self, instance_id: uuid.UUID) -> PushedClient | None:
        entry = self._clients.pop(instance_id, None)
        if entry is not None:
            self._bytes -= entry.footprint
        return entry


def _footprint(entry: PushedClient) -> int:
    """Roughly what the entry's pushed data holds in memory: its texts and a fixed cost per point and total."""
    texts = sum(len(key) + len(value) for key, value in entry.resource.items())
    for point in entry.points:
        texts += len(point.name) + len(point.description) + len(point.unit) + _POINT_COST
        texts += sum(len(key) + len(value) for key, value in point.attributes)
    return texts + _POINT_COST * len(entry.totals)


def _series(point: DataPoint) -> tuple:
    return point.name, point.attributes


def _add_deltas(entry: PushedClient) -> None:
    """Fold the push's delta counters into the running totals; totals of series it no longer sends are kept only
    while there is room (a bounded dict: the push's own series first)."""
    seen = {}
    for point in entry.points:
        if point.kind == SUM and point.monotonic and point.delta:
            key = _series(point)
            seen[key] = entry.totals.get(key, 0.0) + point.value
    for key, total in entry.totals.items():
        if key not in seen and len(seen) < 2 * MAX_POINTS_PER_CLIENT:
            seen[key] = total
    entry.totals = seen


def _with_total(point: DataPoint, totals: Mapping[tuple, float]) -> DataPoint:
    if point.kind == SUM and point.monotonic and point.delta:
        return DataPoint(point.name, point.kind, point.attributes, totals.get(_series(point), point.value),
                         point.monotonic, False, point.description, point.unit)
    return point
