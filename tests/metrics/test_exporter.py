"""The `/metrics` endpoint: HTTP answers, malformed requests, addresses; and the request hooks' `on_response`."""
from __future__ import annotations

import asyncio
import logging
import socket
from types import SimpleNamespace

import pytest

from compatbroker import EmbeddedBroker
from compatbroker.metrics.exporter import MetricsExporter
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import ProduceRequest
from compatbroker.server import StartupError
from tests.compat.raw_client import RawClient
from tests.handlers.helpers import batch

from .helpers import scrape


async def _exchange(url: str, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    host, port = url.removeprefix("http://").removesuffix("/metrics").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(raw)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)  # the endpoint closes after one answer
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split(" ")[1]), headers, body


async def _started() -> MetricsExporter:
    exporter = MetricsExporter("127.0.0.1:0")
    line = await exporter.start(SimpleNamespace(cluster=None))
    assert line == f"compatbroker metrics on {exporter.url}"
    return exporter


async def test_get_metrics_answers_the_text_format():
    exporter = await _started()
    try:
        status, headers, body = await _exchange(exporter.url, b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n")
        assert status == 200
        assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        assert int(headers["Content-Length"]) == len(body)
        assert b"# TYPE process_open_fds gauge" in body
        assert b"# TYPE kafka_network_requestmetrics_requests_total counter" in body
        status, headers, body = await _exchange(exporter.url, b"HEAD /metrics HTTP/1.1\r\n\r\n")
        assert status == 200 and body == b"" and int(headers["Content-Length"]) > 0
    finally:
        await exporter.stop()


async def test_other_paths_and_methods_are_refused():
    exporter = await _started()
    try:
        assert (await _exchange(exporter.url, b"GET / HTTP/1.1\r\n\r\n"))[0] == 404
        assert (await _exchange(exporter.url, b"GET /metricsx HTTP/1.0\r\n\r\n"))[0] == 404
        assert (await _exchange(exporter.url, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n"))[0] == 405
    finally:
        await exporter.stop()


async def test_a_malformed_request_gets_400_and_one_log_line(caplog):
    exporter = await _started()
    try:
        with caplog.at_level(logging.INFO, logger="compatbroker.metrics"):
            status, _, _ = await _exchange(exporter.url, b"\x16\x03\x01 hello\r\n\r\n")
            assert status == 400
            status, _, _ = await _exchange(exporter.url, b"GET /metrics " + b"x" * 9000 + b"\r\n\r\n")
            assert status == 400
        lines = [record for record in caplog.records if record.name.startswith("compatbroker.metrics")]
        assert len(lines) == 2
        assert "malformed HTTP request" in lines[0].getMessage()
        assert "over 8192 bytes" in lines[1].getMessage()
        # and the endpoint still answers
        assert (await _exchange(exporter.url, b"GET /metrics HTTP/1.1\r\n\r\n"))[0] == 200
    finally:
        await exporter.stop()


async def test_a_failing_collector_answers_500_and_one_log_line(monkeypatch, caplog):
    from compatbroker.metrics.collector import BrokerCollector

    def broken(self):
        raise RuntimeError("broken collector")

    exporter = await _started()
    try:
        monkeypatch.setattr(BrokerCollector, "collect", broken)
        with caplog.at_level(logging.INFO, logger="compatbroker.metrics"):
            status, _, body = await _exchange(exporter.url, b"GET /metrics HTTP/1.1\r\n\r\n")
        assert status == 500 and b"see the broker's log" in body
        [line] = [record for record in caplog.records if record.name.startswith("compatbroker.metrics")]
        assert line.getMessage() == "metrics: collecting the metrics failed" and line.exc_info is not None
    finally:
        await exporter.stop()


async def test_stop_ends_the_scrapes_in_progress():
    exporter = await _started()
    host, port = exporter.url.removeprefix("http://").removesuffix("/metrics").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"GET /metrics HTTP/1.1\r\n")  # a head not finished: its handler waits for the rest
    await writer.drain()
    for _ in range(1000):  # until the handler has started (each pass lets the loop run)
        if _scrapes_in_progress():
            break
        await asyncio.sleep(0)
    assert _scrapes_in_progress()
    await exporter.stop()
    assert not _scrapes_in_progress()
    try:  # the endpoint has closed the connection: an end of stream, or a reset
        assert await asyncio.wait_for(reader.read(), 10) == b""
    except ConnectionResetError:
        pass
    writer.close()


def _scrapes_in_progress() -> list:
    return [task for task in asyncio.all_tasks() if task.get_coro().__qualname__ == "MetricsExporter._serve"]


async def test_bad_addresses_are_refused_before_starting_and_a_taken_port_at_start():
    for address in ("nonsense", "127.0.0.1:99999", "::1:9100"):
        with pytest.raises(ValueError):
            MetricsExporter(address)
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        exporter = MetricsExporter(f"127.0.0.1:{taken.getsockname()[1]}")
        with pytest.raises(StartupError, match="cannot listen for metrics scrapes"):
            await exporter.start(SimpleNamespace(cluster=None))
    finally:
        taken.close()


def test_each_response_reaches_the_request_hooks_and_the_error_counter():
    """The connection tells the hooks (here the toolkit's request log) each request's latency and first error:
    a Produce to a partition the topic does not have answers UNKNOWN_TOPIC_OR_PARTITION."""
    with EmbeddedBroker(metrics_listen="127.0.0.1:0") as broker:
        broker.create_topic("t", partitions=1)
        name = "kafka_network_requestmetrics_errors_total"
        before = scrape(broker.metrics_url).value(name, request="Produce", error="UNKNOWN_TOPIC_OR_PARTITION")
        host, port = broker.bootstrap_servers.rsplit(":", 1)
        request = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
            name="t", partition_data=[ProduceRequest.PartitionProduceData(index=5, records=batch(b"x"))])])
        with RawClient(SimpleNamespace(host=host, port=int(port)), "metrics-test") as client:
            answer = client.call(request, 9)
        assert answer.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        after = scrape(broker.metrics_url).value(name, request="Produce", error="UNKNOWN_TOPIC_OR_PARTITION")
        assert after - before == 1
        [entry] = broker.requests(api="Produce")
        assert entry.error == "UNKNOWN_TOPIC_OR_PARTITION"
        assert entry.latency_ms is not None and 0 <= entry.latency_ms < 30_000
