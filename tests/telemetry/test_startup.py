"""The subscriptions are read when the broker starts: a broken file refuses to start, as any unusable data does."""
from __future__ import annotations

import pytest

from compatbroker.config import BrokerConfig
from compatbroker.server.run import ClusterRuntime, StartupError
from compatbroker.telemetry import subscriptions
from tests.async_tests import async_test


def runtime_on(tmp_path) -> ClusterRuntime:
    return ClusterRuntime(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data")}))


@async_test
async def test_the_runtime_serves_the_stored_subscriptions(tmp_path):
    (tmp_path / "data").mkdir()
    subscriptions.SubscriptionStore(str(tmp_path / "data")).set("all", {"metrics": "*"})
    runtime = runtime_on(tmp_path)
    await runtime.start()
    try:
        assert runtime.client_telemetry.subscription_names() == ["all"]
        assert runtime.broker.client_telemetry is runtime.client_telemetry  # one per cluster
    finally:
        await runtime.stop()
    assert runtime.client_telemetry is None


@async_test
async def test_an_unreadable_subscriptions_file_stops_the_start(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / subscriptions.SUBSCRIPTIONS_FILE).write_text("[]")
    with pytest.raises(StartupError, match="client metrics subscriptions"):
        await runtime_on(tmp_path).start()
