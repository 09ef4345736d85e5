"""The fetch path copies no record bytes into Python: proven from the broker's system calls.

32 MiB of records are produced, then strace attaches to the broker and one Fetch reads them all. In that window the
record bytes must leave through sendfile(2) from the segment file, the broker must read (almost) nothing of the
segment file itself (only batch headers, to find where the asked offset starts), must not mmap it, and must write
to sockets only the small response header. A broker that read the records and wrote them from a buffer would show
~32 MiB of read/pread64 and write/sendto instead.
"""
from __future__ import annotations

import os
import random
import re
import signal
import subprocess
from pathlib import Path

import pytest

from compatbroker.protocol.messages.api_versions import ApiVersionsRequest
from compatbroker.protocol.messages.fetch import FetchRequest

from . import clients
from .raw_client import RawClient
from .records import ONE_MIB

RECORD_SIZE = 128 * 1024
RECORDS = 256  # 32 MiB
HEADER_READ_ALLOWANCE = 64 * 1024  # batch-header scans read small chunks; records are megabytes
SOCKET_WRITE_ALLOWANCE = 64 * 1024  # response header and per-partition fields
TRACED = "read,readv,pread64,preadv,preadv2,sendfile,write,writev,sendto,sendmsg,mmap"
FETCH_VERSION = 11  # the newest non-flexible Fetch; answers magic-2 batches as stored (no down-conversion)


def test_fetch_sends_records_with_sendfile(fresh_broker, topic, tmp_path):
    strace = _require_strace()
    values = _produce(fresh_broker.bootstrap, topic)
    segment_dir = fresh_broker.data_dir / f"{topic}-0"
    assert sorted(p.name for p in segment_dir.glob("*.log")), "the records are not in a segment file"

    with RawClient(fresh_broker, "zero-copy-test") as client:
        _check_fetch_version(client)
        trace = tmp_path / "strace.out"
        with _traced(strace, fresh_broker.pid, trace):
            records = _fetch_all(client, topic)

    stats = summarize(trace.read_text(), os.path.realpath(segment_dir))
    assert _values_of(records) == values, "the fetched records differ from the produced ones"
    assert len(records) >= RECORDS * RECORD_SIZE
    assert stats.sendfile_bytes == len(records), (
        f"{len(records)} record bytes were answered, {stats.sendfile_bytes} left the segment file through sendfile")
    assert stats.segment_read_bytes <= HEADER_READ_ALLOWANCE, (
        f"the broker read {stats.segment_read_bytes} bytes of the segment file during the fetch")
    assert stats.socket_write_bytes <= SOCKET_WRITE_ALLOWANCE, (
        f"the broker wrote {stats.socket_write_bytes} bytes to sockets with write/send calls")
    assert not stats.segment_mmaps, f"the segment file was mapped: {stats.segment_mmaps}"


# --- the steps -----------------------------------------------------------------------------------------------------

def _require_strace() -> str:
    try:
        return clients.require_executable("strace")
    except clients.MissingClient as exc:
        pytest.fail(str(exc), pytrace=False)


def _produce(bootstrap: str, topic: str) -> list[bytes]:
    rng = random.Random(7)
    values = [rng.randbytes(RECORD_SIZE) for _ in range(RECORDS)]
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False, acks=-1, linger_ms=50,
                             batch_size=ONE_MIB, max_request_size=4 * ONE_MIB)
    try:
        for future in [producer.send(topic, value=value, partition=0) for value in values]:
            future.get(timeout=30)
    finally:
        producer.close(timeout=5)
    return values


class _traced:
    """strace attached to a running process for the duration of a `with` block."""

    def __init__(self, strace: str, pid: int, out: Path):
        self.cmd = [strace, "-f", "-yy", "-s", "0", "-e", f"trace={TRACED}", "-o", str(out), "-p", str(pid)]

    def __enter__(self):
        self.proc = subprocess.Popen(self.cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
        # strace reports "Process N attached [with K threads]" once every thread is traced.
        lines = []
        for raw in self.proc.stderr:
            lines.append(raw.decode(errors="replace"))
            if "attached" in lines[-1]:
                return self
        raise AssertionError(f"strace could not attach (ptrace not permitted?): {''.join(lines)[-1000:]}")

    def __exit__(self, *exc):
        self.proc.send_signal(signal.SIGINT)  # detaches and flushes the output file
        self.proc.wait(timeout=30)
        self.proc.stderr.close()


def _check_fetch_version(client: RawClient) -> None:
    response = client.call(ApiVersionsRequest(), 0)
    ranges = {entry.api_key: (entry.min_version, entry.max_version) for entry in response.api_keys}
    low, high = ranges.get(1, (0, -1))
    assert low <= FETCH_VERSION <= high, f"the broker does not advertise Fetch v{FETCH_VERSION}: {ranges.get(1)}"


def _fetch_all(client: RawClient, topic: str) -> bytes:
    partition = FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=64 * ONE_MIB)
    request = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=64 * ONE_MIB, session_epoch=-1,
                           topics=[FetchRequest.FetchTopic(topic=topic, partitions=[partition])])
    response = client.call(request, FETCH_VERSION)
    assert response.error_code == 0
    data = response.responses[0].partitions[0]
    assert data.error_code == 0, f"fetch error {data.error_code}"
    return bytes(data.records)


def _values_of(records: bytes) -> list[bytes]:
    from kafka.record import MemoryRecords
    batches = MemoryRecords(records)
    values = []
    while (batch := batches.next_batch()) is not None:
        values.extend(record.value for record in batch)
    return values


# --- reading strace's output ---------------------------------------------------------------------------------------

class TraceStats:
    def __init__(self):
        self.sendfile_bytes = 0
        self.segment_read_bytes = 0
        self.socket_write_bytes = 0
        self.segment_mmaps: list[str] = []


_CALL = re.compile(r"^(?P<pid>\d+)\s+(?P<call>\w+)\((?P<args>.*)\)\s+=\s+(?P<ret>-?(?:0x[0-9a-f]+|\d+))")
_UNFINISHED = re.compile(r"^(?P<pid>\d+)\s+(?P<head>\w+\(.*) <unfinished \.\.\.>$")
_RESUMED = re.compile(r"^(?P<pid>\d+)\s+<\.\.\. (?P<call>\w+) resumed>(?P<tail>.*)$")
_FD = re.compile(r"^\s*\d+<(?P<path>[^>]*)>")
READS = {"read", "readv", "pread64", "preadv", "preadv2"}
WRITES = {"write", "writev", "sendto", "sendmsg"}


def _complete_lines(text: str):
    """strace's lines, with calls that other threads interrupted (`<unfinished ...>`/`<... resumed>`) joined."""
    pending: dict[str, str] = {}
    for line in text.splitlines():
        if match := _UNFINISHED.match(line):
            pending[match["pid"]] = match["head"]
        elif match := _RESUMED.match(line):
            yield f"{match['pid']} {pending.pop(match['pid'], match['call'] + '(')}{match['tail']}"
        else:
            yield line


def _fd_path(argument: str) -> str:
    match = _FD.match(argument)
    return match["path"] if match else ""


def summarize(text: str, segment_dir: str) -> TraceStats:
    stats = TraceStats()

    def in_segment(arg: str) -> bool:
        return _fd_path(arg).startswith(segment_dir) and _fd_path(arg).endswith(".log")

    for line in _complete_lines(text):
        match = _CALL.match(line)
        if match is None:
            continue
        call, args, ret = match["call"], match["args"].split(", "), int(match["ret"], 0)
        if call == "sendfile" and ret > 0 and in_segment(args[1]):
            stats.sendfile_bytes += ret
        elif call in READS and ret > 0 and in_segment(args[0]):
            stats.segment_read_bytes += ret
        elif call in WRITES and ret > 0 and re.match(r"(TCP|UDP|socket)", _fd_path(args[0])):
            stats.socket_write_bytes += ret
        elif call == "mmap" and len(args) >= 5 and in_segment(args[4]):
            stats.segment_mmaps.append(line)
    return stats


def test_trace_summary_sees_copies():
    """The reader of strace's output counts what a copying broker would do: reads of the segment file (also when
    another thread interrupts the call), socket writes, mmaps; and sendfile only from the segment file."""
    segment = "/data/t-0/00000000000000000000.log"
    trace = "\n".join([
        f"10 pread64(8<{segment}>, \"\"..., 1048576, 0 <unfinished ...>",
        "11 futex(0x1, FUTEX_WAKE, 1) = 0",
        "10 <... pread64 resumed>) = 1048576",
        f"10 read(8<{segment}>, \"\"..., 4096) = 4096",
        "10 sendto(7<TCP:[127.0.0.1:9092->127.0.0.1:5000]>, \"\"..., 1048576, 0, NULL, 0) = 1048576",
        f"10 sendfile(7<TCP:[127.0.0.1:9092->127.0.0.1:5000]>, 8<{segment}>, [0] => [100], 100) = 100",
        "10 sendfile(7<TCP:[127.0.0.1:9092->127.0.0.1:5000]>, 9</data/other.bin>, [0] => [50], 50) = 50",
        f"10 sendfile(7<TCP:[127.0.0.1:9092->127.0.0.1:5000]>, 8<{segment}>, [100], 10) = -1 EAGAIN (again)",
        f"10 mmap(NULL, 4096, PROT_READ, MAP_SHARED, 8<{segment}>, 0) = 0x7f0000000000",
    ])
    stats = summarize(trace, "/data/t-0")
    assert stats.segment_read_bytes == 1048576 + 4096
    assert stats.socket_write_bytes == 1048576
    assert stats.sendfile_bytes == 100
    assert len(stats.segment_mmaps) == 1
