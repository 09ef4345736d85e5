"""The controller state of a cluster: its nodes, its topics and, per partition, the replicas, the in-sync replicas
(ISR), the leader and the leader epoch. Only the controller (`controller.py`) changes it; everyone else reads.

A cluster of several nodes keeps it in `cluster-metadata.json` in the data directory (written whole and atomically
on each change, as Kafka's controller appends each change to `__cluster_metadata`); a single node rebuilds it at
start from its partition directories, which keeps today's layout.

The GROUP config overrides (KIP-848/932 per-group configs, `GroupConfigs`) are cluster-wide metadata too; they
live in `group-configs.json` beside it, for a single node as well (whose metadata is otherwise never written), and
are saved whole on each change and read at start.
"""
from __future__ import annotations

import json
import os
import uuid
from collections.abc import Collection
from dataclasses import dataclass, field

from ..storage.checkpoints import write_atomically
from ..storage.config_sets import ConfigSets

NO_LEADER = -1
METADATA_FILE = "cluster-metadata.json"
GROUP_CONFIGS_FILE = "group-configs.json"
_FORMAT_VERSION = 1


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    is_internal: bool


@dataclass
class PartitionState:
    topic: str
    partition: int
    replicas: list[int]            # assignment order: replicas[0] is the preferred leader
    isr: list[int]
    leader: int                    # NO_LEADER while the partition is offline
    leader_epoch: int = 0
    partition_epoch: int = 0       # bumped by every change, the ISR's included
    adding_replicas: list[int] = field(default_factory=list)    # a reassignment in progress (KIP-455)
    removing_replicas: list[int] = field(default_factory=list)

    def offline_replicas(self, alive: Collection[int]) -> list[int]:
        return [replica for replica in self.replicas if replica not in alive]

    def to_json(self) -> dict:
        return {"replicas": self.replicas, "isr": self.isr, "leader": self.leader,
                "leader_epoch": self.leader_epoch, "partition_epoch": self.partition_epoch,
                "adding_replicas": self.adding_replicas, "removing_replicas": self.removing_replicas}

    @classmethod
    def from_json(cls, topic: str, partition: int, data: dict) -> PartitionState:
        return cls(topic, partition, list(data["replicas"]), list(data["isr"]), int(data["leader"]),
                   int(data["leader_epoch"]), int(data["partition_epoch"]), list(data.get("adding_replicas", [])),
                   list(data.get("removing_replicas", [])))


@dataclass
class NodeInfo:
    node_id: int
    rack: str | None = None
    alive: bool = True       # False: stopped (fenced); its replicas are offline
    isolated: bool = False   # serves clients, but replicates with no one


class ClusterMetadata:
    """Nodes, topics and partition states. Readers use the accessors; the controller mutates."""

    def __init__(self, cluster_id: str, nodes: dict[int, NodeInfo]):
        self.cluster_id = cluster_id
        self.nodes = nodes
        self.metadata_offset = 0  # one more per change: DescribeQuorum's log end offset
        self._topics: dict[str, TopicInfo] = {}
        self._topics_by_id: dict[uuid.UUID, TopicInfo] = {}
        self._partitions: dict[str, list[PartitionState]] = {}
        self.group_configs = GroupConfigs()

    @property
    def controller_id(self) -> int:
        """The one voter of the controller quorum: the lowest node id."""
        return min(self.nodes)

    # --- reading --------------------------------------------------------------------------------------------------

    def topics(self) -> dict[str, TopicInfo]:
        return dict(self._topics)

    def topic(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._topics_by_id.get(topic_id)

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        states = self._partitions.get(topic)
        if states is None or not 0 <= partition < len(states):
            return None
        return states[partition]

    def partitions(self, topic: str) -> list[PartitionState]:
        return list(self._partitions.get(topic, ()))

    def all_partitions(self) -> list[PartitionState]:
        return [state for states in self._partitions.values() for state in states]

    def alive_nodes(self) -> list[int]:
        return sorted(node_id for node_id, node in self.nodes.items() if node.alive)

    def is_alive(self, node_id: int) -> bool:
        node = self.nodes.get(node_id)
        return node is not None and node.alive

    # --- changing (the controller's) ------------------------------------------------------------------------------

    def put_topic(self, info: TopicInfo, states: list[PartitionState]) -> None:
        self._topics[info.name] = info
        self._topics_by_id[info.topic_id] = info
        self._partitions[info.name] = states

    def remove_topic(self, name: str) -> TopicInfo | None:
        info = self._topics.pop(name, None)
        if info is not None:
            self._topics_by_id.pop(info.topic_id, None)
            self._partitions.pop(name, None)
        return info

    # --- persistence (clusters of several nodes) ------------------------------------------------------------------

    def save(self, directory: str) -> None:
        data = {"version": _FORMAT_VERSION, "cluster_id": self.cluster_id, "metadata_offset": self.metadata_offset,
                "topics": [{"name": info.name, "topic_id": str(info.topic_id), "internal": info.is_internal,
                            "partitions": [state.to_json() for state in self._partitions[info.name]]}
                           for info in self._topics.values()]}
        write_atomically(os.path.join(directory, METADATA_FILE), json.dumps(data, indent=1).encode())

    @classmethod
    def load(cls, directory: str, nodes: dict[int, NodeInfo], cluster_id: str) -> ClusterMetadata:
        """The saved state, or an empty one (with `cluster_id`) when there is none. A topic's replicas on nodes
        this cluster no longer has stay listed (offline), as Kafka keeps an unregistered broker's replicas."""
        path = os.path.join(directory, METADATA_FILE)
        try:
            with open(path, "rb") as source:
                data = json.loads(source.read())
        except FileNotFoundError:
            return cls(cluster_id, nodes)
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: unreadable cluster metadata: {exc}") from None
        metadata = cls(data.get("cluster_id") or cluster_id, nodes)
        metadata.metadata_offset = int(data.get("metadata_offset", 0))
        for topic in data.get("topics", ()):
            states = [PartitionState.from_json(topic["name"], index, item)
                      for index, item in enumerate(topic["partitions"])]
            metadata.put_topic(TopicInfo(topic["name"], uuid.UUID(topic["topic_id"]), len(states),
                                         bool(topic["internal"])), states)
        return metadata


class GroupConfigs(ConfigSets):
    """The GROUP config overrides of every group: group id -> {config name: value text}. Values are checked by
    the caller (`compatbroker.coordinator.group_config.validate`); this only keeps and persists them."""

    FILE_NAME = GROUP_CONFIGS_FILE
    KEY = "groups"
    WHAT = "group configs"

    def groups(self) -> list[str]:
        return self.names()
