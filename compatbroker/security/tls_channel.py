"""TLS over a non-blocking socket for the asyncio server: OpenSSL reads and writes the socket directly (asyncio's
`sock_*` calls refuse SSL sockets, and the connection keeps its own reader and writer coroutines, so the channel
waits for the socket itself with `add_reader` / `add_writer`).

The SSL object is the one `ssl.SSLSocket` is built on (`SSLContext._wrap_socket`, low level but stable since
Python 3.7), made on the connection's socket object, which keeps its descriptor: `ssl.SSLSocket` itself would take the
descriptor over (detaching the socket object), and whoever closes the connection's socket would then close nothing.

Each TLS record goes from OpenSSL's buffer straight into the socket: no memory BIO in between, no bytes object per
chunk (with `ssl.MemoryBIO` + `SSLObject` every encrypted byte was copied twice more, and the broker spent 10-20% more
CPU per MiB sent over TLS, see bench/security_bench.py). Python sets SSL_MODE_ENABLE_PARTIAL_WRITE and
SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER: a write sends as many whole records as the socket takes and answers their bytes;
one refused with SSLWantWriteError has already taken its next record into OpenSSL, so it is retried, once the socket
is writable, with a buffer that starts with the same bytes.

The reader and the writer share the SSL object; each call on it runs to completion in the event loop's thread, so
OpenSSL keeps the record streams in order. A read can have to write (TLS 1.3 key update) and, in principle, a write
to read, so both may wait for the same direction at once: each direction has one registration for all its waiters.
Decrypted bytes OpenSSL holds (more than the caller asked for) are returned before waiting: the channel waits only
after a read answered SSLWantReadError.

The first byte is peeked at before the handshake, so that plaintext Kafka reaching a TLS listener is told apart from
a failed handshake.

Record bytes of a Fetch (`FileRegion`s) cannot go through `os.sendfile`: Python 3.11 has no kernel TLS
(`ssl.OP_ENABLE_KTLS` is 3.12+). They are read from the page cache with `os.preadv` into one buffer per thread,
shared by every connection, and encrypted from it into the socket: page cache -> buffer -> TLS records -> socket.
When the socket fills, the bytes not yet taken stay in the buffer; another connection may use the buffer while this
one waits, so they are read again from the file unless the buffer is still this channel's. (A memory map would spare
the first copy, but segments are truncated in place (log truncation), and a mapped page past the new end is a SIGBUS
for the whole process; `preadv` just reads short.)
"""
from __future__ import annotations

import asyncio
import os
import socket
import ssl
import threading

_TLS_HANDSHAKE_RECORD = 0x16  # the first byte of a ClientHello
_FILE_CHUNK = 256 * 1024      # record bytes read from a segment file at a time
_DISCARD_CHUNK = 64 * 1024   # bytes taken off the socket at a time after a failed handshake,
_DISCARD_CHUNKS = 16          # at most this many times
_READ, _WRITE = True, False   # the directions the socket is waited for


class NotTls(ConnectionError):
    """The client's first bytes are not a TLS handshake (plaintext Kafka to a TLS listener)."""


class TlsHandshakeFailed(ConnectionError):
    """The TLS handshake failed (untrusted certificate, no common protocol, ...); str() is the reason."""


class TlsChannel:
    def __init__(self, sock: socket.socket, context: ssl.SSLContext):
        self._loop = asyncio.get_running_loop()
        self._sock = sock
        self._fd = sock.fileno()
        # A non-blocking socket: OpenSSL answers SSLWantReadError / SSLWantWriteError instead of waiting.
        self._tls = context._wrap_socket(sock, server_side=True)
        self._waiters: dict[bool, list[asyncio.Future]] = {_READ: [], _WRITE: []}
        self._first_byte: int | None = None
        self._eof = False
        self._writing = False  # a write is under way (or was cut off): no close_notify in the middle of a record

    # --- handshake ------------------------------------------------------------------------------------------------

    async def handshake(self) -> None:
        """Complete the server side of the handshake; NotTls, TlsHandshakeFailed, or ConnectionError when the client
        leaves first."""
        self._first_byte = await self._peek_first_byte()
        while True:
            try:
                self._tls.do_handshake()
                return
            except ssl.SSLWantReadError:
                await self._ready(_READ)
            except ssl.SSLWantWriteError:
                await self._ready(_WRITE)
            except (ssl.SSLEOFError, ssl.SSLZeroReturnError):
                raise ConnectionError("the client closed the connection during the TLS handshake") from None
            except ssl.SSLError as exc:  # OpenSSL has sent the alert that tells the client why
                self._discard_received()
                if self._first_byte != _TLS_HANDSHAKE_RECORD:
                    raise NotTls(f"first byte 0x{self._first_byte:02x}") from None
                raise TlsHandshakeFailed(exc.reason or str(exc)) from None

    async def _peek_first_byte(self) -> int:
        while True:
            try:
                head = self._sock.recv(1, socket.MSG_PEEK)
            except BlockingIOError:
                await self._ready(_READ)
                continue
            if not head:
                raise ConnectionError("the client closed the connection during the TLS handshake")
            return head[0]

    def _discard_received(self) -> None:
        """Take the bytes OpenSSL left unread off the socket (without waiting): closing a socket with received bytes
        unread resets the connection, and the client could lose the alert or see a reset instead of a close."""
        try:
            for _ in range(_DISCARD_CHUNKS):  # bounded: a client streaming bytes must not hold the event loop
                if not self._sock.recv(_DISCARD_CHUNK):
                    return
        except OSError:  # BlockingIOError: nothing more for now
            pass

    def close_notify(self) -> None:
        """Best effort, without waiting: tell the client the connection is closing (TLS close_notify), so that it
        sees an orderly close rather than a truncated stream; the caller closes the socket next. Skipped while a
        write is under way (or was cut off in the middle of a record) and before the handshake has finished."""
        self._stop_waiting()
        shared = _shared_buffer()
        if shared.user is self:
            shared.user = None
        if self._writing or not self._tls.version():
            return
        try:
            self._tls.shutdown()
        except (ssl.SSLError, OSError):  # SSLWantReadError: the client's close_notify is not awaited
            pass

    def peer_certificate(self) -> bytes | None:
        """The client's certificate (DER) when it sent one and it was verified."""
        return self._tls.getpeercert(True)

    @property
    def version(self) -> str | None:
        return self._tls.version()

    # --- reading --------------------------------------------------------------------------------------------------

    async def recv_into(self, view: memoryview) -> int:
        """Decrypted bytes into `view`; 0 at the end of the stream (close_notify or the socket closed)."""
        while not self._eof:
            try:
                count = self._tls.read(len(view), view)
            except ssl.SSLWantReadError:
                await self._ready(_READ)
                continue
            except ssl.SSLWantWriteError:
                await self._ready(_WRITE)
                continue
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                count = 0
            except ssl.SSLError as exc:
                raise ConnectionError(f"TLS error: {exc.reason or exc}") from None
            if count == 0:
                self._eof = True
            return count
        return 0

    # --- writing --------------------------------------------------------------------------------------------------

    async def send(self, chunks: list) -> None:
        """Write a response's chunks: bytes, and file regions (anything with file, position and length)."""
        self._writing = True
        for chunk in chunks:
            if isinstance(chunk, (bytes, bytearray, memoryview)):
                await self._write(memoryview(chunk))
            else:
                await self._write_region(chunk)
        self._writing = False

    async def sendall(self, data) -> None:
        await self.send([data])

    async def _write(self, view: memoryview) -> None:
        while view:
            written, wait_for = self._write_records(view)
            view = view[written:]
            if wait_for is not None:
                await self._ready(wait_for)

    async def _write_region(self, region) -> None:
        """Encrypt a file region read from the page cache chunk by chunk through the thread's buffer (see the module
        docstring for when the bytes are read again)."""
        shared = _shared_buffer()
        fd, position, remaining = region.file.fileno(), region.position, region.length
        unsent = shared.view[:0]  # the region's bytes at `position`, in the buffer
        while remaining > 0:
            if not unsent or shared.user is not self:
                count = os.preadv(fd, [shared.view[:min(remaining, _FILE_CHUNK)]], position)
                if count == 0:  # the file is shorter than the region: the frame size sent can no longer be kept
                    raise ConnectionError(f"{region!r} ends past the end of its file")
                shared.user, unsent = self, shared.view[:count]
            written, wait_for = self._write_records(unsent)
            unsent = unsent[written:]
            position += written
            remaining -= written
            if wait_for is not None:
                await self._ready(wait_for)

    def _write_records(self, view: memoryview) -> tuple[int, bool | None]:
        """Encrypt `view` into the socket, as many whole TLS records per call as the socket takes, until it is all
        written or the socket is full: the bytes taken, and the direction to wait for before going on (None when all
        are written)."""
        written, size, tls = 0, len(view), self._tls
        try:
            while written < size:
                written += tls.write(view[written:])
        except ssl.SSLWantWriteError:
            return written, _WRITE
        except ssl.SSLWantReadError:
            return written, _READ
        except ssl.SSLError as exc:
            raise ConnectionError(f"TLS error: {exc.reason or exc}") from None
        return written, None

    # --- waiting for the socket -----------------------------------------------------------------------------------

    def _ready(self, readable: bool) -> asyncio.Future:
        """A future resolved once the socket is readable (writable); one registration per direction serves every
        waiter."""
        waiters = self._waiters[readable]
        if not waiters:
            if readable:
                self._loop.add_reader(self._fd, self._wake, _READ)
            else:
                self._loop.add_writer(self._fd, self._wake, _WRITE)
        future = self._loop.create_future()
        waiters.append(future)
        return future

    def _wake(self, readable: bool) -> None:
        waiters = self._waiters[readable]
        if not waiters:
            return
        self._waiters[readable] = []
        if readable:
            self._loop.remove_reader(self._fd)
        else:
            self._loop.remove_writer(self._fd)
        for future in waiters:
            if not future.done():
                future.set_result(None)

    def _stop_waiting(self) -> None:
        """At the close: the socket's registrations go (its descriptor number will be reused), and any waiter left
        fails."""
        for readable, waiters in self._waiters.items():
            if waiters:
                (self._loop.remove_reader if readable else self._loop.remove_writer)(self._fd)
            self._waiters[readable] = []
            for future in waiters:
                if not future.done():
                    future.set_exception(ConnectionError("the connection is closed"))


class _SharedBuffer:
    """One thread's buffer for file region bytes on their way to encryption, and the channel that filled it last."""

    def __init__(self):
        self.view = memoryview(bytearray(_FILE_CHUNK))
        self.user: TlsChannel | None = None


_buffers = threading.local()


def _shared_buffer() -> _SharedBuffer:
    shared = getattr(_buffers, "shared", None)
    if shared is None:
        shared = _buffers.shared = _SharedBuffer()
    return shared


def region_buffer() -> memoryview:
    """This thread's buffer for file region bytes on their way to encryption."""
    return _shared_buffer().view
