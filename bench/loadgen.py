"""Load generation for the broker benchmark: confluent-kafka (librdkafka) producers and consumers, and two plain
loops over TCP loopback that show what the kernel alone spends on the same bytes: the loopback limit of a fetch
(os.sendfile of log bytes to a reader that throws them away) and the floor of a produce (recv_into one buffer,
os.pwrite to a file, CRC-32C).

Every function here talks to any Kafka broker by its bootstrap address; none knows which broker it is measuring.
"""
from __future__ import annotations

import gc
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

MiB = 1 << 20

# One configuration for both peers. acks stays at the client's default (all): on one broker without a flush
# policy it costs what acks=1 costs. Only failed deliveries are reported back to Python, so the Python side of
# the client does as little per message as the API allows.
PRODUCER_CONFIG = {
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "compression.type": "none",
    "delivery.report.only.error": True,
    "log_level": 3,
}
# Consumers use assign() from the beginning and commit nothing: the benchmark measures fetching, not group
# coordination. librdkafka insists on a group.id all the same.
# - librdkafka stops fetching for fetch.queue.backoff.ms (1 s by default) whenever its local queue, shared by all
#   assigned partitions, holds queued.min.messages: with the defaults a fast broker fills it in a blink and the run
#   measures that pause, so both are raised.
# - max.partition.fetch.bytes is raised from 1 MiB so one partition's backlog is not read 1 MiB per round trip;
#   4 MiB read a 64 KiB-message backlog as fast as 8 or 16 MiB, and faster than 1, 2 or 30 MiB.
#   fetch.max.bytes is lowered from 50 MiB to 16 MiB: librdkafka allocates each response whole, and a response of
#   32 MiB or more is past glibc's largest mmap threshold, so it lands in fresh memory each time, one page fault
#   per 4 KiB received (measured: a fault per page consumed and a 20% lower rate at 32 MiB). The mock sends one
#   batch per partition per response whatever these say, so they only shape compatbroker's responses.
# The comparison with the mock (many partitions, small messages) asks for 4 MiB responses instead
# (MOCK_FETCH_MAX_BYTES): the mock's one batch per partition makes responses of about that size, and with 16 MiB ones
# librdkafka's parsing of a response touches more memory than stays in cache (measured: 100 B messages 7% slower).
# A backlog is written with full batches (batch.size): the client queues every message before the long linger
# ends, and flush() sends them all. Batches made by linger.ms=5 depend on timing, and the mock returns one batch
# per partition per fetch, so its read rate would follow the luck of the fill.
FILL_CONFIG = {"linger.ms": 5000}

MOCK_FETCH_MAX_BYTES = 4 * MiB
CONSUMER_CONFIG = {
    "queued.min.messages": 1_000_000,
    "fetch.queue.backoff.ms": 10,
    "group.id": "compatbroker-bench",
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "fetch.max.bytes": 16 * MiB,
    "max.partition.fetch.bytes": 4 * MiB,
    "receive.message.max.bytes": 17 * MiB,
    "queued.max.messages.kbytes": 256 * 1024,
    "log_level": 3,
}


class LoadError(RuntimeError):
    """A run did not complete: delivery errors, a timeout, or records missing."""


@dataclass
class Run:
    messages: int
    seconds: float

    @property
    def messages_per_s(self) -> float:
        return self.messages / self.seconds


def _errors_counter():
    errors = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)
    return errors, on_delivery


def make_producer(bootstrap: str, **overrides) -> tuple[Producer, list]:
    errors, on_delivery = _errors_counter()
    config = dict(PRODUCER_CONFIG, **overrides)
    config.update({"bootstrap.servers": bootstrap, "on_delivery": on_delivery})
    return Producer(config), errors


def produce(producer: Producer, errors: list, topic: str, partitions: list[int], payload: bytes, count: int,
            timeout_s: float) -> Run:
    """Send `count` copies of `payload` round-robin over `partitions` and wait until all are acknowledged."""
    send, poll = producer.produce, producer.poll
    width = len(partitions)
    deadline = time.monotonic() + timeout_s
    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                send(topic, payload, partition=partitions[i % width])
                break
            except BufferError:  # the client's queue is full: let it drain
                poll(0.005)
                if time.monotonic() > deadline:
                    raise LoadError("produce to %s timed out with the client queue full" % topic)
    remaining = producer.flush(max(0.0, deadline - time.monotonic()))
    seconds = time.perf_counter() - start
    if remaining:
        raise LoadError("%d messages to %s not acknowledged within %.0f s" % (remaining, topic, timeout_s))
    if errors:
        raise LoadError("%d delivery errors on %s, first: %s" % (len(errors), topic, errors[0]))
    return Run(count, seconds)


def warm_up(bootstrap: str, topic: str, partitions: list[int], payload: bytes, timeout_s: float = 30.0) -> None:
    """One message to each partition, acknowledged: the topic exists, the client knows its leaders."""
    producer, errors = make_producer(bootstrap)
    produce(producer, errors, topic, partitions, payload, len(partitions), timeout_s)


def produce_run(bootstrap: str, topic: str, partitions: list[int], payload: bytes, count: int,
                timeout_s: float, **overrides) -> Run:
    """Warm the topic with one producer, then time another from its first message to the last acknowledgement.

    The timed producer learns the topic's metadata before the clock starts, so topic creation and connection
    setup stay out of the figure. `overrides` change its configuration."""
    warm_up(bootstrap, topic, partitions, payload)
    producer, errors = make_producer(bootstrap, **overrides)
    producer.list_topics(topic, timeout=10)
    return produce(producer, errors, topic, partitions, payload, count, timeout_s)


def watermarks(bootstrap: str, topic: str, partitions: list[int]) -> list[tuple[int, int]]:
    consumer = Consumer(dict(CONSUMER_CONFIG, **{"bootstrap.servers": bootstrap}))
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in partitions]
    finally:
        consumer.close()


def consume_run(bootstrap: str, assignment: list[tuple[str, int]], expected: int, timeout_s: float,
                batch: int = 10_000, fetch_max_bytes: int | None = None, overrides: dict | None = None) -> Run:
    """Read the (topic, partition) pairs from the beginning until `expected` messages arrived.

    The clock runs from assign() to the last message; the consumer has connected and fetched the topics'
    metadata before, so the figure is fetch throughput through the client, not connection setup. `overrides`
    change the consumer's configuration (security settings)."""
    config = {**CONSUMER_CONFIG, "bootstrap.servers": bootstrap, **(overrides or {})}
    if fetch_max_bytes is not None:
        config["fetch.max.bytes"] = fetch_max_bytes
    consumer = Consumer(config)
    gc.disable()  # each batch is thousands of new Message objects: collections would be most of the client's time
    try:
        for topic in sorted({topic for topic, _ in assignment}):
            consumer.list_topics(topic, timeout=10)
        take = consumer.consume
        got = 0
        deadline = time.monotonic() + timeout_s
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for topic, p in assignment])
        while got < expected:
            # consume() waits for a full batch or the timeout: never ask for more than is left
            messages = take(min(batch, expected - got), 1.0)
            for message in messages:
                if message.error() is not None:
                    raise LoadError("consume: %s" % message.error())
            got += len(messages)
            if time.monotonic() > deadline:
                raise LoadError("consume: %d of %d messages within %.0f s" % (got, expected, timeout_s))
        seconds = time.perf_counter() - start
    except KafkaException as exc:
        raise LoadError("consume: %s" % exc) from exc
    finally:
        gc.enable()
        consumer.close()
    if got != expected:
        raise LoadError("consume: %d messages, expected %d" % (got, expected))
    return Run(got, seconds)


@dataclass
class Loopback:
    """One pass of a plain loop over TCP loopback: the bytes it moved, its wall time, and the CPU time of the thread
    that stands for the broker (nearly all of it spent in the kernel, and in CRC-32C for the produce floor)."""
    bytes: int
    seconds: float
    cpu_seconds: float

    def cpu_per_gb(self) -> float:
        return self.cpu_seconds / (self.bytes / 1e9)


def loopback_sendfile(paths: list[str], chunk: int = 1 << 20) -> Loopback:
    """Send the files over a TCP loopback connection with os.sendfile to a thread that discards what it reads.

    The most a broker can do with these bytes on this machine, with no protocol; cpu_seconds is the sending
    thread's (sendfile, and the loopback's delivery to the reader's socket that runs in it): what the kernel
    spends on the bytes a broker sends this way."""
    total = sum(os.path.getsize(path) for path in paths)
    with socket.create_server(("127.0.0.1", 0)) as listener, \
            socket.create_connection(listener.getsockname()) as sender:
        receiver, _ = listener.accept()
        with receiver:
            received = [0]
            reader = threading.Thread(target=_discard, args=(receiver, total, chunk, received), daemon=True)
            start, cpu = time.perf_counter(), time.thread_time()
            reader.start()
            for path in paths:
                _sendfile_all(sender, path)
            cpu = time.thread_time() - cpu
            reader.join()
            seconds = time.perf_counter() - start
    if received[0] != total:
        raise LoadError("loopback: received %d of %d bytes" % (received[0], total))
    return Loopback(total, seconds, cpu)


def _sendfile_all(sock: socket.socket, path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        size, offset = os.fstat(fd).st_size, 0
        while offset < size:
            offset += os.sendfile(sock.fileno(), fd, offset, size - offset)
    finally:
        os.close(fd)


def _discard(sock: socket.socket, total: int, chunk: int, received: list[int]) -> None:
    buffer = memoryview(bytearray(chunk))
    count = 0
    while count < total:
        n = sock.recv_into(buffer)
        if not n:
            break
        count += n
    received[0] = count


def produce_floor(path: Path, total: int, chunk: int = MiB) -> Loopback:
    """What the kernel must spend to take `total` bytes in from a socket and into a file, as a broker's produce
    path does: a plain loop receives them over TCP loopback into one 1 MiB buffer (recv_into until it is full),
    writes each buffer to `path` at its offset (os.pwrite, no fsync) and runs CRC-32C over it. cpu_seconds is
    the receiving thread's; a thread of this process sends. The file is deleted afterwards (its page cache freed).
    Without the crc32c package (compatbroker's dependency) the CRC is left out and a note printed."""
    try:
        from crc32c import crc32c
    except ImportError:
        print("  note: no crc32c package here: the produce floor leaves CRC-32C out")
        crc32c = None
    with socket.create_server(("127.0.0.1", 0)) as listener:
        sender = threading.Thread(target=_send_random, args=(listener.getsockname(), total, chunk), daemon=True)
        sender.start()
        receiver, _ = listener.accept()
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        try:
            with receiver:
                start, cpu = time.perf_counter(), time.thread_time()
                received = _receive_to_file(receiver, fd, chunk, crc32c)
                cpu = time.thread_time() - cpu
                seconds = time.perf_counter() - start
        finally:
            os.close(fd)
            os.unlink(path)
        sender.join()
    if received != total:
        raise LoadError("produce floor: received %d of %d bytes" % (received, total))
    return Loopback(total, seconds, cpu)


def _receive_to_file(sock: socket.socket, fd: int, chunk: int, crc32c) -> int:
    """Receive until the peer closes, a full buffer at a time, each written at its offset and checksummed; returns
    the bytes received."""
    buffer = memoryview(bytearray(chunk))
    position = 0
    while True:
        filled = 0
        while filled < chunk:
            n = sock.recv_into(buffer[filled:])
            if not n:
                break
            filled += n
        if not filled:
            return position
        os.pwrite(fd, buffer[:filled], position)
        if crc32c is not None:
            crc32c(buffer[:filled])
        position += filled


def _send_random(address, total: int, chunk: int) -> None:
    """Send `total` bytes of random data (the same `chunk` again and again), then close."""
    data = os.urandom(chunk)
    with socket.create_connection(address) as sock:
        for offset in range(0, total, chunk):
            sock.sendall(data[:min(chunk, total - offset)])
