"""OffsetCommit, OffsetFetch and OffsetDelete through the server's codec path (`tests.handlers.helpers.call`)
against a real Broker and the real Coordinator: every version boundary, every error code, restarts (clean and
SIGKILL-style) and retention."""
from __future__ import annotations

import asyncio
import struct
import uuid

import pytest

from compatbroker.broker import Broker
from compatbroker.coordinator import Coordinator, Group, GroupState
from compatbroker.coordinator.offsets import (CommittedOffset, OffsetsConfig, OffsetStore, OffsetWriteError,
                                              group_metadata_key, offset_commit_key, offset_commit_value,
                                              partition_for_group)
from compatbroker.handlers import HANDLERS, build_registry, offset_commit, offset_delete, offset_fetch
from compatbroker.protocol import encode_message
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import (ConsumerProtocolSubscription, GroupMetadataValue, OffsetCommitRequest,
                                            OffsetDeleteRequest, OffsetFetchRequest)
from compatbroker.protocol.records.batch import build_batch
from compatbroker.protocol.wire import ZERO_UUID
from compatbroker.storage.validator import COORDINATOR
from compatbroker.topic_names import GROUP_METADATA_TOPIC
from tests.async_tests import async_test
from tests.coordinator.membership_support import records_in
from tests.handlers.helpers import call, fail_partition_creation, make_broker

T0 = 1_700_000_000_000
E = ErrorCode

CommitTopic = OffsetCommitRequest.OffsetCommitRequestTopic
CommitPartition = OffsetCommitRequest.OffsetCommitRequestPartition
FetchTopic = OffsetFetchRequest.OffsetFetchRequestTopic
FetchGroup = OffsetFetchRequest.OffsetFetchRequestGroup
FetchGroupTopic = OffsetFetchRequest.OffsetFetchRequestTopics
DeleteTopic = OffsetDeleteRequest.OffsetDeleteRequestTopic
DeletePartition = OffsetDeleteRequest.OffsetDeleteRequestPartition


class Clock:
    def __init__(self):
        self.now_ms = T0

    def __call__(self):
        return self.now_ms


def new_broker(data_dir, **properties) -> Broker:
    broker = make_broker(data_dir, **properties)
    broker.now_ms = Clock()
    broker.create_topic("t", 3)
    broker.create_topic("u", 1)
    return broker


async def coordinated(broker, config: OffsetsConfig | None = None, *, start: bool = True) -> Coordinator:
    coordinator = Coordinator(broker, offset_store_factory=lambda b, c: OffsetStore(b, c, config))
    broker.coordinator = coordinator
    if start:
        await coordinator.start()
    return coordinator


@pytest.fixture
def broker(data_dir):
    broker = new_broker(data_dir)
    yield broker
    broker.logs.shutdown()


# --- request builders ---------------------------------------------------------------------------------------------

def commit_request(version, *partitions, topic="t", group="g", generation=-1, member="", instance=None,
                   retention=-1, topic_id=None, broker=None) -> OffsetCommitRequest:
    """partitions: (index, offset) or (index, offset, metadata[, leader epoch[, commit timestamp]])."""
    built = []
    for spec in partitions:
        index, at, metadata, epoch, stamp = spec + ("", -1, -1)[len(spec) - 2:]
        built.append(CommitPartition(partition_index=index, committed_offset=at, committed_metadata=metadata,
                                     committed_leader_epoch=epoch, commit_timestamp=stamp))
    if version >= 10 and topic_id is None:
        topic_id = broker.topic(topic).topic_id
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=generation, member_id=member,
                               group_instance_id=instance, retention_time_ms=retention,
                               topics=[CommitTopic(name=topic, topic_id=topic_id or ZERO_UUID, partitions=built)])


def errors_of(answer) -> list[int]:
    return [p.error_code for topic in answer.decoded.topics for p in topic.partitions]


async def commit(broker, version, *partitions, **options) -> list[int]:
    return errors_of(await call(broker, version, commit_request(version, *partitions, broker=broker, **options)))


def fetch_request(version, topics, *, group="g", require_stable=False, broker=None) -> OffsetFetchRequest:
    """topics: {name: [partitions]} or None for all."""
    if version >= 8:
        return OffsetFetchRequest(groups=[fetch_group(version, group, topics, broker)], require_stable=require_stable)
    wanted = None if topics is None else [FetchTopic(name=name, partition_indexes=parts)
                                          for name, parts in topics.items()]
    return OffsetFetchRequest(group_id=group, topics=wanted, require_stable=require_stable)


def fetch_group(version, group, topics, broker):
    if topics is None:
        return FetchGroup(group_id=group, topics=None)
    return FetchGroup(group_id=group, topics=[
        FetchGroupTopic(name=name, topic_id=broker.topic(name).topic_id if version >= 10 else ZERO_UUID,
                        partition_indexes=parts) for name, parts in topics.items()])


async def fetch(broker, version, topics, **options):
    """[(topic name, partition, offset, leader epoch, metadata, error)] and the group-level error."""
    decoded = (await call(broker, version, fetch_request(version, topics, broker=broker, **options))).decoded
    if version >= 8:
        group, = decoded.groups
        return _rows(broker, group.topics, version), group.error_code
    return _rows(broker, decoded.topics, version), decoded.error_code


def _rows(broker, topics, version):
    rows = []
    for topic in topics:
        name = broker.topic_by_id(topic.topic_id).name if version >= 10 else topic.name
        rows += [(name, p.partition_index, p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code)
                 for p in topic.partitions]
    return rows


def subscription(*topics) -> bytes:
    return struct.pack(">h", 0) + encode_message(ConsumerProtocolSubscription, 0,
                                                 ConsumerProtocolSubscription(topics=list(topics)))


def stable_group(coordinator, group_id="g", *, protocol_type="consumer", topics=("t",), instance=None) -> Group:
    """A Stable group of generation 4 with members m1 (leader) and m2, as its metadata record would restore it."""
    member = GroupMetadataValue.MemberMetadata
    value = GroupMetadataValue(protocol_type=protocol_type, generation=4, protocol="range", leader="m1",
                               current_state_timestamp=T0, members=[
                                   member(member_id="m1", group_instance_id=instance, client_id="c", client_host="h",
                                          rebalance_timeout=60_000, session_timeout=45_000,
                                          subscription=subscription(*topics), assignment=b""),
                                   member(member_id="m2", client_id="c", client_host="h", rebalance_timeout=60_000,
                                          session_timeout=45_000, subscription=subscription(*topics),
                                          assignment=b"")])
    group = Group.from_metadata_value(group_id, value)
    coordinator.membership.load(group)
    return group


# --- declarations -------------------------------------------------------------------------------------------------

def test_declared_versions():
    assert (offset_commit.API_KEY, offset_commit.MIN_VERSION, offset_commit.MAX_VERSION) == (8, 0, 10)
    assert (offset_fetch.API_KEY, offset_fetch.MIN_VERSION, offset_fetch.MAX_VERSION) == (9, 0, 10)
    assert (offset_delete.API_KEY, offset_delete.MIN_VERSION, offset_delete.MAX_VERSION) == (47, 0, 0)
    registry = build_registry(["offset_commit", "offset_fetch", "offset_delete"])  # the registry's own checks
    assert {key: module.__doc__.split(" ")[0] for key, module in registry.items()} == {
        8: "OffsetCommit", 9: "OffsetFetch", 47: "OffsetDelete"}
    assert all(key in HANDLERS for key in registry)  # served by the broker, so advertised in ApiVersions


# --- OffsetCommit -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(11))
@async_test
async def test_commit_then_fetch_at_every_version(broker, version):
    coordinator = await coordinated(broker)
    assert await commit(broker, version, (0, 42, "meta", 7), (2, 9)) == [E.NONE, E.NONE]
    fetch_version = min(version, 10)
    rows, error = await fetch(broker, fetch_version, {"t": [0, 1, 2]})
    epoch = 7 if version >= 6 else -1
    shown_epoch = epoch if fetch_version >= 5 else -1
    assert error == E.NONE
    assert rows == [("t", 0, 42, shown_epoch, "meta", E.NONE), ("t", 1, -1, -1, "", E.NONE),
                    ("t", 2, 9, -1, "", E.NONE)]
    stored = coordinator.offsets.fetch("g")[("t", 0)]
    assert (stored.leader_epoch, stored.commit_timestamp_ms, stored.expire_timestamp_ms) == (epoch, T0, -1)
    assert stored.topic_id == broker.topic("t").topic_id


@async_test
async def test_v1_keeps_the_commit_timestamp_it_is_given(broker):
    coordinator = await coordinated(broker)
    assert await commit(broker, 1, (0, 1, "", -1, 12345), (1, 1, "", -1, -1)) == [E.NONE, E.NONE]
    stored = coordinator.offsets.fetch("g")
    assert stored[("t", 0)].commit_timestamp_ms == 12345 and stored[("t", 1)].commit_timestamp_ms == T0


@pytest.mark.parametrize("version, expire", [(2, T0 + 5000), (4, T0 + 5000), (5, -1)])
@async_test
async def test_retention_time_of_v2_to_v4_sets_an_expire_timestamp(broker, version, expire):
    coordinator = await coordinated(broker)
    assert await commit(broker, version, (0, 1), retention=5000) == [E.NONE]
    assert coordinator.offsets.fetch("g")[("t", 0)].expire_timestamp_ms == expire


@pytest.mark.parametrize("retention, expire", [(2**63 - 1, T0 + 2**63 - 1 - 2**64), (-(2**63), T0 - 2**63),
                                               (-2, T0 - 2)])
@async_test
async def test_retention_time_is_added_in_java_long_arithmetic(broker, retention, expire):
    """now + retention wraps as Kafka's long arithmetic does: the commit is stored and answered, never a closed
    connection (it used to raise EncodeError writing the record)."""
    coordinator = await coordinated(broker)
    assert await commit(broker, 3, (0, 1), retention=retention) == [E.NONE]
    assert coordinator.offsets.fetch("g")[("t", 0)].expire_timestamp_ms == expire


@async_test
async def test_offsets_topic_that_cannot_be_created_answers_coordinator_not_available(broker, monkeypatch):
    coordinator = await coordinated(broker)
    fail_partition_creation(monkeypatch, after=3)  # out of file descriptors while making __consumer_offsets
    assert await commit(broker, 8, (0, 1), (1, 2)) == [E.COORDINATOR_NOT_AVAILABLE] * 2
    assert broker.topic(GROUP_METADATA_TOPIC) is None and broker.get_log(GROUP_METADATA_TOPIC, 0) is None
    monkeypatch.undo()
    assert await commit(broker, 8, (0, 1)) == [E.NONE]
    assert coordinator.offsets.fetch("g")[("t", 0)].offset == 1


@async_test
async def test_null_metadata_is_stored_as_empty(broker):
    coordinator = await coordinated(broker)
    assert await commit(broker, 3, (0, 1, None)) == [E.NONE]
    assert coordinator.offsets.fetch("g")[("t", 0)].metadata == ""


@pytest.mark.parametrize("metadata, error", [("x" * 4096, E.NONE), ("x" * 4097, E.OFFSET_METADATA_TOO_LARGE),
                                             ("\U0001F600" * 2048, E.NONE),
                                             ("\U0001F600" * 2048 + "x", E.OFFSET_METADATA_TOO_LARGE)])
@async_test
async def test_metadata_limit_counts_utf16_units(broker, metadata, error):
    coordinator = await coordinated(broker)
    assert await commit(broker, 8, (0, 5, metadata), (1, 6)) == [error, E.NONE]
    assert (("t", 0) in coordinator.offsets.fetch("g")) == (error == E.NONE)
    assert coordinator.offsets.fetch("g")[("t", 1)].offset == 6


@async_test
async def test_unknown_topics_and_partitions(broker):
    coordinator = await coordinated(broker)
    assert await commit(broker, 8, (0, 1), topic="nope") == [E.UNKNOWN_TOPIC_OR_PARTITION]
    assert await commit(broker, 8, (3, 1), (-1, 1), (2, 1)) == [E.UNKNOWN_TOPIC_OR_PARTITION] * 2 + [E.NONE]
    assert await commit(broker, 10, (0, 1), topic_id=uuid.uuid4()) == [E.UNKNOWN_TOPIC_ID]
    assert await commit(broker, 10, (5, 1)) == [E.UNKNOWN_TOPIC_OR_PARTITION]
    assert set(coordinator.offsets.fetch("g")) == {("t", 2)}


@async_test
async def test_v10_names_topics_by_id(broker):
    await coordinated(broker)
    answer = await call(broker, 10, commit_request(10, (1, 8), broker=broker))
    topic, = answer.decoded.topics
    assert topic.topic_id == broker.topic("t").topic_id and topic.name == ""
    assert (await fetch(broker, 10, {"t": [1]}))[0] == [("t", 1, 8, -1, "", E.NONE)]


@async_test
async def test_only_unknown_topics_skip_the_group_check(broker):
    await coordinated(broker)
    assert await commit(broker, 9, (0, 1), topic="nope", generation=5, member="m") == [E.UNKNOWN_TOPIC_OR_PARTITION]
    assert await commit(broker, 9, (0, 1), generation=5, member="m") == [E.GROUP_ID_NOT_FOUND]


@pytest.mark.parametrize("version, error", [(1, E.ILLEGAL_GENERATION), (8, E.ILLEGAL_GENERATION),
                                            (9, E.GROUP_ID_NOT_FOUND), (10, E.GROUP_ID_NOT_FOUND)])
@async_test
async def test_member_commit_to_an_unknown_group(broker, version, error):
    coordinator = await coordinated(broker)
    assert await commit(broker, version, (0, 1), generation=1, member="m1") == [error]
    assert coordinator.offsets.fetch("g") == {}


@async_test
async def test_standalone_commit_creates_a_simple_group(broker):
    coordinator = await coordinated(broker)
    assert await commit(broker, 0, (0, 3)) == [E.NONE]
    group = coordinator.group("g")
    assert group.state is GroupState.EMPTY and group.protocol_type is None
    assert await commit(broker, 2, (0, 4), group="") == [E.NONE]  # the empty group id is allowed for commits
    assert coordinator.offsets.fetch("")[("t", 0)].offset == 4


@async_test
async def test_member_commits_are_checked_against_the_group(broker):
    coordinator = await coordinated(broker)
    group = stable_group(coordinator, instance="static-1")
    assert await commit(broker, 8, (0, 1), generation=4, member="m2") == [E.NONE]
    assert await commit(broker, 8, (0, 2), generation=3, member="m2") == [E.ILLEGAL_GENERATION]
    assert await commit(broker, 8, (0, 2), generation=4, member="m9") == [E.UNKNOWN_MEMBER_ID]
    assert await commit(broker, 8, (0, 2)) == [E.UNKNOWN_MEMBER_ID]  # a standalone commit to a group with members
    assert await commit(broker, 8, (0, 2), generation=4, member="m2", instance="static-1") == [E.FENCED_INSTANCE_ID]
    assert await commit(broker, 8, (0, 5), generation=4, member="m1", instance="static-1") == [E.NONE]
    group.state = GroupState.COMPLETING_REBALANCE
    assert await commit(broker, 8, (0, 6), generation=4, member="m1") == [E.REBALANCE_IN_PROGRESS]
    assert coordinator.offsets.fetch("g")[("t", 0)].offset == 5


@async_test
async def test_commit_while_loading(broker):
    coordinator = await coordinated(broker, start=False)
    assert await commit(broker, 8, (0, 1), (9, 1)) == [E.COORDINATOR_LOAD_IN_PROGRESS, E.UNKNOWN_TOPIC_OR_PARTITION]
    await coordinator.start()
    assert await commit(broker, 8, (0, 1)) == [E.NONE]


@async_test
async def test_a_failed_write_is_answered_for_every_stored_partition(broker, monkeypatch):
    coordinator = await coordinated(broker)

    async def failing_commit(group_id, offsets):
        raise OffsetWriteError(E.NOT_COORDINATOR)

    monkeypatch.setattr(coordinator.offsets, "commit", failing_commit)
    answer = await commit(broker, 8, (0, 1), (1, 1, "x" * 5000), (7, 1))
    assert answer == [E.NOT_COORDINATOR, E.OFFSET_METADATA_TOO_LARGE, E.UNKNOWN_TOPIC_OR_PARTITION]


# --- restarts -----------------------------------------------------------------------------------------------------

@async_test
async def test_commit_survives_a_clean_restart(data_dir):
    broker = new_broker(data_dir)
    await coordinated(broker)
    assert await commit(broker, 9, (1, 1234, "after-restart", 3)) == [E.NONE]
    await broker.coordinator.stop()
    await broker.shutdown()
    reopened = new_broker(data_dir)
    await coordinated(reopened)
    assert (await fetch(reopened, 9, {"t": [1]}))[0] == [("t", 1, 1234, 3, "after-restart", E.NONE)]
    assert (await fetch(reopened, 9, None))[0] == [("t", 1, 1234, 3, "after-restart", E.NONE)]
    await reopened.coordinator.stop()
    reopened.logs.shutdown()


@async_test
async def test_acknowledged_commits_survive_a_sigkill_under_fsync_per_message(data_dir):
    flush = {"log.flush.interval.messages": "1"}
    broker = new_broker(data_dir, **flush)
    coordinator = await coordinated(broker)
    for n in range(5):
        assert await commit(broker, 8, (n % 3, 100 + n)) == [E.NONE]
        log = broker.get_log(GROUP_METADATA_TOPIC, coordinator.offsets.partition_for("g"))
        assert log.recovery_point == log.log_end_offset  # fsynced before the answer went out
    await coordinator.stop()
    broker.logs.close_unclean()  # no flush, no checkpoint, no clean-shutdown marker
    reopened = new_broker(data_dir, **flush)
    assert not reopened.logs.clean_shutdown
    await coordinated(reopened)
    rows, _ = await fetch(reopened, 8, {"t": [0, 1, 2]})
    assert [row[2] for row in rows] == [103, 104, 102]
    await reopened.coordinator.stop()
    reopened.logs.shutdown()


@async_test
async def test_group_metadata_survives_a_restart(data_dir):
    broker = new_broker(data_dir)
    coordinator = await coordinated(broker)
    group = stable_group(coordinator, instance="static-1")
    await coordinator.offsets.store_group(group)
    await coordinator.stop()
    await broker.shutdown()
    reopened = new_broker(data_dir)
    restored = (await coordinated(reopened)).group("g")
    assert restored.state is GroupState.STABLE and restored.generation_id == 4 and restored.leader_id == "m1"
    assert restored.static_members == {"static-1": "m1"} and restored.subscribed_topics() == {"t"}
    assert restored.members["m1"].metadata("range") == subscription("t")
    await reopened.coordinator.stop()
    reopened.logs.shutdown()


# --- OffsetFetch --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(2, 11))
@async_test
async def test_fetch_all_partitions(broker, version):
    await coordinated(broker)
    assert await commit(broker, 8, (2, 5), (0, 4)) == [E.NONE, E.NONE]
    assert await commit(broker, 8, (0, 1, "m"), topic="u") == [E.NONE]
    rows, error = await fetch(broker, version, None)
    assert error == E.NONE
    assert rows == [("t", 0, 4, -1, "", E.NONE), ("t", 2, 5, -1, "", E.NONE), ("u", 0, 1, -1, "m", E.NONE)]
    assert await fetch(broker, version, None, group="none") == ([], E.NONE)


@async_test
async def test_fetch_v10_all_partitions_leaves_out_topics_that_no_longer_exist(broker):
    coordinator = await coordinated(broker)
    await coordinator.offsets.commit("g", [CommittedOffset("gone", 0, 1), CommittedOffset("u", 0, 2)])
    decoded = (await call(broker, 10, fetch_request(10, None))).decoded
    topic, = decoded.groups[0].topics
    assert topic.topic_id == broker.topic("u").topic_id and topic.partitions[0].committed_offset == 2
    assert (await fetch(broker, 9, None))[0] == [("gone", 0, 1, -1, "", E.NONE), ("u", 0, 2, -1, "", E.NONE)]


@async_test
async def test_fetch_v10_unknown_topic_id(broker):
    await coordinated(broker)
    request = OffsetFetchRequest(groups=[FetchGroup(group_id="g", topics=[
        FetchGroupTopic(topic_id=(unknown := uuid.uuid4()), partition_indexes=[0, 1])])])
    topic, = (await call(broker, 10, request)).decoded.groups[0].topics
    assert topic.topic_id == unknown
    assert [(p.partition_index, p.committed_offset, p.error_code) for p in topic.partitions] == \
        [(0, -1, E.UNKNOWN_TOPIC_ID), (1, -1, E.UNKNOWN_TOPIC_ID)]


@pytest.mark.parametrize("version, error", [(0, E.UNKNOWN_TOPIC_OR_PARTITION), (1, E.NONE), (7, E.NONE)])
@async_test
async def test_fetch_of_an_unknown_topic(broker, version, error):
    await coordinated(broker)
    assert (await fetch(broker, version, {"nope": [0]}))[0] == [("nope", 0, -1, -1, "", error)]


@async_test
async def test_fetch_several_groups_at_once(broker):
    await coordinated(broker)
    assert await commit(broker, 8, (0, 10), group="a") == [E.NONE]
    assert await commit(broker, 8, (0, 20), group="b") == [E.NONE]
    request = OffsetFetchRequest(groups=[FetchGroup(group_id="a", topics=[FetchGroupTopic(name="t",
                                                                                          partition_indexes=[0])]),
                                         FetchGroup(group_id="b", topics=None),
                                         FetchGroup(group_id="c", topics=[FetchGroupTopic(name="t",
                                                                                          partition_indexes=[0])])])
    groups = (await call(broker, 8, request)).decoded.groups
    assert [(g.group_id, g.error_code, [(t.name, [p.committed_offset for p in t.partitions]) for t in g.topics])
            for g in groups] == [("a", 0, [("t", [10])]), ("b", 0, [("t", [20])]), ("c", 0, [("t", [-1])])]


@pytest.mark.parametrize("version", [0, 1])
@async_test
async def test_fetch_while_loading_v0_v1_put_the_error_on_every_partition(broker, version):
    await coordinated(broker, start=False)
    rows, error = await fetch(broker, version, {"t": [0, 1]})
    assert error == E.NONE  # these versions have no top-level error field
    assert rows == [("t", 0, -1, -1, "", E.COORDINATOR_LOAD_IN_PROGRESS),
                    ("t", 1, -1, -1, "", E.COORDINATOR_LOAD_IN_PROGRESS)]


@pytest.mark.parametrize("version", [2, 7, 8, 10])
@async_test
async def test_fetch_while_loading_answers_a_group_error(broker, version):
    await coordinated(broker, start=False)
    assert await fetch(broker, version, {"t": [0]}) == ([], E.COORDINATOR_LOAD_IN_PROGRESS)


def open_transaction(broker, group_id, topic, partition, at):
    """A TxnOffsetCommit's record whose transaction has not ended, written as Kafka writes it."""
    broker.create_topic(GROUP_METADATA_TOPIC, 50, configs={"cleanup.policy": "compact"})
    log = broker.get_log(GROUP_METADATA_TOPIC, partition_for_group(group_id, 50))
    record = (offset_commit_key(group_id, topic, partition),
              offset_commit_value(CommittedOffset(topic, partition, at, commit_timestamp_ms=T0)))
    log.append(build_batch([(*record, (), T0)], producer_id=5, producer_epoch=0, is_transactional=True),
               leader_epoch=0, now_ms=T0, origin=COORDINATOR)


@pytest.mark.parametrize("version", [7, 8, 10])
@async_test
async def test_require_stable_reports_open_transactional_commits(broker, version):
    open_transaction(broker, "g", "t", 1, 77)
    await coordinated(broker)
    assert await commit(broker, 8, (0, 5), (1, 6)) == [E.NONE, E.NONE]
    stable, _ = await fetch(broker, version, {"t": [0, 1]}, require_stable=True)
    assert stable == [("t", 0, 5, -1, "", E.NONE), ("t", 1, -1, -1, "", E.UNSTABLE_OFFSET_COMMIT)]
    assert (await fetch(broker, version, None, require_stable=True))[0] == stable
    relaxed, _ = await fetch(broker, version, {"t": [0, 1]})
    assert relaxed == [("t", 0, 5, -1, "", E.NONE), ("t", 1, 6, -1, "", E.NONE)]


@async_test
async def test_require_stable_is_not_read_before_v7(broker):
    open_transaction(broker, "g", "t", 1, 77)
    await coordinated(broker)
    assert (await fetch(broker, 6, {"t": [1]}))[0] == [("t", 1, -1, -1, "", E.NONE)]


# --- OffsetDelete -------------------------------------------------------------------------------------------------

def delete_request(group="g", **topics) -> OffsetDeleteRequest:
    return OffsetDeleteRequest(group_id=group, topics=[
        DeleteTopic(name=name, partitions=[DeletePartition(partition_index=p) for p in parts])
        for name, parts in topics.items()])


async def delete(broker, group="g", **topics):
    decoded = (await call(broker, 0, delete_request(group, **topics))).decoded
    return decoded.error_code, {(t.name, p.partition_index): p.error_code for t in decoded.topics
                                for p in t.partitions}


@async_test
async def test_delete_offsets_of_a_simple_group(broker):
    coordinator = await coordinated(broker)
    assert await commit(broker, 8, (0, 1), (1, 2)) == [E.NONE, E.NONE]
    assert await delete(broker, t=[0, 2, 7], nope=[0]) == (E.NONE, {
        ("t", 0): E.NONE, ("t", 2): E.NONE, ("t", 7): E.UNKNOWN_TOPIC_OR_PARTITION,
        ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION})
    assert set(coordinator.offsets.fetch("g")) == {("t", 1)}


@async_test
async def test_delete_keeps_offsets_of_subscribed_topics(broker):
    coordinator = await coordinated(broker)
    stable_group(coordinator, topics=("t",))
    assert await commit(broker, 8, (0, 1), generation=4, member="m1") == [E.NONE]
    assert await commit(broker, 8, (0, 1), topic="u", generation=4, member="m1") == [E.NONE]
    assert await delete(broker, t=[0, 9], u=[0]) == (E.NONE, {
        ("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("t", 9): E.UNKNOWN_TOPIC_OR_PARTITION, ("u", 0): E.NONE})
    assert set(coordinator.offsets.fetch("g")) == {("t", 0)}


@pytest.mark.parametrize("group, error", [("", E.INVALID_GROUP_ID), ("missing", E.GROUP_ID_NOT_FOUND)])
@async_test
async def test_delete_group_errors(broker, group, error):
    await coordinated(broker)
    assert await delete(broker, group, t=[0]) == (error, {})


@async_test
async def test_delete_in_a_non_consumer_group_with_members(broker):
    coordinator = await coordinated(broker)
    stable_group(coordinator, protocol_type="connect")
    assert await delete(broker, t=[0]) == (E.NON_EMPTY_GROUP, {})


@async_test
async def test_delete_while_loading(broker):
    await coordinated(broker, start=False)
    assert await delete(broker, t=[0]) == (E.COORDINATOR_LOAD_IN_PROGRESS, {})


@async_test
async def test_delete_write_failure_is_a_group_error(broker, monkeypatch):
    coordinator = await coordinated(broker)
    assert await commit(broker, 8, (0, 1)) == [E.NONE]

    async def failing_delete(group_id, partitions):
        raise OffsetWriteError(E.COORDINATOR_NOT_AVAILABLE)

    monkeypatch.setattr(coordinator.offsets, "delete_offsets", failing_delete)
    assert await delete(broker, t=[0]) == (E.COORDINATOR_NOT_AVAILABLE, {})


# --- retention with the coordinator -------------------------------------------------------------------------------

async def until(condition):
    """Yield to the event loop until `condition` holds (the test's time limit bounds the wait)."""
    while not condition():
        await asyncio.sleep(0)


@async_test
async def test_retention_expires_offsets_and_drops_the_empty_group(data_dir):
    broker = new_broker(data_dir)
    config = OffsetsConfig.from_properties({"offsets.retention.minutes": "1"}.get)
    coordinator = await coordinated(broker, config)
    assert await commit(broker, 8, (0, 1)) == [E.NONE]
    assert await commit(broker, 8, (0, 1), group="busy") == [E.NONE]
    stable_group(coordinator, "busy", topics=("t",))
    broker.now_ms.now_ms += 60_000
    assert await coordinator.offsets.expire_offsets() == 1
    assert (await fetch(broker, 8, {"t": [0]}))[0] == [("t", 0, -1, -1, "", E.NONE)]
    assert coordinator.group("g") is None and coordinator.group("busy") is not None
    assert (await fetch(broker, 8, {"t": [0]}, group="busy"))[0] == [("t", 0, 1, -1, "", E.NONE)]
    # the coordinator writes the dropped group's tombstone from a task of its own
    await until(lambda: records_in(broker, "g")[-1:] == [(group_metadata_key("g"), None)])
    assert records_in(broker, "g")[-2] == (offset_commit_key("g", "t", 0), None)
    await coordinator.stop()
    broker.logs.shutdown()
