"""The one interface every client adapter offers to the compat tests, so each scenario is written once."""
from __future__ import annotations

import copy
import dataclasses
import json
import logging
import sys
import threading
from collections.abc import Callable, Mapping, Sequence

from ..records import EARLIEST, Consumed, Record

DEFAULT_TIMEOUT_S = 90.0  # a bound on a client's run, not a pace: generous for loaded CI machines


class ClientError(AssertionError):
    """A client reported a failure (delivery error, non-zero exit, timeout); the message says what it printed."""


class LogCapture(logging.Handler):
    """Collects the records a client library logs at `level` or above while in the `with` block (the library's
    loggers, e.g. "kafka", are named at construction)."""

    def __init__(self, *loggers: str, level: int = logging.WARNING):
        super().__init__(level)
        self.loggers = [logging.getLogger(name) for name in loggers]
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.name}: {record.getMessage()}")

    def __enter__(self) -> LogCapture:
        self._levels = [logger.level for logger in self.loggers]
        for logger in self.loggers:
            logger.addHandler(self)
            if logger.getEffectiveLevel() > self.level:
                logger.setLevel(self.level)
        return self

    def __exit__(self, *exc_info) -> None:
        for logger, level in zip(self.loggers, self._levels):
            logger.removeHandler(self)
            logger.setLevel(level)


class ClientAdapter:
    """Produce and consume through one real client library or tool.

    Every producer keeps its client's idempotence default (`idempotent`: kafka-python's producer is idempotent
    with acks=-1, like Kafka's Java client; the others are plain unless asked), and every consumer reads assigned
    partitions without a consumer group, except where a client offers no such mode (then the adapter says so).
    Consumer-group members run in processes of their own (`member_command`, see member.py), so that a test can
    kill one; clients with an admin API also list and describe groups and their committed offsets.

    `secured(settings)` gives a copy whose clients all connect with security settings (TLS, SASL) written in the
    client's own vocabulary, as compatbroker.toolkit.security.SecuritySetup.client_config(<name>, listener) gives
    them; without it every client connects in plaintext. Group members in processes of their own
    (`member_command`) stay plaintext.
    """

    name = "?"
    # Security settings every client of this adapter takes, in the client's own vocabulary; None: plaintext.
    security: dict | None = None

    def secured(self, settings: Mapping) -> ClientAdapter:
        """A copy of this adapter whose clients connect with `settings` (see the class docstring)."""
        clone = copy.copy(self)
        clone.security = dict(settings)
        return clone

    # Can the client set each record's timestamp and send binary keys, values and headers? (kcat cannot)
    expressive = True
    # Can it send a header whose value is null? (kafka-python and kafkajs refuse, kcat has no syntax for it)
    sends_null_header = False
    # Is its producer idempotent by default when acks=-1 (batches then carry a producer id and sequence numbers)?
    idempotent = False

    def produce(self, bootstrap: str, topic: str, records: Sequence[Record], *, acks: int = -1,
                compression: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[tuple[int, int]] | None:
        """Sends `records` in order and waits until each is acknowledged (for acks=0: handed to the socket).
        Returns each record's (partition, offset) when the client reports them, else None."""
        raise NotImplementedError

    def consume(self, bootstrap: str, topic: str, count: int, *, partitions: Sequence[int] = (0,),
                start=EARLIEST, timeout_s: float = DEFAULT_TIMEOUT_S,
                fetch_wait_ms: int | None = None) -> list[Consumed]:
        """Reads `count` records from `partitions`, starting at `start` (EARLIEST, LATEST, AtOffset, AtTimestamp).
        Raises ClientError when fewer arrive within `timeout_s`."""
        raise NotImplementedError

    def list_offsets(self, bootstrap: str, topic: str, partition: int, timestamp: int) -> tuple[int, int, int | None]:
        """(earliest offset, latest offset, offset of the first record at or after `timestamp` or None)."""
        raise NotImplementedError

    def member_command(self, spec: dict) -> tuple[list[str], dict[str, str]]:
        """The command, and extra environment, of a process running one group member (protocol: member.py)."""
        return [sys.executable, "-m", "tests.compat.clients.member", json.dumps(spec)], {}

    def run_member(self, spec: dict, session) -> None:
        """In that process: subscribe to spec["topic"] in spec["group"] and serve the MemberSession until closed."""
        raise NotImplementedError(f"{self.name} has no group member")

    def list_groups(self, bootstrap: str, states: Sequence[str] = ()) -> dict[str, GroupListing]:
        """The broker's groups (ListGroups), only those in `states` (Kafka's state names) when given."""
        raise NotImplementedError(f"{self.name} has no admin client here")

    def describe_groups(self, bootstrap: str, group_ids: Sequence[str]) -> dict[str, GroupInfo]:
        raise NotImplementedError(f"{self.name} has no admin client here")

    def group_offsets(self, bootstrap: str, group_id: str) -> dict[tuple[str, int], int]:
        """Every offset the group committed (OffsetFetch for all topics)."""
        raise NotImplementedError(f"{self.name} has no admin client here")

    # --- metadata ------------------------------------------------------------------------------------------------

    # Can the client ask about a topic without letting the broker create it (Metadata v4+ allow_auto_topic_creation
    # false)? aiokafka always lets it.
    can_refuse_auto_creation = True

    def metadata(self, bootstrap: str, topics: Sequence[str] | None = None, *,
                 auto_create: bool = False) -> ClusterView:
        """What the client's metadata call reports about `topics` (None: every topic). With `auto_create` the
        request lets the broker create the topics it does not have; without it, they come back unknown."""
        raise NotImplementedError(f"{self.name} has no metadata call here")

    def list_topics(self, bootstrap: str) -> set[str]:
        """The names of every topic, through the call the client offers applications for listing them."""
        raise NotImplementedError(f"{self.name} has no topic listing here")

    # --- committed offsets -----------------------------------------------------------------------------------------

    # Can the client read a group's committed offsets back (kcat cannot)?
    reads_committed = True

    def group_consume(self, bootstrap: str, topic: str, group: str, count: int,
                      timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Consumed]:
        """Joins `group` subscribed to `topic`, reads `count` records from the group's committed offsets (the
        earliest without them), commits the offset after the last record read of each partition, and leaves."""
        raise NotImplementedError(f"{self.name} has no group consumer here")

    def committed(self, bootstrap: str, group: str, topic: str, partitions: Sequence[int]) -> dict[int, int | None]:
        """The group's committed offset of each partition, None where it committed none."""
        raise NotImplementedError(f"{self.name} cannot read committed offsets")

    # --- idempotence -----------------------------------------------------------------------------------------------

    def produce_idempotent(self, bootstrap: str, topic: str, values: Sequence[bytes], *, batch_records: int,
                           timeout_s: float) -> None:
        """Sends `values` in order to partition 0 with the client's idempotent producer, about `batch_records` to a
        Produce request, retrying through failed requests and cut connections until all are acknowledged."""
        raise NotImplementedError(f"{self.name} has no idempotent producer here")

    # --- transactions ----------------------------------------------------------------------------------------------

    def run_transactional(self, bootstrap: str, topic: str, steps: Sequence[TxnStep], *,
                          timeout_s: float = DEFAULT_TIMEOUT_S) -> list[str]:
        """Carries out `steps` in order with the client's transactional producers (named by TxnStep.producer, all in
        one process) and returns each step's outcome: OK, or `error:<NAME>` with the Kafka error name the client
        reported (see TxnStep). A failed step does not stop the script. An "abandon" step leaves its producer
        alone with its transaction open, sending nothing more: the broker must time the transaction out."""
        raise NotImplementedError(f"{self.name} has no transactional producer here")

    def read_to_end(self, bootstrap: str, topic: str, until: dict[int, int], *, read_committed: bool,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[list[Consumed], dict[int, int]]:
        """Reads partitions `until` names from the earliest offset, with isolation level read_committed or
        read_uncommitted, until the consumer's position in each is at least `until[partition]`. Returns the records
        delivered and the positions reached; raises ClientError when the positions do not get there in time."""
        raise NotImplementedError(f"{self.name} has no transactional reader here")

    # --- security --------------------------------------------------------------------------------------------------

    def connect_failure(self, bootstrap: str, *, timeout_s: float = 20.0) -> ConnectFailure:
        """Connects with the adapter's security settings (see `secured`) expecting that to fail (bad credentials,
        an untrusted certificate, an expired token): returns what the application is told and what the client
        reports about the cause. Raises ClientError when the client connects after all."""
        raise NotImplementedError(f"{self.name} has no connection probe here")

    def produce_concurrently(self, bootstrap: str, topic: str, batches: Sequence[Sequence[Record]]) -> None:
        """One client instance per batch, all running at the same time."""
        run_concurrently([lambda b=b: self.produce(bootstrap, topic, b) for b in batches])

    def consume_concurrently(self, bootstrap: str, topic: str, clients: int, count: int,
                             started: Callable[[], None] | None = None) -> list[list[Consumed]]:
        """`clients` consumers at once, each reading `count` records from the earliest offset of partition 0.
        `started` is called once they have all been launched (the records may be produced then)."""
        return run_concurrently([lambda: self.consume(bootstrap, topic, count, timeout_s=60)] * clients,
                                started=started)


OK = "ok"


@dataclasses.dataclass(frozen=True)
class TxnStep:
    """One step of a transactional producer's script (ClientAdapter.run_transactional).

    ops: "init" (create producer `producer` with `transactional_id` and `timeout_ms`, InitProducerId), "begin",
    "send" (`records`, each with its partition, then wait until all are acknowledged), "commit", "abort", "abandon".
    """
    producer: str
    op: str
    records: tuple[Record, ...] = ()
    transactional_id: str | None = None
    timeout_ms: int = 60_000


@dataclasses.dataclass(frozen=True)
class ConnectFailure:
    """A connection that failed, as one client shows it (ClientAdapter.connect_failure)."""
    error: str  # what the application gets: the exception's class, or librdkafka's error code (_AUTHENTICATION)
    detail: str  # the client's own words on the cause: its error messages and logged errors, one per line

    def __str__(self) -> str:
        return f"{self.error}: {self.detail}"


def error_outcome(name: str) -> str:
    return f"error:{name}"


@dataclasses.dataclass(frozen=True)
class ClusterView:
    """A Metadata answer as a client reports it: the brokers, and each topic's partitions with their leaders. A topic
    the broker called unknown is not in `topics`."""
    brokers: frozenset[tuple[int, str, int]]  # (node id, host, port)
    topics: dict[str, dict[int, int]]  # topic -> partition -> leader's node id


@dataclasses.dataclass(frozen=True)
class GroupListing:
    group_id: str
    state: str  # Kafka's names: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead
    protocol_type: str  # "consumer", or "" for a group that only stores offsets


@dataclasses.dataclass(frozen=True)
class MemberInfo:
    member_id: str
    client_id: str
    host: str
    instance_id: str | None
    assignment: frozenset[tuple[str, int]]


@dataclasses.dataclass(frozen=True)
class GroupInfo:
    group_id: str
    state: str
    protocol_type: str
    protocol: str  # the assignor the group chose
    members: tuple[MemberInfo, ...]


def next_offsets(records: Sequence[Consumed]) -> dict[int, int]:
    """Partition -> the offset after the last of `records` read from it: what a consumer commits for them."""
    found: dict[int, int] = {}
    for record in records:
        found[record.partition] = max(found.get(record.partition, 0), record.offset + 1)
    return found


def run_concurrently(calls: Sequence[Callable], started: Callable[[], None] | None = None) -> list:
    """Runs each call in its own thread; returns their results in order, re-raising the first failure."""
    results: list = [None] * len(calls)
    errors: list[BaseException] = []

    def run(i: int, call: Callable) -> None:
        try:
            results[i] = call()
        except Exception as exc:  # noqa: BLE001 - handed to the caller below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i, call), daemon=True) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    if started is not None:
        started()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results
