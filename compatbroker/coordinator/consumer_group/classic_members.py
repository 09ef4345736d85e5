"""Classic-protocol members inside a KIP-848 consumer group (JoinGroup, SyncGroup, Heartbeat and LeaveGroup sent to
a consumer group), as Kafka 4.2's GroupMetadataManager serves them (classicGroupJoinToConsumerGroup,
classicGroupSyncToConsumerGroup, classicGroupHeartbeatToConsumerGroup, classicGroupLeaveToConsumerGroup), and the
routing of those four requests by group type (`join_group`, `sync_group`, `heartbeat`, `leave_group`).

During an online migration (`migration.py`) a consumer group holds members of both protocols. A classic member is a
`ConsumerMember` with `classic` set (its JoinGroup protocols and session timeout); the server assignor assigns it
like any member and it reconciles like any member, one step per JoinGroup:
- JoinGroup: the subscription comes from the metadata of its first protocol (ConsumerProtocolSubscription), and
  the partitions it still owns from that subscription's owned partitions (none before v1: an eager member has
  revoked everything). The answer comes at once: the member id, its member epoch as the generation, protocol type
  `consumer` and the name of its first protocol; there is no leader and no member list (the server assigns).
  A new dynamic member is first answered MEMBER_ID_REQUIRED (v4+), without being remembered, as in Kafka.
- SyncGroup: its current assignment as ConsumerProtocolAssignment bytes, in its subscription's version; refused
  with REBALANCE_IN_PROGRESS when the group epoch moved past its epoch (unless it still has partitions to revoke).
- Heartbeat: REBALANCE_IN_PROGRESS when it must rejoin: the group epoch moved past its epoch, it must revoke
  partitions, or partitions it waits for have been released.
- LeaveGroup: by member id or instance id, of either protocol (an admin removing members); when only classic
  members remain, the group is downgraded instead (`migration.downgrade`).
Its session is `session.timeout.ms` from its JoinGroup, renewed by each of the three requests; it is fenced when it
sends no SyncGroup within its rebalance timeout of a JoinGroup, or no JoinGroup within it after being told to
rejoin (Kafka's join and sync timeouts).

Routing (Kafka's classicGroupJoin & co.): a non-empty consumer group serves the request here; an empty consumer
group gives way to a classic group on a new member's JoinGroup (its records get tombstones); a share group answers
JoinGroup with INCONSISTENT_GROUP_PROTOCOL and the others with UNKNOWN_MEMBER_ID; everything else is the classic
membership's (`membership.py`).

Deviations: a JoinGroup whose static replacement downgrades the group is answered the classic group's generation
(Kafka: the member's reconciled epoch, the same number unless the subscription changed, when the classic group
rebalances at once anyway).
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from ...protocol.error_codes import ErrorCode
from ..group import CONSUMER_PROTOCOL_TYPE, JoinResult, SyncResult
from ..membership import JoinArgs, LeavingMember, SyncArgs
from . import consumer_protocol, migration, records
from .consumer_protocol import MalformedProtocol
from .heartbeat import (Changes, Context, HeartbeatError, member_target, members_after, new_member_id,
                        next_group_epoch, replace_member_changes)
from .model import ConsumerGroup, ConsumerMember, MemberState, subscribed_topics
from .reconciliation import FencedMember, reconcile

__all__ = ["ClassicMembers", "heartbeat", "join_group", "leave_group", "supports_classic_protocols", "sync_group"]

log = logging.getLogger(__name__)


# --- routing by group type ------------------------------------------------------------------------------------------

async def join_group(coordinator, args: JoinArgs) -> JoinResult:
    """A JoinGroup for any group id (the handler has validated the request and the coordinator)."""
    manager = coordinator.consumer_groups
    group = manager.groups.get(args.group_id)
    if group is not None and not group.is_empty():
        return await manager.classic_members.join(group, args)
    if _is_share_group(coordinator, args.group_id):
        return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    if group is not None and args.member_id == "":
        error = await migration.remove_empty_consumer_group(manager, group)
        if error is not ErrorCode.NONE:
            return JoinResult(error)
    return await coordinator.membership.join(args)


async def sync_group(coordinator, args: SyncArgs) -> SyncResult:
    """A SyncGroup for any group id."""
    manager = coordinator.consumer_groups
    group = manager.groups.get(args.group_id)
    if group is not None:
        if group.is_empty():
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        return await manager.classic_members.sync(group, args)
    if _is_share_group(coordinator, args.group_id):
        return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
    return await coordinator.membership.sync(args)


def heartbeat(coordinator, group_id: str, member_id: str, group_instance_id: str | None,
              generation_id: int) -> ErrorCode:
    """A Heartbeat for any group id."""
    manager = coordinator.consumer_groups
    group = manager.groups.get(group_id)
    if group is not None:
        return manager.classic_members.heartbeat(group, member_id, group_instance_id, generation_id)
    if _is_share_group(coordinator, group_id):
        return ErrorCode.UNKNOWN_MEMBER_ID
    return coordinator.membership.heartbeat(group_id, member_id, group_instance_id, generation_id)


async def leave_group(coordinator, group_id: str,
                      leaving: list[LeavingMember]) -> tuple[ErrorCode, list[LeavingMember]]:
    """A LeaveGroup for any group id: the top-level error and each member's outcome."""
    manager = coordinator.consumer_groups
    group = manager.groups.get(group_id)
    if group is not None:
        return await manager.classic_members.leave(group, leaving)
    if _is_share_group(coordinator, group_id):
        return ErrorCode.NONE, [_with_error(m, ErrorCode.UNKNOWN_MEMBER_ID) for m in leaving]
    return coordinator.membership.leave(group_id, leaving)


def _is_share_group(coordinator, group_id: str) -> bool:
    return group_id in coordinator.share_groups.groups


# --- the rules ------------------------------------------------------------------------------------------------------

def supports_classic_protocols(group: ConsumerGroup, protocol_type: str, names: Iterable[str]) -> bool:
    """Kafka's ConsumerGroup.supportsClassicProtocols: the `consumer` protocol type, and a protocol every classic
    member of the group supports (any protocol while the group has none)."""
    names = list(names)
    if protocol_type != CONSUMER_PROTOCOL_TYPE or not names:
        return False
    supported = [{p.name for p in member.classic.supported_protocols} for member in group.classic_members()]
    return any(all(name in each for each in supported) for name in names)


def must_rejoin(group: ConsumerGroup, member: ConsumerMember) -> bool:
    """Kafka's classicGroupHeartbeatToConsumerGroup: the member is told REBALANCE_IN_PROGRESS."""
    return member.member_epoch < group.group_epoch or member.state is MemberState.UNREVOKED_PARTITIONS or \
        (member.state is MemberState.UNRELEASED_PARTITIONS and not waiting_on_unreleased_partition(group, member))


def waiting_on_unreleased_partition(group: ConsumerGroup, member: ConsumerMember) -> bool:
    """Kafka's ConsumerGroup.waitingOnUnreleasedPartition: a partition of its target another member still owns."""
    if member.state is not MemberState.UNRELEASED_PARTITIONS:
        return False
    for topic_id, partitions in group.target_assignment_of(member.member_id).items():
        owned = member.assigned_partitions.get(topic_id, frozenset())
        if any(p not in owned and group.current_partition_epoch(topic_id, p) != -1 for p in partitions):
            return True
    return False


class _Refused(Exception):
    """The request is answered `error` (MEMBER_ID_REQUIRED carries the member id to join again with)."""

    def __init__(self, error: ErrorCode, message: str = "", member_id: str = ""):
        super().__init__(message or error.name)
        self.error = error
        self.member_id = member_id


@dataclass
class _JoinPlan:
    changes: Changes
    member: ConsumerMember
    conversion: migration.Conversion | None = None


def _join_key(group_id: str, member_id: str) -> tuple:
    return ("classic-join", group_id, member_id)


def _sync_key(group_id: str, member_id: str) -> tuple:
    return ("classic-sync", group_id, member_id)


class ClassicMembers:
    """Serves the classic-protocol members of one manager's consumer groups. Runs on the event loop only."""

    def __init__(self, manager):
        self.manager = manager
        self.timers = manager.timers  # the join and sync timeouts live (and die) with the manager's timers
        self._tasks: set[asyncio.Task] = set()

    async def stop(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # --- JoinGroup ----------------------------------------------------------------------------------------------

    async def join(self, group: ConsumerGroup, args: JoinArgs) -> JoinResult:
        group_id = group.group_id
        async with self.manager.lock(group_id):
            error = self.manager.coordinator.error_for(group_id)  # the partition may have moved while we waited
            if error is not ErrorCode.NONE:
                return JoinResult(error)
            group = self.manager.groups.get(group_id)
            if group is not None and not group.is_empty():
                return await self._join_locked(group, args)
        return await join_group(self.manager.coordinator, args)  # it changed while we waited: route it again

    async def _join_locked(self, group: ConsumerGroup, args: JoinArgs) -> JoinResult:
        """The JoinGroup, with the group's lock held: planned, written, then answered (timers once durable)."""
        group_id = group.group_id
        try:
            plan = self._plan_join(group, args)
        except _Refused as exc:
            return JoinResult(exc.error, member_id=exc.member_id)
        except MalformedProtocol as exc:
            log.warning("group %s: JoinGroup of %s with a malformed subscription: %s", group_id, args.member_id,
                        exc)
            return JoinResult(ErrorCode.UNKNOWN_SERVER_ERROR)
        error = await self.manager.write(group_id, plan.changes)
        if error is not ErrorCode.NONE:
            return JoinResult(error)
        member = plan.member
        if plan.conversion is not None:  # the group is classic now (a static replacement downgraded it)
            generation = plan.conversion.group.generation_id
        else:
            generation = member.member_epoch
            self.timers.cancel(_join_key(group_id, member.member_id))
            self.manager.schedule_session_timeout(group_id, member.member_id, args.session_timeout_ms)
            self._schedule_fence(_sync_key(group_id, member.member_id), args.rebalance_timeout_ms, group_id,
                                 member.member_id, "the member failed to sync within timeout")
        return JoinResult(ErrorCode.NONE, member_id=member.member_id, generation_id=generation,
                          protocol_type=CONSUMER_PROTOCOL_TYPE,
                          protocol_name=member.classic.supported_protocols[0].name)

    def _plan_join(self, group: ConsumerGroup, args: JoinArgs) -> _JoinPlan:
        """Kafka's classicGroupJoinToConsumerGroup up to the write. Raises _Refused (or MalformedProtocol)."""
        settings = self.manager.coordinator.consumer_settings
        unknown = args.member_id == ""
        member_id = args.member_id or new_member_id()
        if len(group.members) >= settings.max_size and (unknown or member_id not in group.members):
            raise _Refused(ErrorCode.GROUP_MAX_SIZE_REACHED)
        if not supports_classic_protocols(group, args.protocol_type, [name for name, _ in args.protocols]):
            raise _Refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if unknown and args.requires_known_member_id and args.group_instance_id is None:
            log.info("group %s: new classic member gets id %s and must join again with it", group.group_id,
                     member_id)
            raise _Refused(ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id)
        changes = Changes()
        member, replaced = self._joining_member(group, member_id, args, unknown)
        if replaced is not None:
            changes.extend(replace_member_changes(group, replaced, member))
        existing_static = group.static_member(args.group_instance_id)
        subscription = consumer_protocol.parse_subscription(args.protocols[0][1])
        updated = dataclasses.replace(
            member, instance_id=args.group_instance_id or member.instance_id,
            rack_id=subscription.rack_id or member.rack_id,
            rebalance_timeout_ms=args.rebalance_timeout_ms if args.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            subscribed_topic_names=frozenset(subscription.topics), client_id=args.client_id,
            client_host=args.client_host,
            classic=migration.classic_metadata(args.session_timeout_ms, args.protocols))
        ctx = self.manager.context(group)
        owned = consumer_protocol.partitions_by_id(subscription.owned_partitions, ctx.topics.topic_id)
        if existing_static is not None:
            conversion = self._maybe_downgrade(group, existing_static, member, updated)
            if conversion is not None:
                return _JoinPlan(Changes(list(conversion.records), [conversion.install]), updated, conversion)
        return _JoinPlan(changes, self._update(ctx, group, member, updated, replaced, owned, changes))

    def _joining_member(self, group: ConsumerGroup, member_id: str, args: JoinArgs,
                        unknown: bool) -> tuple[ConsumerMember, ConsumerMember | None]:
        """The member (a blank one for a new member) and the static member it replaces, if any."""
        instance_id = args.group_instance_id
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                log.info("group %s: member %s joins the consumer group using the classic protocol",
                         group.group_id, member_id)
                return ConsumerMember(member_id), None
            return member, None
        existing = group.static_member(instance_id)
        if unknown:
            if existing is None:
                log.info("group %s: static member %s with instance id %s joins the consumer group using the "
                         "classic protocol", group.group_id, member_id, instance_id)
                return ConsumerMember(member_id), None
            log.info("group %s: static member with instance id %s rejoins using the classic protocol as %s, "
                     "replacing %s", group.group_id, instance_id, member_id, existing.member_id)
            return dataclasses.replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0), \
                existing
        if existing is None:
            raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            log.info("group %s: static member %s with instance id %s is fenced by member %s", group.group_id,
                     member_id, instance_id, existing.member_id)
            raise _Refused(ErrorCode.FENCED_INSTANCE_ID)
        return existing, None

    def _maybe_downgrade(self, group: ConsumerGroup, replaced: ConsumerMember, member: ConsumerMember,
                         updated: ConsumerMember) -> migration.Conversion | None:
        """A classic static member taking the instance id of the last consumer-protocol member downgrades the
        group (Kafka's validateOnlineDowngradeWithReplacedMember)."""
        changed = updated.subscribed_topic_names != member.subscribed_topic_names
        return migration.downgrade_for_replacement(self.manager, group, replaced, updated, changed)

    def _update(self, ctx: Context, group: ConsumerGroup, member: ConsumerMember, updated: ConsumerMember,
                replaced: ConsumerMember | None, owned, changes: Changes) -> ConsumerMember:
        """Kafka's three steps for the joining member: the member and the group epoch, the target assignment,
        one reconciliation step (the member's owned partitions from its subscription)."""
        group_id = group.group_id
        names_changed = updated.subscribed_topic_names != member.subscribed_topic_names
        if updated != member:
            changes.add([records.member_metadata_record(group_id, updated)])
        members = members_after(group, updated, replaced)
        subscribed = subscribed_topics(members.values(), group.resolved_regexes)
        group_epoch = next_group_epoch(ctx, subscribed, names_changed, changes)
        try:
            target_epoch, target = member_target(ctx, group_epoch, members, group.resolved_regexes, subscribed,
                                                 updated.member_id, replaced, changes)
        except HeartbeatError as exc:
            raise _Refused(exc.error, exc.message or "") from None
        try:
            reconciled = reconcile(updated, target_epoch=target_epoch, target=target,
                                   partition_epoch=group.current_partition_epoch, owned=owned,
                                   subscribed_topic_ids=ctx.topics.ids_of(updated.subscribed_topic_names),
                                   subscription_changed=names_changed)
        except FencedMember as exc:
            raise _Refused(exc.error, str(exc)) from None
        if reconciled != updated or replaced is not None or updated != member:
            if reconciled != updated or replaced is not None:
                changes.add([records.current_assignment_record(group_id, reconciled)])
            changes.add([], lambda: group.update_member(reconciled))
        return reconciled

    # --- SyncGroup ----------------------------------------------------------------------------------------------

    async def sync(self, group: ConsumerGroup, args: SyncArgs) -> SyncResult:
        """Kafka's classicGroupSyncToConsumerGroup: the member's current assignment."""
        group_id = group.group_id
        try:
            member = self._classic_member(group, args.member_id, args.group_instance_id)
            if args.generation_id != member.member_epoch:
                raise _Refused(ErrorCode.ILLEGAL_GENERATION)
            protocol_name = member.classic.supported_protocols[0].name
            if (args.protocol_type is not None and args.protocol_type != CONSUMER_PROTOCOL_TYPE) or \
                    (args.protocol_name is not None and args.protocol_name != protocol_name):
                raise _Refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
                self._schedule_join_timeout(group_id, member)
                raise _Refused(ErrorCode.REBALANCE_IN_PROGRESS)
            assignment = self._assignment_bytes(member)
        except _Refused as exc:
            return SyncResult(exc.error)
        except MalformedProtocol as exc:
            log.warning("group %s: cannot answer the SyncGroup of %s: %s", group_id, args.member_id, exc)
            return SyncResult(ErrorCode.UNKNOWN_SERVER_ERROR)
        self.timers.cancel(_sync_key(group_id, member.member_id))
        self.manager.schedule_session_timeout(group_id, member.member_id, member.classic.session_timeout_ms)
        return SyncResult(ErrorCode.NONE, args.protocol_type, args.protocol_name, assignment)

    def _assignment_bytes(self, member: ConsumerMember) -> bytes:
        return migration.classic_assignment(self.manager, member.assigned_partitions,
                                            member.classic.supported_protocols[0].metadata)

    # --- Heartbeat ----------------------------------------------------------------------------------------------

    def heartbeat(self, group: ConsumerGroup, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> ErrorCode:
        """Kafka's classicGroupHeartbeatToConsumerGroup."""
        try:
            member = self._classic_member(group, member_id, group_instance_id)
        except _Refused as exc:
            return exc.error
        if generation_id != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self.manager.schedule_session_timeout(group.group_id, member.member_id, member.classic.session_timeout_ms)
        if must_rejoin(group, member):
            self._schedule_join_timeout(group.group_id, member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # --- LeaveGroup ---------------------------------------------------------------------------------------------

    async def leave(self, group: ConsumerGroup, leaving: list[LeavingMember]) -> tuple[ErrorCode,
                                                                                      list[LeavingMember]]:
        """Kafka's classicGroupLeaveToConsumerGroup: members of either protocol leave (the group may downgrade)."""
        group_id = group.group_id
        async with self.manager.lock(group_id):
            error = self.manager.coordinator.error_for(group_id)  # the partition may have moved while we waited
            if error is not ErrorCode.NONE:
                return error, []
            group = self.manager.groups.get(group_id)
            if group is not None:
                return await self._leave_locked(group, leaving)
        return await leave_group(self.manager.coordinator, group_id, leaving)  # it changed while we waited

    async def _leave_locked(self, group: ConsumerGroup,
                            leaving: list[LeavingMember]) -> tuple[ErrorCode, list[LeavingMember]]:
        """Each named member found (or refused), then all found ones fenced in one write."""
        results, gone = [], []
        for each in leaving:
            try:
                member = self._leaving_member(group, each)
            except _Refused as exc:
                results.append(_with_error(each, exc.error))
                continue
            log.info("group %s: member %s (instance %s) left the group through LeaveGroup (reason: %s)",
                     group.group_id, member.member_id, member.instance_id, each.reason or "not provided")
            results.append(_with_error(each, ErrorCode.NONE))
            if member.member_id not in gone:
                gone.append(member.member_id)
        error = await self._fence_locked(group, gone)
        if error is not ErrorCode.NONE:
            return error, []
        return ErrorCode.NONE, results

    def _leaving_member(self, group: ConsumerGroup, leaving: LeavingMember) -> ConsumerMember:
        if leaving.group_instance_id is None:
            member = group.members.get(leaving.member_id)
            if member is None:
                raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID)
            return member
        member = group.static_member(leaving.group_instance_id)
        if member is None:
            raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID)
        if leaving.member_id != "" and member.member_id != leaving.member_id:
            raise _Refused(ErrorCode.FENCED_INSTANCE_ID)
        return member

    # --- fencing --------------------------------------------------------------------------------------------------

    async def _fence_locked(self, group: ConsumerGroup, member_ids: list[str]) -> ErrorCode:
        """Remove members (the caller holds the group's lock): the manager's fencing, which downgrades the group
        instead when only classic members remain. Returns the error of a failed write."""
        members = [group.members[member_id] for member_id in member_ids if member_id in group.members]
        if not members:
            return ErrorCode.NONE
        error = await self.manager.write(group.group_id, self.manager.fence_changes(group, members))
        if error is ErrorCode.NONE:
            for member in members:
                self.cancel_timers(group.group_id, member.member_id)
                self.manager.cancel_timers(group.group_id, member.member_id)
        return error

    def cancel_timers(self, group_id: str, member_id: str) -> None:
        self.timers.cancel(_join_key(group_id, member_id))
        self.timers.cancel(_sync_key(group_id, member_id))

    def _schedule_join_timeout(self, group_id: str, member: ConsumerMember) -> None:
        key = _join_key(group_id, member.member_id)
        if not self.timers.is_scheduled(key):
            self._schedule_fence(key, member.rebalance_timeout_ms, group_id, member.member_id,
                                 "the classic member failed to join within the rebalance timeout")

    def _schedule_fence(self, key: tuple, delay_ms: int, group_id: str, member_id: str, reason: str) -> None:
        self.timers.schedule(key, delay_ms, lambda: self._spawn(self._fence_expired(group_id, member_id, reason)))

    async def _fence_expired(self, group_id: str, member_id: str, reason: str) -> None:
        async with self.manager.lock(group_id):
            group = self.manager.groups.get(group_id)
            if group is None or member_id not in group.members:
                return
            log.info("group %s: member %s fenced because %s", group_id, member_id, reason)
            await self._fence_locked(group, [member_id])

    def _spawn(self, coroutine) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- helpers ------------------------------------------------------------------------------------------------

    @staticmethod
    def _classic_member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
        """Kafka's validateConsumerGroupMember + throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID)
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID)
            if member.member_id != member_id:
                raise _Refused(ErrorCode.FENCED_INSTANCE_ID)
        if not member.use_classic_protocol:
            raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID)
        return member


def _with_error(leaving: LeavingMember, error: ErrorCode) -> LeavingMember:
    return LeavingMember(leaving.member_id, leaving.group_instance_id, leaving.reason, error)
