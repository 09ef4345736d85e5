"""The network layer over raw sockets: framing, ordering, limits, unsupported requests, file regions, idling."""
from __future__ import annotations

import asyncio
import logging
import os
import struct
import tracemalloc

import pytest

from compatbroker.handlers import api_versions, build_registry
from compatbroker.protocol import FileRegion, RequestHeader, decode_response, encode_request
from compatbroker.protocol.messages import (ApiVersionsRequest, FetchRequest, FetchResponse, FindCoordinatorRequest,
                                            MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse)

from .helpers import RawClient, handler_module, running_server

API_VERSIONS, METADATA, PRODUCE, FETCH = 18, 3, 0, 1


def _metadata_handler(handle, **kwargs):
    return handler_module(METADATA, handle, **kwargs)


def _registry(*modules):
    return build_registry([api_versions, *modules])


# --- ordering and pipelining ----------------------------------------------------------------------------------------

async def test_pipelined_responses_keep_request_order_while_a_slow_handler_waits(tmp_path):
    release = asyncio.Event()
    fast_done = asyncio.Event()

    async def slow(ctx, request):
        await release.wait()
        return MetadataResponse()

    async def fast(ctx, request):
        response = await api_versions.handle(ctx, request)
        fast_done.set()
        return response

    registry = build_registry([_metadata_handler(slow), handler_module(API_VERSIONS, fast, max_version=4)])
    async with running_server(tmp_path, registry) as (_, port):
        client = await RawClient.connect(port)
        await client.send(MetadataRequest(topics=[]), version=1, correlation_id=1)
        await client.send(ApiVersionsRequest(), version=0, correlation_id=2)
        await fast_done.wait()  # the second request ran to completion while the first is still waiting
        release.set()
        first = await client.read_response(METADATA, 1)
        second = await client.read_response(API_VERSIONS, 0)
        assert (first[0].correlation_id, second[0].correlation_id) == (1, 2)
        await client.close()


async def test_handlers_that_finish_in_their_first_step_run_without_a_task(tmp_path, monkeypatch):
    """A request whose handler does not wait (a Produce appending, a Fetch with data) is handled and answered from
    the reader: no Task per request. One that waits goes on in a Task, and is answered in its turn, after the
    responses before it and before those after it."""
    release, last_started = asyncio.Event(), asyncio.Event()

    async def metadata(ctx, request):
        if ctx.header.correlation_id == 7:
            last_started.set()
        if ctx.header.correlation_id == 5:
            await release.wait()  # suspends after its first step: resumed in a Task
        return MetadataResponse()

    registry = build_registry([api_versions, _metadata_handler(metadata)])
    async with running_server(tmp_path, registry) as (_, port):
        client = await RawClient.connect(port)
        await client.send(MetadataRequest(topics=[]), version=1, correlation_id=0)
        await client.read_response(METADATA, 1)  # the connection is set up, its reader and writer running
        loop = asyncio.get_running_loop()
        created = []
        real_create_task = loop.create_task
        monkeypatch.setattr(loop, "create_task",
                            lambda coro, **kw: created.append(coro) or real_create_task(coro, **kw))
        for correlation_id in range(1, 5):
            await client.send(MetadataRequest(topics=[]), version=1, correlation_id=correlation_id)
        answered = [(await client.read_response(METADATA, 1))[0].correlation_id for _ in range(4)]
        assert answered == [1, 2, 3, 4]
        assert created == []
        for correlation_id in (5, 6, 7):
            await client.send(MetadataRequest(topics=[]), version=1, correlation_id=correlation_id)
        await asyncio.wait_for(last_started.wait(), 30)  # 6 and 7 ran while 5 waits (wait_for makes a task too)
        assert len([coro for coro in created if coro.__qualname__ != "Event.wait"]) == 1
        release.set()
        answered = [(await client.read_response(METADATA, 1))[0].correlation_id for _ in range(3)]
        assert answered == [5, 6, 7]
        await client.close()


async def test_queued_max_requests_bounds_requests_in_flight_per_connection(tmp_path):
    events = []
    releases = [asyncio.Event() for _ in range(5)]
    two_started = asyncio.Event()

    async def slow(ctx, request):
        index = ctx.header.correlation_id
        events.append(("start", index))
        if sum(kind == "start" for kind, _ in events) == 2:
            two_started.set()
        await releases[index].wait()
        events.append(("end", index))
        return MetadataResponse()

    async with running_server(tmp_path, _registry(_metadata_handler(slow)), queued_max_requests=2) as (_, port):
        client = await RawClient.connect(port)
        frames = b"".join(
            struct.pack(">i", len(frame)) + frame for frame in (
                encode_request(RequestHeader(request_api_key=METADATA, request_api_version=1, correlation_id=i,
                                             client_id="c"), MetadataRequest(topics=[])) for i in range(5)))
        client.writer.write(frames)  # one write: the server could read all five at once
        await client.writer.drain()
        await two_started.wait()
        for index in range(5):
            releases[index].set()
            header, _ = await client.read_response(METADATA, 1)
            assert header.correlation_id == index
        in_flight = peak = 0
        for kind, _ in events:
            in_flight += 1 if kind == "start" else -1
            peak = max(peak, in_flight)
        assert peak == 2
        assert [index for kind, index in events if kind == "start"] == [0, 1, 2, 3, 4]
        await client.close()


async def test_request_without_response_is_skipped_and_later_responses_still_flow(tmp_path):
    async def produce(ctx, request):
        return None if request.acks == 0 else ProduceResponse()

    async with running_server(tmp_path, _registry(handler_module(PRODUCE, produce))) as (_, port):
        client = await RawClient.connect(port)
        await client.send(ProduceRequest(acks=0, timeout_ms=1000), version=3, correlation_id=1)
        await client.send(ApiVersionsRequest(), version=0, correlation_id=2)
        await client.send(ProduceRequest(acks=1, timeout_ms=1000), version=3, correlation_id=3)
        header, _ = await client.read_response(API_VERSIONS, 0)
        assert header.correlation_id == 2
        header, _ = await client.read_response(PRODUCE, 3)
        assert header.correlation_id == 3
        await client.close()


# --- frame limits ---------------------------------------------------------------------------------------------------

async def test_frame_over_the_limit_closes_the_connection_before_allocating(tmp_path, caplog):
    async with running_server(tmp_path) as (_, port):
        client = await RawClient.connect(port)
        tracemalloc.start()
        try:
            client.writer.write(struct.pack(">i", 104_857_601))  # one byte over socket.request.max.bytes
            await client.writer.drain()
            assert await client.closed_by_server()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 4 * 1024 * 1024
        assert "socket.request.max.bytes" in caplog.text
        await client.close()


async def test_frame_limit_follows_configuration_and_negative_sizes_close(tmp_path):
    def frame(name: str, correlation_id: int) -> bytes:
        return encode_request(RequestHeader(request_api_key=API_VERSIONS, request_api_version=3,
                                            correlation_id=correlation_id, client_id="c"),
                              ApiVersionsRequest(client_software_name=name, client_software_version="1"))

    at_limit, over_limit = frame("n", 1), frame("nn", 2)
    async with running_server(tmp_path, socket_request_max_bytes=len(at_limit)) as (_, port):
        client = await RawClient.connect(port)
        await client.send_frame(at_limit)
        header, body = await client.read_response(API_VERSIONS, 3)
        assert (header.correlation_id, body.error_code) == (1, 0)
        await client.send_frame(over_limit)
        assert await client.closed_by_server()
        await client.close()

        client = await RawClient.connect(port)
        client.writer.write(struct.pack(">i", -1))
        assert await client.closed_by_server()
        await client.close()


async def test_large_frame_arriving_in_pieces_is_assembled(tmp_path):
    received = []

    async def produce(ctx, request):
        received.append(bytes(request.topic_data[0].partition_data[0].records))
        return ProduceResponse()

    records = os.urandom(3 * 65536 + 17)  # larger than the receive buffer
    body = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
        name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)])])
    frame = encode_request(RequestHeader(request_api_key=PRODUCE, request_api_version=3, correlation_id=9,
                                         client_id="c"), body)
    data = struct.pack(">i", len(frame)) + frame
    async with running_server(tmp_path, _registry(handler_module(PRODUCE, produce))) as (_, port):
        client = await RawClient.connect(port)
        for start in range(0, len(data), 50_000):
            client.writer.write(data[start:start + 50_000])
            await client.writer.drain()
        header, _ = await client.read_response(PRODUCE, 3)
        assert header.correlation_id == 9
        assert received == [records]
        await client.close()


async def test_large_frame_buffers_are_reused_only_after_their_handler_is_done(tmp_path):
    """The reader keeps a spare buffer for large frames; a handler still holding its frame across an await must not
    see it overwritten by the next pipelined frame, and frames read into the spare later hold their own bytes."""
    release_first, second_done = asyncio.Event(), asyncio.Event()
    received = []

    async def produce(ctx, request):
        records = request.topic_data[0].partition_data[0].records  # a view over the frame buffer
        if ctx.header.correlation_id == 1:
            await release_first.wait()
        received.append((ctx.header.correlation_id, bytes(records)))
        if ctx.header.correlation_id == 2:
            second_done.set()
        return ProduceResponse()

    payloads = [os.urandom(size) for size in (5 * 65536, 4 * 65536, 3 * 65536, 5 * 65536 + 3)]
    async with running_server(tmp_path, _registry(handler_module(PRODUCE, produce))) as (_, port):
        client = await RawClient.connect(port)
        for correlation_id, records in enumerate(payloads[:2], start=1):
            await client.send(_produce(records), version=3, correlation_id=correlation_id)
        await second_done.wait()  # the second handler finishes while the first still holds its frame
        release_first.set()
        for correlation_id in (1, 2):
            header, _ = await client.read_response(PRODUCE, 3)
            assert header.correlation_id == correlation_id
        for correlation_id, records in enumerate(payloads[2:], start=3):  # into the spare buffer, one at a time
            await client.send(_produce(records), version=3, correlation_id=correlation_id)
            header, _ = await client.read_response(PRODUCE, 3)
            assert header.correlation_id == correlation_id
        await client.close()
    assert sorted(received) == list(enumerate(payloads, start=1))


async def test_pipelined_large_frames_share_a_few_buffers(tmp_path):
    """Large frames that arrive back to back (a producer with many requests in flight) are read into the buffers
    that earlier handlers gave back, rather than into fresh memory each: the reader lets the handlers it started run
    before it reads on once no spare buffer is left."""
    buffers = []

    async def produce(ctx, request):
        buffers.append(request.topic_data[0].partition_data[0].records.obj)  # kept alive: ids stay distinct
        return ProduceResponse()

    frames = 20
    async with running_server(tmp_path, _registry(handler_module(PRODUCE, produce))) as (_, port):
        client = await RawClient.connect(port)
        for correlation_id in range(frames):  # all written before the first answer is read
            await client.send(_produce(os.urandom(3 * 65536)), version=3, correlation_id=correlation_id)
        for correlation_id in range(frames):
            header, _ = await client.read_response(PRODUCE, 3)
            assert header.correlation_id == correlation_id
        await client.close()
    assert len(buffers) == frames
    assert len({id(buffer) for buffer in buffers}) <= 3


def _produce(records: bytes) -> ProduceRequest:
    return ProduceRequest(acks=1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
        name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)])])


# --- ApiVersions of an unknown version, and other unsupported requests ----------------------------------------------

def _api_versions_v5_frame(correlation_id: int, client_id: bytes = b"kafka-python") -> bytes:
    """ApiVersions v5, newer than any schema: request header v2, then a body we never decode."""
    header = struct.pack(">hhih", API_VERSIONS, 5, correlation_id, len(client_id)) + client_id + b"\x00"
    body = b"\x0dkafka-python\x073.0.12\x00"
    return header + body


async def test_api_versions_newer_than_ours_gets_kafkas_v0_error_answer(tmp_path):
    async with running_server(tmp_path) as (_, port):
        client = await RawClient.connect(port)
        await client.send_frame(_api_versions_v5_frame(77))
        frame = await client.read_frame()
        # correlation id, error 35, int32 array count 1, entry [18, 0, 4], and nothing else (no throttle time)
        assert frame == struct.pack(">ihihhh", 77, 35, 1, 18, 0, 4)

        from kafka.protocol.metadata.api_versions import ApiVersionsResponse as KafkaPythonApiVersionsResponse
        answer = KafkaPythonApiVersionsResponse.decode(frame, version=4, header=True)
        assert answer.error_code == 35
        assert [(k.api_key, k.min_version, k.max_version) for k in answer.api_keys] == [(18, 0, 4)]

        # the connection stays usable: the client retries with the version we told it
        await client.send(ApiVersionsRequest(client_software_name="kafka-python", client_software_version="3.0.12"),
                          version=4, correlation_id=78)
        header, body = await client.read_response(API_VERSIONS, 4)
        assert (header.correlation_id, body.error_code) == (78, 0)
        await client.close()


async def test_api_versions_above_a_lowered_maximum_gets_the_error_answer_with_that_maximum(tmp_path):
    lowered = handler_module(API_VERSIONS, api_versions.handle, max_version=2)
    async with running_server(tmp_path, build_registry([lowered])) as (_, port):
        client = await RawClient.connect(port)
        await client.send(ApiVersionsRequest(client_software_name="x", client_software_version="1"), version=3,
                          correlation_id=5)
        frame = await client.read_frame()
        assert frame == struct.pack(">ihihhh", 5, 35, 1, 18, 0, 2)
        await client.close()


@pytest.mark.parametrize("version", [0, 4])
async def test_find_coordinator_which_no_handler_serves_closes_with_a_log_line(tmp_path, caplog, version):
    async with running_server(tmp_path) as (_, port):
        client = await RawClient.connect(port)
        await client.send(FindCoordinatorRequest(), version=version, correlation_id=1, client_id="probe-client")
        assert await client.closed_by_server()
        line = next(r.getMessage() for r in caplog.records if "probe-client" in r.getMessage())
        assert "FindCoordinator" in line and f"version {version}" in line
        await client.close()


async def test_unknown_api_key_and_version_outside_the_handler_range_close(tmp_path, caplog):
    async def handle(ctx, request):
        return MetadataResponse()

    async with running_server(tmp_path, _registry(_metadata_handler(handle, max_version=5))) as (_, port):
        client = await RawClient.connect(port)
        await client.send_frame(struct.pack(">hhih", 999, 0, 1, 4) + b"mine")
        assert await client.closed_by_server()
        assert "'mine'" in caplog.text and "API key 999" in caplog.text
        await client.close()

        client = await RawClient.connect(port)
        await client.send(MetadataRequest(topics=[]), version=5, correlation_id=1)
        header, _ = await client.read_response(METADATA, 5)
        assert header.correlation_id == 1
        await client.send(MetadataRequest(topics=[]), version=6, correlation_id=2, client_id="too-new")
        assert await client.closed_by_server()
        assert any("too-new" in r.getMessage() and "Metadata version 6" in r.getMessage() for r in caplog.records)
        await client.close()


async def test_malformed_request_closes_the_connection(tmp_path, caplog):
    async with running_server(tmp_path) as (_, port):
        client = await RawClient.connect(port)
        # ApiVersions v3 whose compact string claims 20 bytes that are not there
        await client.send_frame(struct.pack(">hhih", API_VERSIONS, 3, 1, 1) + b"c\x00\x15abc")
        assert await client.closed_by_server()
        assert "malformed request" in caplog.text
        await client.close()


# --- handler failures -----------------------------------------------------------------------------------------------

async def test_failing_handler_closes_only_its_connection_after_earlier_responses(tmp_path, caplog):
    async def broken(ctx, request):
        raise RuntimeError("boom")

    async with running_server(tmp_path, _registry(_metadata_handler(broken))) as (_, port):
        client = await RawClient.connect(port)
        await client.send(ApiVersionsRequest(), version=0, correlation_id=1)
        await client.send(MetadataRequest(topics=[]), version=1, correlation_id=2, client_id="victim")
        await client.send(ApiVersionsRequest(), version=0, correlation_id=3)
        header, _ = await client.read_response(API_VERSIONS, 0)
        assert header.correlation_id == 1
        assert await client.closed_by_server()
        failure = next(r for r in caplog.records if "victim" in r.getMessage())
        assert failure.exc_info is not None and "boom" in str(failure.exc_info[1])
        await client.close()

        other = await RawClient.connect(port)  # the broker carries on
        await other.send(ApiVersionsRequest(), version=0, correlation_id=4)
        header, _ = await other.read_response(API_VERSIONS, 0)
        assert header.correlation_id == 4
        await other.close()


# --- responses holding file regions ---------------------------------------------------------------------------------

def _fetch_response(region) -> FetchResponse:
    partition = FetchResponse.PartitionData(partition_index=0, high_watermark=1, last_stable_offset=1,
                                            records=region)
    return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[partition])])


async def test_file_regions_go_out_with_sendfile_byte_for_byte(tmp_path, monkeypatch):
    payload = os.urandom(8 * 1024 * 1024)
    path = tmp_path / "segment.log"
    path.write_bytes(b"x" * 100 + payload + b"y" * 100)
    sendfile_calls = []
    real_sendfile = os.sendfile

    def counting_sendfile(out_fd, in_fd, offset, count):
        sent = real_sendfile(out_fd, in_fd, offset, count)
        sendfile_calls.append((in_fd, sent))
        return sent

    monkeypatch.setattr(os, "sendfile", counting_sendfile)
    with open(path, "rb") as segment:
        async def fetch(ctx, request):
            return _fetch_response(FileRegion(segment, 100, len(payload)))

        async with running_server(tmp_path, _registry(handler_module(FETCH, fetch))) as (_, port):
            client = await RawClient.connect(port)
            await client.send(FetchRequest(max_wait_ms=0), version=4, correlation_id=12)
            await client.send(ApiVersionsRequest(), version=0, correlation_id=13)
            header, body = decode_response(FETCH, 4, await client.read_frame())
            assert header.correlation_id == 12
            assert bytes(body.responses[0].partitions[0].records) == payload
            header, _ = await client.read_response(API_VERSIONS, 0)
            assert header.correlation_id == 13
            await client.close()
        assert {fd for fd, _ in sendfile_calls} == {segment.fileno()}
        assert sum(sent for _, sent in sendfile_calls) == len(payload)


async def test_region_past_the_end_of_its_file_closes_the_connection(tmp_path):
    path = tmp_path / "short.log"
    path.write_bytes(b"z" * 1000)
    with open(path, "rb") as segment:
        async def fetch(ctx, request):
            return _fetch_response(FileRegion(segment, 500, 1000))  # the file holds only 500 of these bytes

        async with running_server(tmp_path, _registry(handler_module(FETCH, fetch))) as (_, port):
            client = await RawClient.connect(port)
            await client.send(FetchRequest(max_wait_ms=0), version=4, correlation_id=1)
            received = await client.reader.read()  # everything until the server closes
            (size,) = struct.unpack_from(">i", received)
            assert len(received) < 4 + size  # the frame was cut short, and the connection closed
            await client.close()


# --- idle connections and stopping ----------------------------------------------------------------------------------

async def test_idle_connection_is_closed_after_connections_max_idle_ms(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="compatbroker")
    loop = asyncio.get_running_loop()
    async with running_server(tmp_path, connections_max_idle_ms=150) as (_, port):
        client = await RawClient.connect(port)
        before_last_request = loop.time()
        await client.send(ApiVersionsRequest(), version=0, correlation_id=1)
        await client.read_response(API_VERSIONS, 0)
        assert await client.closed_by_server()
        assert loop.time() - before_last_request >= 0.15
        assert "idle for" in caplog.text
        await client.close()


async def test_connection_waiting_for_a_response_is_not_idle(tmp_path):
    release = asyncio.Event()
    started = asyncio.Event()

    async def slow(ctx, request):
        started.set()
        await release.wait()
        return MetadataResponse()

    async with running_server(tmp_path, _registry(_metadata_handler(slow)),
                              connections_max_idle_ms=150) as (_, port):
        busy = await RawClient.connect(port)
        await busy.send(MetadataRequest(topics=[]), version=1, correlation_id=1)
        await started.wait()
        idle = await RawClient.connect(port)
        assert await idle.closed_by_server()  # a full idle period has passed for both connections
        with pytest.raises(asyncio.TimeoutError):  # ... and the busy one is still open
            await asyncio.wait_for(busy.reader.read(1), 0.25)
        release.set()
        header, _ = await busy.read_response(METADATA, 1)
        assert header.correlation_id == 1
        await busy.close()
        await idle.close()


async def test_stop_answers_requests_in_flight_then_closes(tmp_path):
    started = asyncio.Event()

    async def long_poll(ctx, request):
        started.set()
        await ctx.broker.wait_for_append([("t", 0)], 30)  # woken by the server stopping, not by the timeout
        return MetadataResponse()

    async with running_server(tmp_path, _registry(_metadata_handler(long_poll))) as (server, port):
        client = await RawClient.connect(port)
        await client.send(MetadataRequest(topics=[]), version=1, correlation_id=3)
        await started.wait()
        loop = asyncio.get_running_loop()
        began = loop.time()
        await server.stop()
        assert loop.time() - began < 5
        header, _ = await client.read_response(METADATA, 1)
        assert header.correlation_id == 3
        assert await client.closed_by_server()
        assert server.connection_count == 0
        await client.close()
        with pytest.raises(OSError):
            await RawClient.connect(port)


async def test_wildcard_listener_gives_handlers_the_address_the_client_reached(tmp_path):
    seen = []

    async def record(ctx, request):
        seen.append((ctx.listener_host, ctx.listener_port, ctx.client_id, ctx.peer))
        return MetadataResponse()

    async with running_server(tmp_path, _registry(_metadata_handler(record)), listeners="PLAINTEXT://:0",
                              advertised_listeners="PLAINTEXT://broker.example:0") as (server, port):
        client = await RawClient.connect(port)
        await client.send(MetadataRequest(topics=[]), version=1, correlation_id=1, client_id="where")
        await client.read_response(METADATA, 1)
        await client.close()
        assert seen[0][:3] == ("127.0.0.1", port, "where")
        assert seen[0][3].startswith("127.0.0.1:")
        assert server.broker.advertised_endpoint("127.0.0.1", port) == ("broker.example", port)


async def test_logging_of_unsupported_requests_is_a_warning(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    async with running_server(tmp_path) as (_, port):
        client = await RawClient.connect(port)
        await client.send(FindCoordinatorRequest(), version=1, correlation_id=1, client_id="warned")
        assert await client.closed_by_server()
        assert any(r.levelno == logging.WARNING and "warned" in r.getMessage() for r in caplog.records)
        await client.close()


async def test_a_closed_connection_leaves_nothing_behind(tmp_path):
    import gc
    import weakref

    async with running_server(tmp_path, connections_max_idle_ms=60_000) as (server, port):
        client = await RawClient.connect(port)
        await client.send(ApiVersionsRequest(), version=0, correlation_id=1)
        await client.read_response(API_VERSIONS, 0)
        (connection, task), = server._connections.items()
        reference = weakref.ref(connection)
        del connection
        await client.close()
        await task  # the server saw the end of the stream and finished the connection
        task = None
        gc.collect()
        assert reference() is None and server.connection_count == 0


async def test_a_client_that_leaves_during_a_long_poll_is_disconnected_at_once(tmp_path):
    """Kafka closes a connection at the end of its stream. A Fetch long poll of max_wait_ms near Integer.MAX_VALUE
    (found by the fuzzer) must not hold the socket until it would end: the handler learns that its client left."""
    from compatbroker.handlers import fetch

    async with running_server(tmp_path, _registry(fetch)) as (server, port):
        server.broker.create_topic("quiet", 1)
        client = await RawClient.connect(port)
        request = FetchRequest(max_wait_ms=2**31 - 2, min_bytes=1, max_bytes=1 << 20, topics=[FetchRequest.FetchTopic(
            topic="quiet", partitions=[FetchRequest.FetchPartition(partition=0, fetch_offset=0,
                                                                    partition_max_bytes=1 << 20)])])
        await client.send(request, version=11, correlation_id=1)
        (_, task), = server._connections.items()
        for _ in range(2000):  # until the fetch waits for an append (generous: 20 s at least)
            if server.broker._append_waiters:
                break
            await asyncio.sleep(0.01)
        assert server.broker._append_waiters and not task.done()
        await client.close()
        await asyncio.wait_for(task, 20)  # the connection ended without waiting out the long poll
        assert server.connection_count == 0


async def test_requests_read_before_the_client_leaves_still_run(tmp_path):
    """Kafka processes what it has read from a connection that then closes (an acks=0 producer sends and leaves):
    every handler started still runs to its end."""
    finished = []
    started = asyncio.Event()

    async def slow(ctx, request):
        started.set()
        await asyncio.sleep(0.2)  # a handler that awaits before it changes state (its client is gone by then)
        finished.append(ctx.header.correlation_id)
        return MetadataResponse()

    registry = build_registry([api_versions, _metadata_handler(slow)])
    async with running_server(tmp_path, registry) as (server, port):
        client = await RawClient.connect(port)
        for correlation_id in (1, 2, 3):
            await client.send(MetadataRequest(topics=[]), version=1, correlation_id=correlation_id)
        await started.wait()
        (_, task), = server._connections.items()
        await client.close()
        await asyncio.wait_for(task, 20)
        assert finished == [1, 2, 3]
