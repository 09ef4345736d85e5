"""ConsumerGroupHeartbeat's rules, as Kafka 4.2's group coordinator applies them (GroupCoordinatorService's
request validation, GroupMetadataManager.consumerGroupHeartbeat / consumerGroupLeave / consumerGroupFenceMember).

A heartbeat is planned, then written, then applied: `plan_heartbeat` / `plan_leave` / `plan_fence` compute the
records the change needs (`Changes`) and the answer without touching the group; the manager writes the records in
one batch to `__consumer_offsets` and, once they are durable, applies them to the group through the model's
mutators (the same ones replay uses). The manager holds the group's lock throughout, so plans never interleave.

A regular heartbeat, in Kafka's three steps:
1. the member is created or updated (its subscription, rack, assignor, timeouts); the group epoch is bumped when a
   subscription changed, when the group is new, or when the metadata of the subscribed topics changed (partitions
   added, a topic deleted or re-created: the metadata hash differs);
2. a group epoch ahead of the assignment epoch gets a new target assignment from the server assignor the members
   prefer (`group.consumer.assignors`, the first by default);
3. the member's assignment moves one reconciliation step towards its target (`reconciliation.py`).

Regex subscriptions (v1) are resolved here, synchronously, against the cluster's topic names, keeping the topics the
heartbeating member may DESCRIBE (Kafka: resolved in the background by the first member whose heartbeat needs it,
with its permissions, at most every 10 s). They are resolved again when a member brings a regex the group does not
have yet, whenever the set of topic names changed since the last resolution (so that a new topic matching a
regex is picked up by the next heartbeat), and every 10 minutes (Kafka's internal
group.consumer.regex.refresh.interval.ms, for permission changes). Deviation: no 10 s batching (resolution is cheap
here) and no background task: the heartbeat that needs the resolution gets its result.
"""
from __future__ import annotations

import base64
import dataclasses
import functools
import logging
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ...protocol.error_codes import ErrorCode
from . import records
from .assignors import MemberSpec, UnknownAssignor, assign
from .model import (EMPTY_ASSIGNMENT, JOIN_GROUP_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH,
                    LEAVE_GROUP_STATIC_MEMBER_EPOCH, Assignment, ConsumerGroup, ConsumerMember, ResolvedRegex,
                    assignment_of, member_topics, preferred_server_assignor, subscribed_topics)
from .reconciliation import FencedMember, reconcile
from .subscriptions import InvalidRegex, compile_regex, resolve

log = logging.getLogger(__name__)

# ConsumerGroupHeartbeat v1 (KIP-1082): the consumer generates its member id, so it is required on every request.
CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION = 1
# Kafka's internal group.consumer.regex.refresh.interval.ms: regexes are resolved again at least this often, so that
# a change of the members' TOPIC DESCRIBE permissions reaches their assignment.
REGEX_REFRESH_INTERVAL_MS = 600_000


@dataclass
class HeartbeatArgs:
    """A ConsumerGroupHeartbeat, independent of its version (None: the field was null, i.e. unchanged)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned_partitions: Assignment | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1
    authorized_topic: Callable[[str], bool] | None = None  # TOPIC DESCRIBE of this member, for regex results


@dataclass
class HeartbeatAnswer:
    """The answer to a ConsumerGroupHeartbeat or a ShareGroupHeartbeat (share groups use it too)."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None   # None: nothing new to tell the member

    @classmethod
    def refused(cls, error: ErrorCode, message: str | None = None) -> HeartbeatAnswer:
        return cls(error=error, message=message)


class HeartbeatError(Exception):
    """The heartbeat is refused with `error` and Kafka's `message`; nothing is written."""

    def __init__(self, error: ErrorCode, message: str | None = None):
        super().__init__(message or error.name)
        self.error = error
        self.message = message


@dataclass
class Changes:
    """Records to write in one batch, and what they do to the model once they are durable (in order)."""

    records: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    actions: list[Callable[[], None]] = field(default_factory=list)

    def add(self, record_list: Iterable[tuple[bytes, bytes | None]], action: Callable[[], None] | None = None):
        self.records.extend(record_list)
        if action is not None:
            self.actions.append(action)

    def extend(self, other: Changes) -> None:
        self.records.extend(other.records)
        self.actions.extend(other.actions)

    def apply(self) -> None:
        for action in self.actions:
            action()


# --- validation (GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid) ----------------------------

def validate(args: HeartbeatArgs, assignors: tuple[str, ...]) -> HeartbeatAnswer | None:
    """INVALID_REQUEST or UNSUPPORTED_ASSIGNOR with Kafka's message, or None for a well-formed request."""
    try:
        _check_request(args, assignors)
    except HeartbeatError as exc:
        log.info("group %s: ConsumerGroupHeartbeat of member %s refused with %s: %s", args.group_id,
                 args.member_id, exc.error.name, exc.message)
        return HeartbeatAnswer(exc.error, exc.message)
    return None


def _check_request(args: HeartbeatArgs, assignors: tuple[str, ...]) -> None:
    epoch = args.member_epoch
    if args.api_version >= CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION or epoch > 0 \
            or epoch == LEAVE_GROUP_MEMBER_EPOCH:
        _not_blank(args.member_id, "MemberId can't be empty.")
    _not_blank(args.group_id, "GroupId can't be empty.")
    _not_blank(args.instance_id, "InstanceId can't be empty.")
    _not_blank(args.rack_id, "RackId can't be empty.")
    if epoch == JOIN_GROUP_MEMBER_EPOCH:
        if args.rebalance_timeout_ms == -1:
            raise _invalid("RebalanceTimeoutMs must be provided in first request.")
        if args.owned_partitions is None or args.owned_partitions:
            raise _invalid("TopicPartitions must be empty when (re-)joining.")
        if args.subscribed_topic_names is None and args.subscribed_topic_regex is None:
            raise _invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if args.instance_id is None:
            raise _invalid("InstanceId can't be null.")
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise _invalid("MemberEpoch is invalid.")
    if args.server_assignor is not None and args.server_assignor not in assignors:
        raise HeartbeatError(ErrorCode.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {args.server_assignor} is not "
                             f"supported. Supported assignors: {', '.join(assignors)}.")


def _not_blank(value: str | None, message: str) -> None:
    if value is not None and not value.strip(_JAVA_WHITESPACE):  # Java's trim(): every char <= ' '
        raise _invalid(message)


_JAVA_WHITESPACE = "".join(chr(code) for code in range(33))


def _invalid(message: str) -> HeartbeatError:
    return HeartbeatError(ErrorCode.INVALID_REQUEST, message)


def new_member_id() -> str:
    """A member id as Kafka's Uuid.randomUuid().toString() prints one (URL-safe base64, no padding)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


# --- topic metadata -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TopicsView:
    """The cluster's topics as the heartbeat sees them: name -> (topic id, partition count)."""

    by_name: dict[str, tuple[uuid.UUID, int]]

    @classmethod
    def of(cls, host) -> TopicsView:
        return cls({name: (topic.topic_id, topic.partitions) for name, topic in host.topics().items()})

    def topic_id(self, name: str) -> uuid.UUID | None:
        entry = self.by_name.get(name)
        return None if entry is None else entry[0]

    def ids_of(self, names: Iterable[str]) -> frozenset[uuid.UUID]:
        return frozenset(self.by_name[name][0] for name in names if name in self.by_name)

    def partitions_of(self, names: Iterable[str]) -> dict[uuid.UUID, int]:
        return {self.by_name[name][0]: self.by_name[name][1] for name in names if name in self.by_name}

    def metadata_hash(self, names: Iterable[str]) -> int:
        return _metadata_hash(tuple((name, *self.by_name[name]) for name in sorted(set(names))
                                    if name in self.by_name))


@functools.lru_cache(maxsize=1024)
def _metadata_hash(topics: tuple) -> int:
    """Every heartbeat checks the hash of its group's topics; they rarely change, so the last ones are kept."""
    return records.metadata_hash(topics)


# --- the plan of a regular heartbeat --------------------------------------------------------------------------------

@dataclass
class Context:
    """What a plan needs from the manager: the group (None: a new one), the cluster's topics, settings, time."""

    group: ConsumerGroup
    topics: TopicsView
    assignors: tuple[str, ...]
    max_size: int
    now_ms: int
    topic_names_version: int     # when the cluster's set of topic names last changed (ms); regexes older re-resolve


@dataclass
class Plan:
    changes: Changes
    answer: HeartbeatAnswer
    member: ConsumerMember | None = None   # the member after the heartbeat (None after a leave)
    replaced_member_id: str | None = None  # a static member this one replaced
    fenced_member_ids: tuple[str, ...] = ()
    reconciled: bool = False               # the member's assignment state changed (its rebalance timer follows)


def plan_heartbeat(ctx: Context, args: HeartbeatArgs) -> Plan:
    """Kafka's consumerGroupHeartbeat for member epochs >= 0. Raises HeartbeatError."""
    group = ctx.group
    changes = Changes()
    if len(group.members) >= ctx.max_size and (not args.member_id or args.member_id not in group.members):
        raise HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum "
                                                               f"capacity of {ctx.max_size} members.")
    joining = args.member_epoch == JOIN_GROUP_MEMBER_EPOCH
    member_id = args.member_id or new_member_id()
    replaced: ConsumerMember | None = None
    if args.instance_id is None:
        member = _dynamic_member(group, member_id, args, joining)
    else:
        member, replaced = _static_member(group, member_id, args, joining)
        if replaced is not None:
            changes.extend(replace_member_changes(group, replaced, member))

    # 1. The member and the group epoch.
    updated = _with_request(member, args)
    if updated != member:
        changes.add([records.member_metadata_record(group.group_id, updated)])
    members = members_after(group, updated, replaced)
    regexes = RegexUpdate(ctx, group, member, updated, members, args.authorized_topic)
    regex_changed, regex_bump = regexes.plan(changes)
    names_changed = updated.subscribed_topic_names != member.subscribed_topic_names
    subscribed = subscribed_topics(members.values(), regexes.resolved)
    new_group = group.group_epoch == 0  # a new group moves away from epoch 0 at once
    group_epoch = next_group_epoch(ctx, subscribed, new_group or names_changed or regex_bump, changes)

    # 2. The target assignment.
    target_epoch, target = member_target(ctx, group_epoch, members, regexes.resolved, subscribed,
                                         updated.member_id, replaced, changes)

    # 3. Reconciliation.
    subscription_changed = names_changed or regex_changed
    reconciled = updated
    if subscription_changed or not updated.is_reconciled_to(target_epoch):
        reconciled = _reconcile(ctx, updated, target_epoch, target, args.owned_partitions,
                                member_topics(updated, regexes.resolved), subscription_changed)
    if reconciled != updated or replaced is not None:
        changes.add([records.current_assignment_record(group.group_id, reconciled)])
    if reconciled != member or replaced is not None:
        changes.add([], lambda: group.update_member(reconciled))
    return Plan(changes, _answer(args, member, reconciled), reconciled,
                replaced.member_id if replaced is not None else None, reconciled=reconciled != updated)


def _with_request(member: ConsumerMember, args: HeartbeatArgs) -> ConsumerMember:
    """The member with what the request changes (a null field changes nothing; the client is always the
    sender's)."""
    def given(value, current, unset=None):
        return current if value is unset else value
    names = args.subscribed_topic_names
    return dataclasses.replace(
        member, instance_id=given(args.instance_id, member.instance_id), rack_id=given(args.rack_id, member.rack_id),
        rebalance_timeout_ms=given(args.rebalance_timeout_ms, member.rebalance_timeout_ms, -1),
        server_assignor=given(args.server_assignor, member.server_assignor),
        subscribed_topic_names=member.subscribed_topic_names if names is None else frozenset(names),
        subscribed_topic_regex=given(args.subscribed_topic_regex, member.subscribed_topic_regex),
        client_id=args.client_id, client_host=args.client_host, classic=None)


def next_group_epoch(ctx: Context, subscribed: set[str], bump: bool, changes: Changes) -> int:
    """The group epoch after step 1: one more when `bump` (a subscription moved) or when the subscribed topics'
    metadata changed (their hash differs)."""
    group = ctx.group
    metadata_hash = ctx.topics.metadata_hash(subscribed)
    if not bump and metadata_hash == group.metadata_hash:
        return group.group_epoch
    epoch = group.group_epoch + 1
    changes.add([records.group_epoch_record(group.group_id, epoch, metadata_hash)],
                lambda: group.set_group_epoch(epoch, metadata_hash))
    log.info("group %s: epoch bumped to %d", group.group_id, epoch)
    return epoch


def _reconcile(ctx: Context, member: ConsumerMember, target_epoch: int, target: Assignment,
               owned: Assignment | None, topics: frozenset[str], subscription_changed: bool) -> ConsumerMember:
    try:
        return reconcile(member, target_epoch=target_epoch, target=target,
                         partition_epoch=ctx.group.current_partition_epoch, owned=owned,
                         subscribed_topic_ids=ctx.topics.ids_of(topics), subscription_changed=subscription_changed)
    except FencedMember as exc:
        raise HeartbeatError(exc.error, str(exc)) from None


def _answer(args: HeartbeatArgs, before: ConsumerMember, after: ConsumerMember) -> HeartbeatAnswer:
    """The assignment goes to a joining member, to a full request (one with every non-optional field, sent after
    an error) and whenever it changed."""
    full_request = args.rebalance_timeout_ms != -1 and args.owned_partitions is not None and \
        (args.subscribed_topic_names is not None or args.subscribed_topic_regex is not None)
    send = args.member_epoch == JOIN_GROUP_MEMBER_EPOCH or full_request or \
        after.assigned_partitions != before.assigned_partitions
    return HeartbeatAnswer(member_id=after.member_id, member_epoch=after.member_epoch,
                           assignment=after.assigned_partitions if send else None)


def _dynamic_member(group: ConsumerGroup, member_id: str, args: HeartbeatArgs, joining: bool) -> ConsumerMember:
    member = group.members.get(member_id)
    if member is None:
        if not joining:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {group.group_id}.")
        log.info("group %s: member %s joins the consumer group", group.group_id, member_id)
        return ConsumerMember(member_id)
    _check_member_epoch(member, args.member_epoch, args.owned_partitions)
    return member


def _static_member(group: ConsumerGroup, member_id: str, args: HeartbeatArgs,
                   joining: bool) -> tuple[ConsumerMember, ConsumerMember | None]:
    """The member and, when it takes over an instance id another member id held, the member it replaces."""
    instance_id = args.instance_id
    existing = group.static_member(instance_id)
    if joining:
        if existing is None:
            log.info("group %s: static member %s with instance id %s joins the consumer group", group.group_id,
                     member_id, instance_id)
            return group.members.get(member_id) or ConsumerMember(member_id), None
        if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and not existing.use_classic_protocol:
            raise HeartbeatError(ErrorCode.UNRELEASED_INSTANCE_ID,
                                 f"Static member {member_id} with instance id {instance_id} cannot join the group "
                                 f"because the instance id is owned by {existing.member_id} member.")
        log.info("group %s: static member with instance id %s rejoins as %s, replacing %s", group.group_id,
                 instance_id, member_id, existing.member_id)
        copy = dataclasses.replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        return copy, existing
    if existing is None:
        raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
    _check_instance_not_fenced(group, existing, member_id, instance_id)
    _check_member_epoch(existing, args.member_epoch, args.owned_partitions)
    return existing, None


def _check_instance_not_fenced(group: ConsumerGroup, member: ConsumerMember, member_id: str,
                               instance_id: str) -> None:
    if member.member_id != member_id:
        log.info("group %s: static member %s with instance id %s is fenced by member %s", group.group_id,
                 member_id, instance_id, member.member_id)
        raise HeartbeatError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                                           f"{instance_id} was fenced by member {member.member_id}.")


def _check_member_epoch(member: ConsumerMember, received: int, owned: Assignment | None) -> None:
    """Kafka's throwIfConsumerGroupMemberEpochIsInvalid; epoch 0 (a rejoin after being fenced) is always accepted
    (KAFKA-19233)."""
    if received == JOIN_GROUP_MEMBER_EPOCH:
        return
    if received > member.member_epoch:
        raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH, _fenced_message("greater", received, member))
    if received < member.member_epoch and (received != member.previous_member_epoch
                                           or not _is_subset(owned, member.assigned_partitions)):
        # The previous epoch is fine as long as the member owns nothing new: the answer with the bumped epoch
        # may have been lost.
        raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH, _fenced_message("smaller", received, member))


def _fenced_message(which: str, received: int, member: ConsumerMember) -> str:
    return (f"The consumer group member has a {which} member epoch ({received}) than the one known by the group "
            f"coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.")


def _is_subset(owned: Assignment | None, assigned: Assignment) -> bool:
    if owned is None:
        return False
    return all(partitions <= assigned.get(topic_id, frozenset()) for topic_id, partitions in owned.items())


def members_after(group: ConsumerGroup, updated: ConsumerMember,
                   replaced: ConsumerMember | None) -> dict[str, ConsumerMember]:
    members = dict(group.members)
    if replaced is not None:
        members.pop(replaced.member_id, None)
    members[updated.member_id] = updated
    return members


# --- regexes --------------------------------------------------------------------------------------------------------

class RegexUpdate:
    """The group's regexes after this heartbeat: a new one is validated and resolved, one nobody uses any more goes,
    and all are resolved again when the cluster's topic names changed since they last were."""

    def __init__(self, ctx: Context, group: ConsumerGroup, member: ConsumerMember, updated: ConsumerMember,
                 members: dict[str, ConsumerMember], authorized: Callable[[str], bool] | None):
        self.ctx, self.group, self.member, self.updated = ctx, group, member, updated
        self.members = members
        self.authorized = authorized
        self.resolved: dict[str, ResolvedRegex] = dict(group.resolved_regexes)

    def plan(self, changes: Changes) -> tuple[bool, bool]:
        """(the member's regex changed, the group epoch must move)."""
        old, new = self.member.subscribed_topic_regex, self.updated.subscribed_topic_regex
        changed = old != new
        in_use = Counter(m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex)
        if changed and new and new not in self.group.subscribed_regexes():
            try:
                compile_regex(new)
            except InvalidRegex as exc:
                log.info("group %s: member %s subscribed with an invalid regex: %s", self.group.group_id,
                         self.updated.member_id, exc.message)
                raise HeartbeatError(ErrorCode.INVALID_REGULAR_EXPRESSION, exc.message) from None
        bump = False
        for gone in [regex for regex in self.resolved if regex not in in_use]:
            del self.resolved[gone]
            changes.add([records.regex_tombstone(self.group.group_id, gone)],
                        lambda regex=gone: self.group.set_resolved_regex(regex, None))
        stale = [regex for regex in in_use if self._stale(self.resolved.get(regex))]
        if stale:
            bump = self._resolve(stale, changes)
        elif changed and new and new in self.resolved:
            bump = True  # another member's regex, already resolved: rebalance with it
        return changed, bump

    def _stale(self, resolved: ResolvedRegex | None) -> bool:
        """Not resolved yet, resolved before the topic names last changed, or long ago (permissions may have)."""
        return resolved is None or resolved.version < self.ctx.topic_names_version or \
            resolved.timestamp_ms + REGEX_REFRESH_INTERVAL_MS < self.ctx.now_ms

    def _resolve(self, regexes: list[str], changes: Changes) -> bool:
        """Resolve `regexes` again; True when a resolution's topics changed (the group epoch must move)."""
        matched = resolve(regexes, self.ctx.topics.by_name, self.authorized)
        moved = False
        for regex, topics in matched.items():
            before = self.resolved.get(regex)
            moved = moved or before is None and bool(topics) or before is not None and before.topics != topics
            resolved = ResolvedRegex(topics, self.ctx.topic_names_version, self.ctx.now_ms)
            self.resolved[regex] = resolved
            changes.add([records.regex_record(self.group.group_id, regex, resolved)],
                        lambda regex=regex, resolved=resolved: self.group.set_resolved_regex(regex, resolved))
        if moved:
            log.info("group %s: regular expressions resolved to new topics", self.group.group_id)
        return moved


# --- target assignment ------------------------------------------------------------------------------------------------

def member_target(ctx: Context, group_epoch: int, members: dict[str, ConsumerMember],
                  resolved: dict[str, ResolvedRegex], subscribed: set[str], member_id: str,
                  replaced: ConsumerMember | None, changes: Changes) -> tuple[int, Assignment]:
    """Step 2 for one member: its target assignment and that assignment's epoch, computed anew when the group epoch
    is ahead of the assignment epoch (a static member taking another's place inherits that one's target)."""
    group = ctx.group
    if group_epoch > group.assignment_epoch:
        targets = compute_target_assignment(ctx, group, group_epoch, members, resolved, subscribed, replaced,
                                            changes)
        return group_epoch, targets.get(member_id, EMPTY_ASSIGNMENT)
    target = group.target_assignment.get(member_id) or \
        group.target_assignment_of(replaced.member_id if replaced is not None else member_id)
    return group.assignment_epoch, target


def compute_target_assignment(ctx: Context, group: ConsumerGroup, group_epoch: int,
                              members: dict[str, ConsumerMember], resolved: dict[str, ResolvedRegex],
                              subscribed: set[str], replaced: ConsumerMember | None,
                              changes: Changes) -> dict[str, Assignment]:
    """Kafka's TargetAssignmentBuilder: run the preferred server assignor over `members` and write the targets
    that changed plus the new assignment epoch."""
    preferred = preferred_server_assignor(members.values())
    name = preferred if preferred in ctx.assignors else ctx.assignors[0]
    specs = {}
    for member_id, member in members.items():
        current = group.target_assignment.get(member_id)
        if current is None and replaced is not None and member.instance_id == replaced.instance_id:
            current = group.target_assignment.get(replaced.member_id)
        specs[member_id] = MemberSpec(member_id, member.instance_id, member.rack_id,
                                      ctx.topics.ids_of(member_topics(member, resolved)),
                                      dict(current or EMPTY_ASSIGNMENT))
    try:
        computed = assign(name, specs, ctx.topics.partitions_of(subscribed))
    except UnknownAssignor as exc:
        raise HeartbeatError(ErrorCode.UNSUPPORTED_ASSIGNOR, str(exc)) from None
    targets = {member_id: assignment_of(computed.get(member_id, {}).items()) for member_id in members}
    for member_id, target in targets.items():
        if group.target_assignment.get(member_id) != target or member_id not in group.target_assignment:
            changes.add([records.target_assignment_record(group.group_id, member_id, target)],
                        lambda member_id=member_id, target=target: group.set_target_assignment(member_id, target))
    changes.add([records.target_assignment_epoch_record(group.group_id, group_epoch)],
                lambda: group.set_assignment_epoch(group_epoch))
    log.info("group %s: computed a new target assignment for epoch %d with the %s assignor", group.group_id,
             group_epoch, name)
    return targets


# --- leaving and fencing ----------------------------------------------------------------------------------------------

def replace_member_changes(group: ConsumerGroup, old: ConsumerMember, new: ConsumerMember) -> Changes:
    """A static member's new member id takes the old one's place: the old member's records go, the new one gets
    its subscription, target and current assignment (Kafka's replaceMember)."""
    changes = Changes()
    changes.add(_removal_records(group.group_id, old.member_id), lambda: group.remove_member(old.member_id))
    target = group.target_assignment_of(old.member_id)
    changes.add([records.member_metadata_record(group.group_id, new),
                 records.target_assignment_record(group.group_id, new.member_id, target)],
                lambda: group.set_target_assignment(new.member_id, target))
    return changes


def _removal_records(group_id: str, member_id: str) -> list[tuple[bytes, None]]:
    """A member's tombstones, in Kafka's order (current assignment, target assignment, subscription)."""
    return [records.current_assignment_tombstone(group_id, member_id),
            records.target_assignment_tombstone(group_id, member_id),
            records.member_metadata_tombstone(group_id, member_id)]


def plan_leave(ctx: Context, args: HeartbeatArgs, fence: Callable[[list[ConsumerMember]], Changes]) -> Plan:
    """Kafka's consumerGroupLeave: epoch -1 removes the member; -2 keeps a static member's place (epoch -2) until
    its session ends, so that it may come back under a new member id with its assignment."""
    group = ctx.group
    answer = HeartbeatAnswer(member_id=args.member_id, member_epoch=args.member_epoch)
    if args.instance_id is None:
        member = group.members.get(args.member_id)
        if member is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {args.member_id} is not a member of group {group.group_id}.")
        log.info("group %s: member %s left the consumer group", group.group_id, member.member_id)
        return Plan(fence([member]), answer, fenced_member_ids=(member.member_id,))
    member = group.static_member(args.instance_id)
    if member is None:
        raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {args.instance_id} is unknown.")
    _check_instance_not_fenced(group, member, args.member_id, args.instance_id)
    if args.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        log.info("group %s: static member %s with instance id %s temporarily left the consumer group",
                 group.group_id, member.member_id, args.instance_id)
        away = dataclasses.replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                                   partitions_pending_revocation=EMPTY_ASSIGNMENT)
        changes = Changes()
        changes.add([records.current_assignment_record(group.group_id, away)], lambda: group.update_member(away))
        return Plan(changes, HeartbeatAnswer(member_id=member.member_id,
                                             member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH), away)
    log.info("group %s: static member %s with instance id %s left the consumer group", group.group_id,
             member.member_id, args.instance_id)
    return Plan(fence([member]), answer, fenced_member_ids=(member.member_id,))


def plan_fence(ctx: Context, members: list[ConsumerMember]) -> Changes:
    """Kafka's consumerGroupFenceMembers (without the downgrade, which the manager tries first): the members'
    records go, regexes only they used go, and the group epoch moves so that the others get a new assignment."""
    group = ctx.group
    changes = Changes()
    if not members:
        return changes
    gone = {member.member_id for member in members}
    for member in members:
        changes.add(_removal_records(group.group_id, member.member_id),
                    lambda member_id=member.member_id: group.remove_member(member_id))
    remaining = {member_id: m for member_id, m in group.members.items() if member_id not in gone}
    still_used = {m.subscribed_topic_regex for m in remaining.values() if m.subscribed_topic_regex}
    resolved = dict(group.resolved_regexes)
    for regex in [regex for regex in resolved if regex not in still_used]:
        del resolved[regex]
        changes.add([records.regex_tombstone(group.group_id, regex)],
                    lambda regex=regex: group.set_resolved_regex(regex, None))
    metadata_hash = ctx.topics.metadata_hash(subscribed_topics(remaining.values(), resolved))
    group_epoch = group.group_epoch + 1
    changes.add([records.group_epoch_record(group.group_id, group_epoch, metadata_hash)],
                lambda: group.set_group_epoch(group_epoch, metadata_hash))
    if not remaining:  # KAFKA-20442 (Kafka 4.3): an empty group's assignment epoch catches up with its epoch
        changes.add([records.target_assignment_epoch_record(group.group_id, group_epoch)],
                    lambda: group.set_assignment_epoch(group_epoch))
    log.info("group %s: epoch bumped to %d without %s", group.group_id, group_epoch, ", ".join(sorted(gone)))
    return changes
