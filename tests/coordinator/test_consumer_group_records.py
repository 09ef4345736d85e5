"""The records of a KIP-848 consumer group (`consumer_group/records.py`): what each holds, a whole group written and
replayed back, tombstones in Kafka's order and their replay, and the metadata hash."""
from __future__ import annotations

import struct
import uuid

import pytest

from compatbroker.coordinator import group_records as gr
from compatbroker.coordinator.consumer_group import records
from compatbroker.coordinator.consumer_group.model import (ClassicMemberMetadata, ClassicProtocol, ConsumerGroup,
                                                           ConsumerMember, MemberState, ResolvedRegex)
from compatbroker.coordinator.consumer_group.topic_hash import topic_hash, xxh3_64
from compatbroker.coordinator.offsets import CommittedOffset, parse_record, partition_for_group
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.topic_names import GROUP_METADATA_TOPIC
from tests.async_tests import async_test
from tests.cluster.test_replication import until
from tests.coordinator.test_cluster_coordinators import (another, coordinated_cluster, find, group_leader,
                                                         move_when_in_sync)
from tests.coordinator.consumer_group_support import SIX, Consumer, manager_of, make_broker, ok, settle, started

T1 = uuid.UUID("00000000-0000-0000-0000-00000000000a")
T2 = uuid.UUID("00000000-0000-0000-0000-00000000000b")


def clock():
    return 1_700_000_000_000


def replay(record_list, group=None):
    for key, value in record_list:
        group = records.apply(group, parse_record(key, value))
    return group


def sample_group() -> ConsumerGroup:
    group = ConsumerGroup("g", now_ms=clock)
    group.set_group_epoch(7, 1234)
    group.set_assignment_epoch(7)
    group.update_member(ConsumerMember(
        "m1", instance_id="i1", rack_id="r1", client_id="c1", client_host="/10.0.0.1", rebalance_timeout_ms=30_000,
        subscribed_topic_names=frozenset({"b", "a"}), server_assignor="range", member_epoch=7,
        previous_member_epoch=6, state=MemberState.UNREVOKED_PARTITIONS, assigned_partitions={T1: frozenset({0, 1})},
        partitions_pending_revocation={T2: frozenset({2})}))
    group.update_member(ConsumerMember(
        "m2", client_id="c2", client_host="/10.0.0.2", subscribed_topic_regex="a.*", member_epoch=7,
        previous_member_epoch=7, assigned_partitions={T2: frozenset({0, 1})},
        classic=ClassicMemberMetadata(45_000, (ClassicProtocol("range", b"\x00\x01sub"),))))
    group.set_target_assignment("m1", {T1: frozenset({0, 1})})
    group.set_target_assignment("m2", {T2: frozenset({0, 1, 2})})
    group.set_resolved_regex("a.*", ResolvedRegex(frozenset({"a", "ab"}), 42, 1_700_000_000_500))
    return group


def records_of(group: ConsumerGroup) -> list:
    """The records Kafka writes for a group, in its order: members, epoch, targets, target epoch, assignments."""
    gid = group.group_id
    return [*(records.member_metadata_record(gid, m) for m in group.members.values()),
            records.group_epoch_record(gid, group.group_epoch, group.metadata_hash),
            *(records.regex_record(gid, regex, resolved) for regex, resolved in group.resolved_regexes.items()),
            *(records.target_assignment_record(gid, m, a) for m, a in group.target_assignment.items()),
            records.target_assignment_epoch_record(gid, group.assignment_epoch),
            *(records.current_assignment_record(gid, m) for m in group.members.values())]


def test_a_group_written_and_replayed_is_the_same_group():
    group = sample_group()
    again = replay(records_of(group))
    assert again.group_id == "g" and again.group_epoch == 7 and again.metadata_hash == 1234
    assert again.assignment_epoch == 7
    assert again.members == group.members
    assert again.target_assignment == group.target_assignment
    assert again.resolved_regexes == group.resolved_regexes
    assert again.static_members == {"i1": "m1"}
    assert again.state == group.state and again.current_partition_epoch(T2, 2) == 7


def test_values_hold_what_kafka_writes():
    group = sample_group()
    member = parse_record(*records.member_metadata_record("g", group.members["m1"]))
    assert member.record_type == gr.CONSUMER_GROUP_MEMBER_METADATA and member.key.member_id == "m1"
    assert member.value.subscribed_topic_names == ["a", "b"]  # sorted, as Kafka writes them
    assert member.value.subscribed_topic_regex is None and member.value.classic_member_metadata is None
    dynamic = parse_record(*records.member_metadata_record("g", group.members["m2"]))
    assert dynamic.value.instance_id is None and dynamic.value.rack_id is None
    assert dynamic.value.server_assignor is None
    assert dynamic.value.classic_member_metadata.session_timeout_ms == 45_000
    current = parse_record(*records.current_assignment_record("g", group.members["m1"])).value
    assert (current.member_epoch, current.previous_member_epoch, current.state) == (7, 6, 1)
    assert [(tp.topic_id, tp.partitions) for tp in current.partitions_pending_revocation] == [(T2, [2])]
    target = parse_record(*records.target_assignment_record("g", "m2", {T2: frozenset({2, 0, 1}), T1: frozenset()}))
    assert [(tp.topic_id, tp.partitions) for tp in target.value.topic_partitions] == [(T2, [0, 1, 2])]
    regex = parse_record(*records.regex_record("g", "a.*", group.resolved_regexes["a.*"]))
    assert regex.key.regular_expression == "a.*"
    assert (regex.value.topics, regex.value.version, regex.value.timestamp) == (["a", "ab"], 42, 1_700_000_000_500)
    epoch = parse_record(*records.group_epoch_record("g", 9, -5)).value
    assert (epoch.epoch, epoch.metadata_hash) == (9, -5)


def test_group_tombstones_come_in_kafkas_order_and_remove_the_group_on_replay():
    group = sample_group()
    doomed = records.group_tombstones(group)
    parsed = [parse_record(key, value) for key, value in doomed]
    assert all(value is None for _, value in doomed)
    assert [(p.record_type, getattr(p.key, "member_id", None)) for p in parsed] == [
        (8, "m1"), (8, "m2"), (7, "m1"), (7, "m2"), (6, None), (5, "m1"), (5, "m2"), (16, None), (4, None), (3, None)]
    assert replay(doomed, replay(records_of(group))) is None


def test_member_tombstones_leave_then_remove_the_member():
    group = replay(records_of(sample_group()))
    group = replay([records.current_assignment_tombstone("g", "m1")], group)
    left = group.members["m1"]
    assert (left.member_epoch, left.previous_member_epoch, left.assigned_partitions) == (-1, -1, {})
    group = replay([records.target_assignment_tombstone("g", "m1"), records.member_metadata_tombstone("g", "m1")],
                   group)
    assert set(group.members) == {"m2"} and "m1" not in group.target_assignment
    assert group.static_members == {}
    group = replay([records.regex_tombstone("g", "a.*")], group)
    assert group.resolved_regexes == {}


def test_tombstones_of_unknown_groups_and_members_change_nothing():
    assert replay([records.member_metadata_tombstone("g", "m"), gr.tombstone(gr.CONSUMER_GROUP_METADATA, "g")]) is None
    group = replay([records.group_epoch_record("g", 1)])
    assert replay([records.current_assignment_tombstone("g", "nobody"),
                   records.member_metadata_tombstone("g", "nobody")], group).members == {}


def test_a_member_record_creates_the_group_and_kafka_3_x_partition_metadata_is_read_and_dropped():
    group = replay([records.member_metadata_record("g", ConsumerMember("m", client_id="c"))])
    assert group.group_epoch == 0 and set(group.members) == {"m"}
    partition_metadata = gr.typed_record(gr.CONSUMER_GROUP_PARTITION_METADATA,
                                         gr.make_key(gr.CONSUMER_GROUP_PARTITION_METADATA, "g"),
                                         gr.value_class(gr.CONSUMER_GROUP_PARTITION_METADATA)())
    assert replay([partition_metadata], group) is group
    assert replay([partition_metadata]) is None


def test_metadata_hash_follows_the_subscribed_topics():
    assert records.metadata_hash([]) == 0
    base = records.metadata_hash([("a", T1, 3), ("b", T2, 1)])
    assert base == records.metadata_hash([("b", T2, 1), ("a", T1, 3)])  # by name, whatever the order given
    assert base != records.metadata_hash([("a", T1, 4), ("b", T2, 1)])  # partitions added
    assert base != records.metadata_hash([("a", T2, 3), ("b", T1, 1)])  # topics recreated with other ids
    assert base != records.metadata_hash([("a", T1, 3)])
    assert base != records.metadata_hash([("a", T1, 3, {0: ["r1"]}), ("b", T2, 1)])  # racks count
    assert -2**63 <= base < 2**63 and base != 0


@pytest.mark.parametrize("length, expected", [
    (0, 0x2D06800538D394C2), (3, 0x5F4299FC161C9CBB), (8, 0x3A1C2D7C85AF88F8), (16, 0x8355E3A6F61770DB),
    (17, 0x9EF341A99DE37328), (128, 0x85C6174C7FF4C46B), (129, 0xEC7642B431BA3E5A), (240, 0x375A384D957FE865),
    (241, 0x02E8CD95421C6D02), (1025, 0xE95C42288F28186E), (2049, 0x6C9600C0E506E2AE), (5000, 0xB418500FC42320EE),
])
def test_xxh3_64_matches_the_reference_on_every_length_class(length, expected):
    assert xxh3_64(bytes(i % 251 for i in range(length))) == expected


def test_topic_and_group_hashes_feed_xxh3_as_hash4j_streams_do():
    name = "orders"
    fed = (b"\x00" + struct.pack("<qq", T1.int >> 64, T1.int & (2**64 - 1)) + name.encode("utf-16-le")
           + struct.pack("<i", len(name)) + struct.pack("<i", 2) + struct.pack("<i", 0)
           + struct.pack("<i", 1) + struct.pack("<i", 2) + "r1".encode("utf-16-le") + struct.pack("<i", 2))
    expected = struct.unpack("<q", struct.pack("<Q", xxh3_64(fed)))[0]
    assert topic_hash(name, T1, 2, {1: ["r1"]}) == expected
    group = xxh3_64(struct.pack("<q", topic_hash("a", T2, 1)) + struct.pack("<q", expected))
    assert records.metadata_hash([(name, T1, 2, {1: ["r1"]}), ("a", T2, 1)]) == struct.unpack(
        "<q", struct.pack("<Q", group))[0]


# --- through the real coordinator: written by heartbeats, replayed after a restart --------------------------------

@async_test
async def test_a_restarted_broker_replays_its_consumer_groups_and_keeps_them_consumer_groups(tmp_path):
    broker = make_broker(tmp_path / "data")
    broker.create_topic("orders", SIX)
    coordinator = await started(broker)
    groups = manager_of(coordinator)
    consumers = [Consumer(groups, "g", f"m{n}", instance=f"i{n}" if n == 1 else None) for n in (1, 2, 3)]
    for consumer in consumers:
        ok(await consumer.join())
    await settle(*consumers)
    regex_member = Consumer(groups, "r", "rm", topics=None, regex="ord.*")
    ok(await regex_member.join())
    await settle(regex_member)
    topic_id = broker.topic("orders").topic_id
    await coordinator.offsets.commit("g", [CommittedOffset("orders", 0, 42)])
    before = groups.groups["g"]
    await coordinator.stop()
    await broker.shutdown()

    reopened = make_broker(tmp_path / "data")
    again = await started(reopened)
    loaded = manager_of(again).groups["g"]
    assert (loaded.group_epoch, loaded.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
    assert loaded.members == before.members and loaded.target_assignment == before.target_assignment
    assert str(loaded.state) == "Stable" and loaded.static_members == {"i1": "m1"}
    assert sorted(len(m.assigned_partitions[topic_id]) for m in loaded.members.values()) == [2, 2, 2]
    assert manager_of(again).groups["r"].resolved_regexes["ord.*"].topics == {"orders"}
    # Offsets and typed records of one group id: still the consumer group, never a classic simple group.
    assert again.group("g") is loaded and again.group_type("g") == "consumer"
    assert [g.group_id for g in again.all_groups()].count("g") == 1
    assert again.offsets.fetch("g")[("orders", 0)].offset == 42
    # The members carry on where they were, without rejoining.
    for consumer in consumers:
        consumer.manager = manager_of(again)
        assert ok(await consumer.heartbeat()).member_epoch == before.members[consumer.member_id].member_epoch
    await again.stop()
    await reopened.shutdown()


@async_test
async def test_a_deleted_consumer_group_stays_deleted_after_a_restart(tmp_path):
    broker = make_broker(tmp_path / "data")
    broker.create_topic("orders", SIX)
    coordinator = await started(broker)
    consumer = Consumer(manager_of(coordinator), "g", "m1")
    ok(await consumer.join())
    await coordinator.offsets.commit("g", [CommittedOffset("orders", 0, 1)])
    ok(await consumer.leave())
    assert await coordinator.delete_group("g") is ErrorCode.NONE
    await coordinator.stop()
    await broker.shutdown()

    reopened = make_broker(tmp_path / "data")
    again = await started(reopened)
    assert "g" not in manager_of(again).groups and again.group("g") is None
    await again.stop()
    await reopened.shutdown()


@async_test
async def test_a_consumer_group_moves_with_the_leadership_of_its_partition(tmp_path):
    async with coordinated_cluster(tmp_path) as cluster:
        await find(cluster.nodes[0], 0, "g")
        cluster.nodes[0].create_topic("orders", SIX, replication_factor=3)
        old = cluster.nodes[group_leader(cluster, "g")]
        consumers = [Consumer(manager_of(old.coordinator), "g", f"m{n}") for n in (1, 2)]
        for consumer in consumers:
            ok(await consumer.join())
        await settle(*consumers)
        before = manager_of(old.coordinator).groups["g"]
        new_id = another(cluster, old.node_id)
        await move_when_in_sync(cluster, GROUP_METADATA_TOPIC, partition_for_group("g", 50), new_id)

        assert "g" not in manager_of(old.coordinator).groups
        new = cluster.nodes[new_id]
        await until(lambda: new.coordinator.error_for("g") is ErrorCode.NONE, "the new coordinator loaded the group")
        moved = manager_of(new.coordinator).groups["g"]
        assert moved.members == before.members and moved.group_epoch == before.group_epoch
        assert new.coordinator.group_type("g") == "consumer"
