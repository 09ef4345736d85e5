"""`compatbroker cluster info` against a single broker and a three-node cluster with racks."""
from __future__ import annotations

from compatbroker import EmbeddedBroker

from .helpers import run

BROKER_KEYS = {"node_id", "host", "port", "rack"}
FEATURE_KEYS = {"name", "min_version_level", "max_version_level"}


def test_info_of_a_single_broker(broker):
    document = run("-b", broker.bootstrap_servers, "cluster", "info", "--format", "json").json()
    assert set(document) == {"cluster_id", "controller_id", "brokers", "features", "features_epoch"}
    (node,) = document["brokers"]
    assert set(node) == BROKER_KEYS
    assert f"{node['host']}:{node['port']}" == broker.bootstrap_servers
    assert document["controller_id"] == node["node_id"]
    assert all(set(feature) == FEATURE_KEYS for feature in document["features"])
    assert {"group.version", "transaction.version"} <= {feature["name"] for feature in document["features"]}

    table = run("-b", broker.bootstrap_servers, "cluster", "info").stdout.splitlines()
    assert table[0].split() == ["Cluster", "id", document["cluster_id"]]
    assert ["ID", "HOST", "PORT", "RACK"] in [line.split() for line in table]
    assert [str(node["node_id"]), node["host"], str(node["port"]), "-"] in [line.split() for line in table]


def test_info_of_a_cluster_with_racks():
    with EmbeddedBroker(nodes=3, racks=["r1", "r2", None]) as cluster:
        document = run("-b", cluster.bootstrap_servers.split(",")[0], "cluster", "info", "--format", "json").json()
    assert [(b["node_id"], b["rack"]) for b in document["brokers"]] == [(0, "r1"), (1, "r2"), (2, None)]
    assert document["controller_id"] in (0, 1, 2)
