"""Fixtures of the web console tests: a broker with its control listener (the console), plain HTTP helpers and a
headless Chromium driven by Selenium.

The browser is Debian's `chromium` with its `chromium-driver` (/usr/bin/chromium, /usr/bin/chromedriver; tests/run.sh
installs them). Without them the browser tests fail, saying how to install them: a console nobody opened in a
browser is not tested. Screenshots of each page go to build/console/ under the repository root.
"""
from __future__ import annotations

import base64
import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import pytest

from compatbroker.toolkit.embedded import EmbeddedBroker
from tests.async_tests import coroutine_runner

TEST_TIME_LIMIT_S = 120  # coroutine tests (the telemetry one waits for a client's pushes)

REPO_ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO_ROOT / "build" / "console"
CHROMIUM = os.environ.get("COMPATBROKER_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("COMPATBROKER_CHROMEDRIVER", "/usr/bin/chromedriver")
# The console is local to the test run: never send its requests through an HTTP proxy from the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker(control_listen="127.0.0.1:0") as started:
        yield started


class Answer:
    def __init__(self, status: int, headers, body: bytes):
        self.status, self.headers, self.body = status, headers, body

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")


def http(url: str, *, method: str = "GET", html: bool = True, form: dict | None = None,
         body: bytes | None = None, content_type: str | None = None, headers: dict | None = None) -> Answer:
    """One request to the control listener; `html` asks for the console's HTML as a browser does."""
    headers = dict(headers or {})
    if html:
        headers["Accept"] = "text/html,application/xhtml+xml,*/*;q=0.8"
    if form is not None:
        body, content_type = urlencode(form).encode(), "application/x-www-form-urlencoded"
    if content_type is not None:
        headers["Content-Type"] = content_type
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with _OPENER.open(request, timeout=30) as response:
            return Answer(response.status, response.headers, response.read())
    except urllib.error.HTTPError as error:
        with error:
            return Answer(error.code, error.headers, error.read())


@pytest.fixture(scope="module")
def browser():
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if shutil.which(path) is None]
    if missing:
        pytest.fail(f"the console's browser tests need Debian's headless Chromium; {', '.join(missing)} not found. "
                    "Install them with: sudo apt-get install chromium chromium-driver", pytrace=False)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1366,900", "--no-proxy-server"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def screenshot(driver, name: str) -> Path:
    """Save the page as build/console/NAME.png: the whole page (tables below the fold too), through Chromium's
    DevTools protocol."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 6000), "scale": 1}})
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


pytest_pyfunc_call = coroutine_runner(TEST_TIME_LIMIT_S)
