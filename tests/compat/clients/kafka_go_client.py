"""The Go client kafka-go (segmentio/kafka-go 0.2.1, as Debian packages it: golang-github-segmentio-kafka-go-dev),
behind the adapter interface.

The program in `kafka_go/main.go` is built at first use in GOPATH mode against the packaged source, like sarama's
(go_program.py), into ~/.cache/compatbroker/kafka-go/<source hash>/ (COMPATBROKER_KAFKA_GO_DIR
elsewhere), and runs once per operation with one JSON command on stdin.

What kafka-go 0.2.1 is (read in its source, /usr/share/gocode/src/github.com/segmentio/kafka-go): it never asks
ApiVersions and speaks Metadata v1 (which always lets the broker create a topic it names), Produce v2 with magic 1
messages (timestamps but no headers), Fetch v2, ListOffsets v1, CreateTopics v0, DeleteTopics v1 and the classic
group protocol. Its codecs are gzip, snappy and lz4 (no zstd package); Conn.SetRequiredAcks takes only 1 and -1
(the Writer ignores its error for 0 and keeps -1); OffsetFetch is only used inside its group Reader (no API reads a
group's committed offsets back), and its Reader reports no assignment (no rebalance callback to drive member.py).
It has no idempotent or transactional producer. Its Reader.Close sends no LeaveGroup (it dials the coordinator with
the context it has just cancelled), so the next session of a group waits for the old member's rebalance timeout
(10 s here), as it would with Kafka.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from ..records import EARLIEST, LATEST, AtOffset, AtTimestamp, Consumed, Record
from .base import DEFAULT_TIMEOUT_S, ClientAdapter, ClusterView
from .go_program import GOPATH, b64, build_go_program, consumed, debian_version, host_port, run_go_program

KAFKA_GO_SOURCE = GOPATH / "src" / "github.com" / "segmentio" / "kafka-go"
DEBIAN_PACKAGE = "golang-github-segmentio-kafka-go-dev"
PROGRAM_DIR = Path(__file__).with_name("kafka_go")
BUILD_DIR = Path(os.environ.get("COMPATBROKER_KAFKA_GO_DIR", Path.home() / ".cache" / "compatbroker" / "kafka-go"))
INSTALL_HINT = (f"apt-get update && apt-get install -y golang-go {DEBIAN_PACKAGE}  (or: bash tests/run.sh; "
                "COMPATBROKER_KAFKA_GO_DIR selects where the program is built)")
CODECS = ("gzip", "snappy", "lz4")  # the codec packages kafka-go 0.2.1 ships


def load(name: str = "kafka-go") -> KafkaGoClient:
    """The adapter, building the program if needed; raises MissingClient with the install command."""
    from . import MissingClient

    go = shutil.which("go")
    if go is None or not KAFKA_GO_SOURCE.is_dir():
        missing = "the go command" if go is None else f"{KAFKA_GO_SOURCE}"
        raise MissingClient(f"kafka-go is not installed ({missing} is missing): {INSTALL_HINT}")
    return KafkaGoClient(build_go_program(go, PROGRAM_DIR, BUILD_DIR, "kafka-go-compat"))


def installed_version(name: str = "kafka-go") -> str | None:
    """The Debian package's version, e.g. 0.2.1-1.1."""
    return debian_version(DEBIAN_PACKAGE)


class KafkaGoClient(ClientAdapter):
    name = "kafka-go"
    expressive = False  # magic 1 messages carry no headers
    can_refuse_auto_creation = False  # Metadata v1 always allows it
    reads_committed = False  # no OffsetFetch call outside its group Reader

    def __init__(self, program: Path):
        self.program = program

    def run(self, command: dict, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict:
        command = command | {"timeout_ms": int(timeout_s * 1000)}
        return run_go_program(self.program, command, label="kafka-go", timeout_s=timeout_s + 15)

    # --- metadata ------------------------------------------------------------------------------------------------

    def metadata(self, bootstrap, topics=None, *, auto_create=False):
        """Conn.ReadPartitions: Metadata v1, which lets the broker create named topics whatever `auto_create` says."""
        answer = self.run({"op": "metadata", "bootstrap": bootstrap, "topics": list(topics or [])})
        brokers = frozenset((node, *host_port(addr)) for addr, node in answer["brokers"].items())
        return ClusterView(brokers, {name: {int(p): leader for p, leader in partitions.items()}
                                     for name, partitions in answer["leaders"].items()})

    def list_topics(self, bootstrap):
        """kafka-go has no topic listing of its own: Conn.ReadPartitions() for every topic, as applications do."""
        return set(self.metadata(bootstrap).topics)

    # --- produce and consume -------------------------------------------------------------------------------------

    def produce(self, bootstrap: str, topic: str, records: Sequence[Record], *, acks: int = -1,
                compression: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S):
        """One Writer; returns None (the Writer reports no offsets)."""
        for record in records:
            if record.headers or record.partition is not None:
                raise ValueError(f"kafka-go's Writer sends no headers and picks partitions itself: {record}")
        self.run({"op": "produce", "bootstrap": bootstrap, "topic": topic, "acks": acks,
                  "compression": compression or "none",
                  "records": [{"key": b64(r.key), "value": b64(r.value), "timestamp": r.timestamp or 0}
                              for r in records]}, timeout_s)
        return None

    def consume(self, bootstrap: str, topic: str, count: int, *, partitions: Sequence[int] = (0,),
                start=EARLIEST, timeout_s: float = DEFAULT_TIMEOUT_S, fetch_wait_ms: int | None = None):
        """A partition Reader (no group) per partition, all reading at once."""
        answer = self.run({"op": "consume", "bootstrap": bootstrap, "topic": topic, "partitions": list(partitions),
                           "start": _start(start), "count": count, "fetch_wait_ms": fetch_wait_ms or 0}, timeout_s)
        return [consumed(r) for r in answer["records"]]

    def list_offsets(self, bootstrap, topic, partition, timestamp):
        """Conn.ReadOffsets and Conn.ReadOffset(t) on the partition's leader (ListOffsets v1); None where Kafka
        answers -1 (no record at or after the timestamp)."""
        answer = self.run({"op": "list_offsets", "bootstrap": bootstrap, "topic": topic, "partitions": [partition],
                           "timestamp": timestamp})
        return answer["earliest"], answer["latest"], None if answer["at"] < 0 else answer["at"]

    # --- groups --------------------------------------------------------------------------------------------------

    def group_consume(self, bootstrap, topic, group, count, timeout_s=DEFAULT_TIMEOUT_S):
        return [record for _, record in self.group_read(bootstrap, topic, group, count, timeout_s=timeout_s)]

    def group_read(self, bootstrap: str, topic: str, group: str, count: int, *, readers: int = 1,
                   timeout_s: float = DEFAULT_TIMEOUT_S) -> list[tuple[int, Consumed]]:
        """`readers` group Readers in one process read `count` records between them, each committed as it is read
        (ReadMessage with synchronous commits), then leave: (which reader, record) for each."""
        answer = self.run({"op": "group", "bootstrap": bootstrap, "topic": topic, "group": group, "count": count,
                           "readers": readers}, timeout_s)
        return [(r["reader"], consumed(r)) for r in answer["records"]]

    # --- admin ---------------------------------------------------------------------------------------------------

    def admin(self, bootstrap: str, *calls: dict) -> list[str | None]:
        """Conn.CreateTopics ({"call": "create_topics", "topics": [{"name", "partitions", "replication",
        "configs"}]}) and Conn.DeleteTopics ({"call": "delete_topics", "topics": [{"name"}]}) in order; each call's
        error message or None."""
        answer = self.run({"op": "admin", "bootstrap": bootstrap, "calls": list(calls)})
        return [result["error"] for result in answer["results"]]


def _start(start) -> str:
    if start == EARLIEST:
        return "earliest"
    if start == LATEST:
        return "latest"
    if isinstance(start, AtOffset):
        return f"offset:{start.offset}"
    if isinstance(start, AtTimestamp):
        return f"timestamp:{start.timestamp}"
    raise NotImplementedError(f"kafka-go cannot start at {start}")
