"""Connection load against a broker at `host:port`, with plain blocking sockets: many idle connections, large
frame declarations that never complete, a slowloris, and the latency of Metadata asked by a separate client.

Used by tests/server/test_connection_limits.py; bench/ may import it for the same load at larger sizes (with the
repository root on sys.path). Nothing here asserts: callers decide what the figures must be.
"""
from __future__ import annotations

import contextlib
import math
import os
import socket
import struct
import threading
import time

from compatbroker.protocol.messages import ApiVersionsRequest, MetadataRequest

from ..compat.raw_client import RawClient

MIB = 1 << 20
_SIZE = struct.Struct(">i")


def open_connections(host: str, port: int, count: int, first_bytes: bytes = b"") -> list[socket.socket]:
    """`count` connections, each having sent `first_bytes` (e.g. a frame size and nothing after)."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.create_connection((host, port), timeout=30)
            socks.append(sock)
            if first_bytes:
                sock.sendall(first_bytes)
    except BaseException:
        close_all(socks)
        raise
    return socks


def declaration(size: int = 100 * MIB) -> bytes:
    """The 4-byte size prefix of a frame of `size` bytes."""
    return _SIZE.pack(size)


def close_all(socks: list[socket.socket]) -> None:
    for sock in socks:
        sock.close()
    socks.clear()


class Slowloris:
    """`count` connections, each sending a large frame a few bytes at a time (round robin, every `interval_s`), so
    that the broker reads from all of them without ever getting a whole request. A context manager: the dribbling
    thread runs inside the `with` block, and the connections are closed on exit."""

    def __init__(self, host: str, port: int, count: int, *, frame_size: int = MIB, step: int = 3,
                 interval_s: float = 0.01):
        self.socks = open_connections(host, port, count, declaration(frame_size))
        self.step = step
        self.interval_s = interval_s
        self.sent = 0  # body bytes sent on each connection
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._dribble, daemon=True)

    def __enter__(self) -> Slowloris:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()
        close_all(self.socks)

    def _dribble(self) -> None:
        chunk = b"\x01" * self.step
        while not self._stop.wait(self.interval_s):
            for sock in self.socks:
                with contextlib.suppress(OSError):
                    sock.sendall(chunk)
            self.sent += self.step


class Client(RawClient):
    """One blocking connection to `host:port` making requests with compatbroker's codec."""

    def __init__(self, host: str, port: int, timeout_s: float = 30.0, client_id: str = "load-client"):
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.client_id = client_id
        self.correlation_id = 0

    def api_versions(self):
        return self.call(ApiVersionsRequest(), 0)

    def metadata(self):
        return self.call(MetadataRequest(topics=[]), 1)


def metadata_latencies(host: str, port: int, count: int) -> list[float]:
    """Seconds each of `count` Metadata requests took, one after the other on one new connection."""
    client = Client(host, port)
    try:
        latencies = []
        for _ in range(count):
            began = time.perf_counter()
            client.metadata()
            latencies.append(time.perf_counter() - began)
        return latencies
    finally:
        client.close()


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1)]


def rss_bytes(pid: int) -> int:
    """VmRSS of a process, from /proc (Linux)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise LookupError(f"no VmRSS for process {pid}")


def socket_count(pid: int) -> int:
    """Sockets the process holds open (listeners included), from /proc (Linux)."""
    count = 0
    for fd in _fds(pid):
        with contextlib.suppress(FileNotFoundError):
            count += fd.startswith("socket:")
    return count


def fd_count(pid: int) -> int:
    return len(_fds(pid))


def _fds(pid: int) -> list[str]:
    links = []
    directory = f"/proc/{pid}/fd"
    for name in os.listdir(directory):
        with contextlib.suppress(FileNotFoundError):
            links.append(os.readlink(f"{directory}/{name}"))
    return links


def wait_for(condition, timeout_s: float, what: str, poll_s: float = 0.02) -> None:
    """Poll `condition` until true; AssertionError naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(poll_s)
