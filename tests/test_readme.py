"""The README's first command and its 60-second tour, run as written.

The first command installs the checkout into a fresh `.venv` with the system's Python and starts the broker; the
tour starts its own broker in the background and drives it with the command line. Both use localhost:9092, as a new
user would, so they fail with a clear message when something else listens there. Data directories go to a
temporary `XDG_DATA_HOME`.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
INSTALL_BOUND_S = 600  # pip may download every dependency
TOUR_BOUND_S = 180


def _sh_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, flags=re.S)


def _first_command() -> str:
    return _sh_blocks(README.read_text())[0].splitlines()[0]


def _tour() -> str:
    section = README.read_text().split("## A 60-second tour", 1)[1]
    return _sh_blocks(section)[0]


def _require_port_9092_free() -> None:
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", 9092)) == 0:
            pytest.fail("something already listens on localhost:9092; the README's commands use that port: stop it")


def _copy_checkout(target: Path) -> Path:
    ignored = shutil.ignore_patterns(".git", ".venv", "build", "dist", "node_modules", "__pycache__", "*.egg-info",
                                     ".pytest_cache", ".hypothesis")
    shutil.copytree(REPO, target, ignore=ignored)
    return target


def _debian_python_dir(tmp_path: Path) -> list[str]:
    """A PATH entry whose `python3` is Debian's own, where it refuses a bare `pip install` (PEP 668) and has pip:
    the machine the first command is written for. Elsewhere the PATH's python3 runs it."""
    system = Path("/usr/bin/python3")
    managed = list(Path("/usr/lib").glob("python3.*/EXTERNALLY-MANAGED"))
    if not (system.exists() and managed and subprocess.run([system, "-m", "pip", "--version"],
                                                           capture_output=True).returncode == 0):
        return []
    shim = tmp_path / "debian-python"
    shim.mkdir()
    (shim / "python3").symlink_to(system)
    return [str(shim)]


def test_first_command_installs_into_a_venv_and_serves(tmp_path):
    """The first line, as written: a venv without Debian's python3-venv, the project installed with the system's
    pip (Debian's externally managed Python where there is one), the broker listening on localhost:9092; SIGTERM
    stops it with exit 0."""
    _require_port_9092_free()
    checkout = _copy_checkout(tmp_path / "checkout")
    path = os.pathsep.join([*_debian_python_dir(tmp_path), os.environ["PATH"]])
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "PATH": path}
    env.pop("VIRTUAL_ENV", None)
    process = subprocess.Popen(["bash", "-c", _first_command()],
                               cwd=checkout, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        line = _read_line_until(process, "compatbroker listening on", INSTALL_BOUND_S)
        assert line.strip() == "compatbroker listening on localhost:9092"
        assert (checkout / ".venv" / "bin" / "compatbroker").exists()
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr[-2000:]


def _read_line_until(process: subprocess.Popen, marker: str, bound_s: float) -> str:
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if marker in line:
            return line
        if not line and process.poll() is not None:
            pytest.fail(f"the command ended with {process.returncode} before printing {marker!r}:\n"
                        f"{process.stderr.read()[-3000:]}")
    pytest.fail(f"no {marker!r} within {bound_s} s")


def test_tour_runs_as_written(tmp_path):
    """The tour's lines, run by bash as one script: every command succeeds, the consumer prints two of the three
    records in the tour's template, the group describe shows a lag of 1, and the topic describe answers JSON."""
    _require_port_9092_free()
    (tmp_path / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "COLUMNS": "200"}
    env.pop("COMPATBROKER_BOOTSTRAP", None)
    result = subprocess.run(["bash", "-e", "-c", _tour()], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=TOUR_BOUND_S)
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    produced = {'alice ordered {"item": "book"}', 'bob ordered {"item": "pen"}', 'carol ordered {"item": "ink"}'}
    consumed = re.findall(r'^(\w+ ordered \{.*?\}) \(partition (\d+), offset (\d+)\)$', result.stdout, flags=re.M)
    assert len(consumed) == 2 and {text for text, _, _ in consumed} <= produced, result.stdout
    assert re.search(r"^Group +billing$", result.stdout, flags=re.M), result.stdout
    assert re.search(r"^Total lag +1$", result.stdout, flags=re.M), result.stdout
    [described] = _json_document_in(result.stdout)["topics"]
    assert described["name"] == "orders" and len(described["partitions"]) == 3
    assert sum(p["log_end_offset"] for p in described["partitions"]) == 3


def _json_document_in(text: str) -> dict:
    start = text.index("\n{") + 1
    document, _ = json.JSONDecoder().raw_decode(text[start:])
    return document
