"""Fixtures of the toolkit tests (embedded broker, plugin, fault injection, control API).

The `compatbroker` and `compatbroker_fresh` fixtures come from the project's pytest plugin, loaded through its
`pytest11` entry point once the project is installed (`pip install -e .`, as tests/run.sh does). When these tests
run from a checkout that is not installed, the plugin is registered here instead, so that they use the very same
fixtures either way.

Coroutine tests run on a fresh event loop each, under a time limit.
"""
from __future__ import annotations

from tests.async_tests import coroutine_runner

TEST_TIME_LIMIT_S = 60


def pytest_configure(config):
    if not config.pluginmanager.hasplugin("compatbroker"):
        from compatbroker.toolkit import pytest_plugin
        config.pluginmanager.register(pytest_plugin, "compatbroker")


pytest_pyfunc_call = coroutine_runner(TEST_TIME_LIMIT_S)
