"""The compatibility matrix: which client passes which flow, read from the compat tests themselves.

Every test under tests/compat/ is one run of a cell (client x flow); parametrized runs of one test and the tests of
one module add up in their cell. How a test's cell is found, so that new tests land in the matrix by themselves:

- client: the test's `client` parameter (the `client` fixture of conftest.py, one run per name in
  clients.CLIENT_NAMES) or a `<something>_client` parameter holding a client's name (test_groups.py's
  `group_client`); else `@pytest.mark.matrix(client="sarama")` on the test or as the module's `pytestmark`;
  else a client's name written in the test's name (`test_confluent_kafka_idempotent_...` -> confluent-kafka);
  else the "any client" column (tests that speak the protocol themselves or check the broker alone).
- flow: `@pytest.mark.matrix(flow="...")` when given; else the module's name minus `test_` (test_produce.py ->
  produce). Name modules after the flow they test.

A client's cell without a test is never left blank: it shows "n/a" and the reason when NOT_APPLICABLE says the client
cannot do the flow at all, and "not tested" otherwise (in a run of the whole suite: a gap to fill). Cells of the "any
client" column hold the tests that speak the protocol themselves; there a blank means none were needed.

The Java client runs in the matrix through Spark: tests under spark_tests/ fill the JAVA column (skipped, with the
reason, where the Spark connector jars are absent), their flow taken from SPARK_FLOWS by module unless a test is
marked; spark_tests/test_connector.py (jar discovery) is no client test and stays out.

matrix_report.py collects the outcomes and writes build/compat-matrix.md and build/compat-matrix.html at the end of
the run, with each client's installed version in the header and the first line of a cell's first failure.
"""
from __future__ import annotations

import dataclasses
import datetime
import html
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

from .clients import ALL_CLIENT_NAMES, NODE_DIR

MATRIX_CLIENTS = ALL_CLIENT_NAMES
JAVA = "java (Spark)"
ANY_CLIENT = "any client"
# spark_tests modules -> the flow they exercise through the Java client inside Spark (None: not a client test).
SPARK_FLOWS = {"batch_read": "consume", "streaming": "consume (streaming)", "write": "produce",
               "example_pipeline": "pipeline (Spark)", "java_client": "consume", "connector": None}
NO_TEST = "not tested"
# (client, flow) -> why that client cannot do the flow at all; the report shows "n/a: <reason>" in the cell. A flow
# that exists only inside the broker is listed for every client. Only for whole cells: a client that can do part of
# a flow is tested on that part, and its test module says what it leaves out. A JAVA entry words the reason of a Java
# cell without Spark tests (else "not via Spark").
NOT_APPLICABLE: dict[tuple[str, str], str] = {
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
MARKER = "matrix"
MARKER_HELP = "matrix(client=None, flow=None): the compat-matrix cell of a test (see tests/compat/matrix.py)"
REPORT_DIR = Path(__file__).resolve().parents[2] / "build"
# A client's name as it appears in a test's name: confluent-kafka -> confluent_kafka.
_NAME_PATTERNS = [(name, re.compile(rf"(^|_){re.escape(name.replace('-', '_'))}(_|$)")) for name in MATRIX_CLIENTS]


def cell_of(item) -> tuple[str, str] | None:
    """(client, flow) of a collected compat or Spark test; None for any other test."""
    marked: dict = {}
    for marker in item.iter_markers(MARKER):  # the test's own marks first, then its class's and module's
        for name, value in marker.kwargs.items():
            marked.setdefault(name, value)
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


# --- outcomes -----------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Cell:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    first_failure: str = ""  # "<test id>: <first line>"

    def add(self, outcome: str, test_id: str, message: str) -> None:
        if outcome == "passed":
            self.passed += 1
        elif outcome == "skipped":
            self.skipped += 1
        else:
            self.failed += 1
            if not self.first_failure:
                self.first_failure = f"{test_id}: {message}"

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
    """Each test's outcome by test id (a teardown failure overrides a passed call); cells are computed from them."""
    results: dict[str, tuple[str, str, str, str]] = dataclasses.field(default_factory=dict)
    started: datetime.datetime = dataclasses.field(
        default_factory=lambda: datetime.datetime.now(datetime.timezone.utc))

    def add(self, client: str, flow: str, outcome: str, test_id: str, message: str = "") -> None:
        earlier = self.results.get(test_id)
        if earlier is None or (outcome == "failed" and earlier[2] != "failed"):
            self.results[test_id] = (client, flow, outcome, message)

    @property
    def cells(self) -> dict[tuple[str, str], Cell]:
        cells: dict[tuple[str, str], Cell] = {}
        for test_id, (client, flow, outcome, message) in self.results.items():
            cells.setdefault((client, flow), Cell()).add(outcome, test_id, message)
        return cells

    def clients(self) -> list[str]:
        seen = {client for client, _ in self.cells}
        known = (*MATRIX_CLIENTS, JAVA, ANY_CLIENT)
        return [c for c in known if c in seen] + sorted(seen - set(known))

    def flows(self) -> list[str]:
        return sorted({flow for _, flow in self.cells})

    def totals(self) -> tuple[int, int, int]:
        cells = list(self.cells.values())
        return sum(c.passed for c in cells), sum(c.failed for c in cells), sum(c.skipped for c in cells)

    def failures(self) -> list[tuple[str, str, str]]:
        return [(client, flow, cell.first_failure) for (client, flow), cell in sorted(self.cells.items())
                if cell.failed]

    def gaps(self) -> list[tuple[str, str]]:
        """(client, flow) of the client cells that no test of this run covered and NOT_APPLICABLE does not excuse."""
        computed = self.cells
        return [(client, flow) for flow in self.flows() for client in self.clients()
                if client in MATRIX_CLIENTS and (client, flow) not in computed
                and (client, flow) not in NOT_APPLICABLE]


# --- client versions ----------------------------------------------------------------------------------------------

def client_versions() -> dict[str, str]:
    """Each matrix client's installed version, or 'not installed'."""
    return {name: _version_of(name) or "not installed" for name in (*MATRIX_CLIENTS, JAVA, ANY_CLIENT)}


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
    return None


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

def _header_line(matrix: Matrix) -> str:
    passed, failed, skipped = matrix.totals()
    return (f"compatbroker {broker_version()}, Python {platform.python_version()}, run "
            f"{matrix.started:%Y-%m-%d %H:%M} UTC: {passed} passed, {failed} failed, {skipped} skipped")


def render_markdown(matrix: Matrix, versions: dict[str, str]) -> str:
    clients, computed = matrix.clients(), matrix.cells
    lines = ["# Compatibility matrix", "", _header_line(matrix), "",
             "| flow | " + " | ".join(f"{c} {versions.get(c, '')}".strip() for c in clients) + " |",
             "| --- | " + " | ".join("---" for _ in clients) + " |"]
    for flow in matrix.flows():
        lines.append(f"| {flow} | " + " | ".join(_md_cell(computed.get((client, flow)), client, flow)
                                                 for client in clients) + " |")
    failures = matrix.failures()
    if failures:
        lines += ["", "First failure of each failing cell:", ""]
        lines += [f"- {client} / {flow}: `{_md_escape(text)}`" for client, flow, text in failures]
    gaps = matrix.gaps()
    if gaps:
        lines += ["", f"Client cells {NO_TEST} in this run: " + ", ".join(f"{c} / {f}" for c, f in gaps)]
    return "\n".join(lines) + "\n"


def untested(client: str, flow: str) -> tuple[str, str]:
    """(kind, text) of a cell without runs: ("na", "n/a: <reason>"), ("gap", NO_TEST) for a client's cell that
    NOT_APPLICABLE does not excuse, or ("none", "") in the raw protocol column."""
    if client == JAVA:
        return "na", f"n/a: {NOT_APPLICABLE.get((JAVA, flow), 'not via Spark')}"
    if client not in MATRIX_CLIENTS:
        return "none", ""
    reason = NOT_APPLICABLE.get((client, flow))
    return ("na", f"n/a: {reason}") if reason else ("gap", NO_TEST)


def _md_cell(cell: Cell | None, client: str, flow: str) -> str:
    if cell is None:
        return _md_escape(untested(client, flow)[1])
    if cell.failed:
        return f"{cell.summary()}: {_md_escape(cell.first_failure.split(': ', 1)[-1])[:100]}"
    return cell.summary()


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")


def render_html(matrix: Matrix, versions: dict[str, str]) -> str:
    clients, computed = matrix.clients(), matrix.cells
    head = "".join(f"<th>{html.escape(c)}<br><small>{html.escape(versions.get(c, ''))}</small></th>"
                   for c in clients)
    rows = []
    for flow in matrix.flows():
        cells = []
        for client in clients:
            cell = computed.get((client, flow))
            if cell is None:
                kind, text = untested(client, flow)
                cells.append(f'<td class="{kind}">{html.escape(text)}</td>')
                continue
            kind = "fail" if cell.failed else "pass" if cell.passed else "skip"
            detail = (f"<br><small>{html.escape(cell.first_failure)}</small>" if cell.failed else "")
            cells.append(f'<td class="{kind}">{html.escape(cell.summary())}{detail}</td>')
        rows.append(f"<tr><th>{html.escape(flow)}</th>{''.join(cells)}</tr>")
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>compatbroker compatibility matrix</title>
<style>
body {{ font-family: sans-serif; margin: 2em; }}
table {{ border-collapse: collapse; }}
th, td {{ border: 1px solid #bbb; padding: 0.4em 0.6em; vertical-align: top; text-align: left; }}
td.pass {{ background: #dff0d8; }} td.fail {{ background: #f2dede; max-width: 28em; }} td.skip {{ background: #eee; }}
td.na {{ color: #555; max-width: 20em; }} td.gap {{ background: #fcf8e3; }}
small {{ color: #444; }}
</style></head><body>
<h1>Compatibility matrix</h1>
<p>{html.escape(_header_line(matrix))}</p>
<table><thead><tr><th>flow</th>{head}</tr></thead>
<tbody>
{chr(10).join(rows)}
</tbody></table>
</body></html>
"""


def write_reports(matrix: Matrix, directory: Path = REPORT_DIR, versions: dict[str, str] | None = None
                  ) -> Iterable[Path]:
    versions = client_versions() if versions is None else versions
    directory.mkdir(parents=True, exist_ok=True)
    markdown, page = directory / "compat-matrix.md", directory / "compat-matrix.html"
    markdown.write_text(render_markdown(matrix, versions), encoding="utf-8")
    page.write_text(render_html(matrix, versions), encoding="utf-8")
    return markdown, page
