"""Consuming as a member of a classic consumer group (the JoinGroup/SyncGroup protocol, protocol type "consumer"
with the "range" assignor), as the Java consumer does with `group.protocol=classic`.

`GroupMember` speaks to the group coordinator:

- FindCoordinator, then JoinGroup with a ConsumerProtocolSubscription (repeated once with the member id the
  coordinator hands out on MEMBER_ID_REQUIRED, KIP-394), with the Java consumer's defaults: session.timeout.ms
  45 s, a rebalance timeout of max.poll.interval.ms (300 s; the JoinGroup answer may take that long);
- the leader computes the range assignment (`range_assign`, Kafka's RangeAssignor without racks: per topic, the
  members subscribed to it sorted by member id (static members by instance id, first), each taking a contiguous
  range, the first `partitions % members` one partition more) and sends it with SyncGroup; every member reads its
  ConsumerProtocolAssignment from the SyncGroup answer;
- Heartbeat every heartbeat.interval.ms (3 s), sent from the poll loop between fetches (a fetch waits at most
  max_wait_ms, 500 ms, so a heartbeat is never late by more than that; no thread, no lock);
- OffsetCommit of the positions handed out so far: every auto.commit.interval.ms (5 s), before rejoining, and on
  close; OffsetFetch of the committed offsets after each assignment (read_committed asks for stable ones); both
  are the admin client's requests (admin.py), sent with this member's generation and ids;
- LeaveGroup on close, so the others rebalance at once instead of after session.timeout.ms.

A heartbeat or commit answered REBALANCE_IN_PROGRESS makes the member commit what it has and join again;
UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION (its membership is gone: session expired) makes it join as a new member;
NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and lost connections make it look the coordinator up again.

The embedded ConsumerProtocolSubscription/Assignment bytes are written and read by consumer_protocol.py.

`GroupConsumer` puts a GroupMember and a `Consumer` together behind the Consumer's poll/at_end interface: after each
assignment, positions come from the committed offsets, or from the `reset` policy (auto.offset.reset) where the
group has none.
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest

from .admin import Admin
from .consumer import RETRY_BACKOFF_S, ConsumedRecord, Consumer, OffsetSpec
from .consumer_protocol import assignment_bytes, parse_assignment, parse_subscription, subscription_bytes
from .errors import KafkaConnectionError, KafkaError

__all__ = ["GroupConsumer", "GroupMember", "RANGE", "range_assign"]

PROTOCOL_TYPE = "consumer"
RANGE = "range"
SYNC_GROUP_KEY, LEAVE_GROUP_KEY = 14, 13
COORDINATOR_ERRORS = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})
MEMBERSHIP_LOST = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION,
                             ErrorCode.FENCED_INSTANCE_ID})
JOIN_ATTEMPTS = 20


# --- the range assignor ------------------------------------------------------------------------------------------

def range_assign(subscriptions: Mapping[str, tuple[Iterable[str], str | None]],
                 partition_counts: Mapping[str, int]) -> dict[str, list[tuple[str, int]]]:
    """Kafka's RangeAssignor (no racks): {member id: (topics, group instance id)} and {topic: partitions} ->
    {member id: [(topic, partition)]}. Topics without a partition count (unknown to the cluster) are skipped."""
    assignment: dict[str, list[tuple[str, int]]] = {member: [] for member in subscriptions}
    members_of: dict[str, list[tuple[int, str, str]]] = {}
    for member, (topics, instance_id) in subscriptions.items():
        order = (0, instance_id, member) if instance_id is not None else (1, member, member)
        for topic in set(topics):
            members_of.setdefault(topic, []).append(order)
    for topic, members in members_of.items():
        count = partition_counts.get(topic)
        if not count:
            continue
        members.sort()
        share, extra = divmod(count, len(members))
        for index, (_, _, member) in enumerate(members):
            start = index * share + min(index, extra)
            length = share + (1 if index < extra else 0)
            assignment[member].extend((topic, partition) for partition in range(start, start + length))
    for partitions in assignment.values():
        partitions.sort()
    return assignment


# --- the member ---------------------------------------------------------------------------------------------------

class GroupMember:
    """One classic-protocol member of `group_id` subscribed to `topics`. Not thread-safe; `client` is a
    KafkaClient (send, metadata, coordinator)."""

    def __init__(self, client, group_id: str, topics: Iterable[str], *, session_timeout_ms: int = 45000,
                 rebalance_timeout_ms: int = 300000, heartbeat_interval_ms: int = 3000,
                 group_instance_id: str | None = None, require_stable: bool = False):
        self.client = client
        self.group_id = group_id
        self.topics = sorted(set(topics))
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_s = heartbeat_interval_ms / 1000
        self.group_instance_id = group_instance_id
        self.require_stable = require_stable
        self.member_id = ""
        self.generation = -1
        self.assignment: list[tuple[str, int]] = []
        self.needs_join = True
        self._next_heartbeat = 0.0
        self._admin = Admin(client)

    # --- coordinator ----------------------------------------------------------------------------------------------

    def _at_coordinator(self, call):
        """`call()`, which speaks to the group's coordinator; a lost connection forgets the coordinator, so that it
        is looked up again next time."""
        try:
            return call()
        except KafkaConnectionError:
            self.client.forget_coordinator(self.group_id)
            raise

    def _send(self, body, api_key: int | None = None, timeout_s: float | None = None):
        """Send to the coordinator a request, or a function of the version with `api_key`."""
        return self._at_coordinator(lambda: self.client.send(body, node_id=self.client.coordinator(self.group_id),
                                                             api_key=api_key, timeout_s=timeout_s))

    def _coordinator_moved(self, code: int) -> bool:
        if code in COORDINATOR_ERRORS:
            self.client.forget_coordinator(self.group_id)
            time.sleep(RETRY_BACKOFF_S)
            return True
        return False

    # --- joining --------------------------------------------------------------------------------------------------

    def join(self) -> list[tuple[str, int]]:
        """Join (or rejoin) the group and return this member's assigned partitions."""
        for _ in range(JOIN_ATTEMPTS):
            try:
                joined = self._join_group()
                if joined is None:
                    continue
                assignment = self._sync_group(joined)
            except KafkaConnectionError:
                time.sleep(RETRY_BACKOFF_S)
                continue
            if assignment is not None:
                self.assignment = assignment
                self.needs_join = False
                self._next_heartbeat = time.monotonic() + self.heartbeat_interval_s
                return assignment
        raise KafkaError(ErrorCode.REBALANCE_IN_PROGRESS,
                         f"could not join group {self.group_id} after {JOIN_ATTEMPTS} attempts")

    def _join_group(self):
        request = JoinGroupRequest(
            group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id,
            group_instance_id=self.group_instance_id, protocol_type=PROTOCOL_TYPE, reason=None,
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(
                name=RANGE, metadata=subscription_bytes(self.topics, self.assignment, self.generation))])
        # the coordinator holds JoinGroup until every member has rejoined: wait the rebalance timeout and more
        response = self._send(request, timeout_s=self.rebalance_timeout_ms / 1000 + 5)
        code = response.error_code
        if code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = response.member_id
            return None
        if code == ErrorCode.UNKNOWN_MEMBER_ID:
            self._reset_membership(code)
            return None
        if code == ErrorCode.REBALANCE_IN_PROGRESS or self._coordinator_moved(code):
            return None
        if code:
            raise KafkaError(code, f"JoinGroup of group {self.group_id}")
        self.member_id = response.member_id
        self.generation = response.generation_id
        return response

    def _sync_group(self, joined):
        assignments = []
        if joined.leader == self.member_id and not getattr(joined, "skip_assignment", False):
            assignments = self._leader_assignments(joined.members)
        response = self._send(lambda version: SyncGroupRequest(
            group_id=self.group_id, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=self.group_instance_id, assignments=assignments,
            protocol_type=PROTOCOL_TYPE if version >= 5 else None,
            protocol_name=(joined.protocol_name or RANGE) if version >= 5 else None), SYNC_GROUP_KEY)
        code = response.error_code
        if code in MEMBERSHIP_LOST:
            self._reset_membership(code)
            return None
        if code == ErrorCode.REBALANCE_IN_PROGRESS or self._coordinator_moved(code):
            return None
        if code:
            raise KafkaError(code, f"SyncGroup of group {self.group_id}")
        return parse_assignment(response.assignment)

    def _leader_assignments(self, members) -> list:
        subscriptions, versions = {}, []
        for member in members:
            version, subscription = parse_subscription(member.metadata)
            subscriptions[member.member_id] = (subscription.topics, member.group_instance_id)
            versions.append(version)
        topics = sorted({topic for topics, _ in subscriptions.values() for topic in topics})
        cluster = self.client.metadata(topics)
        counts = {name: len(meta.partitions) for name, meta in cluster.topics.items()
                  if name in topics and not meta.error}
        version = min(versions, default=0)
        return [SyncGroupRequest.SyncGroupRequestAssignment(member_id=member,
                                                            assignment=assignment_bytes(parts, version))
                for member, parts in range_assign(subscriptions, counts).items()]

    def _reset_membership(self, code: int) -> None:
        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
            self.member_id = ""
        self.generation = -1
        self.needs_join = True

    # --- staying in ------------------------------------------------------------------------------------------------

    def heartbeat_if_due(self) -> None:
        """Heartbeat when heartbeat.interval.ms has passed; sets `needs_join` when the group rebalances or the
        membership is gone."""
        if self.needs_join or time.monotonic() < self._next_heartbeat:
            return
        self._next_heartbeat = time.monotonic() + self.heartbeat_interval_s
        try:
            response = self._send(HeartbeatRequest(group_id=self.group_id, generation_id=self.generation,
                                                   member_id=self.member_id,
                                                   group_instance_id=self.group_instance_id))
        except KafkaConnectionError:
            return  # looked up again at the next heartbeat; the session outlives a few missed ones
        code = response.error_code
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            self.needs_join = True
        elif code in MEMBERSHIP_LOST:
            self._reset_membership(code)
        elif not self._coordinator_moved(code) and code:
            raise KafkaError(code, f"Heartbeat in group {self.group_id}")

    def commit(self, offsets: Mapping[tuple[str, int], int]) -> bool:
        """OffsetCommit of `offsets` (the next offset to read, per partition) in this generation. Returns False,
        and marks the member for rejoining, when the group rebalanced or the membership is gone."""
        if not offsets:
            return True
        for _ in range(3):
            try:
                results = self._at_coordinator(lambda: self._admin.commit_offsets(
                    self.group_id, offsets, generation=self.generation, member_id=self.member_id,
                    group_instance_id=self.group_instance_id))
            except KafkaConnectionError:
                time.sleep(RETRY_BACKOFF_S)
                continue
            codes = {result.error.code for result in results if result.error}
            if not codes:
                return True
            code = next(iter(codes))
            if code == ErrorCode.REBALANCE_IN_PROGRESS:
                self.needs_join = True
                return False
            if code in MEMBERSHIP_LOST:
                self._reset_membership(code)
                return False
            if not self._coordinator_moved(code):
                raise KafkaError(code, f"OffsetCommit of group {self.group_id}")
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"OffsetCommit of group {self.group_id}")

    def committed(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """OffsetFetch: the committed offset of each partition that has one (stable ones with read_committed)."""
        topics = sorted({topic for topic, _ in partitions})
        for _ in range(20):
            try:
                offsets = self._at_coordinator(lambda: self._admin.committed_offsets(
                    self.group_id, topics, require_stable=self.require_stable))
            except KafkaConnectionError:
                time.sleep(RETRY_BACKOFF_S)
                continue
            except KafkaError as exc:
                if self._coordinator_moved(exc.code):
                    continue
                raise
            found = self._committed_of(partitions, offsets)
            if found is not None:
                return found
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"OffsetFetch of group {self.group_id}")

    def _committed_of(self, partitions, offsets):
        """{tp: offset} of `partitions` among the OffsetFetch answer, or None to ask again (coordinator moved,
        offsets not yet stable)."""
        wanted = set(partitions)
        found = {}
        for committed in offsets:
            tp = (committed.topic, committed.partition)
            if tp not in wanted:
                continue
            error = committed.error
            if error and (error.code == ErrorCode.UNSTABLE_OFFSET_COMMIT or self._coordinator_moved(error.code)):
                time.sleep(RETRY_BACKOFF_S)
                return None
            if error:
                raise KafkaError(error.code, f"OffsetFetch of {committed.topic}-{committed.partition}")
            if committed.offset >= 0:
                found[tp] = committed.offset
        return found

    def leave(self, reason: str = "the consumer is closing") -> None:
        """LeaveGroup (errors are ignored: the session times out anyway)."""
        if not self.member_id:
            return

        def build(version: int):
            if version < 3:
                return LeaveGroupRequest(group_id=self.group_id, member_id=self.member_id)
            return LeaveGroupRequest(group_id=self.group_id, members=[LeaveGroupRequest.MemberIdentity(
                member_id=self.member_id, group_instance_id=self.group_instance_id,
                reason=reason if version >= 5 else None)])
        try:
            self._send(build, LEAVE_GROUP_KEY)
        except KafkaError:
            pass
        self.member_id = ""
        self.generation = -1
        self.needs_join = True


# --- member + consumer --------------------------------------------------------------------------------------------

class GroupConsumer:
    """A Consumer whose partitions come from a consumer group, committing what it hands out."""

    def __init__(self, client, group_id: str, topics: Iterable[str], *, reset: str = "earliest",
                 auto_commit_interval_ms: int = 5000, member_options: Mapping | None = None, **consumer_options):
        self.consumer = Consumer(client, reset=reset, **consumer_options)
        self.member = GroupMember(client, group_id, topics, require_stable=self.consumer.isolation_level == 1,
                                  **dict(member_options or {}))
        self.reset = reset
        self.auto_commit_interval_s = auto_commit_interval_ms / 1000
        self._next_commit = 0.0
        self._committed: dict[tuple[str, int], int] = {}

    @property
    def assignment(self) -> list[tuple[str, int]]:
        return self.consumer.assignment

    def poll(self, max_records: int = 500, timeout_s: float | None = None) -> list[ConsumedRecord]:
        """Records of the assigned partitions (joining first when needed). Heartbeats and auto-commits go before
        the fetch, so that records leave this method last: a caller stopped in a heartbeat loses none."""
        self._ensure_member()
        self.member.heartbeat_if_due()
        if time.monotonic() >= self._next_commit:
            self.commit()
        if self.member.needs_join:
            return []  # the group rebalances: join at the next poll, before reading more
        return self.consumer.poll(max_records, timeout_s) if self.consumer.assignment else self._idle(timeout_s)

    def _idle(self, timeout_s):
        """Nothing assigned (more members than partitions): wait a little between heartbeats."""
        time.sleep(min(timeout_s if timeout_s is not None else 0.5, 0.5))
        return []

    def rewind(self, records) -> None:
        self.consumer.rewind(records)

    def rewind_to(self, positions) -> None:
        self.consumer.rewind_to(positions)

    def positions(self) -> dict[tuple[str, int], int]:
        return self.consumer.positions()

    def at_end(self) -> bool:
        """True once joined and every assigned partition is read to its end (at once when none is assigned)."""
        return not self.member.needs_join and (not self.consumer.assignment or self.consumer.at_end())

    def _ensure_member(self) -> None:
        if not self.member.needs_join:
            return
        if self.member.generation >= 0:
            self.commit()  # what was handed out so far, before the partitions move on
        assignment = self.member.join()
        committed = self.member.committed(assignment) if assignment else {}
        self._committed = dict(committed)
        self.consumer.assign(assignment, OffsetSpec(self.reset), positions=committed)
        self._next_commit = time.monotonic() + self.auto_commit_interval_s

    def commit(self) -> None:
        """Commit the positions that moved since the last commit."""
        self._next_commit = time.monotonic() + self.auto_commit_interval_s
        if self.member.needs_join and self.member.generation < 0:
            return
        changed = {tp: offset for tp, offset in self.consumer.positions().items()
                   if self._committed.get(tp) != offset}
        if changed and self.member.commit(changed):
            self._committed.update(changed)

    def close(self) -> None:
        """Commit, then leave the group."""
        try:
            self.commit()
        finally:
            self.member.leave()
