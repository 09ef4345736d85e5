"""Crash loops: an idempotent producer (confluent-kafka, acks=all) keeps producing while the broker subprocess is
SIGKILLed at random moments and restarted on the same data directory and port, several times; afterwards every
acknowledged record is in the log exactly once, in the order produced, per partition.

Then torn and garbage tails: with the broker killed, each partition's last segment gets a different bad tail (random
bytes, a batch cut short as by a write the kill interrupted, zeros as from a preallocated file); the broker must start,
keep every acknowledged record, and take new ones after them.
"""
from __future__ import annotations

import os
import random
import signal
import threading

from .broker_process import BrokerProcess
from .checks import read_exactly
from .conftest import BROKER_SETTINGS

PARTITIONS = 3
KILLS = 5
ACKS_BETWEEN_KILLS = (200, 3000)  # a kill comes after a random number of new acknowledgements
WAIT_S = 60.0  # for the acknowledgements a round waits for, and for the final flush: generous for a loaded machine
SEED = int(os.environ.get("COMPATBROKER_CRASH_SEED", "1415"))


class Producing(threading.Thread):
    """An idempotent confluent-kafka producer sending `<partition>:<n>` (n zero-padded, so values sort in the order
    sent) to partition n % PARTITIONS until stopped;
    it keeps what the broker acknowledged and any delivery error. The broker's downtime is the producer's business:
    it retries (message.timeout.ms is long), as a real producer does during a broker restart."""

    def __init__(self, bootstrap: str, topic: str, first: int = 0):
        super().__init__(daemon=True)
        from confluent_kafka import Producer
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                  "client.id": "crash-loop", "broker.address.family": "v4", "linger.ms": 5,
                                  "message.timeout.ms": 300_000, "reconnect.backoff.max.ms": 500,
                                  "log_level": 2})  # not every refused connection while the broker is down
        self.acked = threading.Condition()
        self.acknowledged: list[tuple[int, int, bytes]] = []  # (partition, offset, value)
        self.failures: list[str] = []
        self.sent = first  # the number in the next value: a second producer continues the first one's numbers
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            partition = self.sent % PARTITIONS
            try:
                self.producer.produce(self.topic, value=b"%d:%07d" % (partition, self.sent), partition=partition,
                                      on_delivery=self._delivered)
                self.sent += 1
            except BufferError:  # the local queue is full (the broker is down): let deliveries drain it
                self.producer.poll(0.1)
            self.producer.poll(0)

    def _delivered(self, err, msg) -> None:
        with self.acked:
            if err is not None:
                self.failures.append(f"{msg.value()!r}: {err}")
            else:
                self.acknowledged.append((msg.partition(), msg.offset(), msg.value()))
            self.acked.notify_all()

    def wait_for_acks(self, count: int) -> None:
        with self.acked:
            assert self.acked.wait_for(lambda: len(self.acknowledged) >= count or self.failures, WAIT_S), (
                f"only {len(self.acknowledged)} of {count} records acknowledged within {WAIT_S} s")
            assert not self.failures, f"delivery failed: {self.failures[:5]}"

    def finish(self) -> None:
        self.stopping.set()
        self.join(timeout=WAIT_S)
        assert self.producer.flush(WAIT_S) == 0, "records left undelivered"
        assert not self.failures, f"delivery failed: {self.failures[:5]}"


def test_acknowledged_records_survive_sigkill_loops_and_bad_tails(tmp_path, reference, topic):
    rng = random.Random(SEED)
    with BrokerProcess(tmp_path / "data", BROKER_SETTINGS | {"num.partitions": str(PARTITIONS)}) as broker:
        producing = Producing(broker.bootstrap, topic)
        producing.start()
        for _ in range(KILLS):
            producing.wait_for_acks(len(producing.acknowledged) + rng.randint(*ACKS_BETWEEN_KILLS))
            broker.restart(hard=True)
        producing.wait_for_acks(len(producing.acknowledged) + ACKS_BETWEEN_KILLS[0])  # it goes on after the last
        producing.finish()
        assert_exactly_once_in_order(reference, broker, topic, producing.acknowledged)

        broker.stop(signal.SIGKILL)
        tear_tails(broker, topic, rng)
        broker.start(listen=f"{broker.host}:{broker.port}")
        assert_exactly_once_in_order(reference, broker, topic, producing.acknowledged)
        # a new producer: appends after the repaired tails
        after = Producing(broker.bootstrap, topic, first=producing.sent)
        after.start()
        after.wait_for_acks(PARTITIONS * 10)
        after.finish()
        assert_exactly_once_in_order(reference, broker, topic, producing.acknowledged + after.acknowledged)


def assert_exactly_once_in_order(reference, broker: BrokerProcess, topic: str, acknowledged) -> None:
    """The log holds exactly the acknowledged records (every one was, after the final flush), each at the offset
    its acknowledgement named, in the order produced per partition."""
    got = read_exactly(reference, broker, topic, len(acknowledged), partitions=range(PARTITIONS))
    stored = {(r.partition, r.offset): r.value for r in got}
    expected = {(partition, offset): value for partition, offset, value in acknowledged}
    assert stored == expected, f"{len(set(stored.items()) ^ set(expected.items()))} records differ"
    for partition in range(PARTITIONS):
        values = [r.value for r in got if r.partition == partition]
        assert values == sorted(values), f"partition {partition}: records out of order"


def tear_tails(broker: BrokerProcess, topic: str, rng: random.Random) -> None:
    """A different bad tail on each partition's last segment, as a kill or a crash of the machine leaves them."""
    tails = {0: rng.randbytes(rng.randint(1, 300)), 2: bytes(rng.randint(1, 4096))}
    for partition, tail in tails.items():
        with open(broker.segment_files(topic, partition)[-1], "ab") as segment:
            segment.write(tail)
    last = broker.segment_files(topic, 1)[-1]
    data = last.read_bytes()
    assert len(data) > 100, "partition 1 holds no batch to tear"
    with open(last, "ab") as segment:  # the start of a copy of the partition's first batch: a torn append
        segment.write(data[:rng.randint(12, min(len(data), 200) - 1)])
