"""Exactly-once consume-transform-produce under crashes, with confluent-kafka and kafka-python.

An input topic of 20,000 records (3 partitions) is processed by eos_loop.py, a process of its own: each batch is a
transaction holding the output records and, through send_offsets_to_transaction, the input offsets after them. While
it runs, the loop process is SIGKILLed 5 times and the broker twice, at seeded random points of the progress (the
seed is printed; COMPATBROKER_EOS_SEED sets it), each in a phase of a transaction picked at random: its output
records acknowledged (in the log, the transaction open), its offsets added, or just committed. A killed loop is
started again: it fences its predecessor (the broker aborts the open transaction) and resumes from the group's
committed offsets; a loop that fails on its own (the broker went away under it) is restarted too. Afterwards the
output read read_committed holds every input record exactly once, in input order per partition, and the group's
committed offsets are the input's end offsets.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from .broker_process import REPO, BrokerProcess
from .conftest import BROKER_SETTINGS

INPUT = 20_000
PARTITIONS = 3
BATCH = 500  # input records per transaction at most
LOOP_KILLS = 5
BROKER_KILLS = 2
PROGRESS_WAIT_S = 120.0  # bound on reaching the next kill point or the end: generous for a loaded 2-core machine
MAX_UNPLANNED_RESTARTS = 30  # loops that failed on their own (mostly while the broker was down)
SEED = int(os.environ.get("COMPATBROKER_EOS_SEED", "2015"))
PHASES = ("produced", "offsets", "committed")  # the moments of a transaction a kill comes in (eos_loop.py's lines)


class Loop:
    """The eos_loop.py process of the moment, restarted as needed, and the progress its commits reported."""

    def __init__(self, spec: dict, log_path: Path):
        self.spec = spec
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self.progress = threading.Condition()
        self.committed = {p: 0 for p in range(PARTITIONS)}  # the highest committed offsets any loop reported
        self.phases = dict.fromkeys(PHASES, 0)  # how often a loop reported each phase
        self.starts = 0

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "tests.compat.eos_loop", json.dumps(self.spec)],
                                         cwd=REPO, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL)
        self.starts += 1
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen) -> None:
        for raw in proc.stdout:
            line = raw.decode(errors="replace").strip()
            with self.progress:
                if line.startswith("COMMITTED "):
                    for partition, offset in json.loads(line[len("COMMITTED "):]).items():
                        self.committed[int(partition)] = max(self.committed[int(partition)], offset)
                    self.phases["committed"] += 1
                elif line.startswith("PHASE "):
                    self.phases[line[len("PHASE "):]] += 1
                self.progress.notify_all()
        with self.progress:
            self.progress.notify_all()  # the process ended: the waiter restarts it

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def done(self) -> int:
        return sum(self.committed.values())

    def wait_for(self, records: int, unplanned: list[int]) -> None:
        """Waits until the loops have committed `records` input records."""
        self.wait_until(lambda: self.done() >= records, f"{records} input records committed", unplanned)

    def wait_for_phase(self, phase: str, unplanned: list[int]) -> None:
        """Waits until a loop reports `phase` once more."""
        seen = self.phases[phase]
        self.wait_until(lambda: self.phases[phase] > seen, f"phase {phase}", unplanned)

    def wait_until(self, condition, what: str, unplanned: list[int]) -> None:
        """Waits for `condition` (checked under the progress lock), restarting a loop that ended by itself."""
        deadline = time.monotonic() + PROGRESS_WAIT_S
        with self.progress:
            while not condition():
                if self.proc.poll() is not None:
                    unplanned.append(self.proc.returncode)
                    assert len(unplanned) <= MAX_UNPLANNED_RESTARTS, (
                        f"the loop failed {len(unplanned)} times by itself; see {self.log_path}")
                    self.start()
                left = deadline - time.monotonic()
                assert left > 0, (f"no {what} within {PROGRESS_WAIT_S} s ({self.done()} input records committed); "
                                  f"see {self.log_path}")
                self.progress.wait(min(left, 1.0))


@pytest.mark.parametrize("eos_client", ["confluent-kafka", "kafka-python"])
def test_exactly_once_through_loop_and_broker_kills(tmp_path, reference, eos_client, topic):
    print(f"exactly-once seed {SEED} (COMPATBROKER_EOS_SEED)")
    rng = random.Random(SEED)
    events = ["loop"] * LOOP_KILLS + ["broker"] * BROKER_KILLS
    rng.shuffle(events)
    points = sorted(rng.sample(range(INPUT // 20, INPUT * 9 // 10), len(events)))
    source, sink = f"{topic}.in", f"{topic}.out"
    with BrokerProcess(tmp_path / "data", BROKER_SETTINGS | {"num.partitions": str(PARTITIONS)}) as broker:
        inputs = produce_input(broker.bootstrap, source)
        loop = Loop({"client": eos_client, "bootstrap": broker.bootstrap, "input": source, "output": sink,
                     "partitions": PARTITIONS, "group": f"eos-{topic}", "transactional_id": f"eos-{topic}",
                     "batch": BATCH}, tmp_path / "loop.log")
        unplanned: list[int] = []
        loop.start()
        try:
            for event, point in zip(events, points):
                loop.wait_for(point, unplanned)
                loop.wait_for_phase(rng.choice(PHASES), unplanned)
                if event == "loop":
                    loop.kill()
                    loop.start()
                else:
                    broker.restart(hard=True)
            loop.wait_for(INPUT, unplanned)
        finally:
            if loop.proc.poll() is None:
                loop.kill()
        print(f"loop processes: {loop.starts} ({len(unplanned)} ended by themselves: {unplanned})")

        ends = reference.end_offsets(broker.bootstrap, sink, range(PARTITIONS))
        got, positions = reference.read_to_end(broker.bootstrap, sink, ends, read_committed=True, timeout_s=120)
        assert positions == ends
        for partition in range(PARTITIONS):
            out = [r.value for r in sorted(got, key=lambda r: r.offset) if r.partition == partition]
            expected = [b"out:" + v for v in inputs[partition]]
            assert len(out) == len(set(out)), f"partition {partition}: {len(out) - len(set(out))} duplicates"
            assert set(out) == set(expected), (f"partition {partition}: {len(set(expected) - set(out))} missing, "
                                               f"{len(set(out) - set(expected))} unexpected")
            assert out == expected, f"partition {partition}: output out of input order"
        uncommitted, _ = reference.read_to_end(broker.bootstrap, sink, ends, read_committed=False, timeout_s=120)
        print(f"output log: {len(got)} committed records, {len(uncommitted) - len(got)} in aborted transactions")
        committed = reference.committed(broker.bootstrap, f"eos-{topic}", source, range(PARTITIONS))
        assert committed == {p: len(inputs[p]) for p in range(PARTITIONS)}


def produce_input(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    """INPUT records `in-<n>` round-robin over the partitions (idempotent confluent-kafka), by partition."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "enable.idempotence": True,
                         "linger.ms": 20})
    failures = []
    values = {p: [] for p in range(PARTITIONS)}
    for n in range(INPUT):
        value = b"in-%05d" % n
        values[n % PARTITIONS].append(value)
        while True:
            try:
                producer.produce(topic, value=value, partition=n % PARTITIONS,
                                 on_delivery=lambda err, _m: err is not None and failures.append(err))
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0 and not failures, f"input not produced: {failures[:3]}"
    return values
