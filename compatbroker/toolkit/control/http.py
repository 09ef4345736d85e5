"""The control endpoint: a small HTTP/1.1 + JSON server on the broker's event loop (standard library only).

Routes (bodies and answers are JSON; record keys, values and header values are base64 strings, null for null):

    GET    /status                                      up or down, bootstrap servers, node ids and cluster id
    GET    /topics                                      [{name, partitions, topic_id, internal}]
    POST   /topics          {name, partitions, configs, replication_factor}
                                                        create a topic (an existing one is returned unchanged)
    GET    /records?topic=T&partition=0&offset=&limit=  stored records of one partition
    GET    /offsets?group=G                             the group's committed offsets
    GET    /transactions?transactional_id=T             transactions by transactional id (all without the id)
    GET    /clients                                     what clients pushed with KIP-714 telemetry, newest first
    GET    /requests?since=N&api=Produce                the request log (entries numbered above N)
    DELETE /requests                                    empty the request log
    GET    /faults                                      the fault rules in force
    DELETE /faults                                      clear every fault rule
    POST   /faults/errors   {api, error, count, topic}  answer the next `count` requests of `api` with `error`
    POST   /faults/latency  {api, ms, count}            delay requests of `api` (null: every API) by `ms`
    POST   /faults/drops    {after, api, count}         close the connection of a request after `after` others
    POST   /down                                        close the listeners and cut every client connection
    POST   /up                                          listen again on the same ports
    GET    /nodes                                       [{node_id, rack, address, listeners, up, alive, isolated,
                                                          leader_of}]  (listeners: {name: host:port})
    POST   /nodes/stop      {node_id}                   stop a node: leaders fail over, its listeners close
    POST   /nodes/start     {node_id}                   start a stopped node again on the same ports
    POST   /nodes/isolate   {node_id, isolated}         cut a node off from replication (false: restore it)
    POST   /nodes/delay     {node_id, ms}               make a node copy from its leaders `ms` late
    POST   /nodes/restore                               undo every node fault (stopped, isolated, delayed, down)
    GET    /leader?topic=T&partition=0                  {leader, leader_epoch, replicas, isr} of a partition
    POST   /leader          {topic, partition, node_id} move the partition's leadership to a node of its ISR
    GET    /users                                       {name: [{mechanism, iterations}]} SCRAM credentials
    POST   /users           {name, password, mechanisms, iterations}
                                                        store SCRAM credentials (default: both mechanisms, 4096)
    DELETE /users           {name, mechanisms}          delete a user's SCRAM credentials (404: it had none)
    GET    /acls?resource_type=&name=&pattern_type=&principal=&host=&operation=&permission=
                                                        the ACL bindings the filter matches (left out: any)
    POST   /acls            {acls: [{resource_type, name, pattern_type, principal, host, operation, permission}]}
                                                        add ACL bindings (answers the new ones)
    DELETE /acls            {resource_type, name, ...}  remove the bindings the filter matches (answers them)

`ControlService` runs the endpoint beside a `ClusterRuntime` (it is one of the runtime's services, see
`compatbroker.server.hooks`).

A bad argument answers 400, an unknown partition or node (or a user without credentials) 404, `/up` (or
`/nodes/start`) with its port taken and `/leader` onto a node outside the ISR 409; the answer is then
`{"error": "..."}`. Each connection carries one request (the answer says `Connection: close`).

A request that changes state (any method but GET and HEAD) carrying an `Origin` header that is not this listener's
own origin (its scheme aside, the `Host` the request was sent to) is refused with 403 and one log line: a browser
says in `Origin` which site's page sent a request, and bodies are taken as JSON whatever their Content-Type, so a
page the operator visits could otherwise post a "simple" (text/plain) request to `/faults/errors` or `/down`.
Clients that are not browsers (`client.py`, curl, a test in another language) send no Origin and are unaffected.

The same listener serves the web console (`console/`): its pages at `/`, `/topics/...`, `/groups/...`, `/clients`
and `/static/...`, and at `/topics`, `/groups`, `/requests` and `/faults` when the request accepts `text/html`
(a browser; everyone else gets the JSON above), plus the console's fault forms (POST `/faults`,
application/x-www-form-urlencoded; the Origin rule above applies). A browser asking for a path no route has gets the
console's 404 page. Those answers are `text/html; charset=utf-8`.
"""
from __future__ import annotations

import asyncio
import base64
import json
import logging
from urllib.parse import parse_qsl, urlsplit

from ...config import format_host_port, parse_endpoint
from . import ControlError
from .console import Console, Page
from .operations import ControlOperations

log = logging.getLogger(__name__)

_MAX_HEAD_BYTES = 64 * 1024
_MAX_BODY_BYTES = 1024 * 1024
_READ_TIMEOUT_S = 30.0
_REASONS = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
            409: "Conflict", 413: "Payload Too Large", 500: "Internal Server Error"}

_ACL_FILTER = ("resource_type", "name", "pattern_type", "principal", "host", "operation", "permission")

# (method, path) -> (operation, where its arguments come from, the argument names it takes)
_ROUTES = {
    ("GET", "/status"): ("status", None, ()),
    ("GET", "/topics"): ("topics", None, ()),
    ("POST", "/topics"): ("create_topic", "body", ("name", "partitions", "configs", "replication_factor")),
    ("GET", "/records"): ("records", "query", ("topic", "partition", "offset", "limit")),
    ("GET", "/offsets"): ("committed_offsets", "query", ("group",)),
    ("GET", "/groups"): ("groups", None, ()),
    ("GET", "/group"): ("describe_group", "query", ("group",)),
    ("GET", "/transactions"): ("transactions", "query", ("transactional_id",)),
    ("GET", "/clients"): ("telemetry_clients", None, ()),
    ("GET", "/requests"): ("requests", "query", ("since", "api")),
    ("DELETE", "/requests"): ("clear_requests", None, ()),
    ("GET", "/faults"): ("faults", None, ()),
    ("DELETE", "/faults"): ("clear_faults", None, ()),
    ("POST", "/faults/errors"): ("inject_error", "body", ("api", "error", "count", "topic")),
    ("POST", "/faults/latency"): ("inject_latency", "body", ("api", "ms", "count")),
    ("POST", "/faults/drops"): ("drop_connections_after", "body", ("after", "api", "count")),
    ("POST", "/down"): ("down", None, ()),
    ("POST", "/up"): ("up", None, ()),
    ("GET", "/nodes"): ("nodes", None, ()),
    ("POST", "/nodes/stop"): ("stop_node", "body", ("node_id",)),
    ("POST", "/nodes/start"): ("start_node", "body", ("node_id",)),
    ("POST", "/nodes/isolate"): ("isolate_node", "body", ("node_id", "isolated")),
    ("POST", "/nodes/delay"): ("delay_follower", "body", ("node_id", "ms")),
    ("POST", "/nodes/restore"): ("restore_nodes", None, ()),
    ("GET", "/leader"): ("leader", "query", ("topic", "partition")),
    ("POST", "/leader"): ("move_leader", "body", ("topic", "partition", "node_id")),
    ("GET", "/users"): ("users", None, ()),
    ("POST", "/users"): ("add_user", "body", ("name", "password", "mechanisms", "iterations")),
    ("DELETE", "/users"): ("remove_user", "body", ("name", "mechanisms")),
    ("GET", "/acls"): ("acls", "query", _ACL_FILTER),
    ("POST", "/acls"): ("add_acls", "body", ("acls",)),
    ("DELETE", "/acls"): ("remove_acls", "body", _ACL_FILTER),
}
_PATHS = {path for _, path in _ROUTES}


class ControlService:
    """The control endpoint as a service of a runtime: listens on `listen` once the runtime has started and stops
    before it; `url` is where it answers."""

    def __init__(self, listen: str, injector):
        self.listen = listen
        self.injector = injector
        self.server: ControlServer | None = None

    @property
    def url(self) -> str | None:
        return self.server.url if self.server is not None else None

    async def start(self, runtime) -> str:
        from ...server.run import StartupError

        operations = ControlOperations(runtime, self.injector)
        console = Console(operations)
        try:
            self.server = await ControlServer.start(operations, self.listen, console=console)
        except (OSError, ValueError) as exc:
            raise StartupError(f"cannot listen for control requests on {self.listen}: {exc}") from None
        return f"compatbroker control on {self.url}"

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.close()
            self.server = None


class ControlServer:
    """The listening control endpoint; `url` is where it answers."""

    def __init__(self, operations: ControlOperations, console=None):
        self._operations = operations
        self._console = console  # console.Console, or None for the JSON routes only
        self._server: asyncio.AbstractServer | None = None
        self.host, self.port, self.url = "", 0, ""

    @classmethod
    async def start(cls, operations: ControlOperations, listen: str, *, console=None) -> ControlServer:
        """Listen on `listen` (HOST:PORT, port 0 for a free one); ValueError for a malformed address."""
        host, port = parse_address(listen)
        control = cls(operations, console)
        control._server = await asyncio.start_server(control._serve, host, port)
        control.host, control.port = control._server.sockets[0].getsockname()[:2]
        control.url = f"http://{format_host_port(control.host, control.port)}"
        return control

    async def close(self) -> None:
        if self._console is not None:
            await self._console.lag_history.stop()
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            status, answer = await asyncio.wait_for(self._answer(reader), _READ_TIMEOUT_S)
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        if isinstance(answer, Page):
            content_type, body, extra = answer.content_type, answer.body, answer.headers
        else:
            content_type, body, extra = "application/json", json.dumps(_jsonable(answer)).encode(), {}
        fields = "".join(f"{name}: {value}\r\n" for name, value in extra.items())
        head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: {content_type}\r\n{fields}"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        try:
            writer.write(head + body)
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def _answer(self, reader: asyncio.StreamReader) -> tuple[int, object]:
        try:
            method, target, headers = await _read_head(reader)
            length = _content_length(headers)
            if length > _MAX_BODY_BYTES:
                return 413, {"error": f"body over {_MAX_BODY_BYTES} bytes"}
            raw = await reader.readexactly(length) if length > 0 else b""
            parts = urlsplit(target)
            path = parts.path.rstrip("/") or "/"
            console = self._console is not None and self._console.handles(method, path, headers, json_paths=_PATHS)
            origin = _foreign_origin(method, headers)
            if origin is not None:
                return self._refuse(method, path, origin, console)
            if console:
                page = await self._console.answer(method, path, parts.query, raw)
                return page.status, page
            return 200, await self._dispatch(method, path, parts.query, raw)
        except ControlError as exc:
            return exc.status, {"error": exc.message}
        except (asyncio.IncompleteReadError, ConnectionError):
            raise  # the client left: nobody to answer
        except Exception as exc:  # noqa: BLE001 - a bug here must answer 500, not kill the endpoint
            log.exception("control request failed")
            return 500, {"error": f"{type(exc).__name__}: {exc}"}

    def _refuse(self, method: str, path: str, origin: str, console: bool) -> tuple[int, object]:
        """403 for a state-changing request from another site's page: the console's page for its forms, else JSON."""
        log.warning("refused %s %s from %s: not the control listener's own origin", method, path, origin)
        if console:
            return 403, self._console.refusal(origin)
        return 403, {"error": f"{method} {path} from {origin} is refused: the control endpoint takes changes only "
                              "from its own pages and from clients that send no Origin"}

    async def _dispatch(self, method: str, path: str, query: str, raw: bytes):
        route = _ROUTES.get((method, path))
        if route is None:
            if path in _PATHS:
                raise ControlError(405, f"{method} is not allowed on {path}")
            raise ControlError(404, f"no such control route: {method} {path}")
        name, source, allowed = route
        if source == "query":
            arguments = dict(parse_qsl(query))
        elif source == "body":
            arguments = _json_object(raw)
        else:
            arguments = {}
        unknown = sorted(set(arguments) - set(allowed))
        if unknown:
            raise ControlError(400, f"{path} takes {', '.join(allowed) or 'no arguments'}; unknown: "
                                    f"{', '.join(unknown)}")
        return await getattr(self._operations, name)(**arguments)


def parse_address(text: str) -> tuple[str, int]:
    """HOST:PORT (an IPv6 host in brackets; no host: 127.0.0.1) as (host, port)."""
    endpoint = parse_endpoint(text.strip().removeprefix("http://").rstrip("/"))
    return endpoint.host or "127.0.0.1", endpoint.port


async def _read_head(reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str]]:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError:
        raise ControlError(413, "request head too large") from None
    if len(head) > _MAX_HEAD_BYTES:
        raise ControlError(413, "request head too large")
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, _version = lines[0].split(" ")
    except ValueError:
        raise ControlError(400, f"malformed request line {lines[0]!r}") from None
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return method.upper(), target, headers


def _content_length(headers: dict[str, str]) -> int:
    text = headers.get("content-length", "").strip() or "0"
    if not (text.isascii() and text.isdigit()):
        raise ControlError(400, f"malformed Content-Length {text!r}")
    return int(text)


def _foreign_origin(method: str, headers: dict[str, str]) -> str | None:
    """The `Origin` of a state-changing request sent from another site's page (None when it may go ahead): the
    origin's host and port must be the `Host` the request went to (a reverse proxy may have changed the scheme).
    Browsers send `Origin: null` from sandboxed or privacy-sensitive contexts: refused too."""
    origin = headers.get("origin")
    if method in ("GET", "HEAD") or origin is None:
        return None
    try:
        netloc = urlsplit(origin).netloc
    except ValueError:  # e.g. an unclosed IPv6 bracket: not our origin either
        return origin
    return None if netloc and netloc.lower() == headers.get("host", "").lower() else origin


def _json_object(raw: bytes) -> dict:
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ControlError(400, f"body is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ControlError(400, "body must be a JSON object")
    return value


def _jsonable(value):
    """Bytes (record keys, values, header values) as base64 strings; everything else as it is."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    return value
