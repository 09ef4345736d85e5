"""Shared builders for the storage tests: batches, a log in a temp dir, and reading records back."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

from compatbroker.protocol.records.batch import CRC_OFFSET, build_batch, iter_batches, iter_records
from compatbroker.storage.log import Log
from compatbroker.storage.log_config import LogConfig
from compatbroker.storage.segment import open_segments

NOW = 1_700_000_000_000

SMALL = LogConfig(segment_bytes=4096, index_interval_bytes=256, segment_index_bytes=4096,
                  message_timestamp_after_max_ms=2**62)


def batch(values, *, timestamp=NOW, keys=None, **kwargs) -> bytes:
    """A v2 batch holding one record per value (keys default to none), timestamps ascending from `timestamp`."""
    keys = keys or [None] * len(values)
    return build_batch([(key, value, (), timestamp + i) for i, (key, value) in enumerate(zip(keys, values))],
                       **kwargs)


def corrupt_crc(data: bytes) -> bytes:
    """`data` with the first batch's stored CRC flipped, so that it no longer matches the bytes."""
    out = bytearray(data)
    out[CRC_OFFSET] ^= 0xFF
    return bytes(out)


def open_log(directory, config=SMALL, **kwargs) -> Log:
    kwargs.setdefault("now_ms", NOW)
    return Log.open(os.path.join(str(directory), "topic-0"), "topic", 0, config, **kwargs)


def batches_of(data: bytes):
    """[(header, bytes)] of the batches in `data`."""
    return [(header, data[pos:pos + header.size]) for pos, header in iter_batches(data)]


def records_of(data: bytes):
    """[(offset, key, value)] of every record in `data`."""
    out = []
    for header, raw in batches_of(data):
        out += [(r.offset, r.key, r.value) for r in iter_records(raw, max_size=1 << 26)]
    return out


def all_bytes(log: Log) -> bytes:
    return b"".join(segment.read_bytes(0, segment.size) for segment in log.segments)


def directory_snapshot(directory) -> dict:
    """name -> bytes of every file under `directory` (indexes included): to prove nothing changed."""
    snapshot = {}
    for root, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as source:
                snapshot[os.path.relpath(path, directory)] = source.read()
    return snapshot


def abandon(log: Log) -> None:
    """Drop a log the way a killed process does: descriptors closed, in-memory index entries never written."""
    for segment in log.segments:
        open_segments.discard(segment)
        for index in (segment._offset_index, segment._time_index):
            index._deleted = True  # nothing more reaches the file
            index._data = None
        if segment._file is not None:
            segment._file.close()


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_and_kill(module: str, args: list, acks_before_kill: int, *,
                 one_in_flight: bool = False) -> list[tuple[int, ...]]:
    """Run `python -m module args...` (a writer printing one line of integers per acknowledged append), read
    `acks_before_kill` of those lines, then SIGKILL it; returns what it acknowledged. With `one_in_flight` the
    writer waits for a line on its stdin before each next append, which this sends after reading each
    acknowledgement: like a producer with one request in flight, it is never more than one append ahead of the
    acknowledgements read, however slowly they are read on a loaded machine."""
    child = subprocess.Popen([sys.executable, "-m", module, *map(str, args)], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, stdin=subprocess.PIPE if one_in_flight else None, text=True)
    acks = []
    try:
        while len(acks) < acks_before_kill:
            line = child.stdout.readline()
            if not line:
                raise AssertionError(f"writer exited early: {child.stderr.read()}")
            acks.append(tuple(map(int, line.split())))
            if one_in_flight:
                child.stdin.write("\n")
                child.stdin.flush()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        for stream in (child.stdin, child.stdout, child.stderr):
            if stream is not None:
                try:
                    stream.close()
                except BrokenPipeError:  # the killed writer's stdin, with a line it never read
                    pass
    return acks
