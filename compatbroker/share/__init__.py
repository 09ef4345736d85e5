"""The KIP-932 data path of share groups (queues), per node, beside the coordinators and below the handlers:

- `partition.py`: SharePartition, one (group, topic, partition)'s in-flight records, acquisition locks, delivery
  counts and acknowledgements (pure state);
- `manager.py`: SharePartitionManager, this node's share-partitions, sessions, lock timers and long-poll wake-ups;
- `sessions.py`: share sessions (ShareSessionEpoch 0 opens, -1 closes, +1 per request);
- `state_store.py`: the share-partition state in `__share_group_state` (ShareSnapshot/ShareUpdate records).

The handlers (ShareFetch, ShareAcknowledge) and the share group coordinator (DescribeShareGroupOffsets,
AlterShareGroupOffsets, DeleteShareGroupOffsets) reach a node's manager through `share_partitions_of(node)`.
"""
from __future__ import annotations

from .manager import SharePartitionManager

__all__ = ["SharePartitionManager", "share_partitions_of"]


def share_partitions_of(node) -> SharePartitionManager:
    """The node's SharePartitionManager, made on first use (kept as `node.share_partitions`)."""
    manager = getattr(node, "share_partitions", None)
    if manager is None:
        manager = SharePartitionManager(node)
        node.share_partitions = manager
    return manager
