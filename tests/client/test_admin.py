"""Admin against compatbroker: every operation, its per-item errors, and the stable keys of its JSON form."""
from __future__ import annotations

import pytest

from compatbroker.client import KafkaError
from compatbroker.client.admin import NewTopic, raise_for_errors

from .helpers import join_classic_group, join_consumer_group, join_share_group, produce, wait_for


# --- topics ---------------------------------------------------------------------------------------------------------

def test_create_topics_reports_each_topic(admin):
    results = admin.create_topics([NewTopic("made-a", 2, 1, {"retention.ms": "60000"}), NewTopic("made-b")])
    assert [(r.name, r.error) for r in results] == [("made-a", None), ("made-b", None)]
    assert results[0].partitions == 2 and results[0].replication_factor == 1 and results[0].topic_id
    assert results[1].partitions == 1                                  # the broker's num.partitions
    again = admin.create_topics([NewTopic("made-a", 1), NewTopic("made-c", 1)])
    assert again[0].error.name == "TOPIC_ALREADY_EXISTS" and again[1].error is None
    assert set(again[0].to_json()) == {"name", "error", "topic_id", "partitions", "replication_factor"}
    assert again[0].to_json()["error"]["name"] == "TOPIC_ALREADY_EXISTS"
    with pytest.raises(KafkaError) as caught:
        raise_for_errors(again)
    assert caught.value.name == "TOPIC_ALREADY_EXISTS"
    assert set(caught.value.items) == {"made-a", "made-c"} and caught.value.items["made-c"] is None


def test_create_topics_validate_only_and_bad_config(admin):
    results = admin.create_topics([NewTopic("only-checked", 1, 1), NewTopic("bad-config", 1, 1, {"nope": "1"})],
                                  validate_only=True)
    assert results[0].error is None and results[1].error.name == "INVALID_CONFIG"
    assert "only-checked" not in {t.name for t in admin.list_topics()}


def test_list_topics_hides_internal_ones(admin, client):
    admin.create_topics([NewTopic("listed", 3, 1)])
    admin.commit_offsets("lister", {("listed", 0): 1})             # creates __consumer_offsets
    names = [t.name for t in admin.list_topics()]
    assert "listed" in names and "__consumer_offsets" not in names and names == sorted(names)
    internal = {t.name: t for t in admin.list_topics(internal=True)}
    assert internal["__consumer_offsets"].internal
    assert internal["listed"].to_json() == {"name": "listed", "topic_id": internal["listed"].topic_id,
                                            "internal": False, "partitions": 3, "replication_factor": 1}


def test_delete_topics(admin):
    admin.create_topics([NewTopic("doomed", 1, 1)])
    results = admin.delete_topics(["doomed", "never-was"])
    assert results[0].error is None and results[1].error.name == "UNKNOWN_TOPIC_OR_PARTITION"
    assert "doomed" not in {t.name for t in admin.list_topics()}


def test_create_partitions(admin, client):
    admin.create_topics([NewTopic("growing", 1, 1)])
    results = admin.create_partitions({"growing": 4, "never-was": 2})
    assert results[0].error is None and results[1].error.name == "UNKNOWN_TOPIC_OR_PARTITION"
    assert len(client.topic("growing", refresh=True).partitions) == 4
    assert admin.create_partitions({"growing": 2})[0].error.name == "INVALID_PARTITIONS"


def test_describe_topics(admin):
    admin.create_topics([NewTopic("described", 2, 1)])
    topics = admin.describe_topics(["described", "never-was"])
    assert sorted(topics["described"].partitions) == [0, 1]
    assert topics["never-was"].error.name == "UNKNOWN_TOPIC_OR_PARTITION"


# --- configs --------------------------------------------------------------------------------------------------------

def test_describe_configs_with_sources_and_synonyms(admin):
    admin.create_topics([NewTopic("configured", 1, 1, {"retention.ms": "60000"})])
    entries = {e.name: e for e in admin.describe_configs("topic", "configured")}
    retention = entries["retention.ms"]
    assert (retention.value, retention.source, retention.default) == ("60000", "DYNAMIC_TOPIC_CONFIG", False)
    assert retention.synonyms[0].source == "DYNAMIC_TOPIC_CONFIG"
    assert retention.type == "LONG" and not retention.read_only and not retention.sensitive
    assert entries["cleanup.policy"].source == "DEFAULT_CONFIG" and entries["cleanup.policy"].default
    assert set(retention.to_json()) == {"name", "value", "source", "read_only", "sensitive", "default", "synonyms",
                                        "type", "documentation"}
    picked = admin.describe_configs("TOPIC", "configured", ["cleanup.policy"], documentation=True)
    assert [e.name for e in picked] == ["cleanup.policy"] and picked[0].documentation


def test_describe_configs_of_a_broker_goes_to_that_broker(admin, client):
    node = next(iter(client.brokers))
    entries = {e.name: e for e in admin.describe_configs("broker", str(node), ["message.max.bytes"])}
    assert entries["message.max.bytes"].value
    with pytest.raises(KafkaError) as caught:
        admin.describe_configs("topic", "never-was")
    assert caught.value.name == "UNKNOWN_TOPIC_OR_PARTITION"


def test_incremental_alter_configs(admin):
    admin.create_topics([NewTopic("altered", 1, 1, {"cleanup.policy": "delete"})])
    admin.incremental_alter_configs("topic", "altered", [("retention.ms", "set", "1234"),
                                                         ("cleanup.policy", "append", "compact")])
    entries = {e.name: e for e in admin.describe_configs("topic", "altered")}
    assert entries["retention.ms"].value == "1234"
    assert entries["cleanup.policy"].value == "delete,compact"
    admin.incremental_alter_configs("topic", "altered", [("retention.ms", "DELETE", None)])
    assert admin.describe_configs("topic", "altered", ["retention.ms"])[0].source == "DEFAULT_CONFIG"
    with pytest.raises(KafkaError) as caught:
        admin.incremental_alter_configs("topic", "altered", [("retention.ms", "set", "soon")])
    assert caught.value.name == "INVALID_CONFIG"
    with pytest.raises(ValueError, match="operation"):
        admin.incremental_alter_configs("topic", "altered", [("retention.ms", "replace", "1")])


def test_alter_configs_fallback_for_brokers_without_incremental(admin, client):
    admin.create_topics([NewTopic("legacy-altered", 1, 1, {"retention.ms": "5000", "segment.ms": "100000"})])
    client.connection().api_versions.pop(44)                      # as a broker older than Kafka 2.3
    admin.incremental_alter_configs("topic", "legacy-altered", [("retention.ms", "set", "7000")])
    entries = {e.name: e for e in admin.describe_configs("topic", "legacy-altered")}
    assert entries["retention.ms"].value == "7000"
    assert entries["segment.ms"].value == "100000"                # the other override survived the full replace


# --- offsets --------------------------------------------------------------------------------------------------------

def test_list_offsets_earliest_latest_and_by_time(admin, client):
    admin.create_topics([NewTopic("offsets", 2, 1)])
    produce(client, "offsets", 0, [b"a", b"b", b"c"], timestamps=[1000, 2000, 3000])
    assert [r.offset for r in admin.list_offsets("offsets", None, "earliest")] == [0, 0]
    assert [r.offset for r in admin.list_offsets("offsets", None, "latest")] == [3, 0]
    assert admin.list_offsets("offsets", [0], 2000)[0].offset == 1
    assert admin.list_offsets("offsets", [0], "2000")[0].offset == 1       # as a command line gives it
    assert admin.list_offsets("offsets", [0], 9000)[0].offset == -1
    newest = admin.list_offsets("offsets", [0], "max-timestamp")[0]
    assert (newest.offset, newest.timestamp) == (2, 3000)
    missing = admin.list_offsets("offsets", [0, 7], "latest")
    assert missing[0].error is None and missing[1].error.name == "UNKNOWN_TOPIC_OR_PARTITION"
    assert set(missing[1].to_json()) == {"topic", "partition", "offset", "timestamp", "leader_epoch", "error"}
    with pytest.raises(ValueError):
        admin.list_offsets("offsets", [0], "yesterday")


def test_produce_with_acks_0_gets_no_answer(admin, client):
    admin.create_topics([NewTopic("fire-and-forget", 1, 1)])
    assert produce(client, "fire-and-forget", 0, [b"x"], acks=0) is None
    wait_for(lambda: admin.list_offsets("fire-and-forget", [0])[0].offset == 1, "the acks=0 record")


# --- cluster --------------------------------------------------------------------------------------------------------

def test_cluster_info(admin, client):
    info = admin.cluster_info()
    assert info.source == "DescribeCluster" and info.cluster_id == client.metadata([]).cluster_id
    assert [b.node_id for b in info.brokers] == sorted(client.brokers) and info.controller_id >= 0
    assert "group.version" in info.finalized_features
    assert set(info.to_json()) == {"cluster_id", "controller_id", "brokers", "finalized_features",
                                   "supported_features", "source"}


def test_cluster_info_without_describe_cluster(admin, client):
    client.connection().api_versions.pop(60)
    info = admin.cluster_info()
    assert info.source == "Metadata" and info.brokers and info.cluster_id


# --- groups ---------------------------------------------------------------------------------------------------------

def test_commit_and_fetch_offsets(broker, admin):
    admin.create_topics([NewTopic("committed", 3, 1)])
    broker.clear_requests()
    results = admin.commit_offsets("committer", {("committed", 0): 5, ("committed", 2): 7})
    assert [(r.partition, r.error) for r in results] == [(0, None), (2, None)]
    offsets = admin.committed_offsets("committer")
    assert [(o.topic, o.partition, o.offset) for o in offsets] == [("committed", 0, 5), ("committed", 2, 7)]
    every = admin.committed_offsets("committer", ["committed"])
    assert [o.offset for o in every] == [5, -1, 7]
    assert set(every[0].to_json()) == {"topic", "partition", "offset", "leader_epoch", "metadata", "error"}
    # topics by id (v10, Kafka 4.1+) where the broker offers it, by name for a topic without an id
    assert {e.api_version for e in broker.requests(api="OffsetCommit")} == {10}
    assert {e.api_version for e in broker.requests(api="OffsetFetch")} == {10}
    bad = admin.commit_offsets("committer", {("never-was", 0): 1})
    assert bad[0].error.name == "UNKNOWN_TOPIC_OR_PARTITION" and bad[0].topic == "never-was"
    assert broker.requests(api="OffsetCommit")[-1].api_version == 9


def test_list_describe_and_delete_an_empty_classic_group(admin):
    admin.create_topics([NewTopic("grouped", 1, 1)])
    admin.commit_offsets("empty-group", {("grouped", 0): 1})
    listed = {g.group_id: g for g in admin.list_groups()}
    assert listed["empty-group"].state == "Empty" and listed["empty-group"].type == "classic"
    assert "empty-group" in {g.group_id for g in admin.list_groups(states=["Empty"])}
    assert "empty-group" not in {g.group_id for g in admin.list_groups(states=["Stable"])}
    assert "empty-group" not in {g.group_id for g in admin.list_groups(types=["consumer"])}
    described, missing = admin.describe_groups(["empty-group", "never-was"])
    assert (described.type, described.state, described.members, described.error) == ("classic", "Empty", [], None)
    assert missing.error.name == "GROUP_ID_NOT_FOUND" and missing.state == "Dead"
    assert set(described.to_json()) == {"group_id", "type", "state", "coordinator", "protocol_type", "protocol",
                                        "assignor", "group_epoch", "assignment_epoch", "members", "error"}
    deleted = admin.delete_groups(["empty-group", "never-was"])
    assert deleted[0].error is None and deleted[1].error.name == "GROUP_ID_NOT_FOUND"
    assert "empty-group" not in {g.group_id for g in admin.list_groups()}


def test_delete_offsets(admin):
    admin.create_topics([NewTopic("forgotten", 2, 1)])
    admin.commit_offsets("forgetter", {("forgotten", 0): 1, ("forgotten", 1): 2})
    results = admin.delete_offsets("forgetter", [("forgotten", 0)])
    assert [(r.partition, r.error) for r in results] == [(0, None)]
    assert [o.partition for o in admin.committed_offsets("forgetter")] == [1]
    with pytest.raises(KafkaError) as caught:
        admin.delete_offsets("never-was", [("forgotten", 0)])
    assert caught.value.name == "GROUP_ID_NOT_FOUND"


def test_classic_group_with_a_live_member(admin, client):
    admin.create_topics([NewTopic("consumed", 3, 1)])
    member_id = join_classic_group(client, "live-classic", "consumed", [0, 2])
    group = admin.describe_groups(["live-classic"])[0]
    assert (group.type, group.state, group.protocol_type, group.protocol) == ("classic", "Stable", "consumer",
                                                                              "range")
    member = group.members[0]
    assert member.member_id == member_id and member.client_id == client.config.client_id
    assert member.subscribed_topics == ["consumed"]
    assert [(tp.topic, tp.partition) for tp in member.assignment] == [("consumed", 0), ("consumed", 2)]
    assert member.to_json()["assignment"] == [{"topic": "consumed", "partition": 0},
                                              {"topic": "consumed", "partition": 2}]
    assert {g.group_id: g.state for g in admin.list_groups(states=["Stable"])}["live-classic"] == "Stable"
    outsider = admin.commit_offsets("live-classic", {("consumed", 0): 1})
    assert outsider[0].error is not None                         # a group with members refuses outsiders
    assert admin.delete_groups(["live-classic"])[0].error.name == "NON_EMPTY_GROUP"


def test_consumer_group_is_described_with_consumer_group_describe(admin, client):
    admin.create_topics([NewTopic("kip848", 2, 1)])
    member_id = join_consumer_group(client, "modern-group", ["kip848"])
    listed = {g.group_id: g for g in admin.list_groups(types=["consumer"])}
    assert listed["modern-group"].type == "consumer"
    group = admin.describe_groups(["modern-group"])[0]
    assert group.type == "consumer" and group.group_epoch >= 1 and group.assignor
    member = group.members[0]
    assert member.member_id == member_id and member.subscribed_topics == ["kip848"]
    assert sorted((tp.topic, tp.partition) for tp in member.target_assignment) == [("kip848", 0), ("kip848", 1)]


def test_share_group_is_described_with_share_group_describe(admin, client):
    admin.create_topics([NewTopic("queued", 1, 1)])
    member_id = join_share_group(client, "share-group", ["queued"])
    group = admin.describe_groups(["share-group"])[0]
    assert group.type == "share" and group.error is None
    assert [m.member_id for m in group.members] == [member_id]
    assert {g.group_id: g.type for g in admin.list_groups()}["share-group"] == "share"


def test_alter_configs_fallback_refuses_to_drop_a_secret(admin, client, monkeypatch):
    from compatbroker.client.admin import ConfigEntry
    secret = ConfigEntry("ssl.key.password", None, "DYNAMIC_BROKER_CONFIG", False, True, False)
    monkeypatch.setattr(admin, "describe_configs", lambda *args, **kwargs: [secret])
    client.connection(next(iter(client.brokers))).api_versions.pop(44)
    with pytest.raises(KafkaError, match="ssl.key.password") as caught:
        admin.incremental_alter_configs("broker", str(next(iter(client.brokers))), [("log.retention.ms", "set", "1")])
    assert caught.value.name == "UNSUPPORTED_VERSION"


def test_raise_for_errors_keys_items_by_what_they_are_about(admin):
    admin.create_topics([NewTopic("keyed", 1, 1)])
    results = admin.commit_offsets("keyed-group", {("keyed", 0): 1, ("never-was", 3): 1})
    with pytest.raises(KafkaError) as caught:
        raise_for_errors(results)
    assert caught.value.name == "UNKNOWN_TOPIC_OR_PARTITION" and "never-was-3" in caught.value.message
    assert caught.value.items == {"keyed-0": None, "never-was-3": results[1].error}
    raise_for_errors(admin.delete_groups(["keyed-group"]))                 # nothing failed: returns


def test_committed_offsets_from_a_broker_with_offset_fetch_v1_only(admin, client):
    admin.create_topics([NewTopic("old-fetch", 2, 1)])
    admin.commit_offsets("old-fetcher", {("old-fetch", 1): 4})
    node = client.coordinator("old-fetcher")
    client.connection(node).api_versions[9] = (0, 1)              # as a broker before Kafka 0.10.2
    offsets = admin.committed_offsets("old-fetcher")
    assert [(o.topic, o.partition, o.offset) for o in offsets] == [("old-fetch", 1, 4)]


def test_share_group_start_offsets_are_altered_and_described(admin, client):
    """AlterShareGroupOffsets (an empty share group's only) and DescribeShareGroupOffsets, with per-partition
    errors, as kafka-share-groups.sh --reset-offsets and --describe --offsets use them."""
    from compatbroker.protocol.messages import ShareGroupHeartbeatRequest

    admin.create_topics([NewTopic("share-reset", 2, 1)])
    produce(client, "share-reset", 0, [b"a", b"b", b"c", b"d", b"e"])
    member_id = join_share_group(client, "share-resetters", ["share-reset"])
    with pytest.raises(KafkaError) as caught:
        admin.alter_share_group_offsets("share-resetters", {("share-reset", 0): 3})
    assert caught.value.name == "NON_EMPTY_GROUP"
    left = client.send(ShareGroupHeartbeatRequest(group_id="share-resetters", member_id=member_id, member_epoch=-1),
                       client.coordinator("share-resetters"))
    assert left.error_code == 0

    results = admin.alter_share_group_offsets("share-resetters", {
        ("share-reset", 0): 3, ("share-reset", 1): 0, ("share-reset", 7): 0, ("no-such-topic", 0): 0})
    assert [(r.topic, r.partition, r.error and r.error.name) for r in results] == [
        ("no-such-topic", 0, "UNKNOWN_TOPIC_OR_PARTITION"), ("share-reset", 0, None), ("share-reset", 1, None),
        ("share-reset", 7, "UNKNOWN_TOPIC_OR_PARTITION")]
    assert results[0].to_json()["error"]["name"] == "UNKNOWN_TOPIC_OR_PARTITION"

    described = admin.describe_share_group_offsets("share-resetters")
    assert [(o.topic, o.partition, o.start_offset, o.error) for o in described] == [
        ("share-reset", 0, 3, None), ("share-reset", 1, 0, None)]
    assert described[0].lag == 2  # records 3 and 4 not yet delivered (DescribeShareGroupOffsets v1, KIP-1226)
    assert set(described[0].to_json()) == {"topic", "partition", "start_offset", "leader_epoch", "lag", "error"}
    assert [(o.partition, o.start_offset) for o in admin.describe_share_group_offsets(
        "share-resetters", ["share-reset"])] == [(0, 3), (1, 0)]
    with pytest.raises(KafkaError) as caught:
        admin.alter_share_group_offsets("no-such-share-group", {("share-reset", 0): 0})
    assert caught.value.name == "GROUP_ID_NOT_FOUND"
