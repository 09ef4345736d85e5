"""Coordinators in a cluster of three in-process nodes: FindCoordinator answers the leader of the key's partition
(creating the internal topic with its replication factor), other nodes answer NOT_COORDINATOR, coordinators move
with the leadership of their partition (replayed from the new leader's replica, dropped by the old one), their
writes wait for the in-sync replicas, markers go to each partition's leader, and producer ids are unique across
the nodes."""
from __future__ import annotations

import asyncio
import contextlib
import threading

from compatbroker.config import Endpoint
from compatbroker.coordinator import loader
from compatbroker.coordinator.offsets import CommittedOffset, OffsetWriteError, partition_for_group
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import FindCoordinatorRequest, InitProducerIdRequest
from compatbroker.topic_names import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC
from tests.async_tests import async_test
from tests.cluster.helpers import started_cluster
from tests.cluster.test_replication import in_sync, until
from tests.coordinator.membership_support import describe, finished, form_group, heartbeat, join_task
from tests.coordinator.transactions_support import begin, markers
from tests.handlers.helpers import call

PORT_BASE = 9100  # node i "listens" on PORT_BASE + i (no sockets: only what endpoint_of reports)
E = ErrorCode


@contextlib.asynccontextmanager
async def coordinated_cluster(tmp_path, **properties):
    """Three started nodes, each with its (pretend) listener and its coordinators loaded."""
    async with started_cluster(tmp_path / "data", nodes=3, **properties) as cluster:
        for node_id, node in cluster.nodes.items():
            node.register_listener(Endpoint("PLAINTEXT", "127.0.0.1", 0), PORT_BASE + node_id)
        for node in cluster.nodes.values():
            await node.coordinator.start()
            await node.transactions.start()
        yield cluster


def endpoint(asked: int, node_id: int) -> tuple[str, int]:
    """Where node `asked` says node `node_id` is: itself where the request came in (the test context's listener),
    the others on their listeners."""
    return ("localhost", 9092) if asked == node_id else ("127.0.0.1", PORT_BASE + node_id)


async def find(node, key_type: int, *keys: str):
    answer = await call(node, 4, FindCoordinatorRequest(key_type=key_type, coordinator_keys=list(keys)))
    return [(c.error_code, c.node_id, c.host, c.port) for c in answer.decoded.coordinators]


def leader_of(cluster, topic: str, partition: int) -> int:
    return cluster.metadata.partition(topic, partition).leader


def group_leader(cluster, group_id: str) -> int:
    return leader_of(cluster, GROUP_METADATA_TOPIC, partition_for_group(group_id, 50))


def txn_leader(cluster, transactional_id: str) -> int:
    return leader_of(cluster, TRANSACTION_STATE_TOPIC, partition_for_group(transactional_id, 50))


def another(cluster, node_id: int) -> int:
    return next(other for other in cluster.nodes if other != node_id)


async def init_pid(node, transactional_id: str | None):
    return (await call(node, 4, InitProducerIdRequest(transactional_id=transactional_id,
                                                      transaction_timeout_ms=60_000))).decoded


async def move_when_in_sync(cluster, topic: str, partition: int, to: int) -> None:
    """Move the partition's leadership once every member of its ISR has all the leader has."""
    state = cluster.metadata.partition(topic, partition)
    await until(lambda: all(in_sync(cluster, node_id, topic, partition) for node_id in state.isr),
                f"the ISR of {topic}-{partition} in sync")
    cluster.move_leader(topic, partition, to)


# --- finding the coordinator ------------------------------------------------------------------------------------

@async_test
async def test_find_coordinator_creates_the_internal_topics_and_answers_the_leader(tmp_path):
    async with coordinated_cluster(tmp_path) as cluster:
        groups = [f"group-{i}" for i in range(6)]
        found = await find(cluster.nodes[0], 0, *groups)
        assert {len(state.replicas) for state in cluster.metadata.partitions(GROUP_METADATA_TOPIC)} == {3}
        assert found == [(E.NONE, group_leader(cluster, g), *endpoint(0, group_leader(cluster, g))) for g in groups]
        assert len({node_id for _, node_id, _, _ in found}) > 1  # the groups are spread over the nodes
        [(error, node_id, _, _)] = await find(cluster.nodes[1], 1, "tx")
        assert (error, node_id) == (E.NONE, txn_leader(cluster, "tx"))
        states = cluster.metadata.partitions(TRANSACTION_STATE_TOPIC)
        assert {len(state.replicas) for state in states} == {3}
        config = cluster.nodes[0].get_log(TRANSACTION_STATE_TOPIC, states[0].partition).config
        assert config.min_insync_replicas == 2  # transaction.state.log.min.isr


@async_test
async def test_the_replication_factor_of_an_internal_topic_is_at_most_the_live_nodes(tmp_path):
    async with coordinated_cluster(tmp_path) as cluster:
        cluster.stop_node(2)
        await find(cluster.nodes[0], 0, "g")
        assert {len(state.replicas) for state in cluster.metadata.partitions(GROUP_METADATA_TOPIC)} == {2}


@async_test
async def test_a_key_whose_partition_has_no_leader_answers_coordinator_not_available(tmp_path):
    async with coordinated_cluster(tmp_path, **{"offsets.topic.replication.factor": "1"}) as cluster:
        await find(cluster.nodes[0], 0, "g")
        leader = group_leader(cluster, "g")
        cluster.stop_node(leader)
        answer = await find(cluster.nodes[another(cluster, leader)], 0, "g")
        assert answer == [(E.COORDINATOR_NOT_AVAILABLE, -1, "", -1)]


# --- requests to the wrong node --------------------------------------------------------------------------------

@async_test
async def test_group_and_transaction_requests_to_another_node_answer_not_coordinator(tmp_path):
    async with coordinated_cluster(tmp_path) as cluster:
        await find(cluster.nodes[0], 0, "g")
        await find(cluster.nodes[0], 1, "tx")
        other = cluster.nodes[another(cluster, group_leader(cluster, "g"))]
        answer = await finished(join_task(other, "g"))
        assert answer.error_code == E.NOT_COORDINATOR
        assert await heartbeat(other, "g", "m", 1) == E.NOT_COORDINATOR
        [described] = await describe(other, "g")
        assert described.error_code == E.NOT_COORDINATOR
        with_offsets = other.coordinator.offsets
        try:
            await with_offsets.commit("g", [CommittedOffset("t", 0, 5)])
        except OffsetWriteError as exc:
            assert exc.error_code == E.NOT_COORDINATOR
        else:
            raise AssertionError("a node that does not lead the group's partition stored its offsets")
        assert (await init_pid(cluster.nodes[another(cluster, txn_leader(cluster, "tx"))], "tx")).error_code == \
            E.NOT_COORDINATOR
        assert (await init_pid(cluster.nodes[txn_leader(cluster, "tx")], "tx")).error_code == E.NONE


# --- coordinators move with leadership ------------------------------------------------------------------------

@async_test
async def test_a_group_moves_with_the_leadership_of_its_partition(tmp_path):
    async with coordinated_cluster(tmp_path) as cluster:
        await find(cluster.nodes[0], 0, "g")
        partition = partition_for_group("g", 50)
        old = cluster.nodes[group_leader(cluster, "g")]
        leader, follower = await form_group(old, "g", 2)
        await old.coordinator.offsets.commit("g", [CommittedOffset("t", 0, 42)])
        parked = join_task(old, "g", leader.member_id)  # a rejoin: parked until the follower rejoins too
        new_id = another(cluster, old.node_id)
        await move_when_in_sync(cluster, GROUP_METADATA_TOPIC, partition, new_id)

        assert (await finished(parked)).error_code == E.NOT_COORDINATOR
        assert await heartbeat(old, "g", follower.member_id, leader.generation_id) == E.NOT_COORDINATOR
        assert "g" not in old.coordinator.membership.groups and old.coordinator.offsets.fetch("g") == {}
        new = cluster.nodes[new_id]
        await until(lambda: new.coordinator.error_for("g") is E.NONE, "the new coordinator loaded the group")
        assert new.coordinator.offsets.fetch("g")[("t", 0)].offset == 42
        [described] = await describe(new, "g")
        assert (described.error_code, described.group_state, len(described.members)) == (E.NONE, "Stable", 2)
        assert await find(cluster.nodes[0], 0, "g") == [(E.NONE, new_id, *endpoint(0, new_id))]


@async_test
async def test_a_partition_being_loaded_answers_load_in_progress_for_its_groups_only(tmp_path, monkeypatch):
    async with coordinated_cluster(tmp_path) as cluster:
        await find(cluster.nodes[0], 0, "g")
        partition = partition_for_group("g", 50)
        old = cluster.nodes[group_leader(cluster, "g")]
        await old.coordinator.offsets.commit("g", [CommittedOffset("t", 0, 7)])
        new = cluster.nodes[another(cluster, old.node_id)]
        elsewhere = next(f"h{i}" for i in range(1000) if group_leader(cluster, f"h{i}") == new.node_id)
        replaying, release = threading.Event(), threading.Event()
        original = loader.replay_partition

        def held_replay(*args):
            replaying.set()
            release.wait(20)
            original(*args)

        monkeypatch.setattr(loader, "replay_partition", held_replay)
        await move_when_in_sync(cluster, GROUP_METADATA_TOPIC, partition, new.node_id)
        assert await asyncio.to_thread(replaying.wait, 20)
        try:
            assert new.coordinator.error_for("g") is E.COORDINATOR_LOAD_IN_PROGRESS
            assert new.coordinator.error_for(elsewhere) is E.NONE
            assert (await finished(join_task(new, "g"))).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
            assert await heartbeat(new, "g", "m", 1) == E.NONE  # Kafka: members keep their session meanwhile
        finally:
            release.set()
        await until(lambda: new.coordinator.error_for("g") is E.NONE, "the partition loaded")
        assert new.coordinator.offsets.fetch("g")[("t", 0)].offset == 7


@async_test
async def test_a_partition_that_cannot_be_loaded_is_not_coordinated(tmp_path, monkeypatch, caplog):
    async with coordinated_cluster(tmp_path) as cluster:
        await find(cluster.nodes[0], 0, "g")
        old = cluster.nodes[group_leader(cluster, "g")]
        await old.coordinator.offsets.commit("g", [CommittedOffset("t", 0, 7)])
        new = cluster.nodes[another(cluster, old.node_id)]

        def failing_replay(*args):
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(loader, "replay_partition", failing_replay)
        await move_when_in_sync(cluster, GROUP_METADATA_TOPIC, partition_for_group("g", 50), new.node_id)
        await until(lambda: not new.coordinator.offsets.is_loading(), "the load ended")
        assert new.coordinator.error_for("g") is E.NOT_COORDINATOR
        assert [r.getMessage() for r in caplog.records if "failed" in r.getMessage()] == \
            [f"loading {GROUP_METADATA_TOPIC}-{partition_for_group('g', 50)} failed: [Errno 5] Input/output error"]


@async_test
async def test_a_transactional_id_moves_with_the_leadership_of_its_partition(tmp_path):
    async with coordinated_cluster(tmp_path) as cluster:
        await find(cluster.nodes[0], 1, "tx")
        old = cluster.nodes[txn_leader(cluster, "tx")]
        first = await init_pid(old, "tx")
        assert first.error_code == E.NONE
        new_id = another(cluster, old.node_id)
        await move_when_in_sync(cluster, TRANSACTION_STATE_TOPIC, partition_for_group("tx", 50), new_id)
        assert (await init_pid(old, "tx")).error_code == E.NOT_COORDINATOR
        assert old.transactions.describe("tx") is None
        new = cluster.nodes[new_id]
        await until(lambda: new.transactions.error_for("tx") is E.NONE, "the new coordinator loaded the id")
        again = await init_pid(new, "tx")
        assert (again.error_code, again.producer_id, again.producer_epoch) == \
            (E.NONE, first.producer_id, first.producer_epoch + 1)


@async_test
async def test_a_prepared_transaction_is_completed_by_the_next_coordinator(tmp_path):
    async with coordinated_cluster(tmp_path) as cluster:
        await find(cluster.nodes[0], 1, "tx")
        old = cluster.nodes[txn_leader(cluster, "tx")]
        new_id = another(cluster, old.node_id)
        data_id = next(node_id for node_id in cluster.nodes if node_id not in (old.node_id, new_id))
        cluster.nodes[0].create_topic("t", 1, assignment={0: [data_id]})
        producer_id, epoch = await begin(old.transactions, "tx", [("t", 0)])
        cluster.stop_node(data_id)  # t-0 goes offline: its marker waits
        ended = await old.transactions.end_transaction("tx", producer_id, epoch, True, tv2=False)
        assert ended.error == E.NONE and old.transactions.describe("tx").state == "PrepareCommit"

        await move_when_in_sync(cluster, TRANSACTION_STATE_TOPIC, partition_for_group("tx", 50), new_id)
        new = cluster.nodes[new_id]
        await until(lambda: new.transactions.error_for("tx") is E.NONE, "the new coordinator loaded the id")
        assert new.transactions.describe("tx").state == "PrepareCommit"
        cluster.start_node(data_id)
        await until(lambda: new.transactions.describe("tx").state == "CompleteCommit", "the commit completed")
        coordinator_epoch = cluster.metadata.partition(TRANSACTION_STATE_TOPIC, partition_for_group("tx", 50)) \
            .leader_epoch
        assert coordinator_epoch > 0
        assert markers(cluster.nodes[data_id], "t", 0) == [(producer_id, epoch, "COMMIT", coordinator_epoch)]
        assert old.transactions.describe("tx") is None


# --- writes and markers ---------------------------------------------------------------------------------------

@async_test
async def test_markers_go_to_each_partitions_leader(tmp_path):
    async with coordinated_cluster(tmp_path) as cluster:
        await find(cluster.nodes[0], 1, "tx")
        cluster.nodes[0].create_topic("t", 3, assignment={p: [p, (p + 1) % 3, (p + 2) % 3] for p in range(3)})
        coordinator = cluster.nodes[txn_leader(cluster, "tx")].transactions
        producer_id, epoch = await begin(coordinator, "tx", [("t", 0), ("t", 1), ("t", 2)])
        ended = await coordinator.end_transaction("tx", producer_id, epoch, False, tv2=False)
        assert ended.error == E.NONE and coordinator.describe("tx").state == "CompleteAbort"
        for partition in range(3):
            assert markers(cluster.nodes[partition], "t", partition) == [(producer_id, epoch, "ABORT", 0)]


@async_test
async def test_verification_asked_of_a_partition_leader_goes_to_the_coordinator_node(tmp_path):
    async with coordinated_cluster(tmp_path) as cluster:
        await find(cluster.nodes[0], 1, "tx")
        cluster.nodes[0].create_topic("t", 1, replication_factor=3)
        coordinator_node = cluster.nodes[txn_leader(cluster, "tx")]
        init = await init_pid(coordinator_node, "tx")
        other = cluster.nodes[another(cluster, coordinator_node.node_id)]
        verdict = await other.transactions.verify_for_append("tx", init.producer_id, init.producer_epoch, "t", 0,
                                                             tv2=True)
        assert verdict == E.NONE
        assert coordinator_node.transactions.describe("tx").partitions == [("t", 0)]


@async_test
async def test_an_offset_commit_the_replicas_do_not_confirm_answers_coordinator_not_available(tmp_path):
    async with coordinated_cluster(tmp_path, **{"offsets.commit.timeout.ms": "100"}) as cluster:
        await find(cluster.nodes[0], 0, "g")
        leader = cluster.nodes[group_leader(cluster, "g")]
        store = leader.coordinator.offsets
        await store.commit("g", [CommittedOffset("t", 0, 1)])
        follower = another(cluster, leader.node_id)
        cluster.replication.delay_follower(follower, 60_000)  # in the ISR still (lag time 30 s), but not copying
        try:
            await store.commit("g", [CommittedOffset("t", 0, 2)])
        except OffsetWriteError as exc:
            assert exc.error_code == E.COORDINATOR_NOT_AVAILABLE  # REQUEST_TIMED_OUT, as Kafka maps it
        else:
            raise AssertionError("a commit the ISR did not have was acknowledged")
        assert store.fetch("g")[("t", 0)].offset == 1
        cluster.replication.delay_follower(follower, 0)


@async_test
async def test_a_transaction_log_below_its_min_isr_answers_coordinator_not_available(tmp_path):
    async with coordinated_cluster(tmp_path) as cluster:
        await find(cluster.nodes[0], 1, "tx")
        leader = txn_leader(cluster, "tx")
        for node_id in cluster.nodes:
            if node_id != leader:
                cluster.stop_node(node_id)
        assert (await init_pid(cluster.nodes[leader], "tx")).error_code == E.COORDINATOR_NOT_AVAILABLE


# --- producer ids ---------------------------------------------------------------------------------------------

@async_test
async def test_producer_ids_are_unique_across_the_nodes(tmp_path):
    async with coordinated_cluster(tmp_path) as cluster:
        handed = [(await init_pid(node, None)).producer_id for node in cluster.nodes.values() for _ in range(3)]
        assert len(set(handed)) == len(handed)
        assert cluster.controller.producer_id_blocks.path == str(tmp_path / "data" / "producer-id-block")
