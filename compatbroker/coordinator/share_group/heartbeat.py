"""ShareGroupHeartbeat's rules, as Kafka 4.2's GroupMetadataManager.shareGroupHeartbeat / shareGroupLeave.

Pure planning: given the group as it is and the request, compute the records that express the change and the
answer; the manager (`ShareGroups`) writes the records, applies them (`records.apply`) and schedules the session.
Errors are raised as `HeartbeatError(error, message)` with Kafka's codes and messages.

A heartbeat, in Kafka's steps:
1. the group (created by a join, epoch 0), GROUP_MAX_SIZE_REACHED for a new member of a full group
   (`group.share.max.size`), the member (created by a join; UNKNOWN_MEMBER_ID otherwise) and its epoch
   (FENCED_MEMBER_EPOCH unless it is the member's epoch or the previous one, whose answer may have been lost, or
   0: a fenced member rejoins with its id, KAFKA-19233);
2. the member's metadata (rack, client, subscription; a null field means "unchanged"); a changed subscription,
   or changed metadata of the subscribed topics (the metadata hash: topic ids, names and partition counts), bumps
   the group epoch;
3. a group epoch ahead of the assignment epoch computes a new target assignment with the `simple` assignor over
   the partitions whose share-partition state is initialized (the partitions of newly subscribed topics are
   initialized here, in the same batch: ShareGroupStatePartitionMetadata);
4. the member takes its target assignment and epoch at once (share groups have no revocation phase).
The answer carries the assignment when the member joined, sent a full request (its subscription), or got a new one.

Deviation: Kafka initializes the share-partition state asynchronously after the heartbeat that subscribed to a
topic, so the partitions are assigned one heartbeat later; here the state is created on first use by the share
partitions (compatbroker.share), so the first heartbeat's answer already carries the assignment.
"""
from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from ...protocol.error_codes import ErrorCode
from ..consumer_group.heartbeat import HeartbeatAnswer
from ..consumer_group.records import metadata_hash as consumer_metadata_hash
from . import assignor
from .model import (JOIN_GROUP_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH, MEMBER_STATE_STABLE, Assignment,
                    InitializedTopic, ShareGroup, ShareMember)
from .records import (Record, assignment_epoch_record, current_assignment_record, group_epoch_record,
                      member_metadata_record, member_tombstones, state_metadata_record, target_assignment_record)


class HeartbeatError(Exception):
    """The heartbeat is refused with `error` (and Kafka's `message`)."""

    def __init__(self, error: ErrorCode, message: str):
        super().__init__(message)
        self.error = error
        self.message = message


@dataclass(frozen=True)
class HeartbeatArgs:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass
class Plan:
    records: list[Record]
    answer: HeartbeatAnswer


Topics = Mapping[str, object]
"""The cluster's topics by name (`CoordinatorHost.topics()`: each has `topic_id`, `partitions`)."""


def request_error(args: HeartbeatArgs) -> HeartbeatError | None:
    """Kafka's checks of the request itself (GroupCoordinatorService), before the coordinator is asked."""
    if not args.member_id.strip():
        return HeartbeatError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
    if not args.group_id.strip():
        return HeartbeatError(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
    if args.rack_id is not None and not args.rack_id.strip():
        return HeartbeatError(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
    if args.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
        if not args.subscribed_topic_names:
            return HeartbeatError(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
    elif args.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
        return HeartbeatError(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")
    return None


def plan_heartbeat(group: ShareGroup, args: HeartbeatArgs, topics: Topics, *, max_size: int,
                   heartbeat_interval_ms: int) -> Plan:
    """A join (epoch 0) or a heartbeat of a member of `group` (a new, unregistered group for a first join)."""
    if len(group.members) >= max_size and args.member_id not in group.members:
        raise HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                             f"The share group has reached its maximum capacity of {max_size} members.")
    member = _member_checked(group, args)
    records: list[Record] = []
    updated = dataclasses.replace(
        member,
        rack_id=member.rack_id if args.rack_id is None else args.rack_id,
        subscribed_topic_names=(member.subscribed_topic_names if args.subscribed_topic_names is None
                                else frozenset(args.subscribed_topic_names)),
        client_id=args.client_id, client_host=args.client_host)
    is_new = args.member_id not in group.members
    if is_new or not updated.same_metadata(member):
        records.append(member_metadata_record(group.group_id, updated))
    subscription_changed = updated.subscribed_topic_names != member.subscribed_topic_names
    members = {**group.members, updated.member_id: updated}
    subscribed = _subscribed_names(members.values())
    group_epoch, new_hash = group.group_epoch, metadata_hash(subscribed, topics)
    if subscription_changed or new_hash != group.metadata_hash:
        group_epoch += 1
        records.append(group_epoch_record(group.group_id, group_epoch, new_hash))
    if group_epoch > group.assignment_epoch:
        target = _new_target_assignment(group, members, subscribed, topics, group_epoch, records)
    else:
        target = dict(group.target_assignment)
    reconciled = _reconcile(updated, group_epoch if group_epoch > group.assignment_epoch else group.assignment_epoch,
                            target.get(updated.member_id, {}), subscription_changed, topics)
    if reconciled != updated:
        records.append(current_assignment_record(group.group_id, reconciled))
    full_request = args.subscribed_topic_names is not None
    send_assignment = (args.member_epoch == JOIN_GROUP_MEMBER_EPOCH or full_request
                       or reconciled.assigned_partitions != member.assigned_partitions)
    answer = HeartbeatAnswer(member_id=reconciled.member_id, member_epoch=reconciled.member_epoch,
                             heartbeat_interval_ms=heartbeat_interval_ms,
                             assignment=dict(reconciled.assigned_partitions) if send_assignment else None)
    return Plan(records, answer)


def plan_leave(group: ShareGroup, member_id: str, member_epoch: int, topics: Topics) -> Plan:
    """A member leaving (epoch -1): UNKNOWN_MEMBER_ID for a member the group does not have."""
    if member_id not in group.members:
        raise unknown_member(member_id, group.group_id)
    return Plan(fence_records(group, member_id, topics),
                HeartbeatAnswer(member_id=member_id, member_epoch=member_epoch))


def fence_records(group: ShareGroup, member_id: str, topics: Topics) -> list[Record]:
    """Remove a member (leave or session expiry): its records' tombstones and a group epoch bump; the target
    assignment of the others is recomputed at their next heartbeat, that of an emptied group is the new epoch."""
    remaining = [member for other_id, member in group.members.items() if other_id != member_id]
    new_hash = metadata_hash(_subscribed_names(remaining), topics)
    records = member_tombstones(group.group_id, member_id) + [
        group_epoch_record(group.group_id, group.group_epoch + 1, new_hash)]
    if not remaining:  # an empty group's assignment epoch catches up (KAFKA-20442)
        records.append(assignment_epoch_record(group.group_id, group.group_epoch + 1))
    return records


def unknown_member(member_id: str, group_id: str) -> HeartbeatError:
    return HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")


def metadata_hash(topic_names, topics: Topics) -> int:
    """The group's hash of the subscribed topics that exist (consumer groups' function: ids, names, partition
    counts; 0 for none): it moves when a subscribed topic is created, deleted or gains partitions."""
    return consumer_metadata_hash((name, topics[name].topic_id, topics[name].partitions)
                                  for name in topic_names if name in topics)


# --- internals ----------------------------------------------------------------------------------------------------

def _member_checked(group: ShareGroup, args: HeartbeatArgs) -> ShareMember:
    member = group.members.get(args.member_id)
    if member is None:
        if args.member_epoch != JOIN_GROUP_MEMBER_EPOCH:
            raise unknown_member(args.member_id, group.group_id)
        return ShareMember(args.member_id)
    received = args.member_epoch
    if received == JOIN_GROUP_MEMBER_EPOCH:
        return member  # a fenced member rejoining with its id (KAFKA-19233, Kafka 4.2.x)
    if received > member.member_epoch:
        raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH,
                             f"The share group member has a greater member epoch ({received}) than the one known by "
                             f"the group coordinator ({member.member_epoch}). The member must abandon all its "
                             "partitions and rejoin.")
    if received < member.member_epoch and received != member.previous_member_epoch:
        raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH,
                             f"The share group member has a smaller member epoch ({received}) than the one known by "
                             f"the group coordinator ({member.member_epoch}), and it does not match the previous "
                             f"member epoch ({member.previous_member_epoch}). The member must abandon all its "
                             "partitions and rejoin.")
    return member


def _subscribed_names(members) -> set[str]:
    names: set[str] = set()
    for member in members:
        names |= member.subscribed_topic_names
    return names


def _new_target_assignment(group: ShareGroup, members: Mapping[str, ShareMember], subscribed: set[str],
                           topics: Topics, epoch: int, records: list[Record]) -> dict[str, Assignment]:
    """Initialize the state of newly subscribed partitions, run the assignor, and record what changed."""
    assignable = _initialize(group, subscribed, topics, records)
    specs = {member_id: assignor.MemberSpec(
                 frozenset(topics[name].topic_id for name in member.subscribed_topic_names if name in topics),
                 group.target_assignment.get(member_id, {}))
             for member_id, member in members.items()}
    target = assignor.assign(specs, assignable)
    for member_id, assignment in target.items():
        if group.target_assignment.get(member_id) != assignment:
            records.append(target_assignment_record(group.group_id, member_id, assignment))
    records.append(assignment_epoch_record(group.group_id, epoch))
    return target


def _initialize(group: ShareGroup, subscribed: set[str], topics: Topics, records: list[Record]
                ) -> dict[uuid.UUID, list[int]]:
    """The assignable (initialized) partitions of the subscribed topics, initializing those that are not yet; a
    deleted topic leaves the group's share state metadata (Kafka does it when the topic is deleted)."""
    existing = {topic.topic_id for topic in topics.values()}
    initialized = {topic_id: info for topic_id, info in group.initialized_topics.items() if topic_id in existing}
    for name in subscribed:
        topic = topics.get(name)
        if topic is None:
            continue
        wanted = frozenset(range(topic.partitions))
        known = initialized.get(topic.topic_id)
        if known is None or not wanted <= known.partitions:
            initialized[topic.topic_id] = InitializedTopic(name, wanted | (known.partitions if known else frozenset()))
    deleting = {topic_id: name for topic_id, name in group.deleting_topics.items()
                if topic_id in existing and topic_id not in initialized}
    if initialized != group.initialized_topics or deleting != group.deleting_topics:
        records.append(state_metadata_record(group.group_id, initialized, deleting))
    return {topics[name].topic_id: sorted(initialized[topics[name].topic_id].partitions)
            for name in subscribed if name in topics}


def _reconcile(member: ShareMember, target_epoch: int, target: Assignment, subscription_changed: bool,
               topics: Topics) -> ShareMember:
    """Kafka's ShareGroupAssignmentBuilder: a member behind the target epoch takes the target assignment (only of
    topics it subscribes to) and the epoch; a changed subscription filters the assignment at once."""
    if target_epoch == member.member_epoch and not subscription_changed:
        return member
    subscribed_ids = {topics[name].topic_id for name in member.subscribed_topic_names if name in topics}
    assigned = {topic_id: partitions for topic_id, partitions in target.items() if topic_id in subscribed_ids}
    if target_epoch != member.member_epoch:
        member = member.with_epoch(target_epoch)
    return dataclasses.replace(member, state=MEMBER_STATE_STABLE, assigned_partitions=assigned)
