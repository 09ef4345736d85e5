"""The pytest plugin: registered through the `pytest11` entry point, cheap to load, and working for a user's suite
(examples/embedded_suite, run from a copy outside the checkout so that nothing of this repository helps it)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "embedded_suite"
EXAMPLE_TESTS = 6


def run_pytest(suite: Path, *options: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
    """pytest run in `suite` as a user would run it there, writing no cache into it."""
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options], cwd=suite,
                          capture_output=True, text=True, timeout=timeout_s, check=False)


def test_the_plugin_is_registered_as_a_pytest11_entry_point():
    found = [entry.value for entry in entry_points(group="pytest11") if entry.name == "compatbroker"]
    assert found == ["compatbroker.toolkit.pytest_plugin"], \
        "install the project (pip install -e . or bash tests/run.sh) so that pytest finds the plugin"


def test_this_run_uses_the_plugins_fixtures(request, compatbroker):
    assert request.config.pluginmanager.hasplugin("compatbroker")
    assert type(compatbroker).__name__ == "EmbeddedBroker" and compatbroker.running


def test_loading_the_plugin_imports_nothing_of_the_broker():
    code = ("import sys, compatbroker.toolkit.pytest_plugin; "
            "print(sorted(m for m in sys.modules if m == 'compatbroker' or m.startswith('compatbroker.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    loaded = "['compatbroker', 'compatbroker.toolkit', 'compatbroker.toolkit.pytest_plugin']"
    assert done.stdout.strip() == loaded


@pytest.mark.parametrize("mode", ["thread", "subprocess"])
def test_the_example_suite_passes_with_nothing_but_the_installed_package(tmp_path, mode):
    suite = tmp_path / "suite"
    shutil.copytree(EXAMPLE, suite)
    done = run_pytest(suite, f"--compatbroker-mode={mode}", timeout_s=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert f"{EXAMPLE_TESTS} passed" in done.stdout


def test_a_test_that_leaves_the_shared_broker_down_does_not_break_the_next(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_down.py").write_text(
        "def test_leaves_it_down(compatbroker):\n"
        "    compatbroker.inject_latency(None, 50)\n"
        "    compatbroker.down()\n"
        "\n"
        "def test_finds_it_up_and_clean(compatbroker):\n"
        "    assert compatbroker.is_up\n"
        "    assert compatbroker.faults()['latency'] == []\n")
    done = run_pytest(suite)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "2 passed" in done.stdout


def test_command_line_options_reach_the_fixture_brokers(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_options.py").write_text(
        "def test_options(compatbroker, compatbroker_fresh):\n"
        "    for broker in (compatbroker, compatbroker_fresh):\n"
        "        assert (broker.mode, broker.emulate) == ('subprocess', '3.9')\n"
        "        assert broker.control_url is not None\n")
    done = run_pytest(suite, "--compatbroker-mode=subprocess", "--compatbroker-emulate=3.9")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1 passed" in done.stdout


def test_the_fixture_brokers_may_be_clusters_whose_node_faults_are_undone_after_each_test(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\ncompatbroker_nodes = 3\n")
    (suite / "test_nodes.py").write_text(
        "def test_stops_a_node(compatbroker):\n"
        "    assert compatbroker.node_ids == [0, 1, 2]\n"
        "    compatbroker.stop_node(1)\n"
        "\n"
        "def test_finds_every_node_back(compatbroker):\n"
        "    assert [node.alive and node.up for node in compatbroker.nodes_status()] == [True] * 3\n")
    done = run_pytest(suite)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "2 passed" in done.stdout
