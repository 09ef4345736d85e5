"""The HTTP/JSON control endpoint against a broker on the test's event loop, driven by the Python client (in a
worker thread, since it blocks), by raw Kafka requests on the wire and by raw HTTP requests (malformed ones, and
those a browser sends from another site's page)."""
from __future__ import annotations

import asyncio
import contextlib
import json
import time
import urllib.request
from urllib.parse import urlsplit

import pytest

from compatbroker.config import BrokerConfig
from compatbroker.toolkit.control import ControlError
from compatbroker.toolkit.control.client import ControlClient
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import ApiVersionsRequest, MetadataRequest, OffsetCommitRequest, ProduceRequest
from compatbroker.protocol.records import build_batch
from compatbroker.server.run import ClusterRuntime
from compatbroker.toolkit.runtime import toolkit_for
from tests.server.helpers import RawClient

PRODUCE, METADATA, API_VERSIONS, OFFSET_COMMIT = 0, 3, 18, 8


@contextlib.asynccontextmanager
async def running(tmp_path, **settings):
    """A broker with a control endpoint on free ports; yields (runtime, client)."""
    properties = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data")} | settings
    toolkit = toolkit_for(control_listen="127.0.0.1:0")
    runtime = ClusterRuntime(BrokerConfig(properties), **toolkit.runtime_options())
    await runtime.start()
    try:
        yield runtime, ControlClient(toolkit.control.url, timeout_s=10)
    finally:
        await runtime.stop()


async def call(function, *args):
    return await asyncio.to_thread(function, *args)


def produce_request(topic: str, value: bytes, acks: int = -1) -> ProduceRequest:
    batch = build_batch([(b"key", value, [("h", b"1")], 1_700_000_000_000)])
    return ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])


async def produce(client: RawClient, topic: str, value: bytes, correlation_id: int):
    await client.send(produce_request(topic, value), version=9, correlation_id=correlation_id)
    _, response = await client.read_response(PRODUCE, 9)
    return response.responses[0].partition_responses[0]


async def test_an_injected_produce_error_is_answered_in_kafkas_form_and_nothing_is_stored(tmp_path):
    async with running(tmp_path) as (runtime, control):
        await call(control.create_topic, "orders", 1)
        rule = await call(control.inject_error, "Produce", "NOT_LEADER_OR_FOLLOWER", 2)
        assert rule == {"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "remaining": 2, "topic": None}
        client = await RawClient.connect(runtime.server.listeners[0].port)
        try:
            answers = [await produce(client, "orders", b"v%d" % i, correlation_id=i) for i in range(3)]
        finally:
            await client.close()
        assert [(a.error_code, a.base_offset) for a in answers] == [(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)] * 2 + \
            [(0, 0)]
        records = await call(control.records, "orders", 0)
        assert [(r["offset"], r["key"], r["value"], r["headers"]) for r in records] == [
            (0, b"key", b"v2", [["h", b"1"]])]
        log = await call(control.requests, 0, "Produce")
        assert [(e["injected_error"], e["served"]) for e in log] == [("NOT_LEADER_OR_FOLLOWER", False)] * 2 + \
            [(None, True)]
        assert (await call(control.faults))["errors"] == []


async def test_a_topic_filter_spares_other_topics(tmp_path):
    async with running(tmp_path) as (runtime, control):
        for topic in ("fine", "doomed"):
            await call(control.create_topic, topic)
        await call(control.inject_error, "Produce", "NOT_ENOUGH_REPLICAS", None, "doomed")
        client = await RawClient.connect(runtime.server.listeners[0].port)
        try:
            spared = await produce(client, "fine", b"x", 1)
            failed = await produce(client, "doomed", b"x", 2)
        finally:
            await client.close()
        assert (spared.error_code, failed.error_code) == (0, ErrorCode.NOT_ENOUGH_REPLICAS)


async def test_produce_with_acks_zero_and_an_injected_error_closes_the_connection(tmp_path):
    async with running(tmp_path) as (runtime, control):
        await call(control.inject_error, "Produce", "NOT_LEADER_OR_FOLLOWER")
        client = await RawClient.connect(runtime.server.listeners[0].port)
        try:
            await client.send(produce_request("t", b"x", acks=0), version=9, correlation_id=1)
            assert await client.closed_by_server()
        finally:
            await client.close()


async def test_latency_delays_only_the_api_it_names(tmp_path):
    async with running(tmp_path) as (runtime, control):
        await call(control.inject_latency, "Metadata", 300)
        client = await RawClient.connect(runtime.server.listeners[0].port)
        try:
            began = time.monotonic()
            await client.send(ApiVersionsRequest(), version=0, correlation_id=1)
            await client.read_response(API_VERSIONS, 0)
            quick = time.monotonic() - began
            began = time.monotonic()
            await client.send(MetadataRequest(topics=[]), version=9, correlation_id=2)
            _, metadata = await client.read_response(METADATA, 9)
            slow = time.monotonic() - began
        finally:
            await client.close()
        assert slow >= 0.3 and slow - quick >= 0.2
        assert metadata.brokers  # served normally after the wait
        assert [e["delay_ms"] for e in await call(control.requests, 0, "Metadata")] == [300]


async def test_drop_closes_the_connection_of_the_request_after_the_served_ones(tmp_path):
    async with running(tmp_path) as (runtime, control):
        await call(control.drop_connections_after, 1)
        client = await RawClient.connect(runtime.server.listeners[0].port)
        try:
            await client.send(ApiVersionsRequest(), version=0, correlation_id=1)
            header, _ = await client.read_response(API_VERSIONS, 0)
            assert header.correlation_id == 1
            await client.send(ApiVersionsRequest(), version=0, correlation_id=2)
            assert await client.closed_by_server()
        finally:
            await client.close()
        second = await RawClient.connect(runtime.server.listeners[0].port)  # the rule is used up
        try:
            await second.send(ApiVersionsRequest(), version=0, correlation_id=3)
            header, _ = await second.read_response(API_VERSIONS, 0)
            assert header.correlation_id == 3
        finally:
            await second.close()
        assert [e["dropped"] for e in await call(control.requests)] == [False, True, False]


async def test_down_cuts_connections_and_refuses_new_ones_until_up_on_the_same_port(tmp_path):
    async with running(tmp_path) as (runtime, control):
        port = runtime.server.listeners[0].port
        client = await RawClient.connect(port)
        status = await call(control.down)
        assert status["up"] is False
        try:
            assert await client.closed_by_server()
        finally:
            await client.close()
        with pytest.raises(OSError):
            await RawClient.connect(port)
        status = await call(control.up)
        assert (status["up"], status["bootstrap_servers"]) == (True, f"127.0.0.1:{port}")
        again = await RawClient.connect(port)
        try:
            await again.send(ApiVersionsRequest(), version=0, correlation_id=5)
            header, _ = await again.read_response(API_VERSIONS, 0)
            assert header.correlation_id == 5
        finally:
            await again.close()


async def test_the_request_log_shows_api_version_and_client_id(tmp_path):
    async with running(tmp_path) as (runtime, control):
        client = await RawClient.connect(runtime.server.listeners[0].port)
        try:
            await client.send(ApiVersionsRequest(), version=0, correlation_id=1, client_id="app-1")
            await client.read_response(API_VERSIONS, 0)
            await client.send(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")]),
                              version=12, correlation_id=2, client_id="app-1")
            await client.read_response(METADATA, 12)
        finally:
            await client.close()
        log = await call(control.requests)
        assert [(e["seq"], e["api"], e["api_version"], e["client_id"], e["topics"]) for e in log] == [
            (1, "ApiVersions", 0, "app-1", []), (2, "Metadata", 12, "app-1", ["t"])]
        assert [e["seq"] for e in await call(control.requests, 1)] == [2]
        await call(control.clear_requests)
        assert await call(control.requests) == []


async def test_committed_offsets_and_topics_are_listed(tmp_path):
    async with running(tmp_path) as (runtime, control):
        await call(control.create_topic, "orders", 2, {"retention.ms": "60000"})
        client = await RawClient.connect(runtime.server.listeners[0].port)
        commit = OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(name="orders", partitions=[
                OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=1, committed_offset=42)])])
        try:
            for attempt in range(100):  # COORDINATOR_LOAD_IN_PROGRESS until __consumer_offsets is replayed
                await client.send(commit, version=8, correlation_id=attempt)
                _, answer = await client.read_response(OFFSET_COMMIT, 8)
                if answer.topics[0].partitions[0].error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                    break
                await runtime.broker.coordinator.start()
        finally:
            await client.close()
        assert answer.topics[0].partitions[0].error_code == 0
        offsets = await call(control.committed_offsets, "g")
        assert [(o["topic"], o["partition"], o["offset"]) for o in offsets] == [("orders", 1, 42)]
        topics = await call(control.topics)
        assert [(t["name"], t["partitions"], t["internal"]) for t in topics] == [
            ("__consumer_offsets", 50, True), ("orders", 2, False)]


@pytest.mark.parametrize("method,path,body,status", [
    ("GET", "/nowhere", None, 404),
    ("PUT", "/faults", None, 405),
    ("POST", "/faults/errors", {"api": "Produc", "error": "NOT_LEADER_OR_FOLLOWER"}, 400),
    ("POST", "/faults/errors", {"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "cnt": 1}, 400),
    ("POST", "/faults/latency", {"api": "Produce", "ms": -5}, 400),
    ("POST", "/topics", {"name": "bad name"}, 400),
    ("GET", "/records?topic=absent&partition=0", None, 404),
    ("GET", "/records?topic=absent&partition=x", None, 400),
])
async def test_bad_requests_get_an_http_error_with_a_reason(tmp_path, method, path, body, status):
    async with running(tmp_path) as (_, control):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(control.url + path, data=data, method=method)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with pytest.raises(urllib.error.HTTPError) as failure:
            await call(opener.open, request)
        assert failure.value.code == status
        assert json.loads(failure.value.read())["error"]


async def test_the_client_raises_control_error_with_the_reason(tmp_path):
    async with running(tmp_path) as (_, control):
        with pytest.raises(ControlError) as failure:
            await call(control.inject_error, "Produce", "NO_SUCH_ERROR")
        assert failure.value.status == 400 and "NO_SUCH_ERROR" in failure.value.message


async def raw_http(url: str, request: bytes) -> bytes:
    """Send one raw HTTP request to the control endpoint at `url`; the whole answer."""
    address = urlsplit(url)
    reader, writer = await asyncio.open_connection(address.hostname, address.port)
    writer.write(request)
    await writer.drain()
    answer = await reader.read()
    writer.close()
    return answer


async def test_a_malformed_body_is_refused(tmp_path):
    async with running(tmp_path) as (_, control):
        answer = await raw_http(control.url, b"POST /faults/errors HTTP/1.1\r\nContent-Length: 5\r\n\r\n{oops")
        assert answer.startswith(b"HTTP/1.1 400 ")
        assert b"not JSON" in answer


def posted(path: str, host: str, origin: str | None, body: bytes = b"") -> bytes:
    """A browser's "simple" cross-site POST (text/plain: no preflight), with `Origin` when given."""
    origin_field = f"Origin: {origin}\r\n" if origin is not None else ""
    return (f"POST {path} HTTP/1.1\r\nHost: {host}\r\n{origin_field}Content-Type: text/plain\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://127.0.0.1:1", "http://[::1"])
async def test_a_state_change_sent_from_another_sites_page_is_refused_with_one_log_line(tmp_path, caplog, origin):
    rule = json.dumps({"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER"}).encode()
    async with running(tmp_path) as (runtime, control):
        host = urlsplit(control.url).netloc
        with caplog.at_level("WARNING", logger="compatbroker.toolkit.control.http"):
            answer = await raw_http(control.url, posted("/faults/errors", host, origin, rule))
            downed = await raw_http(control.url, posted("/down", host, origin))
        assert answer.startswith(b"HTTP/1.1 403 ") and downed.startswith(b"HTTP/1.1 403 ")
        assert f"POST /faults/errors from {origin} is refused".encode() in answer
        assert [record.getMessage() for record in caplog.records] == [
            f"refused POST {path} from {origin}: not the control listener's own origin"
            for path in ("/faults/errors", "/down")]
        assert await call(control.faults) == {"errors": [], "latency": [], "drops": []}
        assert (await call(control.status))["up"]


async def test_a_state_change_from_the_listeners_own_origin_or_without_origin_goes_ahead(tmp_path):
    rule = json.dumps({"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER"}).encode()
    async with running(tmp_path) as (_, control):
        host = urlsplit(control.url).netloc
        for origin in (control.url, None):
            answer = await raw_http(control.url, posted("/faults/errors", host, origin, rule))
            assert answer.startswith(b"HTTP/1.1 200 "), answer
        assert [entry["remaining"] for entry in (await call(control.faults))["errors"]] == [1, 1]
        # reading needs no check: a foreign page cannot read the answer anyway (no CORS headers)
        status = await raw_http(control.url, f"GET /status HTTP/1.1\r\nHost: {host}\r\nOrigin: null\r\n\r\n".encode())
        assert status.startswith(b"HTTP/1.1 200 ")


@pytest.mark.parametrize("length", ["abc", "-5", "\xb2"])
async def test_a_malformed_content_length_answers_400_not_500(tmp_path, length):
    async with running(tmp_path) as (_, control):
        request = f"POST /down HTTP/1.1\r\nContent-Length: {length}\r\n\r\n".encode("latin-1")
        answer = await raw_http(control.url, request)
        assert answer.startswith(b"HTTP/1.1 400 ") and b"malformed Content-Length" in answer
        assert (await call(control.status))["up"]
