"""Shared pieces of the KIP-848 consumer group tests: a real Broker on a temporary directory with its coordinator
loaded, heartbeats straight to the manager (`ConsumerGroups.heartbeat`), and `Consumer`, a well-behaved consumer
that heartbeats with what it owns and gives partitions up as soon as it is asked (as librdkafka and the Java client
do), so that tests can drive a group to a stable assignment."""
from __future__ import annotations

import uuid

from compatbroker.coordinator import Coordinator
from compatbroker.coordinator.consumer_group import ConsumerGroups
from compatbroker.coordinator.consumer_group.heartbeat import HeartbeatAnswer, HeartbeatArgs
from compatbroker.protocol.error_codes import ErrorCode
from tests.cluster.helpers import until  # noqa: F401 - the consumer group tests wait with it
from tests.handlers.helpers import make_broker  # noqa: F401 - and start their brokers with it

SIX = 6


async def started(broker) -> Coordinator:
    """The broker's coordinator, loaded (the handlers find it on the broker)."""
    coordinator = Coordinator(broker)
    broker.coordinator = coordinator
    await coordinator.start()
    return coordinator


def manager_of(coordinator) -> ConsumerGroups:
    assert coordinator.consumer_groups is not None
    return coordinator.consumer_groups


def join_args(group: str, member_id: str, topics=("orders",), *, regex: str | None = None,
              instance: str | None = None, assignor: str | None = None, rebalance_ms: int = 30_000,
              version: int = 1, **fields) -> HeartbeatArgs:
    return HeartbeatArgs(group_id=group, member_id=member_id, member_epoch=0, instance_id=instance,
                         rebalance_timeout_ms=rebalance_ms,
                         subscribed_topic_names=list(topics) if topics is not None else None,
                         subscribed_topic_regex=regex, server_assignor=assignor, owned_partitions={},
                         client_id="tests", client_host="/127.0.0.1", api_version=version, **fields)


def beat_args(group: str, member_id: str, epoch: int, owned: dict | None = None, **fields) -> HeartbeatArgs:
    return HeartbeatArgs(group_id=group, member_id=member_id, member_epoch=epoch, owned_partitions=owned,
                         client_id="tests", client_host="/127.0.0.1", **fields)


def ok(answer: HeartbeatAnswer) -> HeartbeatAnswer:
    assert answer.error is ErrorCode.NONE, (answer.error, answer.message)
    return answer


class Consumer:
    """A consumer-protocol member that behaves: it reports what it owns, takes an assignment as given (dropping at
    once what the coordinator takes away) and keeps the epoch it is told."""

    def __init__(self, manager: ConsumerGroups, group: str, member_id: str | None = None, topics=("orders",),
                 **join_fields):
        self.manager, self.group = manager, group
        self.member_id = member_id or f"member-{uuid.uuid4().hex[:8]}"
        self.topics, self.join_fields = topics, join_fields
        self.epoch = 0
        self.owned: dict = {}
        self.last: HeartbeatAnswer | None = None

    async def join(self) -> HeartbeatAnswer:
        self.epoch, self.owned = 0, {}
        return self._take(await self.manager.heartbeat(join_args(self.group, self.member_id, self.topics,
                                                                 **self.join_fields)))

    async def heartbeat(self, **fields) -> HeartbeatAnswer:
        return self._take(await self.manager.heartbeat(beat_args(self.group, self.member_id, self.epoch,
                                                                 dict(self.owned), **fields)))

    async def leave(self, epoch: int = -1, **fields) -> HeartbeatAnswer:
        return await self.manager.heartbeat(beat_args(self.group, self.member_id, epoch, **fields))

    def _take(self, answer: HeartbeatAnswer) -> HeartbeatAnswer:
        self.last = answer
        if answer.error is ErrorCode.NONE:
            self.epoch = answer.member_epoch
            if answer.assignment is not None:
                self.owned = {topic_id: frozenset(p) for topic_id, p in answer.assignment.items() if p}
        return answer

    def partition_count(self) -> int:
        return sum(len(partitions) for partitions in self.owned.values())


async def settle(*consumers: Consumer, rounds: int = 20) -> None:
    """Heartbeat every consumer until the group is Stable (bounded: a group that does not settle fails)."""
    manager, group_id = consumers[0].manager, consumers[0].group
    for _ in range(rounds):
        for consumer in consumers:
            ok(await consumer.heartbeat())
        group = manager.groups[group_id]
        if str(group.state) == "Stable" and all(c.epoch == group.assignment_epoch for c in consumers):
            return
    raise AssertionError(f"group {group_id} did not settle: {manager.groups[group_id]!r}")
