"""pytest hooks that fill the compatibility matrix from the compat tests and write its reports at the end.

The repository's root conftest.py imports these hooks, so that one report covers tests/compat/ and spark_tests/
(the Java row) when a run holds both; `matrix.cell_of` leaves every other test out. How a test maps to a cell is
tests/compat/matrix.py's business; here each test's outcome is recorded once (a failure in setup or teardown
counts as a failure, a skip as a skip), and when the session ends build/compat-matrix.md and .html are written
(COMPATBROKER_MATRIX_DIR writes them elsewhere) with each failing test's report text (traceback, captured stdout,
stderr and log) in compat-matrix-output/ beside them. Then the run records where they are for `compatbroker matrix`
(compatbroker/cli/matrix.py: a JSON pointer in $XDG_CACHE_HOME/compatbroker). The client cells that no test of the
run covered, and that are not marked n/a, are also named in the terminal summary.

Runs under pytest-xdist too: a test's cell is found where the test runs (pytest_runtest_makereport, which needs the
item) and travels with its reports as the user property PROPERTY; the Recorder, registered only in the process that
writes the reports (the controller, or the one process of a plain run), reads it from each report it is given
(pytest_runtest_logreport), so both runs record through one path.
"""
from __future__ import annotations

import datetime
import os
from pathlib import Path

import pytest

from compatbroker.cli.matrix import write_latest

from . import matrix

PROPERTY = "compat_matrix"  # report.user_properties entry: (PROPERTY, (client, flow, first line of a failure))
PLUGIN_NAME = "compat-matrix-recorder"


def pytest_configure(config):
    config.addinivalue_line("markers", matrix.MARKER_HELP)
    if not hasattr(config, "workerinput"):  # a pytest-xdist worker only tags its reports; the controller records
        config.pluginmanager.register(Recorder(), PLUGIN_NAME)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Tags the reports of each matrix test with its cell, and a failure with its first line."""
    outcome = yield
    report = outcome.get_result()
    cell = matrix.cell_of(item)
    if cell is None:
        return
    message = ""
    if report.failed:
        text = call.excinfo.exconly() if call.excinfo is not None else report.longreprtext
        message = matrix.first_line(text)
    report.user_properties.append((PROPERTY, (*cell, message)))


def tagged_cell(report) -> tuple[str, str, str] | None:
    """(client, flow, message) that pytest_runtest_makereport put on `report`; None for a test outside the matrix."""
    for name, value in report.user_properties:
        if name == PROPERTY:
            client, flow, message = value  # a tuple, or a list once it crossed from an xdist worker
            return client, flow, message
    return None


def _final_outcome(report) -> str | None:
    """The one outcome a test contributes: its call's, or its setup's when the call never ran, or a teardown
    failure."""
    if report.when == "call":
        return "failed" if report.failed else "skipped" if report.skipped else "passed"
    if report.when == "setup" and not report.passed:
        return "skipped" if report.skipped else "failed"
    if report.when == "teardown" and report.failed:
        return "failed"
    return None


def output_text(report) -> str:
    """A failing phase's report as pytest shows it: the traceback, then each captured section (stdout, stderr,
    log) of the test so far."""
    parts = [f"===== {report.nodeid} ({report.when}): {report.outcome} =====", report.longreprtext.rstrip()]
    for title, content in report.sections:
        parts += ["", f"----- {title} -----", content.rstrip()]
    return "\n".join(parts) + "\n\n"


class Recorder:
    """Collects the tagged reports into a Matrix and writes the reports when the session ends."""

    def __init__(self):
        self.matrix = matrix.Matrix()

    def pytest_runtest_logreport(self, report):
        cell = tagged_cell(report)
        result = _final_outcome(report)
        if cell is None or result is None:
            return
        client, flow, message = cell
        self.matrix.add(client, flow, result, report.nodeid, message)
        if result == "failed":
            self.matrix.add_output(report.nodeid, output_text(report))

    def pytest_sessionfinish(self, session):
        if not self.matrix.cells:
            return
        directory = Path(os.environ.get("COMPATBROKER_MATRIX_DIR", matrix.REPORT_DIR)).resolve()
        markdown, page = matrix.write_reports(self.matrix, directory)
        pointer = write_latest(latest_document(self.matrix, markdown, page))
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        reporter.write_line(f"compat matrix: {markdown} and {page} (`compatbroker matrix` reads {pointer})")
        gaps = self.matrix.gaps()
        if gaps:  # a client cell with neither a test nor an n/a reason (matrix.NOT_APPLICABLE)
            reporter.write_line(f"compat matrix: {len(gaps)} client cells {matrix.NO_TEST} in this run: "
                                + ", ".join(f"{client} / {flow}" for client, flow in gaps), yellow=True)


def latest_document(recorded: matrix.Matrix, markdown: Path, page: Path) -> dict:
    """What `compatbroker matrix` shows of this run (compatbroker/cli/matrix.py's pointer)."""
    passed, failed, skipped = recorded.totals()
    return {"html": str(page), "markdown": str(markdown), "outputs": str(page.parent / matrix.OUTPUT_DIR),
            "started": recorded.started.isoformat(timespec="seconds"),
            "finished": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "passed": passed, "failed": failed, "skipped": skipped,
            "failing_cells": len(recorded.failures()), "untested_cells": len(recorded.gaps())}


__all__ = ["pytest_configure", "pytest_runtest_makereport"]
