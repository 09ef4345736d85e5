"""This node's part in a partition, as the data-path handlers check it (shared by Produce, Fetch, ListOffsets,
OffsetForLeaderEpoch, DeleteRecords and DescribeProducers), and the leader hints of KIP-951.

Kafka's order (ReplicaManager.getPartitionOrError, then Partition.getLocalLog):
1. a partition the cluster does not have: UNKNOWN_TOPIC_OR_PARTITION;
2. one this node hosts no replica of: NOT_LEADER_OR_FOLLOWER (the client must refresh its metadata);
3. a `current_leader_epoch` the client asserts (KIP-320): older than the partition's FENCED_LEADER_EPOCH, newer
   UNKNOWN_LEADER_EPOCH;
4. a request only the leader serves, on a follower (or while the partition has no leader): NOT_LEADER_OR_FOLLOWER.

A NOT_LEADER_OR_FOLLOWER (Produce v10+, and FENCED_LEADER_EPOCH too in Fetch v16+) names the leader this node knows
of and its epoch, with the leader's endpoint among the response's node endpoints when it is alive
(KafkaApis.getCurrentLeader), so that the client redirects without a metadata round trip.
"""
from __future__ import annotations

from typing import NamedTuple

from ..cluster.metadata import NO_LEADER
from ..protocol.error_codes import ErrorCode

NO_EPOCH = -1


class LeaderHint(NamedTuple):
    leader_id: int
    leader_epoch: int
    endpoint: tuple[int, str, int, str | None] | None  # (node id, host, port, rack) of a live leader


def leader_epoch_error(current_epoch: int, asserted_epoch: int) -> ErrorCode | None:
    """KIP-320 fencing of a leader epoch a client asserts: older than ours is fenced, newer is unknown to us."""
    if asserted_epoch == current_epoch:
        return None
    return ErrorCode.FENCED_LEADER_EPOCH if asserted_epoch < current_epoch else ErrorCode.UNKNOWN_LEADER_EPOCH


def replica_error(broker, topic: str, partition: int, asserted_epoch: int | None, *,
                  require_leader: bool) -> ErrorCode | None:
    """Why this node cannot serve `topic`-`partition` (None: it can). `asserted_epoch` None: the request asserts
    no leader epoch."""
    state = broker.partition_state(topic, partition)
    if state is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if broker.get_log(topic, partition) is None:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if asserted_epoch is not None:
        error = leader_epoch_error(state.leader_epoch, asserted_epoch)
        if error is not None:
            return error
    if require_leader and state.leader != broker.node_id:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return None


def leader_hint(ctx, topic: str | None, partition: int) -> LeaderHint:
    """The leader this node knows for the partition (-1 and -1 for none), with its endpoint on the listener the
    request came in on when that node is alive."""
    broker = ctx.broker
    state = broker.partition_state(topic, partition) if topic is not None else None
    if state is None:
        return LeaderHint(NO_LEADER, NO_EPOCH, None)
    endpoint = None
    if state.leader != NO_LEADER and broker.metadata.is_alive(state.leader):
        address = broker.endpoint_of(state.leader, ctx.listener_host, ctx.listener_port)
        if address is not None:
            endpoint = (state.leader, address[0], address[1], broker.metadata.nodes[state.leader].rack)
    return LeaderHint(state.leader, state.leader_epoch, endpoint)
