"""Spark (the Java client, kafka-clients inside Spark's connector) reading from a three-node cluster while the
partitions' leaders move (issue 16's evidence for the Java client):

- a batch read and a streaming query, both with failOnDataLoss=true, read a topic with replication factor 3 while
  its leaders are moved from another thread: no failure, every record read exactly once;
- fetch from follower (KIP-392): with `replica.selector.class` set to Kafka's rack-aware selector and racks on the
  nodes, a read with `kafka.client.rack` naming a follower's rack has its Fetch requests served by that follower
  (the request log records the node that served each request).

The cluster runs as `compatbroker serve --nodes 3` (EmbeddedBroker's subprocess mode), standing in for the
session's single broker in this module, so conftest's check (every request of the Java client served, no error in
the broker's log) applies to it.
"""
from __future__ import annotations

import threading

import pytest

from .kafka_tools import WITHOUT_HEADERS, KafkaTools, last_seq, records_of, without_headers

NODES = [0, 1, 2]
RACKS = ["rack-0", "rack-1", "rack-2"]
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
SETTINGS = {"num.partitions": 1, "offsets.topic.num.partitions": 3,
            "replica.selector.class": RACK_AWARE_SELECTOR}
# The Java client's own settings, through Spark's kafka.* options: metadata refreshed every second, and small
# fetches, so that a read takes many Fetch requests for the leaders to move between.
JAVA_CLIENT = {"kafka.metadata.max.age.ms": "1000", "kafka.max.partition.fetch.bytes": "8192",
               "kafka.fetch.max.bytes": "16384"}
PARTITIONS = 3
FETCHES_PER_MOVE = 10  # the mover waits for this many Fetch requests of the topic between two moves
TRIGGER = "200 milliseconds"


@pytest.fixture(scope="module")
def broker(connector):
    from compatbroker.toolkit.embedded import EmbeddedBroker

    with EmbeddedBroker(SETTINGS, mode="subprocess", log_level="INFO", nodes=len(NODES), racks=RACKS) as running:
        yield running


@pytest.fixture(scope="module")
def kafka(broker):
    tools = KafkaTools(broker.bootstrap_servers)
    yield tools
    tools.close()


class LeaderMover:
    """A thread moving the topic's partition leaders round the nodes, one move each time the Java client has sent
    FETCHES_PER_MOVE more Fetch requests for the topic, until stopped: moves always fall between fetches of the
    read."""

    def __init__(self, broker, topic: str):
        self.broker, self.topic = broker, topic
        self.moves: list[tuple[int, int, int]] = []  # (partition, from node, to node)
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="leader-mover", daemon=True)

    def __enter__(self) -> LeaderMover:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        try:
            since = last_seq(self.broker)
            while not self._stop.is_set():
                since = self._wait_for_fetches(since)
                if since is None:
                    return
                partition = len(self.moves) % PARTITIONS
                leader = self.broker.leader_of(self.topic, partition)
                target = NODES[(NODES.index(leader) + 1) % len(NODES)]
                self.broker.move_leader(self.topic, partition, target)
                self.moves.append((partition, leader, target))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def _wait_for_fetches(self, since: int) -> int | None:
        """The request log's last sequence number once FETCHES_PER_MOVE more Fetches of the topic came; None when
        stopped first."""
        seen = 0
        while not self._stop.is_set():
            entries = self.broker.requests(since, "Fetch")
            seen += sum(1 for entry in entries if self.topic in entry.topics)
            since = max((entry.seq for entry in entries), default=since)
            if seen >= FETCHES_PER_MOVE:
                return since
            self._stop.wait(0.05)  # the request log is polled: a bound on how stale the count is
        return None

    def check(self, at_least: int) -> None:
        assert self.error is None, f"moving leaders failed: {self.error!r}"
        assert len(self.moves) >= at_least, f"only {len(self.moves)} leader moves happened during the read"


def fill(broker, kafka, topic: str, per_partition: int, prefix: str = "v"):
    """A topic with replication factor 3 over the three nodes, `per_partition` records of 1 KiB per partition."""
    broker.create_topic(topic, PARTITIONS, replication_factor=3)
    produced = []
    for partition in range(PARTITIONS):
        produced += kafka.produce_values(topic, partition, [f"{prefix}{partition}-{i:05d}-" + "x" * 1000
                                                            for i in range(per_partition)])
    return produced


@pytest.mark.matrix(flow="cluster failover")
def test_batch_read_while_leaders_move(broker, spark, kafka, topic):
    produced = fill(broker, kafka, topic, 300)
    frame = (spark.read.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
             .options(subscribe=topic, failOnDataLoss="true", **JAVA_CLIENT).load())
    with LeaderMover(broker, topic) as mover:
        found = records_of(frame.selectExpr(*WITHOUT_HEADERS).collect())
    mover.check(at_least=PARTITIONS)
    assert found == without_headers(sorted(produced)), "the read lost or repeated records"
    print(f"batch read of {len(found)} records while {len(mover.moves)} leader moves happened")


@pytest.mark.matrix(flow="cluster failover")
def test_streaming_read_while_leaders_move(broker, spark, kafka, topic):
    produced = fill(broker, kafka, topic, 200, prefix="a")
    name = topic.replace(".", "_").replace("-", "_")
    query = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
             .options(subscribe=topic, startingOffsets="earliest", failOnDataLoss="true", **JAVA_CLIENT).load()
             .writeStream.format("memory").queryName(name).trigger(processingTime=TRIGGER).start())
    try:
        with LeaderMover(broker, topic) as mover:
            for round_ in range(3):  # more records while the query runs and the leaders move
                for partition in range(PARTITIONS):
                    produced += kafka.produce_values(topic, partition, [f"b{round_}-{partition}-{i:04d}-" + "y" * 1000
                                                                        for i in range(100)])
            query.processAllAvailable()
        assert query.exception() is None, query.exception()
        mover.check(at_least=PARTITIONS)
        found = records_of(spark.sql(f"SELECT * FROM `{name}`").selectExpr(*WITHOUT_HEADERS).collect())
    finally:
        query.stop()
    assert found == without_headers(sorted(produced)), "the query lost or repeated records"
    print(f"streaming read of {len(found)} records while {len(mover.moves)} leader moves happened")


@pytest.mark.matrix(flow="fetch from follower")
def test_client_rack_reads_from_the_follower_in_its_rack(broker, spark, kafka, topic):
    produced = fill(broker, kafka, topic, 50, prefix="r")
    leader = broker.leader_of(topic, 0)
    follower = NODES[(NODES.index(leader) + 1) % len(NODES)]
    since = last_seq(broker)
    found = records_of(spark.read.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
                       .options(assign=f'{{"{topic}": [0]}}', failOnDataLoss="true",
                                **{"kafka.client.rack": RACKS[follower], "kafka.metadata.max.age.ms": "1000"})
                       .load().selectExpr(*WITHOUT_HEADERS).collect())
    assert found == without_headers([record for record in produced if record.partition == 0])
    fetches = [entry for entry in broker.requests(since, "Fetch") if topic in entry.topics]
    served_by = {entry.node_id for entry in fetches}
    assert follower in served_by, (f"no Fetch served by node {follower} in {RACKS[follower]} (leader {leader}); "
                                   f"Fetches were served by {sorted(served_by)}")
    print(f"client.rack {RACKS[follower]}: Fetches of the topic served by nodes "
          f"{[entry.node_id for entry in fetches]} (leader {leader}, follower {follower})")
