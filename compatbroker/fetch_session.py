"""Incremental fetch sessions (KIP-227): the broker remembers which partitions a fetcher reads, so later Fetch
requests list only what changed and responses carry only partitions with something new.

The protocol, from the fetcher's side:

- epoch 0 (with session id 0) asks for a full fetch and a new session; the response carries the new session id, or
  0 when the cache has no room (the fetcher then simply keeps sending full fetches);
- epoch -1 is a full fetch without a session (any session named in the request is closed);
- epoch 1, 2, ... continue session `session_id`: the request lists only added or changed partitions and those to
  forget, and the response only partitions with records, a changed high watermark or log start offset, or an error.

Errors: an unknown session id answers FETCH_SESSION_ID_NOT_FOUND (70), an epoch other than the expected one
INVALID_FETCH_SESSION_EPOCH (71), a session used across the topic-id boundary (versions < 13 name topics, 13+ use
ids) FETCH_SESSION_TOPIC_ID_ERROR (106). In each case the response has no partitions and session id 0.

`FetchSessionCache` holds the sessions (`max.incremental.fetch.session.cache.slots` of them). When it is full, a
new session may take the place of one unused for `min.incremental.fetch.session.eviction.ms` (120 s), or else of the
smallest session older than that if the new one has more partitions, as Kafka decides. Each node of a cluster owns
one cache, as each Kafka broker does (a consumer reading from a follower has its session there); the Fetch handler
opens a context per request with `new_context` and answers through it.

Deviation: Kafka keeps separate eviction rules for follower ("privileged") sessions; the nodes of this process
replicate without Fetch requests, so every session is treated as a consumer's.
"""
from __future__ import annotations

import random
import uuid
from dataclasses import dataclass

from .protocol.error_codes import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
DEFAULT_EVICTION_MS = 120_000  # min.incremental.fetch.session.eviction.ms
_INT32_MAX = 2**31 - 1

NONE = ErrorCode.NONE  # compared per partition: a module name is quicker to reach than the enum's attribute


def next_epoch(epoch: int) -> int:
    """The epoch that follows `epoch`; it wraps to 1 (never 0, which asks for a new session)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _INT32_MAX else epoch + 1


@dataclass(slots=True)
class PartitionRequest:
    """What a fetcher asks of one partition. `topic` is None when a topic id (version 13+) names no known topic."""

    topic: str | None
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1
    last_fetched_epoch: int = -1

    def key(self, uses_topic_ids: bool) -> tuple:
        return (self.topic_id if uses_topic_ids else self.topic, self.partition)


@dataclass(slots=True)
class CachedPartition:
    """A partition of a session: the fetcher's latest request for it and what the last response told it."""

    request: PartitionRequest
    high_watermark: int = -1
    log_start_offset: int = -1

    def must_respond(self, data, update: bool) -> bool:
        """Whether the response `data` (a Fetch PartitionData) tells the fetcher something new; with `update`,
        remember what it tells."""
        diverging = data.diverging_epoch.epoch != -1 or data.diverging_epoch.end_offset != -1
        respond = (len(data.records or b"") > 0 or data.error_code != NONE or diverging
                   or data.preferred_read_replica != -1)
        if self.high_watermark != data.high_watermark or self.log_start_offset != data.log_start_offset:
            respond = True
            if update:
                self.high_watermark = data.high_watermark
                self.log_start_offset = data.log_start_offset
        if update and data.error_code != NONE:
            self.high_watermark = -1  # resend the partition once the error clears
        return respond


@dataclass(eq=False)
class FetchSession:
    id: int
    uses_topic_ids: bool
    partitions: dict[tuple, CachedPartition]  # in fetch order
    created_ms: int
    last_used_ms: int
    epoch: int = 1
    cached_size: int = 0  # partition count at the last touch, as eviction compares it
    aged: bool = False    # older than the eviction delay at the last touch: may give way to a larger session

    def update(self, requested: list[PartitionRequest], forgotten: list[tuple]) -> None:
        """Apply an incremental request: add or update the partitions it lists, drop the forgotten ones."""
        for request in requested:
            key = request.key(self.uses_topic_ids)
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = CachedPartition(request)
            else:
                cached.request = request
        for key in forgotten:
            self.partitions.pop(key, None)


class FetchSessionCache:
    """The broker's fetch sessions, at most `max_slots` of them."""

    def __init__(self, max_slots: int, *, eviction_ms: int = DEFAULT_EVICTION_MS, rng: random.Random | None = None):
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._sessions: dict[int, FetchSession] = {}
        self._random = rng or random.Random()

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        return self._sessions.pop(session_id, None)

    def create(self, now_ms: int, partitions: dict[tuple, CachedPartition], uses_topic_ids: bool) -> int:
        """A new session holding `partitions`; returns its id, or INVALID_SESSION_ID when there is no room."""
        if len(self._sessions) >= self.max_slots and not self._evict_for(len(partitions), now_ms):
            return INVALID_SESSION_ID
        session = FetchSession(self._new_id(), uses_topic_ids, partitions, now_ms, now_ms)
        self._sessions[session.id] = session
        self.touch(session, now_ms)
        return session.id

    def touch(self, session: FetchSession, now_ms: int) -> None:
        session.last_used_ms = now_ms
        session.cached_size = len(session.partitions)
        session.aged = now_ms - session.created_ms > self.eviction_ms

    def _new_id(self) -> int:
        while True:
            session_id = self._random.randint(1, _INT32_MAX)
            if session_id not in self._sessions:
                return session_id

    def _evict_for(self, size: int, now_ms: int) -> bool:
        """Make room for a session of `size` partitions: evict the least recently used session if it is stale,
        else the smallest aged session if it is smaller than the new one."""
        if not self._sessions:
            return False
        stale = min(self._sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - stale.last_used_ms > self.eviction_ms:
            del self._sessions[stale.id]
            return True
        aged = [s for s in self._sessions.values() if s.aged]
        if not aged:
            return False
        smallest = min(aged, key=lambda s: (s.cached_size, s.id))
        if size <= smallest.cached_size:
            return False
        del self._sessions[smallest.id]
        return True


# --- per-request contexts -----------------------------------------------------------------------------------------

class FetchContext:
    """How one Fetch request relates to the session cache: which partitions to read, and how to answer."""

    def partitions(self) -> list[PartitionRequest]:
        """The partitions to read, in order."""
        return []

    def respond(self, results: list, now_ms: int) -> tuple[int, int, list]:
        """Given one result per partition of `partitions()`, each a tuple starting with its PartitionRequest and its
        Fetch PartitionData, return the top-level error code, the session id to send, and the results to include
        in the response."""
        raise NotImplementedError


class SessionErrorContext(FetchContext):
    def __init__(self, error_code: int):
        self.error_code = error_code

    def respond(self, results, now_ms):
        return self.error_code, INVALID_SESSION_ID, []


class SessionlessContext(FetchContext):
    """A full fetch that creates no session (versions < 7, or epoch -1)."""

    def __init__(self, requested: list[PartitionRequest]):
        self.requested = requested

    def partitions(self):
        return self.requested

    def respond(self, results, now_ms):
        return NONE, INVALID_SESSION_ID, results


class FullContext(FetchContext):
    """A full fetch that asks for a new session (epoch 0); the session is created with the response."""

    def __init__(self, cache: FetchSessionCache, requested: list[PartitionRequest], uses_topic_ids: bool):
        self.cache = cache
        self.requested = requested
        self.uses_topic_ids = uses_topic_ids

    def partitions(self):
        return self.requested

    def respond(self, results, now_ms):
        cached = {}
        for request, data, *_ in results:
            cached[request.key(self.uses_topic_ids)] = CachedPartition(request, data.high_watermark,
                                                                       data.log_start_offset)
        session_id = self.cache.create(now_ms, cached, self.uses_topic_ids)
        return NONE, session_id, results


class IncrementalContext(FetchContext):
    """A fetch in an existing session: reads every partition of the session, answers only what changed."""

    def __init__(self, session: FetchSession):
        self.session = session
        self.expected_epoch = session.epoch
        # (key, CachedPartition) in fetch order: the results come back in this order, so no key is computed again.
        # Only a request of this session changes its partitions, and that also changes its epoch.
        self._cached = list(session.partitions.items())

    def partitions(self):
        return [cached.request for _, cached in self._cached]

    def respond(self, results, now_ms):
        session = self.session
        if session.epoch != self.expected_epoch:  # another request of this session got in first
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id, []
        selected = []
        partitions = session.partitions
        for (key, cached), result in zip(self._cached, results):
            data = result[1]
            if not cached.must_respond(data, update=True):
                continue
            selected.append(result)
            if len(data.records or b"") > 0:  # partitions that got data go last next time, so none starves
                partitions[key] = partitions.pop(key)
        return NONE, session.id, selected


def new_context(cache: FetchSessionCache, *, version: int, session_id: int, epoch: int,
                requested: list[PartitionRequest], forgotten: list[tuple], now_ms: int) -> FetchContext:
    """The context of one Fetch request (`forgotten` holds (topic or topic id, partition) keys)."""
    uses_topic_ids = version >= 13
    if version < 7:
        return SessionlessContext(requested)
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        if session_id != INVALID_SESSION_ID:
            cache.remove(session_id)  # a full fetch closes the session it names
        if epoch == FINAL_EPOCH:
            return SessionlessContext(requested)
        return FullContext(cache, requested, uses_topic_ids)
    session = cache.get(session_id)
    if session is None:
        return SessionErrorContext(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    if session.epoch != epoch:
        return SessionErrorContext(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    if session.uses_topic_ids != uses_topic_ids:
        return SessionErrorContext(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
    session.update(requested, forgotten)
    if not session.partitions:
        cache.remove(session.id)
        return SessionlessContext(requested)
    cache.touch(session, now_ms)
    session.epoch = next_epoch(session.epoch)
    return IncrementalContext(session)
