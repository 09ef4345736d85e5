"""The Go client confluent-kafka-go, as Debian packages it (golang-github-confluentinc-confluent-kafka-go-dev 0.11.6, a
cgo binding of the system's librdkafka: librdkafka-dev 2.0.2), behind the adapter interface.

The program in `confluent_kafka_go/` is built at first use in GOPATH mode against the packaged source
(`GO111MODULE=off GOPATH=/usr/share/gocode`, linking librdkafka through pkg-config), into a cache directory keyed by
the source's hash, and runs once per operation with a JSON command on stdin; `--member` runs a group member of the
member.py protocol. What the binding offers decides the flows: produce (every acks and codec, headers, timestamps,
partitions), consume by assignment (earliest, latest, an offset, a timestamp through OffsetsForTimes), watermarks and
OffsetsForTimes, Subscribe with eager rebalances, Committed, the AdminClient's topic and config calls, and
librdkafka's idempotent producer, and TLS and SASL through librdkafka's own settings (`secured()`). 0.11.6 has no
transactional producer (no InitTransactions), no incremental assignment (IncrementalAssign came in 1.6.1; librdkafka
refuses a plain assign() under cooperative-sticky) and no group admin calls.

Each operation is a process of its own, so the program looks the topic up before it produces or assigns (main.go:
awaitLeaders, consume): left to itself, librdkafka asks again about a topic the broker just auto-created (answered
LEADER_NOT_AVAILABLE, as Kafka answers it) only on its one-second scan, and retries a first offset lookup for a
partition whose leader it does not know yet after 500 ms - most of each short run.
"""
from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path

from ..records import EARLIEST, LATEST, MAX_MESSAGE_BYTES, AtOffset, AtTimestamp, Record
from .base import DEFAULT_TIMEOUT_S, ClientAdapter, ClusterView, ConnectFailure
from .go_program import GOPATH, b64, build_go_program, consumed, debian_version, host_port, run_go_program

SOURCE = GOPATH / "src" / "github.com" / "confluentinc" / "confluent-kafka-go" / "kafka"
DEBIAN_PACKAGES = ("golang-github-confluentinc-confluent-kafka-go-dev", "librdkafka-dev")
PROGRAM_DIR = Path(__file__).with_name("confluent_kafka_go")  # one Go package
BUILD_DIR = Path(os.environ.get("COMPATBROKER_CKGO_DIR",
                                Path.home() / ".cache" / "compatbroker" / "confluent-kafka-go"))
INSTALL_HINT = (f"apt-get update && apt-get install -y golang-go pkg-config {' '.join(DEBIAN_PACKAGES)}  "
                "(or: bash tests/run.sh; COMPATBROKER_CKGO_DIR selects where the program is built)")
LIBRDKAFKA_HEADER = Path("/usr/include/librdkafka/rdkafka.h")
_build_lock = threading.Lock()


def load(name: str = "confluent-kafka-go") -> ConfluentKafkaGoClient:
    """The adapter, building the program if needed; raises MissingClient with the install command."""
    from . import MissingClient

    go = shutil.which("go")
    missing = [what for what, there in (("the go command", go), (str(SOURCE), SOURCE.is_dir()),
                                        (str(LIBRDKAFKA_HEADER), LIBRDKAFKA_HEADER.is_file())) if not there]
    if missing:
        raise MissingClient(f"confluent-kafka-go is not installed ({', '.join(missing)} missing): {INSTALL_HINT}")
    with _build_lock:
        return ConfluentKafkaGoClient(build(go))


def build(go: str) -> Path:
    return build_go_program(go, PROGRAM_DIR, BUILD_DIR, "confluent-kafka-go-compat")


def installed_version(name: str = "confluent-kafka-go") -> str | None:
    """The Debian packages' versions: "0.11.6-1 (librdkafka 2.0.2-1)"."""
    versions = [debian_version(package) for package in DEBIAN_PACKAGES]
    return None if None in versions else f"{versions[0]} (librdkafka {versions[1]})"


class ConfluentKafkaGoClient(ClientAdapter):
    name = "confluent-kafka-go"
    sends_null_header = True  # a Header with a nil Value is sent as null

    def __init__(self, program: Path):
        self.program = program

    def run(self, command: dict, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict:
        command = command | {"timeout_ms": int(timeout_s * 1000), "max_message_bytes": MAX_MESSAGE_BYTES,
                             "security": self.security}
        return run_go_program(self.program, command, label="confluent-kafka-go", timeout_s=timeout_s + 30)

    # --- produce and consume ---------------------------------------------------------------------------------------

    def produce(self, bootstrap, topic, records, *, acks=-1, compression=None, timeout_s=DEFAULT_TIMEOUT_S):
        answer = self.run({"op": "produce", "bootstrap": bootstrap, "topic": topic, "acks": acks,
                           "compression": compression or "none", "records": [_record_json(r) for r in records]},
                          timeout_s)
        return None if acks == 0 else [tuple(placed) for placed in answer["placed"]]

    def produce_concurrently(self, bootstrap, topic, batches):
        # One program with a producer per batch: twenty processes would mostly measure process start-up.
        self.run({"op": "produce_many", "bootstrap": bootstrap, "topic": topic, "acks": -1,
                  "batches": [[_record_json(r) for r in batch] for batch in batches]}, 60)

    def consume(self, bootstrap, topic, count, *, partitions=(0,), start=EARLIEST, timeout_s=DEFAULT_TIMEOUT_S,
                fetch_wait_ms=None):
        answer = self.run(_consume_command(bootstrap, topic, count, partitions, start, fetch_wait_ms), timeout_s)
        return [consumed(r) for r in answer["records"]]

    def consume_concurrently(self, bootstrap, topic, clients, count, started=None):
        outcome: dict = {}

        def run():
            try:
                outcome["answer"] = self.run(_consume_command(bootstrap, topic, count, (0,), EARLIEST, None)
                                             | {"op": "consume_many", "consumers": clients}, 60)
            except Exception as exc:  # noqa: BLE001 - re-raised below
                outcome["error"] = exc

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        if started is not None:
            started()
        thread.join()
        if "error" in outcome:
            raise outcome["error"]
        return [[consumed(r) for r in result["records"]] for result in outcome["answer"]["results"]]

    def list_offsets(self, bootstrap, topic, partition, timestamp):
        found = self.run({"op": "list_offsets", "bootstrap": bootstrap, "topic": topic, "partitions": [partition],
                          "at": timestamp}, 60)
        return found["earliest"], found["latest"], None if found["at"] < 0 else found["at"]

    # --- metadata --------------------------------------------------------------------------------------------------

    def metadata_answer(self, bootstrap: str, topics: Sequence[str] | None = None, auto_create: bool = False) -> dict:
        """{"brokers": {id: host:port}, "topics": {name: {"error": Kafka's code, "leaders": {partition: leader}}}}."""
        return self.run({"op": "metadata", "bootstrap": bootstrap, "topics": list(topics or []),
                         "auto_create": auto_create}, 60)

    def metadata(self, bootstrap, topics=None, *, auto_create=False):
        answer = self.metadata_answer(bootstrap, topics, auto_create)
        brokers = frozenset((int(node), *host_port(addr)) for node, addr in answer["brokers"].items())
        return ClusterView(brokers, {name: {int(p): leader for p, leader in found["leaders"].items()}
                                     for name, found in answer["topics"].items() if found["error"] == 0})

    def list_topics(self, bootstrap):
        return set(self.metadata_answer(bootstrap)["topics"])

    # --- groups and committed offsets ------------------------------------------------------------------------------

    def member_command(self, spec):  # plaintext, as every member process (base.py)
        return [str(self.program), "--member", json.dumps(spec)], {}

    def group_consume(self, bootstrap, topic, group, count, timeout_s=DEFAULT_TIMEOUT_S):
        answer = self.run({"op": "group", "bootstrap": bootstrap, "topic": topic, "group": group, "count": count,
                           "fetch_wait_ms": 200}, timeout_s)
        return [consumed(r) for r in answer["records"]]

    def committed(self, bootstrap, group, topic, partitions):
        found = self.run({"op": "committed", "bootstrap": bootstrap, "group": group, "topic": topic,
                          "partitions": list(partitions)}, 60)["offsets"]
        return {p: found[str(p)] if found[str(p)] >= 0 else None for p in partitions}  # none: OffsetInvalid

    # --- idempotence -----------------------------------------------------------------------------------------------

    def produce_idempotent(self, bootstrap, topic, values, *, batch_records, timeout_s):
        self.run({"op": "produce", "bootstrap": bootstrap, "topic": topic, "acks": -1, "idempotent": True,
                  "batch_size": batch_records,
                  "records": [_record_json(Record(None, value, partition=0)) for value in values]}, timeout_s)

    # --- security: `secured()` takes librdkafka's settings (SecuritySetup.client_config("kcat", ...): strings only) --

    def connect_failure(self, bootstrap, *, timeout_s=20.0):
        found = self.run({"op": "connect_failure", "bootstrap": bootstrap}, timeout_s)
        return ConnectFailure(found["error"], found["detail"])

    # --- admin -----------------------------------------------------------------------------------------------------

    def admin(self, bootstrap: str, *calls: dict, timeout_s: float = 60) -> list[dict]:
        """Makes the AdminClient calls in order (adminCall in admin.go); each answer is {"result": ...} or
        {"error": message} when the call failed as a whole (topic and config errors are in the result)."""
        return self.run({"op": "admin", "bootstrap": bootstrap, "calls": list(calls)}, timeout_s)["results"]


def _record_json(r: Record) -> dict:
    return {"key": b64(r.key), "value": b64(r.value), "timestamp": r.timestamp or 0,
            "partition": -1 if r.partition is None else r.partition,
            "headers": [{"key": name, "value": b64(value)} for name, value in r.headers]}


def _consume_command(bootstrap, topic, count, partitions, start, fetch_wait_ms) -> dict:
    command = {"op": "consume", "bootstrap": bootstrap, "topic": topic, "count": count,
               "partitions": list(partitions), "fetch_wait_ms": fetch_wait_ms or 0}
    if start == EARLIEST or start == LATEST:
        return command | {"start": start}
    if isinstance(start, AtOffset):
        return command | {"start": "offset", "at": start.offset}
    if isinstance(start, AtTimestamp):
        return command | {"start": "timestamp", "at": start.timestamp}
    raise ValueError(f"unknown start {start!r}")
