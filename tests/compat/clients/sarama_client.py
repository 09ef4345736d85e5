"""The Go client sarama, as Debian packages it (golang-github-shopify-sarama-dev), behind the adapter interface.

The program in `sarama/main.go` is built at first use in GOPATH mode against the packaged source
(`GO111MODULE=off GOPATH=/usr/share/gocode`), into a cache directory keyed by the source's hash, and runs once per
operation with a JSON command (go_program.py). sarama's defaults matter here: it assumes a Kafka 0.8.2 broker unless
told otherwise, so it never asks ApiVersions and sends Metadata v0, Produce v0 with magic 0 messages and Fetch v0;
`with_protocol("2.1.0")` sets its Config.Version for flows that need newer ones (lz4 wants 0.10, zstd 2.1,
consumer groups 0.10.2, the idempotent producer 0.11, its ClusterAdmin 0.10). The admin calls and the
idempotent producer use NEWER_PROTOCOL unless the adapter was given a version.

The matrix has two rows of it: "sarama" (its default protocol) and "sarama-2.1" (`load("sarama-2.1")`: Config.Version
2.1.0, the default of newer sarama releases), which sends headers and timestamps in v2 batches (Produce v3), reads
them with Fetch v4 and looks offsets up by time with ListOffsets v1 (`list_offsets`, consume from an AtTimestamp).
Its group members (`member_command`: sarama/member.go, member.py's line protocol) take no commit command: sarama 1.22
has no synchronous commit (marked offsets go out every Consumer.Offsets.CommitInterval and when a session ends).

`secured(config)` (base.py) connects every command over TLS and/or SASL: `config` is the "sarama" client config of
compatbroker.toolkit.security, whose "security" part the program maps onto sarama's Net.TLS and Net.SASL
(sarama/security.go, with a SCRAM client of its own: sarama 1.22 ships none). `connect` opens one connection and
reports sarama's own error, which its Client hides behind "run out of available brokers".
"""
from __future__ import annotations

import copy
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from ..records import EARLIEST, LATEST, AtOffset, AtTimestamp, Consumed, Record
from .base import DEFAULT_TIMEOUT_S, ClientAdapter, ClientError, ClusterView
from .go_program import GOPATH, b64, build_go_program, consumed, debian_version, host_port, run_go_program

SARAMA_SOURCE = GOPATH / "src" / "github.com" / "Shopify" / "sarama"
DEBIAN_PACKAGE = "golang-github-shopify-sarama-dev"
PROGRAM_DIR = Path(__file__).with_name("sarama")  # main.go and security.go: one Go package
BUILD_DIR = Path(os.environ.get("COMPATBROKER_SARAMA_DIR", Path.home() / ".cache" / "compatbroker" / "sarama"))
INSTALL_HINT = (f"apt-get update && apt-get install -y golang-go {DEBIAN_PACKAGE}  (or: bash tests/run.sh; "
                "COMPATBROKER_SARAMA_DIR selects where the program is built)")
NEWER_PROTOCOL = "2.1.0"
ROW_2_1 = "sarama-2.1"  # the matrix row of sarama at NEWER_PROTOCOL


def load(name: str = "sarama") -> SaramaClient:
    """The adapter of the row `name` ("sarama", or "sarama-2.1": the same client with Config.Version 2.1.0, the
    default of newer sarama releases), building the program if needed; raises MissingClient with the install
    command."""
    from . import MissingClient

    go = shutil.which("go")
    if go is None or not SARAMA_SOURCE.is_dir():
        missing = "the go command" if go is None else f"{SARAMA_SOURCE}"
        raise MissingClient(f"sarama is not installed ({missing} is missing): {INSTALL_HINT}")
    if name == ROW_2_1:
        return SaramaClient(build(go), NEWER_PROTOCOL, name=ROW_2_1)
    return SaramaClient(build(go))


def build(go: str) -> Path:
    return build_go_program(go, PROGRAM_DIR, BUILD_DIR, "sarama-compat")


def installed_version(name: str = "sarama") -> str | None:
    """The Debian package's version, e.g. 1.22.1-1 (the "sarama-2.1" row adds its protocol)."""
    version = debian_version(DEBIAN_PACKAGE)
    if version is None:
        return None
    return f"{version}, Config.Version {NEWER_PROTOCOL}" if name == ROW_2_1 else version


class SaramaClient(ClientAdapter):
    name = "sarama"

    def __init__(self, program: Path, protocol: str | None = None, *, name: str = "sarama"):
        self.program = program
        self.protocol = protocol  # sarama's Config.Version; None keeps its default (0.8.2)
        self.name = name

    @property
    def expressive(self) -> bool:
        """Headers and timestamps need v2 batches (protocol 0.11 or later); magic 0 messages carry neither."""
        return self.protocol is not None and _at_least(self.protocol, (0, 11))

    def with_protocol(self, protocol: str | None) -> SaramaClient:
        clone = copy.copy(self)  # keeps `security` (see secured() in base.py)
        clone.protocol = protocol
        return clone

    def connect(self, bootstrap: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict:
        """One sarama Broker connection (TLS, SASL) and a Metadata request over it: {"brokers": n, "topics": n};
        ClientError with sarama's own error when the connection or the request fails."""
        return self.run({"op": "connect", "bootstrap": bootstrap}, timeout_s)

    def _newer(self) -> SaramaClient:
        """This adapter, or one speaking NEWER_PROTOCOL when this one keeps sarama's default (too old for the call)."""
        return self if self.protocol else self.with_protocol(NEWER_PROTOCOL)

    def run(self, command: dict, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict:
        command = command | {"version": self.protocol or "", "timeout_ms": int(timeout_s * 1000),
                             "security": (self.security or {}).get("security")}
        return run_go_program(self.program, command, label="sarama", timeout_s=timeout_s + 15)

    def metadata_answer(self, bootstrap: str, topic: str | None = None) -> dict:
        """The "metadata" command's answer: {"brokers": [host:port...], "broker_ids": {host:port: id}, "topics":
        {name: [partition...]}, "leaders": {name: {partition: leader id}}}, for every topic; naming a topic also
        asks for it (the broker may create it)."""
        return self.run({"op": "metadata", "bootstrap": bootstrap, "topic": topic or ""})

    def admin(self, bootstrap: str, *calls: dict, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[dict]:
        """Makes the ClusterAdmin calls in order (see adminCall in main.go); each result is {"result": ...} or
        {"error": message, "error_code": Kafka's code or -1}."""
        return self._newer().run({"op": "admin", "bootstrap": bootstrap, "calls": list(calls)}, timeout_s)["results"]

    def admin_results(self, bootstrap: str, *calls: dict) -> list:
        """admin() for calls that must all succeed: their results."""
        answers = self.admin(bootstrap, *calls)
        failed = [(call["call"], answer["error"]) for call, answer in zip(calls, answers, strict=True)
                  if answer["error"]]
        if failed:
            raise ClientError(f"sarama admin: {failed}")
        return [answer["result"] for answer in answers]

    def metadata(self, bootstrap, topics=None, *, auto_create=False):
        if topics is not None and not auto_create:
            # ClusterAdmin's DescribeTopics asks Metadata v5 not to create the topics
            described, cluster = self.admin_results(bootstrap, {"call": "describe_topics", "topics": list(topics)},
                                                    {"call": "describe_cluster"})
            brokers = frozenset((int(node), *host_port(addr)) for node, addr in cluster["brokers"].items())
            return ClusterView(brokers, {name: {int(p): leader for p, leader in found["leaders"].items()}
                                         for name, found in described.items() if found["error"] == 0})
        # the client's own requests, whose Metadata v0 the broker answers by creating named topics it lacks
        answers = [self.metadata_answer(bootstrap, topic) for topic in topics or [None]]
        brokers = frozenset((node, *host_port(addr)) for answer in answers
                            for addr, node in answer["broker_ids"].items())
        leaders = {name: {int(p): leader for p, leader in partitions.items()}
                   for answer in answers for name, partitions in answer["leaders"].items()}
        return ClusterView(brokers, leaders if topics is None else {t: leaders[t] for t in topics if t in leaders})

    def list_topics(self, bootstrap):
        """ClusterAdmin's ListTopics: Metadata v0 for every topic, then DescribeConfigs v0 for all of them."""
        [listed] = self.admin_results(bootstrap, {"call": "list_topics"})
        return set(listed)

    def produce(self, bootstrap: str, topic: str, records: Sequence[Record], *, acks: int = -1,
                compression: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S):
        for record in records:
            if record.partition is not None or (not self.expressive and (record.headers or record.timestamp)):
                raise ValueError(f"sarama at protocol {self.protocol} cannot send {record}")
        answer = self.run({"op": "produce", "bootstrap": bootstrap, "topic": topic, "acks": acks,
                           "compression": compression or "none",
                           "records": [{"key": b64(r.key), "value": b64(r.value), "timestamp": r.timestamp or 0,
                                        "headers": [{"key": k, "value": b64(v)} for k, v in r.headers]}
                                       for r in records]}, timeout_s)
        if acks == 0:
            return None  # no response, so no offsets
        return [tuple(placed) for placed in answer["placed"]]

    def consume(self, bootstrap: str, topic: str, count: int, *, partitions: Sequence[int] = (0,),
                start=EARLIEST, timeout_s: float = DEFAULT_TIMEOUT_S, fetch_wait_ms: int | None = None):
        answer = self.run({"op": "consume", "bootstrap": bootstrap, "topic": topic, "partitions": list(partitions),
                           "start": _start(start), "count": count, "fetch_wait_ms": fetch_wait_ms or 0}, timeout_s)
        return [consumed(r) for r in answer["records"]]

    def list_offsets(self, bootstrap, topic, partition, timestamp):
        """Client.GetOffset for the oldest, the newest and the timestamp; None where Kafka answers -1."""
        answer = self.run({"op": "list_offsets", "bootstrap": bootstrap, "topic": topic, "partition": partition,
                           "timestamp": timestamp})
        return answer["earliest"], answer["latest"], None if answer["at"] < 0 else answer["at"]

    def group_consume(self, bootstrap: str, topic: str, group: str, count: int,
                      timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Consumed]:
        """Joins `group`, reads `count` records from its committed position (oldest without one), commits, leaves."""
        answer = self.run({"op": "group", "bootstrap": bootstrap, "topic": topic, "group": group, "count": count},
                          timeout_s)
        return [consumed(r) for r in answer["records"]]

    def member_command(self, spec: dict) -> tuple[list[str], dict[str, str]]:
        """The program's "member" command (sarama/member.go): the spec goes in the argument, commands on stdin."""
        command = {"op": "member", "bootstrap": spec["bootstrap"], "topic": spec["topic"], "group": spec["group"],
                   "version": self.protocol or "", "member": spec}
        return [str(self.program), json.dumps(command)], {}

    def committed(self, bootstrap, group, topic, partitions):
        [found] = self.admin_results(bootstrap, {"call": "list_group_offsets", "group": group, "topic": topic,
                                                 "partitions": max(partitions) + 1})
        return {p: found[str(p)] if found[str(p)] >= 0 else None for p in partitions}

    def produce_idempotent(self, bootstrap, topic, values, *, batch_records, timeout_s):
        self._newer().run({"op": "produce", "bootstrap": bootstrap, "topic": topic, "acks": -1, "compression": "none",
                           "idempotent": True, "batch_messages": batch_records,
                           "records": [{"key": None, "value": b64(value)} for value in values]}, timeout_s)


def _start(start) -> str:
    if start == EARLIEST:
        return "oldest"
    if start == LATEST:
        return "newest"
    if isinstance(start, AtOffset):
        return str(start.offset)
    if isinstance(start, AtTimestamp):
        return f"timestamp:{start.timestamp}"
    raise NotImplementedError(f"sarama's consumer cannot start at {start}")


def _at_least(protocol: str, version: tuple[int, ...]) -> bool:
    return tuple(int(part) for part in protocol.split(".")) >= version
