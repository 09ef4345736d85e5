"""Fixtures of the client tests: real brokers (EmbeddedBroker in a thread of the test process) shared per module,
a client and an admin client on them, and small fake servers for connection failures."""
from __future__ import annotations

import socket
import threading

import pytest

from compatbroker import EmbeddedBroker
from compatbroker.client import ClientConfig, KafkaClient
from compatbroker.client.admin import Admin


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker({"num.partitions": 1}) as running:
        yield running


@pytest.fixture
def client(broker):
    with KafkaClient(ClientConfig(bootstrap=broker.bootstrap_servers)) as made:
        yield made


@pytest.fixture
def admin(client):
    return Admin(client)


class FakeServer:
    """A TCP listener on 127.0.0.1 that does `behaviour(connection)` with each connection it accepts, in a thread:
    for brokers that close connections or never answer."""

    def __init__(self, behaviour):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.behaviour = behaviour
        self.accepted = 0
        self.connections = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            self.connections.append(connection)
            self.behaviour(connection)

    def close(self) -> None:
        self.sock.close()
        for connection in self.connections:
            connection.close()


@pytest.fixture
def fake_server():
    made = []

    def factory(behaviour):
        made.append(FakeServer(behaviour))
        return made[-1]

    yield factory
    for server in made:
        server.close()
