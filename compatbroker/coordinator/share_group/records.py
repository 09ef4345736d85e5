"""The ShareGroup* records of `__consumer_offsets` (record types 10 to 15, Kafka 4.2's layout; type 9,
ShareGroupPartitionMetadata, is no longer written from Kafka 4.1 and is ignored on replay) and their meaning.

A change is built as a list of `Record`s (type, key message, value message or None for a tombstone). The manager
encodes them for `OffsetStore.store_records` (`encode`) and, once they are durable, applies them to memory through
`apply`, the same function the loader's replay uses, so that a group after a restart is the group before it.

What each record type says, as Kafka's GroupMetadataManager.replay reads it:
- 11 ShareGroupMetadata: the group epoch and metadata hash (creates the group); its tombstone removes the group;
- 10 ShareGroupMemberMetadata: a member's rack, client id/host and subscribed topic names; tombstone: member gone;
- 14 ShareGroupCurrentMemberAssignment: a member's epochs and assigned partitions; tombstone: the member's
  assignment is cleared (its metadata tombstone follows);
- 12 ShareGroupTargetAssignmentMetadata: the assignment epoch; 13 ShareGroupTargetAssignmentMember: a member's
  target partitions (tombstone: none);
- 15 ShareGroupStatePartitionMetadata: the topics whose share-partition state is initialized / being deleted.
"""
from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable
from typing import NamedTuple

from .. import group_records as gr
from ...protocol import messages
from .model import InitializedTopic, ShareGroup, ShareMember, assignment_of, assignment_pairs

log = logging.getLogger(__name__)

# A member's records, in the order Kafka writes their tombstones when the member leaves or is fenced.
MEMBER_RECORD_TYPES = (gr.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, gr.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
                       gr.SHARE_GROUP_MEMBER_METADATA)


class Record(NamedTuple):
    record_type: int
    key: object
    value: object | None


# --- building ---------------------------------------------------------------------------------------------------

def group_epoch_record(group_id: str, epoch: int, metadata_hash: int) -> Record:
    return _record(gr.SHARE_GROUP_METADATA, group_id,
                   messages.ShareGroupMetadataValue(epoch=epoch, metadata_hash=metadata_hash))


def member_metadata_record(group_id: str, member: ShareMember) -> Record:
    value = messages.ShareGroupMemberMetadataValue(
        rack_id=member.rack_id, client_id=member.client_id, client_host=member.client_host,
        subscribed_topic_names=sorted(member.subscribed_topic_names))
    return _record(gr.SHARE_GROUP_MEMBER_METADATA, group_id, value, member_id=member.member_id)


def current_assignment_record(group_id: str, member: ShareMember) -> Record:
    value_cls = messages.ShareGroupCurrentMemberAssignmentValue
    value = value_cls(member_epoch=member.member_epoch, previous_member_epoch=member.previous_member_epoch,
                      state=member.state,
                      assigned_partitions=[value_cls.TopicPartitions(topic_id=topic_id, partitions=partitions)
                                           for topic_id, partitions in assignment_pairs(member.assigned_partitions)])
    return _record(gr.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, group_id, value, member_id=member.member_id)


def target_assignment_record(group_id: str, member_id: str, assignment) -> Record:
    value_cls = messages.ShareGroupTargetAssignmentMemberValue
    value = value_cls(topic_partitions=[value_cls.TopicPartition(topic_id=topic_id, partitions=partitions)
                                        for topic_id, partitions in assignment_pairs(assignment)])
    return _record(gr.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id, value, member_id=member_id)


def assignment_epoch_record(group_id: str, epoch: int) -> Record:
    return _record(gr.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, group_id,
                   messages.ShareGroupTargetAssignmentMetadataValue(assignment_epoch=epoch))


def state_metadata_record(group_id: str, initialized: dict, deleting: dict) -> Record:
    """ShareGroupStatePartitionMetadata: `initialized` {topic id: InitializedTopic}, `deleting` {topic id: name}.
    Nothing is ever left initializing: our share-partition state is created synchronously."""
    value_cls = messages.ShareGroupStatePartitionMetadataValue
    value = value_cls(
        initializing_topics=[],
        initialized_topics=[value_cls.TopicPartitionsInfo(topic_id=topic_id, topic_name=info.name,
                                                          partitions=sorted(info.partitions))
                            for topic_id, info in sorted(initialized.items(), key=lambda item: str(item[0]))],
        deleting_topics=[value_cls.TopicInfo(topic_id=topic_id, topic_name=name)
                         for topic_id, name in sorted(deleting.items(), key=lambda item: str(item[0]))])
    return _record(gr.SHARE_GROUP_STATE_PARTITION_METADATA, group_id, value)


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """What a leaving or fenced member's records become, in Kafka's order."""
    return [Record(record_type, gr.make_key(record_type, group_id, member_id=member_id), None)
            for record_type in MEMBER_RECORD_TYPES]


def group_tombstones(group: ShareGroup) -> list[Record]:
    """Every record the group has written, in Kafka's order (ShareGroup.createGroupTombstoneRecords): current
    assignments, target assignments and their epoch, subscriptions, state metadata, and the group epoch last."""
    member_ids = sorted(set(group.members) | set(group.target_assignment))

    def tombstones(record_type: int, per_member: bool) -> list[Record]:
        if per_member:
            return [Record(record_type, gr.make_key(record_type, group.group_id, member_id=member_id), None)
                    for member_id in member_ids]
        return [Record(record_type, gr.make_key(record_type, group.group_id), None)]

    return (tombstones(gr.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, True)
            + tombstones(gr.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, True)
            + tombstones(gr.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, False)
            + tombstones(gr.SHARE_GROUP_MEMBER_METADATA, True)
            + tombstones(gr.SHARE_GROUP_STATE_PARTITION_METADATA, False)
            + tombstones(gr.SHARE_GROUP_METADATA, False))


def encode(records: Iterable[Record]) -> list[tuple[bytes, bytes | None]]:
    """The (key, value) bytes `OffsetStore.store_records` writes."""
    return [gr.typed_record(record.record_type, record.key, record.value) for record in records]


def _record(record_type: int, group_id: str, value, **key_fields) -> Record:
    return Record(record_type, gr.make_key(record_type, group_id, **key_fields), value)


# --- applying (live changes and replay) ---------------------------------------------------------------------------

def apply(groups: dict[str, ShareGroup], record, new_group: Callable[[str], ShareGroup]) -> None:
    """Apply one record (a `Record` or the loader's `TypedRecord`) to `groups`, creating the group when a record
    names one not yet known (as Kafka's replay does); a ShareGroupMetadata tombstone removes it."""
    group_id = record.key.group_id
    record_type, value = record.record_type, record.value
    if record_type == gr.SHARE_GROUP_PARTITION_METADATA:
        return  # Kafka 4.0's subscription metadata: replaced by the metadata hash
    group = groups.get(group_id)
    if group is None:
        if value is None:
            return  # a tombstone of a group already gone
        group = groups[group_id] = new_group(group_id)
    if record_type == gr.SHARE_GROUP_METADATA:
        if value is None:
            group.mark_dead()
            del groups[group_id]
        else:
            group.set_group_epoch(value.epoch, value.metadata_hash)
    elif record_type == gr.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA:
        group.set_assignment_epoch(value.assignment_epoch if value is not None else 0)
    elif record_type == gr.SHARE_GROUP_STATE_PARTITION_METADATA:
        _apply_state_metadata(group, value)
    elif record_type == gr.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER:
        group.set_target_assignment(record.key.member_id, None if value is None else assignment_of(
            (tp.topic_id, tp.partitions) for tp in value.topic_partitions))
    elif record_type == gr.SHARE_GROUP_MEMBER_METADATA:
        _apply_member_metadata(group, record.key.member_id, value)
    elif record_type == gr.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT:
        _apply_current_assignment(group, record.key.member_id, value)
    else:
        log.warning("group %s: record type %d is not a share group record", group_id, record_type)


def _apply_state_metadata(group: ShareGroup, value) -> None:
    if value is None:
        group.set_state_metadata({}, {})
        return
    initialized = {topic.topic_id: InitializedTopic(topic.topic_name, frozenset(topic.partitions))
                   for topic in value.initialized_topics}
    # A topic left initializing by Kafka (an interrupted initialisation) counts as initialized here: the share
    # partitions create their state on first use.
    for topic in value.initializing_topics:
        previous = initialized.get(topic.topic_id)
        partitions = frozenset(topic.partitions) | (previous.partitions if previous else frozenset())
        initialized[topic.topic_id] = InitializedTopic(topic.topic_name, partitions)
    group.set_state_metadata(initialized, {topic.topic_id: topic.topic_name for topic in value.deleting_topics})


def _apply_member_metadata(group: ShareGroup, member_id: str, value) -> None:
    if value is None:
        group.remove_member(member_id)
        return
    member = group.get_or_create_member(member_id)
    group.update_member(dataclasses.replace(
        member, rack_id=value.rack_id, client_id=value.client_id, client_host=value.client_host,
        subscribed_topic_names=frozenset(value.subscribed_topic_names)))


def _apply_current_assignment(group: ShareGroup, member_id: str, value) -> None:
    member = group.members.get(member_id)
    if value is None:
        if member is not None:
            group.update_member(dataclasses.replace(member, member_epoch=-1, previous_member_epoch=-1,
                                                    assigned_partitions={}))
        return
    member = member or ShareMember(member_id)
    group.update_member(dataclasses.replace(
        member, member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
        state=value.state, assigned_partitions=assignment_of((tp.topic_id, tp.partitions)
                                                             for tp in value.assigned_partitions)))
