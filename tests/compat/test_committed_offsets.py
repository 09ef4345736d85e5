"""Committed offsets with each client's group consumer: it reads part of a topic in a group and commits what it read,
the client reads the committed offsets back (committed(), OffsetFetch), and a second session of the group resumes
exactly there: no record read twice, none skipped.

Each session subscribes (JoinGroup, SyncGroup), reads, commits synchronously and leaves (the adapters'
`group_consume`); sarama marks the records and commits when its session ends, kcat commits what it printed when it
exits after -c records. kcat cannot read committed offsets back: for it they are read with kafka-python, as for every
client as a second opinion.
"""
from __future__ import annotations

import pytest

from .broker_process import BrokerProcess
from .clients.base import next_offsets
from .records import MAX_MESSAGE_BYTES, Record

PARTITIONS = (0, 1, 2)
PER_PARTITION = 10
FIRST_READ = 12  # of the 30: the first session stops part-way, wherever its client's fetches leave it


@pytest.fixture(scope="module")
def offsets_broker(tmp_path_factory):
    """Three partitions per topic, and no delay before the first rebalance of a group (Kafka's default waits 3 s)."""
    settings = {"message.max.bytes": str(MAX_MESSAGE_BYTES), "num.partitions": str(len(PARTITIONS)),
                "group.initial.rebalance.delay.ms": "0"}
    with BrokerProcess(tmp_path_factory.mktemp("offsets") / "data", settings) as running:
        yield running


def positions(records) -> set[tuple[int, int]]:
    return {(r.partition, r.offset) for r in records}


def assert_committed(client, reference, broker, group: str, topic: str, expected: dict[int, int]) -> None:
    """The group's committed offsets are `expected` (partitions absent: none committed), through the client when it
    can read them and through kafka-python."""
    if client.reads_committed:
        assert client.committed(broker.bootstrap, group, topic, PARTITIONS) == {p: expected.get(p)
                                                                                for p in PARTITIONS}
    assert reference.group_offsets(broker.bootstrap, group) == {(topic, p): o for p, o in expected.items()}


def test_commit_read_back_and_resume(each_client, reference, offsets_broker, topic):
    broker, group = offsets_broker, f"group.{topic}"
    sent = [Record(None, f"p{p}-{i}".encode(), partition=p) for i in range(PER_PARTITION) for p in PARTITIONS]
    reference.produce(broker.bootstrap, topic, sent)
    everything = {(p, o) for p in PARTITIONS for o in range(PER_PARTITION)}
    assert_committed(each_client, reference, broker, group, topic, {})

    first = each_client.group_consume(broker.bootstrap, topic, group, FIRST_READ)
    assert len(positions(first)) == FIRST_READ, "a record was read twice"
    for partition in PARTITIONS:  # without committed offsets, each partition is read from its first record
        read = sorted(o for p, o in positions(first) if p == partition)
        assert read == list(range(len(read))), f"partition {partition}: offsets {read}"
    assert_committed(each_client, reference, broker, group, topic, next_offsets(first))

    rest = each_client.group_consume(broker.bootstrap, topic, group, len(sent) - FIRST_READ)
    assert not positions(first) & positions(rest), "the second session read committed records again"
    assert positions(first) | positions(rest) == everything
    assert {(r.partition, r.value) for r in first + rest} == {(r.partition, r.value) for r in sent}
    assert_committed(each_client, reference, broker, group, topic, {p: PER_PARTITION for p in PARTITIONS})
