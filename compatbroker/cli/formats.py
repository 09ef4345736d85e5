"""How `compatbroker consume` writes records and how `produce` reads them (functions of bytes to bytes), and the
progress line and summary both show (`Meter`).

Output formats of `consume`:

- raw (the default): each record's value followed by a newline; a null value prints as an empty line.
- `--format json`: one JSON object per line (JSON lines) with the keys `topic`, `partition`, `offset`,
  `timestamp` (ms), `timestamp_type` (`CreateTime`, `LogAppendTime`, or `NoTimestampType` for legacy magic 0
  data), `key`, `value` and `headers` (a list of `{"key": name, "value": ...}` in record order, repeated names
  kept). A key, value or header value is `null` when null, a JSON string when its bytes are valid UTF-8, and
  otherwise an object `{"base64": "..."}` holding the bytes in base64 (a string never needs that marker, so a
  script can tell the two apart: `jq '.value | if type == "object" then .base64 | @base64d else . end'`).
- `-f TEMPLATE`, kcat's `-f`: `%t` topic, `%p` partition, `%o` offset, `%k` key, `%K` key length, `%s` value,
  `%S` value length (-1 for null, as kcat), `%R` value length as a 4-byte big-endian integer, `%T` timestamp (ms),
  `%h` headers as `name=value` separated by commas, `%%` a percent sign; escapes `\\n`, `\\t`, `\\r`, `\\\\` and
  `\\xHH`; any other escaped character stands for itself. Null keys and values print as nothing. Nothing is added
  after the template: end it with `\\n` for one record per line.

Input of `produce`: one record per line (`\\n`, an `\\r\\n` ending is taken as well); empty lines are skipped, as
kcat skips them. With a key separator (`-K SEP`) a line is split at the first SEP into key and value; a line
without SEP is a value with a null key (kcat's -K).

Java client properties: the producer and consumer settings Kafka's tools read from their properties files (`acks`,
`linger.ms`, `group.id`, `auto.offset.reset`, ...) are taken from `--command-config FILE` and `-X name=value` for
the options not given on the command line (`settings_from_properties`).

Progress: a live line (records, records/s, MB/s) on stderr only when stderr is a terminal and records do not go to
that same terminal (rich, transient), then one summary line on stderr:
`produced|consumed N records (B bytes) to|from TOPIC in S s (R records/s, M MB/s)`, B counting key and value bytes.
"""
from __future__ import annotations

import base64
import json
import struct
import sys
import time

import click
from click.core import ParameterSource

__all__ = ["TIMESTAMP_TYPES", "Meter", "TemplateError", "binary_stream", "boolean", "choice", "compile_template",
           "json_bytes", "json_line", "natural", "raw_line", "record_document", "settings_from_properties",
           "split_lines", "split_record", "unescape"]

TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime", None: "NoTimestampType"}

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}
_BE32 = struct.Struct(">i")


class TemplateError(ValueError):
    """A `-f` template that cannot be used (an unknown or dangling `%` directive)."""


def binary_stream(stream):
    """The byte stream under a text stream such as sys.stdin (records are bytes, not text)."""
    return getattr(stream, "buffer", stream)


def json_bytes(data: bytes | None):
    """Bytes as JSON: None, the UTF-8 text, or {"base64": ...} when they are not valid UTF-8."""
    if data is None:
        return None
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def record_document(record) -> dict:
    """The JSON document of a consumed record (see the module docstring)."""
    return {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "timestamp_type": TIMESTAMP_TYPES.get(record.timestamp_type, "NoTimestampType"),
        "key": json_bytes(record.key),
        "value": json_bytes(record.value),
        "headers": [{"key": name, "value": json_bytes(value)} for name, value in record.headers],
    }


def json_line(record) -> bytes:
    return json.dumps(record_document(record), ensure_ascii=False).encode("utf-8") + b"\n"


def raw_line(record) -> bytes:
    return (record.value or b"") + b"\n"


def unescape(text: str) -> bytes:
    """kcat's escapes in a template or separator: \\n \\t \\r \\\\ \\xHH; any other escaped character stands
    for itself."""
    out = bytearray()
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            following = text[i + 1]
            if following == "x" and _is_hex(text[i + 2:i + 4]):
                out.append(int(text[i + 2:i + 4], 16))
                i += 4
                continue
            out += _ESCAPES.get(following, following).encode("utf-8")
            i += 2
            continue
        out += char.encode("utf-8")
        i += 1
    return bytes(out)


def _is_hex(pair: str) -> bool:
    return len(pair) == 2 and all(c in "0123456789abcdefABCDEF" for c in pair)


def _headers_text(headers) -> bytes:
    return b",".join(name.encode("utf-8") + b"=" + (value or b"") for name, value in headers)


def _length(data) -> bytes:
    return b"-1" if data is None else str(len(data)).encode("ascii")


_DIRECTIVES = {
    "t": lambda r: r.topic.encode("utf-8"),
    "p": lambda r: str(r.partition).encode("ascii"),
    "o": lambda r: str(r.offset).encode("ascii"),
    "k": lambda r: r.key or b"",
    "K": lambda r: _length(r.key),
    "s": lambda r: r.value or b"",
    "S": lambda r: _length(r.value),
    "R": lambda r: _BE32.pack(-1 if r.value is None else len(r.value)),
    "T": lambda r: str(r.timestamp).encode("ascii"),
    "h": lambda r: _headers_text(r.headers),
}


def compile_template(template: str):
    """A function record -> bytes for a kcat-like `-f` template; TemplateError for a bad directive."""
    parts: list = []
    literal = []
    i = 0
    while i < len(template):
        char = template[i]
        if char != "%":
            literal.append(char)
            i += 1
            continue
        if i + 1 >= len(template):
            raise TemplateError("the template ends with a lone '%'")
        directive = template[i + 1]
        i += 2
        if directive == "%":
            literal.append("%")
            continue
        if directive not in _DIRECTIVES:
            known = " ".join("%" + d for d in _DIRECTIVES)
            raise TemplateError(f"unknown directive %{directive} (known: {known} %%)")
        if literal:
            parts.append(unescape("".join(literal)))
            literal = []
        parts.append(_DIRECTIVES[directive])
    if literal:
        parts.append(unescape("".join(literal)))

    def render(record) -> bytes:
        return b"".join(part if isinstance(part, bytes) else part(record) for part in parts)

    return render


def split_lines(buffer: bytearray, final: bool = False) -> list[bytes]:
    """Take the complete lines out of `buffer` (in place), without their line endings; with `final`, a last line
    lacking its newline too. Empty lines are dropped."""
    end = buffer.rfind(b"\n")
    if end < 0:
        if not final or not buffer:
            return []
        chunk = bytes(buffer)
        buffer.clear()
        lines = [chunk]
    else:
        lines = bytes(buffer[:end]).split(b"\n")
        del buffer[:end + 1]
        if final and buffer:
            lines.append(bytes(buffer))
            buffer.clear()
    return [line[:-1] if line.endswith(b"\r") else line for line in lines if line and line != b"\r"]


def split_record(line: bytes, separator: bytes | None) -> tuple[bytes | None, bytes]:
    """(key, value) of an input line: split at the first `separator`, or (None, line) without one."""
    if separator:
        key, found, value = line.partition(separator)
        if found:
            return key, value
    return None, line


# --- progress and summaries ---------------------------------------------------------------------------------------

class Meter:
    """Counts records and bytes of a produce or consume run: a live rich progress line (records, records/s, MB/s)
    on stderr when stderr is a terminal, and the summary line printed at the end. A run that `writes_stdout`
    shows no live line when stdout is that terminal too: records printed there would tear it apart."""

    REFRESH_S = 0.2

    def __init__(self, verb: str, *, writes_stdout: bool = False, live: bool | None = None):
        self.verb = verb
        self.records = 0
        self.bytes = 0
        self.started = time.monotonic()
        self._next_refresh = 0.0
        self._progress = None
        if live is None:
            live = sys.stderr.isatty() and not (writes_stdout and sys.stdout.isatty())
        if live:
            self._start_progress()

    def _start_progress(self) -> None:
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        from .output import make_console
        self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                                  console=make_console(stderr=True), transient=True)
        self._task = self._progress.add_task(self._rates())
        self._progress.start()

    def add(self, records: int, size: int) -> None:
        self.records += records
        self.bytes += size
        if self._progress is not None and time.monotonic() >= self._next_refresh:
            self._next_refresh = time.monotonic() + self.REFRESH_S
            self._progress.update(self._task, description=self._rates())

    def _rates(self) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        return (f"{self.verb} {self.records} records, {self.records / elapsed:.0f} records/s, "
                f"{self.bytes / elapsed / 1e6:.2f} MB/s")

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def summary(self, where: str) -> str:
        """`<verb> N records (B bytes) <where> in S s (R records/s, M MB/s)`."""
        elapsed = max(time.monotonic() - self.started, 1e-9)
        return (f"{self.verb} {self.records} records ({self.bytes} bytes) {where} in {elapsed:.2f} s "
                f"({self.records / elapsed:.0f} records/s, {self.bytes / elapsed / 1e6:.2f} MB/s)")


# --- Java client properties ---------------------------------------------------------------------------------------

def settings_from_properties(ctx, properties, table, values: dict) -> dict:
    """`values` (the command's parameters by name) with those left at their default taken from `properties`:
    `table` maps a Java property name to (parameter name, converter). A value the converter refuses (ValueError)
    is a usage error (exit 2)."""
    chosen = dict(values)
    for name, (parameter, convert) in table.items():
        if name not in properties or ctx.get_parameter_source(parameter) not in (ParameterSource.DEFAULT, None):
            continue
        try:
            chosen[parameter] = convert(properties[name])
        except ValueError as exc:
            raise click.UsageError(f"client property {name}={properties[name]!r}: {exc}", ctx) from None
    return chosen


def choice(*allowed: str):
    """A converter accepting one of `allowed` (case-insensitive)."""
    def convert(text: str) -> str:
        value = text.strip().lower()
        if value not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}")
        return value
    return convert


def boolean(text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise ValueError("expected true or false")
    return value == "true"


def natural(text: str) -> int:
    value = int(text.strip())
    if value < 0:
        raise ValueError("expected a number of 0 or more")
    return value
