"""DescribeCluster: the cluster id, the controller, this broker, endpoint types and authorized operations."""
from __future__ import annotations

import pytest

from compatbroker.handlers import describe_cluster, metadata
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import DescribeClusterRequest

from .helpers import call

ALL_VERSIONS = range(describe_cluster.MIN_VERSION, describe_cluster.MAX_VERSION + 1)
INT32_MIN = -2**31


def test_declares_every_schema_version():
    assert (describe_cluster.API_KEY, describe_cluster.MIN_VERSION, describe_cluster.MAX_VERSION) == (60, 0, 2)
    assert DescribeClusterRequest.VALID_VERSIONS == (0, 2)


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_describes_this_broker_at_every_version(broker, version):
    answer = (await call(broker, version, DescribeClusterRequest())).decoded
    assert (answer.error_code, answer.error_message) == (0, None)
    assert answer.cluster_id == broker.cluster_id and broker.cluster_id
    assert answer.controller_id == broker.node_id == 1
    assert [(b.broker_id, b.host, b.port, b.rack, b.is_fenced) for b in answer.brokers] == [
        (1, "localhost", 9092, None, False)]
    assert answer.endpoint_type == 1
    assert answer.cluster_authorized_operations == INT32_MIN


async def test_brokers_carry_the_advertised_endpoint(broker_factory):
    broker = broker_factory(**{"listeners": "PLAINTEXT://127.0.0.1:0",
                               "advertised.listeners": "PLAINTEXT://kafka.example:19092"})
    broker.register_listener(broker.config.listeners[0], 9092)
    answer = (await call(broker, 2, DescribeClusterRequest())).decoded
    assert [(b.host, b.port) for b in answer.brokers] == [("kafka.example", 19092)]


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_authorized_operations_when_asked(broker, version):
    answer = (await call(broker, version, DescribeClusterRequest(include_cluster_authorized_operations=True))).decoded
    assert answer.cluster_authorized_operations == metadata.CLUSTER_AUTHORIZED_OPERATIONS


@pytest.mark.parametrize("version", [1, 2])
async def test_controller_endpoint_type_is_mismatched(broker, version):
    answer = (await call(broker, version, DescribeClusterRequest(endpoint_type=2))).decoded
    assert answer.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE
    assert answer.error_message == ("The request was sent to an endpoint of type BROKER, but we wanted an endpoint "
                                    "of type CONTROLLER")
    assert answer.brokers == [] and answer.controller_id == -1


@pytest.mark.parametrize("endpoint_type", [0, 3, -1])
async def test_unknown_endpoint_type_is_unsupported(broker, endpoint_type):
    answer = (await call(broker, 1, DescribeClusterRequest(endpoint_type=endpoint_type))).decoded
    assert answer.error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
    assert answer.error_message == f"Unsupported endpoint type {endpoint_type}"
