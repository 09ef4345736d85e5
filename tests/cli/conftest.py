"""A broker shared by the CLI tests of a module (topics and groups get unique names per test)."""
from __future__ import annotations

import itertools

import pytest

from compatbroker import EmbeddedBroker

_names = itertools.count()


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker() as broker:
        yield broker


@pytest.fixture
def name(request):
    """A name no other test uses: topic and group names stay apart on the shared broker."""
    return f"{request.node.name.replace('[', '-').replace(']', '')[:60]}-{next(_names)}"
