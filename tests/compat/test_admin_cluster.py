"""The admin APIs that place replicas, with real clients: kafka-python's KafkaAdminClient (elect_leaders,
alter/list_partition_reassignments, describe_topic_partitions, describe_metadata_quorum, alter_replica_log_dirs) and
confluent-kafka's AdminClient (elect_leaders).

Against a single-node broker they answer as a single Kafka node does (nothing to elect, the only replica already
where it belongs, one voter, one log directory); against a 3-node EmbeddedBroker a preferred election brings a moved
leader back, a reassignment runs to completion, and the quorum and offline replicas are described.

Errors are checked through each client's own error types.
"""
from __future__ import annotations

import time
import uuid

import pytest

from . import clients

pytestmark = pytest.mark.matrix(flow="cluster admin")

NODE_ID = 1  # the broker's default node.id


@pytest.fixture
def confluent_admin(broker):
    clients.load_or_fail("confluent-kafka")
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _create(admin, topic: str, partitions: int) -> None:
    [result] = admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1}})["topics"]
    assert result["error_code"] == 0


def test_kafka_python_preferred_election_on_a_single_node_is_not_needed(kafka_python_admin, topic):
    import kafka.errors as Errors
    admin = kafka_python_admin
    _create(admin, topic, 2)
    response = admin.elect_leaders(0, {topic: [0, 1]})  # ELECTION_NOT_NEEDED is not an error to the client
    assert response.error_code == 0
    [result] = response.replica_election_results
    assert [(p.partition_id, p.error_code) for p in result.partition_result] == [
        (0, Errors.ElectionNotNeededError.errno), (1, Errors.ElectionNotNeededError.errno)]
    with pytest.raises(Errors.UnknownTopicOrPartitionError):
        admin.elect_leaders(1, {f"{topic}.missing": [0]})


def test_kafka_python_reassignments_on_a_single_node(kafka_python_admin, topic):
    import kafka.errors as Errors
    from kafka import TopicPartition
    admin = kafka_python_admin
    _create(admin, topic, 1)
    tp = TopicPartition(topic, 0)
    assert admin.alter_partition_reassignments({tp: [NODE_ID]}) == {tp: None}  # already there: done at once
    assert admin.list_partition_reassignments() == {}
    assert admin.list_partition_reassignments({topic: [0]}) == {}
    refused = admin.alter_partition_reassignments({tp: None, TopicPartition(topic, 5): [NODE_ID],
                                                   TopicPartition(topic + ".x", 0): [NODE_ID + 1]})
    assert refused == {tp: Errors.NoReassignmentInProgressError,
                       TopicPartition(topic, 5): Errors.UnknownTopicOrPartitionError,
                       TopicPartition(topic + ".x", 0): Errors.UnknownTopicOrPartitionError}
    [described] = admin.describe_topics([topic])
    assert [p["replica_nodes"] for p in described["partitions"]] == [[NODE_ID]]


def test_kafka_python_describes_topic_partitions_a_page_at_a_time(kafka_python_admin, topic):
    admin = kafka_python_admin
    _create(admin, topic, 3)
    first = admin.describe_topic_partitions([topic], response_partition_limit=2)
    assert [p["partition_index"] for p in first["topics"][0]["partitions"]] == [0, 1]
    assert first["next_cursor"] == {"topic_name": topic, "partition_index": 2}
    rest = admin.describe_topic_partitions([topic], response_partition_limit=2, cursor=first["next_cursor"])
    [partition] = rest["topics"][0]["partitions"]
    assert (partition["partition_index"], partition["leader_id"], partition["replica_nodes"],
            partition["isr_nodes"], partition["offline_replicas"]) == (2, NODE_ID, [NODE_ID], [NODE_ID], [])
    assert rest["next_cursor"] is None
    missing = admin.describe_topic_partitions([topic + ".missing"])["topics"][0]
    assert (missing["error_code"], missing["partitions"]) == (3, [])  # UNKNOWN_TOPIC_OR_PARTITION


def test_kafka_python_describes_the_metadata_quorum(broker, kafka_python_admin, topic):
    admin = kafka_python_admin
    before = admin.describe_metadata_quorum()
    _create(admin, topic, 1)
    after = admin.describe_metadata_quorum()
    [partition] = after["topics"][0]["partitions"]
    assert (after["topics"][0]["topic_name"], partition["partition_index"], partition["error"]) == (
        "__cluster_metadata", 0, None)
    assert partition["leader_id"] == NODE_ID
    assert [voter["replica_id"] for voter in partition["current_voters"]] == [NODE_ID]
    assert partition["observers"] == []
    assert partition["high_watermark"] > before["topics"][0]["partitions"][0]["high_watermark"]
    [node] = after["nodes"]
    assert node["node_id"] == NODE_ID
    assert [(listener["host"], listener["port"]) for listener in node["listeners"]] == [(broker.host, broker.port)]


def test_confluent_kafka_preferred_election_on_a_single_node(confluent_admin, kafka_python_admin, topic):
    from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition
    _create(kafka_python_admin, topic, 1)
    future = confluent_admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)])
    results = future.result(timeout=30)
    [(tp, error)] = results.items()
    assert (tp.topic, tp.partition) == (topic, 0)
    assert error.code() == KafkaError.ELECTION_NOT_NEEDED
    missing = confluent_admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition(topic + ".missing", 0)])
    try:
        [(_, error)] = missing.result(timeout=30).items()
    except KafkaException as exc:  # a client may raise the partition's error instead
        error = exc.args[0]
    assert error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_kafka_python_alter_replica_log_dirs_on_a_single_log_dir(broker, kafka_python_admin, topic):
    import kafka.errors as Errors
    from kafka import TopicPartitionReplica
    admin = kafka_python_admin
    _create(admin, topic, 1)
    here = TopicPartitionReplica(topic, 0, NODE_ID)
    absent = TopicPartitionReplica(topic, 3, NODE_ID)
    elsewhere = TopicPartitionReplica(topic + ".other", 0, NODE_ID)
    _create(admin, elsewhere.topic, 1)
    answer = admin.alter_replica_log_dirs({here: str(broker.data_dir.resolve()), absent: str(broker.data_dir.resolve()),
                                           elsewhere: str(broker.data_dir.parent / "no-such-dir")})
    assert answer == {here: Errors.NoError, absent: Errors.ReplicaNotAvailableError,
                      elsewhere: Errors.LogDirNotFoundError}


# --- a 3-node cluster -------------------------------------------------------------------------------------------------

@pytest.fixture
def cluster():
    from compatbroker import EmbeddedBroker
    with EmbeddedBroker(nodes=3) as running:
        yield running


@pytest.fixture
def cluster_admin(cluster):
    clients.load_or_fail("kafka-python")
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=15000,
                             client_id=f"compat-admin-{uuid.uuid4().hex[:6]}")
    yield admin
    admin.close()


def _replicas(admin, topic: str) -> list[list[int]]:
    [described] = admin.describe_topics([topic])
    return [p["replica_nodes"] for p in sorted(described["partitions"], key=lambda p: p["partition_index"])]


def _unless_refused(call):
    """`call()`, or None when the node the client picked refused the connection (KafkaConnectionError)."""
    from kafka.errors import KafkaConnectionError
    try:
        return call()
    except KafkaConnectionError:
        return None


def _wait_until(condition, what: str, timeout_s: float = 60.0):
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_kafka_python_preferred_election_brings_leadership_back(cluster, cluster_admin, topic):
    admin = cluster_admin
    admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 3}})
    preferred, other = _replicas(admin, topic)[0][:2]
    cluster.move_leader(topic, 0, other)
    response = admin.elect_leaders(0, {topic: [0]})
    [result] = response.replica_election_results[0].partition_result
    assert (result.partition_id, result.error_code, result.error_message) == (0, 0, None)
    assert cluster.leader_of(topic, 0) == preferred
    page = admin.describe_topic_partitions([topic])["topics"][0]["partitions"][0]
    assert (page["leader_id"], sorted(page["isr_nodes"])) == (preferred, [0, 1, 2])


def test_kafka_python_reassigns_a_partition_and_sees_it_complete(cluster, cluster_admin, topic):
    from kafka import TopicPartition
    admin = cluster_admin
    admin.create_topics({topic: {"replica_assignment": {0: [0, 1]}}})
    tp = TopicPartition(topic, 0)
    assert admin.alter_partition_reassignments({tp: [2, 1]}) == {tp: None}
    _wait_until(lambda: not admin.list_partition_reassignments(), "the reassignment to complete")
    assert _replicas(admin, topic) == [[2, 1]]
    assert cluster.leader_of(topic, 0) in (1, 2)


def test_kafka_python_describes_the_quorum_and_offline_replicas_of_a_cluster(cluster, cluster_admin, topic):
    admin = cluster_admin
    admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 3}})
    cluster.stop_node(2)
    # kafka-python sends these to any node it knows, the stopped one included until its metadata drops it: a call
    # that reached node 2 fails with a connection error, and is made again, as an application would
    quorum = _wait_until(lambda: _unless_refused(admin.describe_metadata_quorum), "a live node to answer")
    [partition] = quorum["topics"][0]["partitions"]
    assert partition["leader_id"] == 0
    assert [voter["replica_id"] for voter in partition["current_voters"]] == [0]
    assert [observer["replica_id"] for observer in partition["observers"]] == [1]
    [node] = quorum["nodes"]
    assert (node["node_id"], [listener["port"] for listener in node["listeners"]]) == (0, [cluster.ports[0]])
    described = _wait_until(lambda: _unless_refused(lambda: admin.describe_topic_partitions([topic])),
                            "a live node to answer")
    page = described["topics"][0]["partitions"][0]
    assert page["offline_replicas"] == [2] and 2 not in page["isr_nodes"]


def test_confluent_kafka_preferred_election_on_a_cluster(cluster, cluster_admin, topic):
    clients.load_or_fail("confluent-kafka")
    from confluent_kafka import ElectionType, KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient
    cluster_admin.create_topics({topic: {"num_partitions": 2, "replication_factor": 3}})
    preferred, other = _replicas(cluster_admin, topic)[1][:2]
    cluster.move_leader(topic, 1, other)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    results = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0), TopicPartition(topic, 1)])
    by_partition = {tp.partition: error for tp, error in results.result(timeout=30).items()}
    assert by_partition[1] is None
    assert by_partition[0].code() == KafkaError.ELECTION_NOT_NEEDED
    assert cluster.leader_of(topic, 1) == preferred
