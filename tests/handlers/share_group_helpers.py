"""Share group steps of the handler tests: a loaded coordinator, heartbeats, describes, and the offsets APIs, each
sent through the codec (as `helpers.call` does), as the anonymous principal or as ALICE."""
from __future__ import annotations

from compatbroker.coordinator import coordinator_of
from compatbroker.protocol import messages as m

from .authz_helpers import call_as
from .helpers import call

GROUP = "sg"
Describe = m.DescribeShareGroupOffsetsRequest
Alter = m.AlterShareGroupOffsetsRequest
Delete = m.DeleteShareGroupOffsetsRequest


async def coordinated(broker):
    """`broker` with its group coordinator loaded."""
    await coordinator_of(broker).start()
    return broker


async def send(broker, version, request, *, as_alice=False):
    answer = await (call_as(broker, version, request) if as_alice else call(broker, version, request))
    return answer.decoded


async def heartbeat(broker, member_id, epoch, topics=None, *, group=GROUP, rack_id=None, as_alice=False):
    return await send(broker, 1, m.ShareGroupHeartbeatRequest(
        group_id=group, member_id=member_id, member_epoch=epoch, rack_id=rack_id, subscribed_topic_names=topics),
        as_alice=as_alice)


async def describe_groups(broker, *group_ids, operations=False, as_alice=False):
    response = await send(broker, 1, m.ShareGroupDescribeRequest(group_ids=list(group_ids),
                                                                 include_authorized_operations=operations),
                          as_alice=as_alice)
    return response.groups


async def describe_offsets(broker, topics=None, *, group=GROUP, version=1, as_alice=False):
    """`topics`: None for all, else {name: [partitions]}."""
    wanted = None if topics is None else [Describe.DescribeShareGroupOffsetsRequestTopic(topic_name=name,
                                                                                         partitions=parts)
                                          for name, parts in topics.items()]
    response = await send(broker, version, Describe(groups=[Describe.DescribeShareGroupOffsetsRequestGroup(
        group_id=group, topics=wanted)]), as_alice=as_alice)
    return response.groups[0]


async def alter_offsets(broker, offsets, *, group=GROUP, as_alice=False):
    """`offsets`: {topic: {partition: start offset}}."""
    return await send(broker, 0, Alter(group_id=group, topics=[Alter.AlterShareGroupOffsetsRequestTopic(
        topic_name=name, partitions=[Alter.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o)
                                     for p, o in parts.items()]) for name, parts in offsets.items()]),
        as_alice=as_alice)


async def delete_offsets(broker, *topics, group=GROUP, as_alice=False):
    return await send(broker, 0, Delete(group_id=group, topics=[Delete.DeleteShareGroupOffsetsRequestTopic(
        topic_name=name) for name in topics]), as_alice=as_alice)


def start_offsets(group_answer) -> dict:
    """{(topic, partition): (start offset, error)} of a DescribeShareGroupOffsets group answer."""
    return {(t.topic_name, p.partition_index): (p.start_offset, p.error_code)
            for t in group_answer.topics for p in t.partitions}
