"""What the node-program rows share (kafkajs, @platformatic/kafka, node-rdkafka, @confluentinc/kafka-javascript):
one node process per call, given one JSON command (on stdin, or as its argument), answering on stdout with a last
line "RESULT <json>" or "ERROR <json>" (the client's error); keys, values and header values travel in base64.

NodeProgramClient runs such a program and holds the calls whose JSON all these programs share; each row's adapter
sets its `script` and error class and overrides what its client does differently. `--member` runs the program as a
group member of member.py's line protocol.
"""
from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path

from ..records import EARLIEST, LATEST, AtOffset, AtTimestamp, Consumed, Record
from .base import DEFAULT_TIMEOUT_S, ClientAdapter, ClientError, ClusterView, TxnStep


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def record_json(record: Record) -> dict:
    return {"key": b64(record.key), "value": b64(record.value), "partition": record.partition,
            "headers": [[name, b64(value)] for name, value in record.headers], "timestamp": record.timestamp}


def consumed(r: dict) -> Consumed:
    return Consumed(r["partition"], r["offset"], unb64(r["key"]), unb64(r["value"]),
                    tuple((name, unb64(value)) for name, value in r["headers"]), r["timestamp"])


def start_json(start) -> dict:
    if start == EARLIEST:
        return {"type": "earliest"}
    if start == LATEST:
        return {"type": "latest"}
    if isinstance(start, AtOffset):
        return {"type": "offset", "value": start.offset}
    if isinstance(start, AtTimestamp):
        return {"type": "timestamp", "value": start.timestamp}
    raise ValueError(f"unknown start {start!r}")


def step_json(step: TxnStep) -> dict:
    return {"producer": step.producer, "op": step.op, "transactional_id": step.transactional_id,
            "timeout_ms": step.timeout_ms, "records": [record_json(r) for r in step.records]}


class ProgramError(ClientError):
    """An error the program reported: `detail` is its JSON (each program's adapter documents the fields)."""

    def __init__(self, text: str, detail: dict):
        super().__init__(text)
        self.detail = detail


def run_program(command: list[str], spec: dict, *, label: str, timeout_s: float, env: dict[str, str],
                error: type[ProgramError] = ProgramError, stdin: bool = True) -> dict:
    """Runs `command` with `spec` (on stdin, or appended as its last argument) and returns its RESULT; raises
    `error` for its ERROR line, ClientError when it answers neither within `timeout_s`."""
    args, data = (command, json.dumps(spec).encode()) if stdin else (command + [json.dumps(spec)], None)
    try:
        done = subprocess.run(args, input=data, capture_output=True, timeout=timeout_s, check=False,
                              env=dict(os.environ, **env))
    except subprocess.TimeoutExpired as exc:
        raise ClientError(f"{label} {spec['op']}: no answer within {timeout_s} s; log: "
                          f"{(exc.stderr or b'').decode(errors='replace')[-1500:]}") from None
    log = done.stderr.decode(errors="replace")[-3000:]
    for line in reversed(done.stdout.decode(errors="replace").splitlines()):
        if line.startswith("RESULT ") and done.returncode == 0:
            return json.loads(line[len("RESULT "):])
        if line.startswith("ERROR "):
            raise error(f"{label} {spec['op']}: {line[len('ERROR '):]}\nlog:\n{log}", json.loads(line[len("ERROR "):]))
    raise ClientError(f"{label} {spec['op']}: exit {done.returncode} without a result\n{log}")


class NodeProgramClient(ClientAdapter):
    """A row whose calls each run `script` once; the ops below send the JSON every such program takes."""

    script: Path
    error: type[ProgramError] = ProgramError
    label: str = ""  # the name its errors start with (the row's name when empty)
    call_slack_s = 10  # on top of a call's own bound: node's startup and the client's close
    metadata_timeout_s = 30

    def __init__(self, node: str, node_modules: Path):
        self.node = node
        self.node_modules = Path(node_modules)

    def _env(self) -> dict[str, str]:
        return {"NODE_PATH": str(self.node_modules)}

    def _call(self, spec: dict, timeout_s: float) -> dict:
        return run_program([self.node, str(self.script)], spec, label=self.label or self.name,
                           timeout_s=timeout_s + self.call_slack_s, env=self._env(), error=self.error)

    def member_command(self, spec):
        return [self.node, str(self.script), "--member", json.dumps(spec)], self._env()

    def produce(self, bootstrap, topic, records, *, acks=-1, compression=None, timeout_s=DEFAULT_TIMEOUT_S):
        self._call({"op": "produce", "brokers": bootstrap, "topic": topic, "acks": acks,
                    "codec": compression or "none", "records": [record_json(r) for r in records]}, timeout_s)
        # these clients report one base offset per partition, not one offset per record

    def produce_concurrently(self, bootstrap, topic, batches):
        # One node process holding one producer per batch: 20 node processes would only measure node's startup.
        self._call({"op": "produce_many", "brokers": bootstrap, "topic": topic, "acks": -1, "codec": "none",
                    "batches": [[record_json(r) for r in batch] for batch in batches]}, 60)

    def produce_idempotent(self, bootstrap, topic, values, *, batch_records, timeout_s):
        self._call({"op": "produce_idempotent", "brokers": bootstrap, "topic": topic, "chunk": batch_records,
                    "records": [record_json(Record(None, value, partition=0)) for value in values]}, timeout_s)

    def consume(self, bootstrap, topic, count, *, partitions=(0,), start=EARLIEST, timeout_s=DEFAULT_TIMEOUT_S,
                fetch_wait_ms=None):
        result = self._call({"op": "consume", "brokers": bootstrap, "topic": topic, "count": count,
                             "partitions": list(partitions), "start": start_json(start),
                             "timeout_ms": int(timeout_s * 1000), "fetch_wait_ms": fetch_wait_ms}, timeout_s)
        return [consumed(r) for r in result["records"]]

    def list_offsets(self, bootstrap, topic, partition, timestamp):
        result = self._call({"op": "list_offsets", "brokers": bootstrap, "topic": topic, "partition": partition,
                             "timestamp": timestamp}, 30)
        at = result["at"]
        return result["earliest"], result["latest"], None if at is None or at < 0 else at

    def metadata(self, bootstrap, topics=None, *, auto_create=False):
        result = self._call({"op": "metadata", "brokers": bootstrap, "auto_create": auto_create,
                             "topics": None if topics is None else list(topics)}, self.metadata_timeout_s)
        return ClusterView(frozenset(tuple(b) for b in result["brokers"]),
                           {name: {int(p): leader for p, leader in partitions.items()}
                            for name, partitions in result["topics"].items()})

    def list_topics(self, bootstrap):
        return set(self._call({"op": "list_topics", "brokers": bootstrap}, 30)["topics"])

    def group_consume(self, bootstrap, topic, group, count, timeout_s=DEFAULT_TIMEOUT_S):
        result = self._call({"op": "group_consume", "brokers": bootstrap, "topic": topic, "group": group,
                             "count": count, "timeout_ms": int(timeout_s * 1000)}, timeout_s)
        return [consumed(r) for r in result["records"]]

    def committed(self, bootstrap, group, topic, partitions):
        offsets = self._call({"op": "committed", "brokers": bootstrap, "group": group, "topic": topic}, 30)["offsets"]
        return {p: offsets[str(p)] if offsets.get(str(p), -1) >= 0 else None for p in partitions}

    def run_transactional(self, bootstrap, topic, steps, *, timeout_s=DEFAULT_TIMEOUT_S):
        # One node process runs the whole script; after an "abandon" it exits without closing its connections.
        return self._call({"op": "txn_script", "brokers": bootstrap, "topic": topic,
                           "steps": [step_json(step) for step in steps]}, timeout_s)["outcomes"]

    def read_to_end(self, bootstrap, topic, until, *, read_committed, timeout_s=DEFAULT_TIMEOUT_S):
        result = self._call({"op": "read_to_end", "brokers": bootstrap, "topic": topic, "until": until,
                             "read_uncommitted": not read_committed, "timeout_ms": int(timeout_s * 1000)}, timeout_s)
        return [consumed(r) for r in result["records"]], {int(p): offset for p, offset in result["positions"].items()}
