"""TlsChannel's region buffer is shared by every connection of a thread: a channel waiting for a full socket must not
send bytes another channel has read into the buffer meanwhile."""
from __future__ import annotations

import asyncio
import os
import socket

import pytest

from compatbroker.protocol import FileRegion
from compatbroker.security.tls_channel import TlsChannel
from compatbroker.toolkit.certificates import TestCertificates
from tests.async_tests import async_test
from tests.security.test_tls_channel import Peer, _read_exactly, _server_context

SIZE = 3 * 1024 * 1024 + 77


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return TestCertificates.generate(tmp_path_factory.mktemp("certs"), clients=[])


@async_test
async def test_channels_waiting_on_full_sockets_send_their_own_bytes(certs, tmp_path):
    files = []
    for name in ("a", "b"):
        path = tmp_path / f"{name}.log"
        path.write_bytes(os.urandom(SIZE))
        files.append(path)
    peers, channels = [], []
    for _ in files:
        peer = Peer(certs, lambda sock: _read_exactly(sock, SIZE))
        # small buffers: each channel's socket fills many times, and the other channel reads in between
        peer.server_sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
        peers.append(peer)
        channels.append(TlsChannel(peer.server_sock, _server_context(certs)))
    await asyncio.gather(*(channel.handshake() for channel in channels))
    with open(files[0], "rb") as first, open(files[1], "rb") as second:
        await asyncio.gather(channels[0].send([FileRegion(first, 0, SIZE)]),
                             channels[1].send([FileRegion(second, 0, SIZE)]))
    for peer, path in zip(peers, files):
        assert await peer.finished() == path.read_bytes()
        assert peer.error is None
        peer.server_sock.close()
