"""Bounded memory and descriptors per connection (issue 14): large frames read as their bytes arrive, the
`queued.max.request.bytes` pool, `max.connections` and `max.connections.per.ip`, the open files limit raised at
start and an accept loop that survives running out of descriptors, and one log line for an expected close."""
from __future__ import annotations

import asyncio
import logging
import re
import resource
import os
import struct

import pytest

from compatbroker.config import BrokerConfig, ConfigError
from compatbroker.handlers import api_versions, build_registry, produce
from compatbroker.protocol import RequestHeader, encode_request
from compatbroker.protocol.messages import ApiVersionsRequest, ProduceRequest, ProduceResponse
from compatbroker.server import ListenError
from compatbroker.server.memory_pool import MemoryPool, RecycledBuffers
from tests.compat.broker_process import BrokerProcess
from tests.handlers.helpers import batch

from . import load
from .helpers import RawClient, handler_module, running_server

API_VERSIONS, PRODUCE = 18, 0
MIB = 1 << 20


async def until(condition, timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def answered(client: RawClient, correlation_id: int) -> bool:
    await client.send(ApiVersionsRequest(), version=0, correlation_id=correlation_id)
    header, _ = await client.read_response(API_VERSIONS, 0)
    return header.correlation_id == correlation_id


def _produce_frame(records: bytes, correlation_id: int, acks: int = 1) -> bytes:
    body = ProduceRequest(acks=acks, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
        name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)])])
    header = RequestHeader(request_api_key=PRODUCE, request_api_version=3, correlation_id=correlation_id,
                           client_id="c")
    return encode_request(header, body)


# --- large frames grow as their bytes arrive ------------------------------------------------------------------------

async def test_a_declared_large_frame_holds_only_the_bytes_received(tmp_path):
    declared = 80 * MIB
    # The pool only serves as the sign that the reader has taken the frame's first bytes.
    async with running_server(tmp_path, queued_max_request_bytes=100 * MIB) as (server, port):
        before = load.rss_bytes(os.getpid())
        client = await RawClient.connect(port)
        client.writer.write(struct.pack(">i", declared) + b"\x00" * 1000)
        await client.writer.drain()
        await until(lambda: server.pool.used == declared)
        assert load.rss_bytes(os.getpid()) - before < 20 * MIB  # was 80 MiB, zero-filled on reading the size
        await client.close()


def test_recycled_buffers_are_reused_best_fit_and_bounded():
    recycled = RecycledBuffers(10 * MIB)
    small, large = recycled.take(3 * MIB), recycled.take(6 * MIB)
    assert (len(small), len(large)) == (3 * MIB, 6 * MIB)  # fresh, of the size asked
    recycled.give(large)
    recycled.give(small)
    assert recycled.take(2 * MIB) is small and recycled.take(2 * MIB) is large
    recycled.give(recycled.take(11 * MIB))  # over the bound: not kept
    for buffer in (recycled.take(4 * MIB), recycled.take(4 * MIB), recycled.take(4 * MIB)):
        recycled.give(buffer)  # the oldest is dropped to stay within 10 MiB
    kept = [recycled.take(1), recycled.take(1), recycled.take(1)]
    assert [len(buffer) for buffer in kept] == [4 * MIB, 4 * MIB, 1]


# --- queued.max.request.bytes ---------------------------------------------------------------------------------------

async def test_memory_pool_waiters_are_granted_in_order_while_memory_is_free():
    pool = MemoryPool(100)
    await pool.reserve(100)
    granted = []

    async def take(name, size):
        await pool.reserve(size)
        granted.append(name)

    tasks = [asyncio.create_task(take(name, size)) for name, size in (("first", 60), ("second", 10))]
    await until(lambda: pool.waiting == 2)
    pool.release(30)  # 70 used: the first waiter fits (a frame is granted whenever some memory is free)
    await until(lambda: granted == ["first"])
    assert pool.used == 130 and pool.waiting == 1  # over capacity by that frame: the second waits
    pool.release(100)
    await asyncio.gather(*tasks)
    assert granted == ["first", "second"] and pool.used == 40


async def test_a_cancelled_waiter_leaves_the_pool_as_it_was():
    pool = MemoryPool(10)
    await pool.reserve(10)
    waiter = asyncio.create_task(pool.reserve(5))
    await until(lambda: pool.waiting == 1)
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    pool.release(10)
    assert pool.used == 0 and pool.waiting == 0


async def test_queued_max_request_bytes_stops_reading_until_a_handler_releases_memory(tmp_path):
    release = asyncio.Event()

    async def slow_produce(ctx, request):
        await release.wait()
        return ProduceResponse()

    frame = _produce_frame(b"r" * 200_000, correlation_id=1)
    registry = build_registry([api_versions, handler_module(PRODUCE, slow_produce)])
    limits = {"socket_request_max_bytes": len(frame), "queued_max_request_bytes": len(frame)}
    async with running_server(tmp_path, registry, **limits) as (server, port):
        silent = await RawClient.connect(port)  # declares a frame and sends nothing: it reserves nothing
        silent.writer.write(struct.pack(">i", len(frame)))
        producer = await RawClient.connect(port)
        await producer.send_frame(frame)
        await until(lambda: server.pool.used == len(frame))  # the whole pool, held while the handler runs
        other = await RawClient.connect(port)
        reply = asyncio.create_task(answered(other, 7))
        await until(lambda: server.pool.waiting == 1)
        assert not reply.done()
        release.set()
        header, _ = await producer.read_response(PRODUCE, 3)
        assert header.correlation_id == 1
        assert await asyncio.wait_for(reply, 10)
        await until(lambda: server.pool.used == 0)
        for client in (silent, producer, other):
            await client.close()


# --- max.connections and max.connections.per.ip ---------------------------------------------------------------------

async def test_max_connections_stops_accepting_until_a_connection_closes(tmp_path):
    async with running_server(tmp_path, max_connections=2) as (server, port):
        first, second = await RawClient.connect(port), await RawClient.connect(port)
        assert await answered(first, 1) and await answered(second, 2)
        waiting = await RawClient.connect(port)  # completed by the kernel: it waits in the listen backlog
        reply = asyncio.create_task(answered(waiting, 3))
        await until(lambda: server.connection_count == 2 and not server._listening)
        assert not reply.done()
        await first.close()
        assert await asyncio.wait_for(reply, 10)
        assert server.connection_count == 2
        for client in (second, waiting):
            await client.close()


async def test_max_connections_per_ip_closes_the_new_connection_with_kafkas_line(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="compatbroker")
    async with running_server(tmp_path, max_connections_per_ip=1) as (server, port):
        first = await RawClient.connect(port)
        assert await answered(first, 1)
        second = await RawClient.connect(port)
        assert await second.closed_by_server()
        assert ("Rejected connection from 127.0.0.1, address already has the configured maximum of 1 connections."
                in caplog.messages)
        assert await answered(first, 2)
        await first.close()
        await until(lambda: server.connection_count == 0)
        third = await RawClient.connect(port)  # a slot is free again
        assert await answered(third, 3)
        await third.close()
        await second.close()


@pytest.mark.parametrize("overrides", ["localhost:2", "127.0.0.1:2", "127.0.0.2:5,127.0.0.1:2"])
async def test_per_ip_overrides_apply_to_the_address_or_the_host_name(tmp_path, overrides):
    async with running_server(tmp_path, max_connections_per_ip=0,
                              max_connections_per_ip_overrides=overrides) as (_, port):
        clients = [await RawClient.connect(port) for _ in range(3)]
        assert await answered(clients[0], 1) and await answered(clients[1], 2)
        assert await clients[2].closed_by_server()
        for client in clients:
            await client.close()


async def test_an_override_host_that_does_not_resolve_stops_the_start(tmp_path):
    with pytest.raises(ListenError, match=r"max.connections.per.ip.overrides: cannot resolve no-such-host.invalid"):
        async with running_server(tmp_path, max_connections_per_ip_overrides="no-such-host.invalid:3"):
            pass


@pytest.mark.parametrize("properties, message", [
    ({"max.connections.per.ip": "0"},
     "max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property is set."),
    ({"queued.max.request.bytes": "1000"},
     "queued.max.request.bytes must be larger or equal to socket.request.max.bytes"),
    ({"max.connections.per.ip.overrides": "host name:3"}, "is not HOST:COUNT"),
    ({"max.connections.per.ip.overrides": "host:many"}, "max.connections.per.ip.overrides"),
    ({"max.connections": "-1"}, "max.connections=-1 is below the minimum 0"),
])
def test_connection_settings_are_validated_as_kafka_does(properties, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        BrokerConfig(properties)


def test_connection_settings_have_kafkas_defaults_and_parse_overrides():
    config = BrokerConfig({"max.connections.per.ip.overrides": "hostName:100, 127.0.0.1:200,::1:3"})
    assert (config.max_connections, config.max_connections_per_ip, config.queued_max_request_bytes) == \
        (2**31 - 1, 2**31 - 1, -1)
    assert config.max_connections_per_ip_overrides == {"hostName": 100, "127.0.0.1": 200, "::1": 3}
    assert BrokerConfig({"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "h:1",
                         "queued.max.request.bytes": "104857600"}).max_connections_per_ip == 0


def test_serve_applies_connection_limits_given_with_set(tmp_path):
    with BrokerProcess(tmp_path / "data", {"max.connections.per.ip": "1"}) as broker:
        first = load.Client(broker.host, broker.port)
        first.api_versions()
        second = load.Client(broker.host, broker.port)
        assert second.sock.recv(1) == b""  # closed at once
        second.close()
        first.close()
        load.wait_for(lambda: _can_talk(broker), 15, "a connection accepted once the first has closed")


def _can_talk(broker) -> bool:
    client = load.Client(broker.host, broker.port)
    try:
        client.api_versions()
        return True
    except ConnectionError:
        return False
    finally:
        client.close()


# --- log lines ------------------------------------------------------------------------------------------------------

async def test_failed_acks_zero_produce_closes_with_one_warning_and_no_traceback(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="compatbroker")
    registry = build_registry([api_versions, produce])
    frame = _produce_frame(bytes(batch(b"lost")), correlation_id=1, acks=0)  # topic "t" does not exist
    async with running_server(tmp_path, registry, auto_create_topics_enable="false") as (_, port):
        client = await RawClient.connect(port)
        await client.send_frame(frame)
        assert await client.closed_by_server()
        await client.close()
    lines = [record for record in caplog.records if record.levelno >= logging.WARNING]
    assert len(lines) == 1, [record.getMessage() for record in lines]
    assert lines[0].levelno == logging.WARNING and lines[0].exc_info is None
    assert "acks=0 produce" in lines[0].getMessage() and "UNKNOWN_TOPIC_OR_PARTITION" in lines[0].getMessage()


# --- file descriptors -----------------------------------------------------------------------------------------------

def test_start_raises_the_soft_open_files_limit_to_the_hard_limit(tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lowered = max(256, load.fd_count(os.getpid()) + 64)  # room for what this process opens meanwhile
    if hard == resource.RLIM_INFINITY or hard <= lowered:
        pytest.skip(f"needs a finite hard limit above {lowered}, have {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowered, hard))  # inherited by the broker process
    try:
        broker = BrokerProcess(tmp_path / "data").start()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        assert _soft_open_files_limit(broker.pid) == hard
        assert f"open files limit: {hard} (hard limit {hard})" in broker.log_path.read_text()
    finally:
        broker.stop()


def _soft_open_files_limit(pid: int) -> int:
    with open(f"/proc/{pid}/limits") as limits:
        line = next(line for line in limits if line.startswith("Max open files"))
    return int(line.split()[3])


def test_accept_loop_serves_existing_connections_and_recovers_after_running_out_of_fds(tmp_path):
    with BrokerProcess(tmp_path / "data") as broker:
        existing = load.Client(broker.host, broker.port)
        existing.api_versions()
        limit = load.fd_count(broker.pid) + 20
        resource.prlimit(broker.pid, resource.RLIMIT_NOFILE, (limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        extra = []
        try:
            # More connections than the broker has descriptors left: the rest wait in the listen backlog.
            extra = load.open_connections(broker.host, broker.port, 40)
            load.wait_for(lambda: "cannot accept connections" in broker.log_path.read_text(), 30,
                          "the broker to run out of file descriptors")
            assert existing.metadata().brokers  # still served
        finally:
            load.close_all(extra)
        load.wait_for(lambda: _can_talk(broker), 30, "a new connection accepted once descriptors are free")
        assert existing.api_versions().error_code == 0
        existing.close()
        log = broker.log_path.read_text()
    assert log.count("cannot accept connections") == 1  # not once a second
    assert re.search(r"WARNING .*cannot accept connections on 127\.0\.0\.1:\d+: \[Errno 24\]", log)
    assert "INFO compatbroker.server.server: accepting connections on" in log
    assert "Traceback" not in log


# --- memory with many connections -----------------------------------------------------------------------------------

def test_silent_100_mib_declarations_keep_the_broker_small_and_others_served(tmp_path):
    connections, step, bound = 200, 20, 300 * 1_000_000
    with BrokerProcess(tmp_path / "data") as broker:
        baseline = load.socket_count(broker.pid)
        silent = []
        try:
            for opened in range(step, connections + 1, step):  # in steps, so a regression fails before it swaps
                silent += load.open_connections(broker.host, broker.port, step, load.declaration(100 * MIB))
                load.wait_for(lambda: load.socket_count(broker.pid) >= baseline + opened, 30, "the connections")
                assert load.metadata_latencies(broker.host, broker.port, 1)
                assert load.rss_bytes(broker.pid) < bound, f"RSS {load.rss_bytes(broker.pid)} with {opened} silent"
            rss = load.rss_bytes(broker.pid)
        finally:
            load.close_all(silent)
    print(f"\nbroker RSS with {connections} silent 100 MiB declarations: {rss / 1e6:.1f} MB")


def test_metadata_is_answered_during_1000_connections_and_a_slowloris_of_200(tmp_path):
    """The issue's connections test: another client's Metadata is answered promptly all along (the 50 ms p99 target
    is bench/resource_bench.py's; here each answer must come within a generous bound)."""
    with BrokerProcess(tmp_path / "data") as broker:
        baseline = load.socket_count(broker.pid)
        idle = load.open_connections(broker.host, broker.port, 1000)
        try:
            with load.Slowloris(broker.host, broker.port, 200) as slowloris:
                load.wait_for(lambda: load.socket_count(broker.pid) >= baseline + 1200, 60, "1,200 connections")
                latencies = _latencies_while(slowloris, broker)
                assert slowloris.sent > 0 and broker.proc.poll() is None
                rss = load.rss_bytes(broker.pid)
        finally:
            load.close_all(idle)
    p99 = load.percentile(latencies, 0.99)
    print(f"\nMetadata over 1,000 idle + 200 slowloris connections: {len(latencies)} requests, "
          f"p50 {load.percentile(latencies, 0.5) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, max "
          f"{max(latencies) * 1000:.1f} ms; broker RSS {rss / 1e6:.1f} MB")
    assert max(latencies) < 2.0


def _latencies_while(slowloris: load.Slowloris, broker) -> list[float]:
    """Metadata latencies from a separate client, in rounds until the slowloris has dribbled for a while."""
    latencies: list[float] = []
    started = slowloris.sent
    while len(latencies) < 500 or slowloris.sent - started < 30:
        latencies += load.metadata_latencies(broker.host, broker.port, 100)
    return latencies


