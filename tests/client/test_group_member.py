"""compatbroker.client.group_member: the range assignor, the embedded consumer protocol, and group membership
against compatbroker (alone, beside a second member, and beside kafka-python's consumer)."""
from __future__ import annotations

import threading
import time
import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.coordinator.assignors.range import RangePartitionAssignor

from compatbroker.client import ClientConfig, KafkaClient
from compatbroker.client.consumer_protocol import (assignment_bytes, parse_assignment, parse_subscription,
                                                  subscription_bytes)
from compatbroker.client.group_member import GroupConsumer, GroupMember, range_assign

from .helpers import wait_for as wait_until

WAIT_S = 60


@pytest.fixture
def topic(request):
    return f"{request.node.name[:40]}-{uuid.uuid4().hex[:8]}"




def produce(broker, topic, per_partition: int, partitions: int) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    try:
        futures = [producer.send(topic, value=b"%d-%d" % (p, i), partition=p)
                   for p in range(partitions) for i in range(per_partition)]
        for future in futures:
            future.get(timeout=30)
    finally:
        producer.close(timeout=5)


# --- assignor and protocol bytes ----------------------------------------------------------------------------------

def test_range_assignment_is_javas():
    # RangeAssignor's own example: two consumers, two topics of three partitions
    subscriptions = {"C0": (["t0", "t1"], None), "C1": (["t0", "t1"], None)}
    assert range_assign(subscriptions, {"t0": 3, "t1": 3}) == {
        "C0": [("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)], "C1": [("t0", 2), ("t1", 2)]}
    # static members (group.instance.id) sort first, by instance id; unknown topics are skipped
    static = {"m-a": (["t"], None), "m-b": (["t", "gone"], "i-1")}
    assert range_assign(static, {"t": 5}) == {"m-b": [("t", 0), ("t", 1), ("t", 2)], "m-a": [("t", 3), ("t", 4)]}
    assert range_assign({"x": (["t"], None), "y": (["t"], None)}, {"t": 1}) == {"x": [("t", 0)], "y": []}


def test_range_assignment_agrees_with_kafka_python():
    from types import SimpleNamespace

    cluster = SimpleNamespace(partitions_for_topic=lambda topic: set(range({"a": 7, "b": 2}[topic])))
    members = {f"member-{i}": ["a", "b"] if i % 2 else ["a"] for i in range(4)}
    theirs = RangePartitionAssignor.assign(cluster, [
        SimpleNamespace(member_id=m, group_instance_id=None, metadata=SimpleNamespace(topics=topics))
        for m, topics in members.items()])
    ours = range_assign({m: (topics, None) for m, topics in members.items()}, {"a": 7, "b": 2})
    assert len(theirs) == 4
    for member, assignment in theirs.items():
        expected = sorted((t, p) for t, parts in assignment.assigned_partitions for p in parts)
        assert ours[member] == expected


def test_subscription_and_assignment_bytes_round_trip():
    version, subscription = parse_subscription(subscription_bytes(["b", "a", "a"], [("a", 1)], generation=4))
    assert (version, subscription.topics, subscription.generation_id) == (3, ["a", "b"], 4)
    assert [(e.topic, e.partitions) for e in subscription.owned_partitions] == [("a", [1])]
    for version in range(4):
        data = assignment_bytes([("t", 2), ("s", 0), ("t", 1)], version)
        assert data[:2] == version.to_bytes(2, "big")
        assert parse_assignment(data) == [("s", 0), ("t", 1), ("t", 2)]
    assert parse_assignment(b"") == []


# --- membership against compatbroker ------------------------------------------------------------------------------

def test_consumes_commits_and_leaves(broker, client, topic):
    broker.create_topic(topic, 3)
    produce(broker, topic, 4, 3)
    group = f"g-{topic}"
    consumer = GroupConsumer(client, group, [topic])
    got, deadline = [], time.monotonic() + WAIT_S
    while not consumer.at_end():
        assert time.monotonic() < deadline
        got += consumer.poll()
    assert sorted(consumer.assignment) == [(topic, 0), (topic, 1), (topic, 2)] and len(got) == 12
    assert broker.describe_group(group)["state"] == "Stable"
    consumer.close()
    assert broker.committed_offsets(group) == {(topic, p): 4 for p in range(3)}
    assert broker.describe_group(group)["members"] == []

    produce(broker, topic, 1, 3)
    again = GroupConsumer(client, group, [topic])
    got, deadline = [], time.monotonic() + WAIT_S
    while not again.at_end():
        assert time.monotonic() < deadline
        got += again.poll()
    again.close()
    assert sorted(r.value for r in got) == [b"0-0", b"1-0", b"2-0"]  # only what came after the commit
    assert broker.committed_offsets(group) == {(topic, p): 5 for p in range(3)}


def _poll_in_thread(consumer, stop, records):
    def loop():
        while not stop.is_set():
            records.extend(consumer.poll(timeout_s=0.2))
        consumer.close()
    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


def test_two_members_split_partitions_by_range(broker, topic):
    broker.create_topic(topic, 4)
    group = f"g-{topic}"
    stop = threading.Event()
    firsts, seconds = [], []
    with KafkaClient(ClientConfig(bootstrap=broker.bootstrap_servers)) as one, \
            KafkaClient(ClientConfig(bootstrap=broker.bootstrap_servers)) as two:
        first, second = GroupConsumer(one, group, [topic]), GroupConsumer(two, group, [topic])
        threads = [_poll_in_thread(first, stop, firsts)]
        wait_until(lambda: len(first.assignment) == 4 and not first.member.needs_join, "the first member alone")
        threads.append(_poll_in_thread(second, stop, seconds))
        wait_until(lambda: len(first.assignment) == 2 and len(second.assignment) == 2, "a rebalance to 2 + 2")
        assert sorted(first.assignment + second.assignment) == [(topic, p) for p in range(4)]
        produce(broker, topic, 5, 4)
        wait_until(lambda: len(firsts) + len(seconds) == 20, "20 records between the two")
        stop.set()
        for thread in threads:
            thread.join(WAIT_S)
    assert {(r.partition) for r in firsts} == {p for _, p in first.assignment}
    assert broker.committed_offsets(group) == {(topic, p): 5 for p in range(4)}


@pytest.mark.parametrize("kafka_python_leads", [False, True])
def test_shares_a_group_with_kafka_pythons_consumer(broker, topic, kafka_python_leads):
    """Either side leads: each parses the other's subscription and assignment bytes."""
    broker.create_topic(topic, 4)
    group = f"g-{topic}"
    stop, ours = threading.Event(), []
    theirs = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                           auto_offset_reset="earliest", partition_assignment_strategy=[RangePartitionAssignor],
                           heartbeat_interval_ms=500)
    thread = None

    def poll_theirs_until(condition, what):
        deadline = time.monotonic() + WAIT_S
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            theirs.poll(timeout_ms=200)

    with KafkaClient(ClientConfig(bootstrap=broker.bootstrap_servers)) as client:
        member = GroupConsumer(client, group, [topic])
        try:
            if kafka_python_leads:
                poll_theirs_until(lambda: len(theirs.assignment()) == 4, "kafka-python alone")
            thread = _poll_in_thread(member, stop, ours)
            if not kafka_python_leads:
                wait_until(lambda: len(member.assignment) == 4, "our member alone")
            poll_theirs_until(lambda: len(theirs.assignment()) == 2 and len(member.assignment) == 2,
                              "a 2 + 2 split with kafka-python")
            assert {tp.partition for tp in theirs.assignment()} | {p for _, p in member.assignment} == {0, 1, 2, 3}
        finally:
            stop.set()
            if thread is not None:
                thread.join(WAIT_S)
            theirs.close()


def test_heartbeat_errors_make_the_member_rejoin_or_start_afresh(broker, client, topic):
    broker.create_topic(topic, 1)
    group = f"g-{topic}"
    member = GroupMember(client, group, [topic], heartbeat_interval_ms=0)
    assert member.join() == [(topic, 0)]
    joined_as, generation = member.member_id, member.generation

    broker.inject_error("Heartbeat", "REBALANCE_IN_PROGRESS")
    member.heartbeat_if_due()
    assert member.needs_join and member.member_id == joined_as
    assert member.join() == [(topic, 0)] and member.generation > generation

    broker.inject_error("Heartbeat", "ILLEGAL_GENERATION")  # the member id stays valid, as Java's client keeps it
    member.heartbeat_if_due()
    assert member.needs_join and (member.member_id, member.generation) == (joined_as, -1)
    assert member.join() == [(topic, 0)] and member.member_id == joined_as

    broker.inject_error("Heartbeat", "UNKNOWN_MEMBER_ID")
    member.heartbeat_if_due()
    assert member.needs_join and (member.member_id, member.generation) == ("", -1)
    member.member_id = joined_as  # leave under the old id, so the group does not wait out its session
    member.leave()
    assert broker.describe_group(group)["members"] == []
