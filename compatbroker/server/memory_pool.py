"""The broker-wide pool of request memory: Kafka's `queued.max.request.bytes` (KIP-72).

Every request frame takes its size from the pool before its bytes are read off the socket, and gives it back when
its handler has finished. When the pool is used up, connections stop reading (their sockets fill and TCP pushes
back on the clients) until memory is released; waiting connections are served in the order they asked.

As in Kafka (a non-strict pool), a frame is granted whenever some memory is free, even if it is larger than what is
left, so a frame never waits for memory that can only come back from itself; the pool may overshoot its capacity by
at most one frame. Unlike Kafka, a frame takes nothing until its first body byte arrives: a client that declares a
size and sends nothing reserves nothing.

`memory_pool(-1)` (the default: no bound) gives None, and connections consult nothing.

`RecycledBuffers` is not accounting but reuse: buffers of large frames kept for the next large frames.
"""
from __future__ import annotations

import asyncio
import mmap
from collections import deque


class MemoryPool:
    def __init__(self, capacity: int):
        self.capacity = capacity
        self.used = 0
        self._waiters: deque[tuple[asyncio.Future, int]] = deque()

    @property
    def available(self) -> int:
        return self.capacity - self.used

    @property
    def waiting(self) -> int:
        """Connections waiting for memory (some may be cancelled already)."""
        return sum(not waiter.done() for waiter, _ in self._waiters)

    async def reserve(self, size: int) -> None:
        """Take `size` bytes, waiting (behind earlier waiters) while the pool is used up."""
        if not self._waiters and self.used < self.capacity:
            self.used += size
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append((waiter, size))
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # granted just as the connection went away
                self.release(size)
            raise

    def release(self, size: int) -> None:
        """Give `size` bytes back and grant the waiters in order, while memory is free."""
        self.used -= size
        waiters = self._waiters
        while waiters and self.used < self.capacity:
            waiter, wanted = waiters.popleft()
            if waiter.done():  # its connection was cancelled while waiting
                continue
            self.used += wanted
            waiter.set_result(None)


def memory_pool(queued_max_request_bytes: int) -> MemoryPool | None:
    """The pool for the configured bound; None when unbounded (Kafka: a value of 0 or less)."""
    return MemoryPool(queued_max_request_bytes) if queued_max_request_bytes > 0 else None


class RecycledBuffers:
    """Large-frame buffers given back by finished handlers, shared by all connections, up to `max_bytes` in total.
    A fresh buffer is an anonymous memory map whose pages the kernel faults in (zero-filled) as bytes arrive; reusing
    one whose pages are in already saves that for the frames above a connection's own spares (a quarter of the time
    of reading a 16 MiB frame). Idle buffers are bounded by `max_bytes`."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._buffers: list[mmap.mmap] = []
        self._total = 0

    def take(self, size: int) -> mmap.mmap:
        """The smallest kept buffer of at least `size` bytes, else a fresh one of exactly `size`."""
        fitting = [index for index, buffer in enumerate(self._buffers) if len(buffer) >= size]
        if not fitting:
            return mmap.mmap(-1, size)
        buffer = self._buffers.pop(min(fitting, key=lambda index: len(self._buffers[index])))
        self._total -= len(buffer)
        return buffer

    def give(self, buffer: mmap.mmap) -> None:
        """Keep `buffer` for a later frame, dropping the oldest kept ones beyond `max_bytes`."""
        if len(buffer) > self.max_bytes:
            return
        self._buffers.append(buffer)
        self._total += len(buffer)
        while self._total > self.max_bytes:
            self._total -= len(self._buffers.pop(0))
