"""Shared pieces of the membership tests: a real Broker on a temporary directory, a coordinator on it (with the
real offset store, or a stand-in store whose writes a test can hold or fail), JoinGroup/SyncGroup/... through
the handlers at any version (requests and answers go through the codec, as on the wire), and consumer protocol
metadata. Also for every coordinator test: the records a group's partition of `__consumer_offsets` holds."""
from __future__ import annotations

import asyncio
import itertools

from compatbroker.coordinator import Coordinator, GroupSettings
from compatbroker.coordinator.offsets import partition_for_group
from compatbroker.protocol import encode_message
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import (ConsumerProtocolAssignment, ConsumerProtocolSubscription,
                                            DescribeGroupsRequest, HeartbeatRequest, JoinGroupRequest,
                                            LeaveGroupRequest, SyncGroupRequest)
from compatbroker.protocol.records.batch import iter_batches, iter_records
from compatbroker.topic_names import GROUP_METADATA_TOPIC
from tests.async_tests import async_test  # noqa: F401 - the membership tests import it from here
from tests.handlers.helpers import call

# Small timeouts keep the timer tests fast; the floor is lowered so that they are accepted.
FAST = GroupSettings(min_session_timeout_ms=1, max_session_timeout_ms=1_800_000, initial_rebalance_delay_ms=0)


async def started_coordinator(broker, settings: GroupSettings = FAST, store=None) -> Coordinator:
    """A loaded coordinator installed as the broker's (the handlers find it there). `store`: a stand-in store
    class; None for the real one."""
    coordinator = Coordinator(broker, settings=settings, offset_store_factory=store)
    broker.coordinator = coordinator
    await coordinator.start()
    return coordinator


def records_in(broker, group_id: str) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) bytes of every record in the group's partition of `__consumer_offsets`, in log order."""
    partitions = broker.topic(GROUP_METADATA_TOPIC).partitions
    log = broker.get_log(GROUP_METADATA_TOPIC, partition_for_group(group_id, partitions))
    data = log.read_bytes(log.log_start_offset, 1 << 30) if log.log_end_offset > log.log_start_offset else b""
    return [(r.key, r.value) for pos, h in iter_batches(data)
            for r in iter_records(data[pos:pos + h.size], max_size=1 << 30)]


class StandInStore:
    """The offset store's part as membership sees it: group writes (recorded; a test may hold them on `gate` or
    make them fail with `fail_with`), and groups with offsets."""

    def __init__(self, broker, coordinator):
        self.loaded = False
        self.stored: list[tuple[str, str, int, dict]] = []  # group id, state, generation, assignments
        self.deleted: list[str] = []
        self.with_offsets: set[str] = set()
        self.gate: asyncio.Event | None = None
        self.fail_with: Exception | None = None

    async def load(self):
        self.loaded = True

    async def stop(self):
        pass

    def error_for(self, group_id: str) -> ErrorCode:
        return ErrorCode.NONE if self.loaded else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

    def is_loading(self) -> bool:
        return False

    def partition_for(self, group_id: str) -> int:
        return partition_for_group(group_id, 50)

    def groups_with_offsets(self) -> set[str]:
        return set(self.with_offsets)

    async def store_group(self, group) -> None:
        snapshot = (group.group_id, str(group.state), group.generation_id,
                    {m.member_id: m.assignment for m in group.members.values()})
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_with is not None:
            raise self.fail_with
        self.stored.append(snapshot)

    async def delete_group(self, group_id: str, group_records=None) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        self.with_offsets.discard(group_id)
        self.deleted.append(group_id)


class WriteFailed(Exception):
    def __init__(self, error_code: ErrorCode):
        super().__init__(error_code.name)
        self.error_code = error_code


# --- consumer protocol bytes --------------------------------------------------------------------------------------

def subscription(*topics: str, owned: dict[str, list[int]] | None = None, version: int = 1) -> bytes:
    """ConsumerProtocolSubscription bytes (version prefix included), with owned partitions from v1."""
    owned_list = [ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=p)
                  for t, p in (owned or {}).items()]
    body = ConsumerProtocolSubscription(topics=list(topics), user_data=None,
                                        owned_partitions=owned_list if version >= 1 else [])
    return version.to_bytes(2, "big") + encode_message(ConsumerProtocolSubscription, version, body)


def assignment(partitions: dict[str, list[int]]) -> bytes:
    body = ConsumerProtocolAssignment(assigned_partitions=[
        ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=p) for t, p in partitions.items()],
        user_data=None)
    return (0).to_bytes(2, "big") + encode_message(ConsumerProtocolAssignment, 0, body)


# --- requests through the handlers --------------------------------------------------------------------------------

Protocol = JoinGroupRequest.JoinGroupRequestProtocol
_clients = itertools.count()


def protocols(*names: str, metadata: bytes = b"") -> list:
    return [Protocol(name=name, metadata=metadata or subscription("t")) for name in names]


def join_request(group: str, member_id: str = "", *, version: int = 9, session_ms: int = 10_000,
                 rebalance_ms: int = 10_000, names=("range",), metadata: bytes = b"", instance: str | None = None,
                 protocol_type: str = "consumer") -> JoinGroupRequest:
    return JoinGroupRequest(group_id=group, session_timeout_ms=session_ms,
                            rebalance_timeout_ms=rebalance_ms if version >= 1 else -1, member_id=member_id,
                            group_instance_id=instance if version >= 5 else None, protocol_type=protocol_type,
                            protocols=protocols(*names, metadata=metadata),
                            reason="test" if version >= 8 else None)


def join_task(broker, group: str, member_id: str = "", *, version: int = 9, client_id: str = "client",
              **options) -> asyncio.Task:
    """A JoinGroup in flight (it parks until its join phase ends); the task's result is the decoded answer."""
    request = join_request(group, member_id, version=version, **options)

    async def run():
        return (await call(broker, version, request, client_id=client_id)).decoded
    return asyncio.get_running_loop().create_task(run())


async def join(broker, group: str, member_id: str = "", **options):
    return await join_task(broker, group, member_id, **options)


async def join_new_member(broker, group: str, *, version: int = 9, **options):
    """The KIP-394 round trip: the first JoinGroup gets an id (v4+), the second joins with it. Returns a task of
    the second JoinGroup, which parks until its join phase ends."""
    if version < 4:
        return join_task(broker, group, version=version, **options)
    first = await join(broker, group, version=version, **options)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    return join_task(broker, group, first.member_id, version=version, **options)


def sync_request(group: str, member_id: str, generation: int, assignments: dict[str, bytes] | None = None, *,
                 version: int = 5, instance: str | None = None, protocol_type: str | None = "consumer",
                 protocol_name: str | None = "range") -> SyncGroupRequest:
    return SyncGroupRequest(
        group_id=group, generation_id=generation, member_id=member_id,
        group_instance_id=instance if version >= 3 else None,
        protocol_type=protocol_type if version >= 5 else None, protocol_name=protocol_name if version >= 5 else None,
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                     for m, a in (assignments or {}).items()])


def sync_task(broker, group: str, member_id: str, generation: int, assignments=None, *, version: int = 5,
              **options) -> asyncio.Task:
    request = sync_request(group, member_id, generation, assignments, version=version, **options)

    async def run():
        return (await call(broker, version, request)).decoded
    return asyncio.get_running_loop().create_task(run())


async def sync(broker, group: str, member_id: str, generation: int, assignments=None, **options):
    return await sync_task(broker, group, member_id, generation, assignments, **options)


async def heartbeat(broker, group: str, member_id: str, generation: int, *, version: int = 4,
                    instance: str | None = None) -> int:
    request = HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id,
                               group_instance_id=instance if version >= 3 else None)
    return (await call(broker, version, request)).decoded.error_code


async def leave(broker, group: str, *members: tuple[str, str | None], version: int = 5):
    if version >= 3:
        request = LeaveGroupRequest(group_id=group, members=[
            LeaveGroupRequest.MemberIdentity(member_id=m, group_instance_id=i, reason="bye" if version >= 5 else None)
            for m, i in members])
    else:
        [(member_id, _)] = members
        request = LeaveGroupRequest(group_id=group, member_id=member_id)
    return (await call(broker, version, request)).decoded


async def describe(broker, *groups: str, version: int = 6, include_operations: bool = False):
    request = DescribeGroupsRequest(groups=list(groups),
                                    include_authorized_operations=include_operations if version >= 3 else False)
    return (await call(broker, version, request)).decoded.groups


async def join_new_members(broker, group: str, count: int, *, version: int = 9, **options) -> list:
    """`count` new members joining at once: every MEMBER_ID_REQUIRED round trip first, then all the second
    JoinGroups in one go, so that they meet in one join phase even with no initial rebalance delay. Returns the
    tasks of the second JoinGroups."""
    ids = [""] * count
    if version >= 4:
        firsts = [await join(broker, group, version=version, client_id=f"c{i}", **options) for i in range(count)]
        assert {first.error_code for first in firsts} == {ErrorCode.MEMBER_ID_REQUIRED}
        ids = [first.member_id for first in firsts]
    return [join_task(broker, group, member_id, version=version, client_id=f"c{i}", **options)
            for i, member_id in enumerate(ids)]


async def form_group(broker, group: str, count: int, **options) -> list:
    """`count` members join together (one join phase) and sync: returns their JoinGroup answers, leader first.
    The leader assigns each member its index as bytes."""
    answers = await asyncio.gather(*await join_new_members(broker, group, count, **options))
    leader = next(a for a in answers if a.member_id == a.leader)
    assignments = {a.member_id: str(i).encode() for i, a in enumerate(answers)}
    followers = [sync_task(broker, group, a.member_id, a.generation_id) for a in answers if a is not leader]
    await sync(broker, group, leader.member_id, leader.generation_id, assignments)
    for done in await asyncio.gather(*followers):
        assert done.error_code == ErrorCode.NONE
    return [leader] + [a for a in answers if a is not leader]


async def finished(task: asyncio.Task, within_s: float = 5):
    """The task's result, failing the test if it does not finish in time (a parked request that stays parked)."""
    return await asyncio.wait_for(task, within_s)


async def settle() -> None:
    """Let the tasks and callbacks that are ready run (yields to the loop; no time is waited for)."""
    for _ in range(20):
        await asyncio.sleep(0)


def still_parked(task: asyncio.Task) -> bool:
    return not task.done()


def watch(group) -> asyncio.Queue:
    """A queue receiving each state the group enters from now on (to await a timer's effect)."""
    queue: asyncio.Queue = asyncio.Queue()
    original = group.transition

    def transition(state, now_ms):
        original(state, now_ms)
        queue.put_nowait(state)
    group.transition = transition
    return queue


async def reaches(states: asyncio.Queue, wanted, within_s: float = 5) -> None:
    """Wait until the watched group enters `wanted`."""
    async def until():
        while await states.get() is not wanted:
            pass
    await asyncio.wait_for(until(), within_s)
