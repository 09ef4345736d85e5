"""The connection limits follow the dynamic broker configs (compatbroker.dynamic_config): max.connections.per.ip
and max.connections change at the server's next accept, raising max.connections while full accepts again, and the
per-ip overrides are resolved anew (an unresolvable host leaves the limits as they were)."""
from __future__ import annotations

import asyncio

import pytest

from compatbroker import dynamic_config
from compatbroker.config import BrokerConfig
from compatbroker.server.connection_quotas import ConnectionQuotas

from .helpers import RawClient, running_server
from .test_connection_limits import answered, until


async def change(broker, name: str, configs: dict) -> None:
    dynamic_config.validate(broker, name, configs)
    dynamic_config.commit(broker, name, configs)


async def test_max_connections_per_ip_changes_at_the_next_accept(tmp_path):
    async with running_server(tmp_path) as (server, port):
        dynamic_config.watch_connection_quotas(server)
        first = await RawClient.connect(port)
        assert await answered(first, 1)
        await change(server.broker, "", {"max.connections.per.ip": "1"})
        second = await RawClient.connect(port)
        assert await second.closed_by_server()
        await change(server.broker, "", {})
        third = await RawClient.connect(port)
        assert await answered(third, 2)
        for client in (first, second, third):
            await client.close()


async def test_raising_max_connections_while_full_accepts_the_waiting_client(tmp_path):
    async with running_server(tmp_path, max_connections=1) as (server, port):
        dynamic_config.watch_connection_quotas(server)
        first = await RawClient.connect(port)
        assert await answered(first, 1)
        waiting = await RawClient.connect(port)  # waits in the listen backlog
        reply = asyncio.create_task(answered(waiting, 2))
        await until(lambda: server.connection_count == 1 and not server._listening)
        assert not reply.done()
        await change(server.broker, "1", {"max.connections": "2"})
        assert await asyncio.wait_for(reply, 10)
        for client in (first, waiting):
            await client.close()


def test_the_per_ip_overrides_follow_a_reconfiguration(tmp_path):
    def config(**properties):
        return BrokerConfig({"log.dirs": str(tmp_path), "max.connections.per.ip": "10", **properties})

    quotas = ConnectionQuotas.from_config(config())
    quotas.reconfigure(config(**{"max.connections.per.ip.overrides": "127.0.0.1:2", "max.connections": "50"}))
    assert (quotas.limit_for("127.0.0.1"), quotas.limit_for("10.0.0.1"), quotas.max_connections) == (2, 10, 50)
    with pytest.raises(ValueError, match="cannot resolve no-such-host.invalid"):
        quotas.reconfigure(config(**{"max.connections.per.ip.overrides": "no-such-host.invalid:1"}))
    assert quotas.limit_for("127.0.0.1") == 2  # unchanged
    quotas.reconfigure(config())
    assert (quotas.limit_for("127.0.0.1"), quotas.max_connections) == (10, 2**31 - 1)
