"""The console's /clients page with real KIP-714 pushes: a confluent-kafka (librdkafka) producer with
enable.metrics.push=true, matched by a client metrics subscription, shows up with the metrics it pushed (and a
screenshot, build/console/clients-pushed.png)."""
from __future__ import annotations

import asyncio
import contextlib
import time

from confluent_kafka import Producer
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from compatbroker.config import BrokerConfig
from compatbroker.server.run import ClusterRuntime
from compatbroker.toolkit.runtime import toolkit_for
from tests.console.conftest import http, screenshot

HOSTILE_CLIENT = "<b>pushy</b>"
WAIT_S = 60


@contextlib.asynccontextmanager
async def running(tmp_path):
    """A broker on this test's loop with the control listener (the console); yields (runtime, console url)."""
    toolkit = toolkit_for(control_listen="127.0.0.1:0")
    properties = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data")}
    runtime = ClusterRuntime(BrokerConfig(properties), **toolkit.runtime_options())
    await runtime.start()
    try:
        yield runtime, toolkit.control.url
    finally:
        await runtime.stop()


def produce_until_pushed(bootstrap: str, url: str) -> str:
    """Run a librdkafka producer until the console lists its pushed metrics; the page then."""
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": HOSTILE_CLIENT, "enable.metrics.push": True})
    try:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            producer.produce("pushed", b"value")
            producer.poll(0.2)
            page = http(url + "/clients").text
            if "org.apache.kafka." in page:
                return page
        raise AssertionError(f"no pushed metrics on the console within {WAIT_S} s:\n{page}")
    finally:
        producer.flush(10)


def screenshot_clients(browser, url: str) -> str:
    browser.get(url + "/clients")
    screenshot(browser, "clients-pushed")
    # the page's live part may be swapped in between finding the heading and reading it: look again then
    return WebDriverWait(browser, WAIT_S, ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda driver: driver.find_element(By.CSS_SELECTOR, "section.client h2").text)


async def test_metrics_a_librdkafka_client_pushes_appear_on_the_clients_page(tmp_path, browser):
    async with running(tmp_path) as (runtime, url):
        empty = await asyncio.to_thread(http, url + "/clients")
        assert "No client has pushed metrics yet" in empty.text
        runtime.client_telemetry.set_subscription("all", {"metrics": "*", "interval.ms": "1000"})
        page = await asyncio.to_thread(produce_until_pushed, runtime.bootstrap_servers, url)
        assert "confluent-kafka-python" in page  # its software name (ApiVersions v3+)
        assert HOSTILE_CLIENT not in page and "&lt;b&gt;pushy&lt;/b&gt;" in page
        assert "org.apache.kafka.producer.node.request.latency.avg" in page and "node.id=" in page
        heading = await asyncio.to_thread(screenshot_clients, browser, url)
        assert heading.startswith(HOSTILE_CLIENT)  # shown as text, not markup
