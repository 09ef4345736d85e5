"""Fetch from follower (KIP-392): which replica a consumer should read a partition from.

`replica.selector.class` names the selector the leader asks; unset (Kafka's default), there is none and consumers
read from the leader. The one Kafka ships, `org.apache.kafka.common.replica.RackAwareReplicaSelector`, picks for a
consumer that sends a `rack_id` (its `client.rack`):
- the leader when it is in that rack, or when no candidate replica is;
- otherwise the most caught-up candidate in that rack: the largest log end offset, then the one caught up most
  recently (Kafka's ReplicaView.comparator; in one process a candidate in the ISR is taken as caught up now).
Candidates are, as in Kafka's ReplicaManager.findPreferredReadReplica, the leader and the followers in the ISR on
live nodes whose log holds the fetch offset (log start <= fetch offset <= log end). The leader answers the choice
as `preferred_read_replica` when it is a follower; the leader itself is never named (-1).
"""
from __future__ import annotations

from .metadata import PartitionState

RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
NO_PREFERRED_REPLICA = -1



def selector_enabled(class_name: str | None) -> bool:
    """Whether `replica.selector.class` names the rack-aware selector (configuration refuses any other class)."""
    return class_name == RACK_AWARE_REPLICA_SELECTOR


def preferred_read_replica(cluster, state: PartitionState, client_rack: str | None, fetch_offset: int) -> int:
    """The follower the consumer in `client_rack` should read from, or NO_PREFERRED_REPLICA (read from the leader).
    `state` is a partition this node leads."""
    if not client_rack:
        return NO_PREFERRED_REPLICA
    nodes = cluster.metadata.nodes
    if nodes[state.leader].rack == client_rack:
        return NO_PREFERRED_REPLICA
    best, best_end = NO_PREFERRED_REPLICA, -1
    for node_id in state.isr:
        node = nodes.get(node_id)
        if node_id == state.leader or node is None or not node.alive or node.rack != client_rack:
            continue
        replica_log = cluster.nodes[node_id].get_log(state.topic, state.partition)
        if replica_log is None or not replica_log.log_start_offset <= fetch_offset <= replica_log.log_end_offset:
            continue
        if replica_log.log_end_offset > best_end:  # ties: the first in ISR order, all caught up alike
            best, best_end = node_id, replica_log.log_end_offset
    return best
