"""confluent-kafka's share consumer (KIP-932) for test_share_groups.py: consumers inside the test, one in a process of
its own that a test SIGKILLs or SIGSTOPs while it holds records, and a share group's configs (share.auto.offset.reset
...) set with IncrementalAlterConfigs on the GROUP resource (librdkafka's ConfigResource GROUP is Kafka's resource
type 32).

    python -m tests.compat.share_clients '<spec json>'

runs the holding consumer: it subscribes (explicit acknowledgement), polls until it is handed records, prints
`EVENT {"type": "acquired", "records": [[partition, offset, value, delivery count], ...]}` and then acknowledges
nothing, waiting for its end (stdin closed, or the kill). The spec: bootstrap, group, topic.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple

from .broker_process import REPO
from .clients.member import EVENT_PREFIX

WAIT_S = 90.0  # a bound, not a pace (generous for loaded machines)
POLL_S = 0.2


class Delivery(NamedTuple):
    consumer: str
    partition: int
    offset: int
    value: str
    delivery_count: int


def share_consumer(bootstrap: str, group: str, **overrides):
    """A share consumer with explicit acknowledgement (acknowledge() each record, then commit_sync())."""
    from confluent_kafka import ShareConsumer
    config = {"bootstrap.servers": bootstrap, "broker.address.family": "v4", "group.id": group,
              "share.acknowledgement.mode": "explicit", "fetch.wait.max.ms": 200} | overrides
    return ShareConsumer(config)


def set_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs (SET) of a group's configs, e.g. share.auto.offset.reset=earliest: a share group starts
    at the latest offset otherwise, and would never see the records a test produced before it joined."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )
    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    entries = [ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET) for name, value in configs.items()]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource], request_timeout=15).values():
        future.result()  # raises KafkaException with the broker's error


def poll(consumer, name: str) -> list:
    """One poll: the records handed over (each error message fails the test)."""
    messages = consumer.poll(POLL_S)
    failed = [m.error() for m in messages if m.error() is not None]
    assert not failed, f"share consumer {name}: {failed[0]}"
    return list(messages)


def delivery(name: str, msg) -> Delivery:
    return Delivery(name, msg.partition(), msg.offset(), msg.value().decode(), msg.delivery_count())


class HoldingConsumer:
    """A share consumer process that acquires records and never acknowledges them (see the module docstring)."""

    def __init__(self, bootstrap: str, group: str, topic: str, log_path: Path, name: str = "holder"):
        self.name = name
        self.log_path = log_path
        spec = {"bootstrap": bootstrap, "group": group, "topic": topic}
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "tests.compat.share_clients", json.dumps(spec)],
                                         cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
        self._acquired: list[Delivery] | None = None
        self._done = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            if line.startswith(EVENT_PREFIX):
                event = json.loads(line[len(EVENT_PREFIX):])
                self._acquired = [Delivery(self.name, *record) for record in event["records"]]
                break
        self._done.set()

    def acquired(self, timeout_s: float = WAIT_S) -> list[Delivery]:
        """The records the process was handed (it holds them from then on)."""
        if not self._done.wait(timeout_s) or self._acquired is None:
            self.kill()
            log = self.log_path.read_text(errors="replace")[-3000:]
            raise AssertionError(f"share consumer {self.name} acquired nothing within {timeout_s} s "
                                 f"(exit status {self.proc.returncode})\n{log}")
        return self._acquired

    def freeze(self) -> None:
        """SIGSTOP: the process keeps its connection and its records but never acknowledges them; only their
        acquisition locks running out give them back."""
        self.proc.send_signal(signal.SIGSTOP)

    def kill(self) -> None:
        """SIGKILL: no acknowledgement, no leave; the broker can only let the acquisition locks run out."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def _hold(spec: dict) -> int:
    consumer = share_consumer(spec["bootstrap"], spec["group"])
    consumer.subscribe([spec["topic"]])
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        messages = poll(consumer, "holder")
        if messages:
            records = [[m.partition(), m.offset(), m.value().decode(), m.delivery_count()] for m in messages]
            print(EVENT_PREFIX + json.dumps({"type": "acquired", "records": records}), flush=True)
            sys.stdin.read()  # hold them until stdin closes or the test kills this process
            return 0
    return 1


if __name__ == "__main__":
    sys.exit(_hold(json.loads(sys.argv[1])))
