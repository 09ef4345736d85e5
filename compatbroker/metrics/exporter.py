"""`GET /metrics` in Prometheus text format (0.0.4), served on the broker's event loop.

`MetricsExporter("HOST:PORT")` is a service of the runtime (`compatbroker.server.hooks.RuntimeService`, started by
`compatbroker serve --metrics-listen HOST:PORT` and by `EmbeddedBroker(metrics_listen=...)`): it listens once the
broker has started (port 0: a free port) and its start line is `compatbroker metrics on http://HOST:PORT/metrics`.
Each scrape builds the families then and there (`collector.BrokerCollector`, plus prometheus_client's process
metrics) with `prometheus_client.generate_latest` on the event loop itself, never in a thread, so it reads the
broker's dicts while nothing else changes them.

HTTP: one request per connection (the answer says `Connection: close`); `GET` or `HEAD /metrics` (a query string
is ignored) answers 200, any other path 404, another method 405. A request line that is not HTTP, a head over
8 KiB or one not complete within 10 s gets 400 (or nothing, when the client has gone) and one log line; a scrape
whose collecting fails gets 500 and the traceback in the log. `stop()` closes the connections of scrapes still in
progress and returns once their handlers have ended.
"""
from __future__ import annotations

import asyncio
import logging

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest

from ..config import format_host_port, parse_endpoint
from .collector import BrokerCollector

log = logging.getLogger(__name__)

_MAX_HEAD_BYTES = 8192
_READ_TIMEOUT_S = 10.0
_PATH = "/metrics"
# generate_latest writes the classic text format (legacy names, underscores); newer prometheus_client versions label
# it 1.0.0 in CONTENT_TYPE_LATEST, which older scrapers do not know.
_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            500: "Internal Server Error"}


class MetricsExporter:
    """The metrics endpoint as a service of a runtime; `url` is where it answers once started."""

    def __init__(self, listen: str):
        """`listen`: HOST:PORT (ValueError when malformed, before anything starts)."""
        self.listen = listen
        self.host, self.port = parse_address(listen)
        self.url: str | None = None
        self.registry: CollectorRegistry | None = None
        self._server: asyncio.AbstractServer | None = None
        self._open: dict[asyncio.Task, asyncio.StreamWriter] = {}  # the scrapes in progress

    async def start(self, runtime) -> str:
        from ..server import StartupError  # the server's public error: the server never imports this module

        try:
            self._server = await asyncio.start_server(self._serve, self.host, self.port, limit=_MAX_HEAD_BYTES)
        except OSError as exc:
            raise StartupError(f"cannot listen for metrics scrapes on {self.listen}: {exc}") from None
        self.registry = metrics_registry(runtime)
        bound_host, bound_port = self._server.sockets[0].getsockname()[:2]
        self.url = f"http://{format_host_port(bound_host, bound_port)}{_PATH}"
        return f"compatbroker metrics on {self.url}"

    async def stop(self) -> None:
        """Stop listening and end the scrapes in progress (their connections closed), before returning."""
        if self._server is None:
            return
        self._server.close()
        for writer in self._open.values():
            writer.close()  # the handler's read ends at once
        await asyncio.gather(*self._open)
        await self._server.wait_closed()
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._open[task] = writer
        try:
            await self._answer_one(reader, writer)
        finally:
            del self._open[task]
            writer.close()

    async def _answer_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        send_body = True
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _READ_TIMEOUT_S)
            status, body = self._answer(head)
            send_body = not head.startswith(b"HEAD ")
        except (asyncio.IncompleteReadError, ConnectionError):
            return  # the client left before finishing its request: nobody to answer
        except (TimeoutError, asyncio.LimitOverrunError, ValueError) as exc:
            log.warning("metrics: malformed HTTP request from %s: %s", _peer_text(writer.get_extra_info("peername")),
                        _reason(exc))
            status, body = 400, b"bad request\n"
        content_type = _CONTENT_TYPE if status == 200 else "text/plain; charset=utf-8"
        head_out = (f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {content_type}\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        try:
            writer.write(head_out + body if send_body else head_out)
            await writer.drain()
        except ConnectionError:
            pass

    def _answer(self, head: bytes) -> tuple[int, bytes]:
        """(status, body) for a request head; ValueError when it is not an HTTP request."""
        method, target = _request_line(head)
        if target.split("?", 1)[0] != _PATH:
            return 404, f"no such path: {_PATH} serves the metrics\n".encode()
        if method not in ("GET", "HEAD"):
            return 405, f"{method} is not allowed on {_PATH}\n".encode()
        try:
            return 200, generate_latest(self.registry)
        except Exception:  # noqa: BLE001 - a collector's bug: the scraper hears of it, the broker runs on
            log.exception("metrics: collecting the metrics failed")
            return 500, b"collecting the metrics failed: see the broker's log\n"


def metrics_registry(runtime) -> CollectorRegistry:
    """A registry of its own with the broker's collector and the process's metrics (fds, RSS, CPU)."""
    registry = CollectorRegistry()
    registry.register(BrokerCollector(runtime))
    ProcessCollector(registry=registry)
    return registry


def parse_address(text: str) -> tuple[str, int]:
    """HOST:PORT (an IPv6 host in brackets; no host: 127.0.0.1) as (host, port); ValueError when malformed."""
    endpoint = parse_endpoint(text.strip().removeprefix("http://").removesuffix(_PATH).rstrip("/"))
    return endpoint.host or "127.0.0.1", endpoint.port


def _request_line(head: bytes) -> tuple[str, str]:
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1.") or not parts[1].startswith("/"):
        raise ValueError(f"not an HTTP/1.x request line: {line[:100]!r}")
    return parts[0].upper(), parts[1]


def _reason(exc: Exception) -> str:
    if isinstance(exc, TimeoutError):
        return f"no complete request head within {_READ_TIMEOUT_S:.0f} s"
    if isinstance(exc, asyncio.LimitOverrunError):
        return f"request head over {_MAX_HEAD_BYTES} bytes"
    return str(exc)


def _peer_text(peer) -> str:
    return format_host_port(peer[0], peer[1]) if peer else "?"
