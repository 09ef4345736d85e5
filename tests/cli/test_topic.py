"""`compatbroker topic ...` against compatbroker: tables, the stable `--format json` documents, exit codes."""
from __future__ import annotations

import json

from kafka import KafkaProducer

from .helpers import run

LIST_KEYS = {"name", "topic_id", "internal", "partitions", "replication_factor"}
PARTITION_KEYS = {"partition", "leader", "leader_epoch", "replicas", "isr", "offline", "log_start_offset",
                  "log_end_offset"}
CONFIG_KEYS = {"name", "value", "source", "read_only", "sensitive"}


def cli(broker, *args, **kwargs):
    return run("-b", broker.bootstrap_servers, *args, **kwargs)


def _produce(broker, topic: str, partition: int, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    try:
        sent = [producer.send(topic, key=b"k%d" % index, value=b"v%d" % index, partition=partition)
                for index in range(count)]
        for future in sent:
            future.get(timeout=30)
    finally:
        producer.close(timeout=5)


def test_create_list_describe_delete(broker, name):
    created = cli(broker, "topic", "create", name, "-p", "3", "-c", "retention.ms=60000", "--format", "json")
    document = created.json()
    assert set(document) == {"name", "created", "topic_id", "partitions", "replication_factor", "configs", "error"}
    assert (document["name"], document["created"], document["partitions"], document["replication_factor"],
            document["configs"], document["error"]) == (name, True, 3, 1, {"retention.ms": "60000"}, None)

    listed = cli(broker, "topic", "list", "--format", "json").json()
    (row,) = [row for row in listed["topics"] if row["name"] == name]
    assert set(row) == LIST_KEYS
    assert (row["partitions"], row["replication_factor"], row["internal"], row["topic_id"]) == \
        (3, 1, False, document["topic_id"])
    assert all(not row["internal"] for row in listed["topics"])
    everything = cli(broker, "topic", "list", "--internal", "--format", "json").json()
    assert "__consumer_offsets" not in {r["name"] for r in listed["topics"]}
    table = cli(broker, "topic", "list")
    assert table.code == 0 and table.stdout.splitlines()[0].split() == \
        ["NAME", "PARTITIONS", "REPLICAS", "INTERNAL", "TOPIC-ID"]
    assert any(line.split()[:4] == [name, "3", "1", "no"] for line in table.stdout.splitlines())
    assert len(everything["topics"]) >= len(listed["topics"])

    deleted = cli(broker, "topic", "delete", name, "--format", "json").json()
    assert deleted == {"topics": [{"name": name, "deleted": True, "error": None}]}
    assert name not in {row["name"] for row in cli(broker, "topic", "list", "--format", "json").json()["topics"]}


def test_create_of_an_existing_topic_exits_1_unless_if_not_exists(broker, name):
    assert cli(broker, "topic", "create", name).stdout == f"Created topic {name}.\n"
    again = cli(broker, "topic", "create", name)
    assert again.code == 1 and again.stdout == ""
    assert again.stderr == f"compatbroker: topic create {name}: TOPIC_ALREADY_EXISTS: Topic '{name}' already exists.\n"
    tolerated = cli(broker, "topic", "create", name, "--if-not-exists")
    assert (tolerated.code, tolerated.stdout) == (0, f"Topic {name} already exists.\n")
    as_json = cli(broker, "topic", "create", name, "--if-not-exists", "--format", "json").json()
    assert (as_json["created"], as_json["error"]["name"]) == (False, "TOPIC_ALREADY_EXISTS")


def test_create_refused_by_the_broker_exits_1(broker, name):
    refused = cli(broker, "topic", "create", name, "-r", "3")
    assert refused.code == 1
    assert refused.stderr.startswith(f"compatbroker: topic create {name}: INVALID_REPLICATION_FACTOR: ")
    bad_config = cli(broker, "topic", "create", name, "-c", "cleanup.policy=sometimes")
    assert bad_config.code == 1 and ": INVALID_CONFIG: " in bad_config.stderr


def test_describe_shows_offsets_leaders_and_overridden_configs(broker, name):
    assert cli(broker, "topic", "create", name, "-p", "2", "-c", "cleanup.policy=compact").code == 0
    _produce(broker, name, 1, 5)
    document = cli(broker, "topic", "describe", name, "--format", "json").json()
    (topic,) = document["topics"]
    assert set(topic) == {"name", "topic_id", "internal", "partitions", "configs"}
    assert [set(p) for p in topic["partitions"]] == [PARTITION_KEYS] * 2
    assert [(p["partition"], p["leader"], p["replicas"], p["isr"], p["log_start_offset"], p["log_end_offset"])
            for p in topic["partitions"]] == [(0, 1, [1], [1], 0, 0), (1, 1, [1], [1], 0, 5)]
    assert [set(c) for c in topic["configs"]] == [CONFIG_KEYS]
    assert [(c["name"], c["value"], c["source"]) for c in topic["configs"]] == \
        [("cleanup.policy", "compact", "DYNAMIC_TOPIC_CONFIG")]
    every = cli(broker, "topic", "describe", name, "--all-configs", "--format", "json").json()["topics"][0]
    assert {"retention.ms", "segment.bytes"} <= {c["name"] for c in every["configs"]}

    table = cli(broker, "topic", "describe", name).stdout.splitlines()
    assert table[0].split() == ["Topic", name]
    header = next(line for line in table if line.startswith("PARTITION"))
    assert header.split() == ["PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE", "LOG-START-OFFSET",
                              "LOG-END-OFFSET"]
    assert ["1", "1", "0", "1", "1", "-", "0", "5"] in [line.split() for line in table]
    assert ["cleanup.policy", "compact", "DYNAMIC_TOPIC_CONFIG"] in [line.split() for line in table]


def test_unknown_topics_exit_1_and_the_others_are_still_shown(broker, name):
    assert cli(broker, "topic", "create", name).code == 0
    ran = cli(broker, "topic", "describe", name, "no-such-topic", "--format", "json")
    assert ran.code == 1
    assert [t["name"] for t in json.loads(ran.stdout)["topics"]] == [name]
    assert ran.stderr.startswith("compatbroker: topic describe no-such-topic: UNKNOWN_TOPIC_OR_PARTITION: ")

    deleted = cli(broker, "topic", "delete", "no-such-topic", name, "--format", "json")
    assert deleted.code == 1
    rows = json.loads(deleted.stdout)["topics"]
    assert [(r["name"], r["deleted"], (r["error"] or {}).get("name")) for r in rows] == [
        ("no-such-topic", False, "UNKNOWN_TOPIC_OR_PARTITION"), (name, True, None)]
    assert cli(broker, "topic", "delete", "no-such-topic", "--if-exists").code == 0


def test_alter_config_sets_and_deletes(broker, name):
    assert cli(broker, "topic", "create", name, "-c", "retention.ms=60000").code == 0
    altered = cli(broker, "topic", "alter-config", name, "--set", "segment.ms=3600000", "--delete", "retention.ms",
                  "--format", "json").json()
    assert altered == {"name": name, "set": {"segment.ms": "3600000"}, "deleted": ["retention.ms"], "error": None}
    configs = cli(broker, "topic", "describe", name, "--format", "json").json()["topics"][0]["configs"]
    assert [(c["name"], c["value"]) for c in configs] == [("segment.ms", "3600000")]
    assert cli(broker, "topic", "alter-config", name, "--set", "segment.ms=1000").stdout == \
        f"Updated the configs of topic {name}.\n"

    refused = cli(broker, "topic", "alter-config", name, "--set", "no.such.config=1")
    assert refused.code == 1 and refused.stderr.startswith(f"compatbroker: topic alter-config {name}: INVALID_")
    unknown = cli(broker, "topic", "alter-config", "no-such-topic", "--set", "retention.ms=1")
    assert unknown.code == 1 and ": UNKNOWN_TOPIC_OR_PARTITION: " in unknown.stderr
    assert cli(broker, "topic", "alter-config", name).code == 2  # nothing to change: a usage error


def test_a_topic_named_twice_is_described_and_deleted_once(broker, name):
    assert cli(broker, "topic", "create", name).code == 0
    described = cli(broker, "topic", "describe", name, name, "--format", "json").json()
    assert [t["name"] for t in described["topics"]] == [name]
    deleted = cli(broker, "topic", "delete", name, name, "--format", "json")  # not a duplicate DeleteTopics entry
    assert (deleted.code, deleted.stderr) == (0, "")
    assert deleted.json() == {"topics": [{"name": name, "deleted": True, "error": None}]}
