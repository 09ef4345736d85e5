"""The compatibility matrix: which client passes which flow, read from the compat tests themselves.

Every test under tests/compat/ is one run of a cell (client x flow); parametrized runs of one test and the tests of
one module add up in their cell. How a test's cell is found, so that new tests land in the matrix by themselves:

- client: the test's `client` parameter (the `client` fixture of conftest.py, one run per name in
  clients.CLIENT_NAMES) or a `<something>_client` parameter holding a client's name (test_groups.py's
  `group_client`); else `@pytest.mark.matrix(client="sarama")` on the test or as the module's `pytestmark`;
  else a client's name written in the test's name (`test_confluent_kafka_idempotent_...` -> confluent-kafka);
  else the "any client" row (tests that speak the protocol themselves or check the broker alone).
- flow: `@pytest.mark.matrix(flow="...")` when given; else the module's name minus `test_` (test_produce.py ->
  produce). Name modules after the flow they test.

The rows are the clients of clients/catalog.py (every client, tool and application), grouped by family in the
catalog's order, each with its installed version; the Java client through Spark ("java (Spark)") is a JVM row, and the
raw-protocol "any client" row comes last. The columns are the flows, the core ones first (FLOW_LABELS, which also
gives the Markdown its short column headers).

A client's cell without a test is never left blank: it shows "n/a" and the reason when NOT_APPLICABLE says the client
cannot do the flow at all, and "not tested" otherwise (in a run of the whole suite: a gap to fill). Cells of the "any
client" row hold the tests that speak the protocol themselves; there a blank means none were needed.

The Java client runs in the matrix through Spark: tests under spark_tests/ fill the JAVA row (skipped, with the
reason, where the Spark connector jars are absent), their flow taken from SPARK_FLOWS by module unless a test is
marked; spark_tests/test_connector.py (jar discovery) is no client test and stays out.

matrix_report.py collects the outcomes and, at the end of the run, `write_reports` writes build/compat-matrix.md and
build/compat-matrix.html, and the full report of each failing test (traceback, captured output and log) to
build/compat-matrix-output/<test>.txt, which the HTML's failing cells link to and the Markdown names.
"""
from __future__ import annotations

import dataclasses
import datetime
import hashlib
import html
import importlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

from .clients import NODE_DIR, catalog

MATRIX_CLIENTS = catalog.names()
JAVA = "java (Spark)"
ANY_CLIENT = "any client"
RAW_PROTOCOL = "Raw protocol"  # the family heading of the "any client" row
OTHER = "Other"  # the heading of a client that a test marks but the catalog does not know
# spark_tests modules -> the flow they exercise through the Java client inside Spark (None: not a client test).
SPARK_FLOWS = {"batch_read": "consume", "streaming": "consume (streaming)", "write": "produce",
               "example_pipeline": "pipeline (Spark)", "java_client": "consume", "connector": None}
NO_TEST = "not tested"
# (client, flow) -> why that client cannot do the flow at all; the report shows "n/a" and the reason. A flow that
# exists only inside the broker is listed for every client. Only for whole cells: a client that can do part of a flow
# is tested on that part, and its test module says what it leaves out. A JAVA entry words the reason of a Java cell
# without Spark tests (else "not via Spark"). The clients of issue 20 keep theirs in their catalog entry
# (ClientInfo.not_applicable), merged below.
_NOT_APPLICABLE: dict[tuple[str, str], str] = {
    **{(client, "zero_copy"): "broker-internal (sendfile, traced)"
       for client in MATRIX_CLIENTS},
    **{(client, flow): "Spark only"
       for client in MATRIX_CLIENTS for flow in ("consume (streaming)", "pipeline (Spark)")},
    **{("sarama", flow): "sarama 1.22 has no transactional producer" for flow in ("transactions", "exactly_once")},
    ("kcat", "exactly_once"): "kcat cannot commit consumed offsets in a transaction",
    ("kcat", "cluster admin"): "kcat has no admin client",
    ("aiokafka", "cluster admin"): "aiokafka's admin client has no election, reassignment, quorum or log dir calls",
    ("sarama", "cluster admin"): "sarama 1.22's ClusterAdmin has no election, reassignment, quorum or log dir calls",
    ("sarama", "fetch from follower"): "sarama 1.22 predates KIP-392 (no RackID)",
    # KIP-848 (ConsumerGroupHeartbeat) and KIP-932 (share consumers): confluent-kafka 2.16 has both
    ("kafka-python", "groups_consumer_protocol"): "kafka-python 3.0 has no group.protocol=consumer (classic only)",
    ("aiokafka", "groups_consumer_protocol"): "aiokafka 0.14 has no group.protocol=consumer (classic only)",
    ("kcat", "groups_consumer_protocol"): "kcat's librdkafka 2.0.2 predates KIP-848 (librdkafka 2.4)",
    ("kafkajs", "groups_consumer_protocol"): "kafkajs 2.2.4 has no ConsumerGroupHeartbeat (classic only)",
    ("sarama", "groups_consumer_protocol"): "sarama 1.22 has no ConsumerGroupHeartbeat (classic only)",
    ("kafka-python", "share_groups"): "kafka-python 3.0 has no share consumer",
    ("aiokafka", "share_groups"): "aiokafka 0.14 has no share consumer",
    ("kcat", "share_groups"): "kcat's librdkafka 2.0.2 has no share consumer (librdkafka 2.15)",
    ("kafkajs", "share_groups"): "kafkajs 2.2.4 has no share consumer",
    ("sarama", "share_groups"): "sarama 1.22 has no share consumer",
    (JAVA, "groups_consumer_protocol"): "Spark's Kafka source assigns partitions itself (assign(), no group)",
    (JAVA, "share_groups"): "Spark's Kafka source has no share consumer",
    # KIP-714 client telemetry (GetTelemetrySubscriptions / PushTelemetry): librdkafka 2.5+ and the Java client 3.7+
    ("kafka-python", "telemetry"): "kafka-python 3.0 does not push client metrics (no KIP-714)",
    ("aiokafka", "telemetry"): "aiokafka 0.14 does not push client metrics (no KIP-714)",
    ("kcat", "telemetry"): "kcat's librdkafka 2.0.2 predates KIP-714 (librdkafka 2.5)",
    ("kafkajs", "telemetry"): "kafkajs 2.2.4 does not push client metrics (no KIP-714)",
    ("sarama", "telemetry"): "sarama 1.22 does not push client metrics (no KIP-714)",
}
NOT_APPLICABLE: dict[tuple[str, str], str] = {
    **_NOT_APPLICABLE,
    **{(entry.name, flow): reason for entry in catalog.CLIENTS for flow, reason in entry.not_applicable.items()},
}
# The flows in the order of the columns (the core flows of every client first), each with its short Markdown header;
# a flow not listed here follows them in name order, headed by its name.
FLOW_LABELS: dict[str, str] = {
    "metadata": "meta", "metadata_all_topics": "meta all", "produce": "produce", "consume": "consume",
    "groups": "groups", "committed_offsets": "commits", "admin_topics": "topics", "admin_configs": "configs",
    "idempotence": "idemp", "restart": "restart", "transactions": "txn", "exactly_once": "EOS", "tls": "tls",
    "sasl": "sasl", "acls": "acls", "emulation": "emul", "groups_consumer_protocol": "KIP-848",
    "share_groups": "share", "telemetry": "telem", "cluster acks": "cl acks", "cluster admin": "cl admin",
    "cluster failover": "failover", "cluster unclean": "unclean", "fetch from follower": "follower",
    "crash_loop": "crash", "zero_copy": "0-copy", "consume (streaming)": "stream", "pipeline (Spark)": "pipeline",
}
MARKER = "matrix"
MARKER_HELP = "matrix(client=None, flow=None): the compat-matrix cell of a test (see tests/compat/matrix.py)"
REPORT_DIR = Path(__file__).resolve().parents[2] / "build"
OUTPUT_DIR = "compat-matrix-output"  # beside the reports: one file per failing test
# A client's name as it appears in a test's name (confluent-kafka -> confluent_kafka), the longest first, so that
# confluent_kafka_go is not read as confluent-kafka.
_NAME_PATTERNS = [(name, re.compile(rf"(^|_){re.escape(re.sub(r'[-.]', '_', name))}(_|$)"))
                  for name in sorted(MATRIX_CLIENTS, key=len, reverse=True)]


def cell_of(item) -> tuple[str, str] | None:
    """(client, flow) of a collected compat or Spark test; None for any other test."""
    marked: dict = {}
    for marker in item.iter_markers(MARKER):  # the test's own marks first, then its class's and module's
        for name, value in marker.kwargs.items():
            marked.setdefault(name, value)
    if getattr(item, "module", None) is None:  # not a Python test function (a doctest...)
        return None
    module = item.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    parts = Path(str(item.path)).parts
    if "spark_tests" in parts:
        flow = marked.get("flow") or SPARK_FLOWS.get(module, module)
        return None if flow is None else (JAVA, flow)
    if "compat" not in parts:
        return None
    client = _client_param(item) or marked.get("client") or _client_in_name(item.originalname or item.name)
    return client, marked.get("flow") or module


def _client_param(item) -> str | None:
    """The value of a `client` or `<something>_client` parameter that names a matrix client."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    for name in sorted(params, key=lambda n: n != "client"):
        if (name == "client" or name.endswith("_client")) and params[name] in MATRIX_CLIENTS:
            return params[name]
    return None


def _client_in_name(name: str) -> str:
    for client, pattern in _NAME_PATTERNS:
        if pattern.search(name.removeprefix("test_")):
            return client
    return ANY_CLIENT


def first_line(text: str) -> str:
    """The first non-empty line, with an exception's module path cut (tests.compat.clients.base.ClientError ->
    ClientError)."""
    for line in text.splitlines():
        if line.strip():
            return re.sub(r"^(?:\w+\.)+(\w+(?:Error|Exception|Exit)\b)", r"\1", line.strip())[:200]
    return ""


def family_of(client: str) -> str:
    if client == JAVA:
        return catalog.JVM
    if client == ANY_CLIENT:
        return RAW_PROTOCOL
    return catalog.info(client).family if client in MATRIX_CLIENTS else OTHER


def _row_order() -> list[str]:
    """Every known row in the matrix's order: the catalog's by family, Java first among the JVM rows, then the
    raw protocol."""
    rows = []
    for family in catalog.FAMILIES:
        rows += [JAVA] if family == catalog.JVM else []
        rows += [entry.name for entry in catalog.CLIENTS if entry.family == family]
    return rows + [ANY_CLIENT]


def output_path(test_id: str) -> str:
    """The file, relative to the reports, that holds the output of the failing test `test_id`: its id made safe
    for a file name, with a hash of the id to keep two ids that read alike apart."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", test_id.removeprefix("tests/compat/")).strip("_.")[:120]
    return f"{OUTPUT_DIR}/{safe}-{hashlib.sha1(test_id.encode()).hexdigest()[:8]}.txt"


# --- outcomes -----------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Cell:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    failures: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (test id, first line), run order

    def add(self, outcome: str, test_id: str, message: str) -> None:
        if outcome == "passed":
            self.passed += 1
        elif outcome == "skipped":
            self.skipped += 1
        else:
            self.failed += 1
            self.failures.append((test_id, message))

    @property
    def runs(self) -> int:
        return self.passed + self.failed

    def summary(self) -> str:
        if self.failed:
            return f"FAIL {self.passed}/{self.runs}"
        if self.passed:
            return f"pass {self.passed}/{self.runs}"
        return "skipped"


@dataclasses.dataclass
class Matrix:
    """Each test's outcome by test id (a teardown failure overrides a passed call), and the report text of each
    failing test (`outputs`); cells are computed from them."""
    results: dict[str, tuple[str, str, str, str]] = dataclasses.field(default_factory=dict)
    outputs: dict[str, str] = dataclasses.field(default_factory=dict)
    started: datetime.datetime = dataclasses.field(
        default_factory=lambda: datetime.datetime.now(datetime.timezone.utc))

    def add(self, client: str, flow: str, outcome: str, test_id: str, message: str = "") -> None:
        earlier = self.results.get(test_id)
        if earlier is None or (outcome == "failed" and earlier[2] != "failed"):
            self.results[test_id] = (client, flow, outcome, message)

    def add_output(self, test_id: str, text: str) -> None:
        """Keeps a failing phase's report text (setup, call, teardown in turn) for the test's output file."""
        self.outputs[test_id] = self.outputs.get(test_id, "") + text

    @property
    def cells(self) -> dict[tuple[str, str], Cell]:
        cells: dict[tuple[str, str], Cell] = {}
        for test_id, (client, flow, outcome, message) in self.results.items():
            cells.setdefault((client, flow), Cell()).add(outcome, test_id, message)
        return cells

    def clients(self) -> list[str]:
        """The rows of this run, in the matrix's order (families, then unknown names, then the raw protocol)."""
        seen = {client for client, _ in self.cells}
        known = _row_order()
        ordered = [c for c in known if c in seen and c != ANY_CLIENT]
        return ordered + sorted(seen - set(known)) + ([ANY_CLIENT] if ANY_CLIENT in seen else [])

    def groups(self) -> list[tuple[str, list[str]]]:
        """(family, its rows of this run) in the matrix's order, families without a row left out."""
        grouped: dict[str, list[str]] = {}
        for client in self.clients():
            grouped.setdefault(family_of(client), []).append(client)
        return list(grouped.items())

    def flows(self) -> list[str]:
        seen = {flow for _, flow in self.cells}
        return [f for f in FLOW_LABELS if f in seen] + sorted(seen - set(FLOW_LABELS))

    def totals(self) -> tuple[int, int, int]:
        cells = list(self.cells.values())
        return sum(c.passed for c in cells), sum(c.failed for c in cells), sum(c.skipped for c in cells)

    def failures(self) -> list[tuple[str, str, Cell]]:
        """(client, flow, cell) of each failing cell, in the order of the rows and columns."""
        computed = self.cells
        return [(client, flow, computed[client, flow]) for client in self.clients() for flow in self.flows()
                if (client, flow) in computed and computed[client, flow].failed]

    def gaps(self) -> list[tuple[str, str]]:
        """(client, flow) of the client cells that no test of this run covered and NOT_APPLICABLE does not excuse."""
        computed = self.cells
        return [(client, flow) for client in self.clients() for flow in self.flows()
                if client in MATRIX_CLIENTS and (client, flow) not in computed
                and (client, flow) not in NOT_APPLICABLE]


# --- client versions ----------------------------------------------------------------------------------------------

def client_versions(names=None) -> dict[str, str]:
    """Each row's installed version (of `names`, default every row): 'not installed' when the client is missing,
    '?' when the row has no way to tell or asking failed (a broken version function never breaks the report)."""
    names = _row_order() if names is None else names
    return {name: _guarded_version(name) for name in names}


def _guarded_version(name: str) -> str:
    try:
        return _version_of(name) or "not installed"
    except Exception:  # noqa: BLE001 - whatever a client's version function raises, the report goes on
        return "?"


def _version_of(name: str) -> str | None:
    if name in ("kafka-python", "aiokafka"):
        return _distribution(name)
    if name == "confluent-kafka":
        version = _distribution(name)
        try:
            import confluent_kafka
            return f"{version}, librdkafka {confluent_kafka.libversion()[0]}"
        except ImportError:
            return version
    if name == "kcat":
        return _command_line(["kcat", "-V"], r"[Vv]ersion (\S+)")
    if name == "kafkajs":
        try:
            return json.loads((NODE_DIR / "node_modules" / "kafkajs" / "package.json").read_text())["version"]
        except (OSError, ValueError, KeyError):
            return None
    if name == "sarama":
        from .clients.sarama_client import installed_version
        return installed_version()
    if name == JAVA:
        return _spark_connector_version()
    if name == ANY_CLIENT:
        return "raw protocol"
    return _catalog_version(name)


def _catalog_version(name: str) -> str | None:
    """The version a catalog entry's `version` function ("module:function" in tests/compat/clients/) reports;
    "?" for a row without one."""
    if name not in MATRIX_CLIENTS or not catalog.info(name).version:
        return "?"
    module, _, function = catalog.info(name).version.partition(":")
    found = getattr(importlib.import_module(f".clients.{module}", __package__), function)(name)
    return None if found is None else str(found)


def _spark_connector_version() -> str:
    """kafka-clients and PySpark versions, from the jars spark_tests use."""
    jars = [Path(path).name for path in os.environ.get("COMPATBROKER_SPARK_JARS", "").split(",") if path]
    clients = next((re.sub(r"^kafka-clients-(.+)\.jar$", r"\1", jar) for jar in jars
                    if jar.startswith("kafka-clients-")), None)
    pyspark = _distribution("pyspark") or "?"
    if clients is None:
        return f"PySpark {pyspark}, connector jars not set (COMPATBROKER_SPARK_JARS)"
    return f"kafka-clients {clients}, PySpark {pyspark}"


def _distribution(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _command_line(cmd: list[str], pattern: str) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(pattern, out.stdout + out.stderr)
    return match.group(1) if match else first_line(out.stdout + out.stderr) or None


def broker_version() -> str:
    return _distribution("compatbroker") or "?"


# --- rendering ----------------------------------------------------------------------------------------------------

LEGEND = ("N/M: N of M tests passed; FAIL N/M (Fk): some failed, see Fk below; n/a (k): the client cannot do the flow "
          "at all, reason k below; not tested: no test of this run covered the cell; skipped: every test skipped")
LINKS_PER_CELL = 5  # failing tests linked from one cell; the rest are in the output directory


def not_applicable(client: str, flow: str) -> str | None:
    """Why `client` cannot do `flow` at all (NOT_APPLICABLE; a Java cell without Spark tests: "not via Spark")."""
    if client == JAVA:
        return NOT_APPLICABLE.get((JAVA, flow), "not via Spark")
    return NOT_APPLICABLE.get((client, flow))


@dataclasses.dataclass
class CellView:
    """What one cell shows, in either format: kind is pass, fail, skip, na, gap (not tested) or none (blank)."""
    kind: str
    text: str
    cell: Cell | None = None
    reason: str = ""  # n/a: why
    note: int = 0  # n/a: the number of its reason; fail: the number of the cell in the failures list


class _Layout:
    """The matrix as both renderings show it: rows, columns and every cell's view, the n/a reasons numbered in
    their first appearance's order (each reason once) and the failing cells numbered likewise."""

    def __init__(self, matrix: Matrix, versions: dict[str, str]):
        self.versions = versions
        self.groups, self.flows, self.cells = matrix.groups(), matrix.flows(), matrix.cells
        self.reasons: dict[str, int] = {}
        self.failing: list[tuple[str, str, Cell]] = []
        self.views = {(client, flow): self._view(client, flow)
                      for _, rows in self.groups for client in rows for flow in self.flows}

    def _view(self, client: str, flow: str) -> CellView:
        cell = self.cells.get((client, flow))
        if cell is not None and cell.failed:
            self.failing.append((client, flow, cell))
            return CellView("fail", cell.summary(), cell, note=len(self.failing))
        if cell is not None:
            return CellView("pass", f"{cell.passed}/{cell.runs}", cell) if cell.passed else \
                CellView("skip", "skipped", cell)
        reason = not_applicable(client, flow)
        if reason:
            return CellView("na", "n/a", reason=reason, note=self.reasons.setdefault(reason, len(self.reasons) + 1))
        return CellView("gap", NO_TEST) if client in MATRIX_CLIENTS else CellView("none", "")

    def row_header(self, client: str) -> tuple[str, str]:
        return client, self.versions.get(client, "")


def _header_line(matrix: Matrix) -> str:
    passed, failed, skipped = matrix.totals()
    return (f"compatbroker {broker_version()}, Python {platform.python_version()}, run "
            f"{matrix.started:%Y-%m-%d %H:%M} UTC: {passed} passed, {failed} failed, {skipped} skipped")


def _flow_labels(flows: list[str]) -> str:
    """The Markdown legend of the short column headers that differ from their flow's name."""
    return ", ".join(f"{FLOW_LABELS[f]} = {f}" for f in flows if FLOW_LABELS.get(f, f) != f)


def render_markdown(matrix: Matrix, versions: dict[str, str]) -> str:
    layout = _Layout(matrix, versions)
    flows = layout.flows
    lines = ["# Compatibility matrix", "", _header_line(matrix), "",
             "| client | " + " | ".join(FLOW_LABELS.get(f, f) for f in flows) + " |",
             "| --- | " + " | ".join("---" for _ in flows) + " |"]
    for family, rows in layout.groups:
        lines.append(f"| **{_md_escape(family)}** |" + " |" * len(flows))
        for client in rows:
            name, version = layout.row_header(client)
            lines.append(f"| {_md_escape(f'{name} {version}'.strip())} | "
                         + " | ".join(_md_cell(layout.views[client, flow]) for flow in flows) + " |")
    lines += ["", f"Cells: {LEGEND}."]
    labels = _flow_labels(flows)
    if labels:
        lines += ["", f"Columns: {labels}."]
    if layout.reasons:
        lines += ["", "Not applicable:", ""] + [f"- ({number}) {_md_escape(reason)}"
                                                for reason, number in layout.reasons.items()]
    if layout.failing:
        lines += ["", f"Failing cells (each failing test's full output is in {OUTPUT_DIR}/ beside this file):", ""]
        for number, (client, flow, cell) in enumerate(layout.failing, start=1):
            lines += _md_failure(number, client, flow, cell)
    gaps = matrix.gaps()
    if gaps:
        lines += ["", f"Client cells {NO_TEST} in this run: " + ", ".join(f"{c} / {f}" for c, f in gaps)]
    return "\n".join(lines) + "\n"


def _md_cell(view: CellView) -> str:
    if view.kind == "fail":
        return f"**FAIL** {view.cell.passed}/{view.cell.runs} (F{view.note})"
    if view.kind == "na":
        return f"n/a ({view.note})"
    return view.text


def _md_failure(number: int, client: str, flow: str, cell: Cell) -> list[str]:
    lines = [f"- F{number} {_md_escape(client)} / {_md_escape(flow)}: {cell.failed} of {cell.runs} failed; first: "
             f"`{_md_escape(cell.failures[0][1])}`"]
    lines += [f"  - `{_md_escape(test)}`: {output_path(test)}" for test, _ in cell.failures[:LINKS_PER_CELL]]
    if cell.failed > LINKS_PER_CELL:
        lines.append(f"  - and {cell.failed - LINKS_PER_CELL} more in {OUTPUT_DIR}/")
    return lines


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")


def render_html(matrix: Matrix, versions: dict[str, str]) -> str:
    layout = _Layout(matrix, versions)
    flows = layout.flows
    head = "".join(f'<th class="flow"><span>{html.escape(f)}</span></th>' for f in flows)
    rows = []
    for family, clients in layout.groups:
        rows.append(f'<tr class="family"><th colspan="{len(flows) + 1}">{html.escape(family)}</th></tr>')
        for client in clients:
            name, version = layout.row_header(client)
            cells = "".join(_html_cell(layout.views[client, flow]) for flow in flows)
            rows.append(f'<tr><th class="client">{html.escape(name)}<br><small>{html.escape(version)}</small></th>'
                        f"{cells}</tr>")
    notes = "".join(f'<li value="{number}">{html.escape(reason)}</li>' for reason, number in layout.reasons.items())
    failures = "".join(_html_failure(number, client, flow, cell)
                       for number, (client, flow, cell) in enumerate(layout.failing, start=1))
    gaps = matrix.gaps()
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>compatbroker compatibility matrix</title>
<style>
body {{ font-family: sans-serif; margin: 2em; }}
table {{ border-collapse: collapse; }}
th, td {{ border: 1px solid #bbb; padding: 0.3em 0.5em; vertical-align: top; text-align: left; font-size: 90%; }}
thead th {{ position: sticky; top: 0; background: #fff; z-index: 1; }}
th.flow {{ vertical-align: bottom; }}
th.flow span {{ writing-mode: vertical-rl; transform: rotate(180deg); white-space: nowrap; }}
th.client {{ position: sticky; left: 0; background: #fff; white-space: nowrap; z-index: 1; }}
th.client small {{ display: block; white-space: normal; max-width: 16em; font-weight: normal; }}
tr.family th {{ background: #e8eef7; font-size: 100%; padding-top: 0.6em; }}
td {{ white-space: nowrap; }}
td.pass {{ background: #dff0d8; }} td.skip {{ background: #eee; }}
td.gap {{ background: #fcf8e3; white-space: normal; font-size: 80%; color: #765; }}
td.fail {{ background: #f2dede; white-space: normal; min-width: 9em; max-width: 15em; }}
td.na {{ color: #666; }}
small {{ color: #444; }}
ul.failures {{ list-style: none; padding-left: 0.5em; }}
td.fail small {{ overflow-wrap: anywhere; }}
</style></head><body>
<h1>Compatibility matrix</h1>
<p>{html.escape(_header_line(matrix))}</p>
<p><small>Cells: {html.escape(LEGEND)}. Hover a cell for its tests' outcome or reason; a failing cell links to its
tests' full output.</small></p>
<table><thead><tr><th>client</th>{head}</tr></thead>
<tbody>
{chr(10).join(rows)}
</tbody></table>
{f'<h2>Not applicable</h2><ol>{notes}</ol>' if notes else ''}
{f'<h2>Failing cells</h2><ul class="failures">{failures}</ul>' if failures else ''}
{f'<h2>Client cells {NO_TEST} in this run</h2><p>' + html.escape(', '.join(f'{c} / {f}' for c, f in gaps))
 + '</p>' if gaps else ''}
</body></html>
"""


def _html_cell(view: CellView) -> str:
    if view.kind == "fail":
        cell = view.cell
        test_id, message = cell.failures[0]
        more = " ".join(f'<a href="{html.escape(output_path(test))}" title="{html.escape(test)}">{index}</a>'
                        for index, (test, _) in enumerate(cell.failures[1:LINKS_PER_CELL], start=2))
        return (f'<td class="fail" title="{html.escape(test_id)}"><a href="{html.escape(output_path(test_id))}">'
                f"{html.escape(view.text)}</a> <small>F{view.note}</small><br><small>{html.escape(message[:100])}"
                f"</small>{f'<br><small>also {more}</small>' if more else ''}</td>")
    if view.kind == "na":
        return f'<td class="na" title="{html.escape(view.reason)}">n/a <sup>{view.note}</sup></td>'
    if view.kind in ("pass", "skip"):
        cell = view.cell
        title = f"{cell.passed} passed, {cell.skipped} skipped"
        return f'<td class="{view.kind}" title="{title}">{html.escape(view.text)}</td>'
    return f'<td class="{view.kind}">{html.escape(view.text)}</td>'


def _html_failure(number: int, client: str, flow: str, cell: Cell) -> str:
    links = "".join(f'<li><a href="{html.escape(output_path(test))}">{html.escape(test)}</a>: '
                    f"{html.escape(message)}</li>" for test, message in cell.failures)
    return (f"<li>F{number} {html.escape(client)} / {html.escape(flow)}: {cell.failed} of {cell.runs} failed"
            f"<ul>{links}</ul></li>")


def write_reports(matrix: Matrix, directory: Path = REPORT_DIR, versions: dict[str, str] | None = None
                  ) -> tuple[Path, Path]:
    """Writes compat-matrix.md, compat-matrix.html and the failing tests' outputs (OUTPUT_DIR, emptied first: it
    holds this run's failures only) into `directory`; returns the Markdown's and the page's paths."""
    versions = client_versions(matrix.clients()) if versions is None else versions
    directory.mkdir(parents=True, exist_ok=True)
    outputs = directory / OUTPUT_DIR
    shutil.rmtree(outputs, ignore_errors=True)
    for test_id, (_, _, outcome, message) in matrix.results.items():
        if outcome != "failed":
            continue
        text = matrix.outputs.get(test_id) or f"{test_id}: {message}\n(no report text was recorded)\n"
        path = directory / output_path(test_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    markdown, page = directory / "compat-matrix.md", directory / "compat-matrix.html"
    markdown.write_text(render_markdown(matrix, versions), encoding="utf-8")
    page.write_text(render_html(matrix, versions), encoding="utf-8")
    return markdown, page
