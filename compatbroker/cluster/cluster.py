"""A cluster: the nodes of one process, their shared controller state, and replication between them.

Each node is a broker (`compatbroker.broker.Broker`) with its own log directories and listeners; the cluster holds
them by node id and does what spans nodes: loading the metadata at start, creating and deleting a topic's replica
logs on the nodes that host them (all or nothing), and the faults tests ask for (a node stopped, started,
isolated). A single broker is a cluster of one: its metadata is rebuilt from its partition directories at start
and never written, so its data directory keeps Kafka's single-node layout.

Nodes of a multi-node cluster keep their logs in `<log dir>/node-<id>/`; the metadata lives in
`<first log dir>/cluster-metadata.json`. The security state (settings, ACLs, SCRAM users, TLS contexts:
`compatbroker.security`) is the cluster's too, shared by its nodes.
"""
from __future__ import annotations

import asyncio
import logging
import os
import uuid

from ..config import BrokerConfig
from ..storage.checkpoints import uuid_to_string
from ..protocol.error_codes import ErrorCode
from ..security.broker_security import BrokerSecurity
from ..topic_names import is_internal
from .controller import Controller, ControllerError
from .metadata import METADATA_FILE, ClusterMetadata, GroupConfigs, NodeInfo, PartitionState, TopicInfo
from .producer_id_blocks import PRODUCER_ID_BLOCK_FILE, ProducerIdBlocks
from .replication import Replication

log = logging.getLogger(__name__)


def node_data_dirs(config: BrokerConfig, node_id: int) -> tuple[str, ...]:
    return tuple(os.path.join(path, f"node-{node_id}") for path in config.data_dirs)


class Cluster:
    def __init__(self, config: BrokerConfig, *, multi_node: bool = False):
        self.config = config
        self.multi_node = multi_node
        self.nodes: dict = {}  # node id -> Broker, in id order
        self.metadata: ClusterMetadata | None = None
        self.controller: Controller | None = None
        self.replication: Replication | None = None
        self.started = False
        self._rebalancer: asyncio.Task | None = None
        # ACLs, SCRAM users and TLS contexts: one for the whole cluster, as Kafka keeps them in its metadata
        self.security = BrokerSecurity(config.security, config.data_dir)
        # the dynamic broker configs and the client telemetry, one each per cluster, made on first use by
        # compatbroker.dynamic_config.store_of and compatbroker.telemetry.telemetry_of
        self.broker_configs = None
        self.client_telemetry = None

    def add_node(self, node) -> None:
        if node.node_id in self.nodes:
            raise ValueError(f"node id {node.node_id} appears twice")
        self.nodes[node.node_id] = node
        self.nodes = dict(sorted(self.nodes.items()))

    @property
    def data_dir(self) -> str:
        return self.config.data_dir

    # --- life cycle -----------------------------------------------------------------------------------------------

    def startup(self) -> None:
        """Load every node's logs, then the metadata (idempotent)."""
        if self.started:
            return
        infos = {node_id: NodeInfo(node_id, node.rack) for node_id, node in self.nodes.items()}
        self.security.open()
        if self.multi_node:  # one cluster id for every node: the saved one, or a new one on first start
            os.makedirs(self.data_dir, exist_ok=True)
            first_start = not os.path.exists(os.path.join(self.data_dir, METADATA_FILE))
            metadata = ClusterMetadata.load(self.data_dir, infos, uuid_to_string(uuid.uuid4()))
            if first_start:  # keep the new cluster id before the nodes' meta.properties take it
                metadata.save(self.data_dir)
            for node in self.nodes.values():
                node.logs.cluster_id = metadata.cluster_id
        for node in self.nodes.values():
            node.load_logs()  # a node directory of another cluster fails here (its meta.properties)
        if not self.multi_node:
            metadata = ClusterMetadata(next(iter(self.nodes.values())).logs.cluster_id, infos)
        metadata.group_configs = GroupConfigs.load(self.data_dir)  # per-group configs, cluster-wide
        self.metadata = metadata
        self.controller = Controller(metadata, save=self._save if self.multi_node else None,
                                     unclean_allowed=self._unclean_allowed,
                                     producer_id_blocks=ProducerIdBlocks(os.path.join(self.data_dir,
                                                                                      PRODUCER_ID_BLOCK_FILE)))
        if self.multi_node:
            self._open_replica_logs()
        else:
            self._adopt_local_topics(next(iter(self.nodes.values())))
        self.replication = Replication(self)
        self.controller.add_listener(self.replication.on_partitions_changed)
        for node in self.nodes.values():
            self.controller.add_listener(node.on_partitions_changed)
        self.started = True

    def start_background_work(self) -> None:
        for node in self.nodes.values():
            node.start_background_work()
        self.replication.start()
        if self.multi_node and self.config.auto_leader_rebalance_enable:
            self._rebalancer = asyncio.get_running_loop().create_task(self._rebalance_leaders_periodically(),
                                                                      name="compatbroker leader rebalance")

    async def shutdown(self) -> None:
        if self._rebalancer is not None:
            self._rebalancer.cancel()
            await asyncio.gather(self._rebalancer, return_exceptions=True)
            self._rebalancer = None
        if self.replication is not None:
            await self.replication.stop()
        for node in self.nodes.values():
            await node.shutdown()

    def _save(self) -> None:
        self.metadata.save(self.data_dir)

    def _unclean_allowed(self, topic: str) -> bool:
        node = next(iter(self.nodes.values()))
        overrides = node.logs.topic_overrides.get(topic, {})
        value = overrides.get("unclean.leader.election.enable")
        if value is None:
            return self.config.unclean_leader_election_enable
        return str(value).strip().lower() == "true"

    def _adopt_local_topics(self, node) -> None:
        """A single node: every partition found on disk is a topic partition it leads (today's layout)."""
        counts: dict[str, int] = {}
        for topic, partition in node.logs.logs:
            counts[topic] = max(counts.get(topic, 0), partition + 1)
        now_ms = node.now_ms()
        for topic, count in sorted(counts.items()):
            states = []
            for partition in range(count):  # a lost partition directory comes back empty: a gap would confuse
                replica = node.logs.create_log(topic, partition, now_ms=now_ms)  # every client
                states.append(PartitionState(topic, partition, [node.node_id], [node.node_id], node.node_id,
                                             max(replica.epochs.latest_epoch, 0)))
            topic_id = node.logs.topic_ids.get(topic) or node.assign_topic_id(topic, count)
            self.metadata.put_topic(TopicInfo(topic, topic_id, count, is_internal(topic)), states)

    def _open_replica_logs(self) -> None:
        """Each node hosts a log for each replica assigned to it (an empty one where its directory was lost:
        replication fills it); partitions found on a node that is no replica of them are deleted."""
        for node_id, node in self.nodes.items():
            now_ms = node.now_ms()
            for info in self.metadata.topics().values():
                node.logs.topic_ids[info.name] = info.topic_id
                for state in self.metadata.partitions(info.name):
                    if node_id in state.replicas:
                        node.logs.create_log(info.name, state.partition, now_ms=now_ms)
            for topic, partition in list(node.logs.logs):
                state = self.metadata.partition(topic, partition)
                if state is None or node_id not in state.replicas:
                    log.info("node %d: deleting %s-%d, which it no longer hosts", node_id, topic, partition)
                    node.logs.delete_log(topic, partition)

    # --- topics (all or nothing across nodes) ---------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int, replication_factor: int, *, configs: dict | None = None,
                     assignment: dict[int, list[int]] | None = None) -> TopicInfo:
        existing = self.metadata.topic(name)
        if existing is not None:
            return existing
        info, states = self.controller.plan_topic(name, partitions, replication_factor, assignment=assignment,
                                                  internal=is_internal(name))
        topic_id = self._create_replica_logs(info, states, configs)
        info = TopicInfo(info.name, topic_id, info.partitions, info.is_internal)
        self.controller.commit_topic(info, states)
        log.info("created topic %s with %d partition(s), replication factor %d, id %s", name, info.partitions,
                 len(states[0].replicas), topic_id)
        return info

    def _create_replica_logs(self, info: TopicInfo, states: list[PartitionState], configs: dict | None) -> uuid.UUID:
        """Every node learns the topic (id, config overrides); those hosting a replica create its log. A failure
        removes what this call made on every node, then raises."""
        done = []
        topic_id = info.topic_id
        try:
            for node_id, node in self.nodes.items():
                hosted = [state.partition for state in states if node_id in state.replicas]
                if not self.multi_node:  # today's single-node call, which may reuse a topic id found on disk
                    topic_id = node.logs.create_topic(info.name, len(hosted), now_ms=node.now_ms(),
                                                      overrides=configs)
                else:
                    node.logs.create_topic(info.name, 0, now_ms=node.now_ms(), topic_id=topic_id, overrides=configs)
                    node.logs.create_partitions(info.name, hosted, now_ms=node.now_ms())
                done.append(node)
        except BaseException:
            for node in done:
                try:
                    node.logs.delete_topic(info.name)
                except OSError as exc:
                    log.warning("node %d: cannot remove the partial topic %s: %s", node.node_id, info.name, exc)
            raise
        return topic_id

    def add_partitions(self, name: str, count: int, *, assignment: list[list[int]] | None = None) -> TopicInfo:
        info = self.metadata.topic(name)
        if count <= info.partitions:
            raise ValueError(f"topic {name} has {info.partitions} partition(s): {count} would not be an increase")
        states = self.controller.plan_partitions(name, count, assignment=assignment)
        done = []
        try:
            for node_id, node in self.nodes.items():
                hosted = [state.partition for state in states if node_id in state.replicas]
                node.logs.create_partitions(name, hosted, now_ms=node.now_ms())
                done.append((node, hosted))
        except BaseException:
            for node, hosted in done:
                for partition in hosted:
                    try:
                        node.logs.delete_log(name, partition)
                    except OSError:
                        pass  # best effort; what is left is deleted at start as a partition no one hosts
            raise
        grown = self.controller.commit_partitions(name, states)
        log.info("topic %s grown from %d to %d partition(s)", name, info.partitions, count)
        return grown

    def remove_topic(self, name: str) -> TopicInfo | None:
        """Forget the topic (its replicas' logs are the nodes' to delete)."""
        return self.controller.remove_topic(name)

    async def _rebalance_leaders_periodically(self) -> None:
        """auto.leader.rebalance.enable: every leader.imbalance.check.interval.seconds, leadership goes back to
        the preferred replicas that can take it (as Kafka's KRaft controller does)."""
        while True:
            await asyncio.sleep(self.config.leader_imbalance_check_interval_seconds)
            try:
                moved = self.controller.rebalance_leaders()
            except Exception:  # noqa: BLE001 - a bug; the next interval tries again
                log.exception("leader rebalance failed")
                continue
            if moved:
                log.info("leader rebalance: %d partition(s) back on their preferred replica", moved)

    # --- faults (tests of clients) --------------------------------------------------------------------------------

    def stop_node(self, node_id: int) -> None:
        """The controller's side of a node stopping: leadership fails over. The caller closes its listeners."""
        self._node(node_id)
        self.controller.stop_node(node_id)

    def start_node(self, node_id: int) -> None:
        self._node(node_id)
        self.controller.start_node(node_id)

    def isolate_node(self, node_id: int, isolated: bool = True) -> None:
        self._node(node_id)
        self.controller.isolate_node(node_id, isolated)

    def move_leader(self, topic: str, partition: int, node_id: int) -> None:
        self.controller.move_leader(topic, partition, node_id)

    def leader_of(self, topic: str, partition: int) -> int:
        state = self.metadata.partition(topic, partition)
        if state is None:
            raise ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return state.leader

    def _node(self, node_id: int):
        node = self.nodes.get(node_id)
        if node is None:
            raise ValueError(f"no node {node_id}; the nodes are {', '.join(map(str, self.nodes))}")
        return node
