"""@platformatic/kafka 1.35.0 (platformatic_client.py), the flows it does not share with the other clients' tests.

The row joins the shared tests of tags "each" (metadata, topic listing, committed offsets), "member_commit" (a group
resuming from its committed offsets after a broker restart) and "idempotent" (clients/catalog.py). It cannot join
"client": on node 20 it has no zstd (below), and that tag's produce, consume and recompression tests all use zstd.
Nor "transactional": its second producer of a transactional id is refused (below), which the fencing test needs to
succeed. Nor "member" (below), whose tests check that after a rebalance no member is handed records of a partition
it does not own. So produce, consume, list offsets, restart and transactions are covered here, each test running
its variants in one node process (loading the library costs about a second of CPU), and so are its Admin client
(topics, configs, the groups' view), static membership and KIP-848's consumer group protocol (the broker's
assignor, an incremental rebalance, a leave). Not covered: TLS, SASL and ACLs, which the library has.

Left out, each verified by trying (where a test below meets one, it asserts it, so that a change shows):
- zstd, produced or consumed: 1.35.0 uses node:zlib's zstd, which node 20 lacks (UnsupportedCompressionError).
- snappy written in xerial framing (Kafka's Java client, kafka-python, aiokafka): 1.35.0's WebAssembly snappy
  reads raw snappy only and fails ("RuntimeError: unreachable"); 2.0.0 reads xerial (platformatic/kafka#283).
  Raw snappy (librdkafka's) it reads, and it writes raw snappy, which every client reads.
- After an eager rebalance a member can still be handed records of a partition it gave up: its stream pushes the
  answer of a Fetch sent before the rebalance without checking the new assignment (messages-stream.js #pushRecords),
  where Kafka's Java client drops what it fetched for revoked partitions. In test_groups.py's membership tests that
  showed in 3 of 3 runs on a loaded machine ("a read b'pair-p2-0' of partition 2, owning [1, 3, 5]").
- Closing a static member sends LeaveGroup (without its group.instance.id), so the group rebalances, where Kafka's
  Java client sends none; a static member that crashes and comes back within its session rejoins without one.
- A second producer of a transactional id cannot fence the first: the library's InitProducerId carries producer id 0
  and epoch 0 where Kafka's clients send -1 and -1, and Kafka reads that as "I am producer 0", answering
  PRODUCER_FENCED (TransactionCoordinator.handleInitProducerId) while another producer holds the id. Still so in
  2.9.0 (src/clients/producer/producer.ts: `options.producerId ?? this[kOptions].producerId ?? 0n`).
"""
from __future__ import annotations

import dataclasses
import random
import uuid

import pytest

from . import clients
from . import test_consume
from . import test_transactions as txn  # its script helpers: spread(), transaction(), high_watermarks()...
from .broker_process import BrokerProcess
from .checks import assert_stored_as, read_exactly
from .clients.base import TxnStep
from .clients.node_program import consumed as to_consumed
from .clients.node_program import record_json, step_json
from .clients.platformatic_client import PlatformaticError
from .consumer_protocol import CONSUMER_PROTOCOL_SETTINGS, PARTITIONS, SESSION_TIMEOUT_MS
from .groups import Members, each_read_its_own, received_all, split_among
from .records import (
    CODEC_IDS,
    ONE_MIB,
    Record,
    assert_same,
    java_partition,
    now_ms,
    numbered,
    record_shapes,
)

pytestmark = pytest.mark.matrix(client="platformatic-kafka")
TEN = range(10)  # partitions of partitioned_broker's topics


@pytest.fixture
def platformatic():
    return clients.load_or_fail("platformatic-kafka")


def on(partition: int, records: list[Record]) -> list[Record]:
    return [dataclasses.replace(r, partition=partition) for r in records]


def produce_step(topic: str, records: list[Record], **options) -> dict:
    return {"op": "produce", "topic": topic, "acks": options.get("acks", -1), "codec": options.get("codec", "none"),
            "records": [record_json(r) for r in records]}


def consume_step(topic: str, count: int, start: dict | None = None, partitions=(0,)) -> dict:
    return {"op": "consume", "topic": topic, "count": count, "partitions": list(partitions),
            "start": start or {"type": "earliest"}, "timeout_ms": 60_000, "fetch_wait_ms": None}


def failure(answer) -> str:
    """The messages of a step that had to fail (see the module docstring), for matching."""
    assert isinstance(answer, PlatformaticError), f"expected a failure, got {str(answer)[:200]}"
    return " | ".join([answer.detail["message"], *answer.detail.get("causes", [])])


def consumed(answer) -> list:
    """The records of a consume (or read_to_end) step's answer."""
    if isinstance(answer, Exception):
        raise answer
    return [to_consumed(r) for r in answer["records"]]


# --- produce ---------------------------------------------------------------------------------------------------------

@pytest.mark.matrix(flow="produce")
def test_produce_every_shape_acks_codec_and_partition(platformatic, reference, partitioned_broker, topic):
    """One node process produces to topics of ten partitions: every record shape (headers with a repeated name and a
    null value, explicit timestamps) to partition 3, each acks, each codec it has, keyed records (murmur2 through its
    compatibilityPartitioner), a 1 MiB record, and twenty producers at once."""
    broker = partitioned_broker
    before = now_ms()
    shapes = on(3, record_shapes(before - 60_000, null_header=True))
    plain = on(0, numbered(30, "acks"))
    compressible = on(0, numbered(200, "codec", size=200))
    keyed = numbered(200, "keyed", key_every=20)
    big = on(0, [Record(b"big", random.Random(1).randbytes(ONE_MIB)), Record(b"after", b"small")])
    batches = [on(0, numbered(10, f"producer{i}")) for i in range(20)]
    steps = {"shapes": produce_step(f"{topic}.shapes", shapes),
             **{f"acks{a}": produce_step(f"{topic}.acks{a}", plain, acks=a) for a in (0, 1, -1)},
             **{c: produce_step(f"{topic}.{c}", compressible, codec=c) for c in ("gzip", "snappy", "lz4", "zstd")},
             "keyed": produce_step(f"{topic}.keyed", keyed),
             "big": produce_step(f"{topic}.big", big),
             "twenty": {"op": "produce_many", "topic": f"{topic}.twenty", "acks": -1, "codec": "none",
                        "batches": [[record_json(r) for r in batch] for batch in batches]}}
    answers = dict(zip(steps, platformatic.batch(broker.bootstrap, *steps.values(), concurrent=True)))
    after = now_ms()

    assert "zstd is not supported in the current Node.js version" in failure(answers.pop("zstd"))
    for name, answer in answers.items():
        assert not isinstance(answer, Exception), f"{name}: {answer}"
    assert answers["shapes"]["bases"] == [[3, 0]]
    assert_same(shapes, read_exactly(reference, broker, f"{topic}.shapes", len(shapes), partitions=[3]))
    assert_stored_as(broker, f"{topic}.shapes", len(shapes), codec=CODEC_IDS["none"], partitions=[3])
    for acks in (0, 1, -1):
        assert answers[f"acks{acks}"]["bases"] == ([] if acks == 0 else [[0, 0]]), f"acks={acks}"
        got = read_exactly(reference, broker, f"{topic}.acks{acks}", len(plain))
        assert_same(plain, got, stamped_between=(before, after))
    for codec in ("gzip", "snappy", "lz4"):
        assert_same(compressible, read_exactly(reference, broker, f"{topic}.{codec}", len(compressible)))
        assert_stored_as(broker, f"{topic}.{codec}", len(compressible), codec=CODEC_IDS[codec])
    got = read_exactly(reference, broker, f"{topic}.keyed", len(keyed), partitions=TEN)
    assert {r.partition for r in got} == {java_partition(k, 10) for k in {r.key for r in keyed}}
    for record in got:
        assert record.partition == java_partition(record.key, 10), f"{record.short()} not in murmur2's partition"
    for key in {r.key for r in keyed}:
        assert [r.value for r in got if r.key == key] == [r.value for r in keyed if r.key == key], f"order of {key}"
    assert_same(big, read_exactly(reference, broker, f"{topic}.big", len(big)))
    got = read_exactly(reference, broker, f"{topic}.twenty", 200)
    for i, batch in enumerate(batches):
        assert [r.value for r in got if r.value.startswith(f"producer{i}-".encode())] == [r.value for r in batch]


# --- consume -----------------------------------------------------------------------------------------------------

def _timed(base: int) -> list[Record]:
    return [Record(f"k{i}".encode(), f"v{i}".encode(), (), base + 1000 * i, partition=0) for i in range(10)]


@pytest.mark.matrix(flow="consume")
def test_consume_every_shape_codec_and_starting_point(platformatic, reference, partitioned_broker, topic):
    """kafka-python and librdkafka (null header values, raw snappy) write; one node process reads every shape, each
    codec, ten partitions, a 1 MiB record, from an offset and from a timestamp, and lists offsets (earliest, latest,
    by time)."""
    broker = partitioned_broker
    base = now_ms() - 60_000
    shapes = on(0, record_shapes(base, null_header=True))
    compressible = on(0, numbered(200, "codec", size=200))
    keyed = numbered(200, "keyed", key_every=20)
    big = on(0, [Record(b"big", random.Random(2).randbytes(ONE_MIB)), Record(b"after", b"small")])
    librdkafka = clients.load_or_fail("confluent-kafka")  # writes null header values, and raw snappy
    librdkafka.produce(broker.bootstrap, f"{topic}.shapes", shapes)
    librdkafka.produce(broker.bootstrap, f"{topic}.snappy", compressible, compression="snappy")
    for codec in ("gzip", "lz4", "zstd"):
        reference.produce(broker.bootstrap, f"{topic}.{codec}", compressible, compression=codec)
    reference.produce(broker.bootstrap, f"{topic}.xerial", compressible, compression="snappy")
    placed = reference.produce(broker.bootstrap, f"{topic}.keyed", keyed)
    reference.produce(broker.bootstrap, f"{topic}.big", big)
    reference.produce(broker.bootstrap, f"{topic}.timed", _timed(base))
    steps = {"shapes": consume_step(f"{topic}.shapes", len(shapes)),
             **{c: consume_step(f"{topic}.{c}", len(compressible))
                for c in ("gzip", "snappy", "lz4", "zstd", "xerial")},
             "keyed": consume_step(f"{topic}.keyed", len(keyed), partitions=TEN),
             "big": consume_step(f"{topic}.big", len(big)),
             "offset": consume_step(f"{topic}.timed", 3, {"type": "offset", "value": 7}),
             "timestamp": consume_step(f"{topic}.timed", 5, {"type": "timestamp", "value": base + 4500}),
             **{f"offsets{i}": {"op": "list_offsets", "topic": f"{topic}.timed", "partition": 0, "timestamp": at}
                for i, at in enumerate((base + 3000, base + 3001, base + 60_000))}}
    answers = dict(zip(steps, platformatic.batch(broker.bootstrap, *steps.values(), concurrent=True)))

    assert "zstd is not supported in the current Node.js version" in failure(answers["zstd"])
    assert "RuntimeError: unreachable" in failure(answers["xerial"]), "xerial-framed snappy (see the docstring)"
    assert_same(shapes, consumed(answers["shapes"]))
    for codec in ("gzip", "snappy", "lz4"):
        assert_same(compressible, consumed(answers[codec]))
    got = consumed(answers["keyed"])
    assert {(r.partition, r.offset): r.value for r in got} == {place: r.value for place, r in zip(placed, keyed)}
    assert_same(big, consumed(answers["big"]))
    assert [r.value for r in consumed(answers["offset"])] == [b"v7", b"v8", b"v9"]
    from_time = consumed(answers["timestamp"])
    assert [(r.offset, r.timestamp) for r in from_time] == [(i, base + 1000 * i) for i in range(5, 10)]
    offsets = [answers[f"offsets{i}"] for i in range(3)]
    assert [(o["earliest"], o["latest"]) for o in offsets] == [(0, 10)] * 3
    assert [o["at"] for o in offsets] == [3, 4, -1], "past the newest record Kafka answers -1"


@pytest.mark.matrix(flow="consume")
def test_consume_from_latest(platformatic, reference, broker, topic):
    """A stream starting at the latest offset sees only records produced after it positioned itself."""
    test_consume.test_start_at_latest(platformatic, reference, broker, topic)


# --- restart -------------------------------------------------------------------------------------------------------

@pytest.mark.matrix(flow="restart")
def test_restart_between_produce_and_consume(platformatic, reference, fresh_broker, topic):
    sent = record_shapes(now_ms() - 60_000, null_header=True) + numbered(100, "before-restart")
    platformatic.produce(fresh_broker.bootstrap, topic, on(0, sent), acks=-1)
    fresh_broker.restart()  # SIGTERM, then the same data directory and port
    assert_same(sent, read_exactly(reference, fresh_broker, topic, len(sent)))
    assert_same(sent, platformatic.consume(fresh_broker.bootstrap, topic, len(sent)))


# --- admin ---------------------------------------------------------------------------------------------------------

@pytest.mark.matrix(flow="admin_topics")
def test_admin_creates_grows_lists_and_deletes_topics(platformatic, reference, broker, topic):
    made, other = f"{topic}.made", f"{topic}.other"
    answers = platformatic.admin(
        broker.bootstrap,
        {"call": "create_topics", "topics": [made, other], "partitions": 3},
        {"call": "create_topics", "topics": [made], "partitions": 3},
        {"call": "create_partitions", "topics": [[made, 5]]},
        {"call": "create_partitions", "topics": [[made, 4]]},
        {"call": "partitions", "topics": [made, other]},
        {"call": "list_topics"},
        {"call": "delete_topics", "topics": [other]},
        {"call": "delete_topics", "topics": [other]})
    created, again, grown, shrunk, partitions, listed, deleted, unknown = answers
    assert sorted(t["name"] for t in created) == sorted([made, other])
    assert all(t["partitions"] == 3 and t["replicas"] == 1 and t["id"] for t in created), created
    assert isinstance(again, PlatformaticError) and "TOPIC_ALREADY_EXISTS" in again.api_ids, again
    assert grown is None
    assert isinstance(shrunk, PlatformaticError) and "INVALID_PARTITIONS" in shrunk.api_ids, shrunk
    assert partitions == {made: 5, other: 3}
    assert {made, other} <= set(listed)
    assert deleted is None
    assert isinstance(unknown, PlatformaticError) and "UNKNOWN_TOPIC_OR_PARTITION" in unknown.api_ids, unknown
    assert reference.partitions_for(broker.bootstrap, made) == set(range(5))
    assert other not in platformatic.list_topics(broker.bootstrap)


@pytest.mark.matrix(flow="admin_configs")
def test_admin_describes_and_alters_configs(platformatic, broker, topic):
    keys = ["retention.ms", "cleanup.policy"]
    describe = {"call": "describe_configs", "type": "topic", "name": topic, "keys": keys}
    answers = platformatic.admin(
        broker.bootstrap,
        {"call": "create_topics", "topics": [topic], "partitions": 1,
         "configs": [{"name": "retention.ms", "value": "3600000"}]},
        describe,
        {"call": "alter_configs", "type": "topic", "name": topic, "set": {"cleanup.policy": "compact"},
         "delete": ["retention.ms"]},
        describe,
        {"call": "alter_configs", "type": "topic", "name": topic, "set": {"cleanup.policy": "bogus"}},
        {"call": "describe_configs", "type": "broker", "name": "1", "keys": ["num.partitions"]})
    created, first, altered, second, invalid, broker_side = answers
    assert not isinstance(created, Exception), created
    first, second = ({e["name"]: e for e in answer} for answer in (first, second))
    # ConfigSource: 1 DYNAMIC_TOPIC_CONFIG, 5 DEFAULT_CONFIG
    assert (first["retention.ms"]["value"], first["retention.ms"]["source"]) == ("3600000", 1)
    assert (first["cleanup.policy"]["value"], first["cleanup.policy"]["source"]) == ("delete", 5)
    assert altered is None
    assert (second["cleanup.policy"]["value"], second["cleanup.policy"]["source"]) == ("compact", 1)
    assert (second["retention.ms"]["value"], second["retention.ms"]["source"]) == ("604800000", 5)
    assert isinstance(invalid, PlatformaticError) and "INVALID_CONFIG" in invalid.api_ids, invalid
    [num_partitions] = broker_side
    assert (num_partitions["name"], num_partitions["value"], num_partitions["readOnly"]) == ("num.partitions", "1",
                                                                                             True)


# --- groups --------------------------------------------------------------------------------------------------------

@pytest.fixture
def members(tmp_path):
    started = Members(tmp_path)
    yield started
    started.stop_all()


@pytest.mark.matrix(flow="groups")
def test_admin_lists_and_describes_groups_and_their_offsets(platformatic, reference, partitioned_broker, members,
                                                            topic):
    """The Admin client's view of a Stable group (two kafka-python members, which commit) and of an Empty one (a
    platformatic group consumer that committed and left), then deleting the Empty one."""
    bootstrap = partitioned_broker.bootstrap
    sent = [Record(None, f"g-p{p}-{i}".encode(), partition=p) for i in range(3) for p in TEN]
    reference.produce(bootstrap, topic, sent)
    busy, idle, unknown = f"busy.{topic}", f"idle.{topic}", f"never.{uuid.uuid4().hex[:6]}"
    pair = [members.start(reference, bootstrap, topic, busy, name) for name in ("busy-a", "busy-b")]
    members.wait_until(lambda: split_among(pair, TEN), "two members share the busy group's partitions")
    members.wait_until(lambda: each_read_its_own(pair, {(r.partition, r.value.decode()) for r in sent}),
                       "each member reads its partitions")
    assert {p: o for member in pair for p, o in member.commit().items()} == {p: 3 for p in TEN}
    everything = {f"{topic}:{p}": 3 for p in TEN}

    answers = platformatic.batch(
        bootstrap,
        {"op": "group_consume", "topic": topic, "group": idle, "count": len(sent), "timeout_ms": 60_000},
        {"op": "admin", "calls": [
            {"call": "list_groups"}, {"call": "list_groups", "states": ["EMPTY"]},
            {"call": "describe_groups", "groups": [busy, idle]},
            {"call": "group_offsets", "group": busy}, {"call": "group_offsets", "group": idle},
            {"call": "group_offsets", "group": unknown},
            {"call": "delete_groups", "groups": [idle]}, {"call": "list_groups"}]})
    assert len(consumed(answers[0])) == len(sent)
    listed, empty, described, busy_offsets, idle_offsets, none, deleted, after = (
        a.get("result", a.get("error")) for a in answers[1]["results"])
    listed = {g["id"]: g for g in listed}
    assert (listed[busy]["state"], listed[busy]["protocolType"]) == ("Stable", "consumer"), listed.get(busy)
    assert (listed[idle]["state"], listed[idle]["protocolType"]) == ("Empty", "consumer"), listed.get(idle)
    assert idle in {g["id"] for g in empty} and busy not in {g["id"] for g in empty}
    described = {g["id"]: g for g in described}
    assert (described[busy]["state"], described[busy]["protocol"]) == ("Stable", "range")
    by_client = {m["clientId"]: m for m in described[busy]["members"]}
    assert set(by_client) == {m.client_id for m in pair}
    for member in pair:
        seen = by_client[member.client_id]
        assert {p for _, p in seen["assignment"]} == set(member.assignment)
        assert seen["memberId"] and seen["host"] and seen["instanceId"] is None
    assert (described[idle]["state"], described[idle]["members"]) == ("Empty", [])
    assert busy_offsets == everything and idle_offsets == everything and none == {}
    assert deleted is None and idle not in {g["id"] for g in after} and busy in {g["id"] for g in after}


@pytest.mark.matrix(flow="groups")
def test_static_member_that_crashed_rejoins_without_a_rebalance(platformatic, reference, partitioned_broker,
                                                                members, topic):
    """A static member (groupInstanceId) killed and restarted within its session gets its partitions back, and the
    other member sees no rebalance (closing one cleanly would: see the module docstring)."""
    bootstrap = partitioned_broker.bootstrap
    assert reference.partitions_for(bootstrap, topic) == set(TEN)
    start = lambda name: members.start(platformatic, bootstrap, topic, f"group.{topic}", name,  # noqa: E731
                                       instance_id=f"instance-{name}", session_timeout_ms=30_000,
                                       rebalance_timeout_ms=30_000)
    first, second = start("a"), start("b")
    members.wait_until(lambda: split_among([first, second], TEN), "two static members share the partitions")
    owned, seen = second.assignment, len(first.events)
    second.kill()
    back = start("b")
    members.wait_until(lambda: back.assignment, "the restarted member is assigned again")
    assert back.assignment == owned
    first.ping()
    assert first.of_type("assigned", "revoked", "lost", since=seen) == [], "the other member went through a rebalance"
    sent = [Record(None, f"static-p{p}".encode(), partition=p) for p in TEN]
    reference.produce(bootstrap, topic, sent)
    members.wait_until(lambda: received_all([first, back], {(r.partition, r.value.decode()) for r in sent}),
                       "both read the new records")


# --- transactions --------------------------------------------------------------------------------------------------

@pytest.mark.matrix(flow="transactions")
def test_transactions_commit_abort_and_a_second_producer(platformatic, reference, partitioned_broker, topic):
    """One node process: a transactional producer commits one transaction and aborts another across three
    partitions; a second producer of the same transactional id is refused with PRODUCER_FENCED (the library's
    InitProducerId, see the module docstring); read_committed streams get the committed records and move past the
    aborted ones and both markers, read_uncommitted ones get both transactions' records."""
    broker, txn_id = partitioned_broker, f"txn-{topic}"
    assert reference.partitions_for(broker.bootstrap, topic) == set(TEN)  # a transaction's send creates no topic
    committed, aborted = txn.spread("committed"), txn.spread("aborted")
    steps = [TxnStep("a", "init", transactional_id=txn_id), *txn.transaction("a", committed, True),
             *txn.transaction("a", aborted, False), TxnStep("b", "init", transactional_id=txn_id)]
    per_partition = txn.PER_TRANSACTION // txn.PARTITIONS
    ends = {p: 2 * per_partition + 2 for p in range(txn.PARTITIONS)}  # records plus two markers per partition
    script, read_committed, read_uncommitted = platformatic.batch(
        broker.bootstrap,
        {"op": "txn_script", "topic": topic, "steps": [step_json(step) for step in steps]},
        *({"op": "read_to_end", "topic": topic, "until": ends, "read_uncommitted": uncommitted, "timeout_ms": 60_000}
          for uncommitted in (False, True)))

    assert script["outcomes"] == ["ok"] * (len(steps) - 1) + ["error:PRODUCER_FENCED"], script
    assert txn.high_watermarks(reference, broker, topic) == ends
    assert txn.marker_offsets(broker, topic) == {p: [per_partition, 2 * per_partition + 1]
                                                 for p in range(txn.PARTITIONS)}
    got = consumed(read_committed)
    assert txn.values_by_partition(got) == {p: txn.in_partition(committed, p) for p in range(txn.PARTITIONS)}
    assert {int(p): o for p, o in read_committed["positions"].items()} == ends
    got = consumed(read_uncommitted)
    assert txn.values_by_partition(got) == {p: txn.in_partition(committed, p) + txn.in_partition(aborted, p)
                                            for p in range(txn.PARTITIONS)}


# --- KIP-848 -------------------------------------------------------------------------------------------------------

@pytest.mark.matrix(flow="groups_consumer_protocol")
def test_consumer_protocol_members_split_and_take_over(platformatic, reference, tmp_path, members, topic):
    """groupProtocol 'consumer' (ConsumerGroupHeartbeat, the broker's default assignor): a second member takes half
    of the first one's partitions, which gives up only those; each reads its own; when the second leaves (a heartbeat
    with epoch -1) the first gets them back without waiting for a session timeout."""
    with BrokerProcess(tmp_path / "data", CONSUMER_PROTOCOL_SETTINGS) as broker:
        assert reference.partitions_for(broker.bootstrap, topic) == set(PARTITIONS)
        start = lambda name: members.start(platformatic, broker.bootstrap, topic, f"group.{topic}", name,  # noqa: E731
                                           group_protocol="consumer")
        first = start("a")
        members.wait_until(lambda: first.assignment == PARTITIONS, "the first member owns every partition")
        second = start("b")
        shares = members.wait_until(lambda: split_among([first, second], PARTITIONS), "two members share")
        assert sorted(len(parts) for parts in shares.values()) == [3, 3]
        assert [e["partitions"] for e in first.of_type("revoked")] == [sorted(second.assignment)], "incremental"
        sent = [Record(None, f"kip848-p{p}".encode(), partition=p) for p in sorted(PARTITIONS)]
        reference.produce(broker.bootstrap, topic, sent)
        members.wait_until(lambda: each_read_its_own([first, second], {(r.partition, r.value.decode()) for r in sent}),
                           "each reads its partitions")
        second.close()  # bounded below the broker's session: a takeover after it would not prove the leave
        members.wait_until(lambda: first.assignment == PARTITIONS, "the first member takes the leaver's partitions",
                           timeout_s=SESSION_TIMEOUT_MS / 1000 - 1)
