"""What the control operations say about a group of any type (classic, KIP-848 consumer, KIP-932 share), as plain
data, and a share group's share-partition start offsets.

A description (`describe(coordinator, group, topic_name_of)`) has the common part: `group_id`, `type` ("classic",
"consumer", "share"), `state` (Kafka's name), `protocol_type`; an `epoch` (a classic group's generation, a
consumer or share group's group epoch) and, for consumer groups, `assignment_epoch`; and `members`, each with
`member_id`, `instance_id`, `client_id`, `client_host` and `assignment` ([[topic, partition], ...] sorted), plus
`member_epoch` and `subscribed_topics` for consumer and share groups, `protocol` and `generation` for classic
ones. Topics are named (an id the cluster no longer knows is shown as its id).
"""
from __future__ import annotations

import uuid
from collections.abc import Callable

from ...share import share_partitions_of

NameOf = Callable[[uuid.UUID], str]


def describe(group, topic_name_of: NameOf) -> dict:
    """The group as plain data (see the module docstring)."""
    kind = group.group_type
    answer = {"group_id": group.group_id, "type": kind, "state": str(group.state),
              "protocol_type": group.protocol_type or ""}
    if kind == "classic":
        answer.update(epoch=group.generation_id, protocol=group.protocol_name,
                      members=[_classic_member(group, member) for member in group.members.values()])
        return answer
    answer["epoch"] = group.group_epoch
    if kind == "consumer":
        answer["assignment_epoch"] = group.assignment_epoch
    answer["members"] = [_modern_member(group, member, topic_name_of) for member in group.members.values()]
    return answer


def _classic_member(group, member) -> dict:
    return {"member_id": member.member_id, "instance_id": member.group_instance_id, "client_id": member.client_id,
            "client_host": member.client_host, "generation": group.generation_id,
            "assignment": _classic_assignment(group, member.assignment)}


def _classic_assignment(group, data: bytes) -> list[list]:
    """A consumer-protocol member's assignment by topic name; [] for other protocols or unreadable bytes."""
    from ...coordinator.consumer_group.consumer_protocol import MalformedProtocol, parse_assignment

    if group.protocol_type != "consumer" or not data:
        return []
    try:
        assignment = parse_assignment(data)
    except MalformedProtocol:
        return []
    return sorted([topic.topic, partition] for topic in assignment.assigned_partitions
                  for partition in topic.partitions)


def _modern_member(group, member, topic_name_of: NameOf) -> dict:
    """A consumer group's member (its subscription includes the topics its regex resolved to) or a share group's
    (which has no instance id)."""
    subscribed = getattr(group, "member_subscribed_topics", None)
    topics = subscribed(member) if subscribed is not None else member.subscribed_topic_names
    return {"member_id": member.member_id, "instance_id": getattr(member, "instance_id", None),
            "client_id": member.client_id, "client_host": member.client_host,
            "member_epoch": member.member_epoch, "subscribed_topics": sorted(topics),
            "assignment": sorted([topic_name_of(topic_id), partition]
                                 for topic_id, partitions in member.assigned_partitions.items()
                                 for partition in partitions)}


async def share_start_offsets(cluster, group, *, with_lag: bool = False) -> list[dict]:
    """The start offsets of a share group's share-partitions (those the group has initialized, read from each
    partition's leader; partitions without state are left out), by topic name and partition; `with_lag` adds each
    one's lag as DescribeShareGroupOffsets v1 answers it (KIP-1226; None when not known)."""
    found = []
    for topic_id, partitions in group.initialized_partitions().items():
        info = cluster.metadata.topic_by_id(topic_id)
        if info is None:
            continue
        by_leader: dict[int, list[int]] = {}
        for partition in sorted(partitions):
            state = cluster.metadata.partition(info.name, partition)
            if state is not None:
                by_leader.setdefault(state.leader, []).append(partition)
        for leader, wanted in sorted(by_leader.items()):
            node = cluster.nodes.get(leader)
            if node is None:
                continue
            answer = await share_partitions_of(node).read_offsets(group.group_id, topic_id, wanted)
            for partition, (start_offset, _epoch, lag, _error) in sorted(answer.items()):
                if start_offset >= 0:
                    found.append({"topic": info.name, "partition": partition, "start_offset": start_offset}
                                 | ({"lag": lag if lag >= 0 else None} if with_lag else {}))
    return sorted(found, key=lambda entry: (entry["topic"], entry["partition"]))
