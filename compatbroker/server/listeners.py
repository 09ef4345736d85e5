"""Binding the listening sockets of one configured listener.

`localhost` binds both loopback addresses, 127.0.0.1 and ::1, because clients resolve the name either way; an
empty host binds every interface of both families. Port 0 picks a free port, and every socket of the listener then
uses that same port, so that one `host:port` reaches all of them. An IPv6 address the machine lacks is skipped
unless it is the only one asked for.
"""
from __future__ import annotations

import errno
import os
import socket
from dataclasses import dataclass, field

from ..config import Endpoint, format_host_port

_BACKLOG = socket.SOMAXCONN
_PORT_ZERO_ATTEMPTS = 5


class ListenError(OSError):
    """A listener cannot be bound; the message is the one line the user sees."""


@dataclass
class BoundListener:
    endpoint: Endpoint                       # as configured
    port: int                                # the port actually bound
    sockets: list[socket.socket] = field(default_factory=list)

    def display(self) -> str:
        """`host:port` as printed by `compatbroker serve`."""
        host = self.endpoint.host or ("0.0.0.0" if any(s.family == socket.AF_INET for s in self.sockets) else "::")
        return format_host_port(host, self.port)

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()
        self.sockets = []


def bind_listener(endpoint: Endpoint) -> BoundListener:
    """Bind (and listen on) every address of `endpoint`; raises ListenError with a one-line reason."""
    addresses = _addresses(endpoint)
    for _attempt in range(_PORT_ZERO_ATTEMPTS if endpoint.port == 0 else 1):
        try:
            return _bind_all(endpoint, addresses)
        except _PortTakenElsewhere:
            continue  # the free port of the first address was taken on another: pick a new one
    raise ListenError(f"cannot listen on {endpoint.host_port()}: found no port free on every address")


class _PortTakenElsewhere(Exception):
    pass


def _addresses(endpoint: Endpoint) -> list[tuple[int, str, bool]]:
    """(family, address, required) to bind for the endpoint's host."""
    host = endpoint.host
    if host == "localhost":
        return [(socket.AF_INET, "127.0.0.1", True), (socket.AF_INET6, "::1", False)]
    if host == "":
        return [(socket.AF_INET, "0.0.0.0", True), (socket.AF_INET6, "::", False)]
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ListenError(f"cannot listen on {endpoint.host_port()}: {exc.strerror}") from None
    seen = []
    for family, _, _, _, sockaddr in infos:
        if family in (socket.AF_INET, socket.AF_INET6) and (family, sockaddr[0]) not in seen:
            seen.append((family, sockaddr[0]))
    return [(family, address, index == 0) for index, (family, address) in enumerate(seen)]


def _bind_all(endpoint: Endpoint, addresses: list[tuple[int, str, bool]]) -> BoundListener:
    bound = BoundListener(endpoint, endpoint.port)
    try:
        for family, address, required in addresses:
            try:
                sock = _bind_one(family, address, bound.port)
            except OSError as exc:
                if not required and exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT, errno.EADDRINUSE):
                    continue
                if endpoint.port == 0 and bound.sockets and exc.errno == errno.EADDRINUSE:
                    raise _PortTakenElsewhere() from None
                reason = os.strerror(exc.errno) if exc.errno else str(exc)
                raise ListenError(f"cannot listen on {format_host_port(address, bound.port)}: {reason.lower()}") \
                    from None
            bound.sockets.append(sock)
            bound.port = sock.getsockname()[1]
    except BaseException:
        bound.close()
        raise
    return bound


def _bind_one(family: int, address: str, port: int) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # restart while old connections sit in TIME_WAIT
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)  # the IPv4 socket serves IPv4
        sock.bind((address, port))
        sock.listen(_BACKLOG)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock
