"""kcat (the command-line client on librdkafka; Debian's kcat 1.7.1 bundles librdkafka 2.0.2).

What kcat cannot express, and how the adapter copes:
- produce: records are text split by delimiters (with -Z an empty key or value is sent as null, so "empty" and "null"
  cannot both be sent); a large or binary value goes as a file argument instead (one file, one record, text key
  given with -k); no per-record timestamps (librdkafka stamps them); headers (-H) are text and apply to a whole
  invocation, so records are sent in runs of equal headers and partition, one kcat each.
- consume: the output format below carries key and value lengths, so binary keys and values and null/empty are read
  exactly; headers are printed as `name=value,...` text, which cannot carry binary or null header values.
- groups: kcat -G is librdkafka's group consumer. It takes no commands once started: it commits by itself (auto
  commit, and when it closes on SIGTERM or after -c records), and it has no way to read committed offsets back. Its
  rebalances are read from the lines it prints on stderr.
kcat -C is librdkafka's simple consumer: no group.id, no coordinator.
"""
from __future__ import annotations

import dataclasses
import io
import itertools
import json
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

from ..records import EARLIEST, LATEST, MAX_MESSAGE_BYTES, AtOffset, AtTimestamp, Consumed, Record
from .base import DEFAULT_TIMEOUT_S, ClientAdapter, ClientError, ClusterView, ConnectFailure

RECORD_DELIMITER = b"\x1e"  # ASCII record separator
KEY_DELIMITER = b"\x1f"  # ASCII unit separator
# partition|offset|timestamp|key length|value length|headers, newline, key bytes, value bytes, newline
OUTPUT_FORMAT = "%p|%o|%T|%K|%S|%h\\n%k%s\\n"
# What kcat -G prints on stderr when its rebalance callback runs: whole assignments for eager assignors, the
# partitions that change hands for cooperative ones.
REBALANCE_LINE = re.compile(r"^% Group \S+ rebalanced \(memberid [^)]*\): (assigned|revoked): ?(.*)$")
PARTITION_ITEM = re.compile(r"(\S+) \[(\d+)\]")
MEMBER_POLL_S = 0.2


class KcatClient(ClientAdapter):
    name = "kcat"
    expressive = False
    reads_committed = False

    def __init__(self, executable: str | None = None):
        self.executable = executable or shutil.which("kcat") or "kcat"

    def _base(self, bootstrap: str) -> list[str]:
        """The start of every kcat command of this adapter, with its security settings (ClientAdapter.secured)."""
        cmd = [self.executable, "-b", bootstrap, "-X", "broker.address.family=v4", "-X",
               f"message.max.bytes={MAX_MESSAGE_BYTES}"]
        for name, value in (self.security or {}).items():
            cmd += ["-X", f"{name}={value}"]
        return cmd

    def produce(self, bootstrap, topic, records, *, acks=-1, compression=None, timeout_s=DEFAULT_TIMEOUT_S):
        base = self._base(bootstrap) + ["-P", "-t", topic, "-X", f"acks={acks}", "-X", "partitioner=murmur2_random",
                                        "-X", f"compression.codec={compression or 'none'}"]
        runs = itertools.groupby(records, key=lambda r: (r.headers, r.partition, _needs_file(r)))
        for (headers, partition, as_files), run in runs:
            cmd = list(base)
            if partition is not None:
                cmd += ["-p", str(partition)]
            for name, value in headers:
                cmd += ["-H", f"{name}={value.decode()}"]
            if as_files:
                for record in run:
                    self._produce_file(cmd, record, timeout_s)
                continue
            run = list(run)
            for record in run:
                _check_expressible(record)
            payload = b"".join((r.key + KEY_DELIMITER if r.key is not None else b"") + (r.value or b"")
                               + RECORD_DELIMITER for r in run)
            _run(cmd + ["-D", "\\x1e", "-K", "\\x1f", "-Z"], payload, timeout_s, "kcat producer")
        # kcat does not report offsets

    @staticmethod
    def _produce_file(cmd: list[str], record, timeout_s: float) -> None:
        """A value with arbitrary bytes goes as a file argument: without -l, kcat sends each file as one record."""
        _check_expressible(dataclasses.replace(record, value=b"file"))
        with tempfile.NamedTemporaryFile(prefix="kcat-value-") as value:
            value.write(record.value)
            value.flush()
            key = ["-k", record.key.decode()] if record.key is not None else []
            _run(cmd + key + [value.name], b"", timeout_s, "kcat producer (file)")

    def consume(self, bootstrap, topic, count, *, partitions=(0,), start=EARLIEST, timeout_s=DEFAULT_TIMEOUT_S,
                fetch_wait_ms=None, properties=None):
        """`properties`: more librdkafka settings (-X name=value), e.g. client.rack."""
        cmd = self._base(bootstrap) + ["-C", "-t", topic, "-o", _offset_arg(start), "-c", str(count), "-u",
                                       "-f", OUTPUT_FORMAT]
        for name, value in (properties or {}).items():
            cmd += ["-X", f"{name}={value}"]
        if len(partitions) == 1:
            cmd += ["-p", str(partitions[0])]  # otherwise: all partitions of the topic
        if fetch_wait_ms:
            cmd += ["-X", f"fetch.wait.max.ms={fetch_wait_ms}"]
        out = _run(cmd, b"", timeout_s, f"kcat consumer ({count} records)")
        got = parse_output(out)
        if len(got) < count:
            raise ClientError(f"kcat consumer: {len(got)} of {count} records")
        return got

    def metadata(self, bootstrap, topics=None, *, auto_create=False):
        # kcat -L names one topic or none (every topic); allow.auto.create.topics decides whether the broker may
        # create a named one.
        base = self._base(bootstrap) + ["-L", "-J", "-X", f"allow.auto.create.topics={str(auto_create).lower()}"]
        commands = [base] if topics is None else [base + ["-t", topic] for topic in topics]
        brokers, described = set(), {}
        for cmd in commands:
            listed = json.loads(_run(cmd, b"", 30, "kcat -L"))
            for broker in listed["brokers"]:
                host, _, port = broker["name"].rpartition(":")
                brokers.add((broker["id"], host, int(port)))
            described |= {t["topic"]: {p["partition"]: p["leader"] for p in t["partitions"]}
                          for t in listed["topics"] if "error" not in t}
        return ClusterView(frozenset(brokers), described)

    def list_topics(self, bootstrap):
        return set(self.metadata(bootstrap).topics)

    def connect_failure(self, bootstrap, *, timeout_s=20.0):
        # kcat -L gives up after -m seconds: "% ERROR: Failed to acquire metadata", the causes in its FAIL log lines
        cmd = self._base(bootstrap) + ["-L", "-m", str(max(1, int(timeout_s // 2)))]
        try:
            done = subprocess.run(cmd, capture_output=True, timeout=timeout_s + 10, check=False)
        except subprocess.TimeoutExpired as exc:
            raise ClientError(f"kcat -L did not finish within {timeout_s + 10} s") from exc
        stderr = done.stderr.decode(errors="replace")
        if done.returncode == 0:
            raise ClientError(f"kcat -L: connected, expected a failure; stderr: {stderr[-1000:]}")
        error = next((line.removeprefix("% ERROR: ") for line in stderr.splitlines() if line.startswith("% ERROR")),
                     f"exit status {done.returncode}")
        causes = [line.split("]: ", 1)[-1] for line in stderr.splitlines() if "|FAIL|" in line or "|ERROR|" in line]
        return ConnectFailure(error, "\n".join(causes))

    def group_consume(self, bootstrap, topic, group, count, timeout_s=DEFAULT_TIMEOUT_S):
        # kcat stores the offset of each record it prints and commits them when it closes, after -c records
        cmd = self._base(bootstrap) + ["-G", group, topic, "-c", str(count), "-u", "-f", OUTPUT_FORMAT,
                                       "-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000",
                                       "-X", "heartbeat.interval.ms=1000", "-X", "fetch.wait.max.ms=200"]
        got = parse_output(_run(cmd, b"", timeout_s, f"kcat -G ({count} records)"))
        if len(got) != count:
            raise ClientError(f"kcat -G: {len(got)} of {count} records")
        return got

    def produce_idempotent(self, bootstrap, topic, values, *, batch_records, timeout_s):
        # -E: without it kcat exits on a non-fatal error such as a cut connection. librdkafka 2.0.2 backs off its
        # reconnects exponentially up to 10 s: with a proxy cutting connections, the run would be mostly waiting.
        cmd = self._base(bootstrap) + ["-P", "-t", topic, "-p", "0", "-E", "-X", "enable.idempotence=true",
                                       "-X", f"batch.num.messages={batch_records}", "-X", "linger.ms=5",
                                       "-X", "reconnect.backoff.ms=10", "-X", "reconnect.backoff.max.ms=100"]
        for value in values:
            _check_expressible(Record(None, value))
        payload = b"".join(value + RECORD_DELIMITER for value in values)
        try:
            done = subprocess.run(cmd + ["-D", "\\x1e"], input=payload, capture_output=True, timeout=timeout_s,
                                  check=False)
        except subprocess.TimeoutExpired as exc:
            raise ClientError(f"kcat idempotent producer: not done within {timeout_s} s: "
                              f"{(exc.stderr or b'').decode(errors='replace')[-1500:]}") from None
        stderr = done.stderr.decode(errors="replace")
        # transport errors are expected here; a record that was given up on is not
        if done.returncode != 0 or "Delivery failed" in stderr:
            raise ClientError(f"kcat idempotent producer exited {done.returncode}: {stderr[-1500:]}")

    def run_member(self, spec, session):
        KcatMember(self, spec, session).run()

    def list_offsets(self, bootstrap, topic, partition, timestamp):
        found = []
        for ts in (-2, -1, timestamp):  # -2 earliest, -1 latest: Kafka's ListOffsets sentinels
            out = _run(self._base(bootstrap) + ["-Q", "-t", f"{topic}:{partition}:{ts}"], b"", 20, "kcat -Q")
            found.append(_parse_query(out.decode(), topic, partition))
        earliest, latest, at = found
        return earliest, latest, None if at is None or at < 0 else at


def _needs_file(record) -> bool:
    value = record.value
    return value is not None and (RECORD_DELIMITER in value or KEY_DELIMITER in value or len(value) > 65536)


def _check_expressible(record) -> None:
    problems = []
    if record.timestamp is not None:
        problems.append("explicit timestamp")
    for part in (record.key, record.value):
        if part is not None and (part == b"" or RECORD_DELIMITER in part or KEY_DELIMITER in part):
            problems.append(f"unsendable bytes {part[:20]!r}")
    if any(value is None for _, value in record.headers):
        problems.append("null header value")
    if problems:
        raise ValueError(f"kcat cannot send {record}: {', '.join(problems)}")


def _offset_arg(start) -> str:
    if start == EARLIEST:
        return "beginning"
    if start == LATEST:
        return "end"
    if isinstance(start, AtOffset):
        return str(start.offset)
    if isinstance(start, AtTimestamp):
        return f"s@{start.timestamp}"
    raise ValueError(f"unknown start {start!r}")


def _run(cmd: list[str], stdin: bytes, timeout_s: float, what: str) -> bytes:
    try:
        done = subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout_s,
                              check=False)
    except subprocess.TimeoutExpired as exc:
        raise ClientError(f"{what} did not finish within {timeout_s} s; stderr: "
                          f"{(exc.stderr or b'').decode(errors='replace')[-1500:]}"
                          f"\nstdout so far: {len(exc.stdout or b'')} bytes") from None
    stderr = done.stderr.decode(errors="replace")
    if done.returncode != 0 or "ERROR" in stderr or "failed" in stderr.lower():
        raise ClientError(f"{what} exited {done.returncode}: {stderr[-1500:]}\ncommand: {' '.join(cmd)}")
    return done.stdout


def parse_output(out: bytes) -> list[Consumed]:
    """Parses OUTPUT_FORMAT: a text line with lengths, then exactly that many key and value bytes."""
    stream = io.BytesIO(out)
    return list(iter(lambda: read_record(stream), None))


def read_record(stream) -> Consumed | None:
    """The next OUTPUT_FORMAT record of a binary stream, None at its end."""
    line = stream.readline()
    if not line:
        return None
    partition, offset, timestamp, key_len, value_len, headers = line.rstrip(b"\n").split(b"|", 5)
    key_len, value_len = int(key_len), int(value_len)
    key = None if key_len < 0 else _read_exactly(stream, key_len)
    value = None if value_len < 0 else _read_exactly(stream, value_len)
    end = stream.read(1)
    assert end == b"\n", f"kcat output out of step after record {partition}@{offset}: {end!r}"
    return Consumed(int(partition), int(offset), key, value, _parse_headers(headers), int(timestamp))


def _read_exactly(stream, count: int) -> bytes:
    data = stream.read(count)
    assert len(data) == count, f"kcat output ends inside a record ({len(data)} of {count} bytes)"
    return data


def _parse_headers(text: bytes) -> tuple:
    if not text:
        return ()
    return tuple((name.decode(), value) for name, _, value in (item.partition(b"=") for item in text.split(b",")))


def _parse_query(text: str, topic: str, partition: int) -> int | None:
    """kcat -Q prints `<topic> [<partition>] offset <n>` per partition."""
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 4 and words[0] == topic and words[1] == f"[{partition}]" and words[2] == "offset":
            return int(words[3])
    raise ClientError(f"kcat -Q: no offset for {topic}[{partition}] in {text!r}")


class KcatMember:
    """A group member (protocol: member.py) made of a kcat -G process: its stdout gives the records, its stderr the
    rebalances. kcat runs under `setpriv --pdeathsig KILL`, so that it dies with this process when a test kills the
    member. Both streams are read in threads and handed to the session from the member's loop, in one thread."""

    def __init__(self, client: KcatClient, spec: dict, session):
        self.spec = spec
        self.session = session
        self.events: queue.Queue = queue.Queue()
        cmd = client._base(spec["bootstrap"]) + ["-G", spec["group"], spec["topic"], "-u", "-f", OUTPUT_FORMAT]
        settings = {"client.id": spec["client_id"], "auto.offset.reset": "earliest",
                    "session.timeout.ms": spec["session_timeout_ms"],
                    "heartbeat.interval.ms": spec["heartbeat_interval_ms"],
                    "max.poll.interval.ms": spec["rebalance_timeout_ms"], "fetch.wait.max.ms": spec["fetch_wait_ms"],
                    "group.instance.id": spec["instance_id"], "partition.assignment.strategy": spec["strategy"]}
        for name, value in settings.items():
            if value is not None:
                cmd += ["-X", f"{name}={value}"]
        self.kcat = subprocess.Popen([require_setpriv(), "--pdeathsig", "KILL", *cmd], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.readers = [threading.Thread(target=self._read_records, daemon=True),
                        threading.Thread(target=self._read_stderr, daemon=True)]
        for reader in self.readers:
            reader.start()

    def run(self) -> None:
        self.session.serve(self.poll, self.commit, self.close)

    def poll(self) -> None:
        """Hands over what kcat printed, waiting up to MEMBER_POLL_S for something."""
        try:
            self._handle(self.events.get(timeout=MEMBER_POLL_S))
        except queue.Empty:
            if self.kcat.poll() is not None:
                raise ClientError(f"kcat -G exited with status {self.kcat.returncode} unasked") from None
        self._handle_queued()

    @staticmethod
    def commit(offsets) -> None:
        raise ClientError("kcat -G takes no commit command: it commits by itself")

    def close(self) -> None:
        """SIGTERM: kcat closes its consumer (commit, LeaveGroup) and exits; what it printed until then is handled."""
        self.kcat.send_signal(signal.SIGTERM)
        code = self.kcat.wait(timeout=20)
        for reader in self.readers:
            reader.join(timeout=5)
        self._handle_queued()
        if code != 0:
            raise ClientError(f"kcat -G exited with status {code} on SIGTERM")

    def _handle_queued(self) -> None:
        while not self.events.empty():
            self._handle(self.events.get_nowait())

    def _handle(self, event: tuple) -> None:
        kind, payload = event
        if kind == "record":
            self.session.delivered([(payload.partition, payload.offset, payload.value)])
        elif kind == "assigned":
            self.session.assigned(payload)
        elif kind == "revoked":
            self.session.revoked(payload)

    def _read_records(self) -> None:
        for record in iter(lambda: read_record(self.kcat.stdout), None):
            self.events.put(("record", record))

    def _read_stderr(self) -> None:
        """Rebalance lines become events; every line also goes to this process's stderr (the member's log)."""
        for raw in self.kcat.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            print(line, file=sys.stderr, flush=True)
            match = REBALANCE_LINE.match(line)
            if match:
                ours = [int(p) for topic, p in PARTITION_ITEM.findall(match[2]) if topic == self.spec["topic"]]
                self.events.put((match[1], ours))


def require_setpriv() -> str:
    path = shutil.which("setpriv")
    if path is None:
        raise ClientError("setpriv (util-linux) is missing: kcat group members need it")
    return path
