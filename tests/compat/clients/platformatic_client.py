"""@platformatic/kafka 1.35.0 on node, driven through platformatic_client.js (one node process per call).

@platformatic/kafka is a pure JavaScript client that speaks recent protocol versions only (Kafka 3.5 to 4.1: Produce
v7+, Fetch v12+ by topic id, Metadata v9+, JoinGroup v6+...). Why 1.35.0: it is the newest release that runs on the
node this machine has (Debian's 20.x); every 2.x release requires node >= 22.22. Its two own dependencies,
@platformatic/dynamic-buffer 0.3.1 and @platformatic/wasm-utils 0.2.1 (snappy and lz4 in WebAssembly), are pinned
beside it (tests/setup/platformatic.sh): they declare node >= 22.19 but run on 20.19+, and newer ones might not.
What 1.35.0 cannot do on node 20: zstd (it compresses with node:zlib's zstd, which node 20 lacks, and raises
UnsupportedCompressionError), nor read snappy in xerial framing (Kafka's Java client, kafka-python). Its consumers
always join a group (no assign()), like kafkajs': a consume here is a group of its own, with autocommit off. Its
classic group protocol assigns roundrobin, eagerly (no cooperative assignor), a member's stream may hand out records
of a partition a rebalance took from it, and closing a static member sends LeaveGroup; it also has KIP-848's
consumer protocol, which this adapter does not use. Its transactional producers
cannot take over a transactional id another producer holds (PRODUCER_FENCED). test_platformatic_kafka.py shows each.

Failures are PlatformaticError, carrying the error's name, code and the Kafka error names (`api_ids`) inside it.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

from ..records import EARLIEST, LATEST, AtOffset, AtTimestamp, Consumed, Record
from .base import (DEFAULT_TIMEOUT_S, ClientAdapter, ClientError, ClusterView, GroupInfo, GroupListing, MemberInfo,
                   TxnStep)

SCRIPT = Path(__file__).with_name("platformatic_client.js")
VERSION = "1.35.0"
# The packages tests/setup/platformatic.sh installs, pinned (see the module docstring).
PACKAGES = (f"@platformatic/kafka@{VERSION}", "@platformatic/dynamic-buffer@0.3.1", "@platformatic/wasm-utils@0.2.1")
PREFIX = Path(os.environ.get("COMPATBROKER_PLATFORMATIC_DIR",
                             Path.home() / ".cache" / "compatbroker" / "platformatic"))
INSTALL = (f"apt-get install -y nodejs npm && npm install --prefix {PREFIX} {' '.join(PACKAGES)}  "
           "(or: bash tests/run.sh; COMPATBROKER_PLATFORMATIC_DIR selects another directory)")


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


class PlatformaticError(ClientError):
    """The library's error: `detail` is {"name", "code", "message", "apiIds"} as the script reported it."""

    def __init__(self, text: str, detail: dict):
        super().__init__(text)
        self.detail = detail

    @property
    def api_ids(self) -> list[str]:
        """The Kafka error names inside the error (its ProtocolErrors' apiId), e.g. ["TOPIC_ALREADY_EXISTS"]."""
        return self.detail.get("apiIds", [])


def installed_version(name: str = "platformatic-kafka") -> str | None:
    try:
        return json.loads((PREFIX / "node_modules" / "@platformatic" / "kafka" / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def load(name: str = "platformatic-kafka") -> PlatformaticClient:
    from . import MissingClient
    node = shutil.which("node")
    version = installed_version()
    if node is None or version != VERSION:
        found = ("node is missing" if node is None
                 else f"@platformatic/kafka {version or 'is not installed'} in {PREFIX}")
        raise MissingClient(f"{name}: {found}; install with: {INSTALL}")
    return PlatformaticClient(node, PREFIX / "node_modules")


class PlatformaticClient(ClientAdapter):
    name = "platformatic-kafka"
    sends_null_header = True  # a header value left undefined goes out as null (test_platformatic_kafka.py)

    def __init__(self, node: str, node_modules: Path):
        self.node = node
        self.node_modules = Path(node_modules)

    def _call(self, spec: dict, timeout_s: float):
        env = dict(os.environ, NODE_PATH=str(self.node_modules))
        try:
            done = subprocess.run([self.node, str(SCRIPT)], input=json.dumps(spec).encode(), capture_output=True,
                                  timeout=timeout_s + 10, env=env, check=False)
        except subprocess.TimeoutExpired as exc:
            raise ClientError(f"platformatic {spec['op']}: no answer within {timeout_s + 10} s; log: "
                              f"{(exc.stderr or b'').decode(errors='replace')[-1500:]}") from None
        log = done.stderr.decode(errors="replace")[-2000:]
        for line in reversed(done.stdout.decode(errors="replace").splitlines()):
            if line.startswith("RESULT ") and done.returncode == 0:
                return json.loads(line[len("RESULT "):])
            if line.startswith("ERROR "):
                raise PlatformaticError(f"platformatic {spec['op']}: {line[len('ERROR '):]}\nlog:\n{log}",
                                        json.loads(line[len("ERROR "):]))
        raise ClientError(f"platformatic {spec['op']}: exit {done.returncode} without a result\n{log}")

    def member_command(self, spec):
        return [self.node, str(SCRIPT), "--member", json.dumps(spec)], {"NODE_PATH": str(self.node_modules)}

    # --- produce and consume -----------------------------------------------------------------------------------

    def produce(self, bootstrap, topic, records, *, acks=-1, compression=None, timeout_s=DEFAULT_TIMEOUT_S):
        self._call({"op": "produce", "brokers": bootstrap, "topic": topic, "acks": acks,
                    "codec": compression or "none", "records": [record_json(r) for r in records]}, timeout_s)
        # the library reports each partition's base offset, not one offset per record

    def produce_concurrently(self, bootstrap, topic, batches):
        # One node process holding one producer per batch: 20 node processes would only measure node startup.
        self._call({"op": "produce_many", "brokers": bootstrap, "topic": topic, "acks": -1, "codec": "none",
                    "batches": [[record_json(r) for r in batch] for batch in batches]}, 60)

    def produce_idempotent(self, bootstrap, topic, values, *, batch_records, timeout_s):
        self._call({"op": "produce_idempotent", "brokers": bootstrap, "topic": topic, "chunk": batch_records,
                    "records": [record_json(Record(None, value, partition=0)) for value in values]}, timeout_s)

    def consume(self, bootstrap, topic, count, *, partitions=(0,), start=EARLIEST, timeout_s=DEFAULT_TIMEOUT_S,
                fetch_wait_ms=None):
        result = self._call({"op": "consume", "brokers": bootstrap, "topic": topic, "count": count,
                             "partitions": list(partitions), "start": _start_json(start),
                             "timeout_ms": int(timeout_s * 1000), "fetch_wait_ms": fetch_wait_ms}, timeout_s)
        return [consumed(r) for r in result["records"]]

    def list_offsets(self, bootstrap, topic, partition, timestamp):
        result = self._call({"op": "list_offsets", "brokers": bootstrap, "topic": topic, "partition": partition,
                             "timestamp": timestamp}, 30)
        return result["earliest"], result["latest"], None if result["at"] < 0 else result["at"]

    # --- metadata and committed offsets -------------------------------------------------------------------------

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
        return [consumed(r) for r in result["records"]]

    def committed(self, bootstrap, group, topic, partitions):
        offsets = self._call({"op": "committed", "brokers": bootstrap, "group": group, "topic": topic}, 30)["offsets"]
        return {p: offsets.get(str(p)) for p in partitions}

    def batch(self, bootstrap: str, *steps: dict, concurrent: bool = False,
              timeout_s: float = DEFAULT_TIMEOUT_S) -> list:
        """Several of the script's operations in one node process (`steps`: specs without `brokers`), in order or all
        at once; returns each one's result, or a PlatformaticError for one that failed (the others still run)."""
        answers = self._call({"op": "batch", "brokers": bootstrap, "steps": list(steps), "concurrent": concurrent},
                             timeout_s)["results"]
        return [PlatformaticError(f"platformatic {step['op']}: {answer['error']}", answer["error"])
                if "error" in answer else answer["result"] for step, answer in zip(steps, answers)]

    # --- admin ---------------------------------------------------------------------------------------------------

    def admin(self, bootstrap: str, *calls: dict, timeout_s: float = 30) -> list:
        """The Admin client's calls in order, over one client (the script's ADMIN_CALLS); returns each call's result,
        or a PlatformaticError for a call that failed (the next calls still run)."""
        answers = self._call({"op": "admin", "brokers": bootstrap, "calls": list(calls)}, timeout_s)["results"]
        return [PlatformaticError(f"platformatic admin {call['call']}: {answer['error']}", answer["error"])
                if "error" in answer else answer["result"] for call, answer in zip(calls, answers)]

    def list_groups(self, bootstrap, states=()):
        [found] = self.admin(bootstrap, {"call": "list_groups", "states": _state_names(states) or None})
        _raise(found)
        return {g["id"]: GroupListing(g["id"], g["state"], g["protocolType"]) for g in found}

    def describe_groups(self, bootstrap, group_ids):
        [found] = self.admin(bootstrap, {"call": "describe_groups", "groups": list(group_ids)})
        _raise(found)
        return {g["id"]: GroupInfo(g["id"], g["state"], g["protocolType"], g["protocol"], tuple(
            MemberInfo(m["memberId"], m["clientId"], m["host"], m["instanceId"],
                       frozenset((t, p) for t, p in m["assignment"])) for m in g["members"])) for g in found}

    def group_offsets(self, bootstrap, group_id):
        [found] = self.admin(bootstrap, {"call": "group_offsets", "group": group_id})
        _raise(found)
        return {(key.rsplit(":", 1)[0], int(key.rsplit(":", 1)[1])): offset for key, offset in found.items()}

    # --- transactions --------------------------------------------------------------------------------------------

    def run_transactional(self, bootstrap, topic, steps, *, timeout_s=DEFAULT_TIMEOUT_S):
        result = self._call({"op": "txn_script", "brokers": bootstrap, "topic": topic,
                             "steps": [_step_json(step) for step in steps]}, timeout_s)
        return result["outcomes"]

    def read_to_end(self, bootstrap, topic, until, *, read_committed, timeout_s=DEFAULT_TIMEOUT_S):
        result = self._call({"op": "read_to_end", "brokers": bootstrap, "topic": topic, "until": until,
                             "read_uncommitted": not read_committed, "timeout_ms": int(timeout_s * 1000)}, timeout_s)
        return ([consumed(r) for r in result["records"]],
                {int(p): offset for p, offset in result["positions"].items()})


# Kafka's group state names -> the library's ConsumerGroupStates.
_STATES = {"Stable": "STABLE", "Empty": "EMPTY", "Dead": "DEAD", "PreparingRebalance": "PREPARING_REBALANCE",
           "CompletingRebalance": "COMPLETING_REBALANCE"}


def _state_names(states) -> list[str]:
    return [_STATES[state] for state in states]


def _raise(found) -> None:
    if isinstance(found, Exception):
        raise found


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
