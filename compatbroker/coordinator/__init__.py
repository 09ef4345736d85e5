"""The group coordinator: classic groups (`membership.py`, `group.py`), KIP-848 consumer groups
(`consumer_group/`), KIP-932 share groups (`share_group/`; their records are delivered by compatbroker.share) and
committed offsets (`offsets.py`, `loader.py`), all kept durable in `__consumer_offsets`. Offsets committed inside a
transaction (TxnOffsetCommit) stay pending there until the transaction coordinator's marker completes them.

Group ids share one namespace: a group is classic, consumer or share (`group_type`), and each request is answered
by the manager of its group's type. The records of consumer and share groups (record types 3 to 16,
`group_records.py`) are replayed in log order into their managers (`replay_typed`), which start their members'
sessions once the partition is loaded (`on_groups_loaded`).

`Coordinator` is the one object handlers talk to; `coordinator_of(node)` finds (or creates and starts) the
node's. Each node of a cluster has its own, below the node: it sees the node only through `host.CoordinatorHost`.
A node coordinates the groups of the partitions of `__consumer_offsets` it leads (`ownership.py`); the node calls
`on_leadership_change` when that changes: gained partitions are replayed from the node's replica, the groups of
lost ones are dropped. A single node leads every partition, so it coordinates every group.

`error_for(group_id)` is what a group request is answered before anything else: NOT_COORDINATOR for a group
another node coordinates, COORDINATOR_LOAD_IN_PROGRESS until the first load is done and while the group's
partition loads (Heartbeat: NONE then, as Kafka does, so that members keep their session).

A group that exists only because offsets were committed for it (a consumer using assign(), an admin tool) is a
"simple" group: Empty, with no protocol type. Kafka materialises one for every group id with committed offsets;
so does `group()` here, on first sight.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable

from ..protocol.error_codes import ErrorCode
from .group import GROUP_TYPE, Group, GroupState
from .group_records import SHARE_GROUP_RECORD_TYPES
from .host import CoordinatorHost
from .membership import GroupSettings, Membership, write_error
from .consumer_group import ConsumerGroups
from .settings import ConsumerGroupSettings, ShareGroupSettings
from .share_group import ShareGroups

__all__ = ["Coordinator", "Group", "GroupSettings", "GroupState", "coordinator_of"]

log = logging.getLogger(__name__)


class Coordinator:
    """The node's group coordinator: classic, consumer and share groups, and committed offsets."""

    def __init__(self, broker: CoordinatorHost, *, settings: GroupSettings | None = None, offset_store_factory=None):
        if offset_store_factory is None:
            from .offsets import OffsetStore as offset_store_factory
        self.broker = broker
        self.membership = Membership(settings=settings or GroupSettings.from_config(broker.config),
                                     now_ms=broker.now_ms, store_group=self._store_group)
        self.offsets = offset_store_factory(broker, self)
        self.consumer_settings = ConsumerGroupSettings.from_config(broker.config)
        self.share_settings = ShareGroupSettings.from_config(broker.config)
        self.consumer_groups = ConsumerGroups(self, self.consumer_settings)
        self.share_groups = ShareGroups(self, self.share_settings)
        self._starting: asyncio.Task | None = None

    # --- life cycle -----------------------------------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        """The first load is done and no partition this node leads is loading."""
        return bool(self.offsets.loaded) and not self.offsets.is_loading()

    @property
    def settings(self) -> GroupSettings:
        return self.membership.settings

    async def start(self) -> None:
        """Replay the partitions of `__consumer_offsets` this node leads (offsets, then group metadata); calling it
        again waits for the first (the store's load does)."""
        await self.offsets.load()

    def on_leadership_change(self, led: Iterable[int], lost: Iterable[int]) -> None:
        """The node now leads the partitions `led` of `__consumer_offsets` and no longer leads `lost`: load the
        first, drop the groups of the second."""
        self.offsets.ownership.on_leadership_change(led, lost)

    def error_for(self, group_id: str) -> ErrorCode:
        """NONE when this node coordinates the group and has loaded it, else NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS."""
        return self.offsets.error_for(group_id)

    def unload_groups(self, partition: int) -> None:
        """The store's hand-over when this node stops leading `partition`: its groups leave memory, their timers
        stop and their parked requests answer NOT_COORDINATOR."""
        partition_for = self.offsets.partition_for
        doomed = [group_id for group_id in self._group_ids() if partition_for(group_id) == partition]
        for group_id in doomed:
            self._manager_of(group_id).unload_group(group_id)
        if doomed:
            log.info("no longer coordinating %d group(s) of partition %d", len(doomed), partition)

    def start_soon(self) -> None:
        """Start loading in the background (from a running event loop), for a coordinator made on first use."""
        if self._starting is None:
            self._starting = asyncio.get_running_loop().create_task(self.offsets.load(),
                                                                    name="compatbroker coordinator load")
            self._starting.add_done_callback(_log_load_failure)

    async def stop(self) -> None:
        """Cancel the timers (sessions, join and sync phases, offset retention); storage is the broker's to close."""
        await self.membership.stop()
        for manager in self._typed_managers():
            await manager.stop()
        await self.offsets.stop()

    # --- groups ---------------------------------------------------------------------------------------------------

    def group(self, group_id: str):
        """The group of any type (a classic `Group`, a `ConsumerGroup`, a `ShareGroup`), including a simple classic
        group for a group id that only has committed offsets; None when there is none."""
        for manager in self._typed_managers():
            group = manager.groups.get(group_id)
            if group is not None:
                return group
        group = self.membership.groups.get(group_id)
        if group is None and group_id in self.offsets.groups_with_offsets():
            group = self.membership.get_or_create(group_id)
        return group

    def group_type(self, group_id: str) -> str | None:
        """"classic", "consumer" or "share" for a group this node knows, else None."""
        group = self.group(group_id)
        return None if group is None else group.group_type

    def all_groups(self) -> list:
        typed = [group for manager in self._typed_managers() for group in manager.groups.values()]
        typed_ids = {group.group_id for group in typed}
        for group_id in self.offsets.groups_with_offsets() - typed_ids:
            self.membership.get_or_create(group_id)  # a simple group for each id that only has offsets
        return list(self.membership.groups.values()) + typed

    def replay_typed(self, record) -> None:
        """The loader's hand-over of one record of a consumer group (types 3-8, 16) or a share group (9-15)."""
        manager = self.share_groups if record.record_type in SHARE_GROUP_RECORD_TYPES else self.consumer_groups
        manager.replay(record)

    def on_groups_loaded(self, group_ids: Iterable[str]) -> None:
        """A partition of `__consumer_offsets` is loaded: the managers start the sessions of its groups' members."""
        group_ids = list(group_ids)
        for manager in self._typed_managers():
            manager.on_loaded(group_ids)

    def load_group_metadata(self, group_id: str, value) -> None:
        """The loader's hand-over of a group's last metadata record (None: a tombstone, the group is gone)."""
        if value is None:
            self.membership.remove_group(group_id)
        else:
            self.membership.load(Group.from_metadata_value(group_id, value))

    def on_offsets_deleted(self, group_id: str) -> None:
        """The group's last committed offset is gone (retention, OffsetDelete): an Empty classic or consumer group
        goes with it, as Kafka's cleanup does, and its records get tombstones. A share group stays (its state is
        not committed offsets). A consumer group goes under its lock, so that a member joining meanwhile keeps it."""
        group = self.group(group_id)
        if not self._empty_without_offsets(group):
            return
        if group.group_type == "consumer":
            self.membership.spawn(self._remove_empty_consumer_group(group_id))
            return
        self.membership.remove_group(group_id)
        log.info("group %s is empty and has no committed offsets left: removed", group_id)
        self.membership.spawn(self._delete_quietly(group_id))

    def _empty_without_offsets(self, group) -> bool:
        return (group is not None and group.group_type != "share" and str(group.state) == GroupState.EMPTY
                and group.group_id not in self.offsets.groups_with_offsets())

    async def _remove_empty_consumer_group(self, group_id: str) -> None:
        async with self.consumer_groups.lock(group_id):
            if not self._empty_without_offsets(self.consumer_groups.groups.get(group_id)):
                return  # a member joined, or the group went, while the lock was awaited
            records = self.consumer_groups.tombstones(group_id)
            self.consumer_groups.remove_group(group_id)
            log.info("consumer group %s is empty and has no committed offsets left: removed", group_id)
            await self._delete_quietly(group_id, records)

    # --- offsets --------------------------------------------------------------------------------------------------

    def validate_offset_commit(self, group_id: str, generation_id: int, member_id: str,
                               group_instance_id: str | None, *, api_version: int | None = None,
                               transactional: bool = False) -> ErrorCode:
        """Whether an OffsetCommit (or TxnOffsetCommit) may be stored, by Kafka's rules. A commit with generation
        -1 for an unknown group creates it as a simple group; a member's commit for an unknown group is
        GROUP_ID_NOT_FOUND from OffsetCommit v9, ILLEGAL_GENERATION before (and when the version is not given)."""
        error = self.error_for(group_id)
        if error is not ErrorCode.NONE:
            return error
        group = self.group(group_id)
        if group is None:
            if generation_id >= 0:
                new_api = api_version is not None and api_version >= 9 and not transactional
                return ErrorCode.GROUP_ID_NOT_FOUND if new_api else ErrorCode.ILLEGAL_GENERATION
            group = self.membership.get_or_create(group_id)
            log.info("group %s created by an offset commit outside group management", group_id)
        if group.group_type != GROUP_TYPE:  # a consumer group (its classic members included) or a share group
            return self._manager_of(group_id).validate_offset_commit(
                group, member_id, generation_id, group_instance_id=group_instance_id, api_version=api_version,
                transactional=transactional)
        error = group.validate_offset_commit(member_id, group_instance_id, generation_id, transactional)
        member = group.members.get(member_id)
        if error is ErrorCode.NONE and member is not None and generation_id >= 0 and not transactional:
            # A member's commit shows it is alive, as a heartbeat would (Kafka's classic coordinator): a consumer
            # busy committing must not be expired meanwhile.
            self.membership.touch(group, member)
        return error

    # --- administration -------------------------------------------------------------------------------------------

    def list_groups(self, states: list[str] | None = None, types: list[str] | None = None) -> list:
        """The groups this node coordinates passing the filters (states and types compared case-insensitively; an
        empty filter passes everything)."""
        wanted_states = {state.strip().lower() for state in states or ()}
        wanted_types = {kind.strip().lower() for kind in types or ()}
        return [group for group in self.all_groups()
                if (not wanted_states or str(group.state).lower() in wanted_states)
                and (not wanted_types or group.group_type in wanted_types)]

    async def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups for one group of any type: only an Empty group can go; its offsets and records get
        tombstones (one batch), and a share group's share-partition state goes with it (its manager's part). A
        consumer group is deleted under its lock, so that no heartbeat changes it meanwhile."""
        lock = getattr(self._manager_of(group_id), "lock", None)
        async with (lock(group_id) if lock is not None else contextlib.nullcontext()):
            return await self._delete_group(group_id)

    async def _delete_group(self, group_id: str) -> ErrorCode:
        group = self.group(group_id)
        if group is None or str(group.state) == GroupState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if str(group.state) != GroupState.EMPTY:
            return ErrorCode.NON_EMPTY_GROUP
        manager = self._manager_of(group_id)
        records = None if manager is self.membership else manager.tombstones(group_id)
        manager.remove_group(group_id)  # gone at once, as in Kafka; a later join starts a new group
        try:
            await self.offsets.delete_group(group_id, group_records=records)
        except Exception as exc:  # noqa: BLE001 - answered with the mapped error, as Kafka does
            log.warning("group %s: deletion could not be stored: %s", group_id, exc)
            return write_error(exc)
        log.info("%s group %s deleted", group.group_type, group_id)
        return ErrorCode.NONE

    # --- internals ------------------------------------------------------------------------------------------------

    def _typed_managers(self) -> list:
        return [self.consumer_groups, self.share_groups]

    def _manager_of(self, group_id: str):
        """The manager holding the group: a typed one, else the classic membership."""
        for manager in self._typed_managers():
            if group_id in manager.groups:
                return manager
        return self.membership

    def _group_ids(self) -> list[str]:
        return list(self.membership.groups) + [group_id for manager in self._typed_managers()
                                               for group_id in manager.groups]

    async def _store_group(self, group: Group) -> None:
        await self.offsets.store_group(group)

    async def _delete_quietly(self, group_id: str, group_records=None) -> None:
        try:
            await self.offsets.delete_group(group_id, group_records=group_records)
        except Exception as exc:  # noqa: BLE001 - the group is gone from memory; compaction keeps the old record
            log.warning("group %s: could not write its tombstone: %s", group_id, exc)


def coordinator_of(broker: CoordinatorHost) -> Coordinator:
    """The node's coordinator, made on first use (and then loaded in the background)."""
    coordinator = getattr(broker, "coordinator", None)
    if coordinator is None:
        coordinator = Coordinator(broker)
        broker.coordinator = coordinator
        try:
            coordinator.start_soon()
        except RuntimeError:  # no running loop: whoever made the broker starts it
            pass
    return coordinator


def _log_load_failure(task: asyncio.Task) -> None:
    if task.cancelled() or task.exception() is None:
        return
    exc = task.exception()
    if isinstance(exc, OSError):  # the disk refused: one line; a traceback only for a bug
        log.error("loading __consumer_offsets failed: %s", exc)
    else:
        log.error("loading __consumer_offsets failed", exc_info=exc)
