"""Coroutine tests: each runs on a fresh event loop under a time limit, so that a hang (a long poll nobody wakes)
fails its test instead of blocking the run. conftest files install `coroutine_runner(...)` as their
`pytest_pyfunc_call`; modules without one decorate their tests with `async_test`."""
from __future__ import annotations

import asyncio
import functools
import inspect

import pytest

TEST_TIME_LIMIT_S = 30


def run_coroutine(coroutine, limit_s: float = TEST_TIME_LIMIT_S):
    return asyncio.run(asyncio.wait_for(coroutine, limit_s))


def async_test(test, limit_s: float = TEST_TIME_LIMIT_S):
    """Decorator: run the coroutine function `test` as a plain test."""
    @functools.wraps(test)
    def run(*args, **kwargs):
        run_coroutine(test(*args, **kwargs), limit_s)
    return run


def coroutine_runner(limit_s: float = TEST_TIME_LIMIT_S):
    """A `pytest_pyfunc_call` hook that runs coroutine test functions (and leaves the others to pytest)."""
    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(pyfuncitem):
        if not inspect.iscoroutinefunction(pyfuncitem.obj):
            return None
        arguments = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
        run_coroutine(pyfuncitem.obj(**arguments), limit_s)
        return True
    return pytest_pyfunc_call
