"""Helpers of the KIP-848 compat tests (test_groups_consumer_protocol.py, test_group_migration.py): the broker's
settings for them and confluent-kafka's admin view of a group's type.

Members themselves are the processes of groups.py, started with `group_protocol="consumer"` (and `remote_assignor`),
which confluent-kafka's adapter turns into librdkafka's group.protocol=consumer and group.remote.assignor.
"""
from __future__ import annotations

import time
from typing import NamedTuple

from .records import MAX_MESSAGE_BYTES

PARTITIONS = frozenset(range(6))
# With the consumer protocol the broker sets the session and heartbeat: short ones, so that a dead member costs
# seconds (Kafka's minimums are 45 s and 5 s: lowered too), and a member learns of a new assignment soon.
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 500
CONSUMER_PROTOCOL_SETTINGS = {
    "message.max.bytes": str(MAX_MESSAGE_BYTES), "num.partitions": str(len(PARTITIONS)),
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "group.consumer.min.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "group.consumer.heartbeat.interval.ms": str(HEARTBEAT_INTERVAL_MS),
    "group.consumer.min.heartbeat.interval.ms": str(HEARTBEAT_INTERVAL_MS),
}
ADMIN_TIMEOUT_S = 15


class GroupView(NamedTuple):
    """What confluent-kafka's describe_consumer_groups (ConsumerGroupDescribe, or DescribeGroups for a classic
    group) reports."""
    group_type: str  # "CONSUMER" | "CLASSIC" | "UNKNOWN" (librdkafka's ConsumerGroupType names)
    state: str
    assignor: str
    assignments: dict[str, frozenset[tuple[str, int]]]  # client id -> partitions


def describe(bootstrap: str, group: str) -> GroupView:
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    described = admin.describe_consumer_groups([group], request_timeout=ADMIN_TIMEOUT_S)[group].result()
    return GroupView(described.type.name, described.state.name, described.partition_assignor,
                     {m.client_id: frozenset((tp.topic, tp.partition) for tp in m.assignment.topic_partitions)
                      for m in described.members})


def wait_for_group(bootstrap: str, group: str, condition, what: str, timeout_s: float = 60.0) -> GroupView:
    """Describes the group until `condition(view)` holds (the admin view trails the members' own by a heartbeat)."""
    deadline = time.monotonic() + timeout_s
    while True:
        view = describe(bootstrap, group)
        if condition(view):
            return view
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}; the group is {view}")
        time.sleep(0.2)  # a poll interval between admin calls, not a synchronisation: the loop waits for the state
