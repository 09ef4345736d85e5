"""Fault injection and the request log: what a test asks the broker to do wrong, and what the broker saw.

One `FaultInjector` serves every node of a runtime: it implements the server's request hooks
(`compatbroker.server.hooks.RequestHooks`). The connection asks it about every request it is going to serve (only
when `active` is true, so a broker nobody is testing pays one attribute check per request) and gets back None or a
`Fault`: delay the request, answer it with an error instead of serving it, or close the connection without an
answer. Three kinds of rule decide:

- error rules: the next `count` requests of an API (touching a topic, when one is named) are answered with an
  error code, in the shape Kafka gives that error (`compatbroker.protocol.error_responses`); `count=None` keeps the rule
  until it is cleared. Rules apply in the order they were added, and one request consumes at most one rule.
- latency rules: requests of an API (or of every API) wait before being served or answered.
- drop rules: after `after` more requests (of an API, or of any), the connection that sends the next one is closed
  without an answer, `count` times over.

The request log keeps the last `log_size` requests the broker decoded: API, version, client id, correlation id,
peer, topics, the node that served it (in a cluster, which broker the client reached) and the fault applied, each
numbered, so that a test can ask for what arrived after a point. Once the connection has answered a request
(`on_response`), its entry also says how long that took (`latency_ms`) and the response's error (`error`, Kafka's
name; None when it had none); both stay None for a request still in flight or never answered.

Everything here runs on the broker's event loop; callers in other threads go through the loop (see
`compatbroker.toolkit.control`).
"""
from __future__ import annotations

import dataclasses
import functools
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

from ..protocol.error_responses import can_answer, error_response
from ..protocol import API_KEYS
from ..protocol.error_codes import ErrorCode

DEFAULT_LOG_SIZE = 10_000
# Requests logged but not answered yet, by (node, peer, correlation id); those never answered (dropped connections)
# fall out once this many newer ones wait.
_MAX_IN_FLIGHT = 4096
_TOPIC_RESOURCE = 2  # resource_type of a topic in DescribeConfigs and AlterConfigs


class FaultError(ValueError):
    """A fault or a filter names an unknown API or error, or a count out of range; the message says which."""


# --- names -------------------------------------------------------------------------------------------------------

def api_name(api_key: int) -> str:
    """Kafka's name of an API: `Produce`, `OffsetCommit`..."""
    pair = API_KEYS.get(api_key)
    return pair[0].NAME.removesuffix("Request") if pair is not None else f"ApiKey{api_key}"


@functools.cache
def _api_keys_by_folded_name() -> dict[str, int]:
    return {_fold(api_name(key)): key for key in API_KEYS}


def _fold(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


def resolve_api(api: str | int) -> int:
    """An API key from Kafka's name in any of its spellings (`Produce`, `PRODUCE`, `offset_commit`) or its key."""
    if isinstance(api, bool):
        raise FaultError(f"not an API: {api!r}")
    if isinstance(api, int) or (isinstance(api, str) and api.strip().isdigit()):
        key = int(api)
        if key not in API_KEYS:
            raise FaultError(f"no API has key {key}")
        return key
    key = _api_keys_by_folded_name().get(_fold(str(api).strip()))
    if key is None:
        raise FaultError(f"unknown API {api!r}: use Kafka's name (Produce, Fetch, Metadata, ...) or the API key")
    return key


def resolve_error(error: str | int) -> ErrorCode:
    """An error code from Kafka's name (`NOT_LEADER_OR_FOLLOWER`, any case) or its number; NONE is refused."""
    if isinstance(error, bool):
        raise FaultError(f"not an error code: {error!r}")
    try:
        if isinstance(error, int) or (isinstance(error, str) and error.strip().lstrip("-").isdigit()):
            code = ErrorCode(int(error))
        else:
            code = ErrorCode[str(error).strip().upper().replace("-", "_")]
    except (KeyError, ValueError):
        raise FaultError(f"unknown error {error!r}: use Kafka's name (e.g. NOT_LEADER_OR_FOLLOWER) or its code") \
            from None
    if code is ErrorCode.NONE:
        raise FaultError("NONE is not an error to inject")
    return code


def _api_or_every(api: str | int | None) -> int | None:
    """The key of `api`, or None (every API) for None, "" or "*"."""
    return None if api is None or api == "" or api == "*" else resolve_api(api)


def _check_count(count: int | None, what: str, minimum: int = 1) -> int | None:
    if count is None:
        return None
    if isinstance(count, bool) or not isinstance(count, int) or count < minimum:
        raise FaultError(f"{what} must be an integer of at least {minimum} (or null for no limit), got {count!r}")
    return count


# --- rules and decisions -----------------------------------------------------------------------------------------

@dataclass
class ErrorRule:
    api_key: int
    error: ErrorCode
    remaining: int | None  # None: until cleared
    topic: str | None = None

    def describe(self) -> dict:
        return {"api": api_name(self.api_key), "error": self.error.name, "remaining": self.remaining,
                "topic": self.topic}


@dataclass
class LatencyRule:
    api_key: int | None  # None: every API
    delay_s: float
    remaining: int | None

    def describe(self) -> dict:
        return {"api": None if self.api_key is None else api_name(self.api_key), "ms": round(self.delay_s * 1000),
                "remaining": self.remaining}


@dataclass
class DropRule:
    api_key: int | None  # None: requests of any API count
    pass_first: int      # matching requests still to serve before the next drop
    after: int           # the gap restarted after each drop
    remaining: int | None

    def describe(self) -> dict:
        return {"api": None if self.api_key is None else api_name(self.api_key), "after": self.after,
                "next_in": self.pass_first, "remaining": self.remaining}


class Fault:
    """What to do to one request: wait `delay_s`, then answer `error` instead of serving it; or `drop` the
    connection without an answer."""

    __slots__ = ("delay_s", "drop", "error")

    def __init__(self, delay_s: float = 0.0, error: ErrorCode | None = None, drop: bool = False):
        self.delay_s = delay_s
        self.error = error
        self.drop = drop

    def response(self, api_key: int, api_version: int, request):
        """Kafka's response to `request` failing with this fault's error (None: Kafka sends none)."""
        return error_response(api_key, api_version, request, self.error)

    def __repr__(self):
        return f"Fault(delay_s={self.delay_s}, error={self.error!r}, drop={self.drop})"


@dataclass(frozen=True)
class RequestLogEntry:
    """One request the broker decoded, as the request log keeps it."""

    seq: int                 # 1, 2, 3... in arrival order over the broker's life
    time_ms: int
    api: str                 # Kafka's name: Produce, Metadata...
    api_key: int
    api_version: int
    client_id: str | None
    correlation_id: int
    peer: str
    topics: tuple[str, ...]  # topics the request names (resolved from topic ids where the broker knows them)
    injected_error: str | None = None  # the error code name answered instead of serving
    delay_ms: int = 0
    dropped: bool = False
    served: bool = True      # False: answered by an injected error, dropped, or a version this broker lacks
    node_id: int | None = None  # the node whose listener the request reached
    latency_ms: float | None = None  # from reading the request to its response encoded; None: not answered yet
    error: str | None = None  # the answer's error code (Kafka's name), None when it had none or is still to come

    def to_dict(self) -> dict:
        data = {name: getattr(self, name) for name in _ENTRY_FIELDS}  # flat: no deep copy (asdict's) needed
        data["topics"] = list(self.topics)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> RequestLogEntry:
        fields = {field.name for field in dataclasses.fields(cls)}
        values = {name: value for name, value in data.items() if name in fields}
        values["topics"] = tuple(values.get("topics") or ())
        return cls(**values)


_ENTRY_FIELDS = tuple(field.name for field in dataclasses.fields(RequestLogEntry))


# --- the injector --------------------------------------------------------------------------------------------------

class FaultInjector:
    def __init__(self, *, record_requests: bool = False, log_size: int = DEFAULT_LOG_SIZE,
                 clock_ms: Callable[[], int] | None = None):
        self.record_requests = record_requests
        self.active = record_requests  # the connection's one check: is there anything to record or inject?
        self._log: deque[RequestLogEntry] = deque(maxlen=log_size)
        self._in_flight: OrderedDict[tuple, int] = OrderedDict()  # (node, peer, correlation id) -> seq
        self._seq = 0
        self._errors: list[ErrorRule] = []
        self._latencies: list[LatencyRule] = []
        self._drops: list[DropRule] = []
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))

    # --- setting faults -------------------------------------------------------------------------------------------

    def inject_error(self, api: str | int, error: str | int, count: int | None = 1,
                     topic: str | None = None) -> ErrorRule:
        """The next `count` requests of `api` (that name `topic`, when given) get `error` instead of an answer."""
        api_key = resolve_api(api)
        if not can_answer(api_key):
            raise FaultError(f"{api_name(api_key)} responses have no place for an error code")
        rule = ErrorRule(api_key, resolve_error(error), _check_count(count, "count"), topic or None)
        self._errors.append(rule)
        self._update_active()
        return rule

    def inject_latency(self, api: str | int | None, ms: float, count: int | None = None) -> LatencyRule | None:
        """Requests of `api` (None: of every API) wait `ms` milliseconds first; the next `count` ones, or all until
        cleared. Replaces an earlier latency rule for the same API; `ms=0` just removes it."""
        api_key = _api_or_every(api)
        if isinstance(ms, bool) or not isinstance(ms, (int, float)) or ms < 0:
            raise FaultError(f"ms must be a number of at least 0, got {ms!r}")
        self._latencies = [rule for rule in self._latencies if rule.api_key != api_key]
        rule = None
        if ms > 0:
            rule = LatencyRule(api_key, ms / 1000, _check_count(count, "count"))
            self._latencies.append(rule)
        self._update_active()
        return rule

    def drop_connections_after(self, after: int = 0, api: str | int | None = None,
                               count: int | None = 1) -> DropRule:
        """Serve `after` more requests (of `api`, when given), then close the connection that sends the next one
        without answering it; `count` times (each time after another `after` requests), or until cleared."""
        api_key = _api_or_every(api)
        after = _check_count(after, "after", minimum=0)
        if after is None:
            raise FaultError("after must be an integer of at least 0")
        rule = DropRule(api_key, after, after, _check_count(count, "count"))
        self._drops.append(rule)
        self._update_active()
        return rule

    def clear_faults(self) -> None:
        self._errors.clear()
        self._latencies.clear()
        self._drops.clear()
        self._update_active()

    def faults(self) -> dict:
        """The rules in force, as plain data."""
        return {"errors": [rule.describe() for rule in self._errors],
                "latency": [rule.describe() for rule in self._latencies],
                "drops": [rule.describe() for rule in self._drops]}

    def _update_active(self) -> None:
        self.active = bool(self.record_requests or self._errors or self._latencies or self._drops)

    # --- the request log ------------------------------------------------------------------------------------------

    def requests(self, since: int = 0, api: str | int | None = None) -> list[RequestLogEntry]:
        """Logged requests numbered above `since`, of `api` when given, oldest first."""
        api_key = None if api is None or api == "" else resolve_api(api)
        return [entry for entry in self._log
                if entry.seq > since and (api_key is None or entry.api_key == api_key)]

    def recent_requests(self, limit: int, api: str | int | None = None) -> list[RequestLogEntry]:
        """The newest `limit` logged requests (of `api` when given), newest first; cheap on a full log."""
        api_key = None if api is None or api == "" else resolve_api(api)
        found = []
        for entry in reversed(self._log):
            if len(found) >= limit:
                break
            if api_key is None or entry.api_key == api_key:
                found.append(entry)
        return found

    def clear_requests(self) -> None:
        self._log.clear()
        self._in_flight.clear()

    @property
    def last_seq(self) -> int:
        """The number of the last request logged (0 before the first)."""
        return self._seq

    # --- called by the connection ---------------------------------------------------------------------------------

    def on_request(self, header, body, peer: str, *, node_id: int | None = None,
                   topic_by_id: Callable[[uuid.UUID], object] | None = None) -> Fault | None:
        """The fault for a request about to be served, or None; logs the request when recording."""
        api_key = header.request_api_key
        topics: tuple[str, ...] | None = None
        if self.record_requests or any(rule.topic is not None and rule.api_key == api_key for rule in self._errors):
            topics = request_topics(body, topic_by_id)
        fault = None
        if self._drops and self._take_drop(api_key):
            fault = Fault(drop=True)
        else:
            error = self._take_error(api_key, topics) if self._errors else None
            delay_s = self._take_latency(api_key) if self._latencies else 0.0
            if error is not None or delay_s:
                fault = Fault(delay_s, error)
        if not (self._errors or self._latencies or self._drops):
            self._update_active()  # the last rule ran out: back to one attribute check per request
        if self.record_requests:
            self._record(header, peer, topics or (), fault, node_id=node_id)
        return fault

    def on_unserved(self, header, peer: str, *, node_id: int | None = None) -> None:
        """Log a request the broker does not serve (an API or version it lacks); no fault applies to it."""
        if self.record_requests:
            self._record(header, peer, (), None, served=False, node_id=node_id)

    def on_response(self, header, peer: str, *, node_id: int | None = None, latency_s: float,
                    error_code: int) -> None:
        """The connection answered a request: its log entry gets the latency and the answer's error."""
        if not self._in_flight:
            return
        seq = self._in_flight.pop((node_id, peer, header.correlation_id), None)
        if seq is None or not self._log:
            return
        index = seq - self._log[0].seq  # the log holds consecutive numbers
        if 0 <= index < len(self._log) and self._log[index].seq == seq:
            self._log[index] = dataclasses.replace(self._log[index], latency_ms=round(latency_s * 1000, 3),
                                                   error=_error_name(error_code))

    def _take_drop(self, api_key: int) -> bool:
        for rule in self._drops:
            if rule.api_key is not None and rule.api_key != api_key:
                continue
            if rule.pass_first > 0:
                rule.pass_first -= 1
                continue
            rule.pass_first = rule.after
            self._consume(self._drops, rule)
            return True
        return False

    def _take_error(self, api_key: int, topics: tuple[str, ...] | None) -> ErrorCode | None:
        for rule in self._errors:
            if rule.api_key == api_key and (rule.topic is None or rule.topic in (topics or ())):
                self._consume(self._errors, rule)
                return rule.error
        return None

    def _take_latency(self, api_key: int) -> float:
        fallback = None
        for rule in self._latencies:
            if rule.api_key == api_key:
                self._consume(self._latencies, rule)
                return rule.delay_s
            if rule.api_key is None:
                fallback = rule
        if fallback is None:
            return 0.0
        self._consume(self._latencies, fallback)
        return fallback.delay_s

    @staticmethod
    def _consume(rules: list, rule) -> None:
        if rule.remaining is not None:
            rule.remaining -= 1
            if rule.remaining <= 0:
                rules.remove(rule)

    def _record(self, header, peer: str, topics: tuple[str, ...], fault: Fault | None, *, served: bool = True,
                node_id: int | None = None) -> None:
        self._seq += 1
        injected = fault is not None and (fault.drop or fault.error is not None)
        self._log.append(RequestLogEntry(
            seq=self._seq, time_ms=self._clock_ms(), api=api_name(header.request_api_key),
            api_key=header.request_api_key, api_version=header.request_api_version, client_id=header.client_id,
            correlation_id=header.correlation_id, peer=peer, topics=topics,
            injected_error=fault.error.name if fault is not None and fault.error is not None else None,
            delay_ms=round(fault.delay_s * 1000) if fault is not None else 0,
            dropped=fault is not None and fault.drop, served=served and not injected, node_id=node_id))
        if fault is None or not fault.drop:  # a dropped request is never answered
            self._in_flight[(node_id, peer, header.correlation_id)] = self._seq
            if len(self._in_flight) > _MAX_IN_FLIGHT:
                self._in_flight.popitem(last=False)


def _error_name(error_code: int) -> str | None:
    if not error_code:
        return None
    try:
        return ErrorCode(error_code).name
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{error_code}"


# --- topics a request names -----------------------------------------------------------------------------------------

def request_topics(body, topic_by_id: Callable[[uuid.UUID], object] | None = None) -> tuple[str, ...]:
    """The topic names a decoded request refers to, in order, each once. Topic ids (Fetch v13+, Produce v13,
    Metadata v10+) become names through `topic_by_id` (which returns an object with `.name`, or None)."""
    names: dict[str, None] = {}
    for field in ("topic_data", "topics"):
        _collect(getattr(body, field, None), names, topic_by_id)
    for name in getattr(body, "topic_names", None) or ():   # DeleteTopics v0-5
        names[name] = None
    for group in getattr(body, "groups", None) or ():       # OffsetFetch v8+ (DescribeGroups' are strings)
        _collect(getattr(group, "topics", None), names, topic_by_id)
    for resource in getattr(body, "resources", None) or ():  # DescribeConfigs, AlterConfigs...
        if getattr(resource, "resource_type", None) == _TOPIC_RESOURCE and resource.resource_name:
            names[resource.resource_name] = None
    return tuple(names)


def _collect(items, names: dict[str, None], topic_by_id) -> None:
    if not items or isinstance(items, (str, bytes)):
        return
    for item in items:
        name = getattr(item, "name", None) or getattr(item, "topic", None)
        if not name and topic_by_id is not None:
            topic_id = getattr(item, "topic_id", None)
            info = topic_by_id(topic_id) if topic_id is not None and topic_id.int else None
            name = getattr(info, "name", None)
        if isinstance(name, str) and name:
            names[name] = None
