"""What the server lets code above it (the testing toolkit, `compatbroker.toolkit`) do to requests and the runtime.

The server defines these interfaces and never imports what implements them; the command line and the toolkit pass
implementations in (`Server(..., hooks=...)`, `ClusterRuntime(..., hooks=..., services=...)`).

- `RequestHooks`: asked about every request a connection is about to serve, but only while `active` is true, so a
  broker nobody is testing pays one attribute check per request. `on_request` answers None (serve it) or a
  `Fault`; `on_unserved` hears of requests the broker does not serve (an API or version it lacks); `on_response`
  hears of each request answered (or served without an answer: Produce acks=0), with its latency (from the request
  read to its response encoded) and the first non-zero error code of the response (0 when none). Each is told
  the id of the node the connection belongs to, so that a request log can say which node served each request.
  The fault injector of the toolkit (`compatbroker.toolkit.faults.FaultInjector`) implements it.
- `Fault`: wait `delay_s`, then either serve the request (`error` None) or answer `response(...)` instead, or
  close the connection without an answer (`drop`).
- `RuntimeService`: something started with the runtime after its listeners accept and stopped before them (the
  toolkit's HTTP control endpoint); the line it returns from `start` is printed after the listening lines.

Everything is called on the broker's event loop.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Protocol


class Fault(Protocol):
    delay_s: float        # seconds to wait before serving or answering
    drop: bool            # close the connection instead of answering
    error: object | None  # answer `response(...)` instead of serving the request; None: serve it

    def response(self, api_key: int, api_version: int, request) -> object | None:
        """The response body to send instead of serving `request`; None when Kafka sends no response (a Produce
        with acks=0), in which case the connection is closed so that the client notices."""


class RequestHooks(Protocol):
    active: bool  # False: the connection calls nothing here

    def on_request(self, header, body, peer: str, *, node_id: int,
                   topic_by_id: Callable[[uuid.UUID], object] | None = None) -> Fault | None:
        """The fault for a request about to be served by node `node_id`, or None to serve it as usual."""

    def on_unserved(self, header, peer: str, *, node_id: int) -> None:
        """A request node `node_id` does not serve (an API or version it lacks); no fault applies to it."""

    def on_response(self, header, peer: str, *, node_id: int, latency_s: float, error_code: int) -> None:
        """A request node `node_id` has answered (its response encoded, or none due: Produce acks=0), `latency_s`
        after it was read; `error_code` is the response's first non-zero error code, 0 when it has none."""


class RuntimeService(Protocol):
    async def start(self, runtime) -> str | None:
        """Start beside a started runtime (`compatbroker.server.run.ClusterRuntime`); the line to print after the
        listening lines, or None. Raises `compatbroker.server.StartupError` when it cannot start."""

    async def stop(self) -> None:
        """Stop; called before the runtime's servers stop."""


class _NoHooks:
    """The hooks of a broker that nobody tests: never active."""

    active = False

    def on_request(self, header, body, peer, *, node_id, topic_by_id=None):
        return None

    def on_unserved(self, header, peer, *, node_id) -> None:
        pass

    def on_response(self, header, peer, *, node_id, latency_s, error_code) -> None:
        pass


NO_HOOKS: RequestHooks = _NoHooks()
