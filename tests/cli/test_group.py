"""`compatbroker group ...` against compatbroker: lag per partition with a live consumer, resetting the offsets of
an inactive group (an active one refused), deleting groups and offsets; the stable `--format json` documents."""
from __future__ import annotations

import json

import pytest
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.errors import CommitFailedError, RebalanceInProgressError

from .helpers import run, wait_until

GROUP_KEYS = {"group_id", "type", "state", "protocol_type", "protocol", "coordinator", "members", "offsets",
              "total_lag"}
MEMBER_KEYS = {"member_id", "group_instance_id", "client_id", "host", "assignment"}
OFFSET_KEYS = {"topic", "partition", "committed_offset", "log_end_offset", "lag", "member_id", "client_id", "host"}


def cli(broker, *args, **kwargs):
    return run("-b", broker.bootstrap_servers, *args, **kwargs)


def _produce(broker, topic: str, counts: dict[int, int]) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    try:
        sent = [producer.send(topic, value=b"v", timestamp_ms=1_000_000 + index, partition=partition)
                for partition, count in counts.items() for index in range(count)]
        for future in sent:
            future.get(timeout=30)
    finally:
        producer.close(timeout=5)


@pytest.fixture
def topic(broker, name):
    """A topic of 2 partitions holding 4 and 6 records (timestamps 1000000, 1000001, ...)."""
    assert cli(broker, "topic", "create", name, "-p", "2").code == 0
    _produce(broker, name, {0: 4, 1: 6})
    return name


def _consume(broker, topic: str, group: str, records: int) -> KafkaConsumer:
    """A group member that has read and committed `records` records (still in the group)."""
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group, client_id="lag-reader",
                             auto_offset_reset="earliest", enable_auto_commit=False, max_poll_records=1,
                             request_timeout_ms=15000)
    # subscribe once the consumer knows the topic: kafka-python assigns nothing to a topic it has no metadata for
    wait_until(lambda: topic in consumer.topics(), "the topic in the consumer's metadata")
    consumer.subscribe([topic])
    seen = []
    wait_until(lambda: seen.extend(r for batch in consumer.poll(200).values() for r in batch) or
               len(seen) >= records, f"{records} records")
    # the offsets after the first `records` records (0 where none was read), committed once any rebalance
    # kafka-python started has ended
    offsets = {TopicPartition(topic, p): OffsetAndMetadata(0, "", -1) for p in consumer.partitions_for_topic(topic)}
    offsets.update({TopicPartition(topic, r.partition): OffsetAndMetadata(r.offset + 1, "", -1)
                    for r in seen[:records]})

    def committed():
        try:
            consumer.commit(offsets)
        except (RebalanceInProgressError, CommitFailedError):
            consumer.poll(100)  # completes the rebalance
            return False
        return True
    wait_until(committed, "the offsets committed")
    return consumer


def test_describe_shows_members_assignments_and_lag(broker, topic, name):
    consumer = _consume(broker, topic, name, 3)
    try:
        committed = consumer.committed
        document = cli(broker, "group", "describe", name, "--format", "json").json()
        (group,) = document["groups"]
        assert set(group) == GROUP_KEYS
        assert (group["group_id"], group["type"], group["state"], group["protocol_type"], group["protocol"]) == \
            (name, "classic", "Stable", "consumer", "range")
        (member,) = group["members"]
        assert set(member) == MEMBER_KEYS
        assert member["client_id"] == "lag-reader"
        assert member["assignment"] == [{"topic": topic, "partitions": [0, 1]}]
        assert [set(row) for row in group["offsets"]] == [OFFSET_KEYS] * 2
        expected = {p: committed(TopicPartition(topic, p)) for p in (0, 1)}
        rows = [(r["partition"], r["committed_offset"], r["log_end_offset"], r["lag"], r["member_id"])
                for r in group["offsets"]]
        assert rows == [(p, expected[p], end, None if expected[p] is None else end - expected[p],
                         member["member_id"]) for p, end in ((0, 4), (1, 6))]
        assert group["total_lag"] == sum(r[3] for r in rows if r[3] is not None) == 10 - 3

        table = cli(broker, "group", "describe", name).stdout.splitlines()
        assert "TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID".split() in \
            [line.split() for line in table]
        assert ["Total", "lag", "7"] in [line.split() for line in table]

        listed = cli(broker, "group", "list", "--format", "json").json()["groups"]
        assert {"group_id": name, "type": "classic", "state": "Stable", "protocol_type": "consumer"} in listed
        assert name in {g["group_id"] for g in cli(broker, "group", "list", "--state", "stable", "--format",
                                                         "json").json()["groups"]}
        assert name not in {g["group_id"] for g in cli(broker, "group", "list", "--state", "Empty", "--format",
                                                             "json").json()["groups"]}

        refused = cli(broker, "group", "seek", name, "--to", "earliest", "--topic", topic)
        assert refused.code == 1 and refused.stdout == ""
        assert refused.stderr == (f"compatbroker: group seek {name}: NON_EMPTY_GROUP: Assignments can only be reset "
                                  f"if the group '{name}' is inactive, but the current state is Stable.\n")
        busy = cli(broker, "group", "delete", name)
        assert busy.code == 1 and f"compatbroker: group delete {name}: NON_EMPTY_GROUP: " in busy.stderr
    finally:
        consumer.close()


def _offsets(broker, group: str) -> dict:
    described = cli(broker, "group", "describe", group, "--format", "json").json()["groups"][0]
    return {(r["topic"], r["partition"]): r["committed_offset"] for r in described["offsets"]}


def test_seek_resets_an_inactive_group(broker, topic, name):
    _consume(broker, topic, name, 10).close()
    wait_until(lambda: cli(broker, "group", "describe", name, "--format", "json").json()["groups"][0]["state"]
               == "Empty", "the group to empty")
    assert _offsets(broker, name) == {(topic, 0): 4, (topic, 1): 6}

    dry = cli(broker, "group", "seek", name, "--to", "earliest", "--topic", topic, "--dry-run", "--format", "json")
    assert dry.json() == {"group_id": name, "dry_run": True, "offsets": [
        {"topic": topic, "partition": 0, "previous_offset": 4, "new_offset": 0, "error": None},
        {"topic": topic, "partition": 1, "previous_offset": 6, "new_offset": 0, "error": None}]}
    assert _offsets(broker, name) == {(topic, 0): 4, (topic, 1): 6}  # a dry run commits nothing

    assert cli(broker, "group", "seek", name, "--to", "earliest", "--topic", f"{topic}:1").code == 0
    assert _offsets(broker, name) == {(topic, 0): 4, (topic, 1): 0}
    assert cli(broker, "group", "seek", name, "--to", "2", "--all-topics").code == 0
    assert _offsets(broker, name) == {(topic, 0): 2, (topic, 1): 2}
    assert cli(broker, "group", "seek", name, "--to", "99", "--topic", topic).code == 0  # kept within the log
    assert _offsets(broker, name) == {(topic, 0): 4, (topic, 1): 6}
    assert cli(broker, "group", "seek", name, "--to", "@1000003", "--topic", topic).code == 0
    assert _offsets(broker, name) == {(topic, 0): 3, (topic, 1): 3}
    assert cli(broker, "group", "seek", name, "--to", "@9000000", "--topic", topic).code == 0  # after the last
    assert _offsets(broker, name) == {(topic, 0): 4, (topic, 1): 6}
    table = cli(broker, "group", "seek", name, "--to", "latest", "--topic", f"{topic}:0", "--dry-run").stdout
    assert [topic, "0", "4", "4", "-"] in [line.split() for line in table.splitlines()]


def test_seek_shows_each_partition_the_broker_refused(broker, topic, name, monkeypatch):
    """A partial failure shows on stdout (the row's error, in JSON and in the table), not only on stderr."""
    from compatbroker.client.admin import Admin, PartitionResult
    from compatbroker.client.errors import KafkaError

    commit = Admin.commit_offsets

    def refuse_partition_1(self, group_id, offsets, **kwargs):
        results = commit(self, group_id, {tp: o for tp, o in offsets.items() if tp[1] != 1}, **kwargs)
        return results + [PartitionResult(topic, 1, KafkaError(29, "Topic authorization failed."))]
    monkeypatch.setattr(Admin, "commit_offsets", refuse_partition_1)

    ran = cli(broker, "group", "seek", name, "--to", "2", "--topic", topic, "--format", "json")
    assert ran.code == 1
    assert json.loads(ran.stdout)["offsets"] == [
        {"topic": topic, "partition": 0, "previous_offset": None, "new_offset": 2, "error": None},
        {"topic": topic, "partition": 1, "previous_offset": None, "new_offset": 2, "error": {
            "code": 29, "name": "TOPIC_AUTHORIZATION_FAILED", "message": "Topic authorization failed."}}]
    assert f"compatbroker: group seek {name} {topic}:1: TOPIC_AUTHORIZATION_FAILED: " in ran.stderr
    assert _offsets(broker, name) == {(topic, 0): 2}
    table = cli(broker, "group", "seek", name, "--to", "3", "--topic", topic)
    assert table.code == 1
    rows = [line.split() for line in table.stdout.splitlines()]
    assert [topic, "0", "2", "3", "-"] in rows and [topic, "1", "-", "3", "TOPIC_AUTHORIZATION_FAILED"] in rows


def test_lag_past_the_log_end_is_negative_as_kafka_consumer_groups_shows_it(broker, topic, name):
    from compatbroker.client import ClientConfig, KafkaClient
    from compatbroker.client.admin import Admin

    with KafkaClient(ClientConfig(bootstrap=broker.bootstrap_servers)) as client:
        assert [r.error for r in Admin(client).commit_offsets(name, {(topic, 0): 9})] == [None]
    (row,) = cli(broker, "group", "describe", name, "--format", "json").json()["groups"][0]["offsets"]
    assert (row["committed_offset"], row["log_end_offset"], row["lag"]) == (9, 4, -5)


def test_seek_usage_errors(broker, topic, name):
    for args in (["--to", "sometime", "--topic", topic], ["--to", "-1", "--topic", topic], ["--to", "earliest"],
                 ["--to", "earliest", "--topic", topic, "--all-topics"], ["--to", "earliest", "--topic", f"{topic}:x"]):
        ran = cli(broker, "group", "seek", name, *args)
        assert ran.code == 2, (args, ran.stderr)
    unknown = cli(broker, "group", "seek", name, "--to", "earliest", "--topic", "no-such-topic")
    assert unknown.code == 1 and ": UNKNOWN_TOPIC_OR_PARTITION: " in unknown.stderr


def test_delete_offsets_then_the_group(broker, topic, name):
    _consume(broker, topic, name, 10).close()
    wait_until(lambda: cli(broker, "group", "describe", name, "--format", "json").json()["groups"][0]["state"]
               == "Empty", "the group to empty")
    deleted = cli(broker, "group", "delete", name, "--topic", f"{topic}:0", "--format", "json").json()
    assert deleted == {"group_id": name, "offsets": [{"topic": topic, "partition": 0, "deleted": True,
                                                      "error": None}]}
    assert _offsets(broker, name) == {(topic, 1): 6}

    gone = cli(broker, "group", "delete", name, "no-such-group", "--format", "json")
    assert gone.code == 1
    rows = json.loads(gone.stdout)["groups"]
    assert [(r["group_id"], r["deleted"], (r["error"] or {}).get("name")) for r in rows] == [
        (name, True, None), ("no-such-group", False, "GROUP_ID_NOT_FOUND")]
    described = cli(broker, "group", "describe", name)
    assert described.code == 1 and described.stderr.startswith(f"compatbroker: group describe {name}: "
                                                               "GROUP_ID_NOT_FOUND: ")


def test_group_names_print_as_given_never_as_markup(broker, topic):
    group = "[bold]g[/bold]"
    assert cli(broker, "group", "seek", group, "--to", "earliest", "--topic", topic).code == 0
    listed = cli(broker, "group", "list")
    assert group in listed.stdout.split() and "\x1b[" not in listed.stdout
    described = cli(broker, "group", "describe", group)
    assert described.code == 0 and ["Group", group] in [line.split() for line in described.stdout.splitlines()]


def test_control_characters_in_names_are_shown_escaped(broker, topic):
    """A group name holding a newline and an escape sequence stays on its line in tables and error lines and
    reaches no terminal as an escape; JSON carries it exactly."""
    group = "evil\n\x1b[2Jname"
    assert cli(broker, "group", "seek", group, "--to", "earliest", "--topic", topic).code == 0
    listed = cli(broker, "group", "list")
    assert "\x1b" not in listed.stdout
    assert ["evil\\n\\x1b[2Jname", "classic", "Empty"] in [line.split() for line in listed.stdout.splitlines()]
    assert group in {g["group_id"] for g in cli(broker, "group", "list", "--format", "json").json()["groups"]}
    missing = cli(broker, "group", "describe", "no\nsuch\x1b[2J")
    assert missing.code == 1 and missing.stderr.count("\n") == 1 and "\x1b" not in missing.stderr
    assert missing.stderr.startswith("compatbroker: group describe no\\nsuch\\x1b[2J: GROUP_ID_NOT_FOUND: ")


def test_a_consumer_protocol_group_is_described(broker, topic, name):
    """A KIP-848 group (ConsumerGroupDescribe): its type, assignor, members and their assignments."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": name, "client.id": "kip848",
                         "group.protocol": "consumer", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])

        def assigned():
            consumer.poll(0.2)
            return len(consumer.assignment()) == 2
        wait_until(assigned, "both partitions assigned")
        (group,) = cli(broker, "group", "describe", name, "--format", "json").json()["groups"]
        assert (group["type"], group["state"], group["protocol"]) == ("consumer", "Stable", "uniform")
        (member,) = group["members"]
        assert (member["client_id"], member["assignment"]) == ("kip848", [{"topic": topic, "partitions": [0, 1]}])
        assert [(r["partition"], r["committed_offset"], r["log_end_offset"], r["lag"], r["member_id"])
                for r in group["offsets"]] == [(0, None, 4, None, member["member_id"]),
                                                (1, None, 6, None, member["member_id"])]
        listed = cli(broker, "group", "list", "--type", "consumer", "--format", "json").json()["groups"]
        assert [(g["group_id"], g["type"]) for g in listed] == [(name, "consumer")]
    finally:
        consumer.close()


def _share_group_with_three_records(broker, name: str, settings: dict):
    """A ShareConsumer of a new topic `name` in share group `name`, the group formed, then three records produced
    (share.auto.offset.reset is latest: records are produced once the group reads the topic)."""
    from confluent_kafka import Producer, ShareConsumer

    assert cli(broker, "topic", "create", name).code == 0
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": name, **settings})
    try:
        consumer.subscribe([name])
        wait_until(lambda: consumer.poll(0.2) is not None or
                   cli(broker, "group", "describe", name, "--format", "json").code == 0, "the share group")
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for index in range(3):
            producer.produce(name, b"job%d" % index)
        assert producer.flush(30) == 0
    except BaseException:
        consumer.close()
        raise
    return consumer


def test_a_share_group_is_described_with_its_start_offsets(broker, name):
    """A KIP-932 share group: type share, its member, and the share-partition start offset in place of a
    committed offset once the records are acknowledged."""
    consumer = _share_group_with_three_records(broker, name, {"client.id": "worker"})
    try:
        received = []

        def acknowledged():
            received.extend(m for m in consumer.poll(0.2) or [] if m.error() is None)  # acknowledges the last
            (group,) = cli(broker, "group", "describe", name, "--format", "json").json()["groups"]
            return len(received) == 3 and group["offsets"] and group["offsets"][0]["committed_offset"] == 3 and group
        group = wait_until(acknowledged, "3 records delivered and acknowledged")
        assert (group["type"], group["state"], group["protocol_type"]) == ("share", "Stable", None)
        (member,) = group["members"]
        assert (member["client_id"], member["assignment"]) == ("worker", [{"topic": name, "partitions": [0]}])
        assert [(r["partition"], r["committed_offset"], r["log_end_offset"], r["lag"]) for r in group["offsets"]] == \
            [(0, 3, 3, 0)]
    finally:
        consumer.close()


def test_a_share_group_is_reset_with_alter_share_group_offsets(broker, name):
    """kafka-share-groups.sh --reset-offsets: a share group's start offsets move by AlterShareGroupOffsets (not
    OffsetCommit, which knows no share group), an empty share group's only."""
    consumer = _share_group_with_three_records(broker, name, {})
    try:
        received = []

        def acknowledged():
            received.extend(m for m in consumer.poll(0.2) or [] if m.error() is None)  # acknowledges the last
            described = cli(broker, "group", "describe", name, "--format", "json")
            return described.code == 0 and received and \
                [r["committed_offset"] for r in described.json()["groups"][0]["offsets"]] == [len(received)]
        wait_until(acknowledged, "records delivered and acknowledged")
        refused = cli(broker, "group", "seek", name, "--to", "earliest", "--topic", name)
        assert (refused.code, refused.stdout) == (1, "")
        assert refused.stderr == \
            f"compatbroker: group seek {name}: NON_EMPTY_GROUP: Share group '{name}' is not empty.\n"
    finally:
        consumer.close()
    wait_until(lambda: cli(broker, "group", "describe", name, "--format", "json").json()["groups"][0]["state"]
               == "Empty", "the share group to empty")
    done = cli(broker, "group", "seek", name, "--to", "1", "--all-topics", "--format", "json")
    assert done.code == 0, done.stderr
    assert done.json() == {"group_id": name, "dry_run": False, "offsets": [
        {"topic": name, "partition": 0, "previous_offset": len(received), "new_offset": 1, "error": None}]}
    (group,) = cli(broker, "group", "describe", name, "--format", "json").json()["groups"]
    assert [(r["committed_offset"], r["log_end_offset"]) for r in group["offsets"]] == [(1, 3)]
