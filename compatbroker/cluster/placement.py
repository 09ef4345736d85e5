"""Replica placement for new topics and partitions: Kafka's rack-aware round-robin assignment.

Nodes are arranged rack by rack in turn (the first node of each rack, then the second of each, ...). Partition i's
leader is the node at (i + start) in that arrangement, so leaders spread evenly; its followers are taken further
along, shifted once per full round of partitions, skipping a rack (or node) that already holds a replica while
another one does not. Without racks this is Kafka's plain round-robin assignment.

Kafka picks the start and shift at random; here they derive from the topic name, so that a topic's placement is
the same on every run (tests can count on it) while different topics still start on different nodes.
"""
from __future__ import annotations

import zlib


def assign_replicas(topic: str, partitions: int, replication_factor: int,
                    nodes: list[tuple[int, str | None]], *, start_partition: int = 0) -> list[list[int]]:
    """Replica lists for partitions start_partition .. start_partition + partitions - 1. `nodes` are the
    (node id, rack) pairs to place on; the caller has checked replication_factor <= len(nodes)."""
    if not 1 <= replication_factor <= len(nodes):
        raise ValueError(f"replication factor {replication_factor} does not fit {len(nodes)} node(s)")
    arranged = _rack_alternated(nodes)
    racks = {node_id: rack for node_id, rack in nodes}
    rack_count = len(set(racks.values()))
    count = len(arranged)
    seed = zlib.crc32(topic.encode())
    start = seed % count
    shift = (seed // count) % count
    assignment = []
    for partition in range(start_partition, start_partition + partitions):
        if partition > 0 and partition % count == 0:
            shift += 1
        first = (partition + start) % count
        replicas = [arranged[first]]
        used_racks = {racks[arranged[first]]}
        step = 0
        while len(replicas) < replication_factor:
            candidate = arranged[_replica_index(first, shift * rack_count, step, count)]
            step += 1
            rack_ok = racks[candidate] not in used_racks or len(used_racks) == rack_count
            if rack_ok and candidate not in replicas:
                replicas.append(candidate)
                used_racks.add(racks[candidate])
        assignment.append(replicas)
    return assignment


def _replica_index(first: int, shift: int, step: int, count: int) -> int:
    if count == 1:
        return first
    return (first + 1 + (shift + step) % (count - 1)) % count


def _rack_alternated(nodes: list[tuple[int, str | None]]) -> list[int]:
    """Node ids taking one node from each rack in turn (racks in name order, nodes in id order)."""
    by_rack: dict[str, list[int]] = {}
    for node_id, rack in sorted(nodes):
        by_rack.setdefault(rack or "", []).append(node_id)
    queues = [by_rack[rack] for rack in sorted(by_rack)]
    arranged = []
    for index in range(max(len(queue) for queue in queues)):
        arranged.extend(queue[index] for queue in queues if index < len(queue))
    return arranged
