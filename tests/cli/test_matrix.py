"""`compatbroker matrix`: where the latest compatibility matrix is, read from the pointer the compat run writes
(compatbroker/cli/matrix.py), as fields or JSON; exit 1 when there is none, it is unreadable or its page is gone."""
from __future__ import annotations

import json
import os

import pytest

from compatbroker.cli.matrix import POINTER_NAME, pointer_path, write_latest

from .helpers import run, run_process


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def latest(tmp_path, cache):
    """A matrix written by a run: its page, its Markdown and the pointer to them."""
    page, markdown = tmp_path / "build" / "compat-matrix.html", tmp_path / "build" / "compat-matrix.md"
    page.parent.mkdir()
    page.write_text("<html></html>")
    markdown.write_text("# Compatibility matrix\n")
    document = {"html": str(page), "markdown": str(markdown), "outputs": str(page.parent / "compat-matrix-output"),
                "started": "2026-11-27T13:06:00+00:00", "finished": "2026-11-27T13:23:00+00:00", "passed": 535,
                "failed": 2, "skipped": 1, "failing_cells": 1, "untested_cells": 13}
    write_latest(document)
    return document


def test_the_pointer_lives_in_the_xdg_cache(cache, monkeypatch):
    assert pointer_path() == cache / "compatbroker" / POINTER_NAME
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # not absolute: ignored, as the XDG spec says
    monkeypatch.setenv("HOME", "/home/someone")
    assert str(pointer_path()) == f"/home/someone/.cache/compatbroker/{POINTER_NAME}"


def test_prints_where_the_latest_matrix_is(latest):
    ran = run("matrix")
    assert ran.code == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert lines[0].split() == ["HTML", latest["html"]]
    assert lines[1].split() == ["Markdown", latest["markdown"]]
    assert "Run          2026-11-27T13:06:00+00:00 to 2026-11-27T13:23:00+00:00" in ran.stdout
    assert "Tests        535 passed, 2 failed, 1 skipped" in ran.stdout
    assert "Cells        1 failing, 13 not tested" in ran.stdout


@pytest.mark.parametrize("where", ["command", "root"])
def test_json_is_the_pointer_as_written(latest, where):
    args = ("matrix", "--format", "json") if where == "command" else ("--format", "json", "matrix")
    assert run(*args).json() == latest


def test_exit_1_when_no_matrix_was_written_yet(cache):
    ran = run("matrix")
    assert ran.code == 1 and ran.stdout == ""
    assert ran.stderr == (f"compatbroker: matrix: no compatibility matrix written yet ({cache}/compatbroker/"
                          f"{POINTER_NAME} does not exist); run the compat tests: bash tests/run.sh tests/compat\n")


def test_exit_1_when_the_page_was_removed(latest):
    os.remove(latest["html"])
    ran = run("matrix", "--format", "json")
    assert ran.code == 1 and ran.stdout == ""
    assert f"the latest matrix, {latest['html']}, was removed" in ran.stderr


def test_exit_1_when_the_pointer_is_unreadable(cache):
    pointer_path().parent.mkdir(parents=True)
    pointer_path().write_text("{not json")
    ran = run("matrix")
    assert ran.code == 1 and ran.stderr.startswith(f"compatbroker: matrix: cannot read {pointer_path()}: ")
    pointer_path().write_text(json.dumps(["a list"]))
    assert "does not name a matrix" in run("matrix").stderr


def test_help_says_where_the_pointer_is_and_the_real_entry_point_runs_it(latest, cache):
    ran = run_process("matrix", "--help", env={"XDG_CACHE_HOME": str(cache)})
    assert ran.code == 0 and "compat-matrix-latest.json" in ran.stdout and "Exit codes" in ran.stdout
    ran = run_process("matrix", "--format", "json", env={"XDG_CACHE_HOME": str(cache)})
    assert ran.json()["html"] == latest["html"]
