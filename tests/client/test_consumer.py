"""compatbroker.client.consumer: offset specs, decoding of every record format, and fetching from compatbroker
(start positions, the end of partitions, read_committed, leaders that move)."""
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer as ConfluentProducer
from kafka import KafkaProducer

from compatbroker import EmbeddedBroker
from compatbroker.client import ClientConfig, KafkaClient, KafkaError
from compatbroker.client.admin import Admin
from compatbroker.client.consumer import (READ_COMMITTED, Consumer, OffsetSpec, decode_records,
                                          parse_offset_spec)
from compatbroker.protocol.records import (Compression, ControlRecordType, build_batch, build_control_batch,
                                           build_message_set)

WAIT_S = 60


@pytest.fixture
def topic(request):
    return f"{request.node.name[:40]}-{uuid.uuid4().hex[:8]}"


def read_all(consumer, limit_s=WAIT_S):
    """Poll until every assigned partition is at its end (bounded)."""
    records, deadline = [], time.monotonic() + limit_s
    while not consumer.at_end():
        assert time.monotonic() < deadline, "the consumer never reached the end of its partitions"
        records += consumer.poll()
    return records


def kafka_python_produce(broker, topic, values, partition=0, **options):
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, **options)
    try:
        for future in [producer.send(topic, value=value, partition=partition) for value in values]:
            future.get(timeout=30)
    finally:
        producer.close(timeout=5)


# --- offset specs -------------------------------------------------------------------------------------------------

def test_offset_specs_follow_kcat():
    assert parse_offset_spec("beginning") == OffsetSpec("earliest")
    assert parse_offset_spec("end") == OffsetSpec("latest")
    assert parse_offset_spec("42") == OffsetSpec("offset", 42)
    assert parse_offset_spec("-5") == OffsetSpec("from_end", 5)
    assert parse_offset_spec("@1700000000000") == OffsetSpec("timestamp", 1700000000000)
    assert parse_offset_spec("s@17") == OffsetSpec("timestamp", 17)
    for bad in ("", "start-ish", "@", "-", "1.5", "@-3"):
        with pytest.raises(ValueError, match="not an offset"):
            parse_offset_spec(bad)


# --- decoding -----------------------------------------------------------------------------------------------------

def _values(records):
    return [(r.offset, r.value) for r in records]


@pytest.mark.parametrize("codec", list(Compression))
def test_decodes_v2_batches_of_every_codec_from_the_fetch_offset(codec):
    data = build_batch([(b"k", b"a", [("h", b"1")], 10), (None, b"b", (), 11)], base_offset=5, compression=codec) \
        + build_batch([(None, b"c", (), 12)], base_offset=7, compression=codec)
    records, next_offset = decode_records("t", 0, data, fetch_offset=6)
    assert _values(records) == [(6, b"b"), (7, b"c")] and next_offset == 8
    first, _ = decode_records("t", 0, data, fetch_offset=5)
    assert (first[0].key, first[0].headers, first[0].timestamp, first[0].timestamp_type) == (b"k", [("h", b"1")], 10, 0)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4])
def test_decodes_legacy_message_sets(magic, codec):
    data = build_message_set([(b"k", b"a", (), 1000), (None, b"b", (), 1001)], magic, codec, base_offset=3)
    records, next_offset = decode_records("t", 0, data, fetch_offset=3)
    assert _values(records) == [(3, b"a"), (4, b"b")] and next_offset == 5
    assert records[0].key == b"k"
    assert [r.timestamp_type for r in records] == ([None, None] if magic == 0 else [0, 0])


def test_a_partial_batch_at_the_end_is_left_for_the_next_fetch():
    whole = build_batch([(None, b"a", (), 1)], base_offset=0)
    cut = build_batch([(None, b"b", (), 2)], base_offset=1)[:-3]
    records, next_offset = decode_records("t", 0, whole + cut, fetch_offset=0)
    assert _values(records) == [(0, b"a")] and next_offset == 1
    assert decode_records("t", 0, b"", fetch_offset=9) == ([], 9)


def test_corrupt_data_raises_corrupt_message():
    data = bytearray(build_batch([(None, b"abc", (), 1)], base_offset=0))
    data[-1] ^= 0xFF
    negative_length = bytes(8) + (-20).to_bytes(4, "big", signed=True) + bytes(10)
    unknown_magic = bytes(8) + (20).to_bytes(4, "big") + bytes(4) + b"\x07" + bytes(19)
    for damaged in (bytes(data), negative_length, unknown_magic):
        with pytest.raises(KafkaError) as raised:
            decode_records("t", 0, damaged, fetch_offset=0)
        assert raised.value.name == "CORRUPT_MESSAGE"


def _txn_batch(pid, offset, value):
    return build_batch([(None, value, (), 1)], base_offset=offset, producer_id=pid, producer_epoch=0,
                       base_sequence=offset, is_transactional=True)


class _Aborted:
    def __init__(self, producer_id, first_offset):
        self.producer_id, self.first_offset = producer_id, first_offset


def test_read_committed_drops_aborted_transactions_and_markers():
    data = (_txn_batch(7, 0, b"aborted") + _txn_batch(8, 1, b"committed")
            + build_control_batch(ControlRecordType.ABORT, producer_id=7, producer_epoch=0, coordinator_epoch=0,
                                  timestamp=1, base_offset=2)
            + build_control_batch(ControlRecordType.COMMIT, producer_id=8, producer_epoch=0, coordinator_epoch=0,
                                  timestamp=1, base_offset=3)
            + _txn_batch(7, 4, b"later"))
    committed, next_offset = decode_records("t", 0, data, fetch_offset=0, aborted=[_Aborted(7, 0)],
                                            read_committed=True)
    assert _values(committed) == [(1, b"committed"), (4, b"later")] and next_offset == 5
    everything, _ = decode_records("t", 0, data, fetch_offset=0, aborted=[_Aborted(7, 0)])
    assert _values(everything) == [(0, b"aborted"), (1, b"committed"), (4, b"later")]


# --- fetching from compatbroker -----------------------------------------------------------------------------------

def test_start_positions_resolve_with_list_offsets(broker, client, topic):
    broker.create_topic(topic, 1)
    kafka_python_produce(broker, topic, [b"v%d" % i for i in range(10)])
    cases = {"beginning": list(range(10)), "end": [], "7": [7, 8, 9], "-3": [7, 8, 9], "-30": list(range(10)),
             "500": []}
    for text, offsets in cases.items():
        consumer = Consumer(client)
        consumer.assign([(topic, 0)], parse_offset_spec(text))
        assert [r.offset for r in read_all(consumer)] == offsets, text
    stored = broker.records(topic, 0)
    consumer = Consumer(client)
    consumer.assign([(topic, 0)], OffsetSpec("timestamp", stored[4].timestamp))
    assert read_all(consumer)[0].offset <= 4  # records of the same millisecond may come first
    consumer.assign([(topic, 0)], OffsetSpec("timestamp", stored[-1].timestamp + 60_000))
    assert consumer.positions() == {(topic, 0): 10} and read_all(consumer) == []


def test_reads_what_kafka_python_compressed(broker, client, topic):
    broker.create_topic(topic, 1)
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        kafka_python_produce(broker, topic, [codec.encode() * 30] * 3, compression_type=codec, linger_ms=50)
    consumer = Consumer(client)
    consumer.assign([(topic, 0)], OffsetSpec("earliest"))
    values = [r.value for r in read_all(consumer)]
    assert values == [codec.encode() * 30 for codec in ("gzip", "snappy", "lz4", "zstd") for _ in range(3)]


def test_positions_move_only_as_records_are_handed_out(broker, client, topic):
    broker.create_topic(topic, 1)
    kafka_python_produce(broker, topic, [b"%d" % i for i in range(20)])
    consumer = Consumer(client)
    consumer.assign([(topic, 0)], OffsetSpec("earliest"))
    got = []
    deadline = time.monotonic() + WAIT_S
    while not got:
        assert time.monotonic() < deadline
        got = consumer.poll(max_records=3)
    assert [r.offset for r in got] == [0, 1, 2] and consumer.positions() == {(topic, 0): 3}
    assert not consumer.at_end()


def test_rewind_to_takes_back_what_was_handed_out_since(broker, client, topic):
    broker.create_topic(topic, 2)
    kafka_python_produce(broker, topic, [b"%d" % i for i in range(5)], partition=1)
    consumer = Consumer(client)
    consumer.assign([(topic, 0), (topic, 1)], OffsetSpec("earliest"))
    before = consumer.positions()
    assert [r.offset for r in _poll_until(consumer, lambda got: got, "the first records")] == [0, 1, 2, 3, 4]
    consumer.rewind_to({**before, (topic, 1): 2, ("not assigned", 0): 0})
    assert consumer.positions() == {(topic, 0): 0, (topic, 1): 2}
    consumer.rewind_to(before | {(topic, 1): 4})  # only ever back: a position behind the given one stays
    assert consumer.positions() == {(topic, 0): 0, (topic, 1): 2}
    assert [r.offset for r in _poll_until(consumer, lambda got: got, "the records again")] == [2, 3, 4]


def test_offset_out_of_range_moves_by_the_reset_policy(broker, client, topic):
    broker.create_topic(topic, 1)
    kafka_python_produce(broker, topic, [b"a", b"b"])
    for reset, expected in (("earliest", [b"a", b"b"]), ("latest", [])):
        consumer = Consumer(client, reset=reset)
        consumer.assign([(topic, 0)], positions={(topic, 0): 500})  # as a group's stale committed offset
        assert [r.value for r in read_all(consumer)] == expected


def test_read_committed_skips_aborted_transactions(broker, client, topic):
    broker.create_topic(topic, 1)
    producer = ConfluentProducer({"bootstrap.servers": broker.bootstrap_servers,
                                  "transactional.id": f"txn-{topic}"})
    producer.init_transactions(30)
    for value, commit in ((b"one", True), (b"two", False), (b"three", True)):
        producer.begin_transaction()
        producer.produce(topic, value, partition=0)
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    committed = Consumer(client, isolation_level=READ_COMMITTED)
    committed.assign([(topic, 0)], OffsetSpec("earliest"))
    assert [r.value for r in read_all(committed)] == [b"one", b"three"]
    everything = Consumer(client)
    everything.assign([(topic, 0)], OffsetSpec("earliest"))
    assert [r.value for r in read_all(everything)] == [b"one", b"two", b"three"]


def test_follows_a_leader_that_moves():
    with EmbeddedBroker(nodes=2) as cluster, KafkaClient(ClientConfig(bootstrap=cluster.bootstrap_servers)) as client:
        cluster.create_topic("moving", 1, replication_factor=2)
        kafka_python_produce(cluster, "moving", [b"before"])
        consumer = Consumer(client)
        consumer.assign([("moving", 0)], OffsetSpec("earliest"))
        assert [r.value for r in read_all(consumer)] == [b"before"]
        old = cluster.leader_of("moving", 0)
        cluster.move_leader("moving", 0, 1 - old)
        kafka_python_produce(cluster, "moving", [b"after"])
        got, deadline = [], time.monotonic() + WAIT_S
        while not got:
            assert time.monotonic() < deadline, "no record from the new leader"
            got = consumer.poll()
        assert [r.value for r in got] == [b"after"] and cluster.leader_of("moving", 0) == 1 - old


def _poll_until(consumer, condition, what: str) -> list:
    """Poll until `condition(records of this poll)` holds (bounded); returns those records."""
    deadline = time.monotonic() + WAIT_S
    while True:
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        records = consumer.poll()
        if condition(records):
            return records


def test_a_topic_deleted_while_read_ends_with_unknown_topic(broker, client, topic):
    broker.create_topic(topic, 1)
    kafka_python_produce(broker, topic, [b"a"])
    consumer = Consumer(client)
    consumer.assign([(topic, 0)], OffsetSpec("earliest"))
    assert [r.value for r in read_all(consumer)] == [b"a"]
    Admin(client).delete_topics([topic])
    with pytest.raises(KafkaError) as raised:
        _poll_until(consumer, lambda records: False, "the deleted topic to be reported")
    assert raised.value.name == "UNKNOWN_TOPIC_OR_PARTITION" and "deleted" in raised.value.message


def test_a_consumer_waiting_for_topics_reads_a_deleted_topic_once_it_is_back(broker, client, topic):
    broker.create_topic(topic, 1)
    kafka_python_produce(broker, topic, [b"first life"])
    consumer = Consumer(client, wait_for_topics=True)
    consumer.assign([(topic, 0)], OffsetSpec("earliest"))
    assert [r.value for r in read_all(consumer)] == [b"first life"]
    Admin(client).delete_topics([topic])
    consumer.poll()
    broker.create_topic(topic, 1)
    kafka_python_produce(broker, topic, [b"x", b"y", b"z"])
    records = _poll_until(consumer, bool, "records of the topic created again")
    # the position is kept, as Kafka's consumers keep it: the new log is read from offset 1
    assert [(r.offset, r.value) for r in records] == [(1, b"y"), (2, b"z")]
