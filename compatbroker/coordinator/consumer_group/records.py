"""The records a KIP-848 consumer group writes to `__consumer_offsets` (Kafka's ConsumerGroup* records, record
types 3-8 and 16 of `group_records.py`), built from the model, and their replay back into it.

What each record holds (values as Kafka's GroupCoordinatorRecordHelpers fill them, version 0):
- ConsumerGroupMetadata (group id): the group epoch and, from Kafka 4.1, the metadata hash of the subscribed topics;
- ConsumerGroupMemberMetadata (group id, member id): the member's ids, client, subscription (topic names sorted,
  regex), rebalance timeout, server assignor and, for a member speaking the classic protocol, its session timeout
  and join protocols;
- ConsumerGroupTargetAssignmentMember (group id, member id): the member's target partitions;
- ConsumerGroupTargetAssignmentMetadata (group id): the epoch of the target assignment;
- ConsumerGroupCurrentMemberAssignment (group id, member id): the member's epochs, state, assigned partitions and
  partitions pending revocation;
- ConsumerGroupRegularExpression (group id, regex): the topics a subscribed regex resolved to, the metadata version
  and time of the resolution.
Each helper returns (key, value) bytes for `OffsetStore.store_records`; a `*_tombstone` returns (key, None).
`group_tombstones` gives every key of a group in Kafka's order (createGroupTombstoneRecords): current assignments,
target assignments, the target assignment epoch, member metadata, resolved regexes, the subscription metadata of
Kafka before 4.1 (type 4), the group epoch.

`apply(group, record)` replays one record as Kafka's GroupMetadataManager does: a value creates the group (and the
member) when missing; a tombstone of something unknown is ignored; a member's current assignment tombstone leaves it
at epoch -1 with nothing assigned, its metadata tombstone removes it; the group's tombstone removes the group. The
ConsumerGroupPartitionMetadata of Kafka before 4.1 is read but not kept (its place is the metadata hash now).

`metadata_hash` (Kafka's, from `topic_hash.py`) is re-exported here for the heartbeat, which writes it in the
group epoch record.
"""
from __future__ import annotations

import dataclasses
import uuid

from ..group_records import (CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, CONSUMER_GROUP_MEMBER_METADATA,
                             CONSUMER_GROUP_METADATA, CONSUMER_GROUP_PARTITION_METADATA,
                             CONSUMER_GROUP_REGULAR_EXPRESSION, CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
                             CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, TypedRecord, make_key, tombstone,
                             typed_record, value_class)
from .model import (LEAVE_GROUP_MEMBER_EPOCH, Assignment, ClassicMemberMetadata, ClassicProtocol, ConsumerGroup,
                    ConsumerMember, MemberState, ResolvedRegex, assignment_of)
from .topic_hash import metadata_hash

__all__ = ["apply", "current_assignment_record", "current_assignment_tombstone", "group_epoch_record",
           "group_tombstones", "member_metadata_record", "member_metadata_tombstone", "metadata_hash",
           "regex_record", "regex_tombstone", "target_assignment_epoch_record", "target_assignment_record",
           "target_assignment_tombstone"]

Record = tuple[bytes, bytes | None]

NO_ASSIGNMENT_EPOCH = -1  # the target assignment epoch once its record is deleted (Kafka's replay)


# --- building records ---------------------------------------------------------------------------------------------

def group_epoch_record(group_id: str, epoch: int, metadata_hash: int = 0) -> Record:
    value = value_class(CONSUMER_GROUP_METADATA)(epoch=epoch, metadata_hash=metadata_hash)
    return typed_record(CONSUMER_GROUP_METADATA, make_key(CONSUMER_GROUP_METADATA, group_id), value)


def member_metadata_record(group_id: str, member: ConsumerMember) -> Record:
    value_cls = value_class(CONSUMER_GROUP_MEMBER_METADATA)
    classic = None
    if member.classic is not None:
        classic = value_cls.ClassicMemberMetadata(
            session_timeout_ms=member.classic.session_timeout_ms,
            supported_protocols=[value_cls.ClassicProtocol(name=p.name, metadata=p.metadata)
                                 for p in member.classic.supported_protocols])
    value = value_cls(instance_id=member.instance_id, rack_id=member.rack_id, client_id=member.client_id,
                      client_host=member.client_host, subscribed_topic_names=sorted(member.subscribed_topic_names),
                      subscribed_topic_regex=member.subscribed_topic_regex,
                      rebalance_timeout_ms=member.rebalance_timeout_ms, server_assignor=member.server_assignor,
                      classic_member_metadata=classic)
    key = make_key(CONSUMER_GROUP_MEMBER_METADATA, group_id, member_id=member.member_id)
    return typed_record(CONSUMER_GROUP_MEMBER_METADATA, key, value)


def member_metadata_tombstone(group_id: str, member_id: str) -> Record:
    return tombstone(CONSUMER_GROUP_MEMBER_METADATA, group_id, member_id=member_id)


def target_assignment_record(group_id: str, member_id: str, assignment: Assignment) -> Record:
    value_cls = value_class(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER)
    value = value_cls(topic_partitions=[value_cls.TopicPartition(topic_id=topic_id, partitions=partitions)
                                        for topic_id, partitions in _sorted_topics(assignment)])
    key = make_key(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id, member_id=member_id)
    return typed_record(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, key, value)


def target_assignment_tombstone(group_id: str, member_id: str) -> Record:
    return tombstone(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id, member_id=member_id)


def target_assignment_epoch_record(group_id: str, epoch: int) -> Record:
    value = value_class(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA)(assignment_epoch=epoch)
    return typed_record(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
                        make_key(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group_id), value)


def current_assignment_record(group_id: str, member: ConsumerMember) -> Record:
    value_cls = value_class(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT)
    value = value_cls(member_epoch=member.member_epoch, previous_member_epoch=member.previous_member_epoch,
                      state=int(member.state),
                      assigned_partitions=_current_topics(value_cls, member.assigned_partitions),
                      partitions_pending_revocation=_current_topics(value_cls, member.partitions_pending_revocation))
    key = make_key(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, group_id, member_id=member.member_id)
    return typed_record(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, key, value)


def current_assignment_tombstone(group_id: str, member_id: str) -> Record:
    return tombstone(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, group_id, member_id=member_id)


def regex_record(group_id: str, regex: str, resolved: ResolvedRegex) -> Record:
    value = value_class(CONSUMER_GROUP_REGULAR_EXPRESSION)(topics=sorted(resolved.topics), version=resolved.version,
                                                           timestamp=resolved.timestamp_ms)
    key = make_key(CONSUMER_GROUP_REGULAR_EXPRESSION, group_id, regular_expression=regex)
    return typed_record(CONSUMER_GROUP_REGULAR_EXPRESSION, key, value)


def regex_tombstone(group_id: str, regex: str) -> Record:
    return tombstone(CONSUMER_GROUP_REGULAR_EXPRESSION, group_id, regular_expression=regex)


def group_tombstones(group: ConsumerGroup) -> list[tuple[bytes, None]]:
    """Every record key of the group, as tombstones, in Kafka's order (createGroupTombstoneRecords)."""
    group_id = group.group_id
    members = list(group.members)
    return [*(current_assignment_tombstone(group_id, m) for m in members),
            *(target_assignment_tombstone(group_id, m) for m in members),
            tombstone(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group_id),
            *(member_metadata_tombstone(group_id, m) for m in members),
            *(regex_tombstone(group_id, regex) for regex in group.resolved_regexes),
            tombstone(CONSUMER_GROUP_PARTITION_METADATA, group_id),
            tombstone(CONSUMER_GROUP_METADATA, group_id)]


def _sorted_topics(assignment: Assignment) -> list[tuple[uuid.UUID, list[int]]]:
    return [(topic_id, sorted(assignment[topic_id])) for topic_id in sorted(assignment) if assignment[topic_id]]


def _current_topics(value_cls, assignment: Assignment) -> list:
    return [value_cls.TopicPartitions(topic_id=topic_id, partitions=partitions)
            for topic_id, partitions in _sorted_topics(assignment)]


# --- replay -------------------------------------------------------------------------------------------------------

def apply(group: ConsumerGroup | None, record: TypedRecord) -> ConsumerGroup | None:
    """Replay one consumer group record into `group` (None: the group does not exist yet). Returns the group after
    it: a new one when a value created it, None when it does not exist (any more)."""
    handler = _REPLAY.get(record.record_type)
    if handler is None:  # a share group's record: not ours
        return group
    if group is None:
        if record.value is None or record.record_type == CONSUMER_GROUP_PARTITION_METADATA:
            return None  # a tombstone of a group we do not have; type 4 creates nothing worth keeping
        group = ConsumerGroup(record.group_id)
    return handler(group, record.key, record.value)


def _group_epoch(group: ConsumerGroup, key, value) -> ConsumerGroup | None:
    if value is None:
        group.mark_dead()
        return None
    group.set_group_epoch(value.epoch, value.metadata_hash)
    return group


def _partition_metadata(group: ConsumerGroup, key, value) -> ConsumerGroup:
    return group  # Kafka before 4.1; the metadata hash replaces it


def _member_metadata(group: ConsumerGroup, key, value) -> ConsumerGroup:
    if value is None:
        group.remove_member(key.member_id)
        return group
    classic = None
    if value.classic_member_metadata is not None:
        classic = ClassicMemberMetadata(
            session_timeout_ms=value.classic_member_metadata.session_timeout_ms,
            supported_protocols=tuple(ClassicProtocol(p.name, bytes(p.metadata))
                                      for p in value.classic_member_metadata.supported_protocols))
    member = group.get_or_create_member(key.member_id)
    group.update_member(dataclasses.replace(member, instance_id=value.instance_id, rack_id=value.rack_id,
                                 client_id=value.client_id, client_host=value.client_host,
                                 subscribed_topic_names=frozenset(value.subscribed_topic_names),
                                 subscribed_topic_regex=value.subscribed_topic_regex,
                                 rebalance_timeout_ms=value.rebalance_timeout_ms,
                                 server_assignor=value.server_assignor, classic=classic))
    return group


def _target_assignment(group: ConsumerGroup, key, value) -> ConsumerGroup:
    if value is None:
        group.set_target_assignment(key.member_id, None)
    else:
        group.set_target_assignment(key.member_id, assignment_of((tp.topic_id, tp.partitions)
                                                                  for tp in value.topic_partitions))
    return group


def _assignment_epoch(group: ConsumerGroup, key, value) -> ConsumerGroup:
    group.set_assignment_epoch(NO_ASSIGNMENT_EPOCH if value is None else value.assignment_epoch)
    return group


def _current_assignment(group: ConsumerGroup, key, value) -> ConsumerGroup:
    if value is None:
        member = group.members.get(key.member_id)
        if member is not None:
            group.update_member(dataclasses.replace(member, member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                         previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                         assigned_partitions={}, partitions_pending_revocation={}))
        return group
    member = group.get_or_create_member(key.member_id)
    group.update_member(dataclasses.replace(
        member, member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
        state=MemberState.from_value(value.state),
        assigned_partitions=assignment_of((tp.topic_id, tp.partitions) for tp in value.assigned_partitions),
        partitions_pending_revocation=assignment_of((tp.topic_id, tp.partitions)
                                                    for tp in value.partitions_pending_revocation)))
    return group


def _regex(group: ConsumerGroup, key, value) -> ConsumerGroup:
    resolved = None if value is None else ResolvedRegex(frozenset(value.topics), value.version, value.timestamp)
    group.set_resolved_regex(key.regular_expression, resolved)
    return group


_REPLAY = {
    CONSUMER_GROUP_METADATA: _group_epoch,
    CONSUMER_GROUP_PARTITION_METADATA: _partition_metadata,
    CONSUMER_GROUP_MEMBER_METADATA: _member_metadata,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: _target_assignment,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: _assignment_epoch,
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: _current_assignment,
    CONSUMER_GROUP_REGULAR_EXPRESSION: _regex,
}
