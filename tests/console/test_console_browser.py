"""The console in a real browser (Debian's headless Chromium through Selenium), as an operator uses it: the
overview, records a producer sent, a group's lag falling to 0 while the page refreshes itself, a fault injected
from its form reaching a client, and the live request log with latencies. Each page is saved as a screenshot
under build/console/."""
from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import TopicAuthorizationFailedError
from kafka.structs import OffsetAndMetadata, TopicPartition
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.console.conftest import screenshot

WAIT_S = 90  # generous: a loaded 2-core machine, a page refreshing every 2 s, a lag sampler every 2 s


def waiting(driver) -> WebDriverWait:
    """A wait that looks again when the page's live fragment was swapped in between finding an element and
    reading it (the element then goes stale)."""
    return WebDriverWait(driver, WAIT_S, poll_frequency=0.2, ignored_exceptions=(StaleElementReferenceException,))


def wait_for_text(driver, css: str, predicate, what: str) -> str:
    """Wait until the element at `css` exists and its text satisfies `predicate`; its text."""
    def found(_driver):
        elements = driver.find_elements(By.CSS_SELECTOR, css)
        if not elements:
            return False
        try:
            text = elements[0].text
        except WebDriverException as exc:  # chromedriver's other word for a stale element: look again
            if "does not belong to the document" not in str(exc.msg):
                raise
            return False
        return text if predicate(text) else False
    return waiting(driver).until(found, message=f"waiting for {what}")


def produce(broker, topic: str, values: list[bytes], **settings) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, **settings)
    for value in values:
        producer.send(topic, value=value, partition=0)
    producer.flush(30)
    producer.close()


def chart_at_zero(driver) -> bool:
    """Whether the lag chart's last point lies on its x axis (a total lag of 0)."""
    lines = driver.find_elements(By.CSS_SELECTOR, "#lag-chart polyline")
    axes = driver.find_elements(By.CSS_SELECTOR, "#lag-chart line.axis")  # the x axis first
    if not lines or not axes:
        return False
    last_y = float(lines[0].get_attribute("points").split()[-1].split(",")[1])
    return last_y == float(axes[0].get_attribute("y1"))


def test_the_overview_shows_the_cluster_up(broker, browser):
    browser.get(broker.control_url + "/")
    assert wait_for_text(browser, "#status", lambda text: text == "up", "status up") == "up"
    assert browser.find_element(By.CSS_SELECTOR, "#cluster-id").text
    assert browser.find_element(By.CSS_SELECTOR, "nav a.here").text == "Overview"
    screenshot(browser, "overview")


def test_browsing_a_topic_shows_the_values_produced(broker, browser):
    broker.create_topic("e2e-orders", 1)
    produce(broker, "e2e-orders", [b'{"order": %d, "item": "tea"}' % index for index in range(10)])
    browser.get(broker.control_url + "/topics")
    browser.find_element(By.LINK_TEXT, "e2e-orders").click()
    wait_for_text(browser, "#partitions tbody", lambda text: "10" in text, "10 records in the partition table")
    screenshot(browser, "topic")
    browser.find_element(By.LINK_TEXT, "Browse records").click()
    values = wait_for_text(browser, "#records", lambda text: '"order": 9' in text, "the tenth value")
    assert all(f'"order": {index}' in values for index in range(10))
    Select(browser.find_element(By.NAME, "format")).select_by_value("json")
    browser.find_element(By.NAME, "offset").send_keys("7")
    browser.find_element(By.CSS_SELECTOR, "#browse button").click()
    shown = wait_for_text(browser, "#records", lambda text: '"order": 7,' in text, "pretty JSON from offset 7")
    assert '"order": 6' not in shown and '"item": "tea"' in shown
    screenshot(browser, "records")


def test_a_groups_lag_falls_to_zero_as_its_consumer_catches_up(broker, browser):
    broker.create_topic("e2e-lag", 1)
    produce(broker, "e2e-lag", [b"event-%d" % index for index in range(20)])
    committer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="e2e-readers",
                              enable_auto_commit=False)
    committer.commit({TopicPartition("e2e-lag", 0): OffsetAndMetadata(5, "", -1)})
    committer.close()
    browser.get(broker.control_url + "/groups")
    browser.find_element(By.LINK_TEXT, "e2e-readers").click()
    assert wait_for_text(browser, "#total-lag", lambda text: text == "15", "a lag of 15") == "15"
    wait_for_text(browser, "#live", lambda _: bool(browser.find_elements(By.CSS_SELECTOR, "#lag-chart polyline")),
                  "the lag chart's first samples")

    consumer = KafkaConsumer("e2e-lag", bootstrap_servers=broker.bootstrap_servers, group_id="e2e-readers",
                             enable_auto_commit=False, auto_offset_reset="earliest", consumer_timeout_ms=1000)
    try:
        read = 0
        for _ in range(WAIT_S):
            read += sum(len(batch) for batch in consumer.poll(timeout_ms=1000).values())
            if read >= 15:
                break
        assert read == 15  # from the committed offset 5 to the end
        consumer.commit()
        # the page is not reloaded: its live part refreshes itself
        assert wait_for_text(browser, "#total-lag", lambda text: text == "0", "the lag to reach 0") == "0"
        wait_for_text(browser, "#members", lambda text: "e2e-lag-0" in text, "the member and its assignment")
        waiting(browser).until(
            chart_at_zero, message="waiting for the lag chart's last sample to reach 0")
        screenshot(browser, "group")
    finally:
        consumer.close()


def test_a_fault_injected_from_the_page_reaches_a_client(broker, browser):
    broker.create_topic("e2e-faults", 1)
    browser.get(broker.control_url + "/faults")
    form = browser.find_element(By.ID, "inject-error")
    form.find_element(By.NAME, "api").send_keys("Produce")
    form.find_element(By.NAME, "error").send_keys("TOPIC_AUTHORIZATION_FAILED")
    form.find_element(By.NAME, "topic").send_keys("e2e-faults")
    form.find_element(By.CSS_SELECTOR, "button").click()
    wait_for_text(browser, "#message", lambda text: "TOPIC_AUTHORIZATION_FAILED" in text, "the rule's confirmation")
    rules = wait_for_text(browser, "#rules", lambda text: "TOPIC_AUTHORIZATION_FAILED on topic e2e-faults" in text,
                          "the rule in force")
    assert "Produce" in rules
    screenshot(browser, "faults")

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, retries=0, client_id="e2e-victim")
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send("e2e-faults", value=b"refused", partition=0).get(timeout=30)
        producer.send("e2e-faults", value=b"served", partition=0).get(timeout=30)  # the rule was for one request
    finally:
        producer.close()
    wait_for_text(browser, "#no-rules", lambda text: "No fault rules" in text, "the spent rule to leave the page")


def test_the_live_request_log_shows_requests_with_latency(broker, browser):
    browser.get(broker.control_url + "/requests")
    produce(broker, "e2e-orders", [b"one more"], client_id="e2e-latency")

    def produce_row_with_latency(text: str) -> bool:
        return any("Produce" in row and "e2e-latency" in row and row.rstrip().endswith(" ms")
                   for row in text.splitlines())
    log = wait_for_text(browser, "#requests", produce_row_with_latency, "the Produce request and its latency")
    assert "TOPIC_AUTHORIZATION_FAILED" in log  # the injected error of the previous test, in the log
    screenshot(browser, "requests")


def test_the_lists_and_the_clients_page_render(broker, browser):
    for path, name, heading in [("/topics", "topics", "Topics"), ("/groups", "groups", "Consumer groups"),
                                ("/clients", "clients", "Client telemetry (KIP-714)")]:
        browser.get(broker.control_url + path)
        assert browser.find_element(By.TAG_NAME, "h1").text == heading
        assert not browser.find_elements(By.CSS_SELECTOR, ".alert.error")
        screenshot(browser, name)
