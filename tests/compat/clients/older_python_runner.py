"""One adapter call in an older client's virtual environment, for older_python.py.

    <venv python> -m tests.compat.clients.older_python_runner   (the request on stdin)

The request is one JSON object: {"client": the current row whose adapter runs here ("kafka-python", "aiokafka",
"confluent-kafka"), "method": an adapter method or "attributes", "args": [...], "kwargs": {...}, "security": the
adapter's security settings or null}. The answer is one line on stdout, RESULT_PREFIX + {"result": ...} or
{"error": {"type": ..., "message": ...}}; libraries may write other lines, which are not ours.

Values cross the pipe in a tagged JSON form (encode/decode): bytes, tuples, sets, dicts with any keys, and the
dataclasses of records.py and base.py, so that both sides see the same Python values.
"""
from __future__ import annotations

import base64
import dataclasses
import json
import os
import sys

from .. import records
from . import base

RESULT_PREFIX = "OLDER-PYTHON-RESULT "
# The adapter attributes the shared tests read (base.ClientAdapter), reported by "attributes".
ATTRIBUTES = ("expressive", "sends_null_header", "idempotent", "can_refuse_auto_creation", "reads_committed")
DATACLASSES = {cls.__name__: cls for cls in (
    records.Record, records.Consumed, records.AtOffset, records.AtTimestamp, base.TxnStep, base.ClusterView,
    base.GroupListing, base.MemberInfo, base.GroupInfo, base.ConnectFailure)}


def encode(value):
    """`value` as JSON-able data that decode() turns back into an equal value."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, bytes):
        return {"bytes": base64.b64encode(value).decode("ascii")}
    if isinstance(value, (list, range)):
        return [encode(v) for v in value]
    if isinstance(value, tuple):
        return {"tuple": [encode(v) for v in value]}
    if isinstance(value, (set, frozenset)):
        return {type(value).__name__: [encode(v) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[encode(k), encode(v)] for k, v in value.items()]}
    if dataclasses.is_dataclass(value) and type(value).__name__ in DATACLASSES:
        return {"dataclass": type(value).__name__,
                "fields": {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    raise TypeError(f"cannot send {type(value).__name__} to or from an older client's process: {value!r}")


def decode(data):
    if isinstance(data, list):
        return [decode(v) for v in data]
    if not isinstance(data, dict):
        return data
    (tag, content), *_ = data.items()
    if tag == "bytes":
        return base64.b64decode(content)
    if tag == "dataclass":
        return DATACLASSES[content](**{name: decode(v) for name, v in data["fields"].items()})
    if tag == "dict":
        return {decode(k): decode(v) for k, v in content}
    return {"tuple": tuple, "set": set, "frozenset": frozenset}[tag](decode(v) for v in content)


def call(request: dict):
    from . import load
    adapter = load(request["client"])
    if request.get("security"):
        adapter = adapter.secured(request["security"])
    if request["method"] == "attributes":
        return {name: getattr(adapter, name) for name in ATTRIBUTES}
    return getattr(adapter, request["method"])(*decode(request["args"]), **decode(request["kwargs"]))


def main() -> None:
    try:
        answer = {"result": encode(call(json.loads(sys.stdin.read())))}
    except Exception as exc:  # noqa: BLE001 - handed to the test's process, which raises it there
        answer = {"error": {"type": type(exc).__name__, "message": str(exc) or repr(exc)}}
    sys.stdout.write("\n" + RESULT_PREFIX + json.dumps(answer) + "\n")
    sys.stdout.flush()
    sys.stderr.flush()
    # Without the interpreter's shutdown: exit handlers would close the producers a transactional script
    # abandoned (ClientAdapter.run_transactional), which must stay silent until the broker times them out.
    os._exit(0)


if __name__ == "__main__":
    main()
