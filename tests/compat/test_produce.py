"""Each client produces; the reference consumer (kafka-python) and the segment files on disk say what arrived.

Producers are plain (not idempotent); topics are created by the producers' own Metadata requests (auto-creation).
"""
from __future__ import annotations

import random

import pytest

from .checks import assert_stored_as, read_exactly
from .records import (
    CODEC_IDS,
    CODECS,
    ONE_MIB,
    Record,
    assert_same,
    java_partition,
    now_ms,
    numbered,
    shapes_for_producer,
)


def test_record_shapes(client, reference, broker, topic):
    before = now_ms()
    sent = shapes_for_producer(client, before - 60_000)
    reported = client.produce(broker.bootstrap, topic, sent)
    after = now_ms()
    got = read_exactly(reference, broker, topic, len(sent))
    assert_same(sent, got, stamped_between=(before, after))
    if reported is not None:
        assert reported == [(0, offset) for offset in range(len(sent))]
    assert_stored_as(broker, topic, len(sent), codec=CODEC_IDS["none"], idempotent=client.idempotent)


@pytest.mark.parametrize("acks", [0, 1, -1])
def test_acks(client, reference, broker, topic, acks):
    sent = numbered(30, f"acks{acks}")
    reported = client.produce(broker.bootstrap, topic, sent, acks=acks)
    # acks=0 gets no answer: the reference consumer waits (long poll) until the records are there.
    assert_same(sent, read_exactly(reference, broker, topic, len(sent)))
    if reported is not None:
        assert reported == [(0, offset) for offset in range(len(sent))]


@pytest.mark.parametrize("codec", CODECS)
def test_compression(client, reference, broker, topic, codec):
    sent = numbered(200, codec, size=200)  # compressible values, several batches
    client.produce(broker.bootstrap, topic, sent, compression=codec)
    assert_same(sent, read_exactly(reference, broker, topic, len(sent)))
    # The batches must really be compressed. librdkafka (confluent-kafka, kcat) derives "the broker supports lz4"
    # from FindCoordinator being advertised, and silently sends lz4-configured batches uncompressed otherwise.
    assert_stored_as(broker, topic, len(sent), codec=CODEC_IDS[codec], idempotent=client.idempotent)


def test_one_mib_record(client, reference, broker, topic):
    value = random.Random(1).randbytes(ONE_MIB)  # incompressible, exactly 1 MiB
    sent = [Record(b"big", value), Record(b"after", b"small")]
    client.produce(broker.bootstrap, topic, sent)
    assert_same(sent, read_exactly(reference, broker, topic, len(sent)))


def test_key_partitioning(client, reference, partitioned_broker, topic):
    """Keyed records land where Kafka's Java client puts them (murmur2), keeping each key's order."""
    sent = numbered(200, "keyed", key_every=20)
    client.produce(partitioned_broker.bootstrap, topic, sent)
    got = read_exactly(reference, partitioned_broker, topic, len(sent), partitions=range(10))
    assert reference.partitions_for(partitioned_broker.bootstrap, topic) == set(range(10))
    for record in got:
        assert record.partition == java_partition(record.key, 10), f"{record.short()} not in murmur2's partition"
    assert len({r.partition for r in got}) > 1
    for key in {r.key for r in sent}:
        assert [r.value for r in got if r.key == key] == [r.value for r in sent if r.key == key], f"order of {key}"


def test_twenty_producers(client, reference, broker, topic):
    batches = [numbered(10, f"producer{i}") for i in range(20)]
    client.produce_concurrently(broker.bootstrap, topic, batches)
    got = read_exactly(reference, broker, topic, 200)
    for i, batch in enumerate(batches):
        mine = [r.value for r in got if r.value.startswith(f"producer{i}-".encode())]
        assert mine == [r.value for r in batch], f"producer {i}: records lost, duplicated or reordered"
