"""kafkajs 2.2.4 on node, driven through kafkajs_client.js (one node process per call).

kafkajs has no assign(): its consumers always join a consumer group, so consuming needs the group coordinator APIs,
which it sends at these versions: FindCoordinator v2, JoinGroup v5, SyncGroup v3, Heartbeat v3, OffsetFetch v4 and
LeaveGroup v3 (kafkajs' highest versions; autoCommit is off, so no OffsetCommit). Without FindCoordinator in
ApiVersions kafkajs sends no group request at all and fails with KafkaJSGroupCoordinatorNotFound. Producing and
ListOffsets (through its admin client) need only Metadata, Produce and ListOffsets.

`secured(config)` (base.py) gives an adapter whose every call connects over TLS and/or with SASL: `config` is the
"kafkajs" client config of compatbroker.toolkit.security, whose `ssl` and `sasl` options the script takes (each call
still names its bootstrap). Failures are KafkajsError, carrying kafkajs' error and the chain of its causes.
"""
from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path

from ..records import EARLIEST, LATEST, AtOffset, AtTimestamp, Consumed, Record
from .base import DEFAULT_TIMEOUT_S, ClientAdapter, ClientError, ClusterView, TxnStep

SCRIPT = Path(__file__).with_name("kafkajs_client.js")


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def record_json(record) -> dict:
    return {"key": b64(record.key), "value": b64(record.value), "partition": record.partition,
            "headers": [[name, b64(value)] for name, value in record.headers], "timestamp": record.timestamp}


def error_chain(detail: dict | None) -> list[dict]:
    """An error the script reported ({"name", "message", "type", "code", "cause"}), then each cause in turn."""
    found = []
    while detail:
        found.append(detail)
        detail = detail.get("cause")
    return found


class KafkajsError(ClientError):
    """kafkajs' error: `detail` is {"name", "message", "type", "code", "retriable", "cause": {...}} as the script
    reported it (`cause`: the error a retrier gave up on, when kafkajs kept it)."""

    def __init__(self, text: str, detail: dict):
        super().__init__(text)
        self.detail = detail

    def chain(self) -> list[dict]:
        """The error, then each cause in turn."""
        return error_chain(self.detail)

    def types(self) -> set[str]:
        """The Kafka error names (kafkajs' `type`) anywhere in the chain, e.g. {"TOPIC_AUTHORIZATION_FAILED"}."""
        return {detail["type"] for detail in self.chain() if detail.get("type")}


class KafkajsClient(ClientAdapter):
    name = "kafkajs"

    def __init__(self, node: str, node_modules: Path):
        self.node = node
        self.node_modules = Path(node_modules)

    def _call(self, spec: dict, timeout_s: float):
        if self.security is not None:
            spec = spec | {"security": {key: self.security[key] for key in ("ssl", "sasl") if key in self.security}}
        env = dict(os.environ, NODE_PATH=str(self.node_modules))
        try:
            done = subprocess.run([self.node, str(SCRIPT)], input=json.dumps(spec).encode(), capture_output=True,
                                  timeout=timeout_s + 10, env=env, check=False)
        except subprocess.TimeoutExpired as exc:
            raise ClientError(f"kafkajs {spec['op']}: no answer within {timeout_s + 10} s; log: "
                              f"{(exc.stderr or b'').decode(errors='replace')[-1500:]}") from None
        lines = done.stdout.decode(errors="replace").splitlines()
        log = done.stderr.decode(errors="replace")[-2000:]
        for line in reversed(lines):
            if line.startswith("RESULT ") and done.returncode == 0:
                return json.loads(line[len("RESULT "):])
            if line.startswith("ERROR "):
                raise KafkajsError(f"kafkajs {spec['op']}: {line[len('ERROR '):]}\nkafkajs log:\n{log}",
                                   json.loads(line[len("ERROR "):]))
        raise ClientError(f"kafkajs {spec['op']}: exit {done.returncode} without a result\n{log}")

    def member_command(self, spec):
        return [self.node, str(SCRIPT), "--member", json.dumps(spec)], {"NODE_PATH": str(self.node_modules)}

    def produce(self, bootstrap, topic, records, *, acks=-1, compression=None, timeout_s=DEFAULT_TIMEOUT_S):
        self._call({"op": "produce", "brokers": bootstrap, "topic": topic, "acks": acks,
                    "codec": compression or "none", "records": [record_json(r) for r in records]}, timeout_s)
        # kafkajs reports one base offset per partition, not one offset per record

    def produce_concurrently(self, bootstrap, topic, batches):
        # One node process holding one kafkajs client per batch: 20 node processes would only measure node startup.
        self._call({"op": "produce_many", "brokers": bootstrap, "topic": topic, "acks": -1, "codec": "none",
                    "batches": [[record_json(r) for r in batch] for batch in batches]}, 60)

    def consume(self, bootstrap, topic, count, *, partitions=(0,), start=EARLIEST, timeout_s=DEFAULT_TIMEOUT_S,
                fetch_wait_ms=None):
        result = self._call({"op": "consume", "brokers": bootstrap, "topic": topic, "count": count,
                             "partitions": list(partitions), "start": _start_json(start),
                             "timeout_ms": int(timeout_s * 1000), "fetch_wait_ms": fetch_wait_ms}, timeout_s)
        return [Consumed(r["partition"], r["offset"], unb64(r["key"]), unb64(r["value"]),
                         tuple((name, unb64(value)) for name, value in r["headers"]), r["timestamp"])
                for r in result["records"]]

    def metadata(self, bootstrap, topics=None, *, auto_create=False):
        result = self._call({"op": "metadata", "brokers": bootstrap, "auto_create": auto_create,
                             "topics": None if topics is None else list(topics)}, 30)
        return ClusterView(frozenset(tuple(b) for b in result["brokers"]),
                           {name: {int(p): leader for p, leader in partitions.items()}
                            for name, partitions in result["topics"].items()})

    def list_topics(self, bootstrap):
        return set(self._call({"op": "list_topics", "brokers": bootstrap}, 30)["topics"])

    def group_consume(self, bootstrap, topic, group, count, timeout_s=DEFAULT_TIMEOUT_S):
        result = self._call({"op": "group_consume", "brokers": bootstrap, "topic": topic, "group": group,
                             "count": count, "timeout_ms": int(timeout_s * 1000)}, timeout_s)
        return [Consumed(r["partition"], r["offset"], unb64(r["key"]), unb64(r["value"]), (), -1)
                for r in result["records"]]

    def committed(self, bootstrap, group, topic, partitions):
        offsets = self._call({"op": "committed", "brokers": bootstrap, "group": group, "topic": topic}, 30)["offsets"]
        return {p: offsets[str(p)] if offsets.get(str(p), -1) >= 0 else None for p in partitions}

    def produce_idempotent(self, bootstrap, topic, values, *, batch_records, timeout_s):
        self._call({"op": "produce_idempotent", "brokers": bootstrap, "topic": topic, "chunk": batch_records,
                    "records": [record_json(Record(None, value, partition=0)) for value in values]}, timeout_s)

    def list_offsets(self, bootstrap, topic, partition, timestamp):
        result = self._call({"op": "list_offsets", "brokers": bootstrap, "topic": topic, "partition": partition,
                             "timestamp": timestamp}, 30)
        at = result["at"]
        return result["earliest"], result["latest"], None if at is None or at < 0 else at


    def run_transactional(self, bootstrap, topic, steps, *, timeout_s=DEFAULT_TIMEOUT_S):
        # One node process runs the whole script; after an "abandon" it exits without closing its connections.
        result = self._call({"op": "txn_script", "brokers": bootstrap, "topic": topic,
                             "steps": [_step_json(step) for step in steps]}, timeout_s)
        return result["outcomes"]

    def read_to_end(self, bootstrap, topic, until, *, read_committed, timeout_s=DEFAULT_TIMEOUT_S):
        result = self._call({"op": "read_to_end", "brokers": bootstrap, "topic": topic, "until": until,
                             "read_uncommitted": not read_committed, "timeout_ms": int(timeout_s * 1000)}, timeout_s)
        records = [Consumed(r["partition"], r["offset"], unb64(r["key"]), unb64(r["value"]),
                            tuple((name, unb64(value)) for name, value in r["headers"]), r["timestamp"])
                   for r in result["records"]]
        return records, {int(p): offset for p, offset in result["positions"].items()}

    def acl_calls(self, bootstrap: str, *calls: dict, timeout_s: float = 30) -> list[dict]:
        """kafkajs' admin createAcls / describeAcls / deleteAcls in order ({"call": "create", "acl": [...]},
        {"call": "describe", "filter": {...}}, {"call": "delete", "filters": [...]}); each answer is {"result": ...}
        or {"error": detail}."""
        return self._call({"op": "acls", "brokers": bootstrap, "calls": list(calls)}, timeout_s)["results"]


def _step_json(step: TxnStep) -> dict:
    return {"producer": step.producer, "op": step.op, "transactional_id": step.transactional_id,
            "timeout_ms": step.timeout_ms, "records": [record_json(r) for r in step.records]}

def _start_json(start) -> dict:
    if start == EARLIEST:
        return {"type": "earliest"}
    if start == LATEST:
        return {"type": "latest"}
    if isinstance(start, AtOffset):
        return {"type": "offset", "value": start.offset}
    if isinstance(start, AtTimestamp):
        return {"type": "timestamp", "value": start.timestamp}
    raise ValueError(f"unknown start {start!r}")
