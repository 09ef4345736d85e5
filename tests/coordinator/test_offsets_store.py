"""The offset store: Kafka's record layouts in `__consumer_offsets`, group to partition, durability and visibility
order, replay at start (tombstones, transactions, unknown records), compaction and retention.

A stand-in coordinator plays the coordinator's part (groups, the metadata hand-over, the deletion hook), so that
these tests need nothing but the store and a real Broker."""
from __future__ import annotations

import asyncio
import io
import uuid

import pytest
from kafka.protocol.old.types import (Array, Bytes, CompactString, Int16, Int32, Int64, Schema, String,
                                      TaggedFields)

from compatbroker.broker import Broker
from compatbroker.config import BrokerConfig
from compatbroker.coordinator import group_records as gr
from compatbroker.coordinator.group_records import make_key, tombstone, typed_record, value_class
from compatbroker.coordinator.loader import LOAD_BUFFER_BYTES
from compatbroker.coordinator.offsets import (CommittedOffset, GroupRecord, OffsetRecord, OffsetsConfig, OffsetStore,
                                              OffsetWriteError, group_metadata_key, group_metadata_record_value,
                                              java_string_hash, offset_commit_key, offset_commit_value,
                                              parse_record, partition_for_group)
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import GroupMetadataValue
from compatbroker.protocol.records.batch import build_batch, iter_batches
from compatbroker.protocol.records.control import ControlRecordType, build_control_batch
from compatbroker.storage.validator import COORDINATOR
from compatbroker.topic_names import GROUP_METADATA_TOPIC

from tests.async_tests import async_test
from tests.coordinator.membership_support import records_in
from tests.handlers.helpers import make_broker

T0 = 1_700_000_000_000
TOPIC = GROUP_METADATA_TOPIC


class Clock:
    def __init__(self, now_ms: int = T0):
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


class Member:
    def __init__(self, member_id, subscription=b"sub", assignment=b"asg", instance_id=None):
        self.member_id = member_id
        self.group_instance_id = instance_id
        self.client_id = f"client-{member_id}"
        self.client_host = "/127.0.0.1"
        self.rebalance_timeout_ms = 300_000
        self.session_timeout_ms = 45_000
        self._subscription = subscription
        self.assignment = assignment

    def metadata(self, protocol):
        return self._subscription


class Group:
    """What the store reads from a coordinator group."""

    def __init__(self, group_id, state="Empty", protocol_type="consumer", subscribed=None, since_ms=None,
                 group_type="classic"):
        self.group_id = group_id
        self.group_type = group_type
        self.state = state
        self.protocol_type = protocol_type
        self.protocol_name = "range"
        self.generation_id = 3
        self.leader_id = None
        self.current_state_timestamp = since_ms
        self.members = {}
        self._subscribed = subscribed

    def subscribed_topics(self):
        return self._subscribed

    def is_subscribed(self, topic):
        return self._subscribed is not None and topic in self._subscribed


class StandInCoordinator:
    def __init__(self, broker, config=None):
        self.groups = {}
        self.loaded_metadata = {}
        self.offsets_gone = []
        self.replayed = []  # (record type, group id, key, value) of each typed record handed over, in order
        self.groups_loaded = []  # the group ids of each on_groups_loaded call
        self.offsets = OffsetStore(broker, self, config)

    def group(self, group_id):
        """As the coordinator does, a group id with offsets has a group: a simple one if nothing else."""
        if group_id not in self.groups and group_id in self.offsets.groups_with_offsets():
            self.groups[group_id] = Group(group_id, protocol_type=None)
        return self.groups.get(group_id)

    def all_groups(self):
        return [self.group(group_id) for group_id in set(self.groups) | self.offsets.groups_with_offsets()]

    def load_group_metadata(self, group_id, value):
        self.loaded_metadata[group_id] = value

    def on_offsets_deleted(self, group_id):
        self.offsets_gone.append(group_id)

    def replay_typed(self, record):
        self.replayed.append(record)

    def on_groups_loaded(self, group_ids):
        self.groups_loaded.append(list(group_ids))


def new_broker(data_dir, **properties) -> Broker:
    broker = make_broker(data_dir, **properties)
    broker.now_ms = Clock()
    return broker


async def started(broker, config=None) -> StandInCoordinator:
    coordinator = StandInCoordinator(broker, config)
    await coordinator.offsets.load()
    return coordinator


@pytest.fixture
def broker(data_dir):
    broker = new_broker(data_dir)
    yield broker
    broker.logs.shutdown()


def offset(topic="t", partition=0, at=5, **fields) -> CommittedOffset:
    return CommittedOffset(topic, partition, at, **fields)


def decode(schema, data: bytes):
    """Decode with kafka-python's primitive types, checking nothing is left over."""
    buffer = io.BytesIO(data)
    decoded = schema.decode(buffer)
    assert buffer.read() == b"", "bytes left after the documented layout"
    return decoded


# --- group to partition -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, code", [("foo", 101574), ("Hello World", -862545276), ("", 0), ("Aa", 2112),
                                        ("BB", 2112), ("polygenelubricants", -2**31)])
def test_java_string_hash(text, code):
    assert java_string_hash(text) == code


@pytest.mark.parametrize("group_id, partition", [
    ("foo", 101574 % 50),
    ("Hello World", 862545276 % 50),      # Utils.abs: the absolute value, not `& 0x7fffffff` (which gives 22)
    ("polygenelubricants", 0),            # Integer.MIN_VALUE maps to 0
])
def test_group_partition_is_kafkas(group_id, partition):
    assert partition_for_group(group_id, 50) == partition


def test_hash_counts_utf16_units():
    # U+1F600 is two UTF-16 units (0xD83D 0xDE00) in Java's String
    assert java_string_hash("\U0001F600") == (0xD83D * 31 + 0xDE00)


@async_test
async def test_partition_follows_an_existing_topic_of_another_size(broker):
    broker.create_topic(TOPIC, 3, configs={"cleanup.policy": "compact"})
    coordinator = await started(broker)
    assert coordinator.offsets.partition_for("Hello World") == 862545276 % 3
    await coordinator.offsets.commit("Hello World", [offset()])
    assert len(records_in(broker, "Hello World")) == 1


# --- record layouts -----------------------------------------------------------------------------------------------

OFFSET_KEY = Schema(("version", Int16), ("group", String("utf-8")), ("topic", String("utf-8")),
                    ("partition", Int32))
GROUP_KEY = Schema(("version", Int16), ("group", String("utf-8")))
OFFSET_VALUE_V1 = Schema(("version", Int16), ("offset", Int64), ("metadata", String("utf-8")),
                         ("commit_timestamp", Int64), ("expire_timestamp", Int64))
OFFSET_VALUE_V3 = Schema(("version", Int16), ("offset", Int64), ("leader_epoch", Int32),
                         ("metadata", String("utf-8")), ("commit_timestamp", Int64))
OFFSET_VALUE_V4 = Schema(("version", Int16), ("offset", Int64), ("leader_epoch", Int32),
                         ("metadata", CompactString("utf-8")), ("commit_timestamp", Int64), ("tags", TaggedFields))
GROUP_VALUE_V3 = Schema(
    ("version", Int16), ("protocol_type", String("utf-8")), ("generation", Int32), ("protocol", String("utf-8")),
    ("leader", String("utf-8")), ("current_state_timestamp", Int64),
    ("members", Array(("member_id", String("utf-8")), ("group_instance_id", String("utf-8")),
                      ("client_id", String("utf-8")), ("client_host", String("utf-8")),
                      ("rebalance_timeout", Int32), ("session_timeout", Int32), ("subscription", Bytes),
                      ("assignment", Bytes))))


def test_offset_commit_key_layout():
    assert decode(OFFSET_KEY, offset_commit_key("g1", "orders", 7)) == (1, "g1", "orders", 7)


def test_group_metadata_key_layout():
    assert decode(GROUP_KEY, group_metadata_key("g1")) == (2, "g1")


def test_offset_commit_value_is_version_4_with_the_topic_id_as_tagged_field_0():
    topic_id = uuid.UUID("0123456789abcdef0123456789abcdef")
    value = offset_commit_value(offset(at=42, leader_epoch=7, metadata="m", commit_timestamp_ms=T0,
                                       topic_id=topic_id))
    version, at, epoch, metadata, committed_at, tags = decode(OFFSET_VALUE_V4, value)
    assert (version, at, epoch, metadata, committed_at) == (4, 42, 7, "m", T0)
    assert tags == {0: topic_id.bytes}


def test_offset_commit_value_without_topic_id_has_no_tagged_fields():
    value = offset_commit_value(offset(at=42, commit_timestamp_ms=T0))
    assert decode(OFFSET_VALUE_V4, value) == (4, 42, -1, "", T0)  # kafka-python leaves out an empty tag section


def test_offset_commit_value_with_expiry_is_version_1():
    value = offset_commit_value(offset(at=9, leader_epoch=7, metadata="x", commit_timestamp_ms=T0,
                                       expire_timestamp_ms=T0 + 1000))
    assert decode(OFFSET_VALUE_V1, value) == (1, 9, "x", T0, T0 + 1000)


def test_group_metadata_value_is_version_3():
    member = GroupMetadataValue.MemberMetadata(member_id="m1", group_instance_id="i1", client_id="c",
                                               client_host="/h", rebalance_timeout=100, session_timeout=200,
                                               subscription=b"s", assignment=b"a")
    value = GroupMetadataValue(protocol_type="consumer", generation=4, protocol="range", leader="m1",
                               current_state_timestamp=T0, members=[member])
    decoded = decode(GROUP_VALUE_V3, group_metadata_record_value(value))
    assert decoded == (3, "consumer", 4, "range", "m1", T0, [("m1", "i1", "c", "/h", 100, 200, b"s", b"a")])


def test_empty_group_metadata_value_has_null_protocol_and_leader():
    value = GroupMetadataValue(protocol_type="consumer", generation=5, protocol=None, leader=None,
                               current_state_timestamp=T0, members=[])
    assert decode(GROUP_VALUE_V3, group_metadata_record_value(value)) == (3, "consumer", 5, None, None, T0, [])


@pytest.mark.parametrize("key_version", [0, 1])
def test_parse_reads_offset_records_of_every_key_and_value_version(key_version):
    key = OFFSET_KEY.encode((key_version, "g", "t", 3))
    values = {0: Schema(("v", Int16), ("o", Int64), ("m", String("utf-8")), ("c", Int64)).encode((0, 11, "m", 5)),
              1: OFFSET_VALUE_V1.encode((1, 11, "m", 5, 99)),
              2: Schema(("v", Int16), ("o", Int64), ("m", String("utf-8")), ("c", Int64)).encode((2, 11, "m", 5)),
              3: OFFSET_VALUE_V3.encode((3, 11, 4, "m", 5)),
              4: OFFSET_VALUE_V4.encode((4, 11, 4, "m", 5, {}))}
    expected = {0: offset("t", 3, 11, metadata="m", commit_timestamp_ms=5),
                1: offset("t", 3, 11, metadata="m", commit_timestamp_ms=5, expire_timestamp_ms=99),
                2: offset("t", 3, 11, metadata="m", commit_timestamp_ms=5),
                3: offset("t", 3, 11, leader_epoch=4, metadata="m", commit_timestamp_ms=5),
                4: offset("t", 3, 11, leader_epoch=4, metadata="m", commit_timestamp_ms=5)}
    for version, value in values.items():
        assert parse_record(key, value) == OffsetRecord("g", "t", 3, expected[version])
    assert parse_record(key, None) == OffsetRecord("g", "t", 3, None)


def test_parse_reads_a_newer_flexible_value_version_as_the_newest_known():
    value = OFFSET_VALUE_V4.encode((5, 11, 4, "m", 5, {7: b"future"}))
    parsed = parse_record(offset_commit_key("g", "t", 0), value)
    assert parsed.committed.offset == 11 and parsed.committed.leader_epoch == 4


def test_parse_group_records_and_skips_other_record_types():
    assert parse_record(group_metadata_key("g"), None) == GroupRecord("g", None)
    value = GroupMetadataValue(protocol_type="", generation=0, protocol=None, leader=None, members=[])
    parsed = parse_record(group_metadata_key("g"), group_metadata_record_value(value))
    assert parsed.group_id == "g" and parsed.value.generation == 0
    assert parse_record(Int16.encode(17) + String("utf-8").encode("g"), b"\x00\x00anything") is None


# --- commit, fetch, delete ----------------------------------------------------------------------------------------

@async_test
async def test_writes_wait_for_the_load(broker):
    coordinator = StandInCoordinator(broker)
    with pytest.raises(OffsetWriteError) as raised:
        await coordinator.offsets.commit("g", [offset()])
    assert raised.value.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert broker.topic(TOPIC) is None


@async_test
async def test_commit_creates_the_compacted_topic_and_appends_one_batch(broker):
    store = (await started(broker)).offsets
    assert broker.topic(TOPIC) is None  # loading an absent topic creates nothing
    await store.commit("g", [offset("t", 0, 5), offset("t", 1, 6, metadata="x", leader_epoch=2)])
    info = broker.topic(TOPIC)
    assert info.partitions == 50 and info.is_internal
    log = broker.get_log(TOPIC, store.partition_for("g"))
    assert log.config.compact and log.config.segment_bytes == 104_857_600
    assert log.config.compression_type == "producer"
    assert len(list(iter_batches(log.read_bytes(0, 1 << 20)))) == 1
    assert store.fetch("g") == {("t", 0): offset("t", 0, 5, commit_timestamp_ms=T0),
                                ("t", 1): offset("t", 1, 6, metadata="x", leader_epoch=2, commit_timestamp_ms=T0)}
    assert store.fetch("g", [("t", 1), ("t", 9)]) == {("t", 1): store.fetch("g")[("t", 1)]}
    assert store.fetch("other") == {} and store.groups_with_offsets() == {"g"}


@async_test
async def test_a_given_commit_timestamp_is_kept(broker):
    store = (await started(broker)).offsets
    await store.commit("g", [offset(commit_timestamp_ms=123)])
    assert store.fetch("g")[("t", 0)].commit_timestamp_ms == 123


@async_test
async def test_later_commit_of_a_partition_wins_also_within_one_request(broker):
    store = (await started(broker)).offsets
    await store.commit("g", [offset(at=1), offset(at=2)])
    assert store.fetch("g")[("t", 0)].offset == 2
    await store.commit("g", [offset(at=3)])
    assert store.fetch("g")[("t", 0)].offset == 3


@async_test
async def test_delete_offsets_writes_tombstones_only_for_present_offsets(broker):
    store = (await started(broker)).offsets
    await store.commit("g", [offset("t", 0), offset("t", 1)])
    await store.delete_offsets("g", [("t", 0), ("t", 5)])
    assert set(store.fetch("g")) == {("t", 1)}
    assert records_in(broker, "g")[-1] == (offset_commit_key("g", "t", 0), None)
    assert len(records_in(broker, "g")) == 3


@async_test
async def test_delete_group_tombstones_offsets_and_metadata(broker):
    store = (await started(broker)).offsets
    await store.commit("g", [offset("t", 0), offset("u", 2)])
    await store.delete_group("g")
    assert store.fetch("g") == {} and store.groups_with_offsets() == set()
    tombstones = records_in(broker, "g")[2:]  # after the commit's two records, in one batch
    assert all(value is None for _, value in tombstones)
    assert sorted(key for key, _ in tombstones) == sorted([offset_commit_key("g", "t", 0),
                                                           offset_commit_key("g", "u", 2), group_metadata_key("g")])


@async_test
async def test_store_group_writes_its_metadata(broker):
    coordinator = await started(broker)
    group = Group("g", state="Stable", since_ms=T0 - 5)
    group.leader_id = "m1"
    group.members = {"m1": Member("m1", b"sub-1", b"asg-1", instance_id="static-1"), "m2": Member("m2")}
    await coordinator.offsets.store_group(group)
    (key, value), = records_in(broker, "g")
    assert key == group_metadata_key("g")
    version, protocol_type, generation, protocol, leader, since, members = decode(GROUP_VALUE_V3, value)
    assert (version, protocol_type, generation, protocol, leader, since) == (3, "consumer", 3, "range", "m1", T0 - 5)
    assert members == [("m1", "static-1", "client-m1", "/127.0.0.1", 300_000, 45_000, b"sub-1", b"asg-1"),
                       ("m2", None, "client-m2", "/127.0.0.1", 300_000, 45_000, b"sub", b"asg")]


@async_test
async def test_an_append_error_is_translated(broker):
    store = (await started(broker, OffsetsConfig(metadata_max_bytes=10**9))).offsets
    with pytest.raises(OffsetWriteError) as raised:  # one batch over max.message.bytes
        await store.commit("g", [offset(metadata="x" * 1_100_000)])
    assert raised.value.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert store.fetch("g") == {}


# --- durability and visibility ------------------------------------------------------------------------------------

@async_test
async def test_commit_is_fsynced_before_it_returns_under_a_flush_policy(data_dir):
    broker = new_broker(data_dir, **{"log.flush.interval.messages": "1"})
    store = (await started(broker)).offsets
    await store.commit("g", [offset(at=77, metadata="kept")])
    log = broker.get_log(TOPIC, store.partition_for("g"))
    assert log.recovery_point == log.log_end_offset == 1  # durable, not just written
    broker.logs.close_unclean()  # a SIGKILL: no flush, no checkpoint, no clean-shutdown marker
    reopened = new_broker(data_dir, **{"log.flush.interval.messages": "1"})
    assert not reopened.logs.clean_shutdown
    assert (await started(reopened)).offsets.fetch("g")[("t", 0)].offset == 77
    reopened.logs.shutdown()


@async_test
async def test_without_a_flush_policy_the_page_cache_is_trusted(broker):
    store = (await started(broker)).offsets
    await store.commit("g", [offset()])
    log = broker.get_log(TOPIC, store.partition_for("g"))
    assert log.recovery_point == 0 and log.log_end_offset == 1


class GatedDurability:
    """Broker.make_durable that finishes only when the test opens its gate (in the order the test chooses)."""

    def __init__(self, broker):
        self.real = broker.make_durable
        self.gates: list[asyncio.Event] = []
        self.calls = asyncio.Event()
        broker.make_durable = self

    async def __call__(self, logs):
        gate = asyncio.Event()
        self.gates.append(gate)
        self.calls.set()
        await gate.wait()
        await self.real(logs)


async def until(condition):
    while not condition():
        await asyncio.sleep(0)


@async_test
async def test_a_commit_is_visible_only_once_durable(data_dir):
    broker = new_broker(data_dir, **{"log.flush.interval.ms": "1000"})
    store = (await started(broker)).offsets
    gated = GatedDurability(broker)
    commit = asyncio.create_task(store.commit("g", [offset(at=9)]))
    await gated.calls.wait()
    assert store.fetch("g") == {} and not commit.done()
    gated.gates[0].set()
    await commit
    assert store.fetch("g")[("t", 0)].offset == 9
    broker.logs.shutdown()


@async_test
async def test_writes_become_visible_in_log_order_when_fsyncs_finish_out_of_order(data_dir):
    broker = new_broker(data_dir, **{"log.flush.interval.messages": "1"})
    store = (await started(broker)).offsets
    await store.commit("g", [offset(at=1)])
    gated = GatedDurability(broker)
    first = asyncio.create_task(store.commit("g", [offset(at=2)]))
    await until(lambda: len(gated.gates) == 1)
    second = asyncio.create_task(store.delete_offsets("g", [("t", 0)]))
    await until(lambda: len(gated.gates) == 2)
    gated.gates[1].set()  # the tombstone's fsync finishes first: it settles the earlier commit too, in order
    await second
    assert store.fetch("g") == {}
    gated.gates[0].set()
    await first
    assert store.fetch("g") == {}  # the commit of 2 came before the tombstone: it must not come back
    broker.logs.shutdown()


@pytest.mark.parametrize("delete", ["offsets", "group"])
@async_test
async def test_deleting_while_a_commit_awaits_its_fsync_tombstones_that_commit_too(data_dir, delete):
    broker = new_broker(data_dir, **{"log.flush.interval.messages": "1"})
    store = (await started(broker)).offsets
    gated = GatedDurability(broker)
    commit = asyncio.create_task(store.commit("g", [offset("t", 3, 30)]))
    await until(lambda: len(gated.gates) == 1)
    if delete == "offsets":
        deletion = asyncio.create_task(store.delete_offsets("g", [("t", 3)]))
    else:
        deletion = asyncio.create_task(store.delete_group("g"))
    await until(lambda: len(gated.gates) == 2)
    for gate in gated.gates:
        gate.set()
    await asyncio.gather(commit, deletion)
    assert store.fetch("g") == {} and store.groups_with_offsets() == set()
    assert (offset_commit_key("g", "t", 3), None) in records_in(broker, "g")
    broker.logs.shutdown()


# --- loading ------------------------------------------------------------------------------------------------------

def append_raw(broker, group_id, batch_bytes):
    if broker.topic(TOPIC) is None:
        broker.create_topic(TOPIC, 50, configs={"cleanup.policy": "compact"})
    log = broker.get_log(TOPIC, partition_for_group(group_id, 50))
    log.append(batch_bytes, leader_epoch=0, now_ms=T0, origin=COORDINATOR)


def raw_batch(*records, **options):
    return build_batch([(key, value, (), T0) for key, value in records], **options)


@async_test
async def test_restart_replays_offsets_and_hands_group_metadata_to_the_coordinator(data_dir):
    broker = new_broker(data_dir)
    coordinator = await started(broker)
    group = Group("g", state="Stable")
    group.members = {"m1": Member("m1")}
    group.leader_id = "m1"
    await coordinator.offsets.store_group(group)
    await coordinator.offsets.commit("g", [offset("t", 0, 10), offset("t", 1, 20, leader_epoch=3, metadata="md")])
    await coordinator.offsets.commit("g", [offset("t", 0, 11)])
    await coordinator.offsets.commit("solo", [offset("u", 0, 1)])
    await coordinator.offsets.commit("gone", [offset("u", 0, 1)])
    await coordinator.offsets.delete_group("gone")
    await broker.shutdown()

    reopened = new_broker(data_dir)
    again = await started(reopened)
    assert again.offsets.fetch("g") == {("t", 0): offset("t", 0, 11, commit_timestamp_ms=T0),
                                        ("t", 1): offset("t", 1, 20, leader_epoch=3, metadata="md",
                                                         commit_timestamp_ms=T0)}
    assert again.offsets.groups_with_offsets() == {"g", "solo"}
    value = again.loaded_metadata["g"]
    assert (value.generation, value.leader, [m.member_id for m in value.members]) == (3, "m1", ["m1"])
    assert again.loaded_metadata["gone"] is None and "solo" not in again.loaded_metadata
    await again.offsets.commit("g", [offset("t", 0, 12)])  # later writes still win over replayed ones
    assert again.offsets.fetch("g")[("t", 0)].offset == 12
    await again.offsets.stop()
    await reopened.shutdown()


@async_test
async def test_replay_applies_transactional_commits_at_their_marker(broker):
    key = offset_commit_key("g", "t", 0)
    append_raw(broker, "g", raw_batch((key, offset_commit_value(offset(at=1)))))
    for producer_id, at in ((7, 2), (8, 3), (9, 4)):
        append_raw(broker, "g", raw_batch((offset_commit_key("g", "t", producer_id), offset_commit_value(
            offset("t", producer_id, at))), producer_id=producer_id, producer_epoch=0, is_transactional=True))
    append_raw(broker, "g", build_control_batch(ControlRecordType.COMMIT, producer_id=7, producer_epoch=0,
                                                coordinator_epoch=0, timestamp=T0))
    append_raw(broker, "g", build_control_batch(ControlRecordType.ABORT, producer_id=8, producer_epoch=0,
                                                coordinator_epoch=0, timestamp=T0))
    store = (await started(broker)).offsets
    assert {key: c.offset for key, c in store.fetch("g").items()} == {("t", 0): 1, ("t", 7): 2}
    assert store.has_unstable_offset("g", "t", 9)  # producer 9's transaction is still open
    assert not store.has_unstable_offset("g", "t", 8) and not store.has_unstable_offset("g", "t", 7)


@async_test
async def test_replay_skips_unknown_and_malformed_records(broker):
    append_raw(broker, "g", raw_batch(
        (Int16.encode(17) + String("utf-8").encode("g"), b"\x00\x00streams group record"),
        (Int16.encode(4) + String("utf-8").encode("g"), b"\x00\x00malformed kip-848 record"),
        (offset_commit_key("g", "t", 0), b"\x00\x04\x01"),  # truncated value
        (offset_commit_key("g", "t", 1), offset_commit_value(offset("t", 1, 8)))))
    store = (await started(broker)).offsets
    assert {key: c.offset for key, c in store.fetch("g").items()} == {("t", 1): 8}


@async_test
async def test_replay_reads_a_partition_larger_than_the_load_buffer(broker):
    big = "m" * 4000
    for n in range(LOAD_BUFFER_BYTES // 4000 + 50):
        append_raw(broker, "g", raw_batch((offset_commit_key("g", "t", n % 7), offset_commit_value(
            offset("t", n % 7, n, metadata=big)))))
    store = (await started(broker)).offsets
    total = LOAD_BUFFER_BYTES // 4000 + 50
    assert {p: c.offset for (_, p), c in store.fetch("g").items()} == {
        p: max(n for n in range(total) if n % 7 == p) for p in range(7)}


@async_test
async def test_a_second_load_call_waits_for_the_first(broker):
    coordinator = StandInCoordinator(broker)
    await asyncio.gather(coordinator.offsets.load(), coordinator.offsets.load())
    assert coordinator.offsets.loaded


# --- compaction ---------------------------------------------------------------------------------------------------

@async_test
async def test_compaction_keeps_the_topic_small_and_the_offsets_intact(data_dir):
    broker = new_broker(data_dir)
    config = OffsetsConfig(segment_bytes=2048)
    coordinator = await started(broker, config)
    for n in range(400):
        await coordinator.offsets.commit("g", [offset("t", n % 3, n)])
    await coordinator.offsets.commit("g", [offset("u", 0, 1)])
    await coordinator.offsets.delete_offsets("g", [("u", 0)])
    log = broker.get_log(TOPIC, coordinator.offsets.partition_for("g"))
    before = log.size
    assert len(log.segments) > 5
    assert await broker.run_cleaner() >= 1
    assert log.size < before / 4
    expected = coordinator.offsets.fetch("g")
    await broker.shutdown()
    reopened = new_broker(data_dir)
    assert (await started(reopened, config)).offsets.fetch("g") == expected
    reopened.logs.shutdown()


# --- retention ----------------------------------------------------------------------------------------------------

RETENTION = OffsetsConfig(retention_ms=60_000)


@async_test
async def test_offsets_of_a_group_without_members_expire_after_retention_since_their_commit(broker):
    coordinator = await started(broker, RETENTION)
    store = coordinator.offsets
    await store.commit("solo", [offset("t", 0)])
    broker.now_ms.now_ms += 30_000
    await store.commit("solo", [offset("t", 1)])
    broker.now_ms.now_ms += 29_999
    assert await store.expire_offsets() == 0
    broker.now_ms.now_ms += 1
    assert await store.expire_offsets() == 1
    assert set(store.fetch("solo")) == {("t", 1)} and coordinator.offsets_gone == []
    broker.now_ms.now_ms += 30_000
    assert await store.expire_offsets() == 1
    assert store.fetch("solo") == {} and coordinator.offsets_gone == ["solo"]
    assert records_in(broker, "solo")[-1] == (offset_commit_key("solo", "t", 1), None)


@async_test
async def test_empty_group_offsets_expire_after_retention_since_the_group_became_empty(broker):
    coordinator = await started(broker, RETENTION)
    await coordinator.offsets.commit("g", [offset()])
    coordinator.groups["g"] = Group("g", state="Empty", since_ms=T0 + 50_000)
    broker.now_ms.now_ms = T0 + 109_999
    assert await coordinator.offsets.expire_offsets() == 0
    broker.now_ms.now_ms = T0 + 110_000
    assert await coordinator.offsets.expire_offsets() == 1
    assert coordinator.offsets.fetch("g") == {} and coordinator.offsets_gone == ["g"]


@async_test
async def test_stable_consumer_group_keeps_offsets_of_subscribed_topics(broker):
    coordinator = await started(broker, RETENTION)
    await coordinator.offsets.commit("g", [offset("read", 0), offset("old", 0)])
    coordinator.groups["g"] = Group("g", state="Stable", subscribed={"read"})
    broker.now_ms.now_ms += 10 * 60_000
    assert await coordinator.offsets.expire_offsets() == 1
    assert set(coordinator.offsets.fetch("g")) == {("read", 0)} and coordinator.offsets_gone == []


@pytest.mark.parametrize("group", [Group("g", state="PreparingRebalance"),
                                   Group("g", state="Stable", protocol_type="connect"),
                                   Group("g", state="Stable", subscribed=None)])
@async_test
async def test_offsets_of_other_groups_do_not_expire(broker, group):
    coordinator = await started(broker, RETENTION)
    await coordinator.offsets.commit("g", [offset()])
    coordinator.groups["g"] = group
    broker.now_ms.now_ms += 10 * 60_000
    assert await coordinator.offsets.expire_offsets() == 0


@async_test
async def test_an_expire_timestamp_wins_over_the_retention(broker):
    coordinator = await started(broker, RETENTION)
    await coordinator.offsets.commit("g", [offset("t", 0, expire_timestamp_ms=T0 + 5_000),
                                           offset("t", 1, expire_timestamp_ms=T0 + 600_000)])
    broker.now_ms.now_ms = T0 + 5_000
    assert await coordinator.offsets.expire_offsets() == 1
    broker.now_ms.now_ms = T0 + 300_000  # past the broker's retention, not past its own expiry
    assert await coordinator.offsets.expire_offsets() == 0
    assert set(coordinator.offsets.fetch("g")) == {("t", 1)}


@async_test
async def test_expired_offsets_stay_gone_after_a_restart(data_dir):
    broker = new_broker(data_dir)
    coordinator = await started(broker, RETENTION)
    await coordinator.offsets.commit("solo", [offset()])
    broker.now_ms.now_ms += 60_000
    assert await coordinator.offsets.expire_offsets() == 1
    await broker.shutdown()
    reopened = new_broker(data_dir)
    assert (await started(reopened, RETENTION)).offsets.groups_with_offsets() == set()
    reopened.logs.shutdown()


@async_test
async def test_the_retention_timer_runs_passes_until_stopped(broker):
    coordinator = await started(broker, OffsetsConfig(retention_ms=0, retention_check_interval_ms=1))
    store = coordinator.offsets
    await store.commit("solo", [offset()])
    await until(lambda: store.fetch("solo") == {})  # expired by the timer, not by a call of the test
    timer = store._expiry_task
    await store.stop()
    assert timer.cancelled()


# --- consumer and share group records -----------------------------------------------------------------------------

def consumer_metadata(group_id, epoch):
    return typed_record(gr.CONSUMER_GROUP_METADATA, make_key(gr.CONSUMER_GROUP_METADATA, group_id),
                        value_class(gr.CONSUMER_GROUP_METADATA)(epoch=epoch))


def member_metadata(group_id, member_id, client_id="c"):
    return typed_record(gr.CONSUMER_GROUP_MEMBER_METADATA,
                        make_key(gr.CONSUMER_GROUP_MEMBER_METADATA, group_id, member_id=member_id),
                        value_class(gr.CONSUMER_GROUP_MEMBER_METADATA)(client_id=client_id))


@async_test
async def test_store_records_appends_them_as_one_batch_in_order(broker):
    store = (await started(broker)).offsets
    records = [consumer_metadata("g", 1), member_metadata("g", "m1"),
               tombstone(gr.CONSUMER_GROUP_MEMBER_METADATA, "g", member_id="m0")]
    await store.store_records("g", records)
    assert records_in(broker, "g") == records
    log = broker.get_log(TOPIC, store.partition_for("g"))
    assert len(list(iter_batches(log.read_bytes(0, 1 << 20)))) == 1
    await store.store_records("g", [])  # nothing to write: no batch
    assert log.log_end_offset == 3


@async_test
async def test_store_records_fails_as_a_commit_does(broker):
    coordinator = StandInCoordinator(broker)
    with pytest.raises(OffsetWriteError) as raised:
        await coordinator.offsets.store_records("g", [consumer_metadata("g", 1)])
    assert raised.value.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


@async_test
async def test_delete_group_writes_the_given_group_tombstones_instead_of_the_classic_one(broker):
    store = (await started(broker)).offsets
    await store.commit("g", [offset("t", 0)])
    doomed = [tombstone(gr.CONSUMER_GROUP_MEMBER_METADATA, "g", member_id="m1"),
              tombstone(gr.CONSUMER_GROUP_METADATA, "g")]
    await store.delete_group("g", group_records=doomed)
    assert records_in(broker, "g")[1:] == [(offset_commit_key("g", "t", 0), None), *doomed]
    assert store.groups_with_offsets() == set()


@async_test
async def test_restart_hands_over_typed_records_in_log_order_as_compaction_leaves_them(data_dir):
    broker = new_broker(data_dir)
    store = (await started(broker)).offsets
    await store.store_records("g", [consumer_metadata("g", 1), member_metadata("g", "m1"),
                                    member_metadata("g", "m2")])
    await store.store_records("g", [consumer_metadata("g", 2)])
    await store.store_records("g", [tombstone(gr.CONSUMER_GROUP_MEMBER_METADATA, "g", member_id="m2")])
    await store.store_records("g", [member_metadata("g", "m1", client_id="c2")])
    await store.commit("g", [offset("t", 0, 9)])
    await store.store_records("gone", [consumer_metadata("gone", 1)])
    await store.store_records("gone", [tombstone(gr.CONSUMER_GROUP_METADATA, "gone")])
    await broker.shutdown()

    reopened = new_broker(data_dir)
    again = await started(reopened)
    handed = [(r.record_type, r.group_id, getattr(r.key, "member_id", None), r.value) for r in again.replayed]
    assert handed == [(gr.CONSUMER_GROUP_METADATA, "g", None, value_class(gr.CONSUMER_GROUP_METADATA)(epoch=2)),
                      (gr.CONSUMER_GROUP_MEMBER_METADATA, "g", "m1",
                       value_class(gr.CONSUMER_GROUP_MEMBER_METADATA)(client_id="c2"))]
    assert again.groups_loaded == [["g"]]  # "gone" left only a tombstone
    assert again.offsets.fetch("g")[("t", 0)].offset == 9
    await again.offsets.stop()
    await reopened.shutdown()


@async_test
async def test_a_typed_record_the_coordinator_cannot_replay_is_skipped(data_dir, caplog):
    broker = new_broker(data_dir)
    store = (await started(broker)).offsets
    await store.store_records("g", [consumer_metadata("g", 1), member_metadata("g", "m1")])
    await broker.shutdown()

    reopened = new_broker(data_dir)
    coordinator = StandInCoordinator(reopened)
    taken = []

    def replay_typed(record):
        if record.record_type == gr.CONSUMER_GROUP_METADATA:
            raise ValueError("cannot take it")
        taken.append(record.record_type)

    coordinator.replay_typed = replay_typed
    await coordinator.offsets.load()
    assert taken == [gr.CONSUMER_GROUP_MEMBER_METADATA] and coordinator.groups_loaded == [["g"]]
    assert coordinator.offsets.error_for("g") is ErrorCode.NONE
    assert "cannot be replayed" in caplog.text
    await coordinator.offsets.stop()
    reopened.logs.shutdown()


@async_test
async def test_consumer_group_offsets_expire_since_their_commit_unless_subscribed(broker):
    coordinator = await started(broker, RETENTION)
    await coordinator.offsets.commit("g", [offset("read", 0), offset("old", 0)])
    # Kafka's ConsumerGroup: from each commit in every state, Empty included (not from the state change)
    coordinator.groups["g"] = Group("g", state="Empty", subscribed={"read"}, since_ms=T0 + 50_000,
                                    group_type="consumer")
    broker.now_ms.now_ms = T0 + 59_999
    assert await coordinator.offsets.expire_offsets() == 0
    broker.now_ms.now_ms = T0 + 60_000
    assert await coordinator.offsets.expire_offsets() == 1
    assert set(coordinator.offsets.fetch("g")) == {("read", 0)}


@async_test
async def test_share_group_offsets_are_left_alone(broker):
    coordinator = await started(broker, RETENTION)
    await coordinator.offsets.commit("s", [offset()])
    coordinator.groups["s"] = Group("s", state="Empty", protocol_type="share", group_type="share")
    broker.now_ms.now_ms += 10 * 60_000
    assert await coordinator.offsets.expire_offsets() == 0


# --- configuration ------------------------------------------------------------------------------------------------

def test_config_reads_kafka_names_and_keeps_defaults_for_the_rest():
    names = {"offsets.retention.minutes": "2", "offsets.topic.num.partitions": 3}

    def get(name):
        if name not in names:
            from compatbroker.config import ConfigError
            raise ConfigError(name)
        return names[name]

    config = OffsetsConfig.from_properties(get)
    assert (config.retention_ms, config.num_partitions) == (120_000, 3)
    assert (config.segment_bytes, config.retention_check_interval_ms, config.metadata_max_bytes) == \
        (104_857_600, 600_000, 4096)
    assert OffsetsConfig.from_properties(BrokerConfig({}).get) == OffsetsConfig()
