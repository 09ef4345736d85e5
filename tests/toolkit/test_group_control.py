"""The control API's view of groups of every type: `GET /groups`, `GET /group?group=` and committed offsets, through
the Python client against a broker on the test's event loop, with groups made by raw Kafka requests."""
from __future__ import annotations

import pytest

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import ConsumerGroupHeartbeatRequest, OffsetCommitRequest
from compatbroker.toolkit.control import ControlError
from tests.server.helpers import RawClient

from .test_control_api import call, running

OFFSET_COMMIT, CONSUMER_GROUP_HEARTBEAT = 8, 68


async def until_loaded(runtime, client: RawClient, request, api_key: int, version: int, answer_error):
    """Send `request` until it is not answered COORDINATOR_LOAD_IN_PROGRESS (the first load of
    `__consumer_offsets`); returns the answer."""
    for attempt in range(100):
        await client.send(request, version=version, correlation_id=attempt)
        _, answer = await client.read_response(api_key, version)
        if answer_error(answer) != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return answer
        await runtime.broker.coordinator.start()
    raise AssertionError("the coordinator never loaded")


def commit(group: str, topic: str, partition: int, offset: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, topics=[
        OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
            OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=partition, committed_offset=offset)])])


async def test_a_classic_group_is_listed_and_described(tmp_path):
    async with running(tmp_path) as (runtime, control):
        await call(control.create_topic, "orders", 2)
        client = await RawClient.connect(runtime.server.listeners[0].port)
        try:
            answer = await until_loaded(runtime, client, commit("simple", "orders", 1, 42), OFFSET_COMMIT, 8,
                                        lambda a: a.topics[0].partitions[0].error_code)
        finally:
            await client.close()
        assert answer.topics[0].partitions[0].error_code == 0
        assert await call(control.groups) == [
            {"group_id": "simple", "type": "classic", "state": "Empty", "protocol_type": ""}]
        described = await call(control.describe_group, "simple")
        assert (described["type"], described["state"], described["members"]) == ("classic", "Empty", [])
        assert [(o["topic"], o["partition"], o["offset"]) for o in await call(control.committed_offsets, "simple")] \
            == [("orders", 1, 42)]
        with pytest.raises(ControlError) as refused:
            await call(control.describe_group, "nobody")
        assert refused.value.status == 404
        with pytest.raises(ControlError) as refused:
            await call(control.describe_group, "")
        assert refused.value.status == 400


async def test_a_consumer_group_is_described_with_its_epochs_and_assignments(tmp_path):
    async with running(tmp_path) as (runtime, control):
        await call(control.create_topic, "orders", 3)
        client = await RawClient.connect(runtime.server.listeners[0].port)
        join = ConsumerGroupHeartbeatRequest(group_id="cg", member_id="m-1", member_epoch=0,
                                             rebalance_timeout_ms=30_000, subscribed_topic_names=["orders"],
                                             topic_partitions=[])
        try:
            answer = await until_loaded(runtime, client, join, CONSUMER_GROUP_HEARTBEAT, 1, lambda a: a.error_code)
        finally:
            await client.close()
        assert answer.error_code == 0, answer
        listed = {entry["group_id"]: entry for entry in await call(control.groups)}
        assert (listed["cg"]["type"], listed["cg"]["protocol_type"]) == ("consumer", "consumer")
        described = await call(control.describe_group, "cg")
        assert described["type"] == "consumer" and described["epoch"] >= 1
        (member,) = described["members"]
        assert (member["member_id"], member["member_epoch"], member["subscribed_topics"]) == (
            "m-1", answer.member_epoch, ["orders"])
        assert member["assignment"] == [["orders", 0], ["orders", 1], ["orders", 2]]


@pytest.mark.parametrize("mode", ["thread", "subprocess"])
def test_an_embedded_broker_describes_a_consumer_protocol_group_of_a_real_client(mode):
    """confluent-kafka with group.protocol=consumer (KIP-848): the toolkit sees the group, its member, the
    assignment and the committed offset, in both modes."""
    import time

    from confluent_kafka import Consumer, Producer, TopicPartition

    from compatbroker import EmbeddedBroker

    with EmbeddedBroker(mode=mode) as broker:
        broker.create_topic("events", 2)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        producer.produce("events", b"one", partition=0)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "kip848",
                             "group.protocol": "consumer", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        try:
            consumer.subscribe(["events"])
            deadline = time.monotonic() + 60
            message = None
            while message is None and time.monotonic() < deadline:
                message = consumer.poll(0.5)
            assert message is not None and message.error() is None and message.value() == b"one"
            consumer.commit(offsets=[TopicPartition("events", 0, message.offset() + 1)], asynchronous=False)
            summary = broker.groups()["kip848"]
            assert (summary.type, summary.protocol_type) == ("consumer", "consumer")
            described = broker.describe_group("kip848")
            (member,) = described["members"]
            assert member["assignment"] == [["events", 0], ["events", 1]]
            assert member["subscribed_topics"] == ["events"] and member["member_epoch"] >= 1
            assert broker.committed_offsets("kip848") == {("events", 0): 1}
        finally:
            consumer.close()


def test_a_share_group_of_a_real_client_is_described_with_its_start_offsets():
    """confluent-kafka: the group config set by its admin client (share.auto.offset.reset=earliest, a GROUP
    resource) is what the share consumer starts from; once its records are acknowledged the toolkit shows the
    group, its member and assignment, and the share-partition start offset past them."""
    import time

    from confluent_kafka import Producer, ShareConsumer
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    from compatbroker import EmbeddedBroker

    with EmbeddedBroker() as broker:
        broker.create_topic("jobs", 1)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        setting = ConfigResource(ResourceType.GROUP, "workers", incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
        for future in admin.incremental_alter_configs([setting]).values():
            future.result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for index in range(3):
            producer.produce("jobs", b"job%d" % index)
        assert producer.flush(30) == 0
        consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "workers"})
        try:
            consumer.subscribe(["jobs"])
            received, deadline = [], time.monotonic() + 60
            while len(received) < 3 and time.monotonic() < deadline:
                received += [m.value() for m in consumer.poll(0.5) or [] if m.error() is None]
            assert sorted(received) == [b"job0", b"job1", b"job2"]
            deadline = time.monotonic() + 60
            while broker.committed_offsets("workers") != {("jobs", 0): 3} and time.monotonic() < deadline:
                consumer.poll(0.2)  # sends the implicit acknowledgements
            assert broker.committed_offsets("workers") == {("jobs", 0): 3}
            described = broker.describe_group("workers")
            assert (described["type"], described["state"], described["protocol_type"]) == ("share", "Stable", "share")
            (member,) = described["members"]
            assert member["assignment"] == [["jobs", 0]] and member["subscribed_topics"] == ["jobs"]
            assert described["start_offsets"] == [{"topic": "jobs", "partition": 0, "start_offset": 3}]
        finally:
            consumer.close()
