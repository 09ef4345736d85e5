"""The classic group membership protocol: JoinGroup, SyncGroup, Heartbeat and LeaveGroup, with Kafka's group
state machine, its timers and its error codes.

A rebalance, as Kafka runs it:
1. Join phase (PreparingRebalance). Every member sends JoinGroup; the request stays parked until every known member
   has rejoined, or the group's rebalance timeout (the members' longest) runs out, when the dynamic members that did
   not rejoin are dropped. A group leaving Empty waits `group.initial.rebalance.delay.ms` first (0 here by default,
   3000 in Kafka), extended while new members keep arriving, within the rebalance timeout.
   From JoinGroup v4 a member without an id is first answered MEMBER_ID_REQUIRED with an id to join with (KIP-394).
2. The join phase ends with a new generation and the protocol every member supports that most prefer; each parked
   JoinGroup is answered, the leader's with every member's metadata (CompletingRebalance).
3. Sync phase. Followers' SyncGroups stay parked until the leader's SyncGroup brings the assignment; it is stored
   in `__consumer_offsets`, then every parked SyncGroup gets its member's share (Stable). A SyncGroup arriving once
   the group is Stable is answered at once with the member's assignment. Members that send no SyncGroup within the
   rebalance timeout are dropped, which starts a new rebalance.
4. A rebalance starts again when a member joins or leaves, changes its metadata, when the leader rejoins, or when a
   member's session (`session.timeout.ms`, renewed by every Heartbeat, JoinGroup and SyncGroup) expires. Members
   learn about it from Heartbeat (REBALANCE_IN_PROGRESS) and rejoin. A lone member that rejoins completes the join
   phase at once: nothing else is awaited.

Cooperative rebalancing (the cooperative-sticky assignors of librdkafka and the Java client) runs on the same
protocol: members keep consuming their partitions through the rounds and rejoin with changed metadata after
revoking partitions, which starts the next round; the broker only has to follow the protocol above.

Static members (KIP-345, `group.instance.id`): a static member that restarts and joins without a member id takes
over its instance's place, assignment and leadership; when the group is Stable and the protocol choice does not
change this needs no rebalance at all (the leader is told to skip assignment from JoinGroup v9, and older versions
are answered as a follower). The id it replaces is fenced (FENCED_INSTANCE_ID). Static members that miss a join
phase are kept until their session expires.

Timers are `loop.call_later` handles keyed like Kafka's (one heartbeat timer per member, one join and one sync
timer per group); nothing sleeps in a loop.

Deviations from Kafka: a JoinGroup or SyncGroup superseded by a retry of the same member while still parked is
answered REBALANCE_IN_PROGRESS instead of never; requests parked for a member that is removed are answered
UNKNOWN_MEMBER_ID. No group metadata record is written when a group is first created (Kafka writes an empty one);
the first record is written when its first generation syncs or the group becomes Empty again.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field

from ..config import ConfigError
from ..protocol.error_codes import ErrorCode
from .group import Group, GroupState, JoinResult, Member, Protocol, SyncResult, resolve

log = logging.getLogger(__name__)

# Kafka: group.classic.new.member.join.timeout (an internal constant): how long a brand-new member's JoinGroup
# may stay parked; a client that went away during a long rebalance then does not stay a member for ever.
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class GroupSettings:
    """Broker settings of classic groups, Kafka's names and defaults (except the initial delay)."""

    min_session_timeout_ms: int = 6_000          # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000      # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 0          # group.initial.rebalance.delay.ms (Kafka: 3000)
    max_size: int = INT32_MAX                    # group.max.size
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS

    @classmethod
    def from_config(cls, config) -> GroupSettings:
        """Each setting the broker configuration knows, else Kafka's default."""
        values = {}
        for field_name, name in (("min_session_timeout_ms", "group.min.session.timeout.ms"),
                                 ("max_session_timeout_ms", "group.max.session.timeout.ms"),
                                 ("initial_rebalance_delay_ms", "group.initial.rebalance.delay.ms"),
                                 ("max_size", "group.max.size")):
            try:
                value = config.get(name)
            except ConfigError:
                continue
            if value is not None:
                values[field_name] = int(value)
        return cls(**values)


@dataclass
class JoinArgs:
    """A JoinGroup, independent of its version."""

    group_id: str
    member_id: str
    protocol_type: str
    protocols: list[Protocol]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    requires_known_member_id: bool = True   # JoinGroup v4+: KIP-394's MEMBER_ID_REQUIRED round trip
    supports_skip_assignment: bool = False  # JoinGroup v9+
    reason: str | None = None


@dataclass
class SyncArgs:
    """A SyncGroup, independent of its version."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: dict[str, bytes] = field(default_factory=dict)


@dataclass
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None
    error: ErrorCode = ErrorCode.NONE


class Timers:
    """Keyed one-shot timers: scheduling a key again replaces its timer, as Kafka's coordinator timer does."""

    def __init__(self):
        self._handles: dict[Hashable, asyncio.TimerHandle] = {}

    def schedule(self, key: Hashable, delay_ms: int, callback: Callable[[], None]) -> None:
        self.cancel(key)
        loop = asyncio.get_running_loop()
        self._handles[key] = loop.call_later(max(delay_ms, 0) / 1000, self._fire, key, callback)

    def cancel(self, key: Hashable) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()

    def cancel_group(self, group_id: str) -> None:
        for key in [key for key in self._handles if key[1] == group_id]:
            self.cancel(key)

    def cancel_all(self) -> None:
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._handles

    def _fire(self, key: Hashable, callback: Callable[[], None]) -> None:
        self._handles.pop(key, None)
        try:
            callback()
        except Exception:  # noqa: BLE001 - a failed expiry must not stop the event loop
            log.exception("group timer %s failed", key)


def heartbeat_key(group_id: str, member_id: str) -> tuple:
    return ("heartbeat", group_id, member_id)


def join_key(group_id: str) -> tuple:
    return ("join", group_id)


def sync_key(group_id: str) -> tuple:
    return ("sync", group_id)


def write_error(exc: BaseException) -> ErrorCode:
    """The error a failed group metadata write is answered with (the offsets store already maps storage errors
    to coordinator errors as Kafka does)."""
    code = getattr(exc, "error_code", None)
    return ErrorCode.for_code(int(code)) if code is not None else ErrorCode.UNKNOWN_SERVER_ERROR


class Membership:
    """The classic groups this node coordinates and their rebalance protocol. Runs on the event loop only."""

    def __init__(self, *, settings: GroupSettings, now_ms: Callable[[], int],
                 store_group: Callable[[Group], Awaitable[None]]):
        self.settings = settings
        self.groups: dict[str, Group] = {}
        self.timers = Timers()
        self._now_ms = now_ms
        self._store_group = store_group
        self._tasks: set[asyncio.Task] = set()

    async def stop(self) -> None:
        """Cancel every timer and the group writes still running."""
        self.timers.cancel_all()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # --- registry -------------------------------------------------------------------------------------------------

    def get_or_create(self, group_id: str) -> Group:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id, current_state_timestamp=self._now_ms())
        return group

    def remove_group(self, group_id: str) -> Group | None:
        """Forget a group (deleted, or emptied of offsets): it is Dead to anything still holding it."""
        group = self.groups.pop(group_id, None)
        self.timers.cancel_group(group_id)
        if group is not None:
            group.transition(GroupState.DEAD, self._now_ms())
            for member_id in list(group.members):
                group.remove(member_id)
        return group

    def unload_group(self, group_id: str) -> Group | None:
        """This node no longer coordinates the group (its partition of `__consumer_offsets` moved): it is Dead
        here, its timers stop, and its parked JoinGroup and SyncGroup requests are answered NOT_COORDINATOR, as
        Kafka's coordinator answers them on unloading, so their members look the new coordinator up."""
        group = self.groups.pop(group_id, None)
        self.timers.cancel_group(group_id)
        if group is not None:
            group.transition(GroupState.DEAD, self._now_ms())
            for member_id in list(group.members):
                group.remove(member_id, ErrorCode.NOT_COORDINATOR)
        return group

    def load(self, group: Group) -> None:
        """Take a group read back from `__consumer_offsets`: its members' sessions start now."""
        self.remove_group(group.group_id)
        self.groups[group.group_id] = group
        for member in group.members.values():
            self._reschedule_heartbeat(group, member)
        if len(group.members) > self.settings.max_size:
            self._prepare_rebalance(group, f"loaded with {len(group.members)} members, over group.max.size")

    def adopt(self, group: Group, rebalance_reason: str | None = None) -> None:
        """Take a Stable group converted from a consumer group (KIP-848's online downgrade,
        `consumer_group/migration.py`): like a loaded group, and rebalancing at once when `rebalance_reason` says
        why (a member left)."""
        self.load(group)
        if rebalance_reason is not None and group.can_rebalance():
            self._prepare_rebalance(group, rebalance_reason)

    # --- JoinGroup ------------------------------------------------------------------------------------------------

    def join(self, args: JoinArgs) -> asyncio.Future:
        """Handle a JoinGroup; the future is answered when the join phase ends (at once for most errors)."""
        future = asyncio.get_running_loop().create_future()
        group = self.groups.get(args.group_id)
        unknown_member = args.member_id == ""
        if group is None:
            if not unknown_member:  # a member of a group that no longer exists
                resolve(future, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=args.member_id))
                return future
            group = self.get_or_create(args.group_id)
        if not self._accepts_joining(group, args.member_id):
            group.remove(args.member_id)
            resolve(future, JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED))
        elif unknown_member:
            self._join_new_member(group, args, future)
        else:
            self._join_existing_member(group, args, future)
        return future

    def _accepts_joining(self, group: Group, member_id: str) -> bool:
        limit = self.settings.max_size
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        member = group.members.get(member_id)
        if group.state is GroupState.PREPARING_REBALANCE:
            # Counting rejoined members (not all members) lets the last ones to rejoin be the ones refused.
            return (member is not None and member.awaiting_join) or group.awaiting_join_count() < limit
        return member is not None or len(group.members) < limit

    def _join_new_member(self, group: Group, args: JoinArgs, future: asyncio.Future) -> None:
        if group.state is GroupState.DEAD:
            resolve(future, JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        elif not group.supports_protocols(args.protocol_type, [name for name, _ in args.protocols]):
            resolve(future, JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        else:
            new_member_id = f"{args.group_instance_id or args.client_id}-{uuid.uuid4()}"
            if args.group_instance_id is not None:
                self._join_new_static_member(group, args, new_member_id, future)
            elif args.requires_known_member_id:
                group.pending_join_members.add(new_member_id)
                self.timers.schedule(heartbeat_key(group.group_id, new_member_id), args.session_timeout_ms,
                                     lambda: self._expire_heartbeat(group.group_id, new_member_id))
                log.info("group %s: new member gets id %s and must join again with it", group.group_id,
                         new_member_id)
                resolve(future, JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_member_id))
            else:
                self._add_member_then_rebalance(group, args, new_member_id, future)

    def _join_new_static_member(self, group: Group, args: JoinArgs, new_member_id: str,
                                future: asyncio.Future) -> None:
        existing = group.static_members.get(args.group_instance_id)
        if existing is None:
            self._add_member_then_rebalance(group, args, new_member_id, future)
            return
        log.info("group %s: static instance %s rejoins as %s, replacing %s (%s)", group.group_id,
                 args.group_instance_id, new_member_id, existing, group.state)
        self._replace_static_member(group, args, existing, new_member_id, future)

    def _join_existing_member(self, group: Group, args: JoinArgs, future: asyncio.Future) -> None:
        member_id = args.member_id
        if group.state is GroupState.DEAD:
            resolve(future, JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=member_id))
        elif not group.supports_protocols(args.protocol_type, [name for name, _ in args.protocols]):
            resolve(future, JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
        elif member_id in group.pending_join_members:
            if args.group_instance_id is not None:  # ids from MEMBER_ID_REQUIRED are for dynamic members only
                resolve(future, JoinResult(ErrorCode.UNKNOWN_SERVER_ERROR, member_id=member_id))
                return
            self._add_member_then_rebalance(group, args, member_id, future)
        else:
            error = group.validate_member(member_id, args.group_instance_id)
            if error is not ErrorCode.NONE:
                resolve(future, JoinResult(error, member_id=member_id))
                return
            self._rejoin(group, group.members[member_id], args, future)

    def _rejoin(self, group: Group, member: Member, args: JoinArgs, future: asyncio.Future) -> None:
        """A known member joins again: a rebalance unless nothing changed and it only missed its answer."""
        unchanged = member.matches(args.protocols)
        reason = f"member {member.member_id} rejoins during {group.state} (reason: {args.reason})"
        if group.state is GroupState.PREPARING_REBALANCE:
            self._update_member_then_rebalance(group, member, args, future, reason)
        elif group.state is GroupState.COMPLETING_REBALANCE:
            if unchanged:  # it lost its JoinGroup answer: the same generation again
                resolve(future, self._current_generation(group, member.member_id,
                                                         with_members=group.is_leader(member.member_id)))
            else:
                self._update_member_then_rebalance(group, member, args, future, reason)
        elif group.state is GroupState.STABLE:
            # The leader rejoining always rebalances: it may know of changes (new partitions) that the members'
            # metadata does not show.
            if group.is_leader(member.member_id) or not unchanged:
                self._update_member_then_rebalance(group, member, args, future, reason)
            else:
                resolve(future, self._current_generation(group, member.member_id, with_members=False))
        else:  # Empty: no member can be known here; let it start over
            resolve(future, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member.member_id))

    def _current_generation(self, group: Group, member_id: str, *, with_members: bool,
                            leader: str | None = None, skip_assignment: bool = False) -> JoinResult:
        return JoinResult(ErrorCode.NONE, member_id=member_id, generation_id=group.generation_id,
                          protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                          leader=(group.leader_id if leader is None else leader) or "",
                          skip_assignment=skip_assignment,
                          members=group.member_metadata() if with_members else [])

    def _add_member_then_rebalance(self, group: Group, args: JoinArgs, member_id: str,
                                   future: asyncio.Future) -> None:
        member = Member(member_id, args.group_instance_id, args.client_id, args.client_host,
                        args.rebalance_timeout_ms, args.session_timeout_ms, args.protocol_type, args.protocols)
        member.is_new = True
        if group.state is GroupState.PREPARING_REBALANCE and group.previous_state is GroupState.EMPTY:
            group.new_member_added = True  # the initial delay is extended for it
        group.add(member, future)
        # A parked JoinGroup sends no heartbeats: bound a new member's wait separately from its session.
        self._reschedule_heartbeat(group, member, self.settings.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(
            group, f"new member {member_id} (instance {args.group_instance_id}, reason: {args.reason})")

    def _update_member_then_rebalance(self, group: Group, member: Member, args: JoinArgs, future: asyncio.Future,
                                      reason: str) -> None:
        group.update_member(member, args.protocols, args.rebalance_timeout_ms, args.session_timeout_ms, future)
        self._maybe_prepare_rebalance_or_complete_join(group, reason)

    def _replace_static_member(self, group: Group, args: JoinArgs, old_member_id: str, new_member_id: str,
                               future: asyncio.Future) -> None:
        previous_leader = group.leader_id
        member = group.replace_static_member(args.group_instance_id, old_member_id, new_member_id)
        self.timers.cancel(heartbeat_key(group.group_id, old_member_id))
        self._reschedule_heartbeat(group, member)
        previous = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, args.protocols, args.rebalance_timeout_ms, args.session_timeout_ms, future)
        reason = f"static instance {args.group_instance_id} rejoined as {new_member_id} (reason: {args.reason})"
        if group.state is GroupState.STABLE:
            if group.protocol_name == group.select_protocol():
                # Nothing the assignment depends on changed: record the new id and carry on without a rebalance.
                self.spawn(self._store_static_replacement(group, member, old_member_id, previous, previous_leader,
                                                           args.supports_skip_assignment))
            else:
                self._maybe_prepare_rebalance_or_complete_join(group, reason)
        elif group.state is GroupState.COMPLETING_REBALANCE:
            # The leader may be assigning to the old id: only a new round gives the new id an assignment.
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join_phase(group)

    async def _store_static_replacement(self, group: Group, member: Member, old_member_id: str, previous: tuple,
                                        previous_leader: str | None, skip_assignment: bool) -> None:
        generation = group.generation_id
        try:
            await self._store_group(group)
            error = None
        except Exception as exc:  # noqa: BLE001 - any failed write is answered, as Kafka does
            error = write_error(exc)
            log.warning("group %s: could not store static member %s: %s", group.group_id, member.member_id, exc)
        if not self._still(group, GroupState.STABLE, generation) or member.member_id not in group.members:
            return  # a rebalance started meanwhile: it answers the parked JoinGroup
        if error is not None:
            self._revert_static_replacement(group, member, old_member_id, previous, previous_leader, error)
        else:
            resolve(member.join_future, self._rejoined_static_answer(group, member, previous_leader, skip_assignment))
            member.join_future = None

    def _rejoined_static_answer(self, group: Group, member: Member, previous_leader: str | None,
                                skip_assignment: bool) -> JoinResult:
        if skip_assignment:  # v9+: the leader learns it leads, with the members, but must not assign again
            is_leader = group.is_leader(member.member_id)
            return self._current_generation(group, member.member_id, with_members=is_leader,
                                            skip_assignment=is_leader)
        # Older clients cannot skip assignment: a rejoined leader is told the old leader id, so that it just syncs.
        return self._current_generation(group, member.member_id, with_members=False, leader=previous_leader)

    def _revert_static_replacement(self, group: Group, member: Member, old_member_id: str, previous: tuple,
                                   previous_leader: str | None, error: ErrorCode) -> None:
        future = member.join_future
        member.join_future = None
        protocols, rebalance_timeout_ms, session_timeout_ms = previous
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, None)
        old = group.replace_static_member(member.group_instance_id, member.member_id, old_member_id)
        self.timers.cancel(heartbeat_key(group.group_id, member.member_id))
        self._reschedule_heartbeat(group, old)
        resolve(future, JoinResult(error, generation_id=group.generation_id, protocol_type=group.protocol_type,
                                   protocol_name=group.protocol_name, leader=previous_leader or ""))

    # --- the join phase -------------------------------------------------------------------------------------------

    def _maybe_prepare_rebalance_or_complete_join(self, group: Group, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join_phase(group)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            self._reset_and_propagate_assignment(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        initial = group.state is GroupState.EMPTY
        if initial:
            delay_ms = self.settings.initial_rebalance_delay_ms
            remaining_ms = max(group.rebalance_timeout_ms() - delay_ms, 0)
            self._schedule_initial_rebalance(group.group_id, delay_ms, remaining_ms)
        log.info("group %s: preparing to rebalance in state %s with old generation %d (%s)", group.group_id,
                 group.state, group.generation_id, reason)
        group.transition(GroupState.PREPARING_REBALANCE, self._now_ms())
        if not initial:
            self._maybe_complete_join_else_schedule(group)

    def _schedule_initial_rebalance(self, group_id: str, delay_ms: int, remaining_ms: int) -> None:
        self.timers.schedule(join_key(group_id), delay_ms,
                             lambda: self._try_complete_initial_rebalance(group_id, delay_ms, remaining_ms))

    def _try_complete_initial_rebalance(self, group_id: str, delay_ms: int, remaining_ms: int) -> None:
        group = self.groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            next_delay_ms = min(self.settings.initial_rebalance_delay_ms, remaining_ms)
            self._schedule_initial_rebalance(group_id, next_delay_ms, max(remaining_ms - delay_ms, 0))
        else:
            self._complete_join(group)

    def _maybe_complete_join_else_schedule(self, group: Group) -> None:
        if group.has_all_members_joined():
            self._complete_join(group)
        else:
            group_id = group.group_id
            self.timers.schedule(join_key(group_id), group.rebalance_timeout_ms(),
                                 lambda: self._complete_join_of(group_id))

    def _maybe_complete_join_phase(self, group: Group) -> None:
        if (group.state is GroupState.PREPARING_REBALANCE and group.previous_state is not GroupState.EMPTY
                and group.has_all_members_joined()):
            self._complete_join(group)

    def _complete_join_of(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None:
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """End the join phase: drop dynamic members that did not rejoin, form the next generation and answer
        every parked JoinGroup (or, with no member left, become Empty)."""
        group_id = group.group_id
        self.timers.cancel(join_key(group_id))
        if group.state is not GroupState.PREPARING_REBALANCE:
            return  # a late timer: the phase already ended
        missing = [m.member_id for m in group.members.values() if not m.awaiting_join and not m.is_static]
        for member_id in missing:
            self._drop(group, member_id)
        if missing:
            log.info("group %s: removed members that did not rejoin in time: %s", group_id, ", ".join(missing))
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that have not rejoined are left: wait for them (or for their sessions to end).
            log.warning("group %s: nobody rejoined; waiting another rebalance timeout", group_id)
            self.timers.schedule(join_key(group_id), group.rebalance_timeout_ms(),
                                 lambda: self._complete_join_of(group_id))
            return
        group.init_next_generation(self._now_ms())
        if group.state is GroupState.EMPTY:
            log.info("group %s is empty at generation %d", group_id, group.generation_id)
            self.spawn(self._store_quietly(group))
            return
        log.info("group %s: generation %d formed with %d member(s), protocol %s, leader %s", group_id,
                 group.generation_id, len(group.members), group.protocol_name, group.leader_id)
        for member in list(group.members.values()):
            result = self._current_generation(group, member.member_id, with_members=group.is_leader(member.member_id))
            resolve(member.join_future, result)
            member.join_future = None
            self._reschedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        generation = group.generation_id
        self.timers.schedule(sync_key(group_id), group.rebalance_timeout_ms(),
                             lambda: self._expire_pending_sync(group_id, generation))

    # --- SyncGroup ------------------------------------------------------------------------------------------------

    def sync(self, args: SyncArgs) -> asyncio.Future:
        """Handle a SyncGroup; the future is answered with the member's assignment once the leader's is stored."""
        future = asyncio.get_running_loop().create_future()
        group = self.groups.get(args.group_id)
        if group is None or group.state is GroupState.EMPTY:
            resolve(future, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
            return future
        error = self._validate_sync(group, args)
        if error is not ErrorCode.NONE:
            resolve(future, SyncResult(error))
        elif group.state is GroupState.PREPARING_REBALANCE:
            resolve(future, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.state is GroupState.COMPLETING_REBALANCE:
            self._park_sync(group, args, future)
        else:  # Stable: the assignment is known; a follower syncing after the leader gets it at once
            self._remove_pending_sync_member(group, args.member_id)
            member = group.members[args.member_id]
            resolve(future, SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment))
        return future

    def _validate_sync(self, group: Group, args: SyncArgs) -> ErrorCode:
        if group.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(args.member_id, args.group_instance_id)
        if error is not ErrorCode.NONE:
            return error
        if args.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if _inconsistent(args.protocol_type, group.protocol_type) or \
                _inconsistent(args.protocol_name, group.protocol_name):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return ErrorCode.NONE

    def _park_sync(self, group: Group, args: SyncArgs, future: asyncio.Future) -> None:
        member = group.members[args.member_id]
        resolve(member.sync_future, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))  # superseded by this retry
        member.sync_future = future
        self._remove_pending_sync_member(group, member.member_id)
        if not group.is_leader(member.member_id):
            return
        missing = [m for m in group.members if m not in args.assignments]
        if missing:
            log.warning("group %s: the leader assigned nothing to %s", group.group_id, ", ".join(missing))
        for each in group.members.values():
            each.assignment = args.assignments.get(each.member_id, b"")
        log.info("group %s: assignment received from leader %s for generation %d", group.group_id,
                 member.member_id, group.generation_id)
        self.spawn(self._store_assignment(group, group.generation_id))

    async def _store_assignment(self, group: Group, generation: int) -> None:
        """Make the leader's assignment durable, then hand it out (Stable) or, if that fails, restart."""
        try:
            await self._store_group(group)
            error = ErrorCode.NONE
        except Exception as exc:  # noqa: BLE001 - any failed write is answered, as Kafka does
            error = write_error(exc)
            log.warning("group %s: could not store the assignment of generation %d: %s", group.group_id,
                        generation, exc)
        if not self._still(group, GroupState.COMPLETING_REBALANCE, generation):
            return  # another member joined meanwhile: that rebalance has answered the parked syncs
        if error is ErrorCode.NONE:
            self._propagate_assignment(group, ErrorCode.NONE)
            group.transition(GroupState.STABLE, self._now_ms())
        else:
            self._reset_and_propagate_assignment(group, error)
            self._maybe_prepare_rebalance_or_complete_join(group, f"storing the assignment failed with {error.name}")

    def _reset_and_propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        ok = error is ErrorCode.NONE
        for member in group.members.values():
            answered = resolve(member.sync_future, SyncResult(
                error, group.protocol_type if ok else None, group.protocol_name if ok else None, member.assignment))
            member.sync_future = None
            if answered:
                # Its session was not checked while it waited: it starts again from now.
                self._reschedule_heartbeat(group, member)

    def _remove_pending_sync_member(self, group: Group, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if group.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE) or \
                not group.pending_sync_members:
            self.timers.cancel(sync_key(group.group_id))

    def _remove_sync_expiration(self, group: Group) -> None:
        group.pending_sync_members.clear()
        self.timers.cancel(sync_key(group.group_id))

    def _expire_pending_sync(self, group_id: str, generation: int) -> None:
        group = self.groups.get(group_id)
        if group is None or group.generation_id != generation:
            return
        if group.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE) or not group.pending_sync_members:
            return
        late = sorted(group.pending_sync_members)
        for member_id in late:
            self._drop(group, member_id)
        self._prepare_rebalance(group, f"members {', '.join(late)} sent no SyncGroup in time")

    # --- Heartbeat ------------------------------------------------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, group_instance_id)
        if error is not ErrorCode.NONE:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.state is GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._reschedule_heartbeat(group, group.members[member_id])
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE  # CompletingRebalance too: members may heartbeat before they sync

    def touch(self, group: Group, member: Member) -> None:
        """Restart a member's session timer: it proved alive by other means than a Heartbeat (an offset commit)."""
        self._reschedule_heartbeat(group, member)

    def _reschedule_heartbeat(self, group: Group, member: Member, timeout_ms: int | None = None) -> None:
        group_id, member_id = group.group_id, member.member_id
        self.timers.schedule(heartbeat_key(group_id, member_id),
                             member.session_timeout_ms if timeout_ms is None else timeout_ms,
                             lambda: self._expire_heartbeat(group_id, member_id))

    def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return
        if member_id in group.pending_join_members:
            log.info("group %s: pending member %s did not join again in time", group_id, member_id)
            group.remove(member_id)
            if group.state is GroupState.PREPARING_REBALANCE and group.has_all_members_joined():
                self._complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.heartbeat_satisfied():
            return
        log.info("group %s: member %s failed (session timeout), removing it", group_id, member_id)
        self._remove_member(group, member, f"session of {member_id} expired")

    def _remove_member(self, group: Group, member: Member, reason: str) -> None:
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(group, reason)
        elif group.state is GroupState.PREPARING_REBALANCE and group.has_all_members_joined():
            self._complete_join(group)

    # --- LeaveGroup -----------------------------------------------------------------------------------------------

    def leave(self, group_id: str, leaving: list[LeavingMember]) -> tuple[ErrorCode, list[LeavingMember]]:
        """Remove members (by member id, or by instance id alone as admin tools do); returns the top-level error
        and each member's outcome."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [_with_error(m, ErrorCode.UNKNOWN_MEMBER_ID) for m in leaving]
        if group.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results = [_with_error(m, self._leave_one(group, m)) for m in leaving]
        if any(result.error is ErrorCode.NONE for result in results):
            left = ", ".join(r.member_id or str(r.group_instance_id) for r in results if r.error is ErrorCode.NONE)
            if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(group, f"LeaveGroup of {left}")
            elif group.state is GroupState.PREPARING_REBALANCE:
                self._maybe_complete_join_phase(group)
        return ErrorCode.NONE, results

    def _leave_one(self, group: Group, leaving: LeavingMember) -> ErrorCode:
        if leaving.member_id == "":
            member_id = group.static_members.get(leaving.group_instance_id) \
                if leaving.group_instance_id is not None else None
            if member_id is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            self._remove_leaving_member(group, member_id, leaving.reason)
            return ErrorCode.NONE
        if leaving.member_id in group.pending_join_members:
            self._drop(group, leaving.member_id)
            log.info("group %s: pending member %s left (reason: %s)", group.group_id, leaving.member_id,
                     leaving.reason)
            return ErrorCode.NONE
        error = group.validate_member(leaving.member_id, leaving.group_instance_id)
        if error is ErrorCode.NONE:
            self._remove_leaving_member(group, leaving.member_id, leaving.reason)
        return error

    def _remove_leaving_member(self, group: Group, member_id: str, reason: str | None) -> None:
        log.info("group %s: member %s left (reason: %s)", group.group_id, member_id, reason)
        self._drop(group, member_id)

    # --- helpers --------------------------------------------------------------------------------------------------

    def _drop(self, group: Group, member_id: str) -> None:
        """Remove a member (or a pending member id) with its session timer, which has nobody left to expire."""
        group.remove(member_id)
        self.timers.cancel(heartbeat_key(group.group_id, member_id))

    def _still(self, group: Group, state: GroupState, generation: int) -> bool:
        """Whether the group is still the registered one, in `state`, at `generation` (after an await)."""
        return self.groups.get(group.group_id) is group and group.state is state and \
            group.generation_id == generation

    async def _store_quietly(self, group: Group) -> None:
        try:
            await self._store_group(group)
        except Exception as exc:  # noqa: BLE001 - an Empty group holds no assignment; the next write repairs it
            log.warning("group %s: could not store its metadata: %s", group.group_id, exc)

    def spawn(self, coroutine) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _inconsistent(requested: str | None, current: str | None) -> bool:
    """SyncGroup v5+ names the protocol type and name it expects; either must match the group's if both are set."""
    return requested is not None and current is not None and requested != current


def _with_error(leaving: LeavingMember, error: ErrorCode) -> LeavingMember:
    return LeavingMember(leaving.member_id, leaving.group_instance_id, leaving.reason, error)
