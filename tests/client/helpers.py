"""Helpers of the client tests: writing records with the client's own Produce request, members of classic, consumer
and share groups made with the client's own requests, and waiting for a condition with a generous bound."""
from __future__ import annotations

import time
import uuid

from compatbroker.protocol import encode_message
from compatbroker.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from compatbroker.protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from compatbroker.protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from compatbroker.protocol.messages.join_group import JoinGroupRequest
from compatbroker.protocol.messages.produce import ProduceRequest
from compatbroker.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from compatbroker.protocol.messages.sync_group import SyncGroupRequest
from compatbroker.protocol.records.batch import build_batch

WAIT_S = 30


def produce(client, topic: str, partition: int, values: list[bytes], *, timestamps: list[int] | None = None,
            acks: int = -1):
    """Appends `values` as one batch to the partition's leader; the partition's ProduceResponse entry (None for
    acks=0)."""
    now = int(time.time() * 1000)
    stamps = timestamps or [now] * len(values)
    batch = build_batch([(b"k", value, (), stamp) for value, stamp in zip(values, stamps)])
    request = ProduceRequest(acks=acks, timeout_ms=10000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=batch)])])
    response = client.send(request, client.leader(topic, partition), min_version=3, max_version=12)
    return None if response is None else response.responses[0].partition_responses[0]


def wait_for(condition, what: str, timeout_s: float = WAIT_S):
    """Polls `condition()` until it is truthy (returns it) or `timeout_s` pass (fails naming `what`)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def join_consumer_group(client, group: str, topics: list[str]) -> str:
    """A KIP-848 member joins `group` (one ConsumerGroupHeartbeat); its member id."""
    member_id = str(uuid.uuid4())
    response = client.send(ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member_id, member_epoch=0, rebalance_timeout_ms=30000,
        subscribed_topic_names=topics, topic_partitions=[]), client.coordinator(group))
    assert response.error_code == 0, response
    return member_id


def join_share_group(client, group: str, topics: list[str]) -> str:
    member_id = str(uuid.uuid4())
    response = client.send(ShareGroupHeartbeatRequest(group_id=group, member_id=member_id, member_epoch=0,
                                                      subscribed_topic_names=topics), client.coordinator(group))
    assert response.error_code == 0, response
    return member_id


def join_classic_group(client, group: str, topic: str, partitions: list[int]) -> str:
    """A classic consumer-protocol member joins `group` alone, as its leader assigns itself `partitions` of
    `topic` (JoinGroup twice, as MEMBER_ID_REQUIRED asks, then SyncGroup); its member id. The member lives until
    its session times out (30 s), long enough for a test to look at the group."""
    subscription = b"\0\0" + encode_message(ConsumerProtocolSubscription, 0, ConsumerProtocolSubscription(
        topics=[topic], user_data=None))
    assignment = b"\0\0" + encode_message(ConsumerProtocolAssignment, 0, ConsumerProtocolAssignment(
        assigned_partitions=[ConsumerProtocolAssignment.TopicPartition(topic=topic, partitions=partitions)],
        user_data=None))
    node = client.coordinator(group)
    member_id = ""
    for _attempt in range(2):
        joined = client.send(JoinGroupRequest(
            group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=30000, member_id=member_id,
            protocol_type="consumer", protocols=[JoinGroupRequest.JoinGroupRequestProtocol(
                name="range", metadata=subscription)]), node)
        member_id = joined.member_id
        if joined.error_code == 0:
            break
    assert joined.error_code == 0 and joined.leader == member_id, joined
    own = SyncGroupRequest.SyncGroupRequestAssignment(member_id=member_id, assignment=assignment)
    synced = client.send(SyncGroupRequest(group_id=group, generation_id=joined.generation_id, member_id=member_id,
                                          protocol_type="consumer", protocol_name="range", assignments=[own]), node)
    assert synced.error_code == 0, synced
    return member_id
