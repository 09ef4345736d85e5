"""The cluster's client telemetry (KIP-714): subscriptions, client instances, pushes. One per cluster.

What Kafka 4.x's ClientMetricsManager does, with its rules and messages:
- GetTelemetrySubscriptions: a client sending the zero uuid gets a new random client instance id. Its instance
  (kept in a cache of at most 16384, least recently used dropped first) records who the client is and the union of
  the subscriptions matching it: their metric prefixes (just `*` when one asks for all), the smallest push interval
  (default 300000 ms), and a subscription id, the CRC-32C of the prefix set's text and the interval, XOR the
  instance id's Java hashCode. A subscription change makes every instance re-evaluate on its next request. Asking
  again before the push interval has passed since the instance's last request is THROTTLING_QUOTA_EXCEEDED, unless
  its last push failed with UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE.
- PushTelemetry, checked in Kafka's order: the zero (or reserved 0...01) instance id is INVALID_REQUEST; a push
  after a terminating one is INVALID_REQUEST; a push sooner than the interval after the previous one is
  THROTTLING_QUOTA_EXCEEDED (a terminating push, or the first push after a GetTelemetrySubscriptions, is always
  let through); another subscription id than the instance's is UNKNOWN_SUBSCRIPTION_ID; a compression type Kafka
  does not define is UNSUPPORTED_COMPRESSION_TYPE; a payload larger than `telemetry.max.bytes` (default 1048576)
  is TELEMETRY_TOO_LARGE. An unknown instance id (a broker restart, another node) makes a new instance.
- A payload that does not decompress (or decompresses to more than the larger of `telemetry.max.bytes` and 2 MiB)
  or parse as OTLP MetricsData is INVALID_RECORD (Kafka's answer when its receiver fails); a valid one goes to the
  store (`store.PushedMetricsStore`).
- An instance is dropped `max(60 s, 3 x push interval)` after its last request, or when the connection that made it
  closes.

The broker offers gzip, snappy, lz4 and zstd (`ACCEPTED_COMPRESSION_TYPES`, Kafka's order) and asks for delta
temporality, as Kafka does. `clients()` is the view for the console.

Everything runs on the event loop; nothing here blocks.
"""
from __future__ import annotations

import base64
import logging
import secrets
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import crc32c

from ..protocol.error_codes import ErrorCode
from ..protocol.records.compression import Compression
from . import subscriptions as subs
from .payload import MIN_UNCOMPRESSED_LIMIT, UndecodablePayload, decode
from .store import ClientInfo, PushedClient, PushedMetricsStore

log = logging.getLogger(__name__)

ACCEPTED_COMPRESSION_TYPES = (Compression.ZSTD, Compression.LZ4, Compression.GZIP, Compression.SNAPPY)
TELEMETRY_MAX_BYTES_DEFAULT = 1024 * 1024
CACHE_MAX_SIZE = 16384
CACHE_EXPIRY_MS = 60_000
ZERO_UUID = uuid.UUID(int=0)
RESERVED_UUIDS = frozenset({ZERO_UUID, uuid.UUID(int=1)})  # Kafka's Uuid.RESERVED
_SWEEP_EVERY_MS = 1000
_NEVER = -2**62  # the time of a request an instance has not had yet: any interval has passed since


class TelemetryError(Exception):
    """A telemetry request Kafka answers with an error code; the message is Kafka's."""

    def __init__(self, error_code: ErrorCode, message: str):
        super().__init__(message)
        self.error_code = error_code


@dataclass(frozen=True)
class SubscriptionAnswer:
    """What GetTelemetrySubscriptions answers."""

    client_instance_id: uuid.UUID
    subscription_id: int
    accepted_compression_types: tuple[int, ...]
    push_interval_ms: int
    telemetry_max_bytes: int
    delta_temporality: bool
    requested_metrics: tuple[str, ...]


class ClientInstance:
    """A client instance as the broker knows it (Kafka's ClientMetricsInstance)."""

    __slots__ = ("instance_id", "info", "subscription_id", "subscription_version", "metrics", "push_interval_ms",
                 "last_get_ms", "last_push_ms", "terminating", "last_error", "expires_at")

    def __init__(self, instance_id: uuid.UUID, info: ClientInfo, subscription_id: int, subscription_version: int,
                 metrics: tuple[str, ...], push_interval_ms: int):
        self.instance_id = instance_id
        self.info = info
        self.subscription_id = subscription_id
        self.subscription_version = subscription_version
        self.metrics = metrics
        self.push_interval_ms = push_interval_ms
        self.last_get_ms = _NEVER
        self.last_push_ms = _NEVER
        self.terminating = False
        self.last_error = ErrorCode.NONE
        self.expires_at = 0

    def may_get(self, now: int) -> bool:
        """A GetTelemetrySubscriptions at least one interval after the last request (and remember it)."""
        if now - max(self.last_get_ms, self.last_push_ms) >= self.push_interval_ms:
            self.last_get_ms = now
            return True
        return False

    def may_push(self, now: int) -> bool:
        """The first push after a GetTelemetrySubscriptions (clients add jitter), or one interval after the last."""
        if self.last_get_ms > self.last_push_ms or now - self.last_push_ms >= self.push_interval_ms:
            self.last_push_ms = now
            return True
        return False


class ClientTelemetry:
    """One per cluster. `data_dir` None keeps subscriptions in memory only; `clock` gives monotonic milliseconds
    (throttling and expiry), `wall_clock` epoch milliseconds (what `clients()` reports)."""

    def __init__(self, data_dir: str | None = None, *, telemetry_max_bytes: int = TELEMETRY_MAX_BYTES_DEFAULT,
                 clock: Callable[[], int] | None = None, wall_clock: Callable[[], int] | None = None):
        self.telemetry_max_bytes = telemetry_max_bytes
        self.subscriptions = subs.SubscriptionStore.load(data_dir) if data_dir else subs.SubscriptionStore()
        self.store = PushedMetricsStore()
        self._clock = clock or (lambda: int(time.monotonic() * 1000))
        self._wall_clock = wall_clock or (lambda: int(time.time() * 1000))
        self._parsed: dict[str, subs.Subscription] = {}
        self._version = 0  # bumped on every subscription change: instances re-evaluate
        self._instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()  # least recently used first
        self._by_connection: dict[int, uuid.UUID] = {}  # id of an open connection's client_gone -> its instance
        self._next_sweep = 0
        self._load_parsed()

    # --- subscriptions --------------------------------------------------------------------------------------------

    def subscription_names(self) -> list[str]:
        return self.subscriptions.names()

    def set_subscription(self, name: str, configs: dict[str, str]) -> None:
        """Make `configs` (valid: `subscriptions.validate`) the subscription's whole config set; empty removes it.
        OSError when the file cannot be written (nothing changes then)."""
        self.subscriptions.set(name, configs)
        if configs:
            self._parsed[name] = subs.parse(configs, name)
            log.info("client metrics subscription %s is now %s", name, configs)
        elif self._parsed.pop(name, None) is not None:
            log.info("client metrics subscription %s removed", name)
        self._version += 1

    def _load_parsed(self) -> None:
        for name, configs in self.subscriptions.items():
            try:
                self._parsed[name] = subs.parse(configs, name)
            except subs.ClientMetricsConfigError as exc:  # only a hand-edited file holds one
                log.warning("ignoring client metrics subscription %s: %s", name, exc)

    # --- requests -------------------------------------------------------------------------------------------------

    def get_subscriptions(self, instance_id: uuid.UUID, info: ClientInfo, *, client_gone=None) -> SubscriptionAnswer:
        """Answer GetTelemetrySubscriptions (TelemetryError for Kafka's refusals)."""
        now = self._clock()
        if instance_id == ZERO_UUID:
            instance_id = self._new_instance_id()
        instance = self._instance(instance_id, info, now, client_gone)
        if not instance.may_get(now) and instance.last_error not in (ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
                                                                     ErrorCode.UNSUPPORTED_COMPRESSION_TYPE):
            raise TelemetryError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, f"Request from the client [{instance_id}] "
                                                                      "arrived before the next push interval time")
        instance.last_error = ErrorCode.NONE
        return SubscriptionAnswer(instance_id, instance.subscription_id, tuple(ACCEPTED_COMPRESSION_TYPES),
                                  instance.push_interval_ms, self.telemetry_max_bytes, True, instance.metrics)

    def push(self, instance_id: uuid.UUID, info: ClientInfo, *, subscription_id: int, terminating: bool,
             compression_type: int, metrics: bytes, client_gone=None) -> None:
        """Take a PushTelemetry (TelemetryError for Kafka's refusals)."""
        if instance_id in RESERVED_UUIDS:
            raise TelemetryError(ErrorCode.INVALID_REQUEST, f"Invalid request from the client [{instance_id}], "
                                                            "invalid client instance id")
        now = self._clock()
        instance = self._instance(instance_id, info, now, client_gone)
        try:
            self._check_push(instance, subscription_id, terminating, compression_type, len(metrics), now)
        except TelemetryError as exc:
            instance.last_error = exc.error_code
            raise
        finally:
            instance.terminating = terminating
        if metrics:
            self._receive(instance, compression_type, metrics, terminating, now)
        instance.last_error = ErrorCode.NONE

    def _check_push(self, instance: ClientInstance, subscription_id: int, terminating: bool, compression_type: int,
                    size: int, now: int) -> None:
        client = instance.instance_id
        if instance.terminating:
            raise TelemetryError(ErrorCode.INVALID_REQUEST,  # sic: Kafka's message lacks the space
                                 f"Client [{client}] sent the previous request with state terminating to TRUE, can "
                                 "not acceptany requests after that")
        if not instance.may_push(now) and not terminating:
            raise TelemetryError(ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                 f"Request from the client [{client}] arrived before the next push interval time")
        if subscription_id != instance.subscription_id:
            raise TelemetryError(ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
                                 f"Unknown client subscription id for the client [{client}]")
        if compression_type not in tuple(Compression):
            raise TelemetryError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"Unknown compression type "
                                 f"[{compression_type}] is received in telemetry request from [{client}]")
        if size > self.telemetry_max_bytes:
            raise TelemetryError(ErrorCode.TELEMETRY_TOO_LARGE,
                                 f"Telemetry request from [{client}] is larger than the maximum allowed size "
                                 f"[{self.telemetry_max_bytes}]")

    def _receive(self, instance: ClientInstance, compression_type: int, metrics: bytes, terminating: bool,
                 now: int) -> None:
        try:
            payload = decode(compression_type, metrics, max_points=self.store.max_points,
                             max_bytes=max(self.telemetry_max_bytes, MIN_UNCOMPRESSED_LIMIT))
        except UndecodablePayload as exc:
            instance.last_error = ErrorCode.INVALID_RECORD
            log.warning("client instance %s (client id %r) pushed metrics that cannot be read: %s",
                        instance.instance_id, instance.info.client_id, exc)
            raise TelemetryError(ErrorCode.INVALID_RECORD, str(exc)) from None
        self.store.record(instance.instance_id, instance.info, payload, metrics=instance.metrics,
                          push_interval_ms=instance.push_interval_ms, terminating=terminating, now=now,
                          wall_ms=self._wall_clock())

    # --- client instances -----------------------------------------------------------------------------------------

    def _instance(self, instance_id: uuid.UUID, info: ClientInfo, now: int, client_gone) -> ClientInstance:
        """The cached instance (re-evaluated after a subscription change), or a new one; its expiry pushed back."""
        self._sweep(now)
        instance = self._instances.pop(instance_id, None)
        if instance is None or instance.subscription_version < self._version:
            instance = self._evaluate(instance_id, info if instance is None else instance.info)
            self._forget_when_closed(instance, client_gone)
        instance.expires_at = now + max(CACHE_EXPIRY_MS, 3 * instance.push_interval_ms)
        self._instances[instance_id] = instance
        while len(self._instances) > CACHE_MAX_SIZE:
            self._instances.popitem(last=False)
        return instance

    def _evaluate(self, instance_id: uuid.UUID, info: ClientInfo) -> ClientInstance:
        attributes = _match_attributes(instance_id, info)
        metrics: set[str] = set()
        interval = subs.INTERVAL_MS_DEFAULT
        for subscription in self._parsed.values():
            if subscription.matches(attributes):
                metrics |= subscription.metrics
                interval = min(interval, subscription.interval_ms)
        if subs.ALL_METRICS in metrics:
            metrics = {subs.ALL_METRICS}
        ordered = tuple(sorted(metrics))
        return ClientInstance(instance_id, info, subscription_id(ordered, interval, instance_id), self._version,
                              ordered, interval)

    def _forget_when_closed(self, instance: ClientInstance, client_gone) -> None:
        """Kafka drops the instance a connection last made when that connection closes (one entry per open
        connection, so a client making instance after instance on one connection holds no more)."""
        if client_gone is None:
            return
        key = id(client_gone)
        if key not in self._by_connection:
            client_gone.add_done_callback(lambda _future, key=key: self._connection_closed(key))
        self._by_connection[key] = instance.instance_id

    def _connection_closed(self, key: int) -> None:
        instance_id = self._by_connection.pop(key, None)
        if instance_id is not None:
            self._instances.pop(instance_id, None)

    def _new_instance_id(self) -> uuid.UUID:
        """A random id as Kafka's Uuid.randomUuid makes them (not reserved, its base64 form not starting with a
        dash, which command lines would take for an option), and not in use."""
        while True:
            candidate = uuid.UUID(bytes=secrets.token_bytes(16), version=4)
            if (candidate not in RESERVED_UUIDS and candidate not in self._instances
                    and not base64.urlsafe_b64encode(candidate.bytes).startswith(b"-")):
                return candidate

    def _sweep(self, now: int) -> None:
        if now < self._next_sweep:
            return
        self._next_sweep = now + _SWEEP_EVERY_MS
        for instance_id in [key for key, value in self._instances.items() if value.expires_at <= now]:
            del self._instances[instance_id]
        self.store.expire(now)

    # --- views ----------------------------------------------------------------------------------------------------

    def instance_count(self) -> int:
        """Client instances known (Kafka's client-metrics instance-count)."""
        return len(self._instances)

    def pushed(self) -> list[PushedClient]:
        """The store's clients not yet expired, least recently pushed first."""
        return self.store.clients(self._clock())

    def clients(self) -> list[dict]:
        """What the console shows, one dict per client instance that pushed metrics, most recent push first:
        `client_instance_id` (str), `client_id`, `client_software_name`, `client_software_version`,
        `client_source_address`, `client_source_port` (int or None), `requested_metrics` (list of prefixes),
        `push_interval_ms`, `first_push_ms` and `last_push_ms` (epoch milliseconds), `pushes` (count),
        `terminating` (its last push said it is closing), `resource` ({attribute: value} the client reports about
        itself), `skipped` (points of the last push not kept), and `metrics`: the last push's data points as dicts
        {`name` (OTLP name), `kind` ("gauge" or "sum"), `monotonic` (a counter), `attributes` ({name: value}),
        `value` (float; a delta counter's running total), `unit`, `description`}."""
        return [_client_view(entry) for entry in reversed(self.pushed())]


def subscription_id(metrics: tuple[str, ...], interval_ms: int, instance_id: uuid.UUID) -> int:
    """Kafka's id of a subscription set: CRC-32C of the set's text (Java's `[a, b]` form, items sorted here) followed
    by the interval, XOR the instance id's hashCode; a signed 32-bit int."""
    text = ("[" + ", ".join(metrics) + "]" + str(interval_ms)).encode()
    value = crc32c.crc32c(text) ^ _java_uuid_hash(instance_id)
    return value - 2**32 if value >= 2**31 else value


def _java_uuid_hash(instance_id: uuid.UUID) -> int:
    """Kafka's Uuid.hashCode: the high and low 64 bits XORed, then the two halves of that XORed (unsigned here)."""
    value = instance_id.int
    hilo = (value >> 64) ^ (value & 0xFFFF_FFFF_FFFF_FFFF)
    return ((hilo >> 32) ^ hilo) & 0xFFFF_FFFF


def _match_attributes(instance_id: uuid.UUID, info: ClientInfo) -> dict[str, str | None]:
    return {subs.CLIENT_INSTANCE_ID: str(instance_id), subs.CLIENT_ID: info.client_id,
            subs.CLIENT_SOFTWARE_NAME: info.software_name, subs.CLIENT_SOFTWARE_VERSION: info.software_version,
            subs.CLIENT_SOURCE_ADDRESS: info.source_address,
            subs.CLIENT_SOURCE_PORT: None if info.source_port is None else str(info.source_port)}


def _client_view(entry: PushedClient) -> dict:
    info = entry.info
    return {
        "client_instance_id": str(entry.client_instance_id), "client_id": info.client_id,
        "client_software_name": info.software_name, "client_software_version": info.software_version,
        "client_source_address": info.source_address, "client_source_port": info.source_port,
        "requested_metrics": list(entry.metrics), "push_interval_ms": entry.push_interval_ms,
        "first_push_ms": entry.first_push_ms, "last_push_ms": entry.last_push_ms, "pushes": entry.pushes,
        "terminating": entry.terminating, "resource": dict(entry.resource), "skipped": entry.skipped,
        "metrics": [{"name": point.name, "kind": point.kind, "monotonic": point.monotonic,
                     "attributes": dict(point.attributes), "value": point.value, "unit": point.unit,
                     "description": point.description} for point in entry.exported_points()],
    }
