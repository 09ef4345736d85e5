"""The controller: the one place that changes the cluster's metadata, with the rules of Kafka's KRaft controller.

- Placement: new partitions spread over the registered nodes (`placement.py`), or a manual assignment checked as
  Kafka checks it. The ISR starts as the replicas that are alive.
- Elections: a leader is the first replica, in assignment order, that is alive and in the ISR. Every leader change
  bumps the leader epoch and the partition epoch; an ISR-only change bumps the partition epoch.
- A stopped node leaves every ISR, except where it is the last member: that partition goes offline (no leader) with
  the ISR naming it, and comes back when it does. Unless `unclean.leader.election.enable` (topic or broker) allows an
  out-of-sync replica to lead, with what only the ISR had lost.
- ISR changes come from replication (`shrink_isr`, `expand_isr`); a reassignment completes when every replica it
  adds is in the ISR.

Storage is not touched here: the cluster (`cluster.py`) creates and deletes replica logs around these calls. Each
change is saved (clusters of several nodes) and handed to the listeners, synchronously, in the order made.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from ..protocol.error_codes import ErrorCode
from .metadata import NO_LEADER, ClusterMetadata, PartitionState, TopicInfo
from .placement import assign_replicas
from .producer_id_blocks import ProducerIdBlocks

log = logging.getLogger(__name__)

PREFERRED = 0
UNCLEAN = 1

Listener = Callable[[list[PartitionState]], None]


class ControllerError(Exception):
    """A request the controller refuses: Kafka's error code and message."""

    def __init__(self, code: ErrorCode, message: str | None = None):
        super().__init__(message or code.name)
        self.code = code
        self.message = message


class Controller:
    def __init__(self, metadata: ClusterMetadata, *, save: Callable[[], None] | None = None,
                 unclean_allowed: Callable[[str], bool] = lambda topic: False,
                 producer_id_blocks: ProducerIdBlocks | None = None):
        self.metadata = metadata
        self._save = save
        self._unclean_allowed = unclean_allowed
        self._listeners: list[Listener] = []
        self.producer_id_blocks = producer_id_blocks

    async def allocate_producer_id_block(self, floor: int = 0) -> range:
        """AllocateProducerIds: the next block of producer ids for a node, at or above `floor`
        (producer_id_blocks.py)."""
        return await self.producer_id_blocks.allocate_block(floor)

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    # --- topics ---------------------------------------------------------------------------------------------------

    def plan_topic(self, name: str, partitions: int, replication_factor: int, *,
                   assignment: dict[int, list[int]] | None = None,
                   internal: bool = False) -> tuple[TopicInfo, list[PartitionState]]:
        """The new topic's id and partition states (ControllerError when they cannot be made); nothing changes
        until `commit_topic`."""
        if assignment:
            replicas = self._checked_assignment(assignment, start=0)
        else:
            if partitions < 1:
                raise ControllerError(ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid "
                                      "non-positive value.")
            replicas = self._placed(name, partitions, replication_factor, start=0)
        info = TopicInfo(name, uuid.uuid4(), len(replicas), internal)
        return info, [self._new_state(name, index, nodes) for index, nodes in enumerate(replicas)]

    def commit_topic(self, info: TopicInfo, states: list[PartitionState]) -> None:
        self.metadata.put_topic(info, states)
        self._changed(states)

    def plan_partitions(self, name: str, count: int, *,
                        assignment: list[list[int]] | None = None) -> list[PartitionState]:
        """The states of the partitions growing topic `name` to `count` (ControllerError when impossible)."""
        current = self.metadata.partitions(name)
        added = count - len(current)
        if assignment is not None:
            if len(assignment) != added:
                raise ControllerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                      f"Attempted to add {added} additional partition(s), but only "
                                      f"{len(assignment)} assignment(s) were specified.")
            replicas = self._checked_assignment(dict(enumerate(assignment, start=len(current))), start=len(current),
                                                replication_factor=len(current[0].replicas) if current else None)
        else:
            factor = len(current[0].replicas) if current else 1
            replicas = self._placed(name, added, factor, start=len(current))
        return [self._new_state(name, len(current) + index, nodes) for index, nodes in enumerate(replicas)]

    def commit_partitions(self, name: str, states: list[PartitionState]) -> TopicInfo:
        info = self.metadata.topic(name)
        grown = TopicInfo(info.name, info.topic_id, info.partitions + len(states), info.is_internal)
        self.metadata.put_topic(grown, self.metadata.partitions(name) + states)
        self._changed(states)
        return grown

    def remove_topic(self, name: str) -> TopicInfo | None:
        states = self.metadata.partitions(name)
        info = self.metadata.remove_topic(name)
        if info is not None:
            for state in states:  # listeners see every replica gone
                state.leader, state.isr = NO_LEADER, []
            self._changed(states)
        return info

    def _placed(self, name: str, partitions: int, replication_factor: int, *, start: int) -> list[list[int]]:
        nodes = self.metadata.nodes
        if replication_factor <= 0:
            raise ControllerError(ErrorCode.INVALID_REPLICATION_FACTOR, f"Invalid replication factor "
                                  f"{replication_factor}: the replication factor must be positive.")
        if replication_factor > len(nodes):
            raise ControllerError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                  f"Unable to replicate the partition {replication_factor} time(s): The target "
                                  f"replication factor of {replication_factor} cannot be reached because only "
                                  f"{len(nodes)} broker(s) are registered.")
        if not self.metadata.alive_nodes():
            raise ControllerError(ErrorCode.INVALID_REPLICATION_FACTOR, f"Unable to replicate the partition "
                                  f"{replication_factor} time(s): All brokers are currently fenced.")
        return assign_replicas(name, partitions, replication_factor,
                               [(node.node_id, node.rack) for node in nodes.values()], start_partition=start)

    def _checked_assignment(self, assignment: dict[int, list[int]], *, start: int,
                            replication_factor: int | None = None) -> list[list[int]]:
        """Kafka's checks of a manual assignment: partitions numbered from `start` without gaps, known nodes, no
        node twice, the same replica count everywhere, and at least one live replica per partition."""
        ordered = []
        for offset, index in enumerate(sorted(assignment)):
            if index != start + offset:
                raise ControllerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                      "partitions should be a consecutive 0-based integer sequence")
            replicas = list(assignment[index])
            if not replicas:
                raise ControllerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                      "The manual partition assignment includes an empty replica list.")
            for node_id in replicas:
                if node_id not in self.metadata.nodes:
                    raise ControllerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                          f"The manual partition assignment includes broker {node_id}, but no such "
                                          f"broker is registered.")
            duplicate = next((node_id for node_id in replicas if replicas.count(node_id) > 1), None)
            if duplicate is not None:
                raise ControllerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                      f"The manual partition assignment includes the broker {duplicate} more than "
                                      f"once.")
            if replication_factor is None:
                replication_factor = len(replicas)
            elif len(replicas) != replication_factor:
                raise ControllerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                      f"The manual partition assignment includes a partition with {len(replicas)} "
                                      f"replica(s), but this is not consistent with previous partitions, which have "
                                      f"{replication_factor} replica(s).")
            if not any(self.metadata.is_alive(node_id) for node_id in replicas):
                raise ControllerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                      f"All brokers specified in the manual partition assignment for partition "
                                      f"{index} are fenced or in controlled shutdown.")
            ordered.append(replicas)
        return ordered

    def _new_state(self, topic: str, partition: int, replicas: list[int]) -> PartitionState:
        isr = [node_id for node_id in replicas if self.metadata.is_alive(node_id)]
        return PartitionState(topic, partition, list(replicas), isr, isr[0] if isr else NO_LEADER)

    # --- leadership -----------------------------------------------------------------------------------------------

    def stop_node(self, node_id: int) -> None:
        """The node is gone (stopped or crashed): it leaves the ISRs and its partitions elect new leaders."""
        node = self.metadata.nodes[node_id]
        if not node.alive:
            return
        node.alive = False
        changed = []
        for state in self.metadata.all_partitions():
            if node_id not in state.replicas:
                continue
            if node_id in state.isr and len(state.isr) > 1:
                state.isr = [member for member in state.isr if member != node_id]
                state.partition_epoch += 1
                changed.append(state)
            if state.leader == node_id:
                self._elect(state, unclean=self._unclean_allowed(state.topic), exclude_leader=True)
                if state not in changed:
                    changed.append(state)
        log.info("node %d stopped: %d partition(s) changed", node_id, len(changed))
        self._changed(changed)

    def start_node(self, node_id: int) -> None:
        """The node is back: partitions that went offline with it in their ISR get it as leader again."""
        node = self.metadata.nodes[node_id]
        if node.alive:
            return
        node.alive = True
        changed = []
        for state in self.metadata.all_partitions():
            if state.leader == NO_LEADER and node_id in state.replicas:
                if self._elect(state, unclean=self._unclean_allowed(state.topic)):
                    changed.append(state)
        log.info("node %d started: %d partition(s) changed", node_id, len(changed))
        self._changed(changed)

    def isolate_node(self, node_id: int, isolated: bool = True) -> None:
        """Cut the node off from replication (it still serves clients and talks to the controller), or restore it;
        the ISR changes follow from replication lag."""
        self.metadata.nodes[node_id].isolated = isolated
        self._changed([])

    def move_leader(self, topic: str, partition: int, node_id: int) -> None:
        """Make `node_id` (alive, in the ISR) the leader, as a preferred election onto it would."""
        state = self._state(topic, partition)
        if state.leader == node_id:
            return
        if node_id not in state.isr or not self.metadata.is_alive(node_id):
            raise ControllerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                  f"node {node_id} is not a live in-sync replica of {topic}-{partition} "
                                  f"(ISR {state.isr})")
        self._set_leader(state, node_id)
        self._changed([state])

    def elect_leader(self, topic: str, partition: int, election: int) -> None:
        """ElectLeaders for one partition (ControllerError with Kafka's code when there is nothing to do or no one
        to elect)."""
        state = self._state(topic, partition)
        if election == PREFERRED:
            preferred = state.replicas[0]
            if state.leader == preferred:
                raise ControllerError(ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic "
                                      "partition.")
            if preferred not in state.isr or not self.metadata.is_alive(preferred):
                raise ControllerError(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                                      f"Failed to elect leader for partition {topic}-{partition} under strategy "
                                      f"PreferredReplicaPartitionLeaderElectionStrategy")
            self._set_leader(state, preferred)
        elif election == UNCLEAN:
            if state.leader != NO_LEADER:
                raise ControllerError(ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic "
                                      "partition.")
            if not self._elect(state, unclean=True):
                raise ControllerError(ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                                      f"Failed to elect leader for partition {topic}-{partition} under strategy "
                                      f"UncleanPartitionLeaderElectionStrategy")
        else:
            raise ControllerError(ErrorCode.INVALID_REQUEST, f"unknown election type {election}")
        self._changed([state])

    def rebalance_leaders(self) -> int:
        """Preferred elections for every partition whose preferred replica is alive, in the ISR and not leading;
        returns how many moved."""
        changed = []
        for state in self.metadata.all_partitions():
            preferred = state.replicas[0]
            if state.leader != preferred and preferred in state.isr and self.metadata.is_alive(preferred):
                self._set_leader(state, preferred)
                changed.append(state)
        if changed:
            self._changed(changed)
        return len(changed)

    def _elect(self, state: PartitionState, *, unclean: bool, exclude_leader: bool = False) -> bool:
        """Choose a leader from the live ISR (or, with `unclean`, any live replica, which becomes the whole ISR);
        without one the partition goes offline. Returns whether a leader was found."""
        alive = self.metadata.is_alive
        candidates = [node_id for node_id in state.replicas if node_id in state.isr and alive(node_id)
                      and not (exclude_leader and node_id == state.leader)]
        if candidates:
            self._set_leader(state, candidates[0])
            return True
        if unclean:
            outside = [node_id for node_id in state.replicas if alive(node_id)
                       and not (exclude_leader and node_id == state.leader)]
            if outside:
                log.warning("unclean leader election for %s-%d: node %d leads without being in sync (ISR %s); "
                            "records only the ISR had are lost", state.topic, state.partition, outside[0], state.isr)
                state.isr = [outside[0]]
                self._set_leader(state, outside[0])
                return True
        if state.leader != NO_LEADER:
            log.warning("%s-%d is offline: no live in-sync replica (ISR %s)", state.topic, state.partition,
                        state.isr)
            state.leader = NO_LEADER
            state.leader_epoch += 1
            state.partition_epoch += 1
        return False

    def _set_leader(self, state: PartitionState, node_id: int) -> None:
        state.leader = node_id
        state.leader_epoch += 1
        state.partition_epoch += 1

    # --- ISR (from replication) -----------------------------------------------------------------------------------

    def shrink_isr(self, topic: str, partition: int, node_id: int) -> bool:
        """The follower fell behind: out of the ISR (the leader and the last member stay). Returns whether it
        changed."""
        state = self.metadata.partition(topic, partition)
        if state is None or node_id not in state.isr or node_id == state.leader or len(state.isr) <= 1:
            return False
        state.isr = [member for member in state.isr if member != node_id]
        state.partition_epoch += 1
        log.info("%s-%d: ISR shrinks to %s (node %d fell behind)", topic, partition, state.isr, node_id)
        self._changed([state])
        return True

    def expand_isr(self, topic: str, partition: int, node_id: int) -> bool:
        """The follower caught up: back in the ISR; a reassignment waiting for it may complete."""
        state = self.metadata.partition(topic, partition)
        if state is None or node_id in state.isr or node_id not in state.replicas:
            return False
        state.isr = [member for member in state.replicas if member in state.isr or member == node_id]
        state.partition_epoch += 1
        log.info("%s-%d: ISR expands to %s (node %d caught up)", topic, partition, state.isr, node_id)
        self._maybe_complete_reassignment(state)
        self._changed([state])
        return True

    # --- reassignment (KIP-455) -----------------------------------------------------------------------------------

    def reassign(self, topic: str, partition: int, target: list[int] | None) -> None:
        """Start moving the partition to `target` replicas (None: cancel the one in progress). New replicas copy
        the data, then join the ISR; once all have, the replica set becomes `target` and leadership moves into it
        if needed."""
        state = self._state(topic, partition)
        if target is None:
            self._cancel_reassignment(state)
            return
        if not target or len(set(target)) != len(target):
            raise ControllerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                  "The manual partition assignment includes an empty replica list."
                                  if not target else "Duplicate replicas not allowed in partition assignment.")
        unknown = [node_id for node_id in target if node_id not in self.metadata.nodes]
        if unknown:
            raise ControllerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                  f"The manual partition assignment includes broker {unknown[0]}, but no such "
                                  f"broker is registered.")
        original = self._original_replicas(state)
        state.adding_replicas = [node_id for node_id in target if node_id not in original]
        state.removing_replicas = [node_id for node_id in original if node_id not in target]
        state.replicas = list(target) + [node_id for node_id in original if node_id not in target]
        state.partition_epoch += 1
        self._maybe_complete_reassignment(state)
        self._changed([state])

    def reassignments(self) -> list[PartitionState]:
        return [state for state in self.metadata.all_partitions()
                if state.adding_replicas or state.removing_replicas]

    def _original_replicas(self, state: PartitionState) -> list[int]:
        return [node_id for node_id in state.replicas if node_id not in state.adding_replicas]

    def _cancel_reassignment(self, state: PartitionState) -> None:
        if not state.adding_replicas and not state.removing_replicas:
            raise ControllerError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
        original = self._original_replicas(state)
        state.replicas = original
        state.isr = [node_id for node_id in state.isr if node_id in original] or state.isr
        state.adding_replicas, state.removing_replicas = [], []
        state.partition_epoch += 1
        if state.leader not in original:
            self._elect(state, unclean=False, exclude_leader=True)
        self._changed([state])

    def _maybe_complete_reassignment(self, state: PartitionState) -> None:
        if not (state.adding_replicas or state.removing_replicas):
            return
        if any(node_id not in state.isr for node_id in state.adding_replicas):
            return  # still copying
        target = [node_id for node_id in state.replicas if node_id not in state.removing_replicas]
        state.replicas = target
        state.isr = [node_id for node_id in state.isr if node_id in target]
        state.adding_replicas, state.removing_replicas = [], []
        state.partition_epoch += 1
        if state.leader not in target:
            self._elect(state, unclean=False, exclude_leader=True)
        log.info("%s-%d: reassignment complete, replicas %s, leader %d", state.topic, state.partition,
                 state.replicas, state.leader)

    # --- helpers --------------------------------------------------------------------------------------------------

    def _state(self, topic: str, partition: int) -> PartitionState:
        state = self.metadata.partition(topic, partition)
        if state is None:
            raise ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return state

    def _changed(self, states: list[PartitionState]) -> None:
        self.metadata.metadata_offset += 1
        if self._save is not None:
            try:
                self._save()
            except OSError as exc:  # the state in memory is right; the next change writes it again
                log.warning("cannot save the cluster metadata: %s", exc)
        for listener in self._listeners:
            listener(states)
