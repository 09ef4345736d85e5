"""DescribeTopicPartitions: topics by name, the partition limit and the cursor as Kafka pages them, unknown and
invalid names, refused cursors, and what a 3-node cluster reports (leaders, ISR, offline replicas)."""
from __future__ import annotations

from compatbroker.handlers import describe_topic_partitions
from compatbroker.handlers.metadata import TOPIC_AUTHORIZED_OPERATIONS
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import DescribeTopicPartitionsRequest
from compatbroker.protocol.wire import ZERO_UUID
from tests.cluster.helpers import started_cluster

from .helpers import call

Named = DescribeTopicPartitionsRequest.TopicRequest
Cursor = DescribeTopicPartitionsRequest.Cursor


async def describe(broker, names=(), *, limit=2000, cursor=None):
    request = DescribeTopicPartitionsRequest(topics=[Named(name=name) for name in names],
                                             response_partition_limit=limit, cursor=cursor)
    return (await call(broker, 0, request)).decoded


def pages(answer) -> list[tuple[str, list[int]]]:
    return [(topic.name, [p.partition_index for p in topic.partitions]) for topic in answer.topics]


def cursor_of(answer):
    return None if answer.next_cursor is None else (answer.next_cursor.topic_name, answer.next_cursor.partition_index)


def test_declares_every_schema_version():
    assert (describe_topic_partitions.API_KEY, describe_topic_partitions.MIN_VERSION,
            describe_topic_partitions.MAX_VERSION) == (75, 0, 0)


async def test_single_node_describes_named_topics_in_name_order(broker):
    info = broker.create_topic("b", 2)
    broker.create_topic("a", 1)
    answer = await describe(broker, ["b", "a", "b"])
    assert pages(answer) == [("a", [0]), ("b", [0, 1])]
    assert answer.next_cursor is None
    topic = answer.topics[1]
    assert (topic.error_code, topic.topic_id, topic.is_internal) == (0, info.topic_id, False)
    assert topic.topic_authorized_operations == TOPIC_AUTHORIZED_OPERATIONS
    node = broker.node_id
    for partition in topic.partitions:
        assert (partition.error_code, partition.leader_id, partition.leader_epoch) == (0, node, 0)
        assert (partition.replica_nodes, partition.isr_nodes, partition.offline_replicas) == ([node], [node], [])
        assert (partition.eligible_leader_replicas, partition.last_known_elr) == ([], [])


async def test_empty_topic_list_means_every_topic_and_hides_unknown_ones(broker):
    broker.create_topic("x", 1)
    broker.create_topic("__consumer_offsets", 2)
    answer = await describe(broker)
    assert pages(answer) == [("__consumer_offsets", [0, 1]), ("x", [0])]
    assert answer.topics[0].is_internal is True


async def test_unknown_and_invalid_names_get_their_errors(broker):
    answer = await describe(broker, ["nope", "bad name", "__transaction_state"])
    codes = {topic.name: (topic.error_code, topic.topic_id, topic.is_internal, topic.partitions)
             for topic in answer.topics}
    assert codes == {"nope": (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ZERO_UUID, False, []),
                     "bad name": (ErrorCode.INVALID_TOPIC_EXCEPTION, ZERO_UUID, False, []),
                     "__transaction_state": (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ZERO_UUID, True, [])}


async def test_the_limit_cuts_a_topic_and_the_cursor_continues_it(broker):
    broker.create_topic("a", 3)
    broker.create_topic("b", 2)
    first = await describe(broker, ["a", "b"], limit=2)
    assert (pages(first), cursor_of(first)) == ([("a", [0, 1])], ("a", 2))
    second = await describe(broker, ["a", "b"], limit=2, cursor=Cursor(topic_name="a", partition_index=2))
    assert (pages(second), cursor_of(second)) == ([("a", [2]), ("b", [0])], ("b", 1))
    third = await describe(broker, ["a", "b"], limit=2, cursor=Cursor(topic_name="b", partition_index=1))
    assert (pages(third), cursor_of(third)) == ([("b", [1])], None)


async def test_a_limit_used_up_at_a_topic_end_points_the_cursor_at_the_next_topic(broker):
    broker.create_topic("a", 2)
    broker.create_topic("b", 1)
    answer = await describe(broker, limit=2)
    assert (pages(answer), cursor_of(answer)) == ([("a", [0, 1])], ("b", 0))


async def test_the_limit_is_at_least_one_and_at_most_the_brokers(broker, monkeypatch):
    assert describe_topic_partitions.MAX_REQUEST_PARTITION_SIZE_LIMIT == 2000  # Kafka's default
    monkeypatch.setattr(describe_topic_partitions, "MAX_REQUEST_PARTITION_SIZE_LIMIT", 3)  # not 2001 partitions
    broker.create_topic("big", 4)
    assert cursor_of(await describe(broker, ["big"], limit=0)) == ("big", 1)
    assert cursor_of(await describe(broker, ["big"], limit=-5)) == ("big", 1)
    answer = await describe(broker, ["big"], limit=2000)
    assert (len(answer.topics[0].partitions), cursor_of(answer)) == (3, ("big", 3))


async def test_a_cursor_past_the_end_of_its_topic_gives_no_partitions(broker):
    broker.create_topic("a", 1)
    answer = await describe(broker, ["a"], cursor=Cursor(topic_name="a", partition_index=7))
    assert (pages(answer), cursor_of(answer)) == ([("a", [])], None)


async def test_a_cursor_outside_the_named_topics_or_negative_is_refused(broker):
    broker.create_topic("a", 1)
    for cursor in (Cursor(topic_name="zzz", partition_index=0), Cursor(topic_name="a", partition_index=-1)):
        answer = await describe(broker, ["a"], cursor=cursor)
        assert [(t.name, t.error_code, t.partitions) for t in answer.topics] == [("a", ErrorCode.INVALID_REQUEST, [])]
        assert answer.topics[0].topic_authorized_operations == -2**31


async def test_a_cluster_reports_leaders_isr_and_offline_replicas(tmp_path):
    async with started_cluster(tmp_path) as cluster:
        cluster.nodes[0].create_topic("t", assignment={0: [0, 1, 2]})
        cluster.nodes[0].create_topic("u", assignment={0: [2]})
        cluster.stop_node(2)
        for node_id in (0, 1):  # any running node describes the whole cluster
            answer = await describe(cluster.nodes[node_id], ["t", "u"])
            [first], [second] = (topic.partitions for topic in answer.topics)
            assert (first.leader_id, first.replica_nodes, first.isr_nodes, first.offline_replicas) == (
                0, [0, 1, 2], [0, 1], [2])
            assert (second.error_code, second.leader_id, second.isr_nodes, second.offline_replicas) == (
                0, -1, [2], [2])
            assert first.leader_epoch == cluster.metadata.partition("t", 0).leader_epoch
