"""DescribeShareGroupOffsets (90, v0-1), AlterShareGroupOffsets (91, v0) and DeleteShareGroupOffsets (92, v0) on
the wire, against the node's real share-partition state (compatbroker.share): Kafka 4.2's answers for each error,
the authorization each API makes, v1's lag, DeleteGroups of a share group taking its state with it, and a cluster
where the coordinator and the node keeping a partition's share state differ."""
from __future__ import annotations

import asyncio
import uuid

import pytest

from compatbroker.coordinator import coordinator_of
from compatbroker.coordinator.offsets import CommittedOffset, partition_for_group
from compatbroker.handlers import HANDLERS, build_registry
from compatbroker.protocol import RequestHeader, encode_request
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import FindCoordinatorRequest
from compatbroker.security.acls import AclOperation, ResourceType
from compatbroker.share import share_partitions_of
from compatbroker.topic_names import GROUP_METADATA_TOPIC

from tests.server.helpers import RawClient, running_server

from .authz_helpers import AUTHORIZER_ON, allow
from .cluster_helpers import create_topic, serving_cluster, until
from .helpers import batch, call
from .share_group_helpers import (GROUP, Alter, Delete, Describe, alter_offsets, coordinated, delete_offsets,
                                  describe_groups, describe_offsets, heartbeat, start_offsets)
from .txn_helpers import produce

ZERO = uuid.UUID(int=0)
E = ErrorCode


async def empty_group(broker, *topics):
    """The share group with state initialized for `topics` (a member joined and left)."""
    await heartbeat(broker, "a", 0, list(topics))
    await heartbeat(broker, "a", -1)


async def ready(broker, **topics):
    broker = await coordinated(broker)
    for name, partitions in topics.items():
        broker.create_topic(name, partitions)
    return broker


def test_versions():
    assert [(HANDLERS[key].MIN_VERSION, HANDLERS[key].MAX_VERSION) for key in (90, 91, 92)] == [(0, 1), (0, 0), (0, 0)]


@pytest.mark.parametrize("request_body, served, unserved", [
    (Describe(groups=[Describe.DescribeShareGroupOffsetsRequestGroup(group_id=GROUP, topics=[])]), 1, 2),
    (Alter(group_id=GROUP, topics=[]), 0, 1),
    (Delete(group_id=GROUP, topics=[]), 0, 1)], ids=["describe", "alter", "delete"])
async def test_a_version_beyond_the_served_ones_closes_the_connection(tmp_path, request_body, served, unserved):
    registry = build_registry(["api_versions", "describe_share_group_offsets", "alter_share_group_offsets",
                               "delete_share_group_offsets"])
    async with running_server(tmp_path, registry) as (server, port):
        await coordinated(server.broker)
        client = await RawClient.connect(port)
        await client.send(request_body, version=served, correlation_id=1)
        header, _ = await client.read_response(request_body.API_KEY, served)
        assert header.correlation_id == 1
        frame = bytearray(encode_request(RequestHeader(request_api_key=request_body.API_KEY,
                                                       request_api_version=served, correlation_id=2,
                                                       client_id="beyond"), request_body))
        frame[2:4] = unserved.to_bytes(2, "big")
        await client.send_frame(bytes(frame))
        assert await client.closed_by_server()
        await client.close()


async def test_while_the_coordinator_loads(broker):
    broker.create_topic("t", 1)
    assert (await describe_offsets(broker)).error_code == E.COORDINATOR_LOAD_IN_PROGRESS  # starts the load
    assert (await alter_offsets(broker, {"t": {0: 1}})).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert (await delete_offsets(broker, "t")).error_code == E.COORDINATOR_LOAD_IN_PROGRESS


# --- DescribeShareGroupOffsets ------------------------------------------------------------------------------------

async def test_describe_all_partitions_the_group_initialized(broker):
    broker = await ready(broker, t=2, other=1)
    assert (await describe_offsets(broker)).topics == []                 # no such group: nothing, no error
    await empty_group(broker, "t")
    answer = await describe_offsets(broker)
    assert (answer.error_code, [(t.topic_name, t.topic_id) for t in answer.topics]) == \
        (E.NONE, [("t", broker.topic("t").topic_id)])
    assert start_offsets(answer) == {("t", 0): (-1, E.NONE), ("t", 1): (-1, E.NONE)}   # no state read yet


async def test_describe_named_topics(broker):
    broker = await ready(broker, t=2)
    await empty_group(broker, "t")
    await alter_offsets(broker, {"t": {1: 0}})
    answer = await describe_offsets(broker, {"t": [0, 1, 9], "gone": [0]})
    assert [(t.topic_name, t.topic_id) for t in answer.topics] == [("gone", ZERO), ("t", broker.topic("t").topic_id)]
    assert start_offsets(answer) == {("gone", 0): (-1, E.NONE), ("t", 0): (-1, E.NONE), ("t", 1): (0, E.NONE),
                                     ("t", 9): (-1, E.NONE)}
    assert (await describe_offsets(broker, {})).topics == []


async def test_lag_from_version_1(broker):
    broker = await ready(broker, t=1)
    await empty_group(broker, "t")
    assert (await produce(broker, None, "t", 0, batch(b"1", b"2", b"3", b"4", b"5"))).error_code == E.NONE
    assert (await alter_offsets(broker, {"t": {0: 2}})).error_code == E.NONE
    (v1,) = (await describe_offsets(broker, {"t": [0]})).topics[0].partitions
    assert (v1.start_offset, v1.lag) == (2, 3)
    (v0,) = (await describe_offsets(broker, {"t": [0]}, version=0)).topics[0].partitions
    assert (v0.start_offset, v0.lag) == (2, -1)                          # not on the wire before v1


async def test_describe_authorization(broker_factory):
    broker = await ready(broker_factory(**AUTHORIZER_ON), t=1, secret=1)
    await empty_group(broker, "t", "secret")
    assert (await describe_offsets(broker, as_alice=True)).error_code == E.GROUP_AUTHORIZATION_FAILED
    allow(broker, AclOperation.DESCRIBE, ResourceType.GROUP, GROUP)
    allow(broker, AclOperation.DESCRIBE, ResourceType.TOPIC, "t")
    everything = await describe_offsets(broker, as_alice=True)
    assert [t.topic_name for t in everything.topics] == ["t"]            # "secret" silently left out
    named = await describe_offsets(broker, {"secret": [0], "t": [0]}, as_alice=True)
    assert [(t.topic_name, t.topic_id) for t in named.topics] == [("t", broker.topic("t").topic_id), ("secret", ZERO)]
    assert start_offsets(named)[("secret", 0)] == (-1, E.TOPIC_AUTHORIZATION_FAILED)


# --- AlterShareGroupOffsets ---------------------------------------------------------------------------------------

async def test_alter_sets_start_offsets_of_an_empty_group(broker):
    broker = await ready(broker, t=2)
    await empty_group(broker, "t")
    answer = await alter_offsets(broker, {"t": {0: 4, 5: 1}, "gone": {0: 1}})
    assert answer.error_code == E.NONE
    assert [(t.topic_name, t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions])
            for t in answer.responses] == [("gone", ZERO, [(0, E.UNKNOWN_TOPIC_OR_PARTITION)]),
                                           ("t", broker.topic("t").topic_id,
                                            [(0, E.NONE), (5, E.UNKNOWN_TOPIC_OR_PARTITION)])]
    assert start_offsets(await describe_offsets(broker, {"t": [0]})) == {("t", 0): (4, E.NONE)}


async def test_alter_initializes_a_topic_the_group_never_read(broker):
    broker = await ready(broker, t=1, u=1)
    await empty_group(broker, "t")
    assert (await alter_offsets(broker, {"u": {0: 0}})).error_code == E.NONE
    assert sorted(t.topic_name for t in (await describe_offsets(broker)).topics) == ["t", "u"]


async def test_alter_group_errors(broker):
    broker = await ready(broker, t=1)
    await coordinator_of(broker).offsets.commit("classic", [CommittedOffset("t", 0, 1)])
    assert _top(await alter_offsets(broker, {"t": {0: 1}}, group="")) == (E.INVALID_GROUP_ID, [])
    assert _top(await alter_offsets(broker, {"t": {0: 1}})) == (E.GROUP_ID_NOT_FOUND, [])
    assert (await alter_offsets(broker, {"t": {0: 1}})).error_message == f"Group {GROUP} not found."
    classic = await alter_offsets(broker, {"t": {0: 1}}, group="classic")
    assert (classic.error_code, classic.error_message) == (E.GROUP_ID_NOT_FOUND, "Group classic is not a share group.")
    await heartbeat(broker, "a", 0, ["t"])
    assert _top(await alter_offsets(broker, {"t": {0: 1}})) == (E.NON_EMPTY_GROUP, [])


async def test_alter_authorization(broker_factory):
    broker = await ready(broker_factory(**AUTHORIZER_ON), t=1, secret=1)
    await empty_group(broker, "t")
    assert _top(await alter_offsets(broker, {"t": {0: 1}}, as_alice=True)) == (E.GROUP_AUTHORIZATION_FAILED, [])
    allow(broker, AclOperation.READ, ResourceType.GROUP, GROUP)
    allow(broker, AclOperation.READ, ResourceType.TOPIC, "t")
    answer = await alter_offsets(broker, {"secret": {0: 1}, "t": {0: 1}}, as_alice=True)
    assert [(t.topic_name, t.topic_id, [p.error_code for p in t.partitions]) for t in answer.responses] == [
        ("secret", broker.topic("secret").topic_id, [E.TOPIC_AUTHORIZATION_FAILED]),
        ("t", broker.topic("t").topic_id, [E.NONE])]


# --- DeleteShareGroupOffsets --------------------------------------------------------------------------------------

async def test_delete_removes_the_state_of_whole_topics(broker):
    broker = await ready(broker, t=2, u=1)
    await empty_group(broker, "t")
    await alter_offsets(broker, {"t": {0: 3}})
    answer = await delete_offsets(broker, "t", "u", "gone")
    assert answer.error_code == E.NONE
    assert [(t.topic_name, t.error_code, t.error_message) for t in answer.responses] == [
        ("t", E.NONE, None),
        ("u", E.UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete."),
        ("gone", E.UNKNOWN_TOPIC_OR_PARTITION, E.UNKNOWN_TOPIC_OR_PARTITION.message)]
    assert (await describe_offsets(broker)).topics == []
    assert start_offsets(await describe_offsets(broker, {"t": [0]})) == {("t", 0): (-1, E.NONE)}
    group = coordinator_of(broker).share_groups.describe(GROUP)
    assert (group.initialized_topics, group.deleting_topics) == ({}, {})


async def test_delete_for_a_group_without_state_answers_no_topics(broker):
    broker = await ready(broker, t=1)
    await heartbeat(broker, "a", 0, ["missing"])
    await heartbeat(broker, "a", -1)
    answer = await delete_offsets(broker, "t")
    assert (answer.error_code, answer.responses) == (E.NONE, [])


async def test_delete_group_errors(broker):
    broker = await ready(broker, t=1)
    await coordinator_of(broker).offsets.commit("classic", [CommittedOffset("t", 0, 1)])
    assert _delete_error(await delete_offsets(broker, "t", group="")) == (E.INVALID_GROUP_ID, [])
    assert _delete_error(await delete_offsets(broker, "t")) == (E.GROUP_ID_NOT_FOUND, [])
    classic = await delete_offsets(broker, "t", group="classic")
    assert (classic.error_code, classic.error_message) == (E.GROUP_ID_NOT_FOUND, "Group classic is not a share group.")
    await heartbeat(broker, "a", 0, ["t"])
    assert _delete_error(await delete_offsets(broker, "t")) == (E.NON_EMPTY_GROUP, [])


async def test_delete_authorization(broker_factory):
    broker = await ready(broker_factory(**AUTHORIZER_ON), t=1, secret=1)
    await empty_group(broker, "t", "secret")
    allow(broker, AclOperation.READ, ResourceType.GROUP, GROUP)
    assert _delete_error(await delete_offsets(broker, "t", as_alice=True)) == (E.GROUP_AUTHORIZATION_FAILED, [])
    allow(broker, AclOperation.DELETE, ResourceType.GROUP, GROUP)
    allow(broker, AclOperation.READ, ResourceType.TOPIC, "t")
    answer = await delete_offsets(broker, "secret", "t", as_alice=True)
    assert [(t.topic_name, t.error_code) for t in answer.responses] == [("secret", E.TOPIC_AUTHORIZATION_FAILED),
                                                                       ("t", E.NONE)]


async def test_deleting_the_group_deletes_its_share_state(broker):
    broker = await ready(broker, t=1)
    await empty_group(broker, "t")
    await alter_offsets(broker, {"t": {0: 3}})
    assert await coordinator_of(broker).delete_group(GROUP) == E.NONE
    for _ in range(2_000):   # the state goes in the background: wait for it, generously
        if start_offsets(await describe_offsets(broker, {"t": [0]}))[("t", 0)][0] == -1:
            break
        await asyncio.sleep(0.005)
    assert start_offsets(await describe_offsets(broker, {"t": [0]})) == {("t", 0): (-1, E.NONE)}
    assert (await heartbeat(broker, "a", 1)).error_code == E.GROUP_ID_NOT_FOUND


def _top(answer):
    return answer.error_code, answer.responses


def _delete_error(answer):
    return answer.error_code, answer.responses


# --- a cluster --------------------------------------------------------------------------------------------------

async def test_in_a_cluster_the_coordinator_serves_the_group_and_the_partition_leader_keeps_the_state(tmp_path):
    async with serving_cluster(tmp_path) as cluster:
        for node in cluster.nodes.values():
            await node.coordinator.start()
        await call(cluster.nodes[0], 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[GROUP]))
        leader = cluster.metadata.partition(GROUP_METADATA_TOPIC, partition_for_group(GROUP, 50)).leader
        coordinator = cluster.nodes[leader]
        await until(lambda: coordinator.coordinator.error_for(GROUP) == E.NONE, "the group's coordinator loaded")
        state_id = (leader + 1) % 3
        create_topic(cluster, "t", replicas=(state_id, (leader + 2) % 3))
        elsewhere = cluster.nodes[state_id]
        assert (await heartbeat(elsewhere, "a", 0, ["t"])).error_code == E.NOT_COORDINATOR
        assert [g.error_code for g in await describe_groups(elsewhere, GROUP)] == [E.NOT_COORDINATOR]
        assert (await describe_offsets(elsewhere)).error_code == E.NOT_COORDINATOR
        assert (await alter_offsets(elsewhere, {"t": {0: 1}})).error_code == E.NOT_COORDINATOR
        assert (await delete_offsets(elsewhere, "t")).error_code == E.NOT_COORDINATOR
        await empty_group(coordinator, "t")
        assert (await alter_offsets(coordinator, {"t": {0: 7}})).error_code == E.NONE
        assert start_offsets(await describe_offsets(coordinator)) == {("t", 0): (7, E.NONE)}
        topic_id = coordinator.topic("t").topic_id
        held = await share_partitions_of(cluster.nodes[state_id]).read_offsets(GROUP, topic_id, [0])
        assert held[0][0] == 7
        assert [t.error_code for t in (await delete_offsets(coordinator, "t")).responses] == [E.NONE]
        assert start_offsets(await describe_offsets(coordinator, {"t": [0]})) == {("t", 0): (-1, E.NONE)}
