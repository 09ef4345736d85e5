"""Coroutine tests of the metrics run on a fresh event loop each, under a time limit."""
from __future__ import annotations

from tests.async_tests import coroutine_runner

pytest_pyfunc_call = coroutine_runner()
