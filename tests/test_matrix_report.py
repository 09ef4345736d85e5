"""The compatibility matrix's report (tests/compat/matrix.py, matrix_report.py) without any client: rows grouped by
family with their versions, flows as columns, n/a reasons and failures numbered, failing cells linked to their
tests' output, the hooks in a plain run and under pytest-xdist (reports carried from a worker to the controller),
and the pointer `compatbroker matrix` reads.

It lives outside tests/compat/ so that its own tests stay out of the matrix (matrix.cell_of counts only tests
under tests/compat/ and spark_tests/).
"""
from __future__ import annotations

import dataclasses
import json
import re
import sys
import types
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import pytest
from _pytest.reports import pytest_report_from_serializable, pytest_report_to_serializable

from tests.compat import matrix, matrix_report
from tests.compat.clients import catalog

pytest_plugins = ("pytester",)

VERSIONS = {"kafka-python": "3.0.12", "kcat": "1.7.1", "sarama": "1.22.1-1", matrix.JAVA: "kafka-clients 3.9.0",
            "kafka-tools": "4.1.0", "faust": "0.11.3", matrix.ANY_CLIENT: "raw protocol"}
PRODUCE_FAILURE = "tests/compat/test_produce.py::test_acks[kcat-all]"


def _sample() -> matrix.Matrix:
    """A run by hand: a row in each family, the raw protocol row, one failing cell and n/a cells."""
    recorded = matrix.Matrix()
    for client in ("faust", matrix.ANY_CLIENT, "kafka-tools", matrix.JAVA, "sarama", "kcat", "kafka-python"):
        recorded.add(client, "metadata", "passed", f"tests/compat/test_metadata.py::test_brokers[{client}]")
    recorded.add("kafka-python", "produce", "passed", "tests/compat/test_produce.py::test_acks[kafka-python-all]")
    recorded.add("kcat", "produce", "passed", "tests/compat/test_produce.py::test_acks[kcat-1]")
    recorded.add("kcat", "produce", "failed", PRODUCE_FAILURE, "ClientError: kcat exited 1 | broken `pipe`")
    recorded.add_output(PRODUCE_FAILURE, "===== the traceback =====\nCaptured stdout: kcat said no\n")
    recorded.add("kafka-python", "zero_copy", "skipped", "tests/compat/test_zero_copy.py::test_sendfile")
    recorded.add("kafka-python", "share_groups", "passed", "tests/compat/test_share_groups.py::test_x[kafka-python]")
    return recorded


def _table_rows(markdown: str) -> list[list[str]]:
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
            for line in markdown.splitlines() if line.startswith("| ")]


def test_rows_are_grouped_by_family_in_the_catalogs_order_with_their_versions():
    recorded = _sample()
    assert recorded.groups() == [(catalog.PYTHON, ["kafka-python"]), (catalog.LIBRDKAFKA_C, ["kcat"]),
                                 (catalog.GO, ["sarama"]), (catalog.JVM, [matrix.JAVA, "kafka-tools"]),
                                 (catalog.APPLICATIONS, ["faust"]), (matrix.RAW_PROTOCOL, [matrix.ANY_CLIENT])]
    rows = _table_rows(matrix.render_markdown(recorded, VERSIONS))
    assert rows[0] == ["client", "meta", "produce", "share", "0-copy"]  # core flows first, short headers
    assert [row[0] for row in rows[2:]] == [
        "**Python**", "kafka-python 3.0.12", "**C (librdkafka)**", "kcat 1.7.1", "**Go**", "sarama 1.22.1-1",
        "**JVM**", "java (Spark) kafka-clients 3.9.0", "kafka-tools 4.1.0", "**Applications and pipelines**",
        "faust 0.11.3", "**Raw protocol**", "any client raw protocol"]
    assert all(len(row) == len(rows[0]) for row in rows)  # family rows too: a well-formed table


def test_markdown_cells_legend_and_numbered_notes():
    markdown = matrix.render_markdown(_sample(), VERSIONS)
    rows = {row[0]: row[1:] for row in _table_rows(markdown)}
    assert rows["kafka-python 3.0.12"] == ["1/1", "1/1", "1/1", "skipped"]
    assert rows["kcat 1.7.1"] == ["1/1", "**FAIL** 1/2 (F1)", "n/a (1)", "n/a (2)"]
    assert rows["sarama 1.22.1-1"] == ["1/1", matrix.NO_TEST, "n/a (3)", "n/a (2)"]  # its own share reason
    assert rows["any client raw protocol"] == ["1/1", "", "", ""]
    assert "Columns: meta = metadata, share = share_groups, 0-copy = zero_copy." in markdown
    notes = re.findall(r"^- \((\d+)\) (.*)$", markdown, re.M)
    assert notes == [("1", matrix.NOT_APPLICABLE["kcat", "share_groups"]),
                     ("2", "broker-internal (sendfile, traced)"),  # one note for every client's zero_copy
                     ("3", matrix.NOT_APPLICABLE["sarama", "share_groups"]),
                     ("4", "not via Spark"), ("5", matrix.NOT_APPLICABLE["java (Spark)", "share_groups"])]
    assert len(notes) == len({reason for _, reason in notes})


def test_a_failing_cell_names_its_first_failure_and_the_file_of_its_output():
    markdown = matrix.render_markdown(_sample(), VERSIONS)
    assert "- F1 kcat / produce: 1 of 2 failed; first: `ClientError: kcat exited 1 \\| broken 'pipe'`" in markdown
    assert f"  - `{PRODUCE_FAILURE}`: {matrix.output_path(PRODUCE_FAILURE)}" in markdown
    assert "Client cells not tested in this run: kcat / zero_copy" not in markdown  # n/a is no gap
    assert "sarama / produce" in markdown.split("Client cells not tested in this run:")[1]


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs: list[str] = []
        self.family_rows: list[str] = []
        self._in_family = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a":
            self.hrefs.append(attrs["href"])
        self._in_family = tag == "tr" and attrs.get("class") == "family" or (self._in_family and tag == "th")

    def handle_data(self, data):
        if self._in_family and data.strip():
            self.family_rows.append(data.strip())
            self._in_family = False


def test_the_page_links_each_failing_cell_to_its_output_written_beside_it(tmp_path):
    markdown, page = matrix.write_reports(_sample(), tmp_path, VERSIONS)
    links = _Links()
    links.feed(page.read_text(encoding="utf-8"))
    assert links.family_rows == [catalog.PYTHON, catalog.LIBRDKAFKA_C, catalog.GO, catalog.JVM,
                                 catalog.APPLICATIONS, matrix.RAW_PROTOCOL]
    assert links.hrefs and set(links.hrefs) == {matrix.output_path(PRODUCE_FAILURE)}  # relative links
    assert (page.parent / links.hrefs[0]).read_text(encoding="utf-8").startswith("===== the traceback")
    assert 'title="kcat&#x27;s librdkafka 2.0.2 has no share consumer (librdkafka 2.15)">n/a <sup>1</sup>' in \
        page.read_text(encoding="utf-8")
    assert '<th class="client">kcat<br><small>1.7.1</small></th>' in page.read_text(encoding="utf-8")
    assert "<li>F1 kcat / produce: 1 of 2 failed<ul>" in page.read_text(encoding="utf-8")
    assert markdown.read_text(encoding="utf-8").count(matrix.OUTPUT_DIR) >= 2


def test_each_run_leaves_only_its_own_failures_in_the_output_directory(tmp_path):
    stale = tmp_path / matrix.OUTPUT_DIR / "an-earlier-failure.txt"
    stale.parent.mkdir()
    stale.write_text("old")
    recorded = _sample()
    recorded.add("kafka-python", "produce", "failed", "tests/compat/test_produce.py::test_lost", "no output kept")
    matrix.write_reports(recorded, tmp_path, VERSIONS)
    written = sorted(path.name for path in (tmp_path / matrix.OUTPUT_DIR).iterdir())
    assert written == sorted(Path(matrix.output_path(test)).name
                             for test in (PRODUCE_FAILURE, "tests/compat/test_produce.py::test_lost"))
    assert "no output kept" in (tmp_path / matrix.output_path("tests/compat/test_produce.py::test_lost")).read_text()


def test_output_files_of_alike_ids_stay_apart():
    first, second = matrix.output_path("t.py::test[a/b]"), matrix.output_path("t.py::test[a_b]")
    assert first != second and first.startswith(f"{matrix.OUTPUT_DIR}/t.py_test_a_b") and "/" not in first[21:]
    assert matrix.output_path("tests/compat/test_produce.py::test_acks[kcat-all]").startswith(
        f"{matrix.OUTPUT_DIR}/test_produce.py_test_acks_kcat-all-")


def test_catalog_entries_bring_their_not_applicable_cells():
    for entry in catalog.CLIENTS:
        for flow, reason in entry.not_applicable.items():
            assert matrix.NOT_APPLICABLE[entry.name, flow] == reason
    assert set(matrix.MATRIX_CLIENTS) == set(catalog.names())


def test_a_client_named_in_a_test_name_is_the_longest_that_matches():
    assert matrix._client_in_name("test_confluent_kafka_go_produces") == "confluent-kafka-go"
    assert matrix._client_in_name("test_confluent_kafka_idempotent") == "confluent-kafka"
    assert matrix._client_in_name("test_kafka_go_reads") == "kafka-go"
    assert matrix._client_in_name("test_raw_fetch") == matrix.ANY_CLIENT


def test_catalog_version_functions_and_those_that_fail(monkeypatch):
    """A row's `version` is "module:function" in tests/compat/clients/; whatever it does, the report goes on."""
    fake = types.ModuleType("tests.compat.clients.fake_versions")
    fake.text, fake.absent = (lambda name: f"{name} 1.2.3"), (lambda name: None)
    fake.broken = lambda name: 1 / 0
    monkeypatch.setitem(sys.modules, fake.__name__, fake)
    entries = {entry.name: entry for entry in catalog.CLIENTS}
    changed = {"kafka-go": "fake_versions:text", "faust": "fake_versions:absent", "rsyslog": "fake_versions:broken",
               "syslog-ng": "no_such_module:version", "kafka-tools": ""}
    entries.update({name: dataclasses.replace(entries[name], version=version) for name, version in changed.items()})
    monkeypatch.setattr(catalog, "info", entries.__getitem__)
    assert matrix.client_versions([*changed, matrix.ANY_CLIENT]) == {
        "kafka-go": "kafka-go 1.2.3", "faust": "not installed", "rsyslog": "?", "syslog-ng": "?",
        "kafka-tools": "?", matrix.ANY_CLIENT: "raw protocol"}


# --- the hooks ----------------------------------------------------------------------------------------------------

COMPAT_TESTS = '''
import pytest

@pytest.mark.parametrize("client", ["kafka-python", "kcat"])
def test_acks(client):
    print(f"{client} produced")
    assert client != "kcat", "kcat answered NOT_LEADER"

def test_kcat_restart():
    pass

@pytest.mark.matrix(client="kafka-python", flow="groups")
def test_group(request):
    pass

@pytest.fixture
def broken():
    yield
    raise RuntimeError("teardown broke")

def test_kafka_python_teardown(broken):
    pass
'''


@pytest.fixture
def compat_run(pytester, monkeypatch, tmp_path):
    """A tests/compat/-like directory using the hooks (as the root conftest.py does), run in this process."""
    monkeypatch.setenv("COMPATBROKER_MATRIX_DIR", str(tmp_path / "reports"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    pytester.makeconftest("from tests.compat.matrix_report import *  # noqa: F401,F403\n")
    pytester.mkdir("compat")
    (pytester.path / "compat" / "test_produce.py").write_text(COMPAT_TESTS)
    return pytester.inline_run("-p", "no:cacheprovider", "-p", "no:hypothesispytest")


EXPECTED = {  # test id -> (client, flow, outcome, first line of the failure)
    "compat/test_produce.py::test_acks[kafka-python]": ("kafka-python", "produce", "passed", ""),
    "compat/test_produce.py::test_acks[kcat]": ("kcat", "produce", "failed",
                                                "AssertionError: kcat answered NOT_LEADER"),
    "compat/test_produce.py::test_kcat_restart": ("kcat", "produce", "passed", ""),
    "compat/test_produce.py::test_group": ("kafka-python", "groups", "passed", ""),
    "compat/test_produce.py::test_kafka_python_teardown": ("kafka-python", "produce", "failed",
                                                           "RuntimeError: teardown broke"),
}


def test_a_plain_run_writes_the_reports_the_outputs_and_the_pointer(compat_run, tmp_path):
    compat_run.assertoutcome(passed=4, failed=2)  # the teardown error counts apart from its passed call
    reports = tmp_path / "reports"
    kcat_output = (reports / matrix.output_path("compat/test_produce.py::test_acks[kcat]")).read_text()
    assert "AssertionError: kcat answered NOT_LEADER" in kcat_output
    assert "----- Captured stdout call -----\nkcat produced" in kcat_output
    teardown = (reports / matrix.output_path("compat/test_produce.py::test_kafka_python_teardown")).read_text()
    assert "(teardown): failed" in teardown and "RuntimeError: teardown broke" in teardown
    rows = {row[0].split(" ")[0]: row[1:] for row in _table_rows((reports / "compat-matrix.md").read_text())}
    assert rows["kafka-python"] == ["**FAIL** 1/2 (F1)", "1/1"]
    assert rows["kcat"] == ["**FAIL** 1/2 (F2)", matrix.NO_TEST]
    pointer = json.loads((tmp_path / "cache" / "compatbroker" / "compat-matrix-latest.json").read_text())
    assert pointer["html"] == str(reports / "compat-matrix.html")
    assert (pointer["passed"], pointer["failed"], pointer["skipped"], pointer["failing_cells"]) == (3, 2, 0, 2)


def test_reports_carried_from_an_xdist_worker_record_the_same_matrix(compat_run):
    """What the controller of `pytest -n` gets: each report serialized on the worker (where the makereport hook
    tagged it) and rebuilt, with no item; here JSON stands in for execnet (it turns tuples into lists)."""
    sent = [json.loads(json.dumps(pytest_report_to_serializable(report)))
            for report in compat_run.getreports("pytest_runtest_logreport")]
    controller = matrix_report.Recorder()
    for data in sent:
        controller.pytest_runtest_logreport(pytest_report_from_serializable(data))
    assert controller.matrix.results == EXPECTED
    assert "kcat produced" in controller.matrix.outputs["compat/test_produce.py::test_acks[kcat]"]


def test_an_xdist_worker_tags_reports_but_records_nothing():
    registered, markers = [], []
    plugins = SimpleNamespace(register=lambda plugin, name: registered.append(name))
    worker = SimpleNamespace(workerinput={"workerid": "gw0"}, pluginmanager=plugins,
                             addinivalue_line=lambda name, line: markers.append(line))
    matrix_report.pytest_configure(worker)
    assert registered == [] and markers == [matrix.MARKER_HELP]
    controller = SimpleNamespace(pluginmanager=plugins, addinivalue_line=lambda name, line: None)
    matrix_report.pytest_configure(controller)
    assert registered == [matrix_report.PLUGIN_NAME]


def test_tests_outside_the_matrix_leave_no_report(pytester, monkeypatch, tmp_path):
    monkeypatch.setenv("COMPATBROKER_MATRIX_DIR", str(tmp_path / "reports"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    pytester.makeconftest("from tests.compat.matrix_report import *  # noqa: F401,F403\n")
    pytester.makepyfile(test_other="def test_kcat_elsewhere():\n    pass\n")
    pytester.inline_run("-p", "no:cacheprovider", "-p", "no:hypothesispytest").assertoutcome(passed=1)
    assert not (tmp_path / "reports").exists() and not (tmp_path / "cache").exists()
