"""Helpers of the security flows (tls, sasl, acls): test_tls.py, test_sasl.py, test_acls.py for the clients driven
from Python (kafka-python, aiokafka, confluent-kafka, kcat), and the brokers, stored values and ACL bindings of the
kafkajs and sarama modules (test_*_kafkajs.py, test_*_sarama.py).

Each module starts one secured broker for its tests: the toolkit's `EmbeddedBroker(security=SecuritySetup(...))` as a
subprocess (so that the broker never competes with the clients for this process's interpreter), logging at INFO so
that its lines on failed authentications and denied operations can be checked. A client takes the setup's ready
settings for its family (`SecuritySetup.client_config(<client name>, <listener>, ...)`) through its adapter's
`secured()`.
"""
from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping

from compatbroker.toolkit.embedded import SUBPROCESS, EmbeddedBroker
from compatbroker.toolkit.security import SecuritySetup

from .clients import ClientAdapter

# The clients whose adapters take security settings here (kafkajs and sarama: test_*_kafkajs.py, test_*_sarama.py).
SECURED_CLIENT_NAMES = ("kafka-python", "aiokafka", "confluent-kafka", "kcat")


@contextlib.contextmanager
def secured_broker(setup: SecuritySetup, settings: Mapping[str, object] | None = None) -> Iterator[EmbeddedBroker]:
    """A broker subprocess serving `setup` (its SCRAM users stored once it runs) with more `settings` by Kafka name;
    stopped and its files removed afterwards."""
    try:
        with EmbeddedBroker(settings, mode=SUBPROCESS, log_level="INFO", security=setup) as broker:
            yield broker
    finally:
        setup.cleanup()


def connect(client: ClientAdapter, broker: EmbeddedBroker, listener: str, **options) -> tuple[ClientAdapter, str]:
    """The client secured for `listener` (options as SecuritySetup.client_config: user, password, mechanism,
    certificate, ca_file, token) and that listener's bootstrap address."""
    settings = broker.security.client_config(client.name, listener, **options)
    return client.secured(settings), broker.bootstrap_servers_for(listener)


class BrokerLog:
    """The lines a subprocess broker logged since this object was made."""

    def __init__(self, broker: EmbeddedBroker):
        self.path = broker.log_path
        self.start = os.path.getsize(self.path) if os.path.exists(self.path) else 0

    @property
    def lines(self) -> list[str]:
        with open(self.path, "rb") as log:
            log.seek(self.start)
            return log.read().decode(errors="replace").splitlines()

    def containing(self, text: str) -> list[str]:
        return [line for line in self.lines if text in line]

    def wait_for(self, text: str, timeout_s: float = 15.0) -> list[str]:
        """The lines containing `text`, once there is one (the broker may log just after the client gave up);
        AssertionError when none comes within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while not (found := self.containing(text)):
            if time.monotonic() > deadline:
                tail = "\n".join(self.lines[-20:])
                raise AssertionError(f"the broker logged no line with {text!r} within {timeout_s} s:\n{tail}")
            time.sleep(0.05)  # polling a file: no event to wait on
        return found


def stored_values(broker: EmbeddedBroker, topic: str, partition: int = 0) -> list[bytes | None]:
    """The values a partition stored (a refused client must have written nothing); [] without the topic."""
    if topic not in broker.topics():
        return []
    return [record.value for record in broker.records(topic, partition, offset=0)]


def allow(broker: EmbeddedBroker, resource_type: str, name: str, user: str, operation: str, *,
          pattern: str = "LITERAL", permission: str = "ALLOW") -> None:
    """One ACL binding for User:<user> from any host."""
    broker.add_acl(resource_type, name, f"User:{user}", operation, pattern_type=pattern, permission=permission)
