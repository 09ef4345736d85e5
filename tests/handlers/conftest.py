"""Fixtures of the handler tests: a real Broker on a temporary data directory, and coroutine tests run on a fresh
event loop each, under a time limit (a hung long poll fails the test instead of hanging the run)."""
from __future__ import annotations

import pytest

from tests.async_tests import coroutine_runner

from .helpers import make_broker

TEST_TIME_LIMIT_S = 30


pytest_pyfunc_call = coroutine_runner(TEST_TIME_LIMIT_S)


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
