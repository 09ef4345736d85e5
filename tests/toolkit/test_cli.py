"""`compatbroker control ...` against a running broker's control endpoint, and the serve flags of the toolkit."""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys

import pytest

from compatbroker import EmbeddedBroker

REPO_ROOT = __file__.rsplit("/tests/", 1)[0]


def cli(*args: str, env_control: str | None = None) -> subprocess.CompletedProcess:
    env = None if env_control is None else dict(os.environ, COMPATBROKER_CONTROL=env_control)
    return subprocess.run([sys.executable, "-m", "compatbroker", *args], check=False, capture_output=True, text=True,
                          timeout=60, cwd=REPO_ROOT, env=env)


def control(broker: EmbeddedBroker, *args: str):
    done = cli("control", "--control", broker.control_url, *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker(control_listen="127.0.0.1:0") as broker:
        yield broker


@pytest.fixture(autouse=True)
def clean(broker):
    yield
    broker.reset()


def test_fault_commands_set_and_clear_rules(broker):
    assert control(broker, "inject-error", "Produce", "NOT_LEADER_OR_FOLLOWER", "--count", "3", "--topic", "t") \
        == {"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "remaining": 3, "topic": "t"}
    assert control(broker, "inject-latency", "all", "250") == {"api": None, "ms": 250, "remaining": None}
    assert control(broker, "drop-connections", "--after", "5", "--api", "Fetch", "--count", "all") == {
        "api": "Fetch", "after": 5, "next_in": 5, "remaining": None}
    shown = control(broker, "faults")
    assert [len(shown[kind]) for kind in ("errors", "latency", "drops")] == [1, 1, 1]
    assert broker.faults() == shown  # the same rules the Python helpers see
    assert control(broker, "clear-faults") == {"errors": [], "latency": [], "drops": []}


def test_down_and_up(broker):
    assert control(broker, "down")["up"] is False
    assert not broker.is_up
    assert control(broker, "up")["up"] is True


def test_topics_records_and_requests(broker):
    from kafka import KafkaProducer
    broker.create_topic("cli-records", 1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, client_id="cli-test")
    try:
        producer.send("cli-records", key=b"k", value="héllo".encode(), partition=0).get(timeout=30)
    finally:
        producer.close(timeout=5)
    assert "cli-records" in [topic["name"] for topic in control(broker, "topics")]
    (record,) = control(broker, "records", "cli-records", "0")
    assert (record["offset"], base64.b64decode(record["value"]), base64.b64decode(record["key"])) == \
        (0, "héllo".encode(), b"k")
    (as_text,) = control(broker, "records", "cli-records", "--text")
    assert as_text["value"] == "héllo"
    produced = control(broker, "requests", "--api", "Produce")
    assert [(e["api"], e["client_id"]) for e in produced] == [("Produce", "cli-test")]
    control(broker, "requests", "--clear")
    assert control(broker, "requests") == []


def test_offsets_of_an_unknown_group_are_empty(broker):
    assert control(broker, "offsets", "nobody") == []


def test_groups_are_listed_and_described(broker):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    broker.create_topic("cli-groups", 1)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="cli-group",
                             enable_auto_commit=False, request_timeout_ms=15000)
    try:
        consumer.commit({TopicPartition("cli-groups", 0): OffsetAndMetadata(3, "", -1)})
    finally:
        consumer.close()
    listed = {group["group_id"]: group for group in control(broker, "groups")}
    assert (listed["cli-group"]["type"], listed["cli-group"]["state"]) == ("classic", "Empty")
    described = control(broker, "group", "cli-group")
    assert (described["type"], described["members"]) == ("classic", [])
    done = cli("control", "--control", broker.control_url, "group", "nobody")
    assert done.returncode == 1 and "no group nobody" in done.stderr


def test_the_endpoint_may_come_from_the_environment(broker):
    done = cli("control", "status", env_control=broker.control_url.removeprefix("http://"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["bootstrap_servers"] == broker.bootstrap_servers


def test_refused_commands_exit_1_with_the_reason(broker):
    done = cli("control", "--control", broker.control_url, "inject-error", "Produce", "NOT_A_CODE")
    assert done.returncode == 1
    assert "NOT_A_CODE" in done.stderr and done.stdout == ""


def test_an_unreachable_endpoint_exits_1():
    done = cli("control", "--control", "127.0.0.1:1", "status")
    assert done.returncode == 1
    assert "cannot reach" in done.stderr


def test_serve_refuses_an_unknown_emulated_release(tmp_path):
    done = cli("serve", "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "d"), "--emulate", "0.0.0-none")
    assert done.returncode == 1
    assert "emulat" in done.stderr and done.stdout == ""


def test_serve_refuses_a_malformed_control_address(tmp_path):
    done = cli("serve", "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "d"), "--control-listen", "nope")
    assert done.returncode == 1
    assert "control" in done.stderr
