"""Fixtures of the server tests: coroutine tests run on a fresh event loop each, under a time limit."""
from __future__ import annotations

from tests.async_tests import coroutine_runner

TEST_TIME_LIMIT_S = 30

pytest_pyfunc_call = coroutine_runner(TEST_TIME_LIMIT_S)
