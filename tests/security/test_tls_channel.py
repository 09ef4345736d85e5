"""TlsChannel over a socket pair, against a blocking TLS client in a thread: the handshake, reading and writing,
file regions sent from the page cache through one reused buffer, and the ways a handshake ends badly."""
from __future__ import annotations

import asyncio
import os
import socket
import ssl
import threading

import pytest

from compatbroker.protocol import FileRegion
from compatbroker.security.settings import SslSettings
from compatbroker.security.tls import build_server_context
from compatbroker.security.tls_channel import NotTls, TlsChannel, TlsHandshakeFailed, region_buffer
from compatbroker.toolkit.certificates import TestCertificates
from tests.async_tests import async_test

LIMIT_S = 20


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return TestCertificates.generate(tmp_path_factory.mktemp("certs"), clients=["alice"])


def _server_context(certs, client_auth="none") -> ssl.SSLContext:
    return build_server_context(SslSettings(
        keystore_type="PEM", keystore_location=certs.broker.keystore_file, keystore_certificate_chain=None,
        keystore_key=None, key_password=None, keystore_password=None, truststore_type="PEM",
        truststore_location=certs.ca_file, truststore_certificates=None, client_auth=client_auth,
        enabled_protocols=("TLSv1.2", "TLSv1.3"), protocol="TLSv1.3", cipher_suites=(),
        principal_mapping_rules="DEFAULT"))


class Peer:
    """A blocking TLS client on one end of a socket pair, running `script(tls_socket)` in a thread."""

    def __init__(self, certs, script, *, client=None, wrap=True):
        self.server_sock, self._client_sock = socket.socketpair()
        self.server_sock.setblocking(False)
        self._client_sock.settimeout(LIMIT_S)
        context = ssl.create_default_context(cafile=certs.ca_file)
        if client is not None:
            context.load_cert_chain(client.chain_file, client.key_file)
        self._context, self._script, self._wrap = context, script, wrap
        self.result = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        sock = self._client_sock
        try:
            if self._wrap:
                sock = self._context.wrap_socket(sock, server_hostname="localhost")
            self.result = self._script(sock)
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            self.error = exc
        finally:
            sock.close()
            self._client_sock.close()

    async def finished(self):
        await asyncio.get_running_loop().run_in_executor(None, self._thread.join, LIMIT_S)
        assert not self._thread.is_alive()
        return self.result


def _read_exactly(sock, count: int) -> bytes:
    chunks, got = [], 0
    while got < count:
        chunk = sock.recv(min(1 << 20, count - got))
        assert chunk, "closed early"
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


async def _read_all(channel: TlsChannel, count: int) -> bytes:
    buffer = bytearray(count)
    view, got = memoryview(buffer), 0
    while got < count:
        received = await channel.recv_into(view[got:])
        assert received, "closed early"
        got += received
    return bytes(buffer)


@async_test
async def test_bytes_both_ways_and_the_end_of_the_stream(certs):
    def client(sock):
        sock.sendall(b"ping" * 1000)
        return _read_exactly(sock, 5)  # then the client closes

    peer = Peer(certs, client)
    channel = TlsChannel(peer.server_sock, _server_context(certs))
    await channel.handshake()
    assert channel.version in ("TLSv1.2", "TLSv1.3")
    assert channel.peer_certificate() is None
    assert await _read_all(channel, 4000) == b"ping" * 1000
    await channel.sendall(b"hello")
    assert await channel.recv_into(memoryview(bytearray(10))) == 0
    assert await peer.finished() == b"hello"
    peer.server_sock.close()


@async_test
async def test_file_regions_are_sent_through_one_reused_buffer(certs, tmp_path):
    data = os.urandom(3 * 1024 * 1024 + 123)
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    regions = [(0, 1000), (1000, 2 * 1024 * 1024), (5, len(data) - 5)]
    expected = b"".join([b"head"] + [data[start:start + length] + b"|" for start, length in regions])

    peer = Peer(certs, lambda sock: _read_exactly(sock, len(expected)))
    channel = TlsChannel(peer.server_sock, _server_context(certs))
    await channel.handshake()
    with open(path, "rb") as file:
        await channel.send([b"head", FileRegion(file, *regions[0]), b"|"])
        buffer = region_buffer()
        for start, length in regions[1:]:
            await channel.send([FileRegion(file, start, length), b"|"])
        assert region_buffer() is buffer  # no allocation per response
    assert await peer.finished() == expected
    assert peer.error is None
    peer.server_sock.close()


@async_test
async def test_a_region_past_the_end_of_its_file_fails_the_send(certs, tmp_path):
    path = tmp_path / "short.log"
    path.write_bytes(b"x" * 100)
    peer = Peer(certs, lambda sock: sock.recv(1))
    channel = TlsChannel(peer.server_sock, _server_context(certs))
    await channel.handshake()
    with open(path, "rb") as file, pytest.raises(ConnectionError, match="ends past the end of its file"):
        await channel.send([FileRegion(file, 50, 100)])
    peer.server_sock.close()
    await peer.finished()


@async_test
async def test_reads_and_writes_at_once_keep_both_streams_intact(certs):
    """The connection's reader and writer use the channel at the same time (the client here is asyncio's TLS, in
    the same loop, reading and writing at once too)."""
    outgoing, incoming = os.urandom(4 * 1024 * 1024), os.urandom(4 * 1024 * 1024)
    server_sock, client_sock = socket.socketpair()
    server_sock.setblocking(False)
    channel = TlsChannel(server_sock, _server_context(certs))
    context = ssl.create_default_context(cafile=certs.ca_file)
    (reader, writer), _ = await asyncio.gather(
        asyncio.open_connection(sock=client_sock, ssl=context, server_hostname="localhost"), channel.handshake())

    async def client_sends():
        writer.write(incoming)
        await writer.drain()

    chunks = [outgoing[start:start + 300_000] for start in range(0, len(outgoing), 300_000)]
    _, _, received, sent = await asyncio.gather(channel.send(chunks), client_sends(),
                                                _read_all(channel, len(incoming)),
                                                reader.readexactly(len(outgoing)))
    assert received == incoming
    assert sent == outgoing
    writer.close()
    server_sock.close()


@async_test
async def test_plaintext_instead_of_a_client_hello_is_not_tls(certs):
    peer = Peer(certs, lambda sock: (sock.sendall(b"\x00\x00\x00\x15\x00\x12\x00\x03" + b"x" * 20), sock.recv(1)),
                wrap=False)
    channel = TlsChannel(peer.server_sock, _server_context(certs))
    with pytest.raises(NotTls):
        await channel.handshake()
    peer.server_sock.close()
    await peer.finished()


@async_test
async def test_an_untrusted_client_certificate_fails_the_handshake(certs):
    def client(sock):
        return sock.recv(1)  # TLS 1.3: the client learns of the refusal on its first read

    peer = Peer(certs, client, client=certs.untrusted_client)
    channel = TlsChannel(peer.server_sock, _server_context(certs, client_auth="required"))
    with pytest.raises(TlsHandshakeFailed, match="CERTIFICATE"):
        await channel.handshake()
    peer.server_sock.close()
    await peer.finished()
    assert isinstance(peer.error, (ssl.SSLError, ConnectionError)) or peer.result == b""


@async_test
async def test_a_verified_client_certificate_is_available(certs):
    peer = Peer(certs, lambda sock: sock.recv(1), client=certs.client("alice"))
    channel = TlsChannel(peer.server_sock, _server_context(certs, client_auth="required"))
    await channel.handshake()
    from cryptography import x509
    assert x509.load_der_x509_certificate(channel.peer_certificate()).subject.rfc4514_string() == "CN=alice"
    peer.server_sock.close()
    await peer.finished()


@async_test
async def test_a_client_leaving_during_the_handshake_is_a_plain_connection_error(certs):
    peer = Peer(certs, lambda sock: sock.sendall(b"\x16\x03\x01\x02\x00\x01"), wrap=False)
    channel = TlsChannel(peer.server_sock, _server_context(certs))
    with pytest.raises(ConnectionError) as failure:
        await channel.handshake()
    assert not isinstance(failure.value, (NotTls, TlsHandshakeFailed))
    peer.server_sock.close()
    await peer.finished()
