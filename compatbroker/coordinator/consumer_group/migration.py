"""Online migration between the classic group protocol and KIP-848's consumer protocol, as Kafka 4.2 runs it
(GroupMetadataManager: convertToConsumerGroup / convertToClassicGroup, ConsumerGroup.fromClassicGroup,
ClassicGroup.fromConsumerGroup), under `group.consumer.migration.policy` (disabled | upgrade | downgrade |
bidirectional; Kafka's default: bidirectional).

Upgrade: a ConsumerGroupHeartbeat joining a group id that is a classic group.
- An Empty classic group (a simple group holding offsets included) is replaced by a new consumer group whatever the
  policy: its metadata record gets a tombstone.
- A classic group with members becomes a consumer group when the policy allows upgrades, its protocol type is
  `consumer`, it has no more members than `group.consumer.max.size`, every member's metadata is a readable
  ConsumerProtocolSubscription and no member's assignment carries user data (a custom assignor's, which a consumer
  group would lose). Otherwise the heartbeat is answered GROUP_ID_NOT_FOUND with Kafka's message, and the group
  stays classic. The converted group keeps the generation as its group and assignment epochs; each member keeps
  its assignment as its target, is Stable at that epoch, and becomes a classic-protocol member of the consumer
  group (its JoinGroup protocols and session timeout kept, `classic_members.py` serves it from then on). Parked
  JoinGroup/SyncGroup requests of the old group are answered REBALANCE_IN_PROGRESS. The batch: the classic group's
  tombstone, then the new group's records (members, group epoch, target assignment, assignment epoch, current
  assignments), in Kafka's order.

Downgrade: the last consumer-protocol member of a consumer group whose other members all speak the classic protocol
leaves (ConsumerGroupHeartbeat epoch -1, a LeaveGroup, a session or rebalance timeout), or a classic-protocol static
member takes the instance id of that last member. With the policy allowing downgrades and at most
`group.max.size` members left, the group becomes a classic group: Stable at the group epoch, protocol `consumer`,
the protocol the members vote for, each member's target assignment as its classic assignment (in the version of its
subscription). A member leaving starts a rebalance at once; a static replacement only when its subscription
changed. The batch: a tombstone of every record the consumer group has written, then the classic group's metadata
record.

Committed offsets are keyed by group id only, so both conversions keep them without copying anything.

A `Conversion` is computed without touching the live groups; its caller writes `records` as one batch and calls
`install()` once they are durable (nothing changes when the write fails). Requests reaching the old group while the
batch is written are served by the old group and may be lost with it (Kafka serialises them on the partition).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ...protocol.error_codes import ErrorCode
from ..group import CONSUMER_PROTOCOL_TYPE, Group, GroupState, JoinResult, Member, SyncResult, resolve
from ..offsets import group_metadata_key, group_metadata_record_value, group_metadata_value
from . import consumer_protocol, records
from .consumer_protocol import MalformedProtocol
from .heartbeat import Changes, TopicsView
from .model import ClassicMemberMetadata, ClassicProtocol, ConsumerGroup, ConsumerMember, MemberState

__all__ = ["Conversion", "MigrationRefused", "classic_assignment", "downgrade", "downgrade_for_replacement",
           "upgrade"]

log = logging.getLogger(__name__)

Record = tuple[bytes, bytes | None]


class MigrationRefused(Exception):
    """A ConsumerGroupHeartbeat cannot join the classic group of its id: answered `error` with `message`."""

    def __init__(self, message: str, error: ErrorCode = ErrorCode.GROUP_ID_NOT_FOUND):
        super().__init__(message)
        self.error = error
        self.message = message


@dataclass
class Conversion:
    """A group converted to the other protocol, ready to be written (`records`, one batch) and then installed."""

    group_id: str
    group: object                      # the new ConsumerGroup (upgrade) or classic Group (downgrade)
    records: list[Record]
    _install: Callable[[], None] = field(repr=False)
    installed: bool = False

    def install(self) -> None:
        """Make the new group the live one; call once `records` are durable. Idempotent."""
        if not self.installed:
            self.installed = True
            self._install()


# --- upgrade ------------------------------------------------------------------------------------------------------

def upgrade(manager, group_id: str) -> Conversion | None:
    """The conversion a joining ConsumerGroupHeartbeat needs when `group_id` is a classic group (None: it is not).
    Raises MigrationRefused when the classic group cannot become a consumer group."""
    coordinator = manager.coordinator
    classic = coordinator.membership.groups.get(group_id)
    if classic is None or classic.state is GroupState.DEAD:
        return None
    tombstone = (group_metadata_key(group_id), None)
    if classic.state is GroupState.EMPTY:
        group = _new_consumer_group(manager, group_id)
        log.info("group %s: the empty classic group is replaced by a consumer group", group_id)
        return Conversion(group_id, group, [tombstone], lambda: _install_consumer_group(manager, classic, group))
    _validate_online_upgrade(manager, classic)
    group = _consumer_group_from_classic(manager, classic)
    records = [tombstone, *_creation_records(group)]
    return Conversion(group_id, group, records, lambda: _install_consumer_group(manager, classic, group))


def _validate_online_upgrade(manager, classic: Group) -> None:
    group_id = classic.group_id
    if not manager.coordinator.consumer_settings.upgrade_allowed():
        _refuse(group_id, "online upgrade is disabled")
    if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
        _refuse(group_id, "the group does not use the consumer embedded protocol")
    if len(classic.members) > manager.coordinator.consumer_settings.max_size:
        _refuse(group_id, "the group size exceeds the consumer group maximum size")


def _refuse(group_id: str, why: str) -> None:
    log.info("group %s: cannot upgrade the classic group to a consumer group because %s", group_id, why)
    raise MigrationRefused(f"Cannot upgrade classic group {group_id} to consumer group because {why}.")


class _CustomAssignor(Exception):
    """An assignment carrying user data: the custom assignor's data would be lost (Kafka's check)."""


def _consumer_group_from_classic(manager, classic: Group) -> ConsumerGroup:
    """Kafka's ConsumerGroup.fromClassicGroup: every member Stable at the generation, its assignment its target."""
    group = _new_consumer_group(manager, classic.group_id)
    generation = classic.generation_id
    try:
        members = [_consumer_member(manager, classic, member) for member in classic.members.values()]
    except MalformedProtocol as exc:
        log.warning("group %s: cannot upgrade: %s", classic.group_id, exc)
        raise MigrationRefused(f"Cannot upgrade classic group {classic.group_id} to consumer group because the "
                               "embedded consumer protocol is malformed.") from None
    except _CustomAssignor:
        log.warning("group %s: cannot upgrade: an assignment carries a custom assignor's user data",
                    classic.group_id)
        raise MigrationRefused(f"Cannot upgrade classic group {classic.group_id} to consumer group because an "
                               "unsupported custom assignor is in use. Please refer to the documentation or switch "
                               "to a default assignor before re-attempting the upgrade.") from None
    for member in members:
        group.set_target_assignment(member.member_id, member.assigned_partitions)
        group.update_member(member)
    group.set_assignment_epoch(generation)
    group.set_group_epoch(generation, _metadata_hash(manager, group.subscribed_topics()))
    return group


def _consumer_member(manager, classic: Group, member: Member) -> ConsumerMember:
    topic_id_of = TopicsView.of(manager.coordinator.broker).topic_id
    assigned = {}
    if member.assignment:
        assignment = consumer_protocol.parse_assignment(member.assignment)
        if assignment.user_data:
            raise _CustomAssignor()
        assigned = consumer_protocol.partitions_by_id(assignment.assigned_partitions, topic_id_of)
    # A group in its first join phase has no protocol yet: the member's preferred one is what it would vote for.
    protocol_name = classic.protocol_name if classic.protocol_name is not None else member.protocol_names()[0]
    subscription = consumer_protocol.parse_subscription(member.metadata(protocol_name))
    generation = classic.generation_id
    return ConsumerMember(
        member_id=member.member_id, instance_id=member.group_instance_id, rack_id=subscription.rack_id or None,
        client_id=member.client_id, client_host=member.client_host,
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        subscribed_topic_names=frozenset(subscription.topics), member_epoch=generation,
        previous_member_epoch=generation, state=MemberState.STABLE, assigned_partitions=assigned,
        classic=classic_metadata(member.session_timeout_ms, member.protocols))


def classic_metadata(session_timeout_ms: int, protocols: Iterable[tuple[str, bytes]]) -> ClassicMemberMetadata:
    """What a classic-protocol member of a consumer group keeps from its JoinGroup."""
    return ClassicMemberMetadata(session_timeout_ms=session_timeout_ms, supported_protocols=tuple(
        ClassicProtocol(name, bytes(metadata)) for name, metadata in protocols))


def _install_consumer_group(manager, classic: Group, group: ConsumerGroup) -> None:
    membership = manager.coordinator.membership
    for member in classic.members.values():  # Kafka: completeAllJoinFutures / completeAllSyncFutures
        resolve(member.join_future, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id))
        resolve(member.sync_future, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.join_future = member.sync_future = None
    if membership.groups.get(classic.group_id) is classic:
        membership.remove_group(classic.group_id)
    manager.groups[group.group_id] = group
    for member in group.members.values():
        manager.schedule_session_timeout(group.group_id, member.member_id, member.classic.session_timeout_ms)
    log.info("group %s: converted the classic group to a consumer group (epoch %d, %d member(s))", group.group_id,
             group.group_epoch, len(group.members))


# --- downgrade ----------------------------------------------------------------------------------------------------

def downgrade(manager, group: ConsumerGroup, leaving_member_ids: Iterable[str]) -> Conversion | None:
    """Kafka's validateOnlineDowngradeWithFencedMembers + convertToClassicGroup: the conversion to write instead of
    removing `leaving_member_ids`, or None when the group stays a consumer group."""
    leaving = {member_id for member_id in leaving_member_ids if member_id in group.members}
    remaining = [member for member in group.members.values() if member.member_id not in leaving]
    if not leaving or not remaining or not all(member.use_classic_protocol for member in remaining):
        return None
    if not _downgrade_allowed(manager, group, len(remaining)):
        return None
    classic = _classic_group_from_consumer(manager, group, remaining)
    if classic is None:
        return None
    return _downgrade_conversion(manager, group, classic, f"downgrade of group {group.group_id} from consumer to "
                                 "classic for member leaving")


def downgrade_for_replacement(manager, group: ConsumerGroup, replaced: ConsumerMember, joining: ConsumerMember,
                              subscription_changed: bool) -> Conversion | None:
    """Kafka's validateOnlineDowngradeWithReplacedMember: a classic-protocol static member (`joining`) takes the
    instance id of the group's last consumer-protocol member (`replaced`). The joining member takes the replaced
    one's target assignment; the group rebalances only when the subscription changed."""
    others = [member for member in group.members.values() if member.member_id != replaced.member_id]
    if replaced.use_classic_protocol or not all(member.use_classic_protocol for member in others):
        return None
    if not _downgrade_allowed(manager, group, len(group.members)):
        return None
    classic = _classic_group_from_consumer(manager, group, [*others, joining],
                                           assignment_of={joining.member_id: replaced.member_id})
    if classic is None:
        return None
    reason = (f"downgrade of group {group.group_id} from consumer to classic for static member replacement with "
              "different subscription") if subscription_changed else None
    return _downgrade_conversion(manager, group, classic, reason)


def _downgrade_allowed(manager, group: ConsumerGroup, size: int) -> bool:
    if not manager.coordinator.consumer_settings.downgrade_allowed():
        log.info("group %s: cannot downgrade the consumer group to a classic group because the online downgrade "
                 "is disabled", group.group_id)
        return False
    if size > manager.coordinator.membership.settings.max_size:
        log.info("group %s: cannot downgrade the consumer group to a classic group because its group size is "
                 "greater than the classic group max size", group.group_id)
        return False
    return True


def _classic_group_from_consumer(manager, group: ConsumerGroup, members: list[ConsumerMember], *,
                                 assignment_of: dict[str, str] | None = None) -> Group | None:
    """Kafka's ClassicGroup.fromConsumerGroup: Stable at the group epoch, each member's classic assignment its target
    assignment (`assignment_of` maps a joining member to the member whose target it takes)."""
    now_ms = manager.coordinator.broker.now_ms()
    classic = Group(group.group_id, state=GroupState.STABLE, generation_id=group.group_epoch,
                    protocol_type=CONSUMER_PROTOCOL_TYPE, current_state_timestamp=now_ms)
    for member in members:
        classic.add(Member(member.member_id, member.instance_id, member.client_id, member.client_host,
                           member.rebalance_timeout_ms, member.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE,
                           [(p.name, p.metadata) for p in member.classic.supported_protocols]))
    try:
        classic.protocol_name = classic.select_protocol()
        classic.refresh_subscribed_topics()
        for member in classic.members.values():
            target_of = (assignment_of or {}).get(member.member_id, member.member_id)
            member.assignment = classic_assignment(manager, group.target_assignment_of(target_of),
                                                    member.metadata(classic.protocol_name))
    except (ValueError, KeyError) as exc:  # no common protocol, or a version that cannot be read
        log.warning("group %s: cannot downgrade the consumer group to a classic group: %s", group.group_id, exc)
        return None
    return classic


def classic_assignment(manager, target, metadata: bytes) -> bytes:
    """A consumer group's assignment as a classic member reads it: ConsumerProtocolAssignment bytes by topic name,
    in the version of the member's subscription `metadata` (topics no longer in the cluster left out)."""
    topic_by_id = manager.coordinator.broker.topic_by_id
    by_name = {}
    for topic_id, partitions in target.items():
        topic = topic_by_id(topic_id)
        if topic is not None:
            by_name[topic.name] = partitions
    return consumer_protocol.assignment_bytes(by_name, consumer_protocol.metadata_version(metadata))


def _downgrade_conversion(manager, group: ConsumerGroup, classic: Group, rebalance_reason: str | None) -> Conversion:
    records = [*manager.tombstones(group.group_id),
               (group_metadata_key(group.group_id), group_metadata_record_value(group_metadata_value(classic)))]

    def install() -> None:
        manager.remove_group(group.group_id)
        manager.coordinator.membership.adopt(classic, rebalance_reason)
        log.info("group %s: converted the consumer group to a classic group (generation %d, %d member(s))",
                 group.group_id, classic.generation_id, len(classic.members))
    return Conversion(group.group_id, classic, records, install)


# --- shared -------------------------------------------------------------------------------------------------------

def _new_consumer_group(manager, group_id: str) -> ConsumerGroup:
    return ConsumerGroup(group_id, now_ms=manager.coordinator.broker.now_ms)


def _metadata_hash(manager, topics: set[str]) -> int:
    return TopicsView.of(manager.coordinator.broker).metadata_hash(topics)


def _creation_records(group: ConsumerGroup) -> list[Record]:
    """Kafka's ConsumerGroup.createConsumerGroupRecords, in its order."""
    group_id = group.group_id
    members = list(group.members.values())
    return [*(records.member_metadata_record(group_id, member) for member in members),
            records.group_epoch_record(group_id, group.group_epoch, group.metadata_hash),
            *(records.target_assignment_record(group_id, member.member_id,
                                               group.target_assignment_of(member.member_id)) for member in members),
            records.target_assignment_epoch_record(group_id, group.assignment_epoch),
            *(records.current_assignment_record(group_id, member) for member in members)]


async def remove_empty_consumer_group(manager, group: ConsumerGroup) -> ErrorCode:
    """An empty consumer group gives way to a classic group (a classic member's JoinGroup; Kafka's
    maybeDeleteEmptyConsumerGroup, whatever the policy): its records get tombstones. Returns the error of a failed
    write (NONE when done)."""
    group_id = group.group_id
    async with manager.lock(group_id):
        if manager.groups.get(group_id) is not group or not group.is_empty():
            return ErrorCode.NONE  # someone else changed it meanwhile; the caller's routing stands
        changes = Changes(list(manager.tombstones(group_id)), [lambda: manager.remove_group(group_id)])
        error = await manager.write(group_id, changes)
    if error is ErrorCode.NONE:
        log.info("group %s: the empty consumer group is replaced by a classic group", group_id)
    return error
