"""The network server of one node: listening sockets, accepting connections, and stopping cleanly. In a cluster
each node (a `Broker`) has a server of its own (see `run.ClusterRuntime`).

`bind()` opens the listening sockets (so a port in use is reported before anything else happens) and tells the
broker each listener's bound port; `start_accepting()` starts serving; `stop()` stops accepting, lets every
connection answer the requests it has already read (long polls are woken), then closes what is left.

For tests of clients, `go_down()` makes the broker vanish from the network as a crashed one would (listeners closed,
every connection cut, nothing answered) while the broker itself keeps its state, and `come_up()` listens again on
the same ports. The server's request hooks (`hooks.RequestHooks`: the toolkit's fault injector and request log) are
shared by all its connections, and so is its pool of request memory (`queued.max.request.bytes`, see
`memory_pool`).

Each connection is set up for the security protocol of the listener it arrived on (`broker.security.listener`:
TLS, SASL; see `connection`).

Accepting applies the connection limits (`max.connections`, `max.connections.per.ip`, see `connection_quotas`),
which `reconfigure_quotas()` changes at run time (the dynamic broker configs).
When the process runs out of file descriptors, the listener pauses and retries every second while the existing
connections go on being served; that is logged once when it starts and once when every waiting connection has
been accepted again.
"""
from __future__ import annotations

import asyncio
import dataclasses
import errno
import logging
import socket
from collections.abc import Mapping
from types import ModuleType

from ..handlers import default_registry
from .connection import Connection
from .connection_quotas import ConnectionQuotas
from .hooks import NO_HOOKS, RequestHooks
from .listeners import BoundListener, ListenError, bind_listener
from .memory_pool import RecycledBuffers, memory_pool

log = logging.getLogger(__name__)

_ACCEPT_BATCH = 64              # connections accepted per wake-up, so a burst does not starve other work
_ACCEPT_RETRY_S = 1.0           # pause after running out of file descriptors
_OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
_RECYCLED_BUFFERS_MAX = 64 * 1024 * 1024  # idle large-frame buffers kept for reuse, all connections together


class Server:
    def __init__(self, broker, handlers: Mapping[int, ModuleType] | None = None,
                 hooks: RequestHooks | None = None):
        self.broker = broker
        self.handlers = handlers if handlers is not None else default_registry()
        self.hooks = hooks if hooks is not None else NO_HOOKS
        self.listeners: list[BoundListener] = []
        self._connections: dict[Connection, asyncio.Task] = {}
        self._accepting = False
        self._listening: dict[socket.socket, BoundListener] = {}  # listening sockets with a reader on the loop
        self._starved: set[socket.socket] = set()  # listening sockets paused for lack of file descriptors
        self.pool = memory_pool(broker.config.queued_max_request_bytes)
        self.recycled = RecycledBuffers(_RECYCLED_BUFFERS_MAX)
        self.quotas: ConnectionQuotas | None = None  # made by bind(): it resolves the per-ip override hosts
        self.is_down = False

    def bind(self) -> list[BoundListener]:
        """Bind every configured listener (ListenError on failure, with nothing left open)."""
        try:
            self.quotas = ConnectionQuotas.from_config(self.broker.config)
        except ValueError as exc:
            raise ListenError(str(exc)) from None
        try:
            for endpoint in self.broker.config.listeners:
                bound = bind_listener(endpoint)
                self.listeners.append(bound)
                self.broker.register_listener(endpoint, bound.port)
        except BaseException:
            self.close_listeners()
            raise
        return self.listeners

    def start_accepting(self) -> None:
        self._accepting = True
        if not self.quotas.full:
            self._listen_all()

    def reconfigure_quotas(self, config) -> None:
        """Apply the connection limits of a new BrokerConfig (dynamic broker configs) from the next accept; raising
        `max.connections` above the connections held starts listening again, as a closing connection does.
        ValueError (limits unchanged) for an override host that does not resolve."""
        was_full = self.quotas.full
        self.quotas.reconfigure(config)
        if was_full and self._accepting and not self.quotas.full:
            self._listen_all()

    async def start(self) -> list[BoundListener]:
        """bind() and start_accepting() in one step."""
        self.bind()
        self.start_accepting()
        return self.listeners

    def close_listeners(self) -> None:
        self._accepting = False
        self._unlisten_all()
        self._starved.clear()
        for bound in self.listeners:
            bound.close()

    async def stop(self, grace_s: float = 3.0) -> None:
        """Stop accepting, answer what has been read (within `grace_s`), then close every connection."""
        self.close_listeners()
        for connection in self._connections:
            connection.stop_reading()
        self.broker.begin_shutdown()
        tasks = list(self._connections.values())
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=grace_s)
            for task in late:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    # --- down and up (fault injection) ----------------------------------------------------------------------------

    async def go_down(self) -> None:
        """Vanish from the network: close the listeners (connecting is refused) and cut every connection at once,
        answering nothing more. The broker keeps running; `come_up()` returns."""
        if self.is_down:
            return
        self.is_down = True
        self.close_listeners()
        tasks = list(self._connections.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        log.info("node %d down: listeners closed, %d connection(s) cut", self.broker.node_id, len(tasks))

    def come_up(self) -> None:
        """Listen again on the ports used before `go_down()` (ListenError when one is taken meanwhile)."""
        if not self.is_down:
            return
        previous, self.listeners = self.listeners, []
        try:
            for bound in previous:  # the same port, even when the configuration said 0
                self.listeners.append(bind_listener(dataclasses.replace(bound.endpoint, port=bound.port)))
        except BaseException:
            self.close_listeners()
            self.listeners = previous
            raise
        self.is_down = False
        self.start_accepting()
        log.info("node %d up again on %s", self.broker.node_id, ", ".join(bound.display() for bound in self.listeners))

    # --- accepting ------------------------------------------------------------------------------------------------

    def _listen_all(self) -> None:
        for bound in self.listeners:
            for sock in bound.sockets:
                self._listen(sock, bound)

    def _listen(self, sock: socket.socket, bound: BoundListener) -> None:
        if sock not in self._listening and sock.fileno() >= 0:
            asyncio.get_running_loop().add_reader(sock.fileno(), self._accept, sock, bound)
            self._listening[sock] = bound

    def _unlisten_all(self) -> None:
        for sock in list(self._listening):
            self._unlisten(sock)

    def _unlisten(self, sock: socket.socket) -> None:
        if self._listening.pop(sock, None) is not None and sock.fileno() >= 0:
            asyncio.get_running_loop().remove_reader(sock.fileno())

    def _accept(self, listening: socket.socket, bound: BoundListener) -> None:
        for _ in range(_ACCEPT_BATCH):
            if self.quotas.full:  # max.connections: the rest wait in the backlog until a connection closes
                self._unlisten_all()
                return
            try:
                sock, address = listening.accept()
            except (BlockingIOError, InterruptedError):
                if listening in self._starved:  # every waiting connection taken: recovered
                    self._starved.discard(listening)
                    log.info("accepting connections on %s again", bound.display())
                return
            except OSError as exc:
                if exc.errno in _OUT_OF_RESOURCES:
                    self._starve(listening, bound, exc)
                    return
                log.warning("accepting on %s failed: %s", bound.display(), exc)  # e.g. the client gave up already
                continue
            if not self.quotas.try_add(address[0]):
                sock.close()
                continue
            self._start_connection(sock, address[0], bound)

    def _starve(self, listening: socket.socket, bound: BoundListener, exc: OSError) -> None:
        """Out of file descriptors (or memory): stop watching this listener and try again in a while. The existing
        connections are served meanwhile; the first failure is logged, the retries only at DEBUG."""
        if listening in self._starved:
            log.debug("still cannot accept connections on %s: %s", bound.display(), exc)
        else:
            log.warning("cannot accept connections on %s: %s; retrying every %.0f s", bound.display(), exc,
                        _ACCEPT_RETRY_S)
            self._starved.add(listening)
        self._unlisten(listening)
        asyncio.get_running_loop().call_later(_ACCEPT_RETRY_S, self._retry_accepting, listening, bound)

    def _retry_accepting(self, listening: socket.socket, bound: BoundListener) -> None:
        if self._accepting and not self.quotas.full:  # when full, closing a connection starts listening again
            self._listen(listening, bound)

    def _connection_closed(self, connection: Connection, address: str) -> None:
        self._connections.pop(connection, None)
        was_full = self.quotas.full
        self.quotas.remove(address)
        if was_full and self._accepting and not self.quotas.full:
            self._listen_all()

    def _start_connection(self, sock: socket.socket, address: str, bound: BoundListener) -> None:
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # responses are whole frames: send now
            # A wildcard listener advertises the address the client reached, which the client can route to.
            host = sock.getsockname()[0] if bound.endpoint.is_wildcard else bound.endpoint.host
            connection = Connection(sock, self.broker, self.handlers, listener_host=host, listener_port=bound.port,
                                    hooks=self.hooks, pool=self.pool, recycled=self.recycled,
                                    security=self.broker.security.listener(bound.endpoint.name))
        except OSError as exc:
            log.debug("dropping a new connection on %s: %s", bound.display(), exc)
            sock.close()
            self.quotas.remove(address)
            return
        log.debug("connection from %s on %s", connection.peer, bound.display())
        task = asyncio.get_running_loop().create_task(connection.serve())
        self._connections[connection] = task
        task.add_done_callback(lambda _task: self._connection_closed(connection, address))
