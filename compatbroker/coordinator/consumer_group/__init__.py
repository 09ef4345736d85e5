"""KIP-848 consumer groups: `ConsumerGroups`, the manager of the consumer groups this node coordinates.

- `model.py`: the group, its members, epochs and assignments; `reconciliation.py`: revoke before assign;
  `heartbeat.py`: ConsumerGroupHeartbeat's rules, planned as records plus what they do once durable;
  `assignors.py` (uniform, range), `subscriptions.py` (RE2/J regexes), `records.py` (the ConsumerGroup* records of
  `__consumer_offsets`); `classic_members.py` / `migration.py`: classic-protocol members and online migration.
- Every change is written to `__consumer_offsets` (one batch per heartbeat, `OffsetStore.store_records`) and applied
  to the group only once durable; the heartbeat is answered after that, as Kafka answers after its write commits.
  A group's requests and timers take the group's lock, so a change is planned on the state the last one left.
- Timers (`membership.Timers`, keyed per member): the session (`consumer.session.timeout.ms`, a GROUP config whose
  default is `group.consumer.session.timeout.ms`) restarts with every heartbeat and fences the member when it runs
  out; the rebalance timeout (the member's own) starts when a member must revoke partitions and fences it if it
  has not moved on from that epoch by then. A fenced member's records get tombstones and the group epoch moves.
- Loading (`replay`, `on_loaded`): the records are replayed through `records.apply`; once the partition is loaded
  every member's session starts afresh (and the rebalance timeout of those revoking), as Kafka's onLoaded does.

Hooks for classic members and migration: `lock(group_id)`, `context(group)`, `fence_changes(group, members)`,
`write(group_id, changes)`, `schedule_session_timeout(group_id, member_id, timeout_ms)`, `cancel_timers(...)`.
Fencing members first asks `migration.downgrade` whether the group goes back to the classic protocol instead.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable

from ...protocol.error_codes import ErrorCode
from ..group_config import group_config
from ..membership import Timers, write_error
from . import migration, records
from .classic_members import ClassicMembers
from .heartbeat import (Changes, Context, HeartbeatAnswer, HeartbeatArgs, HeartbeatError, Plan, TopicsView,
                        plan_fence, plan_heartbeat, plan_leave, validate)
from .model import (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH, Assignment, ClassicMemberMetadata,
                    ClassicProtocol, ConsumerGroup, ConsumerGroupState, ConsumerMember, MemberState, ResolvedRegex)

__all__ = ["Assignment", "Changes", "ClassicMemberMetadata", "ClassicProtocol", "ConsumerGroup",
           "ConsumerGroupState", "ConsumerGroups", "ConsumerMember", "HeartbeatAnswer", "HeartbeatArgs",
           "MemberState", "ResolvedRegex"]

log = logging.getLogger(__name__)

OFFSET_COMMIT_MIN_VERSION_FOR_CONSUMER_MEMBERS = 9


def session_key(group_id: str, member_id: str) -> tuple:
    return ("consumer-session", group_id, member_id)


def rebalance_key(group_id: str, member_id: str) -> tuple:
    return ("consumer-rebalance", group_id, member_id)


class ConsumerGroups:
    """The consumer groups this node coordinates. Runs on the event loop only."""

    def __init__(self, coordinator, settings):
        self.coordinator = coordinator
        self.host = coordinator.broker
        self.settings = settings
        self.groups: dict[str, ConsumerGroup] = {}
        self.timers = Timers()
        self._locks: dict[str, list] = {}   # group id -> [lock, holders and waiters]
        self._tasks: set[asyncio.Task] = set()
        self._topic_names: frozenset[str] | None = None
        self._topic_names_version = 0
        self.classic_members = ClassicMembers(self)   # JoinGroup & co. of classic-protocol members

    # --- ConsumerGroupHeartbeat -----------------------------------------------------------------------------------

    async def heartbeat(self, args: HeartbeatArgs) -> HeartbeatAnswer:
        invalid = validate(args, self.settings.assignors)
        if invalid is not None:
            return invalid
        error = self.coordinator.error_for(args.group_id)
        if error is not ErrorCode.NONE:
            return HeartbeatAnswer(error)
        async with self.lock(args.group_id):
            error = self.coordinator.error_for(args.group_id)  # the partition may have moved while we waited
            if error is not ErrorCode.NONE:
                return HeartbeatAnswer(error)
            try:
                plan = self._plan(args)
            except HeartbeatError as exc:
                return HeartbeatAnswer(exc.error, exc.message)
            error = await self.write(args.group_id, plan.changes)
            if error is not ErrorCode.NONE:
                return HeartbeatAnswer(error)
            self._after(args, plan)
            return plan.answer

    def _plan(self, args: HeartbeatArgs) -> Plan:
        leaving = args.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH)
        group, creation = self._group_for(args.group_id, create=args.member_epoch == 0, leaving=leaving)
        ctx = self.context(group)
        if leaving:
            plan = plan_leave(ctx, args, lambda members: self.fence_changes(group, members))
        else:
            plan = plan_heartbeat(ctx, args)
            plan.answer.heartbeat_interval_ms = self._group_config(args.group_id).consumer_heartbeat_interval_ms
        if creation is not None:
            creation.extend(plan.changes)
            plan.changes = creation
        return plan

    def _group_for(self, group_id: str, *, create: bool, leaving: bool) -> tuple[ConsumerGroup, Changes | None]:
        """The consumer group, or a new one (registered once its records are durable) with the records that make
        it: Kafka's getOrMaybeCreateConsumerGroup (a join) and consumerGroup (anything else)."""
        group = self.groups.get(group_id)
        if group is not None:
            return group, None
        other = self.coordinator.group(group_id)
        if other is not None and other.group_type == "classic" and create:
            return self._from_classic(group_id)
        if other is not None and other.group_type != "consumer":
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if not create:
            message = f"Group {group_id} not found." if leaving else f"Consumer group {group_id} not found."
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, message)
        group = ConsumerGroup(group_id, now_ms=self.host.now_ms)
        changes = Changes()
        changes.add([], lambda: self._register(group))
        return group, changes

    def _from_classic(self, group_id: str) -> tuple[ConsumerGroup, Changes]:
        """A join where a classic group of the id exists: migration.py replaces an empty one and upgrades a live one
        when the policy allows (else the join is refused)."""
        try:
            conversion = migration.upgrade(self, group_id)
        except migration.MigrationRefused as exc:
            raise HeartbeatError(exc.error, exc.message) from None
        if conversion is None:  # Dead meanwhile: a new group
            group = ConsumerGroup(group_id, now_ms=self.host.now_ms)
            return group, Changes([], [lambda: self._register(group)])
        return conversion.group, Changes(list(conversion.records), [conversion.install])

    def _register(self, group: ConsumerGroup) -> None:
        self.groups[group.group_id] = group

    def _after(self, args: HeartbeatArgs, plan: Plan) -> None:
        """Timers once the heartbeat is durable: the member's session restarts; a member now revoking partitions
        gets its rebalance timeout; fenced or replaced members lose theirs."""
        group_id = args.group_id
        for member_id in plan.fenced_member_ids:
            self.cancel_timers(group_id, member_id)
        if plan.replaced_member_id is not None:
            self.cancel_timers(group_id, plan.replaced_member_id)
        member = plan.member
        if member is None or args.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            return
        self.schedule_session_timeout(group_id, member.member_id)
        if not plan.reconciled:
            return
        if member.state is MemberState.UNREVOKED_PARTITIONS:  # Kafka's maybeReconcile
            self._schedule_rebalance_timeout(group_id, member)
        else:
            self.timers.cancel(rebalance_key(group_id, member.member_id))

    # --- planning helpers shared with classic members -------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lock(self, group_id: str):
        """`async with manager.lock(group_id)`: hold the group's lock from planning a change until it is applied.
        A lock lives only while someone holds or awaits it, so ids that name no group leave nothing behind."""
        entry = self._locks.get(group_id)
        if entry is None:
            entry = self._locks[group_id] = [asyncio.Lock(), 0]
        entry[1] += 1
        try:
            async with entry[0]:
                yield
        finally:
            entry[1] -= 1
            if entry[1] == 0:
                del self._locks[group_id]

    def context(self, group: ConsumerGroup) -> Context:
        topics = TopicsView.of(self.host)
        return Context(group=group, topics=topics, assignors=self.settings.assignors,
                       max_size=self.settings.max_size, now_ms=self.host.now_ms(),
                       topic_names_version=self._observe_topic_names(topics))

    def _observe_topic_names(self, topics: TopicsView) -> int:
        """When (ms) the cluster's set of topic names last changed, as far as heartbeats have seen: regexes resolved
        before that are resolved again."""
        names = frozenset(topics.by_name)
        if names != self._topic_names:
            self._topic_names = names
            self._topic_names_version = max(self.host.now_ms(), self._topic_names_version + 1)
        return self._topic_names_version

    def fence_changes(self, group: ConsumerGroup, members: list[ConsumerMember]) -> Changes:
        """The records removing `members` (and moving the group epoch), or those of a downgrade to a classic group
        when migration.py decides the group goes back to the classic protocol."""
        conversion = migration.downgrade(self, group, [member.member_id for member in members])
        if conversion is not None:
            return Changes(list(conversion.records), [conversion.install])
        return plan_fence(self.context(group), members)

    async def write(self, group_id: str, changes: Changes) -> ErrorCode:
        """Write the records in one batch and apply them once durable; the error a failed write is answered with."""
        if changes.records:
            try:
                await self.coordinator.offsets.store_records(group_id, changes.records)
            except Exception as exc:  # noqa: BLE001 - any failed write is answered, as Kafka does
                log.warning("group %s: could not store %d record(s): %s", group_id, len(changes.records), exc)
                return write_error(exc)
            error = self.coordinator.error_for(group_id)
            if error is not ErrorCode.NONE:  # the partition moved during the write: the new leader replays it
                return error
        changes.apply()
        return ErrorCode.NONE

    # --- timers -------------------------------------------------------------------------------------------------------

    def schedule_session_timeout(self, group_id: str, member_id: str, timeout_ms: int | None = None) -> None:
        if timeout_ms is None:
            timeout_ms = self._group_config(group_id).consumer_session_timeout_ms
        self.timers.schedule(session_key(group_id, member_id), timeout_ms,
                             lambda: self._spawn(self._fence_expired(group_id, member_id, None,
                                                                     "the member session expired")))

    def _schedule_rebalance_timeout(self, group_id: str, member: ConsumerMember) -> None:
        epoch, timeout_ms = member.member_epoch, member.rebalance_timeout_ms
        reason = f"it failed to transition from epoch {epoch} within {timeout_ms}ms"
        self.timers.schedule(rebalance_key(group_id, member.member_id), timeout_ms,
                             lambda: self._spawn(self._fence_expired(group_id, member.member_id, epoch, reason)))

    def cancel_timers(self, group_id: str, member_id: str) -> None:
        self.timers.cancel(session_key(group_id, member_id))
        self.timers.cancel(rebalance_key(group_id, member_id))

    async def _fence_expired(self, group_id: str, member_id: str, epoch: int | None, reason: str) -> None:
        """A timer ran out: fence the member (the rebalance timeout only if it is still at `epoch`)."""
        async with self.lock(group_id):
            group = self.groups.get(group_id)
            member = group.members.get(member_id) if group is not None else None
            if member is None or (epoch is not None and member.member_epoch != epoch):
                return
            log.info("group %s: member %s fenced from the group because %s", group_id, member_id, reason)
            self.cancel_timers(group_id, member_id)
            error = await self.write(group_id, self.fence_changes(group, [member]))
            if error is not ErrorCode.NONE:  # still a member: try again after another session
                self.schedule_session_timeout(group_id, member_id)

    def _spawn(self, coroutine) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _group_config(self, group_id: str):
        return group_config(self.host, group_id)

    # --- offset commits and fetches of members ----------------------------------------------------------------------

    def validate_offset_commit(self, group: ConsumerGroup, member_id: str, member_epoch: int, *,
                               group_instance_id: str | None = None, api_version: int | None = None,
                               transactional: bool = False) -> ErrorCode:
        """Kafka's ConsumerGroup.validateOffsetCommit (OffsetCommit and TxnOffsetCommit carry no error message, so
        none is made)."""
        if member_epoch < 0 and not group.members:
            return ErrorCode.NONE  # an admin client or a consumer outside group management, on an empty group
        if transactional and member_epoch == -1 and member_id == "" and group_instance_id is None:
            return ErrorCode.NONE  # TxnOffsetCommit without group metadata
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and not member.use_classic_protocol and \
                (api_version or 0) < OFFSET_COMMIT_MIN_VERSION_FOR_CONSUMER_MEMBERS:
            return ErrorCode.UNSUPPORTED_VERSION  # consumer-protocol members commit with OffsetCommit v9+
        return _member_epoch_error(member, member_epoch)

    def validate_offset_fetch(self, group: ConsumerGroup, member_id: str | None,
                              member_epoch: int) -> ErrorCode:
        """Kafka's ConsumerGroup.validateOffsetFetch."""
        if member_id is None and member_epoch < 0:
            return ErrorCode.NONE
        member = group.members.get(member_id) if member_id is not None else None
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return _member_epoch_error(member, member_epoch)

    # --- loading, unloading, deleting --------------------------------------------------------------------------------

    def replay(self, record) -> None:
        """One record of a consumer group (types 3-8, 16), in log order."""
        group_id = record.group_id
        before = self.groups.get(group_id)
        after = records.apply(before, record)
        if after is None:
            if before is not None:
                self.groups.pop(group_id, None)
        elif after is not before:
            self.groups[group_id] = after

    def on_loaded(self, group_ids: Iterable[str]) -> None:
        """The partition holding these groups is loaded: every member's session starts now."""
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None:
                continue
            log.info("loaded consumer group %s with %d member(s) at epoch %d", group_id, len(group.members),
                     group.group_epoch)
            for member in group.members.values():  # Kafka: the group's session timeout, classic members too
                self.schedule_session_timeout(group_id, member.member_id)
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_rebalance_timeout(group_id, member)

    def unload_group(self, group_id: str) -> ConsumerGroup | None:
        """This node no longer coordinates the group: it leaves memory with its timers."""
        return self._drop(group_id)

    def remove_group(self, group_id: str) -> ConsumerGroup | None:
        """DeleteGroups of an Empty group (the façade writes `tombstones(group_id)`)."""
        return self._drop(group_id)

    def _drop(self, group_id: str) -> ConsumerGroup | None:
        group = self.groups.pop(group_id, None)
        self.timers.cancel_group(group_id)
        if group is not None:
            group.mark_dead()
        return group

    def tombstones(self, group_id: str) -> list[tuple[bytes, None]]:
        """Every record key the group has written, as tombstones (Kafka's createGroupTombstoneRecords)."""
        group = self.groups.get(group_id)
        return [] if group is None else records.group_tombstones(group)

    async def stop(self) -> None:
        self.timers.cancel_all()
        await self.classic_members.stop()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _member_epoch_error(member: ConsumerMember, received: int) -> ErrorCode:
    """Kafka's validateMemberEpoch: a classic-protocol member's generation is its member epoch."""
    if received == member.member_epoch:
        return ErrorCode.NONE
    return ErrorCode.ILLEGAL_GENERATION if member.use_classic_protocol else ErrorCode.STALE_MEMBER_EPOCH
