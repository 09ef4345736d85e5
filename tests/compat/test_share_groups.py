"""confluent-kafka share consumers (KIP-932, "queues for Kafka"): consumers of one share group split the records of
one partition, each record going to one of them; acknowledgements (ACCEPT, RELEASE, REJECT) decide what is delivered
again; a consumer killed while holding records loses them to the others when its connection drops, one that stalls
(SIGSTOP, connection kept) when their acquisition locks run out, until the delivery count limit archives them; a
broker restart keeps what was acknowledged.

Explicit acknowledgement throughout (share.acknowledgement.mode=explicit: acknowledge() each record, commit_sync()).
Every group reads from the earliest offset (the group config share.auto.offset.reset=earliest; Kafka's default,
latest, would skip what a test produced before its consumers joined). "Nothing more is delivered" is checked with a
marker record produced last: the broker hands out a partition's available records lowest offset first, so anything
still due would come before the marker. The broker's locks are short (2 s) and the delivery count limit low (3); the
group that checks exclusive delivery sets a long lock of its own, so that a slow machine cannot make a lock expire.
Only confluent-kafka has a share consumer among the matrix's clients (matrix.NOT_APPLICABLE says why).
"""
from __future__ import annotations

import time
import uuid
from collections import Counter

import pytest

from .broker_process import BrokerProcess
from .records import MAX_MESSAGE_BYTES, Record
from .share_clients import WAIT_S, Delivery, HoldingConsumer, delivery, poll, set_group_configs, share_consumer

pytestmark = pytest.mark.matrix(client="confluent-kafka")

LOCK_MS = 2000
DELIVERY_COUNT_LIMIT = 3
SHARE_SETTINGS = {
    "message.max.bytes": str(MAX_MESSAGE_BYTES), "num.partitions": "1",
    "group.share.record.lock.duration.ms": str(LOCK_MS), "group.share.min.record.lock.duration.ms": "1000",
    "group.share.delivery.count.limit": str(DELIVERY_COUNT_LIMIT),
    # a consumer's heartbeat and session: a member that joins is assigned the partition soon
    "group.share.heartbeat.interval.ms": "500", "group.share.min.heartbeat.interval.ms": "500",
    "group.share.session.timeout.ms": "6000", "group.share.min.session.timeout.ms": "6000",
}


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("share-groups") / "data", SHARE_SETTINGS) as running:
        yield running


@pytest.fixture
def group(share_broker, topic) -> str:
    """A share group of this test's own that reads from the earliest offset."""
    name = f"share.{topic}"
    set_group_configs(share_broker.bootstrap, name, {"share.auto.offset.reset": "earliest"})
    return name


@pytest.fixture
def consumers(share_broker, group, topic):
    """make(name) -> a subscribed share consumer of the test's group; all are closed at the end."""
    made = []

    def make(name: str = "c", **overrides):
        consumer = share_consumer(share_broker.bootstrap, group, **{"client.id": f"share-{name}"} | overrides)
        consumer.subscribe([topic])
        made.append(consumer)
        return consumer

    yield make
    for consumer in made:
        consumer.close()


def produce_values(reference, broker, topic, values, batches: int = 1) -> None:
    """The values to partition 0 in `batches` produce calls (so in at least that many record batches)."""
    size = -(-len(values) // batches)
    for i in range(0, len(values), size):
        reference.produce(broker.bootstrap, topic, [Record(None, v.encode(), partition=0) for v in values[i:i + size]])


def read_until(consumers, condition, what: str, decide=None) -> list[Delivery]:
    """Polls each of `consumers` ({name: consumer}) in turn until `condition(deliveries)` holds, acknowledging each
    record with `decide(delivery)` (ACCEPT by default) and committing after each poll; a poll's batch is always handled
    whole. Every consumer of the group keeps being polled: one left out may hold records its pending fetch acquired."""
    from confluent_kafka import AcknowledgeType
    got: list[Delivery] = []
    deadline = time.monotonic() + WAIT_S
    while not condition(got):
        assert time.monotonic() < deadline, f"not within {WAIT_S} s: {what}; delivered {got}"
        for name, consumer in consumers.items():
            for msg in poll(consumer, name):
                seen = delivery(name, msg)
                got.append(seen)
                consumer.acknowledge(msg, decide(seen) if decide else AcknowledgeType.ACCEPT)
            consumer.commit_sync()
    return got


def nothing_more(reference, broker, topic, consumers) -> list[Delivery]:
    """Produces a marker record and reads (accepting) until it comes: what came before it, which should be nothing."""
    marker = f"marker-{uuid.uuid4().hex[:8]}"
    produce_values(reference, broker, topic, [marker])
    got = read_until(consumers, lambda got: any(d.value == marker for d in got), "the marker record")
    return [d for d in got if d.value != marker]


def values_seen(values):
    return lambda got: {d.value for d in got} >= set(values)


# --- sharing -------------------------------------------------------------------------------------------------------

def test_three_consumers_share_a_partition_each_record_to_one(reference, share_broker, consumers, group, topic):
    set_group_configs(share_broker.bootstrap, group, {"share.record.lock.duration.ms": "30000"})
    values = [f"shared-{i}" for i in range(60)]
    produce_values(reference, share_broker, topic, values, batches=6)
    trio = {name: consumers(name, **{"max.poll.records": 10}) for name in ("a", "b", "c")}
    got = read_until(trio, values_seen(values), "every record")  # each polls in turn and accepts what it was handed
    by_offset = Counter(d.offset for d in got)
    assert [o for o, n in by_offset.items() if n > 1] == [], f"delivered more than once: {got}"
    assert sorted(by_offset) == list(range(60)) and all(d.delivery_count == 1 for d in got), got
    assert len({d.consumer for d in got}) >= 2, f"one consumer took every record: {Counter(d.consumer for d in got)}"
    later = nothing_more(reference, share_broker, topic, trio)
    assert later == [], f"accepted records delivered again: {later}"


# --- acknowledgements ----------------------------------------------------------------------------------------------

def test_rejected_record_is_not_redelivered_released_one_is(reference, share_broker, consumers, topic):
    from confluent_kafka import AcknowledgeType
    values = [f"ack-{i}" for i in range(6)]
    produce_values(reference, share_broker, topic, values)
    first_time = {0: AcknowledgeType.REJECT, 1: AcknowledgeType.RELEASE}
    alone = {"c": consumers()}
    got = read_until(alone, lambda got: values_seen(values)(got) and (1, 2) in {(d.offset, d.delivery_count)
                                                                                   for d in got},
                     "every record, and the released one again",
                     decide=lambda d: first_time.get(d.offset, AcknowledgeType.ACCEPT) if d.delivery_count == 1
                     else AcknowledgeType.ACCEPT)
    assert sorted((d.offset, d.delivery_count) for d in got) == [(0, 1), (1, 1), (1, 2), (2, 1), (3, 1), (4, 1),
                                                                 (5, 1)], got
    later = nothing_more(reference, share_broker, topic, alone)
    assert later == [], f"delivered again after ACCEPT or REJECT: {later}"


def test_released_record_is_archived_at_the_delivery_count_limit(reference, share_broker, consumers, topic):
    from confluent_kafka import AcknowledgeType
    produce_values(reference, share_broker, topic, ["released-again-and-again"])
    alone = {"c": consumers()}
    got = read_until(alone, lambda got: any(d.delivery_count >= DELIVERY_COUNT_LIMIT for d in got),
                     "the record's last delivery", decide=lambda d: AcknowledgeType.RELEASE)
    assert [(d.offset, d.delivery_count) for d in got] == [(0, n) for n in range(1, DELIVERY_COUNT_LIMIT + 1)], got
    later = nothing_more(reference, share_broker, topic, alone)
    assert later == [], f"released past the delivery count limit, yet delivered again: {later}"


# --- a consumer that dies holding records -------------------------------------------------------------------------

def test_killed_consumers_records_are_redelivered_until_the_delivery_count_limit(reference, share_broker, consumers,
                                                                                 group, topic, tmp_path):
    """Round after round a consumer process acquires the records and is SIGKILLed holding them: each round the next
    one is handed the same records, with the delivery count one higher (Kafka 4.2 releases a consumer's records when
    its connection drops, else its acquisition locks run out); after the limit the records are archived and nobody
    gets them again."""
    values = [f"held-{i}" for i in range(5)]
    produce_values(reference, share_broker, topic, values)
    for round_ in range(1, DELIVERY_COUNT_LIMIT + 1):
        holder = HoldingConsumer(share_broker.bootstrap, group, topic, tmp_path / f"holder-{round_}.log",
                                 f"holder-{round_}")
        try:
            held = holder.acquired()
        finally:
            holder.kill()
        assert sorted((d.offset, d.value, d.delivery_count) for d in held) == [
            (i, v, round_) for i, v in enumerate(values)], f"round {round_}: {held}"
    # The last holder's records are released or their locks run out now; a consumer polling meanwhile and after must
    # never be handed them (the broker archives them), which the marker, produced once the locks surely expired,
    # then confirms.
    alone = {"c": consumers()}
    window_ends = time.monotonic() + LOCK_MS / 1000 + 3
    during = read_until(alone, lambda got: time.monotonic() > window_ends, "the last locks' expiry")
    later = nothing_more(reference, share_broker, topic, alone)
    assert during + later == [], f"records past the delivery count limit delivered again: {during + later}"


def test_stalled_consumers_records_are_redelivered_when_the_locks_expire(reference, share_broker, consumers, group,
                                                                         topic, tmp_path):
    """A consumer process that stalls (SIGSTOP) holding records keeps its connection, so only the acquisition locks
    running out (group.share.record.lock.duration.ms) give the records to another consumer."""
    values = [f"stalled-{i}" for i in range(5)]
    produce_values(reference, share_broker, topic, values)
    holder = HoldingConsumer(share_broker.bootstrap, group, topic, tmp_path / "holder.log")
    try:
        held = holder.acquired()
        acquired_at = time.monotonic()
        holder.freeze()
        assert sorted((d.offset, d.delivery_count) for d in held) == [(i, 1) for i in range(5)], held
        got = read_until({"c": consumers()}, values_seen(values), "the stalled consumer's records")
        took = time.monotonic() - acquired_at
    finally:
        holder.kill()
    assert sorted((d.offset, d.delivery_count) for d in got) == [(i, 2) for i in range(5)], got
    # the locks were taken before the holder reported them: allow for that, not for an early release
    assert took >= LOCK_MS / 1000 - 1.0, f"redelivered {took:.1f} s after the acquisition, before the lock expired"


# --- restart -------------------------------------------------------------------------------------------------------

def test_broker_restart_keeps_acknowledged_state(reference, share_broker, group, topic):
    """Accepted records stay accepted, and released ones available, across a restart (the share-partition state
    comes back from __share_group_state)."""
    from confluent_kafka import AcknowledgeType
    values = [f"restart-{i}" for i in range(10)]
    produce_values(reference, share_broker, topic, values)
    consumer = share_consumer(share_broker.bootstrap, group)
    consumer.subscribe([topic])
    try:
        before = read_until({"c": consumer}, values_seen(values), "every record before the restart",
                            decide=lambda d: AcknowledgeType.ACCEPT if d.offset < 5 else AcknowledgeType.RELEASE)
    finally:
        consumer.close()
    assert max(d.delivery_count for d in before) < DELIVERY_COUNT_LIMIT, before

    share_broker.restart()  # SIGTERM, same data directory and port

    consumer = share_consumer(share_broker.bootstrap, group)
    consumer.subscribe([topic])
    try:
        after = read_until({"c": consumer}, values_seen(values[5:]), "the released records after the restart")
        after += nothing_more(reference, share_broker, topic, {"c": consumer})
    finally:
        consumer.close()
    assert sorted(d.offset for d in after) == list(range(5, 10)), f"after the restart: {after}"
