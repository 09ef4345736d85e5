"""Real clients in consumer groups (subscribe(), not assign()): membership, rebalances, committed offsets across a
broker restart, static membership, cooperative rebalancing, and the admin view of groups.

Each member is a process of its own (groups.py), so that one can be SIGKILLed. Topics have six partitions (the
broker's num.partitions: auto-creation is how topics are made here); the records of a test carry their partition
and a value naming them, so a test knows who must receive what.
"""
from __future__ import annotations

import time
import uuid

import pytest

from . import clients
from .clients import catalog
from .broker_process import BrokerProcess
from .groups import WAIT_S, Members, each_read_its_own, received_all, split_among
from .records import MAX_MESSAGE_BYTES, Record

PARTITIONS = frozenset(range(6))
GROUP_BROKER_SETTINGS = {"message.max.bytes": str(MAX_MESSAGE_BYTES), "num.partitions": str(len(PARTITIONS)),
                         "group.initial.rebalance.delay.ms": "0"}

# The clients of each test, by their tags in clients/catalog.py: kcat -G joins groups but takes no commit command (it
# commits by itself), so the committed-offsets test below leaves it out (test_committed_offsets.py has its commits).
MEMBERSHIP_CLIENTS = catalog.with_tag("member")
EVERY_CLIENT = catalog.with_tag("member_commit")
STATIC_CLIENTS = catalog.with_tag("static")  # kafkajs 2.2.4 has no group.instance.id
COOPERATIVE_CLIENTS = catalog.with_tag("cooperative")  # aiokafka and kafkajs rebalance eagerly only
ADMIN_CLIENTS = catalog.with_tag("group_admin")
LEAVE_SESSION_MS = 45_000


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("groups") / "data", GROUP_BROKER_SETTINGS) as running:
        yield running


@pytest.fixture
def fresh_group_broker(tmp_path):
    with BrokerProcess(tmp_path / "data", GROUP_BROKER_SETTINGS) as running:
        yield running


@pytest.fixture
def group_client(request) -> clients.ClientAdapter:
    """The client under test (parametrized indirectly); a missing client fails with its install command."""
    return clients.load_or_fail(request.param)


@pytest.fixture
def members(tmp_path):
    started = Members(tmp_path)
    yield started
    started.stop_all()


@pytest.fixture
def group(topic) -> str:
    return f"group.{topic}"


def spread(per_partition: int, prefix: str) -> list[Record]:
    """`per_partition` records for each partition, valued `<prefix>-p<partition>-<i>`."""
    return [Record(None, f"{prefix}-p{p}-{i}".encode(), partition=p)
            for i in range(per_partition) for p in sorted(PARTITIONS)]


def expected(records: list[Record]) -> set[tuple[int, str]]:
    return {(r.partition, r.value.decode()) for r in records}


def create_topic(reference, broker, topic) -> None:
    assert reference.partitions_for(broker.bootstrap, topic) == PARTITIONS


def assert_each_got_its_own(group_members, records: list[Record]) -> None:
    """Every record went to the member that owns its partition (the group being stable while they were read)."""
    for member in group_members:
        values = {v for _, _, v in member.records}
        for record in records:
            if record.value.decode() in values:
                assert record.partition in member.assignment, (
                    f"{member.name} read {record.value!r} of partition {record.partition}, "
                    f"owning {sorted(member.assignment)}")


# --- membership ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("group_client", MEMBERSHIP_CLIENTS, indirect=True)
def test_one_member_gets_every_partition(group_client, reference, group_broker, members, topic, group):
    sent = spread(10, "all")
    reference.produce(group_broker.bootstrap, topic, sent)
    alone = members.start(group_client, group_broker.bootstrap, topic, group, "alone")
    members.wait_until(lambda: alone.assignment == PARTITIONS, "the only member owns all six partitions")
    members.wait_until(lambda: received_all([alone], expected(sent)), "it reads every record")
    offsets = sorted((p, o) for p, o, _ in alone.records)
    assert offsets == [(p, o) for p in sorted(PARTITIONS) for o in range(10)], "from the earliest, each once"
    alone.close()


@pytest.mark.parametrize("group_client", MEMBERSHIP_CLIENTS, indirect=True)
def test_three_members_split_six_partitions_then_one_leaves(group_client, reference, group_broker, members,
                                                            topic, group):
    create_topic(reference, group_broker, topic)
    # A session far longer than a rebalance takes even on a loaded machine, so that a takeover quicker than the
    # session can only come from the LeaveGroup (librdkafka wants max.poll.interval.ms, the rebalance timeout, >= it).
    trio = [members.start(group_client, group_broker.bootstrap, topic, group, name,
                          session_timeout_ms=LEAVE_SESSION_MS,
                          rebalance_timeout_ms=LEAVE_SESSION_MS) for name in "abc"]
    shares = members.wait_until(lambda: split_among(trio, PARTITIONS), "three members own two partitions each")
    assert sorted(len(parts) for parts in shares.values()) == [2, 2, 2]
    first = spread(5, "trio")
    reference.produce(group_broker.bootstrap, topic, first)
    members.wait_until(lambda: received_all(trio, expected(first)), "the trio reads every record")
    assert_each_got_its_own(trio, first)

    leaver = trio[1]
    left_at = time.monotonic()
    leaver.close()  # LeaveGroup: the others rebalance now, not after the leaver's session timeout
    pair = [trio[0], trio[2]]
    shares = members.wait_until(lambda: split_among(pair, PARTITIONS), "the other two take the leaver's partitions")
    assert sorted(len(parts) for parts in shares.values()) == [3, 3]
    took = time.monotonic() - left_at
    expiry = (leaver.spec["session_timeout_ms"] - leaver.spec["heartbeat_interval_ms"]) / 1000
    assert took < expiry, f"the takeover took {took:.1f} s: the LeaveGroup was ignored and the session expired"
    second = spread(5, "pair")
    reference.produce(group_broker.bootstrap, topic, second)
    members.wait_until(lambda: received_all(pair, expected(second)), "the pair reads every new record")
    assert_each_got_its_own(pair, second)
    for member in pair:
        member.close()


@pytest.mark.parametrize("group_client", MEMBERSHIP_CLIENTS, indirect=True)
def test_killed_member_is_expelled_after_its_session_timeout(group_client, reference, group_broker, members,
                                                              topic, group):
    create_topic(reference, group_broker, topic)
    trio = [members.start(group_client, group_broker.bootstrap, topic, group, name) for name in "abc"]
    members.wait_until(lambda: split_among(trio, PARTITIONS), "three members own two partitions each")
    victim, survivors = trio[0], trio[1:]  # the first to join: most likely the group's leader
    victim.kill()
    killed_at = time.monotonic()
    session_s = victim.spec["session_timeout_ms"] / 1000
    shares = members.wait_until(lambda: split_among(survivors, PARTITIONS), "the survivors take the dead member's "
                                "partitions", timeout_s=session_s + WAIT_S)
    assert sorted(len(parts) for parts in shares.values()) == [3, 3]
    took = time.monotonic() - killed_at
    # The dead member's last heartbeat was at most one interval before the kill; Kafka expels it when its session
    # runs out, not when its connection drops.
    earliest = session_s - victim.spec["heartbeat_interval_ms"] / 1000 - 0.5
    assert took >= earliest, f"expelled {took:.1f} s after the kill, before its session timeout ({session_s} s)"
    sent = spread(5, "after-kill")
    reference.produce(group_broker.bootstrap, topic, sent)
    members.wait_until(lambda: received_all(survivors, expected(sent)), "the survivors read every new record")
    assert_each_got_its_own(survivors, sent)


# --- committed offsets ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("group_client", EVERY_CLIENT, indirect=True)
def test_resume_from_committed_offsets_after_a_broker_restart(group_client, reference, fresh_group_broker, members,
                                                              topic, group):
    broker = fresh_group_broker
    before = spread(10, "before")
    reference.produce(broker.bootstrap, topic, before)
    first = members.start(group_client, broker.bootstrap, topic, group, "first")
    members.wait_until(lambda: received_all([first], expected(before)), "the first member reads every record")
    committed = first.commit()
    assert committed == {p: 10 for p in PARTITIONS}
    first.close()

    after = spread(5, "after")
    reference.produce(broker.bootstrap, topic, after)
    broker.restart()  # SIGTERM, same data directory and port: the offsets must come back from __consumer_offsets
    assert reference.group_offsets(broker.bootstrap, group) == {(topic, p): 10 for p in PARTITIONS}

    second = members.start(group_client, broker.bootstrap, topic, group, "second")
    members.wait_until(lambda: received_all([second], expected(after)), "the second member reads the new records")
    # Within a partition records arrive in offset order, so a resume from anywhere before offset 10 would have
    # delivered old records first; one from after 10 would never have delivered all the new ones.
    got = sorted((p, o) for p, o, _ in second.records)
    assert got == [(p, o) for p in sorted(PARTITIONS) for o in range(10, 15)], "no gap, no duplicate"
    assert second.commit() == {p: 15 for p in PARTITIONS}
    second.close()


# --- rejoining without a full rebalance ---------------------------------------------------------------------------

@pytest.mark.parametrize("group_client", STATIC_CLIENTS, indirect=True)
def test_static_members_rejoin_without_a_rebalance(group_client, reference, group_broker, members, topic, group):
    """A static member (group.instance.id) that restarts within its session timeout gets its partitions back, and
    nobody else notices: no revoke, no assign. Restarted here: a follower, then the leader."""
    create_topic(reference, group_broker, topic)
    settings = {"session_timeout_ms": 15000}  # room for a restart (closing a static member sends no LeaveGroup)
    start = lambda name: members.start(group_client, group_broker.bootstrap, topic, group, name,  # noqa: E731
                                       instance_id=f"instance-{name}", **settings)
    leader = start("a")
    members.wait_until(lambda: leader.assignment == PARTITIONS, "the first static member owns everything")
    follower = start("b")
    members.wait_until(lambda: split_among([leader, follower], PARTITIONS), "two static members share")

    live = {"a": leader, "b": follower}
    for name, other_name in (("b", "a"), ("a", "b")):
        bouncing, other = live[name], live[other_name]
        owned, other_owned = bouncing.assignment, other.assignment
        other_seen = len(other.events)
        bouncing.close()
        back = live[name] = start(name)
        members.wait_until(lambda: back.assignment, f"the restarted member {name} is assigned again")
        assert back.assignment == owned, f"{name} came back with {sorted(back.assignment)}, had {sorted(owned)}"
        other.ping()  # every callback the other member ran before the restarted one got its partitions is in
        callbacks = other.of_type("assigned", "revoked", "lost", since=other_seen)
        assert callbacks == [], f"{other_name} went through a rebalance: {callbacks}"
        assert other.assignment == other_owned
    sent = spread(5, "static")
    reference.produce(group_broker.bootstrap, topic, sent)
    members.wait_until(lambda: received_all(list(live.values()), expected(sent)), "both read every new record")


@pytest.mark.parametrize("group_client", COOPERATIVE_CLIENTS, indirect=True)
def test_cooperative_sticky_moves_only_the_partitions_that_move(group_client, reference, group_broker, members,
                                                                topic, group):
    """With cooperative-sticky (KIP-429) a rebalance revokes only the partitions that change hands, and a member
    keeps consuming the rest: checked as a second member joins, a third joins, and the third leaves."""
    create_topic(reference, group_broker, topic)
    start = lambda name: members.start(group_client, group_broker.bootstrap, topic, group, name,  # noqa: E731
                                       strategy="cooperative-sticky")
    first = start("a")
    members.wait_until(lambda: first.assignment == PARTITIONS, "the first member owns everything")
    steps = [("b joins", lambda group: group + [start("b")]),
             ("c joins", lambda group: group + [start("c")]),
             ("c leaves", lambda group: _closed(group, "c"))]
    current = [first]
    for step, change in steps:
        before = {m.name: (m.assignment, len(m.events)) for m in current}
        current = change(current)
        members.wait_until(lambda: split_among(current, PARTITIONS), f"{step}: the members share the partitions")
        for member in current:
            if member.name not in before:
                continue
            owned_before, seen = before[member.name]
            owned_after = member.assignment
            revoked = {p for e in member.of_type("revoked", "lost", since=seen) for p in e["partitions"]}
            assigned = {p for e in member.of_type("assigned", since=seen) for p in e["partitions"]}
            assert owned_before & owned_after, f"{step}: {member.name} kept nothing, the check would be empty"
            assert not revoked & owned_after, f"{step}: {member.name} gave up {sorted(revoked & owned_after)} " \
                                              f"and got them back: an eager rebalance"
            assert not assigned & owned_before, f"{step}: {member.name} was handed {sorted(assigned & owned_before)} " \
                                                f"it already owned"
            assert revoked == owned_before - owned_after
    sent = spread(5, "cooperative")
    reference.produce(group_broker.bootstrap, topic, sent)
    members.wait_until(lambda: received_all(current, expected(sent)), "the members read every new record")
    assert_each_got_its_own(current, sent)


def _closed(group, name):
    leaving = next(m for m in group if m.name == name)
    leaving.close()
    return [m for m in group if m is not leaving]


# --- the admin view -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("group_client", ADMIN_CLIENTS, indirect=True)
def test_admin_lists_and_describes_groups_and_offsets(group_client, reference, group_broker, members, topic):
    bootstrap = group_broker.bootstrap
    sent = spread(10, "admin")
    reference.produce(bootstrap, topic, sent)
    busy, idle = f"busy.{topic}", f"idle.{topic}"
    pair = [members.start(group_client, bootstrap, topic, busy, name) for name in ("busy-a", "busy-b")]
    members.wait_until(lambda: split_among(pair, PARTITIONS), "two members share the busy group's partitions")
    members.wait_until(lambda: each_read_its_own(pair, expected(sent)), "each member reads its partitions")
    assert {p: o for member in pair for p, o in member.commit().items()} == {p: 10 for p in PARTITIONS}
    lone = members.start(group_client, bootstrap, topic, idle, "idle")
    members.wait_until(lambda: received_all([lone], expected(sent)), "the idle group's member reads every record")
    assert lone.commit() == {p: 10 for p in PARTITIONS}
    lone.close()  # the group stays, Empty, with its offsets

    listed = group_client.list_groups(bootstrap)
    assert busy in listed and idle in listed, sorted(listed)
    assert (listed[busy].state, listed[busy].protocol_type) == ("Stable", "consumer"), listed[busy]
    assert (listed[idle].state, listed[idle].protocol_type) == ("Empty", "consumer"), listed[idle]
    empty_ones = group_client.list_groups(bootstrap, states=["Empty"])
    assert idle in empty_ones and busy not in empty_ones

    described = group_client.describe_groups(bootstrap, [busy, idle])
    info = described[busy]
    assert (info.state, info.protocol_type, info.protocol) == ("Stable", "consumer", "range")
    by_client = {m.client_id: m for m in info.members}
    assert set(by_client) == {m.client_id for m in pair}
    for member in pair:
        seen = by_client[member.client_id]
        assert seen.assignment == {(topic, p) for p in member.assignment}
        assert seen.member_id and seen.host and seen.instance_id is None
    assert (described[idle].state, described[idle].members) == ("Empty", ())

    everything = {(topic, p): 10 for p in PARTITIONS}
    assert group_client.group_offsets(bootstrap, busy) == everything
    assert group_client.group_offsets(bootstrap, idle) == everything
    unknown = f"never.{uuid.uuid4().hex[:6]}"
    assert group_client.group_offsets(bootstrap, unknown) == {}
