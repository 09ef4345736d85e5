"""Fixtures of the compat suite: brokers started as subprocesses, the clients under test, a reference client.

- `broker`: one broker for the session (1 partition per auto-created topic, message.max.bytes raised for the 1 MiB
  record). Tests use their own topics, so they do not see each other's records.
- `partitioned_broker`: the same with num.partitions=10, so that the topics the clients auto-create have ten
  partitions.
- `fresh_broker`: a broker of the test's own, for restarts.
- `client`: each client of clients.CLIENT_NAMES in turn (catalog tag "client"); `each_client`: those of
  clients.EACH_CLIENT_NAMES (tag "each": metadata, topic listing and committed offsets).
- `secured_client`: kafka-python, aiokafka, confluent-kafka and kcat in turn, for the security flows (their brokers:
  secured_clients.py).
Every broker is stopped with SIGTERM at teardown, which must make it exit 0 within 5 s.
"""
from __future__ import annotations

import re
import uuid

import pytest

from . import clients
from .broker_process import BrokerProcess
from .clients.kafka_python_client import KafkaPythonClient
from .records import MAX_MESSAGE_BYTES
from .secured_clients import SECURED_CLIENT_NAMES

BROKER_SETTINGS = {"message.max.bytes": str(MAX_MESSAGE_BYTES)}


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("broker") / "data", BROKER_SETTINGS) as running:
        yield running


@pytest.fixture(scope="session")
def partitioned_broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("broker10") / "data",
                       BROKER_SETTINGS | {"num.partitions": "10"}) as running:
        yield running


@pytest.fixture
def fresh_broker(tmp_path):
    with BrokerProcess(tmp_path / "data", BROKER_SETTINGS) as running:
        yield running


@pytest.fixture(params=clients.CLIENT_NAMES)
def client(request) -> clients.ClientAdapter:
    """The client under test; missing clients fail with the command that installs them."""
    return clients.load_or_fail(request.param)


@pytest.fixture(params=clients.EACH_CLIENT_NAMES)
def each_client(request) -> clients.ClientAdapter:
    """The clients whose adapters list metadata and topics and commit and read back offsets (catalog tag "each")."""
    return clients.load_or_fail(request.param)


@pytest.fixture(scope="session")
def reference() -> KafkaPythonClient:
    """kafka-python: writes the records a consumer test reads, and reads back what a producer test wrote."""
    return clients.load_or_fail("kafka-python")


@pytest.fixture
def topic(request) -> str:
    """A topic name of this test's own (Kafka's legal characters only)."""
    name = re.sub(r"[^a-zA-Z0-9._-]+", ".", request.node.name.removeprefix("test_")).strip(".")
    return f"{name[:180]}.{uuid.uuid4().hex[:6]}"


@pytest.fixture
def kafka_python_admin(broker):
    """kafka-python's admin client on the session's broker (the admin tests')."""
    clients.load_or_fail("kafka-python")
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id=f"compat-admin-{uuid.uuid4().hex[:6]}",
                             request_timeout_ms=15000)
    yield admin
    admin.close()


# --- security flows of kafka-python, aiokafka, confluent-kafka and kcat (test_tls.py, test_sasl.py, test_acls.py) ---

@pytest.fixture(params=SECURED_CLIENT_NAMES)
def secured_client(request) -> clients.ClientAdapter:
    """Each client whose adapter takes security settings (ClientAdapter.secured; see secured_clients.py)."""
    return clients.load_or_fail(request.param)
