"""confluent-kafka consumers with group.protocol=consumer (KIP-848): the broker assigns the partitions itself, with
its default assignor (uniform) and with group.remote.assignor=range; members join, leave, die and resubscribe by
regular expression; committed offsets survive a broker restart; a static member comes back to its partitions; the
admin client lists groups by type and deletes them.

Each member is a process of its own (groups.py), so that one can be SIGKILLed; the regular-expression flow runs its
consumer in the test. The broker's consumer-group session (6 s) and heartbeat (0.5 s) are lowered
(consumer_protocol.py). kafka-python, aiokafka, kcat, kafkajs, sarama and the Java client inside Spark have no
KIP-848 consumer (matrix.NOT_APPLICABLE says why).
"""
from __future__ import annotations

import time
import uuid

import pytest

from . import clients
from .broker_process import BrokerProcess
from .consumer_protocol import (
    CONSUMER_PROTOCOL_SETTINGS,
    HEARTBEAT_INTERVAL_MS,
    PARTITIONS,
    SESSION_TIMEOUT_MS,
    wait_for_group,
)
from .groups import WAIT_S, Members, each_read_its_own, received_all, split_among
from .records import Record
from .share_clients import set_group_configs
from .test_groups import assert_each_got_its_own, create_topic, expected, spread

pytestmark = pytest.mark.matrix(client="confluent-kafka")

# None: the broker's default assignor (the first of group.consumer.assignors: uniform)
ASSIGNORS = [pytest.param(None, id="uniform-default"), pytest.param("range", id="range")]
SERVER_ASSIGNOR = {None: "uniform", "range": "range"}
LEAVE_SESSION_MS = 45_000


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("consumer-protocol") / "data", CONSUMER_PROTOCOL_SETTINGS) as running:
        yield running


@pytest.fixture
def restartable_broker(tmp_path):
    with BrokerProcess(tmp_path / "data", CONSUMER_PROTOCOL_SETTINGS) as running:
        yield running


@pytest.fixture(scope="module")
def confluent():
    return clients.load_or_fail("confluent-kafka")


@pytest.fixture
def members(tmp_path):
    started = Members(tmp_path)
    yield started
    started.stop_all()


@pytest.fixture
def group(topic) -> str:
    return f"group.{topic}"


def start(members, confluent, broker, topic, group, name, assignor):
    return members.start(confluent, broker.bootstrap, topic, group, name, group_protocol="consumer",
                         remote_assignor=assignor)


def contiguous_blocks(shares) -> bool:
    """Whether each member owns one run of consecutive partitions (the range assignor's shape)."""
    return all(parts == frozenset(range(min(parts), max(parts) + 1)) for parts in shares.values() if parts)


# --- membership ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_one_member_gets_every_partition(assignor, confluent, reference, group_broker, members, topic, group):
    sent = spread(10, "all")
    reference.produce(group_broker.bootstrap, topic, sent)
    alone = start(members, confluent, group_broker, topic, group, "alone", assignor)
    members.wait_until(lambda: alone.assignment == PARTITIONS, "the only member owns all six partitions")
    members.wait_until(lambda: received_all([alone], expected(sent)), "it reads every record")
    offsets = sorted((p, o) for p, o, _ in alone.records)
    assert offsets == [(p, o) for p in sorted(PARTITIONS) for o in range(10)], "from the earliest, each once"
    view = wait_for_group(group_broker.bootstrap, group, lambda v: v.state == "STABLE", "the group is Stable")
    assert (view.group_type, view.assignor) == ("CONSUMER", SERVER_ASSIGNOR[assignor]), view
    assert view.assignments == {alone.client_id: frozenset((topic, p) for p in PARTITIONS)}, view
    alone.close()


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_three_members_split_six_partitions_then_one_leaves(assignor, confluent, reference, group_broker, members,
                                                            topic, group):
    create_topic(reference, group_broker, topic)
    # This group's session (a GROUP config) is far longer than a rebalance takes even on a loaded machine, so that a
    # takeover quicker than the session can only come from the leave.
    set_group_configs(group_broker.bootstrap, group, {"consumer.session.timeout.ms": str(LEAVE_SESSION_MS)})
    first = start(members, confluent, group_broker, topic, group, "a", assignor)
    members.wait_until(lambda: first.assignment == PARTITIONS, "the first member owns everything")
    seen = len(first.events)
    trio = [first] + [start(members, confluent, group_broker, topic, group, name, assignor) for name in "bc"]
    shares = members.wait_until(lambda: split_among(trio, PARTITIONS), "three members own two partitions each")
    assert sorted(len(parts) for parts in shares.values()) == [2, 2, 2]
    if assignor == "range":
        assert contiguous_blocks(shares), f"the range assignor hands out runs of partitions: {shares}"
    # Incremental reconciliation: the first member gives up only what moves, and is never handed what it kept.
    revoked = {p for e in first.of_type("revoked", "lost", since=seen) for p in e["partitions"]}
    assert revoked == PARTITIONS - first.assignment, f"revoked {sorted(revoked)}, kept {sorted(first.assignment)}"
    again = {p for e in first.of_type("assigned", since=seen) for p in e["partitions"]}  # librdkafka may call with []
    assert not again, f"the first member was handed {sorted(again)} again, which it already owned"
    view = wait_for_group(group_broker.bootstrap, group, lambda v: len(v.assignments) == 3 and v.state == "STABLE",
                          "the admin view shows three members, Stable")
    assert view.assignments == {m.client_id: frozenset((topic, p) for p in m.assignment) for m in trio}, view

    sent = spread(5, "trio")
    reference.produce(group_broker.bootstrap, topic, sent)
    members.wait_until(lambda: received_all(trio, expected(sent)), "the trio reads every record")
    assert_each_got_its_own(trio, sent)

    leaver, pair = trio[1], [trio[0], trio[2]]
    kept = {m.name: m.assignment for m in pair}
    left_at = time.monotonic()
    leaver.close()  # a heartbeat with member epoch -1: the others take over now, not after the session timeout
    shares = members.wait_until(lambda: split_among(pair, PARTITIONS), "the other two take the leaver's partitions")
    took = time.monotonic() - left_at
    assert sorted(len(parts) for parts in shares.values()) == [3, 3]
    assert took < (LEAVE_SESSION_MS - HEARTBEAT_INTERVAL_MS) / 1000, (
        f"the takeover took {took:.1f} s: the leave was ignored and the session expired")
    if assignor is None:  # the uniform assignor is sticky: the survivors only gain
        assert all(kept[m.name] <= m.assignment for m in pair), f"before {kept}, after {shares}"
    else:
        assert contiguous_blocks(shares), shares
    after = spread(5, "pair")
    reference.produce(group_broker.bootstrap, topic, after)
    members.wait_until(lambda: received_all(pair, expected(after)), "the pair reads every new record")
    assert_each_got_its_own(pair, after)
    for member in pair:
        member.close()


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_killed_member_is_expelled_after_its_session_timeout(assignor, confluent, reference, group_broker, members,
                                                              topic, group):
    create_topic(reference, group_broker, topic)
    trio = [start(members, confluent, group_broker, topic, group, name, assignor) for name in "abc"]
    members.wait_until(lambda: split_among(trio, PARTITIONS), "three members own two partitions each")
    victim, survivors = trio[0], trio[1:]
    victim.kill()
    killed_at = time.monotonic()
    session_s = SESSION_TIMEOUT_MS / 1000
    shares = members.wait_until(lambda: split_among(survivors, PARTITIONS),
                                "the survivors take the dead member's partitions", timeout_s=session_s + WAIT_S)
    took = time.monotonic() - killed_at
    assert sorted(len(parts) for parts in shares.values()) == [3, 3]
    # Its last heartbeat came at most one interval before the kill; Kafka expels it when the session runs out.
    earliest = session_s - HEARTBEAT_INTERVAL_MS / 1000 - 0.5
    assert took >= earliest, f"expelled {took:.1f} s after the kill, before its session timeout ({session_s} s)"
    sent = spread(5, "after-kill")
    reference.produce(group_broker.bootstrap, topic, sent)
    members.wait_until(lambda: received_all(survivors, expected(sent)), "the survivors read every new record")
    assert_each_got_its_own(survivors, sent)


def test_static_member_comes_back_to_its_partitions(confluent, reference, group_broker, members, topic, group):
    """A static member (group.instance.id) that closes (member epoch -2) and restarts within the session gets its own
    partitions back, and the other member goes through no change at all."""
    def start_static(name):
        return members.start(confluent, group_broker.bootstrap, topic, group, name, group_protocol="consumer",
                             instance_id=f"instance-{name}")

    create_topic(reference, group_broker, topic)
    # room for the restart: the coordinator keeps a departed static member's partitions for its session timeout
    set_group_configs(group_broker.bootstrap, group, {"consumer.session.timeout.ms": str(LEAVE_SESSION_MS)})
    pair = [start_static("a"), start_static("b")]
    members.wait_until(lambda: split_among(pair, PARTITIONS), "two static members share the partitions")
    bouncing, other = pair
    owned, other_owned, other_seen = bouncing.assignment, other.assignment, len(other.events)
    bouncing.close()
    back = start_static("a")
    members.wait_until(lambda: back.assignment, "the restarted static member is assigned again")
    assert back.assignment == owned, f"came back with {sorted(back.assignment)}, had {sorted(owned)}"
    other.ping()  # every callback the other member ran until now is in
    moved = [e for e in other.of_type("assigned", "revoked", "lost", since=other_seen) if e["partitions"]]
    assert moved == [] and other.assignment == other_owned, f"the other member rebalanced: {moved}"
    sent = spread(5, "static")
    reference.produce(group_broker.bootstrap, topic, sent)
    members.wait_until(lambda: received_all([back, other], expected(sent)), "both read every new record")
    assert_each_got_its_own([back, other], sent)


# --- subscription by regular expression ---------------------------------------------------------------------------

@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_regex_subscription_picks_up_a_topic_created_later(assignor, confluent, reference, group_broker):
    """librdkafka sends `^prefix.*` to the broker (SubscribedTopicRegex), which resolves it: a topic created after the
    member joined is assigned to it without a new subscribe()."""
    from confluent_kafka import Consumer
    prefix = f"rx{uuid.uuid4().hex[:8]}"
    early, late, other = f"{prefix}-early", f"{prefix}-late", f"not{prefix}-other"
    for name in (early, other):
        reference.produce(group_broker.bootstrap, name, [Record(None, f"{name}-{p}".encode(), partition=p)
                                                   for p in sorted(PARTITIONS)])
    config = {"bootstrap.servers": group_broker.bootstrap, "broker.address.family": "v4", "group.id": f"group.{prefix}",
              "group.protocol": "consumer", "auto.offset.reset": "earliest", "enable.auto.commit": False,
              "fetch.wait.max.ms": 200, "topic.metadata.refresh.interval.ms": 1000}
    if assignor is not None:
        config["group.remote.assignor"] = assignor
    consumer = Consumer(config)
    got: set[tuple[str, int, bytes]] = set()

    def read_until(what, condition) -> None:
        deadline = time.monotonic() + WAIT_S
        while not condition():
            assert time.monotonic() < deadline, f"not within {WAIT_S} s: {what}; read {sorted(got)}"
            for msg in consumer.consume(num_messages=100, timeout=0.2):
                assert msg.error() is None, msg.error()
                got.add((msg.topic(), msg.partition(), msg.value()))

    try:
        consumer.subscribe([f"^{prefix}.*"])
        read_until("the records of the early topic",
                   lambda: {(t, p) for t, p, _ in got} >= {(early, p) for p in PARTITIONS})
        reference.produce(group_broker.bootstrap, late, [Record(None, f"{late}-{p}".encode(), partition=p)
                                                   for p in sorted(PARTITIONS)])
        read_until("the records of the topic created later",
                   lambda: {(t, p) for t, p, _ in got} >= {(late, p) for p in PARTITIONS})
        assert {t for t, _, _ in got} == {early, late}, "read a topic the pattern does not match"
        assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
        assert assigned == {(t, p) for t in (early, late) for p in PARTITIONS}
    finally:
        consumer.close()


# --- committed offsets ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_resume_from_committed_offsets_after_a_broker_restart(assignor, confluent, reference, restartable_broker,
                                                              members, topic, group):
    """A member commits, the broker restarts under it (the group comes back from __consumer_offsets with the member
    and its assignment: it goes on without a rebalance), and a member started afterwards resumes where the group
    committed: no gap, no duplicate."""
    broker = restartable_broker
    before = spread(10, "before")
    reference.produce(broker.bootstrap, topic, before)
    first = start(members, confluent, broker, topic, group, "first", assignor)
    members.wait_until(lambda: received_all([first], expected(before)), "the first member reads every record")
    assert first.commit() == {p: 10 for p in PARTITIONS}

    seen, began = len(first.events), time.monotonic()
    broker.restart()  # SIGTERM, same data directory and port
    downtime = time.monotonic() - began
    assert reference.group_offsets(broker.bootstrap, group) == {(topic, p): 10 for p in PARTITIONS}
    during = spread(5, "during")
    reference.produce(broker.bootstrap, topic, during)
    members.wait_until(lambda: received_all([first], expected(during)), "the member goes on after the restart")
    got = sorted((p, o) for p, o, _ in first.records)
    assert got == [(p, o) for p in sorted(PARTITIONS) for o in range(15)], "no gap, no duplicate across the restart"
    if downtime < (SESSION_TIMEOUT_MS - HEARTBEAT_INTERVAL_MS) / 1000:  # else its session may rightly have expired
        moved = [e for e in first.of_type("assigned", "revoked", "lost", since=seen) if e["partitions"]]
        assert not moved, f"the restored group made its member rebalance: {moved}"
    assert first.commit() == {p: 15 for p in PARTITIONS}
    first.close()

    after = spread(5, "after")
    reference.produce(broker.bootstrap, topic, after)
    broker.restart()
    second = start(members, confluent, broker, topic, group, "second", assignor)
    members.wait_until(lambda: received_all([second], expected(after)), "the second member reads the new records")
    # Within a partition records arrive in offset order: a resume before offset 15 would have delivered old records
    # first, one after it would never have delivered all the new ones.
    got = sorted((p, o) for p, o, _ in second.records)
    assert got == [(p, o) for p in sorted(PARTITIONS) for o in range(15, 20)], "no gap, no duplicate"
    members.wait_until(lambda: each_read_its_own([second], expected(after)), "it owns what it read")
    assert second.commit() == {p: 20 for p in PARTITIONS}
    second.close()


# --- the admin view -------------------------------------------------------------------------------------------------

def test_admin_lists_and_deletes_groups_by_type(confluent, reference, group_broker, members, topic):
    """ListGroups with a type filter (v5) and the type of each listed group; DeleteGroups of an Empty consumer group
    (its offsets go with it) and of one with members (NON_EMPTY_GROUP)."""
    from confluent_kafka import ConsumerGroupType, KafkaException
    from confluent_kafka.admin import AdminClient
    bootstrap = group_broker.bootstrap
    sent = spread(2, "admin")
    reference.produce(bootstrap, topic, sent)
    busy, idle, classic = (f"{kind}.{topic}" for kind in ("busy", "idle", "classic"))
    for name, protocol in ((idle, "consumer"), (classic, "classic")):  # each commits, then leaves its group Empty
        member = members.start(confluent, bootstrap, topic, name, name, group_protocol=protocol)
        members.wait_until(lambda: received_all([member], expected(sent)), f"{name} reads every record")
        member.commit()
        member.close()
    running = start(members, confluent, group_broker, topic, busy, "busy", None)
    members.wait_until(lambda: running.assignment == PARTITIONS, "the busy group's member owns everything")

    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    listed = {g.group_id: g.type.name for g in admin.list_consumer_groups(request_timeout=15).result().valid}
    types = {g: listed.get(g) for g in (busy, idle, classic)}
    assert types == {busy: "CONSUMER", idle: "CONSUMER", classic: "CLASSIC"}, listed
    filtered = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}, request_timeout=15).result()
    consumer_groups = {g.group_id for g in filtered.valid}
    assert {busy, idle} <= consumer_groups and classic not in consumer_groups, consumer_groups

    assert reference.group_offsets(bootstrap, idle) == {(topic, p): 2 for p in PARTITIONS}
    admin.delete_consumer_groups([idle], request_timeout=15)[idle].result()
    assert reference.group_offsets(bootstrap, idle) == {}, "the deleted group's offsets are still there"
    with pytest.raises(KafkaException, match="NON_EMPTY_GROUP"):  # librdkafka's name of Kafka's error 68
        admin.delete_consumer_groups([busy], request_timeout=15)[busy].result()
    running.close()
