"""Fixtures of the server tests: coroutine tests run on a fresh event loop each, under a time limit."""
from __future__ import annotations

import asyncio
import inspect
import sys
import types

import pytest

TEST_TIME_LIMIT_S = 30


def _install_fetch_session_stand_in() -> None:
    """The Broker creates a FetchSessionCache from the handlers' module; until that module exists these tests use a
    stand-in with the same constructor."""
    try:
        import compatbroker.fetch_session  # noqa: F401
    except ModuleNotFoundError:
        module = types.ModuleType("compatbroker.fetch_session")

        class FetchSessionCache:
            def __init__(self, max_slots: int):
                self.max_slots = max_slots

        module.FetchSessionCache = FetchSessionCache
        sys.modules["compatbroker.fetch_session"] = module


_install_fetch_session_stand_in()


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    arguments = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    asyncio.run(asyncio.wait_for(pyfuncitem.obj(**arguments), TEST_TIME_LIMIT_S))
    return True
