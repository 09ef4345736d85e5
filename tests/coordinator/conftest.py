"""Fixtures of the coordinator tests: a real Broker on a temporary data directory. The offset modules override
`broker` with one whose clock they drive."""
from __future__ import annotations

import pytest

from tests.handlers.helpers import make_broker


@pytest.fixture
def data_dir(tmp_path):
    return tmp_path / "data"


@pytest.fixture
def broker(data_dir):
    broker = make_broker(data_dir)
    yield broker
    broker.logs.shutdown()
