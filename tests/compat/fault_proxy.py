"""A TCP proxy between Kafka clients and a broker that breaks Produce requests the way a network does, so that
producers retry batches the broker may already have written.

Every `every`-th Produce request (counted over all connections) meets one fault, the two kinds taking turns:
- `drop_response`: the request reaches the broker, which appends and answers; the proxy swallows the answer and
  cuts the connection. The retry is then certainly a duplicate.
- `cut_after_request`: the proxy forwards the request and cuts the connection at once; the broker may or may not
  have read it, so the retry is a duplicate or a first write.
Everything else (other APIs, other Produce requests) passes through byte for byte; `every=0` injects nothing. The
proxy also logs each request's (client id, api key, version): `take()` returns them (version emulation and sarama
tests check what a client negotiated). The broker must advertise the proxy's address (`advertised.listeners`) so
that clients come back through it after Metadata.

Kafka framing only: a 4-byte size, then for a request api key (int16), version (int16) and correlation id (int32),
for a response the correlation id first.
"""
from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections import Counter

PRODUCE = 0
DROP_RESPONSE = "drop_response"
CUT_AFTER_REQUEST = "cut_after_request"
FAULT_KINDS = (DROP_RESPONSE, CUT_AFTER_REQUEST)

_SIZE = struct.Struct(">i")
_REQUEST_START = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
_CORRELATION = struct.Struct(">i")


class FaultProxy:
    """Listens on 127.0.0.1 (port chosen at bind time); `start(host, port)` begins relaying to the broker. As a
    context manager it is closed on exit."""

    def __init__(self, *, every: int = 0, kinds: tuple[str, ...] = FAULT_KINDS):
        self.every = every
        self.kinds = kinds
        self.counts: Counter[str] = Counter()  # produce requests seen, and each fault kind injected
        self.requests: list[tuple[str | None, int, int]] = []  # (client id, api key, version), in arrival order
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._upstream: tuple[str, int] | None = None
        self._connections: set[_Relay] = set()
        self._closed = False

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, host: str, port: int) -> FaultProxy:
        self._upstream = (host, port)
        threading.Thread(target=self._accept, name="fault-proxy accept", daemon=True).start()
        return self

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            relays = list(self._connections)
        for relay in relays:
            relay.cut()

    def take(self) -> list[tuple[str | None, int, int]]:
        """The requests logged since the last call."""
        with self._lock:
            taken, self.requests = self.requests, []
        return taken

    def _log(self, client_id: str | None, api_key: int, version: int) -> None:
        with self._lock:
            self.requests.append((client_id, api_key, version))

    def next_fault(self) -> str | None:
        """Counts one Produce request; the fault it meets, if any."""
        with self._lock:
            self.counts["produce"] += 1
            if not self.every or self.counts["produce"] % self.every:
                return None
            kind = self.kinds[(self.counts["produce"] // self.every) % len(self.kinds)]
            self.counts[kind] += 1
            return kind

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            try:
                broker = socket.create_connection(self._upstream, timeout=10)
            except OSError:
                client.close()
                continue
            broker.settimeout(None)
            relay = _Relay(self, client, broker)
            with self._lock:
                self._connections.add(relay)
            relay.start()

    def _forget(self, relay: _Relay) -> None:
        with self._lock:
            self._connections.discard(relay)


def advertising(proxy: FaultProxy) -> dict[str, str]:
    """The broker setting that sends clients back through `proxy` after their first Metadata request."""
    return {"advertised.listeners": f"PLAINTEXT://{proxy.bootstrap}"}


class _Relay:
    """One client connection and its broker connection, with a thread per direction."""

    def __init__(self, proxy: FaultProxy, client: socket.socket, broker: socket.socket):
        self.proxy = proxy
        self.client = client
        self.broker = broker
        self._swallow: set[int] = set()  # correlation ids whose responses are dropped
        self._lock = threading.Lock()
        self._cut = False

    def start(self) -> None:
        threading.Thread(target=self._requests, name="fault-proxy requests", daemon=True).start()
        threading.Thread(target=self._responses, name="fault-proxy responses", daemon=True).start()

    def cut(self) -> None:
        """Close both sides (idempotent); the client sees its connection drop."""
        with self._lock:
            if self._cut:
                return
            self._cut = True
        for sock in (self.client, self.broker):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self.proxy._forget(self)

    def _requests(self) -> None:
        try:
            while True:
                frame = _read_frame(self.client)
                api_key, version, correlation_id, length = _REQUEST_START.unpack_from(frame, 4)
                self.proxy._log(None if length < 0 else frame[14:14 + length].decode(errors="replace"), api_key,
                                version)
                fault = self.proxy.next_fault() if api_key == PRODUCE else None
                if fault == DROP_RESPONSE:
                    with self._lock:
                        self._swallow.add(correlation_id)
                self.broker.sendall(frame)
                if fault == CUT_AFTER_REQUEST:
                    break
        except (OSError, ConnectionError, struct.error):
            pass
        self.cut()

    def _responses(self) -> None:
        try:
            while True:
                frame = _read_frame(self.broker)
                (correlation_id,) = _CORRELATION.unpack_from(frame, 4)
                with self._lock:
                    swallowed = correlation_id in self._swallow
                if swallowed:
                    break
                self.client.sendall(frame)
        except (OSError, ConnectionError, struct.error):
            pass
        self.cut()


def _read_frame(sock: socket.socket) -> bytes:
    """One whole frame, its size prefix included; ConnectionError at end of stream."""
    head = _read_exactly(sock, 4)
    (size,) = _SIZE.unpack(head)
    return head + _read_exactly(sock, size)


def _read_exactly(sock: socket.socket, count: int) -> bytes:
    chunks = []
    while count:
        chunk = sock.recv(min(count, 1 << 20))
        if not chunk:
            raise ConnectionError("connection closed")
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)
