"""TxnOffsetCommit (v0-5) through the codec against a real Broker and the real group Coordinator: every error code,
the version boundaries, the producer verification (a stand-in transaction coordinator whose verdict the test sets),
offsets visible only after the commit marker and dropped by an abort, and OffsetFetch require_stable meanwhile.

Markers are written as the marker writer does (control batch appended with origin COORDINATOR, then
`complete_transaction`); the last test drives the real transaction coordinator when it exists."""
from __future__ import annotations

import pytest

from compatbroker.coordinator import GroupState
from compatbroker.coordinator.offsets import partition_for_group
from compatbroker.handlers import build_registry, txn_offset_commit
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import TxnOffsetCommitRequest
from compatbroker.protocol.records.batch import iter_batches
from compatbroker.protocol.records.control import ControlRecordType, build_control_batch
from compatbroker.storage.validator import COORDINATOR
from compatbroker.topic_names import GROUP_METADATA_TOPIC
from tests.coordinator.membership_support import records_in
from tests.coordinator.test_offsets_handlers import T0, coordinated, fetch, new_broker, stable_group
from tests.handlers.helpers import as_received, context, fail_partition_creation, on_the_wire

E = ErrorCode
TxnTopic = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
TxnPartition = TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition
PRODUCER, EPOCH = 7000, 2
VERSIONS = range(txn_offset_commit.MIN_VERSION, txn_offset_commit.MAX_VERSION + 1)


class StandInTransactions:
    """The transaction coordinator's partition-leader check, answering `verdict` and recording each call."""

    def __init__(self):
        self.verdict = E.NONE
        self.calls = []

    async def verify_for_append(self, transactional_id, producer_id, producer_epoch, topic, partition, *, tv2):
        self.calls.append((transactional_id, producer_id, producer_epoch, topic, partition, tv2))
        return self.verdict


@pytest.fixture
def broker(data_dir):
    broker = new_broker(data_dir)  # topics t (3 partitions) and u (1)
    yield broker
    broker.logs.shutdown()


@pytest.fixture
def data_dir(tmp_path):
    return tmp_path / "data"


@pytest.fixture
def transactions(monkeypatch):
    stand_in = StandInTransactions()
    monkeypatch.setattr(txn_offset_commit, "_transactions", lambda broker: stand_in)
    return stand_in


def txn_request(version, *partitions, topic="t", group="g", generation=-1, member="", instance=None,
                producer=(PRODUCER, EPOCH)) -> TxnOffsetCommitRequest:
    """partitions: (index, offset) or (index, offset, metadata[, leader epoch])."""
    built = [TxnPartition(partition_index=spec[0], committed_offset=spec[1],
                          committed_metadata=spec[2] if len(spec) > 2 else "",
                          committed_leader_epoch=spec[3] if len(spec) > 3 else -1) for spec in partitions]
    member_fields = {} if version < 3 else {"generation_id": generation, "member_id": member,
                                            "group_instance_id": instance}
    return TxnOffsetCommitRequest(transactional_id="tx", group_id=group, producer_id=producer[0],
                                  producer_epoch=producer[1], topics=[TxnTopic(name=topic, partitions=built)],
                                  **member_fields)


async def call_txn(broker, version, request):
    """The response as a client of `version` reads it (the handler is called directly: it is registered by the
    handlers' registry, which these tests do not depend on)."""
    body = as_received(txn_offset_commit.API_KEY, version, request)
    raw = await txn_offset_commit.handle(context(broker, txn_offset_commit.API_KEY, version), body)
    return on_the_wire(txn_offset_commit.API_KEY, version, raw)


async def txn_commit(broker, version, *partitions, **options) -> list[int]:
    decoded = await call_txn(broker, version, txn_request(version, *partitions, **options))
    return [p.error_code for topic in decoded.topics for p in topic.partitions]


async def end_transaction(broker, commit, group="g", producer=(PRODUCER, EPOCH)):
    store = broker.coordinator.offsets
    partition_log = broker.get_log(GROUP_METADATA_TOPIC, store.partition_for(group))
    marker = build_control_batch(ControlRecordType.COMMIT if commit else ControlRecordType.ABORT,
                                 producer_id=producer[0], producer_epoch=producer[1], coordinator_epoch=0,
                                 timestamp=T0)
    partition_log.append(marker, leader_epoch=0, now_ms=T0, origin=COORDINATOR)
    await store.complete_transaction(producer[0], partition_log.partition, commit)


def offsets_records(broker, group="g"):
    if broker.topic(GROUP_METADATA_TOPIC) is None:
        return []
    return records_in(broker, group)


# --- declaration --------------------------------------------------------------------------------------------------

def test_declares_every_version_kafka_has():
    assert (txn_offset_commit.API_KEY, txn_offset_commit.MIN_VERSION, txn_offset_commit.MAX_VERSION) == (28, 0, 5)
    assert build_registry(["txn_offset_commit"])[28] is txn_offset_commit


# --- visibility ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
async def test_offsets_become_visible_at_the_commit_marker(broker, transactions, version):
    await coordinated(broker)
    assert await txn_commit(broker, version, (0, 10, "m", 5), (1, 11)) == [E.NONE, E.NONE]
    assert (await fetch(broker, 6, {"t": [0, 1]}))[0] == [("t", 0, -1, -1, "", E.NONE),
                                                          ("t", 1, -1, -1, "", E.NONE)]
    assert (await fetch(broker, 7, {"t": [0, 1]}, require_stable=True))[0] == [
        ("t", 0, -1, -1, "", E.UNSTABLE_OFFSET_COMMIT), ("t", 1, -1, -1, "", E.UNSTABLE_OFFSET_COMMIT)]
    await end_transaction(broker, commit=True)
    epoch = 5 if version >= 2 else -1  # the leader epoch is sent from v2
    expected = [("t", 0, 10, epoch, "m", E.NONE), ("t", 1, 11, -1, "", E.NONE)]
    assert (await fetch(broker, 8, {"t": [0, 1]}, require_stable=True))[0] == expected


async def test_an_abort_drops_them(broker, transactions):
    coordinator = await coordinated(broker)
    assert await txn_commit(broker, 3, (0, 10)) == [E.NONE]
    await end_transaction(broker, commit=False)
    assert (await fetch(broker, 8, {"t": [0]}, require_stable=True))[0] == [("t", 0, -1, -1, "", E.NONE)]
    assert coordinator.offsets.groups_with_offsets() == set()


async def test_the_stored_batch_is_transactional_with_the_producer(broker, transactions):
    await coordinated(broker)
    assert await txn_commit(broker, 5, (0, 10)) == [E.NONE]
    partition_log = broker.get_log(GROUP_METADATA_TOPIC, partition_for_group("g", 50))
    (_, header), = list(iter_batches(partition_log.read_bytes(0, 1 << 20)))
    assert (header.producer_id, header.producer_epoch, header.is_transactional) == (PRODUCER, EPOCH, True)


# --- topic checks -------------------------------------------------------------------------------------------------

async def test_unknown_topics_and_partitions_answer_unknown_topic_or_partition(broker, transactions):
    await coordinated(broker)
    assert await txn_commit(broker, 3, (0, 1), topic="nope") == [E.UNKNOWN_TOPIC_OR_PARTITION]
    assert transactions.calls == []  # nothing left: neither the producer nor the group is looked at
    assert await txn_commit(broker, 3, (0, 1), (3, 2)) == [E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION]
    await end_transaction(broker, commit=True)
    assert set(broker.coordinator.offsets.fetch("g")) == {("t", 0)}


async def test_an_empty_group_id_answers_invalid_group_id(broker, transactions):
    await coordinated(broker)
    assert await txn_commit(broker, 3, (0, 1), group="") == [E.INVALID_GROUP_ID]
    assert transactions.calls == []


async def test_metadata_too_large_refuses_only_its_partition(broker, transactions):
    coordinator = await coordinated(broker)
    assert await txn_commit(broker, 3, (0, 1, "x" * 4097), (1, 2, "y" * 4096)) == [E.OFFSET_METADATA_TOO_LARGE,
                                                                                  E.NONE]
    await end_transaction(broker, commit=True)
    assert set(coordinator.offsets.fetch("g")) == {("t", 1)}


# --- the producer's verification ----------------------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
async def test_verification_asks_for_the_groups_offsets_partition(broker, transactions, version):
    await coordinated(broker)
    await txn_commit(broker, version, (0, 1), group="some-group")
    assert transactions.calls == [("tx", PRODUCER, EPOCH, GROUP_METADATA_TOPIC,
                                   partition_for_group("some-group", 50), version >= 5)]


@pytest.mark.parametrize("verdict, version, answer", [
    (E.PRODUCER_FENCED, 0, E.INVALID_PRODUCER_EPOCH),          # as Kafka's partition leader translates it
    (E.PRODUCER_FENCED, 5, E.INVALID_PRODUCER_EPOCH),
    (E.INVALID_PRODUCER_EPOCH, 3, E.INVALID_PRODUCER_EPOCH),
    (E.TRANSACTION_ABORTABLE, 3, E.INVALID_TXN_STATE),         # clients before v4 do not know it
    (E.TRANSACTION_ABORTABLE, 4, E.TRANSACTION_ABORTABLE),
    (E.TRANSACTION_ABORTABLE, 5, E.TRANSACTION_ABORTABLE),
    (E.INVALID_TXN_STATE, 2, E.INVALID_TXN_STATE),
    (E.INVALID_PRODUCER_ID_MAPPING, 3, E.INVALID_PRODUCER_ID_MAPPING),
    (E.CONCURRENT_TRANSACTIONS, 3, E.CONCURRENT_TRANSACTIONS),
    (E.NETWORK_EXCEPTION, 2, E.COORDINATOR_LOAD_IN_PROGRESS),  # retried without a coordinator lookup
    (E.NETWORK_EXCEPTION, 1, E.COORDINATOR_NOT_AVAILABLE),     # v0-1 have no load error
    (E.COORDINATOR_LOAD_IN_PROGRESS, 4, E.COORDINATOR_LOAD_IN_PROGRESS),
    (E.NOT_COORDINATOR, 4, E.NOT_COORDINATOR),
])
async def test_verification_errors_are_answered_as_kafka_does_and_nothing_is_stored(broker, transactions, verdict,
                                                                                    version, answer):
    await coordinated(broker)
    transactions.verdict = verdict
    assert await txn_commit(broker, version, (0, 1), (1, 2)) == [answer, answer]
    assert offsets_records(broker) == []
    assert not broker.coordinator.offsets.has_unstable_offset("g", "t", 0)


# --- the group ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version, answer", [(0, E.COORDINATOR_NOT_AVAILABLE), (1, E.COORDINATOR_NOT_AVAILABLE),
                                             (2, E.COORDINATOR_LOAD_IN_PROGRESS), (5, E.COORDINATOR_LOAD_IN_PROGRESS)])
async def test_while_offsets_load(broker, transactions, version, answer):
    await coordinated(broker, start=False)
    assert await txn_commit(broker, version, (0, 1)) == [answer]


@pytest.mark.parametrize("options, answer", [
    ({"generation": 4, "member": "m1"}, E.NONE),
    ({}, E.NONE),                                                        # no member fields: any group state
    ({"generation": 4, "member": "stranger"}, E.UNKNOWN_MEMBER_ID),
    ({"generation": -1, "member": "stranger"}, E.UNKNOWN_MEMBER_ID),
    ({"generation": 3, "member": "m1"}, E.ILLEGAL_GENERATION),
    ({"generation": 4, "member": "m2", "instance": "static-1"}, E.FENCED_INSTANCE_ID),
    ({"generation": 4, "member": "m1", "instance": "static-1"}, E.NONE),
    ({"generation": 4, "member": "m1", "group": "unknown-group"}, E.ILLEGAL_GENERATION),  # not GROUP_ID_NOT_FOUND
])
async def test_kip_447_member_checks_from_v3(broker, transactions, options, answer):
    coordinator = await coordinated(broker)
    stable_group(coordinator, instance="static-1")
    assert await txn_commit(broker, 3, (0, 1), **options) == [answer]
    assert await txn_commit(broker, 5, (0, 1), **options) == [answer]


async def test_a_consumer_groups_member_epoch_is_the_generation(broker, transactions):
    """KIP-848: the generation is the member epoch; a stale one is ILLEGAL_GENERATION (Kafka maps
    STALE_MEMBER_EPOCH for transactional commits), an unknown member UNKNOWN_MEMBER_ID."""
    from compatbroker.protocol.messages import ConsumerGroupHeartbeatRequest
    from tests.handlers.helpers import call

    await coordinated(broker)
    joined = (await call(broker, 1, ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m-1", member_epoch=0, rebalance_timeout_ms=30_000, subscribed_topic_names=["t"],
        topic_partitions=[]))).decoded
    assert joined.error_code == E.NONE
    epoch = joined.member_epoch
    assert await txn_commit(broker, 5, (0, 1), generation=epoch + 1, member="m-1") == [E.ILLEGAL_GENERATION]
    assert await txn_commit(broker, 3, (0, 1), generation=epoch - 1, member="m-1") == [E.ILLEGAL_GENERATION]
    assert await txn_commit(broker, 5, (0, 1), generation=epoch, member="ghost") == [E.UNKNOWN_MEMBER_ID]
    assert await txn_commit(broker, 5, (0, 1), generation=epoch, member="m-1") == [E.NONE]
    assert await txn_commit(broker, 5, (0, 2)) == [E.NONE]  # no member fields: not checked
    assert await txn_commit(broker, 2, (0, 3)) == [E.NONE]


async def test_v2_carries_no_member_and_is_accepted_by_a_stable_group(broker, transactions):
    coordinator = await coordinated(broker)
    stable_group(coordinator)
    assert await txn_commit(broker, 2, (0, 1)) == [E.NONE]


async def test_a_group_awaiting_its_assignment_still_takes_transactional_commits(broker, transactions):
    coordinator = await coordinated(broker)
    group = stable_group(coordinator)
    group.state = GroupState.COMPLETING_REBALANCE
    assert await txn_commit(broker, 3, (0, 1), generation=4, member="m1") == [E.NONE]


async def test_a_write_that_fails_answers_coordinator_not_available(broker, transactions, monkeypatch):
    await coordinated(broker)
    fail_partition_creation(monkeypatch, after=3)  # out of file descriptors while making __consumer_offsets
    assert await txn_commit(broker, 3, (0, 1), (1, 2)) == [E.COORDINATOR_NOT_AVAILABLE] * 2
    assert not broker.coordinator.offsets.has_unstable_offset("g", "t", 0)


# --- with the real transaction coordinator ------------------------------------------------------------------------

async def real_transactions(broker):
    """The broker's transaction coordinator, loaded; the test is skipped while it is not written yet."""
    package = pytest.importorskip("compatbroker.coordinator.transactions")
    if not hasattr(package, "transactions_of"):
        pytest.skip("the transaction coordinator is not there yet")
    await coordinated(broker)
    coordinator = package.transactions_of(broker)
    await coordinator.load()
    return coordinator


async def test_tv1_commit_after_add_offsets_is_visible_once_the_transaction_commits(broker):
    coordinator = await real_transactions(broker)
    init = await coordinator.init_producer_id("tx", 60_000, None)
    producer = (init.producer_id, init.producer_epoch)
    assert await coordinator.add_offsets("tx", *producer, "g") == E.NONE
    assert await txn_commit(broker, 4, (0, 10), producer=producer) == [E.NONE]
    assert (await fetch(broker, 8, {"t": [0]}, require_stable=True))[0] == [
        ("t", 0, -1, -1, "", E.UNSTABLE_OFFSET_COMMIT)]
    assert (await coordinator.end_transaction("tx", *producer, True, tv2=False)).error == E.NONE
    assert (await fetch(broker, 8, {"t": [0]}, require_stable=True))[0] == [("t", 0, 10, -1, "", E.NONE)]
    await coordinator.stop()


@pytest.mark.parametrize("version, answer", [(3, E.INVALID_TXN_STATE), (4, E.TRANSACTION_ABORTABLE)])
async def test_tv1_commit_without_add_offsets_is_refused(broker, version, answer):
    coordinator = await real_transactions(broker)
    init = await coordinator.init_producer_id("tx", 60_000, None)
    assert await txn_commit(broker, version, (0, 10), producer=(init.producer_id, init.producer_epoch)) == [answer]
    assert offsets_records(broker) == []
    await coordinator.stop()


async def test_tv2_commit_joins_the_transaction_and_an_abort_drops_it(broker):
    coordinator = await real_transactions(broker)
    init = await coordinator.init_producer_id("tx", 60_000, None)
    producer = (init.producer_id, init.producer_epoch)
    assert await txn_commit(broker, 5, (0, 10), producer=producer) == [E.NONE]  # no AddOffsetsToTxn with TV2
    assert (GROUP_METADATA_TOPIC, partition_for_group("g", 50)) in coordinator.describe("tx").partitions
    assert (await coordinator.end_transaction("tx", *producer, False, tv2=True)).error == E.NONE
    assert (await fetch(broker, 8, {"t": [0]}, require_stable=True))[0] == [("t", 0, -1, -1, "", E.NONE)]
    await coordinator.stop()
