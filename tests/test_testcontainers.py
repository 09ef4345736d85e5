"""compatbroker.toolkit.testing.CompatBrokerContainer: the repository's Dockerfile run through testcontainers.

The container tests need a Docker engine; where none answers they are skipped and say so. The import test runs
everywhere.
"""
from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _docker_engine_problem() -> str | None:
    """None when a Docker engine answers, else why not."""
    try:
        import docker
    except ImportError:
        return "the docker package is not installed (pip install testcontainers)"
    try:
        docker.from_env(timeout=5).ping()
    except Exception as exc:  # noqa: BLE001 - any failure to reach the engine means the same here
        return f"no Docker engine answers ({type(exc).__name__}: {str(exc)[:120]})"
    return None


def test_importing_the_module_does_not_import_testcontainers():
    code = ("import sys, compatbroker.toolkit.testing as t; "
            "assert 'testcontainers' not in sys.modules, 'imported eagerly'; "
            "assert t.DEFAULT_IMAGE == 'compatbroker:latest'")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def image():
    problem = _docker_engine_problem()
    if problem is not None:
        pytest.skip(f"CompatBrokerContainer tests need Docker: {problem}")
    from compatbroker.toolkit.testing import CompatBrokerContainer

    return CompatBrokerContainer.build_image(REPO, tag=f"compatbroker:test-{uuid.uuid4().hex[:8]}")


def test_a_client_produces_and_consumes_through_the_container(image):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    from compatbroker.toolkit.testing import CompatBrokerContainer

    with CompatBrokerContainer(image, settings={"num.partitions": "1"}) as broker:
        bootstrap = broker.get_bootstrap_server()
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        for i in range(5):
            producer.send("in-docker", value=f"v{i}".encode()).get(timeout=30)
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=10_000)
        consumer.assign([TopicPartition("in-docker", 0)])
        consumer.seek_to_beginning()
        values = [message.value for _, message in zip(range(5), consumer)]
        consumer.close()
    assert values == [f"v{i}".encode() for i in range(5)]


def test_emulation_reaches_the_container(image):
    from compatbroker.toolkit.emulation import advertised
    from compatbroker.toolkit.testing import CompatBrokerContainer

    with CompatBrokerContainer(image, emulate="2.8") as broker:
        versions = _api_versions(broker.get_bootstrap_server())
    assert versions[3] == advertised("2.8")[3] == (0, 11), "Metadata as Kafka 2.8 advertises it"
    assert versions[18] == (0, 3)


def _api_versions(bootstrap: str) -> dict[int, tuple[int, int]]:
    """ApiVersions v0 over a raw connection: what the broker advertises."""
    from compatbroker.protocol.messages import ApiVersionsRequest
    from tests.async_tests import run_coroutine
    from tests.server.helpers import RawClient

    async def ask():
        host, port = bootstrap.rsplit(":", 1)
        client = await RawClient.connect(int(port), host)
        try:
            await client.send(ApiVersionsRequest(), version=0, correlation_id=7, client_id="tc-test")
            _header, body = await client.read_response(18, 0)
        finally:
            await client.close()
        return {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}

    return run_coroutine(ask())
