"""Cluster mode: several brokers (nodes) in one process, with Kafka's controller rules and replication.

- `metadata.py`: the controller state (nodes, topics, per partition replicas, ISR, leader, epochs);
- `controller.py`: the one place that changes it (placement, elections, ISR changes, reassignments);
- `placement.py`: Kafka's rack-aware replica assignment;
- `replication.py`: followers copying their leaders' batches, the high watermark, acks=all;
- `cluster.py`: the nodes together: start-up, topics created and deleted on every node, faults.

A single broker is a cluster of one; `compatbroker.broker.build_cluster` makes one of several nodes.
"""
from .cluster import Cluster
from .controller import PREFERRED, UNCLEAN, Controller, ControllerError
from .metadata import NO_LEADER, ClusterMetadata, NodeInfo, PartitionState, TopicInfo

__all__ = ["NO_LEADER", "PREFERRED", "UNCLEAN", "Cluster", "ClusterMetadata", "Controller", "ControllerError",
           "NodeInfo", "PartitionState", "TopicInfo"]
