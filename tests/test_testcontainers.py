"""compatbroker.toolkit.testing.CompatBrokerContainer: the repository's Dockerfile run through testcontainers.

The `image` fixture builds the Dockerfile (its layers are cached by the engine, so a second run takes seconds) on the
base that tests/setup/containers.sh imports when there is one, since CI has no registry to pull python:3.11-slim
from. A kafka-python client on the host then produces and consumes through the container's port, mapped on
127.0.0.1 and advertised as 127.0.0.1:PORT.

The fixture sets TESTCONTAINERS_RYUK_DISABLED=true unless the environment says otherwise: Ryuk, testcontainers'
reaper, is an image CI cannot pull, and each test's `with` block removes its container itself.

The container tests need a Docker engine. Where none answers they are skipped and say so, except under
tests/run.sh, whose setup (tests/setup/containers.sh) starts one and sets COMPATBROKER_REQUIRE_DOCKER: there a
missing engine fails them. The import test runs everywhere.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TEST_TAG = "compatbroker:test"  # one tag, rebuilt in place: the engine keeps its layers as the build cache
# The Debian base tests/setup/containers.sh imports (it exports its name in COMPATBROKER_BASE_IMAGE)
CI_BASE_IMAGE = "compatbroker-base:bookworm-python3"


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


def _build_image() -> str:
    """Build TEST_TAG and remove the build it replaces (whose own layers, ~20 MB, each code change leaves behind)."""
    import docker

    from compatbroker.toolkit.testing import CompatBrokerContainer

    engine = docker.from_env(timeout=60)
    previous = _image_id(engine, TEST_TAG)
    # host network: pip in the build's RUN steps reaches PyPI even where containers have no network of their own
    CompatBrokerContainer.build_image(REPO, TEST_TAG, base_image=_base_image(engine), network_mode="host")
    if previous not in (None, _image_id(engine, TEST_TAG)) and not engine.images.get(previous).tags:
        engine.images.remove(previous)
    return TEST_TAG


def _base_image(engine) -> str | None:
    """The base to build on: the setup's Debian import when present, else the Dockerfile's default (None)."""
    if "COMPATBROKER_BASE_IMAGE" in os.environ:
        return os.environ["COMPATBROKER_BASE_IMAGE"]
    return CI_BASE_IMAGE if _image_id(engine, CI_BASE_IMAGE) else None


def _image_id(engine, tag: str) -> str | None:
    import docker

    try:
        return engine.images.get(tag).id
    except docker.errors.ImageNotFound:
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
        if os.environ.get("COMPATBROKER_REQUIRE_DOCKER"):
            pytest.fail(f"tests/setup/containers.sh should have started a Docker engine, but {problem}")
        pytest.skip(f"CompatBrokerContainer tests need Docker: {problem}")
    tag = _build_image()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TESTCONTAINERS_RYUK_DISABLED", os.environ.get("TESTCONTAINERS_RYUK_DISABLED", "true"))
        yield tag


def test_a_client_produces_and_consumes_through_the_container(image):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    from compatbroker.toolkit.testing import CompatBrokerContainer

    with CompatBrokerContainer(image, settings={"num.partitions": "1"}) as broker:
        bootstrap = broker.get_bootstrap_server()
        assert bootstrap == f"127.0.0.1:{broker.host_port}", "a local engine's port is reached on loopback"
        assert _advertised_brokers(bootstrap) == [("127.0.0.1", broker.host_port)], "the host side of the mapping"
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
    from compatbroker.protocol.messages import ApiVersionsRequest
    from compatbroker.toolkit.emulation import advertised
    from compatbroker.toolkit.testing import CompatBrokerContainer

    with CompatBrokerContainer(image, emulate="2.8") as broker:
        body = _ask(broker.get_bootstrap_server(), ApiVersionsRequest(), version=0)
    versions = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert versions[3] == advertised("2.8")[3] == (0, 11), "Metadata as Kafka 2.8 advertises it"
    assert versions[18] == (0, 3)


def _advertised_brokers(bootstrap: str) -> list[tuple[str, int]]:
    """The brokers a Metadata v1 response names: where clients go after the bootstrap connection."""
    from compatbroker.protocol.messages import MetadataRequest

    body = _ask(bootstrap, MetadataRequest(topics=[]), version=1)
    return [(broker.host, broker.port) for broker in body.brokers]


def _ask(bootstrap: str, request, *, version: int):
    """One request over a raw connection to `bootstrap`, returning the response body."""
    from tests.async_tests import run_coroutine
    from tests.server.helpers import RawClient

    async def ask():
        host, port = bootstrap.rsplit(":", 1)
        client = await RawClient.connect(int(port), host)
        try:
            await client.send(request, version=version, correlation_id=7, client_id="tc-test")
            _header, body = await client.read_response(request.API_KEY, version)
        finally:
            await client.close()
        return body

    return run_coroutine(ask())
