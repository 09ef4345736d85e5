"""KIP-932 share groups: membership, as Kafka 4.2's group coordinator keeps it.

`ShareGroups` (one per node's coordinator, `coordinator.share_groups`) holds the share groups of the
`__consumer_offsets` partitions this node leads, answers ShareGroupHeartbeat (`heartbeat.py`: joins, epochs,
leaves, the `simple` assignor of `assignor.py`) and expires members whose session runs out
(`share.session.timeout.ms` of the group, else `group.share.session.timeout.ms`). Every change is a batch of
ShareGroup* records (`records.py`) written to the group's partition and applied to memory once durable, through
the same function that replays them at load; heartbeats of one group are handled one at a time.

ShareFetch does not ask who is a member (Kafka's does not check membership either). A member that leaves or is
fenced does not release its acquired records here: as in Kafka 4.2 they are released when its share session
closes or its connection drops (compatbroker.share), else when their locks expire. Deleting a share group
(DeleteGroups, through `remove_group`) deletes its share-partition state too.

The share-partition state itself lives with each partition's leader (compatbroker.share's
SharePartitionManager); `read_share_offsets`, `alter_share_offsets` and `delete_share_state` reach it for the
admin APIs (DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets).
"""
from __future__ import annotations

import asyncio
import logging
import uuid
import weakref
from typing import NamedTuple

from ...protocol.error_codes import ErrorCode
from ..group_config import group_config
from ..membership import Timers
from ..offsets import OffsetWriteError
from . import records as share_records
from .assignor import NAME as ASSIGNOR_NAME
from .heartbeat import (HeartbeatAnswer, HeartbeatArgs, HeartbeatError, fence_records, plan_heartbeat, plan_leave,
                        request_error)
from .model import (GROUP_TYPE, JOIN_GROUP_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH, ShareGroup, ShareGroupState,
                    ShareMember)

__all__ = ["ASSIGNOR_NAME", "HeartbeatAnswer", "HeartbeatArgs", "ShareGroup", "ShareGroupState", "ShareGroups",
           "ShareMember", "ShareOffset", "alter_share_offsets", "delete_share_state", "read_share_offsets",
           "share_state_node"]

log = logging.getLogger(__name__)


class ShareGroups:
    """The share groups this node coordinates."""

    def __init__(self, coordinator, settings, *, timers: Timers | None = None):
        self.coordinator = coordinator
        self.settings = settings
        self.groups: dict[str, ShareGroup] = {}
        self.timers = timers or Timers()
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()  # held while used
        self._tasks: set[asyncio.Task] = set()

    @property
    def host(self):
        return self.coordinator.broker

    # --- ShareGroupHeartbeat ----------------------------------------------------------------------------------------

    async def heartbeat(self, args: HeartbeatArgs) -> HeartbeatAnswer:
        """Answer one ShareGroupHeartbeat (authorization is the handler's)."""
        refused = request_error(args)
        if refused is not None:
            return HeartbeatAnswer.refused(refused.error, refused.message)
        error = self.coordinator.error_for(args.group_id)
        if error is not ErrorCode.NONE:
            return HeartbeatAnswer.refused(error)
        async with self._lock(args.group_id):
            try:
                return await self._heartbeat(args)
            except HeartbeatError as exc:
                return HeartbeatAnswer.refused(exc.error, exc.message)
            except OffsetWriteError as exc:
                log.warning("group %s: heartbeat of %s could not be stored: %s", args.group_id, args.member_id, exc)
                return HeartbeatAnswer.refused(exc.error_code)

    async def _heartbeat(self, args: HeartbeatArgs) -> HeartbeatAnswer:
        group_id = args.group_id
        group = self._share_group(group_id, create=args.member_epoch == JOIN_GROUP_MEMBER_EPOCH,
                                  leave=args.member_epoch == LEAVE_GROUP_MEMBER_EPOCH)
        topics = self.host.topics()
        if args.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            plan = plan_leave(group, args.member_id, args.member_epoch, topics)
            await self._write(group_id, plan.records)
            self.timers.cancel(session_key(group_id, args.member_id))
            log.info("group %s: member %s left the share group", group_id, args.member_id)
            return plan.answer
        config = group_config(self.host, group_id)
        plan = plan_heartbeat(group, args, topics, max_size=self.settings.max_size,
                              heartbeat_interval_ms=config.share_heartbeat_interval_ms)
        if args.member_id not in group.members:
            log.info("group %s: member %s joins the share group", group_id, args.member_id)
        await self._write(group_id, plan.records)
        self._schedule_session(group_id, args.member_id, config.share_session_timeout_ms)
        return plan.answer

    def _share_group(self, group_id: str, *, create: bool, leave: bool = False) -> ShareGroup:
        """The share group, or a new unregistered one for a join; Kafka's GROUP_ID_NOT_FOUND answers otherwise."""
        group = self.groups.get(group_id)
        if group is not None:
            return group
        other = self.coordinator.group(group_id)
        if other is not None and getattr(other, "group_type", GROUP_TYPE) != GROUP_TYPE:
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if not create:  # a leave looks the group up as any group (Kafka's shareGroup(id)), a heartbeat as a share one
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND,
                                 f"Group {group_id} not found." if leave else f"Share group {group_id} not found.")
        return self._new_group(group_id)

    # --- the data path's questions ------------------------------------------------------------------------------------

    def describe(self, group_id: str) -> ShareGroup | None:
        return self.groups.get(group_id)

    def validate_offset_commit(self, group, member_id, generation_or_member_epoch, *, group_instance_id=None,
                               api_version=None, transactional=False) -> ErrorCode:
        """A share group has no committed offsets: Kafka answers GROUP_ID_NOT_FOUND ("... is not a consumer
        group.")."""
        return ErrorCode.GROUP_ID_NOT_FOUND

    # --- admin: share-partition state metadata ----------------------------------------------------------------------

    def empty_group(self, group_id: str) -> tuple[ShareGroup | None, ErrorCode, str | None]:
        """The share group whose offsets Alter/DeleteShareGroupOffsets may change, or Kafka's group-level error
        (and message): INVALID_GROUP_ID, NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS, GROUP_ID_NOT_FOUND (no
        such group, or not a share group), NON_EMPTY_GROUP."""
        if not group_id:
            return None, ErrorCode.INVALID_GROUP_ID, None
        error = self.coordinator.error_for(group_id)
        if error is not ErrorCode.NONE:
            return None, error, None
        group = self.groups.get(group_id)
        if group is None:
            other = self.coordinator.group(group_id)
            message = f"Group {group_id} not found." if other is None else f"Group {group_id} is not a share group."
            return None, ErrorCode.GROUP_ID_NOT_FOUND, message
        if not group.is_empty():
            return None, ErrorCode.NON_EMPTY_GROUP, None
        return group, ErrorCode.NONE, None

    def initialized_partitions(self, group_id: str) -> dict[uuid.UUID, frozenset[int]]:
        group = self.groups.get(group_id)
        return {} if group is None else group.initialized_partitions()

    async def record_state(self, group: ShareGroup, initialized: dict, deleting: dict) -> None:
        """Write a new ShareGroupStatePartitionMetadata for `group` (AlterShareGroupOffsets initializes topics,
        DeleteShareGroupOffsets moves them to deleting and then drops them)."""
        async with self._lock(group.group_id):
            await self._write(group.group_id,
                              [share_records.state_metadata_record(group.group_id, initialized, deleting)])

    # --- records, load and unload -------------------------------------------------------------------------------------

    def replay(self, record) -> None:
        """The loader's hand-over of one ShareGroup* record (a TypedRecord), in log order."""
        share_records.apply(self.groups, record, self._new_group)

    def on_loaded(self, group_ids) -> None:
        """A partition is loaded: the members of its share groups get a fresh session, as Kafka's onLoaded does."""
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None:
                continue
            timeout_ms = group_config(self.host, group_id).share_session_timeout_ms
            for member_id in group.members:
                self._schedule_session(group_id, member_id, timeout_ms)

    def unload_group(self, group_id: str) -> None:
        """Another node coordinates the group now: drop it and its timers."""
        group = self.groups.pop(group_id, None)
        if group is not None:
            self._cancel_sessions(group)
            group.mark_dead()

    def remove_group(self, group_id: str) -> None:
        """DeleteGroups of an (Empty) share group: gone from memory at once, its share-partition state deleted in
        the background (the façade writes the records' tombstones)."""
        group = self.groups.pop(group_id, None)
        if group is None:
            return
        self._cancel_sessions(group)
        group.mark_dead()
        targets = [(topic_id, partition) for topic_id, partitions in group.initialized_partitions().items()
                   for partition in partitions]
        for topic_id in group.deleting_topics:  # a deletion of offsets left unfinished
            topic = self.host.topic_by_id(topic_id)
            targets += [(topic_id, partition) for partition in range(topic.partitions if topic else 0)]
        if targets:
            self._spawn(delete_share_state(self.host, group_id, targets))

    def tombstones(self, group_id: str) -> list[tuple[bytes, None]]:
        group = self.groups.get(group_id)
        return [] if group is None else share_records.encode(share_records.group_tombstones(group))

    async def stop(self) -> None:
        self.timers.cancel_all()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # --- internals ----------------------------------------------------------------------------------------------------

    async def _write(self, group_id: str, records: list) -> None:
        """Store the records, then apply them to memory (nothing changes when the write fails)."""
        if not records:
            return
        await self.coordinator.offsets.store_records(group_id, share_records.encode(records))
        for record in records:
            share_records.apply(self.groups, record, self._new_group)

    def _new_group(self, group_id: str) -> ShareGroup:
        return ShareGroup(group_id, now_ms=self.host.now_ms)

    def _lock(self, group_id: str) -> asyncio.Lock:
        lock = self._locks.get(group_id)
        if lock is None:
            lock = self._locks[group_id] = asyncio.Lock()
        return lock

    def _schedule_session(self, group_id: str, member_id: str, timeout_ms: int) -> None:
        self.timers.schedule(session_key(group_id, member_id), timeout_ms,
                             lambda: self._spawn(self._expire(group_id, member_id)))

    def _cancel_sessions(self, group: ShareGroup) -> None:
        for member_id in group.members:
            self.timers.cancel(session_key(group.group_id, member_id))

    async def _expire(self, group_id: str, member_id: str) -> None:
        """The member's session ran out: fence it (Kafka's shareGroupFenceMemberOperation)."""
        async with self._lock(group_id):
            group = self.groups.get(group_id)
            if group is None or member_id not in group.members:
                return
            try:
                await self._write(group_id, fence_records(group, member_id, self.host.topics()))
            except OffsetWriteError as exc:
                log.warning("group %s: could not fence member %s: %s", group_id, member_id, exc)
                return
            log.info("group %s: member %s fenced from the share group because the member session expired",
                     group_id, member_id)

    def _spawn(self, coroutine) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def session_key(group_id: str, member_id: str) -> tuple:
    return ("share-session", group_id, member_id)


# --- the share-partition state (compatbroker.share), for the admin APIs ------------------------------------------

def share_state_node(host, topic: str, partition: int):
    """The node keeping the share-partition state of a topic partition (its leader); None when it is offline."""
    state = host.partition_state(topic, partition)
    if state is None or state.leader < 0:
        return None
    return host.cluster.nodes.get(state.leader)


async def call_share_partitions(node, method: str, *args):
    """Await a SharePartitionManager method of `node`. Imported here, not at the top: the share data path reads
    the coordinator's group configs, so a top-level import would be circular."""
    from ...share import share_partitions_of
    return await getattr(share_partitions_of(node), method)(*args)


class ShareOffset(NamedTuple):
    """A share partition's state as DescribeShareGroupOffsets reports it (-1: none / not known)."""

    start_offset: int = -1
    leader_epoch: int = 0
    lag: int = -1


async def read_share_offsets(host, group_id: str, topic, partitions: list[int]) -> dict[int, ShareOffset]:
    """The share-partition start offset, leader epoch and lag of each of `partitions` of `topic` (a TopicView) for
    the group; a partition without state, offline or unknown reads as `ShareOffset()` (Kafka's -1)."""
    answers = {partition: ShareOffset() for partition in partitions}
    for node, node_partitions in _by_node(host, topic, partitions).items():
        try:
            read = await call_share_partitions(node, "read_offsets", group_id, topic.topic_id, node_partitions)
        except Exception as exc:  # noqa: BLE001 - absence of data, as Kafka answers a persister error
            log.warning("group %s: could not read share state of %s on node %d: %s", group_id, topic.name,
                        node.node_id, exc)
            continue
        for partition, (start_offset, leader_epoch, lag, error) in (read or {}).items():
            if error == ErrorCode.NONE and start_offset >= 0:
                answers[partition] = ShareOffset(start_offset, leader_epoch, lag)
    return answers


async def alter_share_offsets(host, group_id: str, topic, offsets: dict[int, int]) -> dict[int, ErrorCode]:
    """Set the share-partition start offset of each partition of `topic` for the group; the error of each."""
    errors = {partition: ErrorCode.NOT_LEADER_OR_FOLLOWER for partition in offsets}
    for node, node_partitions in _by_node(host, topic, list(offsets)).items():
        wanted = {(topic.topic_id, partition): offsets[partition] for partition in node_partitions}
        try:
            answered = await call_share_partitions(node, "alter_start_offsets", group_id, wanted) or {}
        except Exception as exc:  # noqa: BLE001 - reported per partition, as Kafka's persister errors are
            log.warning("group %s: could not alter share state of %s: %s", group_id, topic.name, exc)
            answered = {key: ErrorCode.UNKNOWN_SERVER_ERROR for key in wanted}
        for (_, partition) in wanted:
            errors[partition] = ErrorCode(answered.get((topic.topic_id, partition), ErrorCode.NONE))
    return errors


async def delete_share_state(host, group_id: str, targets: list[tuple[uuid.UUID, int]]) -> dict:
    """Delete the group's share-partition state of `targets` on the nodes keeping it; the error of each target
    (a deleted topic has no state left: NONE)."""
    errors: dict[tuple[uuid.UUID, int], ErrorCode] = {}
    by_topic: dict[uuid.UUID, list[int]] = {}
    for topic_id, partition in targets:
        by_topic.setdefault(topic_id, []).append(partition)
    for topic_id, partitions in by_topic.items():
        topic = host.topic_by_id(topic_id)
        if topic is None:
            errors.update({(topic_id, partition): ErrorCode.NONE for partition in partitions})
            continue
        errors.update({(topic_id, partition): ErrorCode.NOT_LEADER_OR_FOLLOWER for partition in partitions})
        for node, node_partitions in _by_node(host, topic, partitions).items():
            wanted = [(topic_id, partition) for partition in node_partitions]
            try:
                answered = await call_share_partitions(node, "delete_state", group_id, wanted) or {}
            except Exception as exc:  # noqa: BLE001 - reported per partition, as Kafka's persister errors are
                log.warning("group %s: could not delete share state of %s: %s", group_id, topic.name, exc)
                answered = {key: ErrorCode.UNKNOWN_SERVER_ERROR for key in wanted}
            errors.update({key: ErrorCode(answered.get(key, ErrorCode.NONE)) for key in wanted})
    return errors


def _by_node(host, topic, partitions: list[int]) -> dict:
    """The existing `partitions` of `topic` grouped by the node keeping their share state (offline ones left out)."""
    grouped: dict = {}
    nodes = {}
    for partition in partitions:
        if not 0 <= partition < topic.partitions:
            continue
        node = share_state_node(host, topic.name, partition)
        if node is not None:
            nodes[node.node_id] = node
            grouped.setdefault(node.node_id, []).append(partition)
    return {nodes[node_id]: node_partitions for node_id, node_partitions in grouped.items()}
