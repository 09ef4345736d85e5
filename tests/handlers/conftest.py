"""Fixtures of the handler tests: a real Broker on a temporary data directory, and coroutine tests run on a fresh
event loop each, under a time limit (a hung long poll fails the test instead of hanging the run)."""
from __future__ import annotations

import asyncio
import inspect

import pytest

from compatbroker.broker import Broker
from compatbroker.config import BrokerConfig

TEST_TIME_LIMIT_S = 30


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    arguments = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    asyncio.run(asyncio.wait_for(pyfuncitem.obj(**arguments), TEST_TIME_LIMIT_S))
    return True


def make_broker(data_dir, **properties) -> Broker:
    broker = Broker(BrokerConfig({"log.dirs": str(data_dir), **properties}))
    broker.startup()
    return broker


@pytest.fixture
def broker(tmp_path):
    broker = make_broker(tmp_path / "data")
    yield broker
    broker.logs.shutdown()


@pytest.fixture
def broker_factory(tmp_path):
    """Brokers with extra configuration: `broker_factory(**{"num.partitions": 3})`."""
    made = []

    def factory(**properties):
        made.append(make_broker(tmp_path / f"data{len(made)}", **properties))
        return made[-1]

    yield factory
    for broker in made:
        broker.logs.shutdown()
