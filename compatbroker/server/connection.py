"""One client connection: request frames in, handlers run, responses out in the order the requests came.

Two coroutines share the connection:

- the reader takes frames off the socket (4-byte size, then the request), decodes each and starts its handler at
  once, so that pipelined requests are decoded and started while earlier ones are still running (a Fetch long
  poll); it queues one entry per request and waits when `queued.max.requests` are outstanding;
- the writer takes the entries in order, awaits each and writes its response, so responses leave in request order
  whatever order the handlers finish in. A request that gets no response (Produce with acks=0) just passes.

The hot path skips both queue and Task: the reader runs a handler's first step itself, and most requests (a Produce
appending, a Fetch with data, Metadata) finish there; only a handler that waits (a long poll, an fsync, the ISR, a
coordinator) goes on in a Task of its own. A response ready with nothing queued or being written before it is
written by the reader at once with non-blocking calls (sends and sendfiles back to back, without returning to the
event loop between them); whatever the socket does not take then goes to the writer, ahead of later responses.

A frame larger than `socket.request.max.bytes` closes the connection before its buffer is allocated. A frame larger
than the receive buffer gets a buffer of its own once its first bytes arrive, memory the kernel provides page by
page as they come (an anonymous map), so a client declaring 100 MiB and sending little or nothing holds little more
than its receive buffer. With `queued.max.request.bytes` set, each frame takes its size from the server's memory
pool once its first bytes arrive (waiting, without reading, while the pool is used up) and gives it back when its
handler has finished.

A request for an API or version the handler registry does not serve closes the connection with a log line, except
ApiVersions of a newer version than ours, which gets Kafka's v0-format UNSUPPORTED_VERSION answer so that the client
retries with a version we know. A malformed request closes the connection with one WARNING line, as does a handler
raising `CloseConnection` (Kafka's answer to a failed acks=0 Produce); any other handler exception is a bug, logged at
ERROR with its traceback. The responses queued before the close still go out. When the client closes its end, the
requests already read still run to completion, as Kafka runs them (their answers go nowhere); handlers that would
wait open-endedly, a Fetch long poll, stop waiting through `RequestContext.client_gone`, so a departed client's
socket is released at once.

Tests of clients hook in at dispatch (`hooks.RequestHooks`, which the toolkit's fault injector implements): while
the server's hooks are active they hear of each request, with the id of the node serving it, and may delay it,
answer it with an error in Kafka's shape for that API, or close the connection instead of answering. When they are
not active this costs one attribute check per request. Once a request is answered they hear of that too
(`on_response`: latency and the response's first error code).

Every connection counts into its node's `broker.metrics` (compatbroker.metrics.counting): connections opened and
closed and bytes read and written per listener; per API key and version the requests answered (or served without
an answer), a latency histogram (from the request read to its response encoded) and the error codes of the
responses. That is a few integer additions, a dict lookup and a read of the response's error code fields per request.

Responses are written as `encode_response_chunks` gives them: bytes with `sock_sendall`, file regions (record
bytes in segment files) with `os.sendfile` straight from the file to the socket, so record bytes never pass
through Python. When a response holds file regions, TCP_CORK holds back partial packets until it is complete.

Security (the listener's `ListenerSecurity`, compatbroker.security): each connection has a `Session` (principal,
client host, listener, protocol) handed to every request's context. On SSL and SASL_SSL listeners the socket is read
and written through a `TlsChannel` (OpenSSL on the non-blocking socket; record bytes are read from the page cache
into one reused buffer and encrypted, as Python 3.11 has no kernel TLS), whose handshake runs before the first
request, under the idle limit; on SSL the principal is the client certificate's subject mapped by
`ssl.principal.mapping.rules`. On SASL listeners the connection's `SaslAuthenticator` is the gate at dispatch:
before authentication only the requests of the exchange pass (each handled before the next frame is read, since it
decides what the next frame is: after SaslHandshake v0 a raw token), frames are limited by
`sasl.server.max.receive.size`, and an expired session (KIP-368) closes on its next request. A handler raising
`CloseAfterResponse` (a failed authentication) has its response sent, then the connection closes. Plaintext bytes
reaching a TLS listener, and a TLS ClientHello reaching a PLAINTEXT one, close the connection with one INFO line
saying so. The PLAINTEXT path pays one attribute check per request for all this.
"""
from __future__ import annotations

import asyncio
import logging
import mmap
import os
import socket
import struct

from ..config import format_host_port
from ..handlers import CloseAfterResponse, CloseConnection, RequestContext
from ..handlers.api_versions import unsupported_version_response
from ..protocol import (DecodeError, FileRegion, UnsupportedVersionError, api_name, decode_request,
                        encode_response_chunks)
from ..protocol.error_codes import ErrorCode
from ..protocol.error_responses import NoErrorResponse, error_response
from ..security.authenticator import AuthenticationFailed, SaslAuthenticator
from ..security.principal_mapping import mapper_for, principal_from_certificate
from ..security.session import Session, host_address
from ..security.tls_channel import NotTls, TlsChannel, TlsHandshakeFailed
from .hooks import NO_HOOKS, Fault, RequestHooks
from .memory_pool import MemoryPool, RecycledBuffers

log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18
_RECEIVE_BUFFER_SIZE = 65536
# A frame bigger than the receive buffer is read into a buffer of its own. Buffers of up to _SPARE_BUFFER_MAX bytes
# are kept for the next large frames once their handlers are done (up to _SPARE_BUFFERS of them: a producer
# pipelines several requests, so the next frame arrives before the last handler ends). That spares mapping fresh
# memory and faulting its pages in per Produce request (when it was zero-filled, a fifth of the broker's time under a
# 1 KiB-message produce load), while an idle connection holds a bounded amount.
_SPARE_BUFFER_MAX = 4 * 1024 * 1024
_SPARE_BUFFERS = 4
_SIZE = struct.Struct(">i")
_CLIENT_ID_LENGTH = struct.Struct(">h")
_CORK = getattr(socket, "TCP_CORK", None)


class _Close:
    """A queue entry (or handler result) meaning: write what came before, then close the connection."""

    def __repr__(self):
        return "CLOSE"


CLOSE = _Close()
_END = object()  # the reader has stopped: write what came before, then close


class _SendThenClose:
    """A handler result: write these response chunks, then close the connection (`CloseAfterResponse`)."""
    __slots__ = ("chunks",)

    def __init__(self, chunks: list):
        self.chunks = chunks


class _Ready:
    """A queue entry whose answer is ready (response chunks, None or CLOSE): a handler that finished in its first
    step, or an answer the connection makes itself (a raw SASL token's, an ApiVersions too new for us)."""
    __slots__ = ("result",)

    def __init__(self, result):
        self.result = result


class _Rest:
    """A queue entry: the part of a response that a direct write left unsent (already counted, its slot freed),
    and whether the socket was left corked for it."""
    __slots__ = ("chunks", "corked")

    def __init__(self, chunks: list, corked: bool):
        self.chunks = chunks
        self.corked = corked


class _Resume:
    """Awaiting this drives a coroutine that has already run to its first suspension (where it yielded
    `yielded`) on to its end: what a Task does from its second step on, so a Task can take over a handler that
    started eagerly."""
    __slots__ = ("coro", "yielded")

    def __init__(self, coro, yielded):
        self.coro = coro
        self.yielded = yielded

    def __await__(self):
        coro, yielded = self.coro, self.yielded
        while True:
            try:
                sent = yield yielded
            except BaseException as exc:  # noqa: BLE001 - a cancellation (or any throw) goes to the coroutine
                try:
                    yielded = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    yielded = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


async def _resumed(coro, yielded):
    return await _Resume(coro, yielded)


class FrameTooLarge(Exception):
    pass


class Connection:
    def __init__(self, sock: socket.socket, broker, handlers, *, listener_host: str, listener_port: int,
                 hooks: RequestHooks = NO_HOOKS, pool: MemoryPool | None = None,
                 recycled: RecycledBuffers | None = None, security=None):
        """`security`: the listener's ListenerSecurity (compatbroker.security.settings); None is PLAINTEXT."""
        self._loop = asyncio.get_running_loop()
        self._hooks = hooks
        self._sock = sock
        self._broker = broker
        self._handlers = handlers
        self._listener_host = listener_host
        self._listener_port = listener_port
        config = broker.config
        self._max_frame = config.socket_request_max_bytes
        self._idle_s = config.connections_max_idle_ms / 1000 if config.connections_max_idle_ms >= 0 else None
        self.peer = _peer_name(sock)
        # Plain sockets are read with sock_recv_into and written with sock_sendall / os.sendfile; TLS goes through
        # a TlsChannel. Either way the rest of the connection calls these two.
        self._recv_into = self._recv_plain
        self._read_waiter: asyncio.Future | None = None  # resolved when the socket turns readable
        self._watching = False  # the socket is registered with the event loop for reading
        self._send = self._send_plain
        self._tls = None
        self._authenticator = None
        self._listener = security
        self.session = Session(client_host=_peer_host(sock))
        self._metrics = broker.metrics
        self._listener_stats = self._metrics.listener(security.listener_name if security is not None else "PLAINTEXT")
        if security is not None:
            self._secure(security)
        self._entries: asyncio.Queue = asyncio.Queue()
        self._client_gone = self._loop.create_future()  # resolved at the end of the client's stream
        self._slots = asyncio.Semaphore(config.queued_max_requests)
        self._outstanding = 0  # requests read whose response is not written yet
        self._writing = False  # the writer is between taking an entry and finishing its write
        self._handler_tasks: set[asyncio.Task] = set()
        self._reader: asyncio.Task | None = None
        self._idle_timer: asyncio.TimerHandle | None = None
        self._buffer = bytearray(_RECEIVE_BUFFER_SIZE)
        self._view = memoryview(self._buffer)
        self._start = self._end = 0  # unread bytes are self._buffer[self._start:self._end]
        self._spares: list[mmap.mmap] = []  # large-frame buffers no handler is using
        self._pool = pool  # queued.max.request.bytes; None when unbounded
        self._recycled = recycled if recycled is not None else RecycledBuffers(0)
        self._reserved = 0  # taken from the pool for the frame being read
        self.last_active = self._loop.time()

    # --- life cycle -----------------------------------------------------------------------------------------------

    async def serve(self) -> None:
        """Run the connection until the client leaves, a request closes it, or the server stops it."""
        self._reader = self._loop.create_task(self._read_requests())
        self._listener_stats.connections_opened += 1
        if self._idle_s is not None:
            self._idle_timer = self._loop.call_later(self._idle_s, self._check_idle)
        try:
            await self._write_responses()
        except OSError as exc:
            log.debug("connection from %s failed: %s", self.peer, exc)
        except Exception:  # noqa: BLE001 - a bug here must cost one connection, not the broker
            log.exception("closing connection from %s after an unexpected error", self.peer)
        finally:
            if self._idle_timer is not None:
                self._idle_timer.cancel()
            self._reader.cancel()
            for task in self._handler_tasks:
                task.cancel()
            try:
                await asyncio.gather(self._reader, *self._handler_tasks, return_exceptions=True)
            finally:
                if self._tls is not None:
                    self._tls.close_notify()
                if self._watching:  # a closed descriptor must leave the event loop's selector first
                    self._loop.remove_reader(self._sock.fileno())
                    self._watching = False
                self._sock.close()
                self._listener_stats.connections_closed += 1

    def stop_reading(self) -> None:
        """Take no new request; the ones already read are answered, then the connection closes."""
        if self._reader is not None:
            self._reader.cancel()

    def _check_idle(self) -> None:
        """Close the connection once it has been idle for connections.max.idle.ms; a request in flight keeps it
        busy. Runs at most once per idle period."""
        self._idle_timer = None
        idle_for = self._loop.time() - self.last_active
        if self._outstanding == 0 and idle_for >= self._idle_s:
            log.info("closing connection from %s: idle for %.0f ms", self.peer, idle_for * 1000)
            self.stop_reading()
            return
        remaining = self._idle_s if self._outstanding else self._idle_s - idle_for
        self._idle_timer = self._loop.call_later(remaining, self._check_idle)

    # --- security: TLS and SASL -----------------------------------------------------------------------------------

    def _secure(self, listener) -> None:
        """Set the connection up for its listener's security protocol (see the module docstring)."""
        security = self._broker.security
        self.session.listener_name = listener.listener_name
        self.session.security_protocol = listener.security_protocol
        if listener.uses_tls:
            self._tls = TlsChannel(self._sock, security.ssl_context(listener.listener_name))
            self._recv_into = self._tls.recv_into
            self._send = self._tls.send
        if listener.uses_sasl:
            name = listener.listener_name
            self._authenticator = SaslAuthenticator(
                listener, self.session, lambda mechanism: security.sasl_server(name, mechanism, now_ms=None))

    async def _tls_handshake(self) -> bool:
        """The TLS handshake before the first request, and on an SSL listener the principal of the client's
        certificate; False (after one log line) when the connection must close."""
        listener = self._listener
        try:
            await self._tls.handshake()
        except NotTls:
            log.info("closing connection from %s: it sent plaintext, not a TLS handshake, to listener %s (%s); is "
                     "the client configured for security.protocol=%s?", self.peer, listener.listener_name,
                     listener.security_protocol, listener.security_protocol)
            return False
        except TlsHandshakeFailed as exc:
            log.info("Failed authentication with %s (SSL handshake failed: %s)", self.peer, exc)
            await self._delay_after_failed_authentication()
            return False
        except OSError as exc:
            log.debug("connection from %s ended during the TLS handshake: %s", self.peer, exc)
            return False
        if listener.security_protocol == "SSL":
            try:
                self.session.principal = principal_from_certificate(
                    self._tls.peer_certificate(), mapper_for(listener.ssl.principal_mapping_rules))
            except ValueError as exc:
                log.info("Failed authentication with %s (%s)", self.peer, exc)
                return False
        return True

    async def _refuse(self, header, body, reason: str):
        """The request's own error response with ILLEGAL_SASL_STATE, then the close (a request in the middle of a
        SASL exchange, as Kafka answers it), after the failed-authentication delay."""
        await self._delay_after_failed_authentication()
        api_key, version = header.request_api_key, header.request_api_version
        try:
            response = error_response(api_key, version, body, ErrorCode.ILLEGAL_SASL_STATE, reason)
        except NoErrorResponse:
            return CLOSE
        if response is None:
            return CLOSE
        return _SendThenClose(encode_response_chunks(api_key, version, header.correlation_id, response))

    async def _delay_after_failed_authentication(self) -> None:
        """Kafka's connection.failed.authentication.delay.ms: a refused client gets its answer (and the close) only
        after a while, so that a client retrying a wrong password at once cannot make the broker spin."""
        delay_ms = self._broker.security.settings.connection_failed_authentication_delay_ms
        if delay_ms > 0:
            await asyncio.sleep(delay_ms / 1000)

    def _raw_token(self, frame):
        """A raw SASL token (after SaslHandshake v0): the queue entry of its size-prefixed answer, or CLOSE."""
        try:
            challenge = self._authenticator.raw_token(bytes(frame))
        except AuthenticationFailed as exc:
            log.info("Failed authentication with %s (%s)", self.peer, exc)
            return CLOSE
        return _Ready([_SIZE.pack(len(challenge)) + challenge])

    def _log_frame_too_large(self, size: int) -> None:
        if self._tls is None and _looks_like_tls(self._view[self._start:self._end]):
            protocol = self.session.security_protocol
            log.info("closing connection from %s: it sent a TLS handshake to a %s listener (%s); is the client "
                     "configured for security.protocol=%s?", self.peer, protocol, self.session.listener_name,
                     protocol)
        elif self._authenticator is not None and not self._authenticator.complete:
            log.info("Failed authentication with %s (Failing SASL authentication due to invalid receive size: %d "
                     "bytes, sasl.server.max.receive.size=%d)", self.peer, size,
                     self._authenticator.max_receive_size)
        else:
            log.warning("closing connection from %s: request of %d bytes is over socket.request.max.bytes=%d",
                        self.peer, size, self._max_frame)

    # --- reading --------------------------------------------------------------------------------------------------

    async def _read_requests(self) -> None:
        try:
            if self._tls is not None and not await self._tls_handshake():
                return
            authenticator = self._authenticator
            while True:
                await self._slots.acquire()
                frame = await self._read_frame()
                if frame is None:
                    _resolve(self._client_gone)
                    return
                self.last_active = self._loop.time()
                self._listener_stats.bytes_in += len(frame) + 4
                if authenticator is not None and authenticator.raw_tokens:
                    entry = self._raw_token(frame)
                else:
                    entry = self._dispatch(frame)
                self._outstanding += 1
                if type(entry) is _Ready and self._can_write_now(entry.result):
                    self._write_now(entry.result)
                else:
                    self._entries.put_nowait(entry)
                self._release_after(entry, frame)
                if entry is CLOSE:
                    return
                if authenticator is not None and not authenticator.complete and entry is not CLOSE:
                    # While authenticating, each request changes what the next frame may be (Kafka reads nothing
                    # more until the exchange has moved on): let its handler finish before reading on.
                    if isinstance(entry, asyncio.Future):
                        await asyncio.wait((entry,))
                    if authenticator.failed:  # its answer goes out, then the connection closes
                        return
                elif isinstance(frame, memoryview) and not self._spares:
                    # Let the handlers started run (a Produce appends in its first step and gives its buffer
                    # back) before reading on: with the socket full of pipelined requests the reader would
                    # otherwise never wait, and read each large frame into fresh memory.
                    await asyncio.sleep(0)
        except FrameTooLarge as exc:
            self._log_frame_too_large(exc.args[0])
        except OSError as exc:
            log.debug("connection from %s: %s", self.peer, exc)
        finally:
            if self._reserved:  # a frame cut off in the middle
                self._pool.release(self._reserved)
                self._reserved = 0
            self._entries.put_nowait(_END)

    async def _read_frame(self):
        """The next request frame without its size prefix, or None at the end of the stream."""
        if not await self._fill(4):
            return None
        (size,) = _SIZE.unpack_from(self._buffer, self._start)
        limit = self._max_frame
        if self._authenticator is not None and not self._authenticator.complete:
            limit = self._authenticator.max_receive_size  # sasl.server.max.receive.size while authenticating
        if size < 0 or size > limit:
            raise FrameTooLarge(size)
        self._start += 4
        if self._pool is not None:
            # A size alone takes nothing from the pool: only once the request's bytes start to arrive.
            if not await self._fill(min(size, 1)):
                return None
            await self._pool.reserve(size)
            self._reserved = size
        if size <= len(self._buffer):
            if not await self._fill(size):
                return None
            frame = bytes(self._view[self._start:self._start + size])
            self._start += size
            return frame
        return await self._read_large_frame(size)

    async def _read_large_frame(self, size: int) -> memoryview:
        """A frame bigger than the receive buffer, received straight into a buffer of its own (a spare one when one
        is big enough), with no copy after. A fresh buffer is an anonymous memory map, whose pages the kernel
        provides as bytes are written to them: a client declaring a large frame and sending it slowly, or not at
        all, holds no more memory than it has sent (nor does anyone zero-fill the rest); a buffer recycled from an
        earlier large frame is taken first (see `RecycledBuffers`). The frame is lent to its handler until that
        finishes (see `_release_after`)."""
        buffer = self._take_spare(size)
        if buffer is None:
            if not await self._fill(1):  # nothing is allocated for a size alone
                raise ConnectionError("the client closed the connection in the middle of a request")
            buffer = self._recycled.take(size)
        view = memoryview(buffer)[:size]
        received = self._end - self._start
        view[:received] = self._view[self._start:self._end]
        self._start = self._end = 0
        while received < size:
            count = await self._recv_into(view[received:])
            if count == 0:
                raise ConnectionError("the client closed the connection in the middle of a request")
            received += count
        return view

    def _release_after(self, entry, frame) -> None:
        """Once nothing reads the frame any more, give its pool reservation back, and keep a large frame's buffer
        as a spare (or give it to the server's recycled buffers): when its handler has finished (Produce has
        written the records by then; other fields are decoded into copies), or at once when no handler started."""
        reserved, self._reserved = self._reserved, 0
        buffer = frame.obj if isinstance(frame, memoryview) else None
        if not reserved and buffer is None:
            return
        if isinstance(entry, asyncio.Task):
            entry.add_done_callback(lambda _task: self._handled(reserved, buffer))
        else:
            self._handled(reserved, buffer)

    def _handled(self, reserved: int, buffer: mmap.mmap | None) -> None:
        if reserved:
            self._pool.release(reserved)
        if buffer is None:
            return
        if len(buffer) <= _SPARE_BUFFER_MAX:
            self._keep_spare(buffer)
        else:
            self._recycled.give(buffer)

    def _take_spare(self, size: int) -> mmap.mmap | None:
        for index, spare in enumerate(self._spares):
            if len(spare) >= size:
                return self._spares.pop(index)
        return None

    def _keep_spare(self, buffer: mmap.mmap) -> None:
        spares = self._spares
        if len(spares) < _SPARE_BUFFERS:
            spares.append(buffer)
            return
        smallest = min(range(len(spares)), key=lambda index: len(spares[index]))
        if len(buffer) > len(spares[smallest]):
            spares[smallest] = buffer

    async def _fill(self, count: int) -> bool:
        """Have at least `count` unread bytes in the buffer; False at the end of the stream."""
        if self._start == self._end:
            self._start = self._end = 0
        elif len(self._buffer) - self._start < count:  # no room behind: move the unread bytes to the front
            unread = self._end - self._start
            self._view[:unread] = self._view[self._start:self._end]
            self._start, self._end = 0, unread
        while self._end - self._start < count:
            received = await self._recv_into(self._view[self._end:])
            if received == 0:
                if self._end > self._start:
                    log.debug("connection from %s closed in the middle of a request", self.peer)
                return False
            self._end += received
        return True

    # --- dispatch -------------------------------------------------------------------------------------------------

    def _dispatch(self, frame):
        """Decode a frame and start its handler: returns the queue entry (a future of the response chunks)."""
        try:
            header, body = decode_request(frame)
        except UnsupportedVersionError as exc:
            return self._unsupported(exc.header, frame)
        except DecodeError as exc:
            log.warning("closing connection from %s: malformed request from client %r: %s", self.peer,
                        _client_id_of(frame), exc)
            return CLOSE
        module = self._handlers.get(header.request_api_key)
        if module is None or not module.MIN_VERSION <= header.request_api_version <= module.MAX_VERSION:
            return self._unsupported(header, frame)
        if self._authenticator is not None:
            refusal = self._authenticator.admit(header.request_api_key, api_name(header.request_api_key))
            if refusal is not None:
                log.info("closing connection from %s: %s", self.peer, refusal)
                if self._authenticator.answer_refused_request:
                    return self._spawn(self._refuse(header, body, refusal))
                return CLOSE
        ctx = RequestContext(self._broker, header, peer=self.peer, listener_host=self._listener_host,
                             listener_port=self._listener_port, handlers=self._handlers,
                             client_gone=self._client_gone, session=self.session,
                             authenticator=self._authenticator)
        if self._hooks.active:
            fault = self._hooks.on_request(header, body, self.peer, node_id=self._broker.node_id,
                                          topic_by_id=self._broker.topic_by_id)
            if fault is not None:
                return self._start_faulty(fault, module, ctx, body)
        return self._begin(self._run_handler(module, ctx, body, self.last_active))

    def _unsupported(self, header, frame):
        if self._hooks.active:
            self._hooks.on_unserved(header, self.peer, node_id=self._broker.node_id)
        api_key, version = header.request_api_key, header.request_api_version
        api_versions = self._handlers.get(API_VERSIONS_KEY)
        if api_key == API_VERSIONS_KEY and api_versions is not None and version > api_versions.MAX_VERSION:
            # Kafka's answer, whatever the version asked: a v0 body with the range of ApiVersions we serve.
            body = unsupported_version_response(api_versions.MIN_VERSION, api_versions.MAX_VERSION)
            return _Ready(encode_response_chunks(API_VERSIONS_KEY, 0, header.correlation_id, body))
        log.warning("closing connection from %s: client %r sent %s version %d, which this broker does not serve",
                    self.peer, _client_id_of(frame), api_name(api_key), version)
        return CLOSE

    async def _run_handler(self, module, ctx: RequestContext, body, started: float):
        """The encoded response chunks, None for no response, or CLOSE when the handler failed. `started`: when the
        request was read (loop time), for its latency."""
        try:
            response = await module.handle(ctx, body)
            if response is None:
                self._answered(ctx.header, None, started)
                return None
            chunks = encode_response_chunks(module.API_KEY, ctx.api_version, ctx.header.correlation_id, response)
            self._answered(ctx.header, response, started)
            return chunks
        except CloseConnection as exc:  # Kafka's answer to this request: expected, so no traceback
            log.warning("closing connection from %s: %s", self.peer, exc)
            return CLOSE
        except CloseAfterResponse as exc:  # a failed SASL exchange: the client learns why, then the close
            log.info("Failed authentication with %s (%s)", self.peer, exc)
            await self._delay_after_failed_authentication()
            return _SendThenClose(encode_response_chunks(module.API_KEY, ctx.api_version, ctx.header.correlation_id,
                                                         exc.response))
        except Exception:  # noqa: BLE001 - a bug: one bad request must not take the broker down
            log.exception("closing connection from %s: %s version %d from client %r failed", self.peer,
                          api_name(module.API_KEY), ctx.api_version, ctx.client_id)
            return CLOSE

    def _start_faulty(self, fault: Fault, module, ctx: RequestContext, body):
        """The queue entry of a request the hooks chose a fault for."""
        if fault.drop:
            log.info("closing connection from %s instead of answering %s (fault injection)", self.peer,
                     api_name(module.API_KEY))
            return CLOSE
        return self._spawn(self._run_faulty(fault, module, ctx, body, self.last_active))

    def _begin(self, handling):
        """Run a request's handling up to its first suspension now, in the reader: most requests (a Produce
        appending, a Fetch with data) finish there and need no Task, no scheduling and no wake-up of the writer
        through a future. One that waits (a long poll, an fsync, the ISR) goes on in a Task of its own."""
        try:
            yielded = handling.send(None)
        except StopIteration as done:
            return _Ready(done.value)
        return self._spawn(_resumed(handling, yielded))

    def _spawn(self, handling) -> asyncio.Task:
        """Run a request's handling as a task of this connection (cancelled if the connection ends first)."""
        task = self._loop.create_task(handling)
        self._handler_tasks.add(task)
        task.add_done_callback(self._handler_tasks.discard)
        return task

    async def _run_faulty(self, fault: Fault, module, ctx: RequestContext, body, started: float):
        """Wait the fault's delay, then serve the request, or answer it with the fault's error as Kafka would."""
        if fault.delay_s:
            await asyncio.sleep(fault.delay_s)
        if fault.error is None:
            return await self._run_handler(module, ctx, body, started)
        response = fault.response(module.API_KEY, ctx.api_version, body)
        if response is None:  # Produce acks=0: Kafka closes the connection so that the producer notices
            return CLOSE
        chunks = encode_response_chunks(module.API_KEY, ctx.api_version, ctx.header.correlation_id, response)
        self._answered(ctx.header, response, started)
        return chunks

    def _answered(self, header, response, started: float) -> None:
        """Count a request answered (`response` None: served without an answer), and tell the hooks."""
        latency_s = self._loop.time() - started
        stats = self._metrics.requests.get(header.request_api_key << 16 | header.request_api_version) \
            or self._metrics.request_stats(header.request_api_key, header.request_api_version)
        error_code = stats.record(latency_s, response)
        if self._hooks.active:
            self._hooks.on_response(header, self.peer, node_id=self._broker.node_id, latency_s=latency_s,
                                    error_code=error_code)

    # --- writing --------------------------------------------------------------------------------------------------

    async def _write_responses(self) -> None:
        while True:
            entry = await self._entries.get()
            if entry is _END or entry is CLOSE:
                return
            self._writing = True
            if type(entry) is _Rest:  # the unsent part of a direct write: counted and its slot freed already
                await self._send(entry.chunks)
                if entry.corked:
                    self._sock.setsockopt(socket.IPPROTO_TCP, _CORK, 0)  # send the last partial packet now
                self._writing = False
                continue
            try:
                chunks = entry.result if type(entry) is _Ready else await entry
            finally:
                self._slots.release()
            if chunks is CLOSE:
                return
            if isinstance(chunks, _SendThenClose):
                await self._send(chunks.chunks)
                return
            if chunks is not None:
                await self._send(chunks)
                self._listener_stats.bytes_out += _SIZE.unpack_from(chunks[0])[0] + 4  # its size prefix
            self._outstanding -= 1
            self.last_active = self._loop.time()
            self._writing = False

    # --- the direct write: a ready response with nothing before it goes out from the reader ------------------------

    def _can_write_now(self, chunks) -> bool:
        """Whether the reader may write this response itself: a plain socket, nothing queued or being written
        before it, and a plain response (not a close)."""
        return (self._tls is None and not self._writing and self._entries.empty()
                and (chunks is None or type(chunks) is list))

    def _write_now(self, chunks: list | None) -> None:
        """Write a ready response without waiting: what the socket does not take now goes to the writer, which
        sends it before anything queued after it. The bookkeeping is the writer's for an entry."""
        self._slots.release()
        self._outstanding -= 1
        self.last_active = self._loop.time()
        if chunks is None:
            return
        self._listener_stats.bytes_out += _SIZE.unpack_from(chunks[0])[0] + 4  # its size prefix
        cork = _needs_cork(chunks)
        rest = self._send_now(chunks, cork)
        if rest:
            self._entries.put_nowait(_Rest(rest, cork))

    def _send_now(self, chunks: list, cork: bool) -> list:
        """Send chunks with non-blocking calls until the socket is full; returns what is left (empty: all sent).
        With `cork`, TCP_CORK holds partial packets back until all is sent (left on when something is left)."""
        sock = self._sock
        if cork:
            sock.setsockopt(socket.IPPROTO_TCP, _CORK, 1)
        for index, chunk in enumerate(chunks):
            if isinstance(chunk, FileRegion):
                rest = _sendfile_now(sock.fileno(), chunk)
            else:
                try:
                    sent = sock.send(chunk)
                except (BlockingIOError, InterruptedError):
                    sent = 0
                rest = memoryview(chunk)[sent:] if sent < len(chunk) else None
            if rest is not None:  # the socket is full: the writer sends the rest (and uncorks at its end)
                return [rest, *chunks[index + 1:]]
        if cork:
            sock.setsockopt(socket.IPPROTO_TCP, _CORK, 0)
        return []

    async def _recv_plain(self, buffer) -> int:
        """recv_into for a plain socket. Unlike the loop's sock_recv_into it leaves the socket registered for
        reading between waits, so that a client taking turns with the broker costs no epoll registration per
        request; a readiness no one waits for unregisters it (level-triggered, it would fire on every turn)."""
        while True:
            try:
                return self._sock.recv_into(buffer)
            except (BlockingIOError, InterruptedError):
                pass
            waiter = self._read_waiter = self._loop.create_future()
            if not self._watching:
                self._loop.add_reader(self._sock.fileno(), self._on_readable)
                self._watching = True
            try:
                await waiter
            finally:
                self._read_waiter = None

    def _on_readable(self) -> None:
        waiter = self._read_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
            self._read_waiter = None
        elif self._watching:
            self._loop.remove_reader(self._sock.fileno())
            self._watching = False

    async def _send_plain(self, chunks: list) -> None:
        cork = _needs_cork(chunks)
        if cork:
            self._sock.setsockopt(socket.IPPROTO_TCP, _CORK, 1)
        for chunk in chunks:
            if isinstance(chunk, FileRegion):
                await self._sendfile(chunk)
            else:
                await self._loop.sock_sendall(self._sock, chunk)
        if cork:
            self._sock.setsockopt(socket.IPPROTO_TCP, _CORK, 0)  # send the last partial packet now

    async def _sendfile(self, region: FileRegion) -> None:
        """Copy a file region to the socket in the kernel (os.sendfile), waiting whenever the socket is full."""
        while (region := _sendfile_now(self._sock.fileno(), region)) is not None:
            await self._writable()

    async def _writable(self) -> None:
        waiter = self._loop.create_future()
        fd = self._sock.fileno()
        self._loop.add_writer(fd, _resolve, waiter)
        try:
            await waiter
        finally:
            self._loop.remove_writer(fd)


def _needs_cork(chunks: list) -> bool:
    """TCP_CORK for a response that mixes bytes and file regions: its partial packets wait until it is all sent."""
    return _CORK is not None and len(chunks) > 1 and any(isinstance(chunk, FileRegion) for chunk in chunks)


def _sendfile_now(out_fd: int, region: FileRegion) -> FileRegion | None:
    """sendfile a region as far as the socket takes it now; the region left (None: all of it went)."""
    position, remaining = region.position, region.length
    in_fd = region.file.fileno()
    while remaining > 0:
        try:
            sent = os.sendfile(out_fd, in_fd, position, remaining)
        except (BlockingIOError, InterruptedError):
            return FileRegion(region.file, position, remaining)
        if sent == 0:  # the file is shorter than the region: the frame size we sent can no longer be kept
            raise ConnectionError(f"{region!r} ends past the end of its file")
        position += sent
        remaining -= sent
    return None


def _resolve(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)


def _looks_like_tls(head) -> bool:
    """Whether a stream starts with a TLS handshake record (0x16, then major version 3)."""
    return len(head) >= 2 and head[0] == 0x16 and head[1] == 0x03


def _peer_host(sock: socket.socket) -> str:
    """The client's IP address, which ACLs' hosts match, written as Kafka writes it (session.host_address)."""
    try:
        return host_address(sock.getpeername()[0])
    except OSError:
        return ""


def _peer_name(sock: socket.socket) -> str:
    try:
        address = sock.getpeername()
    except OSError:
        return "?"
    return format_host_port(address[0], address[1])




def _client_id_of(frame) -> str | None:
    """The client id of a request header (v1 and v2 both keep it as an int16-length string after the first 8
    bytes), for log lines about requests that could not be decoded."""
    try:
        (length,) = _CLIENT_ID_LENGTH.unpack_from(frame, 8)
    except struct.error:
        return None
    if length < 0 or 10 + length > len(frame):
        return None
    return bytes(frame[10:10 + length]).decode("utf-8", "replace")
