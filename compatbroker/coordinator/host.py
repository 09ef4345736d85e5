"""What the coordinators need from the node they run on: `CoordinatorHost`, a structural interface.

The coordinators (groups, transactions) and producer id allocation sit below the node (compatbroker.broker) and
never import it; the node satisfies these Protocols as it is (typing checks the fit, nothing registers). Only what
is listed here may be used by code under compatbroker/coordinator and by compatbroker/producer_ids.py.

The cluster side is reached through `host.cluster`: the other nodes (transaction markers go to a partition's
leader node), replication (a coordinator write is acknowledged once the in-sync replicas have it) and the
controller (blocks of producer ids, unique across the cluster).
"""
from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import uuid

    from ..protocol.error_codes import ErrorCode
    from ..storage import Log


class TopicView(Protocol):
    name: str
    topic_id: uuid.UUID
    partitions: int
    is_internal: bool


class PartitionView(Protocol):
    replicas: list[int]
    isr: list[int]
    leader: int            # -1 (NO_LEADER) when the partition is offline
    leader_epoch: int


class ReplicationView(Protocol):
    async def wait_for_isr(self, topic: str, partition: int, required_offset: int,
                           timeout_s: float) -> ErrorCode: ...


class ProducerIdBlockSource(Protocol):
    async def allocate_producer_id_block(self, floor: int = 0) -> range: ...


class ClusterView(Protocol):
    nodes: Mapping[int, CoordinatorHost]
    replication: ReplicationView
    controller: ProducerIdBlockSource


class CoordinatorHost(Protocol):
    """The node, as its coordinators see it."""

    node_id: int
    config: Any                      # compatbroker.config.BrokerConfig
    cluster: ClusterView
    coordinator: Any                 # this node's group coordinator (compatbroker.coordinator.Coordinator)
    transactions: Any                # this node's TransactionCoordinator
    producer_ids: Any                # this node's ProducerIds
    finalized_transaction_version: int

    @property
    def logs(self) -> Any: ...       # the node's LogManager: data_dir, logs (its replicas)

    def now_ms(self) -> int: ...

    def topic(self, name: str) -> TopicView | None: ...

    def topics(self) -> Mapping[str, TopicView]: ...       # every topic of the cluster, by name

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicView | None: ...

    def has_partition(self, topic: str, partition: int) -> bool: ...

    def get_log(self, topic: str, partition: int) -> Log | None: ...

    def partition_state(self, topic: str, partition: int) -> PartitionView | None: ...

    def is_leader(self, topic: str, partition: int) -> bool: ...

    def leader_epoch(self, topic: str, partition: int) -> int: ...

    def alive_node_ids(self) -> list[int]: ...

    def create_topic(self, name: str, partitions: int | None = None, configs: dict | None = None, *,
                     replication_factor: int | None = None) -> TopicView: ...

    def endpoint_of(self, node_id: int, listener_host: str, listener_port: int) -> tuple[str, int] | None: ...

    def notify_appended(self, topic: str, partition: int) -> None: ...

    async def make_durable(self, logs: Collection[Log]) -> None: ...
