"""What a node counts as it serves: plain ints and dicts, changed on the event loop only (no locks), cheap enough
to stay on always. The collector (`collector.py`) turns them into Prometheus families when someone scrapes.

- `RequestStats`, one per (API key, version) seen, made on first sight: requests answered, a latency histogram
  (bucket counts for `LATENCY_BOUNDS_S`, one bisect per request) and the error codes of the responses, each
  occurrence counted as Kafka's ErrorsPerSec counts a response's `errorCounts()`: here every `*error_code` field,
  NONE included (a Produce of three partitions counts three codes), where Kafka leaves out a few (e.g. Metadata's
  top-level code). `count_errors` reads Produce and Fetch responses' codes
  straight from their partitions; other responses it walks with a plan per class, made once from the class's
  fields, that visits only the fields leading to error codes (never records, numbers or leader hints).
- `TopicStats` per topic: records and bytes produced, bytes fetched by consumers, produce and fetch requests per
  partition and the failed ones. Only topics that exist get one; those deleted since are dropped now and then
  (`topic_exists`), so a client naming unknown or deleted topics cannot grow the table.
- `ListenerStats` per listener: connections opened and closed, bytes read from and written to the network.
- Delayed operations (Kafka's purgatories): `produce_waiting` (acks=all requests waiting for the ISR) and
  `fetch_waiting` (Fetch long polls), kept up by the handlers around their waits.
"""
from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable

from ..protocol.data import Data
from ..protocol.messages import FetchResponse, ProduceResponse

# Upper bounds of the request latency buckets, in seconds (the histogram reports them in ms, as Kafka's
# TotalTimeMs): fine at the low end where most requests fall, up to long polls and slow appends.
LATENCY_BOUNDS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_PRUNE_MIN = 64  # topic tables smaller than this are never pruned


class RequestStats:
    """The requests of one API key and version: how many were answered, how long they took, their error codes."""

    __slots__ = ("api_key", "version", "count", "latency_sum_s", "buckets", "errors")

    def __init__(self, api_key: int, version: int):
        self.api_key = api_key
        self.version = version
        self.count = 0
        self.latency_sum_s = 0.0
        self.buckets = [0] * (len(LATENCY_BOUNDS_S) + 1)  # the last one: above every bound
        self.errors: dict[int, int] = {}  # error code -> occurrences in responses

    def record(self, latency_s: float, response) -> int:
        """Count one answered request (`response` None: none was due); its first non-zero error code, or 0."""
        self.count += 1
        self.latency_sum_s += latency_s
        self.buckets[bisect_left(LATENCY_BOUNDS_S, latency_s)] += 1
        return 0 if response is None else count_errors(response, self.errors)


class TopicStats:
    """Kafka's BrokerTopicMetrics of one topic, as totals."""

    __slots__ = ("messages_in", "bytes_in", "bytes_out", "produce_requests", "failed_produce_requests",
                 "fetch_requests", "failed_fetch_requests")

    def __init__(self):
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.produce_requests = 0         # partitions of Produce requests, as Kafka counts TotalProduceRequests
        self.failed_produce_requests = 0
        self.fetch_requests = 0           # partitions of consumers' Fetch requests
        self.failed_fetch_requests = 0


class ListenerStats:
    """Kafka's socket-server-metrics of one listener, as totals."""

    __slots__ = ("connections_opened", "connections_closed", "bytes_in", "bytes_out")

    def __init__(self):
        self.connections_opened = 0
        self.connections_closed = 0
        self.bytes_in = 0
        self.bytes_out = 0

    @property
    def connections(self) -> int:
        return self.connections_opened - self.connections_closed


class BrokerMetrics:
    """One node's counters (`broker.metrics`). `topic_exists(name)` tells which topic tables to keep."""

    def __init__(self, topic_exists: Callable[[str], object] | None = None):
        self._topic_exists = topic_exists
        self.requests: dict[int, RequestStats] = {}  # (api key << 16) | version -> its stats
        self.topics: dict[str, TopicStats] = {}
        self.listeners: dict[str, ListenerStats] = {}
        self.produce_waiting = 0  # Produce requests (acks=all) waiting for their ISR
        self.fetch_waiting = 0    # Fetch requests long-polling
        self._prune_at = _PRUNE_MIN

    def request_stats(self, api_key: int, version: int) -> RequestStats:
        key = api_key << 16 | version
        stats = self.requests.get(key)
        if stats is None:
            stats = self.requests[key] = RequestStats(api_key, version)
        return stats

    def topic(self, name: str) -> TopicStats:
        """The stats of an existing topic (the caller has checked that it exists)."""
        stats = self.topics.get(name)
        if stats is None:
            stats = self.topics[name] = TopicStats()
            if len(self.topics) >= self._prune_at:
                self.prune_topics()
        return stats

    def prune_topics(self) -> None:
        """Forget the stats of topics deleted since (as Kafka removes their meters)."""
        if self._topic_exists is not None:
            for name in [name for name in self.topics if not self._topic_exists(name)]:
                del self.topics[name]
        self._prune_at = max(_PRUNE_MIN, 2 * len(self.topics))

    def listener(self, name: str) -> ListenerStats:
        stats = self.listeners.get(name)
        if stats is None:
            stats = self.listeners[name] = ListenerStats()
        return stats


# --- error codes of a response --------------------------------------------------------------------------------------

def count_errors(response, counts: dict[int, int]) -> int:
    """Add every error code of `response` (a generated response) to `counts`; the first non-zero one in field order
    (the top-level code before the partitions'), or 0."""
    counter = _COUNTERS.get(response.__class__)
    if counter is None:
        counter = _COUNTERS[response.__class__] = _plan_of(response.__class__).count
    return counter(response, counts)


def _produce_errors(response: ProduceResponse, counts: dict[int, int]) -> int:
    """A ProduceResponse's codes: one per partition, none elsewhere (tests check this against the schema)."""
    first = 0
    for topic in response.responses:
        first = _partition_errors(topic.partition_responses, counts, first)
    return first


def _fetch_errors(response: FetchResponse, counts: dict[int, int]) -> int:
    """A FetchResponse's codes: the top-level one and one per partition, none elsewhere (as for Produce)."""
    first = code = response.error_code
    counts[code] = counts.get(code, 0) + 1
    for topic in response.responses:
        first = _partition_errors(topic.partitions, counts, first)
    return first


def _partition_errors(partitions: list, counts: dict[int, int], first: int) -> int:
    """Count the `error_code` of each partition; `first`, or the first non-zero code when `first` is 0."""
    for partition in partitions:
        code = partition.error_code
        counts[code] = counts.get(code, 0) + 1
        if code and not first:
            first = code
    return first


# response class -> its error counter: the hot responses' written out, the others' a `_Plan` made on first sight
_COUNTERS: dict[type, Callable[[object, dict[int, int]], int]] = {ProduceResponse: _produce_errors,
                                                                  FetchResponse: _fetch_errors}


class _Plan:
    """Where a generated class keeps error codes, worked out once from its fields: its `*error_code` fields, and
    the fields whose structs hold more, in field order (`children`: (name, plan of the struct's class)).

    A field's kind comes from a default instance: a struct there is a struct field; a list is a list field whose
    element class shows with its first element (`unsure` until then, looked at on each walk); anything else
    (numbers, strings, records, and fields that default to null: nullable strings and structs, which never hold
    error codes in Kafka's responses) holds none. Structs that hold no codes are left out."""

    __slots__ = ("codes", "children", "unsure", "order")

    def __init__(self, cls: type):
        default = cls()
        self.order = {name: index for index, name in enumerate(cls.__slots__)}
        self.codes = tuple(name for name in cls.__slots__ if name.endswith("error_code"))
        self.children: tuple[tuple[str, _Plan], ...] = ()
        self.unsure: tuple[str, ...] = ()
        for name in cls.__slots__:
            value = getattr(default, name)
            if isinstance(value, Data):
                self._add_child(name, value.__class__)
            elif value.__class__ is list:
                self.unsure += (name,)

    @property
    def empty(self) -> bool:
        """Holds no error code, and never will."""
        return not (self.codes or self.children or self.unsure)

    def count(self, message, counts: dict[int, int]) -> int:
        for name in self.unsure:
            elements = getattr(message, name)
            if elements:
                self._settle(name, elements[0])
        first = 0
        for name in self.codes:
            code = getattr(message, name)
            counts[code] = counts.get(code, 0) + 1
            if code and not first:
                first = code
        for name, plan in self.children:
            value = getattr(message, name)
            if value.__class__ is list:
                for item in value:
                    code = plan.count(item, counts)
                    if code and not first:
                        first = code
            elif value is not None:
                code = plan.count(value, counts)
                if code and not first:
                    first = code
        return first

    def _settle(self, name: str, element) -> None:
        """List field `name` holds elements like `element`: walk it from now on if they are structs with codes.
        Every broker of the process shares the plans, each on its own loop thread: the first to see it settles it."""
        with _SETTLING:
            if name not in self.unsure:
                return
            if isinstance(element, Data):
                self._add_child(name, element.__class__)
            self.unsure = tuple(other for other in self.unsure if other != name)

    def _add_child(self, name: str, cls: type) -> None:
        """Walk field `name` (structs of class `cls`), in field order, if they may hold codes."""
        plan = _plan_of(cls)
        if not plan.empty:
            self.children = tuple(sorted(self.children + ((name, plan),), key=lambda child: self.order[child[0]]))


_PLANS: dict[type, _Plan] = {}
_SETTLING = threading.Lock()  # rare (once per list field of a class), so never a cost on the walk


def _plan_of(cls: type) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = _Plan(cls)
    return plan
