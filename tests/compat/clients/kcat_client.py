"""kcat (the command-line client on librdkafka; Debian's kcat 1.7.1 bundles librdkafka 2.0.2).

What kcat cannot express, and how the adapter copes:
- produce: records are text split by delimiters (with -Z an empty key or value is sent as null, so "empty" and "null"
  cannot both be sent); a large or binary value goes as a file argument instead (one file, one record, text key
  given with -k); no per-record timestamps (librdkafka stamps them); headers (-H) are text and apply to a whole
  invocation, so records are sent in runs of equal headers and partition, one kcat each.
- consume: the output format below carries key and value lengths, so binary keys and values and null/empty are read
  exactly; headers are printed as `name=value,...` text, which cannot carry binary or null header values.
kcat -C is librdkafka's simple consumer: no group.id, no coordinator.
"""
from __future__ import annotations

import dataclasses
import itertools
import shutil
import subprocess
import tempfile

from ..records import EARLIEST, LATEST, MAX_MESSAGE_BYTES, AtOffset, AtTimestamp, Consumed
from .base import DEFAULT_TIMEOUT_S, ClientAdapter, ClientError

RECORD_DELIMITER = b"\x1e"  # ASCII record separator
KEY_DELIMITER = b"\x1f"  # ASCII unit separator
# partition|offset|timestamp|key length|value length|headers, newline, key bytes, value bytes, newline
OUTPUT_FORMAT = "%p|%o|%T|%K|%S|%h\\n%k%s\\n"


class KcatClient(ClientAdapter):
    name = "kcat"
    expressive = False

    def __init__(self, executable: str | None = None):
        self.executable = executable or shutil.which("kcat") or "kcat"

    def _base(self, bootstrap: str) -> list[str]:
        return [self.executable, "-b", bootstrap, "-X", "broker.address.family=v4", "-X",
                f"message.max.bytes={MAX_MESSAGE_BYTES}"]

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
                fetch_wait_ms=None):
        cmd = self._base(bootstrap) + ["-C", "-t", topic, "-o", _offset_arg(start), "-c", str(count), "-u",
                                       "-f", OUTPUT_FORMAT]
        if len(partitions) == 1:
            cmd += ["-p", str(partitions[0])]  # otherwise: all partitions of the topic
        if fetch_wait_ms:
            cmd += ["-X", f"fetch.wait.max.ms={fetch_wait_ms}"]
        out = _run(cmd, b"", timeout_s, f"kcat consumer ({count} records)")
        got = parse_output(out)
        if len(got) < count:
            raise ClientError(f"kcat consumer: {len(got)} of {count} records")
        return got

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
    got = []
    position = 0
    while position < len(out):
        end = out.index(b"\n", position)
        partition, offset, timestamp, key_len, value_len, headers = out[position:end].split(b"|", 5)
        position = end + 1
        key_len, value_len = int(key_len), int(value_len)
        key = None if key_len < 0 else out[position:position + key_len]
        position += max(key_len, 0)
        value = None if value_len < 0 else out[position:position + value_len]
        position += max(value_len, 0)
        assert out[position:position + 1] == b"\n", f"kcat output out of step at byte {position}"
        position += 1
        got.append(Consumed(int(partition), int(offset), key, value, _parse_headers(headers), int(timestamp)))
    return got


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
