"""pytest hooks that fill the compatibility matrix from the compat tests and write its reports at the end.

The repository's root conftest.py imports these hooks, so that one report covers tests/compat/ and spark_tests/
(the Java column) when a run holds both; `matrix.cell_of` leaves every other test out. How a test maps to a cell is
tests/compat/matrix.py's business; here each test's outcome is recorded once (a failure in setup or teardown
counts as a failure, a skip as a skip) and build/compat-matrix.md and .html are written when the session ends
(COMPATBROKER_MATRIX_DIR writes them elsewhere). The client cells that no test of the run covered, and that are not
marked n/a, are also named in the terminal summary.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from . import matrix

_MATRIX = pytest.StashKey[matrix.Matrix]()


def pytest_configure(config):
    config.addinivalue_line("markers", matrix.MARKER_HELP)
    config.stash[_MATRIX] = matrix.Matrix()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    result = _final_outcome(report)
    if result is None:
        return
    message = ""
    if result == "failed":
        text = call.excinfo.exconly() if call.excinfo is not None else report.longreprtext
        message = matrix.first_line(text)
    cell = matrix.cell_of(item)
    if cell is None:
        return
    client, flow = cell
    item.config.stash[_MATRIX].add(client, flow, result, report.nodeid, message)


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


def pytest_sessionfinish(session):
    if hasattr(session.config, "workerinput"):  # a pytest-xdist worker: the controller writes the reports
        return
    recorded = session.config.stash.get(_MATRIX, None)
    if recorded is None or not recorded.cells:
        return
    directory = Path(os.environ.get("COMPATBROKER_MATRIX_DIR", matrix.REPORT_DIR))
    markdown, page = matrix.write_reports(recorded, directory)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"compat matrix: {markdown} and {page}")
        gaps = recorded.gaps()
        if gaps:  # a client cell with neither a test nor an n/a reason (matrix.NOT_APPLICABLE)
            reporter.write_line(f"compat matrix: {len(gaps)} client cells {matrix.NO_TEST} in this run: "
                                + ", ".join(f"{client} / {flow}" for client, flow in gaps), yellow=True)


__all__ = ["pytest_configure", "pytest_runtest_makereport", "pytest_sessionfinish"]
