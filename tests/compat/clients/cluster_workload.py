"""A client's producer and consumer group running against a 3-node cluster while the test moves leaders and stops
nodes: the evidence of issue 16 for the non-Python clients (test_cluster_kafkajs.py, test_cluster_sarama.py).

The client side is one long-lived process (cluster_kafkajs.js, sarama/cluster/main.go) speaking a line protocol:
- stdin, one JSON command a line: {"op": "produce", "from": a, "to": b} makes its idempotent producer (acks=all)
  send the numbered records a..b-1 (record n has the value "n" and goes to partition n % partitions), in order;
  {"op": "close"} (or end of stdin) closes producer and consumer.
- stdout, `EVENT {"type": ...}` lines: "started", "acked" / "send_failed" (numbers, and the error), "produced"
  {"to": b} when a produce command is done, "records" ([partition, offset, value] as the group consumer got them),
  "committed", "joined", "crash" (a client error it recovers from by itself), "closed", "error" (fatal).

`run_failover` is the scenario (faults applied while a produce command is in flight, each next step waiting for
what the client reports, never for time), `check_delivery` the verdict: no acknowledged record lost, none stored
twice, order kept per partition, and everything stored read by the group.
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from compatbroker.coordinator.offsets import partition_for_group

EVENT_PREFIX = "EVENT "
WAIT_S = 120.0  # a bound, not a pace: each wait ends as soon as its condition holds
OFFSETS_TOPIC = "__consumer_offsets"


class WorkloadFailed(AssertionError):
    pass


@dataclass
class Progress:
    """What the client reported so far."""

    acked: list[int] = field(default_factory=list)
    failed: list[tuple[list[int], dict]] = field(default_factory=list)  # (numbers, error) of sends given up
    produced_to: int = 0
    records: list[tuple[int, int, str]] = field(default_factory=list)  # (partition, offset, value) as delivered
    commits: int = 0
    crashes: list[dict] = field(default_factory=list)
    joins: list[dict] = field(default_factory=list)
    started: bool = False
    closed: bool = False
    fatal: str | None = None

    def consumed_numbers(self) -> set[int]:
        return {int(value) for _, _, value in self.records}


class Workload:
    """The client process and what it reported; a context manager that kills it if still running at the end."""

    def __init__(self, argv: list[str], env: dict[str, str], log_path: Path):
        self.argv = argv
        self.env = env
        self.log_path = Path(log_path)
        self.progress = Progress()
        self.changed = threading.Condition()
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> Workload:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, env=os.environ | self.env, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=log)
        threading.Thread(target=self._read, daemon=True).start()
        self.wait_until(lambda p: p.started, "the client started")
        return self

    def __exit__(self, *exc_info) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def _read(self) -> None:
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            if line.startswith(EVENT_PREFIX):
                with self.changed:
                    self._apply(json.loads(line[len(EVENT_PREFIX):]))
                    self.changed.notify_all()
        self.proc.wait()
        with self.changed:
            self.changed.notify_all()

    def _apply(self, event: dict) -> None:
        kind, p = event["type"], self.progress
        if kind == "acked":
            p.acked += event["numbers"]
        elif kind == "send_failed":
            p.failed.append((event["numbers"], event["error"]))
        elif kind == "produced":
            p.produced_to = event["to"]
        elif kind == "records":
            p.records += [tuple(r) for r in event["records"]]
        elif kind == "committed":
            p.commits += 1
        elif kind == "crash":
            p.crashes.append(event)
        elif kind == "joined":
            p.joins.append(event)
        elif kind == "started":
            p.started = True
        elif kind == "closed":
            p.closed = True
        elif kind == "error":
            p.fatal = event["message"]

    def send(self, command: dict) -> None:
        self.proc.stdin.write((json.dumps(command) + "\n").encode())
        self.proc.stdin.flush()

    def produce(self, numbers: range) -> None:
        """Starts sending `numbers` (a contiguous range); `wait_produced` waits for the end of it."""
        self.send({"op": "produce", "from": numbers.start, "to": numbers.stop})

    def wait_produced(self, numbers: range) -> None:
        self.wait_until(lambda p: p.produced_to >= numbers.stop, f"records {numbers.start}..{numbers.stop - 1} sent")

    def wait_until(self, condition, what: str, timeout_s: float = WAIT_S):
        deadline = time.monotonic() + timeout_s
        with self.changed:
            while True:
                if self.progress.fatal:
                    raise WorkloadFailed(f"the client failed: {self.progress.fatal}\n{self.log_tail()}")
                result = condition(self.progress)
                if result:
                    return result
                if self.proc.poll() is not None:
                    raise WorkloadFailed(f"the client exited ({self.proc.returncode}) before: {what}\n"
                                         f"{self.log_tail()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WorkloadFailed(f"not within {timeout_s} s: {what}; {self.summary()}\n{self.log_tail()}")
                self.changed.wait(left)

    def close(self) -> None:
        self.send({"op": "close"})
        self.wait_until(lambda p: p.closed, "the client closed")
        self.proc.wait(30)

    def summary(self) -> str:
        p = self.progress
        return (f"acked {len(p.acked)}, failed sends {len(p.failed)} {p.failed[:2]}, produced to {p.produced_to}, "
                f"records read {len(p.records)} ({len(p.consumed_numbers())} distinct), commits {p.commits}, "
                f"joins {len(p.joins)}, crashes {[c.get('error') for c in p.crashes][:3]}")

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return "client log (tail):\n" + self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


# --- the scenario ---------------------------------------------------------------------------------------------------

def slices(total: int, count: int) -> list[range]:
    size = total // count
    return [range(i * size, total if i == count - 1 else (i + 1) * size) for i in range(count)]


def other_node(cluster, topic: str, partition: int, nodes: list[int]) -> int:
    """A node other than the partition's leader to move its leadership to (the next one round the ring)."""
    leader = cluster.leader_of(topic, partition)
    return nodes[(nodes.index(leader) + 1) % len(nodes)]


def poll_until(condition, what: str, timeout_s: float = WAIT_S):
    """Polls `condition` until it returns something true (returned), for state that changes on the broker's or the
    client's schedule (ISR, commits, the request log), which the test can observe but is not told about."""
    deadline = time.monotonic() + timeout_s
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise WorkloadFailed(f"not within {timeout_s} s: {what}")
        time.sleep(0.05)  # a poll interval, with the bound above
    return result


def wait_in_sync(cluster, topics: dict[str, int], node_id: int) -> None:
    """Waits until `node_id` is back in the ISR of every partition of `topics` ({name: partitions}) it hosts."""
    def in_sync():
        return all(node_id in state["isr"] or node_id not in state["replicas"]
                   for topic, count in topics.items() for p in range(count)
                   for state in [cluster.partition_state(topic, p)])
    poll_until(in_sync, f"node {node_id} back in the ISR of every partition of {sorted(topics)} it hosts")


def wait_committed(cluster, workload: Workload, topic: str, group: str) -> None:
    """Waits until the offsets the group's coordinator holds for it reach what the group has read."""
    def caught_up():
        read: dict[int, int] = {}
        for partition, offset, _ in list(workload.progress.records):
            read[partition] = max(read.get(partition, 0), offset + 1)
        committed = cluster.committed_offsets(group)
        return all(committed.get((topic, p), -1) >= end for p, end in read.items())
    poll_until(caught_up, f"the group's committed offsets reach what it read; {workload.summary()}")


GROUP_APIS = ("Heartbeat", "OffsetCommit")  # sent to the group's coordinator only


def wait_for_coordinator(cluster, client_id_prefix: str, node_id: int) -> list[tuple[str, int]]:
    """Waits until the client's group requests (Heartbeat, OffsetCommit) go to `node_id`: the client has found its
    coordinator there. A client still on a former coordinator moves once that node answers NOT_COORDINATOR; one that
    never moves means another node still acts as the group's coordinator."""
    since = max((entry.seq for entry in cluster.requests()), default=0)
    seen: list[tuple[str, int]] = []

    def latest_is_coordinator():
        nonlocal since
        for entry in cluster.requests(since):
            since = entry.seq
            if entry.api in GROUP_APIS and (entry.client_id or "").startswith(client_id_prefix):
                seen.append((entry.api, entry.node_id))
        return seen and seen[-1][1] == node_id
    try:
        poll_until(latest_is_coordinator, f"the group's requests going to node {node_id}")
        return seen
    except WorkloadFailed:
        raise WorkloadFailed(f"the client's group requests never went to node {node_id}, its coordinator; "
                             f"they went to (api, node): {seen[-20:]}") from None


@dataclass
class FailoverLog:
    """What the scenario did, for the report and the assertions."""

    moves: list[tuple[str, int, int, int]] = field(default_factory=list)  # (topic, partition, from, to)
    # (fault, records of its slice acknowledged when it was applied, slice size): applied once the slice's first
    # records are acknowledged, so the rest of the slice is sent through it
    faults: list[tuple[str, int, int]] = field(default_factory=list)
    stopped: list[int] = field(default_factory=list)
    coordinator: int | None = None
    coordinator_after: int | None = None
    group_requests: list[tuple[str, int]] = field(default_factory=list)  # (api, node) until the coordinator was in use


def run_failover(cluster, workload: Workload, topic: str, group: str, *, partitions: int, total: int,
                 nodes: list[int], offsets_partitions: int, client_id: str) -> FailoverLog:
    """Produce `total` records in seven slices while the group reads; during the slices: every partition's leader
    moved (twice), a node stopped and started, the group's coordinator node stopped. `client_id`: how the client's
    requests start in the request log."""
    done = FailoverLog()

    def during(numbers: range, name: str, fault) -> None:
        """Starts sending `numbers`, applies the fault once the first of them is acknowledged (so that it hits a
        client in the middle of sending), waits until all were sent."""
        workload.produce(numbers)
        workload.wait_until(lambda p: any(n in numbers for n in p.acked),
                            f"the first of records {numbers.start}..{numbers.stop - 1} acknowledged")
        sent_before = sum(1 for n in list(workload.progress.acked) if n in numbers)
        fault()
        done.faults.append((name, sent_before, len(numbers)))
        workload.wait_produced(numbers)

    def move_every_leader() -> None:
        for partition in range(partitions):
            target = other_node(cluster, topic, partition, nodes)
            done.moves.append((topic, partition, cluster.leader_of(topic, partition), target))
            cluster.move_leader(topic, partition, target)

    warm_up, move_1, move_2, stop, start, coordinator, last = slices(total, 7)
    workload.produce(warm_up)
    workload.wait_produced(warm_up)
    workload.wait_until(lambda p: p.records, "the group consumer read its first records")
    during(move_1, "move every leader", move_every_leader)
    during(move_2, "move every leader again", move_every_leader)

    victim = cluster.leader_of(topic, 0)
    done.stopped.append(victim)
    during(stop, f"stop node {victim}", lambda: cluster.stop_node(victim))
    during(start, f"start node {victim}", lambda: cluster.start_node(victim))
    wait_in_sync(cluster, {topic: partitions, OFFSETS_TOPIC: offsets_partitions}, victim)

    offsets_partition = partition_for_group(group, offsets_partitions)  # Kafka's rule, as the broker applies it
    done.coordinator = cluster.leader_of(OFFSETS_TOPIC, offsets_partition)
    # the node about to be stopped is the one in use
    done.group_requests = wait_for_coordinator(cluster, client_id, done.coordinator)
    done.stopped.append(done.coordinator)
    during(coordinator, f"stop node {done.coordinator} (the group's coordinator)",
           lambda: cluster.stop_node(done.coordinator))
    done.coordinator_after = cluster.leader_of(OFFSETS_TOPIC, offsets_partition)
    # the group carries on: it reads everything acknowledged so far and commits it, with its coordinator gone
    acked = set(workload.progress.acked)
    workload.wait_until(lambda p: acked <= p.consumed_numbers(),
                        "the group read the records sent after its coordinator stopped")
    wait_committed(cluster, workload, topic, group)
    cluster.start_node(done.coordinator)

    workload.produce(last)
    workload.wait_produced(last)
    workload.wait_until(lambda p: set(p.acked) <= p.consumed_numbers(), "the group read every acknowledged record")
    return done


# --- the verdict ----------------------------------------------------------------------------------------------------


def check_failover(cluster, workload: Workload, topic: str, group: str, client: str, *, partitions: int, total: int,
                   nodes: list[int], offsets_partitions: int, client_id: str) -> dict:
    """`run_failover` with `workload`, then the evidence: every leader moved twice, the group's coordinator moved,
    every send acknowledged and stored exactly once in order (`check_delivery`). Returns the figures, printed too."""
    with workload:
        done = run_failover(cluster, workload, topic, group, partitions=partitions, total=total, nodes=nodes,
                            offsets_partitions=offsets_partitions, client_id=client_id)
        workload.close()
    assert len(done.moves) == 2 * partitions and all(old != new for _, _, old, new in done.moves)
    assert done.coordinator_after != done.coordinator, "the group's coordinator did not move"
    figures = check_delivery(workload.progress, stored_records(cluster, topic, partitions, total), partitions)
    assert figures["acked"] == total, f"{client} gave up sends: {workload.progress.failed[:3]}"
    print(f"{client} failover: {figures}, moves {done.moves}, stopped {done.stopped}, "
          f"coordinator {done.coordinator} -> {done.coordinator_after}, faults (name, acked of slice before, slice) "
          f"{done.faults}, group requests (api, node) until the coordinator was in use {done.group_requests[-5:]}")
    return figures


@contextlib.contextmanager
def followers_stopped(cluster, topic: str, partition: int, nodes: list[int]):
    """The partition's followers stopped for the block (its leader alone in sync), started again after it."""
    leader = cluster.leader_of(topic, partition)
    followers = [node for node in nodes if node != leader]
    for node in followers:
        cluster.stop_node(node)
    try:
        yield
    finally:
        for node in followers:
            cluster.start_node(node)

def stored_records(cluster, topic: str, partitions: int, limit: int) -> dict[int, list[tuple[int, int]]]:
    """{partition: [(offset, number)...]} as the partition's leader stores them."""
    return {p: [(r.offset, int(r.value)) for r in cluster.records(topic, p, offset=0, limit=limit)]
            for p in range(partitions)}


def check_delivery(progress: Progress, stored: dict[int, list[tuple[int, int]]], partitions: int) -> dict:
    """Asserts the issue's guarantees; returns figures for the report."""
    acked = set(progress.acked)
    assert len(acked) == len(progress.acked), "a record was acknowledged twice"
    numbers = [n for records in stored.values() for _, n in records]
    duplicated = sorted(n for n, count in _counts(numbers).items() if count > 1)
    assert not duplicated, f"records stored twice: {duplicated[:20]}"
    lost = sorted(acked - set(numbers))
    assert not lost, f"acknowledged records lost: {lost[:20]} (of {len(lost)})"
    for partition, records in stored.items():
        in_partition = [n for _, n in records]
        assert all(n % partitions == partition for n in in_partition), f"partition {partition} holds others' records"
        assert in_partition == sorted(in_partition), f"partition {partition} out of order: {in_partition[:50]}"
    # the group read every stored record, each with the offset it is stored at
    where = {(p, offset): n for p, records in stored.items() for offset, n in records}
    read = {(p, offset): int(value) for p, offset, value in progress.records}
    wrong = [(key, n, where.get(key)) for key, n in read.items() if where.get(key) != n]
    assert not wrong, f"the group read records that are not stored so: {wrong[:10]}"
    unread = sorted(set(where) - set(read))
    assert not unread, f"stored records the group never read: {unread[:10]}"
    redelivered = len(progress.records) - len(read)
    for partition in range(partitions):
        offsets = [offset for p, offset, _ in progress.records if p == partition]
        # in order per partition: a rewind happens only when the group re-reads from its committed offset
        rewinds = sum(1 for a, b in zip(offsets, offsets[1:]) if b <= a)
        assert rewinds <= len(progress.joins), f"partition {partition} read out of order: {offsets[:50]}"
    return {"acked": len(acked), "stored": len(numbers), "unacked_sends": len(progress.failed),
            "redelivered": redelivered, "joins": len(progress.joins), "client_errors": len(progress.crashes),
            "client_error_kinds": sorted({json.dumps(c.get("error"), sort_keys=True) for c in progress.crashes})}


def _counts(values) -> dict:
    found: dict = defaultdict(int)
    for value in values:
        found[value] += 1
    return found
