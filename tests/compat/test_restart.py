"""A broker restart between produce (acks=-1) and consume loses nothing that was acknowledged."""
from __future__ import annotations

from . import clients
from .checks import read_exactly
from .records import assert_same, now_ms, numbered, shapes_for_producer


def test_restart_between_produce_and_consume(client, reference, fresh_broker, topic):
    sent = shapes_for_producer(client, now_ms() - 60_000)
    sent += numbered(100, "before-restart")
    client.produce(fresh_broker.bootstrap, topic, sent, acks=-1)
    fresh_broker.restart()  # SIGTERM (asserts exit 0), then the same data directory and port
    assert_same(sent, read_exactly(reference, fresh_broker, topic, len(sent)))
    got = client.consume(fresh_broker.bootstrap, topic, len(sent))
    assert_same(sent, got)


def test_sarama_restart_between_produce_and_consume(reference, fresh_broker, topic):
    """sarama writes with both of its protocols, magic 0 messages in Produce v0 (its default) and v2 batches in
    Produce v3 (2.1), and after the restart reads all of them back with Fetch v0, down-converted."""
    sarama = clients.load_or_fail("sarama")
    old_format, new_format = numbered(60, "magic0", key_every=7), numbered(60, "magic2", key_every=5, size=300)
    assert sarama.produce(fresh_broker.bootstrap, topic, old_format, acks=-1) == [(0, o) for o in range(60)]
    sarama.with_protocol("2.1.0").produce(fresh_broker.bootstrap, topic, new_format, acks=-1, compression="gzip")
    fresh_broker.restart()
    sent = old_format + new_format
    assert_same(sent, read_exactly(reference, fresh_broker, topic, len(sent)))
    assert_same(sent, sarama.consume(fresh_broker.bootstrap, topic, len(sent)))


def test_killed_broker_keeps_acknowledged_records(reference, fresh_broker, topic):
    """SIGKILL instead of SIGTERM: an acknowledged append is in the segment file (the page cache survives a process
    crash), so recovery must find every record. kafka-python only; the storage tests cover recovery itself."""
    sent = numbered(500, "acked", size=300)
    reference.produce(fresh_broker.bootstrap, topic, sent, acks=-1)
    fresh_broker.restart(hard=True)
    assert_same(sent, read_exactly(reference, fresh_broker, topic, len(sent)))
    fresh_broker.restart()  # and a clean stop after recovery
    assert_same(sent, read_exactly(reference, fresh_broker, topic, len(sent)))
