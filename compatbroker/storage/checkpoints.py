"""Kafka's small text files: checkpoint files, `partition.metadata` and `meta.properties`.

A checkpoint file is

    <version>
    <number of entries>
    <entry>            one per line, fields separated by single spaces

Data-dir level files (`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
`cleaner-offset-checkpoint`, `replication-offset-checkpoint`) hold `<topic> <partition> <offset>` entries at
version 0; a partition's `leader-epoch-checkpoint` holds `<leader epoch> <start offset>` entries at version 0.

Every write goes to a temp file of its own (`<name>.<unique>.tmp`), is fsynced, renamed over the old file, and the
directory is fsynced, so a crash leaves either the old file or the new one, never a mix (and a stray `.tmp`, which
start-up removes). Writes of one file take turns (a lock per path, in the process), and the data may be given as a
function called once the turn has come, so that the newest state is written last. A writer that took a `WriteTicket`
when it snapshotted its state is skipped when a newer ticket's write has already landed: an older snapshot that
finishes last never replaces a newer one. A file that does not parse raises CheckpointError.
"""
from __future__ import annotations

import base64
import itertools
import os
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar, Union

T = TypeVar("T")

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"  # high watermarks
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"


class CheckpointError(ValueError):
    """A checkpoint or metadata file is malformed."""


def fsync_path(path: str) -> None:
    """fsync a file or a directory by its path: a file's data (written through any descriptor or mapping), or the
    renames and unlinks inside a directory, become durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


TEMP_SUFFIX = ".tmp"

Data = Union[str, bytes, Callable[[], Union[str, bytes]]]


class _FileWriter:
    """The turn-taking of one path's writers: a lock, and the newest ticket issued and written."""

    __slots__ = ("lock", "issued", "written", "__weakref__")

    def __init__(self):
        self.lock = threading.Lock()
        self.issued = 0
        self.written = 0


_writers: weakref.WeakValueDictionary[str, _FileWriter] = weakref.WeakValueDictionary()
_writers_lock = threading.Lock()
_temp_names = itertools.count()


def _writer(path: str) -> _FileWriter:
    path = os.path.abspath(path)
    with _writers_lock:
        writer = _writers.get(path)
        if writer is None:
            writer = _writers[path] = _FileWriter()
        return writer


class WriteTicket:
    """Taken when a writer snapshots the state it will write (holding it keeps the path's bookkeeping alive)."""

    __slots__ = ("writer", "number")

    def __init__(self, path: str):
        self.writer = _writer(path)
        with _writers_lock:
            self.writer.issued += 1
            self.number = self.writer.issued


def write_atomically(path: str, data: Data, *, sync: bool = True, ticket: WriteTicket | None = None) -> bool:
    """Replace `path` with `data` (text as UTF-8; a function is called for it once this writer's turn has come):
    temp file, fsync, rename, fsync of the directory. Without `sync` the fsyncs are left to the caller: readers
    still never see a half-written file. With a `ticket`, nothing is written if a newer ticket's write has landed
    already. Returns whether the file was written."""
    writer = ticket.writer if ticket is not None else _writer(path)
    with writer.lock:
        if ticket is not None:
            if ticket.number < writer.written:
                return False
            writer.written = ticket.number
        if callable(data):
            data = data()
        temp = f"{path}.{os.getpid()}-{next(_temp_names)}{TEMP_SUFFIX}"
        try:
            with open(temp, "wb") as out:
                out.write(data.encode() if isinstance(data, str) else data)
                if sync:
                    out.flush()
                    os.fsync(out.fileno())
            os.replace(temp, path)
        except BaseException:
            _remove_quietly(temp)
            raise
    if sync:
        fsync_path(os.path.dirname(os.path.abspath(path)))
    return True


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def remove_temp_files(directory: str) -> None:
    """Remove the temp files a crash left behind in `directory` (at start-up, before any writer runs)."""
    for name in os.listdir(directory):
        if name.endswith(TEMP_SUFFIX):
            _remove_quietly(os.path.join(directory, name))


class CheckpointFile:
    """A checkpoint file with entries of type T, given how to format one as a line and parse one back."""

    def __init__(self, path: str, version: int, format_entry: Callable[[T], str],
                 parse_entry: Callable[[list[str]], T]):
        self.path = path
        self.version = version
        self._format = format_entry
        self._parse = parse_entry

    def write(self, entries: Iterable[T] | Callable[[], Iterable[T]], *, ticket: WriteTicket | None = None) -> None:
        """Write `entries` (or what the function returns, called once this writer's turn has come)."""
        def text() -> str:
            lines = [self._format(entry) for entry in (entries() if callable(entries) else entries)]
            return "\n".join([str(self.version), str(len(lines)), *lines]) + "\n"

        write_atomically(self.path, text, ticket=ticket)

    def read(self) -> list[T]:
        """The entries, or [] when the file does not exist."""
        try:
            with open(self.path, encoding="utf-8") as source:
                lines = source.read().splitlines()
        except FileNotFoundError:
            return []
        try:
            version, count = int(lines[0]), int(lines[1])
        except (IndexError, ValueError):
            raise CheckpointError(f"{self.path}: bad version or entry count") from None
        if version != self.version:
            raise CheckpointError(f"{self.path}: version {version}, expected {self.version}")
        entries = [line for line in lines[2:] if line.strip()]
        if len(entries) != count:
            raise CheckpointError(f"{self.path}: says {count} entries, holds {len(entries)}")
        try:
            return [self._parse(line.split()) for line in entries]
        except (IndexError, ValueError):
            raise CheckpointError(f"{self.path}: malformed entry") from None


def offset_checkpoint(path: str) -> CheckpointFile:
    """A data-dir level checkpoint of `topic partition offset` entries, read as {(topic, partition): offset}."""

    def parse(fields: list[str]) -> tuple[tuple[str, int], int]:
        if len(fields) != 3:
            raise ValueError("expected 3 fields")
        return (fields[0], int(fields[1])), int(fields[2])

    return CheckpointFile(path, 0, lambda entry: f"{entry[0][0]} {entry[0][1]} {entry[1]}", parse)


def read_offsets(path: str) -> dict[tuple[str, int], int]:
    return dict(offset_checkpoint(path).read())


def write_offsets(path: str, offsets: Mapping[tuple[str, int], int] | Callable[[], Mapping[tuple[str, int], int]],
                  *, ticket: WriteTicket | None = None) -> None:
    """Write the offsets (or those the function returns once this writer's turn has come)."""
    offset_checkpoint(path).write(lambda: sorted((offsets() if callable(offsets) else offsets).items()),
                                  ticket=ticket)


def leader_epoch_checkpoint(path: str) -> CheckpointFile:
    """A partition's `epoch start-offset` entries, as (epoch, start offset) tuples."""

    def parse(fields: list[str]) -> tuple[int, int]:
        if len(fields) != 2:
            raise ValueError("expected 2 fields")
        return int(fields[0]), int(fields[1])

    return CheckpointFile(path, 0, lambda entry: f"{entry[0]} {entry[1]}", parse)


# --- topic ids, partition.metadata, meta.properties ---------------------------------------------------------------

def uuid_to_string(value: uuid.UUID) -> str:
    """Kafka's text form of a Uuid: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def uuid_from_string(text: str) -> uuid.UUID:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        return uuid.UUID(bytes=raw)
    except (ValueError, TypeError):
        raise CheckpointError(f"{text!r} is not a Kafka Uuid") from None


def write_partition_metadata(path: str, topic_id: uuid.UUID, *, sync: bool = True) -> None:
    """Without `sync`, the caller fsyncs the file and its directory (see `fsync_path`) before relying on it."""
    write_atomically(path, f"version: 0\ntopic_id: {uuid_to_string(topic_id)}", sync=sync)


def read_partition_metadata(path: str) -> uuid.UUID | None:
    """The topic id in a `partition.metadata` file, None when the file is absent."""
    try:
        fd = os.open(path, os.O_RDONLY)  # plain reads: start-up reads one per partition
    except FileNotFoundError:
        return None
    try:
        text = os.read(fd, 4096).decode("utf-8", "replace")
    finally:
        os.close(fd)
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    if fields.get("version", "").strip() != "0" or "topic_id" not in fields:
        raise CheckpointError(f"{path}: expected version 0 and a topic_id")
    return uuid_from_string(fields["topic_id"].strip())


def write_properties(path: str, properties: Mapping[str, str]) -> None:
    """A Java properties file as Kafka writes `meta.properties`: a comment with the date, then key=value lines."""
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
    lines = ["#", f"#{stamp}", *(f"{key}={value}" for key, value in sorted(properties.items()))]
    write_atomically(path, "\n".join(lines) + "\n")


def read_properties(path: str) -> dict[str, str] | None:
    """key=value lines of a simple properties file (comments skipped), None when absent."""
    try:
        with open(path, encoding="utf-8") as source:
            lines = source.read().splitlines()
    except FileNotFoundError:
        return None
    properties = {}
    for line in lines:
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise CheckpointError(f"{path}: line {line!r} is not key=value")
        properties[key.strip()] = value.strip()
    return properties
