"""The pytest plugin (registered through the `pytest11` entry point): Kafka brokers as fixtures.

- `compatbroker` (session scope): one broker for the whole run. After each test that used it, its fault rules and
  request log are cleared and it is brought up if the test left it down, so tests do not leak faults into each
  other; topics and records stay, so give each test topics of its own.
- `compatbroker_fresh` (function scope): an empty broker of the test's own, stopped after it.

Secured brokers (TLS, SASL, ACLs; `compatbroker.toolkit.security`):

- `compatbroker_security` (session scope): the `SecuritySetup` of `compatbroker_secure`: listeners PLAINTEXT, SSL,
  MTLS (SSL with ssl.client.auth=required), SASL_PLAINTEXT and SASL_SSL; mechanisms PLAIN, SCRAM-SHA-256,
  SCRAM-SHA-512 and OAUTHBEARER (Kafka's unsecured validator); users admin, alice and bob (passwords
  `<name>-secret`); no authorizer. Its CA and certificates: `.certificates`.
- `compatbroker_secure` (session scope): a broker with that setup, reset after each test like `compatbroker` (users
  and ACLs a test adds stay: give them names of the test's own);
  `compatbroker_secure.client_config(family, "SASL_SSL", user="alice", mechanism="SCRAM-SHA-512")` gives a client
  its configuration, `bootstrap_servers_for(listener)` a listener's address.
- `compatbroker_secure_factory` (function scope): `make(**SecuritySetup arguments)` starts a broker of another setup
  (e.g. `make(acls=True)`, `make(oauthbearer="jwks")`), stopped after the test.

All yield `compatbroker.EmbeddedBroker`s. Options: `--compatbroker-mode=thread|subprocess` (ini:
`compatbroker_mode`), `compatbroker_settings` (ini lines of NAME=VALUE broker settings),
`--compatbroker-emulate=RELEASE` (ini: `compatbroker_emulate`) and `--compatbroker-nodes=N` (ini:
`compatbroker_nodes`; a cluster of N brokers, whose node faults are undone after each test as well).

pytest loads this module in every run of every project where compatbroker is installed, so importing it loads
nothing but pytest; the broker is imported when a fixture is first used.
"""
from __future__ import annotations

import pytest

_SESSION_BROKER = pytest.StashKey()
_SECURE_BROKER = pytest.StashKey()
SECURE_LISTENERS = {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "MTLS": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT",
                    "SASL_SSL": "SASL_SSL"}


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


@pytest.fixture(scope="session")
def compatbroker_security():
    """The SecuritySetup of `compatbroker_secure` (its files are removed at the end of the session)."""
    from compatbroker.toolkit.security import SecuritySetup

    setup = SecuritySetup(listeners=SECURE_LISTENERS, client_auth={"MTLS": "required"})
    try:
        yield setup
    finally:
        setup.cleanup()


@pytest.fixture(scope="session")
def compatbroker_secure(request, compatbroker_security):
    """One secured broker for the test session (reset after each test using it, as `compatbroker`)."""
    from compatbroker.toolkit.embedded import EmbeddedBroker

    with EmbeddedBroker(**_options(request.config), security=compatbroker_security) as broker:
        request.config.stash[_SECURE_BROKER] = broker
        try:
            yield broker
        finally:
            del request.config.stash[_SECURE_BROKER]


@pytest.fixture
def compatbroker_secure_factory(request):
    """`make(**SecuritySetup arguments)`: a secured broker of the test's own, stopped after it."""
    from compatbroker.toolkit.embedded import EmbeddedBroker
    from compatbroker.toolkit.security import SecuritySetup

    setups, brokers = [], []

    def make(**security):
        setups.append(SecuritySetup(**security))
        brokers.append(EmbeddedBroker(**_options(request.config), security=setups[-1]))
        return brokers[-1]

    try:
        yield make
    finally:
        for broker in brokers:
            broker.stop()
        for setup in setups:
            setup.cleanup()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem) -> None:
    """Reset the session brokers after a test that used them, so that their faults do not reach the next test."""
    names = getattr(item, "fixturenames", ())
    for fixture, key in (("compatbroker", _SESSION_BROKER), ("compatbroker_secure", _SECURE_BROKER)):
        if fixture not in names:
            continue
        broker = item.config.stash.get(key, None)
        if broker is not None and broker.running:
            broker.reset()
