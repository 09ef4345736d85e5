"""The toolkit's cluster helpers: `EmbeddedBroker(nodes=3)` in both modes, node faults (stop, start, isolate, delay),
moving leaders, the request log's node ids, and the same operations over the control API and its command line."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import uuid

import pytest

from compatbroker import EmbeddedBroker
from compatbroker.config import BrokerConfig, ConfigError, Endpoint
from compatbroker.server.run import cluster_listeners
from compatbroker.toolkit.control import ControlError
from compatbroker.toolkit.control.client import ControlClient

from .test_cli import cli

MODES = ("thread", "subprocess")
WAIT_S = 30


def new_topic() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def refuses_connections(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


@pytest.fixture(scope="module")
def cluster():
    with EmbeddedBroker(nodes=3, racks=["a", "b", "c"], control_listen="127.0.0.1:0") as broker:
        yield broker


@pytest.fixture(autouse=True)
def restored(request):
    yield
    if "cluster" in request.fixturenames:
        request.getfixturevalue("cluster").reset()


# --- the shape of the cluster --------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_three_nodes_0_1_2_each_listen_on_a_port_of_their_own(mode):
    with EmbeddedBroker(nodes=3, mode=mode) as broker:
        assert broker.node_ids == [0, 1, 2]
        ports = list(broker.ports.values())
        assert len(set(ports)) == 3 and broker.port == ports[0]
        assert broker.bootstrap_servers == ",".join(f"127.0.0.1:{port}" for port in ports)
        assert [node.up and node.alive for node in broker.nodes_status()] == [True, True, True]
        from kafka import KafkaAdminClient
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{ports[1]}", request_timeout_ms=30000)
        try:
            described = admin.describe_cluster()
        finally:
            admin.close()
        assert sorted((b["broker_id"], b["port"]) for b in described["brokers"]) == list(enumerate(ports))


def test_a_single_broker_keeps_its_node_id_and_one_address():
    with EmbeddedBroker() as broker:
        assert broker.node_ids == [1]
        assert broker.bootstrap_servers == f"127.0.0.1:{broker.port}"


def test_racks_are_the_nodes_broker_rack(cluster):
    assert [(node.node_id, node.rack) for node in cluster.nodes_status()] == [(0, "a"), (1, "b"), (2, "c")]


def test_bad_cluster_arguments_are_refused():
    with pytest.raises(ValueError, match="nodes"):
        EmbeddedBroker(nodes=0)
    with pytest.raises(ValueError, match="one rack per node"):
        EmbeddedBroker(nodes=3, racks=["a"])


# --- node faults ---------------------------------------------------------------------------------------------------

def test_a_stopped_node_refuses_connections_loses_its_leaderships_and_comes_back(cluster):
    topic = new_topic()
    cluster.create_topic(topic, 3, replication_factor=3)
    leaders = [cluster.leader_of(topic, partition) for partition in range(3)]
    victim = leaders[0]
    cluster.stop_node(victim)
    assert refuses_connections(cluster.ports[victim])
    assert victim not in [cluster.leader_of(topic, partition) for partition in range(3)]
    status = {node.node_id: node for node in cluster.nodes_status()}
    assert (status[victim].up, status[victim].alive, status[victim].leader_of) == (False, False, 0)
    cluster.start_node(victim)
    assert not refuses_connections(cluster.ports[victim])
    assert {node.node_id: node.alive and node.up for node in cluster.nodes_status()}[victim]


def test_move_leader_moves_it_and_refuses_a_stopped_node(cluster):
    topic = new_topic()
    cluster.create_topic(topic, 1, replication_factor=3)
    target = next(node for node in cluster.node_ids if node != cluster.leader_of(topic, 0))
    cluster.move_leader(topic, 0, target)
    assert cluster.leader_of(topic, 0) == target
    other = next(node for node in cluster.node_ids if node != target)
    cluster.stop_node(other)
    with pytest.raises(ControlError) as refused:
        cluster.move_leader(topic, 0, other)
    assert refused.value.status == 409
    assert cluster.leader_of(topic, 0) == target


def test_isolating_a_node_shows_and_reset_restores_every_node(cluster):
    cluster.isolate_node(1)
    cluster.delay_follower(2, 100)
    cluster.stop_node(0)
    assert [(n.node_id, n.isolated, n.alive) for n in cluster.nodes_status()] == [
        (0, False, False), (1, True, True), (2, False, True)]
    cluster.reset()
    assert [(n.isolated, n.alive, n.up) for n in cluster.nodes_status()] == [(False, True, True)] * 3


def test_unknown_nodes_and_partitions_are_404(cluster):
    for call in (lambda: cluster.stop_node(7), lambda: cluster.leader_of("no-such-topic", 0)):
        with pytest.raises(ControlError) as refused:
            call()
        assert refused.value.status == 404


# --- real clients through a stop and a start ------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_records_survive_their_leader_stopping_and_starting(mode):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    with EmbeddedBroker(nodes=3, mode=mode) as broker:
        topic = new_topic()
        broker.create_topic(topic, 1, replication_factor=3)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all", linger_ms=0, retries=20,
                                 retry_backoff_ms=100, request_timeout_ms=10000, max_block_ms=20000)
        try:
            first = [producer.send(topic, value=b"a%d" % i, partition=0) for i in range(5)]
            assert [f.get(timeout=WAIT_S).offset for f in first] == [0, 1, 2, 3, 4]
            leader = broker.leader_of(topic, 0)
            broker.stop_node(leader)
            assert broker.leader_of(topic, 0) not in (leader, -1)
            second = [producer.send(topic, value=b"b%d" % i, partition=0) for i in range(5)]
            assert [f.get(timeout=WAIT_S).offset for f in second] == [5, 6, 7, 8, 9]
            broker.start_node(leader)
        finally:
            producer.close(timeout=5)
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, consumer_timeout_ms=10000,
                                 request_timeout_ms=15000)
        try:
            partition = TopicPartition(topic, 0)
            consumer.assign([partition])
            consumer.seek_to_beginning(partition)
            values = []
            deadline = time.monotonic() + WAIT_S
            while len(values) < 10 and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=1000).values():
                    values += [record.value for record in records]
        finally:
            consumer.close()
        assert values == [b"a%d" % i for i in range(5)] + [b"b%d" % i for i in range(5)]


def test_the_request_log_says_which_node_served_each_request(cluster):
    from kafka import KafkaProducer

    topic = new_topic()
    cluster.create_topic(topic, 1, replication_factor=3)
    leader = cluster.leader_of(topic, 0)
    since = max((entry.seq for entry in cluster.requests()), default=0)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=0, max_block_ms=20000)
    try:
        producer.send(topic, value=b"x", partition=0).get(timeout=WAIT_S)
    finally:
        producer.close(timeout=5)
    produced = [entry for entry in cluster.requests(since=since, api="Produce") if topic in entry.topics]
    assert produced and {entry.node_id for entry in produced} == {leader}
    assert {entry.node_id for entry in cluster.requests(since=since)} <= set(cluster.node_ids)


# --- the control API and its command line ----------------------------------------------------------------------------

def test_the_control_api_drives_the_nodes(cluster):
    control = ControlClient(cluster.control_url, timeout_s=WAIT_S)
    topic = new_topic()
    control.create_topic(topic, 1, replication_factor=3)
    shown = control.leader(topic, 0)
    assert (len(shown["replicas"]), sorted(shown["isr"])) == (3, [0, 1, 2])
    target = next(node for node in (0, 1, 2) if node != shown["leader"])
    moved = control.move_leader(topic, 0, target)
    assert (moved["leader"], moved["leader_epoch"]) == (target, shown["leader_epoch"] + 1)
    assert control.stop_node(target)["alive"] is False
    assert control.leader(topic, 0)["leader"] != target
    assert control.start_node(target)["up"] is True
    assert control.isolate_node(0, True)["isolated"] is True
    assert control.isolate_node(0, False)["isolated"] is False
    assert control.delay_follower(1, 50) == {"node_id": 1, "delay_ms": 50}
    assert [node["node_id"] for node in control.restore_nodes()] == [0, 1, 2]
    assert control.status()["node_ids"] == [0, 1, 2]
    with pytest.raises(ControlError) as refused:
        control.isolate_node(0, "yes")
    assert refused.value.status == 400


def test_the_command_line_drives_the_nodes(cluster):
    def control(*args: str):
        done = cli("control", "--control", cluster.control_url, *args)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    topic = new_topic()
    cluster.create_topic(topic, 1, replication_factor=3)
    assert [node["node_id"] for node in control("nodes")] == [0, 1, 2]
    leader = control("leader", topic)["leader"]
    target = (leader + 1) % 3
    assert control("move-leader", topic, "0", str(target))["leader"] == target
    assert control("stop-node", str(target))["up"] is False
    assert control("start-node", str(target))["up"] is True
    assert control("isolate-node", "2")["isolated"] is True
    assert control("isolate-node", "2", "--undo")["isolated"] is False
    assert control("delay-follower", "1", "0")["delay_ms"] == 0
    assert len(control("restore-nodes")) == 3
    refused = cli("control", "--control", cluster.control_url, "stop-node", "9")
    assert refused.returncode == 1 and "no node 9" in refused.stderr


# --- serve --nodes ----------------------------------------------------------------------------------------------------

def test_serve_nodes_prints_one_line_per_node_and_serves_each(tmp_path):
    process = subprocess.Popen([sys.executable, "-m", "compatbroker", "serve", "--nodes", "3", "--listen",
                                "127.0.0.1:0", "--data-dir", str(tmp_path / "data"), "--racks", "a,b,c"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        lines = [process.stdout.readline() for _ in range(3)]
        assert lines[0].startswith("compatbroker listening on 127.0.0.1:")
        assert [line.split(" listening on ")[0] for line in lines[1:]] == ["compatbroker node 1",
                                                                            "compatbroker node 2"]
        ports = [int(line.rsplit(":", 1)[1]) for line in lines]
        assert len(set(ports)) == 3 and all(not refuses_connections(port) for port in ports)
        assert sorted(path.name for path in (tmp_path / "data").iterdir() if path.name.startswith("node-")) == [
            "node-0", "node-1", "node-2"]
    finally:
        process.terminate()
        assert process.wait(WAIT_S) == 0


def test_serve_node_ids_names_the_nodes(tmp_path):
    process = subprocess.Popen([sys.executable, "-m", "compatbroker", "serve", "--node-ids", "4,7", "--listen",
                                "127.0.0.1:0", "--data-dir", str(tmp_path / "data")],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        lines = [process.stdout.readline() for _ in range(2)]
        assert lines[1].startswith("compatbroker node 7 listening on 127.0.0.1:")
        assert sorted(path.name for path in (tmp_path / "data").iterdir() if path.name.startswith("node-")) == [
            "node-4", "node-7"]
    finally:
        process.terminate()
        assert process.wait(WAIT_S) == 0


@pytest.mark.parametrize("args, message", [
    (["--listen", "127.0.0.1:0", "--listen", "127.0.0.1:0"], "one address for a single broker"),
    (["--nodes", "3", "--node-ids", "1,2"], "2 ids for --nodes 3"),
    (["--node-ids", "1,1"], "distinct"),
    (["--nodes", "3", "--listen", "127.0.0.1:0", "--listen", "127.0.0.1:0"], "one per node (3), got 2"),
    (["--nodes", "2", "--racks", "a,b,c"], "one rack per node (2), got 3"),
    (["--nodes", "2", "--advertised-listener", "h:1"], "each node advertises its own listener"),
    (["--nodes", "2", "--listen", "127.0.0.1:65535"], "above 65535"),
    (["--nodes", "0"], "must be at least 1"),
])
def test_serve_refuses_bad_cluster_options(tmp_path, args, message):
    done = cli("serve", "--data-dir", str(tmp_path / "d"), *args)
    assert done.returncode == 2
    assert message in done.stderr and done.stdout == ""


def test_cluster_listeners_count_ports_up_or_take_one_address_per_node():
    config = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:9092"})
    assert cluster_listeners(config, 3) == [(Endpoint("PLAINTEXT", "127.0.0.1", port),) for port in (9092, 9093, 9094)]
    free = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0"})
    assert cluster_listeners(free, 2) == [(Endpoint("PLAINTEXT", "127.0.0.1", 0),)] * 2
    hosts = ["127.0.0.1:9092", "127.0.0.2:9092", "127.0.0.3:9092"]
    assert [endpoints[0].host for endpoints in cluster_listeners(config, 3, hosts)] == [
        "127.0.0.1", "127.0.0.2", "127.0.0.3"]
    with pytest.raises(ConfigError, match="not HOST:PORT"):
        cluster_listeners(config, 2, ["127.0.0.1:1", "nope"])
