"""The pytest plugin (registered through the `pytest11` entry point): Kafka brokers as fixtures.

- `compatbroker` (session scope): one broker for the whole run. After each test that used it, its fault rules and
  request log are cleared and it is brought up if the test left it down, so tests do not leak faults into each
  other; topics and records stay, so give each test topics of its own.
- `compatbroker_fresh` (function scope): an empty broker of the test's own, stopped after it.

Both yield a `compatbroker.EmbeddedBroker`. Options: `--compatbroker-mode=thread|subprocess` (ini:
`compatbroker_mode`), `compatbroker_settings` (ini lines of NAME=VALUE broker settings),
`--compatbroker-emulate=RELEASE` (ini: `compatbroker_emulate`) and `--compatbroker-nodes=N` (ini:
`compatbroker_nodes`; a cluster of N brokers, whose node faults are undone after each test as well).

pytest loads this module in every run of every project where compatbroker is installed, so importing it loads
nothing but pytest; the broker is imported when a fixture is first used.
"""
from __future__ import annotations

import pytest

_SESSION_BROKER = pytest.StashKey()


def pytest_addoption(parser) -> None:
    group = parser.getgroup("compatbroker", "compatbroker Kafka broker fixtures")
    group.addoption("--compatbroker-mode", choices=("thread", "subprocess"), default=None,
                    help="run the fixture brokers in a thread of the test process (default) or as subprocesses")
    group.addoption("--compatbroker-emulate", metavar="RELEASE", default=None,
                    help="make the fixture brokers emulate this Apache Kafka release's API versions")
    group.addoption("--compatbroker-nodes", metavar="N", type=int, default=None,
                    help="make the fixture brokers clusters of N brokers (default 1)")
    parser.addini("compatbroker_mode", "thread or subprocess (see --compatbroker-mode)", default="thread")
    parser.addini("compatbroker_nodes", "how many brokers each fixture cluster has (see --compatbroker-nodes)",
                  default="1")
    parser.addini("compatbroker_emulate", "Apache Kafka release the fixture brokers emulate", default="")
    parser.addini("compatbroker_settings", "broker settings for the fixture brokers, one NAME=VALUE a line",
                  type="linelist", default=[])


def _options(config) -> dict:
    settings = {}
    for line in config.getini("compatbroker_settings"):
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            raise pytest.UsageError(f"compatbroker_settings: expected NAME=VALUE, got {line!r}")
        settings[name.strip()] = value.strip()
    mode = config.getoption("compatbroker_mode", None) or config.getini("compatbroker_mode") or "thread"
    emulate = config.getoption("compatbroker_emulate", None) or config.getini("compatbroker_emulate") or None
    nodes = config.getoption("compatbroker_nodes", None) or config.getini("compatbroker_nodes") or "1"
    try:
        nodes = int(nodes)
    except ValueError:
        raise pytest.UsageError(f"compatbroker_nodes: expected a number of brokers, got {nodes!r}") from None
    return {"settings": settings, "mode": mode, "emulate": emulate, "nodes": nodes}


@pytest.fixture(scope="session")
def compatbroker(request):
    """One broker for the test session (faults and the request log are reset after each test using it)."""
    from compatbroker.toolkit.embedded import EmbeddedBroker

    with EmbeddedBroker(**_options(request.config)) as broker:
        request.config.stash[_SESSION_BROKER] = broker
        try:
            yield broker
        finally:
            del request.config.stash[_SESSION_BROKER]


@pytest.fixture
def compatbroker_fresh(request):
    """An empty broker for this test alone."""
    from compatbroker.toolkit.embedded import EmbeddedBroker

    with EmbeddedBroker(**_options(request.config)) as broker:
        yield broker


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem) -> None:
    """Reset the session broker after a test that used it, so that its faults do not reach the next test."""
    if "compatbroker" not in getattr(item, "fixturenames", ()):
        return
    broker = item.config.stash.get(_SESSION_BROKER, None)
    if broker is not None and broker.running:
        broker.reset()
