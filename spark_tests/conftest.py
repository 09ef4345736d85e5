"""Fixtures of the Spark suite: PySpark's built-in Kafka source and sink against compatbroker.

- `connector`: Spark's Kafka connector (see connector.py). Without it every test that needs Spark is skipped, and
  the reason (with what to set) is printed in the summary; `-ra` is in the project's pytest options.
- `spark`: one SparkSession (`local[2]`) for the whole run, since a session takes seconds to start.
- `broker`: one compatbroker for the run, started as users start it (`python -m compatbroker serve`, through
  EmbeddedBroker's subprocess mode), with its request log on. Every test uses topics of its own (`topic`).
- `kafka`: kafka-python helpers that produce the records Spark reads and change topics (kafka_tools.py).
- `java`: makes the Java client's consumers, producers and admin clients (java_clients.py), closed after the test.

After each test that used Spark, every request the Java client sent during it must have been served: an API or
version the broker lacks would show up as an unserved request. The versions the Java client used are collected
over the run and printed at its end (the evidence the issue asks for).
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import uuid
from collections import defaultdict

import pytest

from .connector import ConnectorMisconfigured, ConnectorUnavailable, find_connector, session_builder
from .java_clients import JavaAdmin, JavaConsumer, JavaProducer
from .kafka_tools import CLIENT_ID, KafkaTools, last_seq

BROKER_SETTINGS = {
    "num.partitions": 1,
    "log.retention.check.interval.ms": 100,  # the data-loss tests wait for retention
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200,  # the timeout test waits for the abort
}
HELPER_CLIENTS = (CLIENT_ID, "kafka-python")  # request log entries of these clients are not the Java client's
BROKER_FAILURE = re.compile(r"^\S+ \S+ (ERROR|CRITICAL) |^Traceback")  # how the broker logs a handler that raised

# What the run's summary reports, kept in pytest's per-run stash: where the connector came from (or why the tests
# were skipped), and API name -> the versions the Java client sent.
CONNECTOR_NOTE = pytest.StashKey[str]()
JAVA_VERSIONS = pytest.StashKey[dict]()


@pytest.fixture(scope="session")
def connector(pytestconfig):
    try:
        found = find_connector()
    except ConnectorUnavailable as exc:
        pytestconfig.stash[CONNECTOR_NOTE] = f"spark tests skipped: {exc}"
        pytest.skip(str(exc))
    except ConnectorMisconfigured as exc:
        pytest.fail(str(exc), pytrace=False)
    pytestconfig.stash[CONNECTOR_NOTE] = f"spark connector: {found.source}"
    return found


@pytest.fixture(scope="session")
def spark(connector):
    if importlib.util.find_spec("pyspark") is None:  # the test extra installs it
        pytest.fail("PySpark is not installed: pip install -e '.[test]' (or bash tests/run.sh)", pytrace=False)
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("PySpark needs a Java runtime (17): apt-get install openjdk-17-jre-headless "
                    "(bash tests/run.sh installs it)", pytrace=False)
    session = session_builder(connector, "compatbroker-spark-tests").getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def broker(connector):
    from compatbroker.toolkit.embedded import EmbeddedBroker

    with EmbeddedBroker(BROKER_SETTINGS, mode="subprocess", log_level="INFO") as running:
        yield running


@pytest.fixture(scope="session")
def kafka(broker):
    tools = KafkaTools(broker.bootstrap_servers)
    yield tools
    tools.close()


@pytest.fixture
def java(spark, kafka):
    """Makes Java consumers (`java.consumer(**config)`), producers (`java.producer(**config)`) and admin clients
    (`java.admin()`), closed after the test."""
    made = []

    class Factory:
        @staticmethod
        def consumer(**config) -> JavaConsumer:
            made.append(JavaConsumer(spark._jvm, kafka.bootstrap, **config))
            return made[-1]

        @staticmethod
        def producer(**config) -> JavaProducer:
            made.append(JavaProducer(spark._jvm, kafka.bootstrap, **config))
            return made[-1]

        @staticmethod
        def admin() -> JavaAdmin:
            made.append(JavaAdmin(spark._jvm, kafka.bootstrap))
            return made[-1]

    yield Factory
    for client in made:
        client.close()


@pytest.fixture
def topic(request) -> str:
    """A topic name of this test's own."""
    name = re.sub(r"[^a-zA-Z0-9._-]+", ".", request.node.name.removeprefix("test_")).strip(".")
    return f"{name[:150]}.{uuid.uuid4().hex[:6]}"


@pytest.fixture(autouse=True)
def java_requests_served(request):
    """After a Spark test: no request of the Java client went unserved; note the versions it used."""
    if "spark" not in request.fixturenames:
        yield
        return
    broker = request.getfixturevalue("broker")
    since = last_seq(broker)
    log_start = os.path.getsize(broker.log_path)
    yield
    entries = [entry for entry in broker.requests(since) if not (entry.client_id or "").startswith(HELPER_CLIENTS)]
    versions = request.config.stash.setdefault(JAVA_VERSIONS, defaultdict(set))
    for entry in entries:
        versions[entry.api].add(entry.api_version)
    unserved = [f"{entry.api} v{entry.api_version} from {entry.client_id}" for entry in entries if not entry.served]
    assert unserved == [], f"the Java client sent requests compatbroker did not serve: {unserved}"
    with open(broker.log_path, errors="replace") as log:
        log.seek(log_start)
        failures = [line for line in log if BROKER_FAILURE.search(line)]
    assert failures == [], "the broker logged errors:\n" + "".join(failures)


def pytest_terminal_summary(terminalreporter, config):
    note = config.stash.get(CONNECTOR_NOTE, None)
    if note is not None:
        terminalreporter.write_line(note)
    versions = config.stash.get(JAVA_VERSIONS, {})
    if versions:
        used = ", ".join(f"{api} v{'/'.join(map(str, sorted(numbers)))}" for api, numbers in sorted(versions.items()))
        terminalreporter.write_line(f"Java client (kafka-clients in Spark) requests served: {used}")
