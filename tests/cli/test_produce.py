"""`compatbroker produce` against compatbroker: lines to records (keys, headers), placement, codecs, the per-record
`--format json` lines, the summary line and the exit codes."""
from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import sys

import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from .helpers import REPO_ROOT, run_process, wait_until
from .stream_helpers import run_bytes, start_process

RESULT_KEYS = {"topic", "partition", "offset", "timestamp", "error"}


def produce(broker, topic, *args, input: bytes):
    return run_bytes("produce", topic, "-b", broker.bootstrap_servers, *args, input=input)


def test_lines_become_records_with_keys_and_headers(broker, name):
    broker.create_topic(name, 1)
    ran = produce(broker, name, "-K", ":", "-H", "source=cli", "-H", "empty=", "-H", "eq=a=b",
                  input=b"k1:v1\n\nno key here\nk2:v:with:colons\r\n:empty key\nlast:no newline")
    assert ran.code == 0, ran.stderr
    assert ran.stdout == b""
    assert ran.stderr.startswith("produced 5 records (") and f" to {name} in " in ran.stderr
    stored = broker.records(name, 0)
    assert [(r.key, r.value) for r in stored] == [(b"k1", b"v1"), (None, b"no key here"), (b"k2", b"v:with:colons"),
                                                  (b"", b"empty key"), (b"last", b"no newline")]
    assert {tuple(r.headers) for r in stored} == {(("source", b"cli"), ("empty", b""), ("eq", b"a=b"))}


def test_escaped_separator_and_binary_values(broker, name):
    broker.create_topic(name, 1)
    assert produce(broker, name, "-K", "\\t", input=b"key\t\xff\xfe value\n").code == 0
    assert [(r.key, r.value) for r in broker.records(name, 0)] == [(b"key", b"\xff\xfe value")]


def test_json_lines_report_each_record_where_it_was_written(broker, name):
    broker.create_topic(name, 4)
    keys = [b"user-%d" % i for i in range(20)]
    ran = produce(broker, name, "-K", "=", "--format", "json", input=b"".join(k + b"=x\n" for k in keys))
    results = ran.json_lines()
    assert all(set(result) == RESULT_KEYS and result["error"] is None for result in results)
    assert len(results) == 20
    # offsets as stored, keys placed by murmur2 as kafka-python's (and the Java client's) default partitioner
    by_partition = {}
    for result in results:
        by_partition.setdefault(result["partition"], []).append(result["offset"])
    for partition, offsets in by_partition.items():
        stored = broker.records(name, partition)
        assert [r.offset for r in stored] == sorted(offsets)
        assert {r.key for r in stored} == {k for k in keys if (kafka_python_murmur2(k) & 0x7FFFFFFF) % 4 == partition}


def test_explicit_partition_and_round_robin(broker, name):
    broker.create_topic(name, 3)
    assert produce(broker, name, "-p", "2", input=b"a\nb\n").code == 0
    assert [r.value for r in broker.records(name, 2)] == [b"a", b"b"]
    ran = produce(broker, name, "--partitioner", "round-robin", "-K", ":", "--format", "json",
                  input=b"same:1\nsame:2\nsame:3\n")
    assert sorted(r["partition"] for r in ran.json_lines()) == [0, 1, 2]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_round_trip_through_consume(broker, name, codec):
    broker.create_topic(name, 1)
    lines = [b"line %d " % i + b"x" * i for i in range(100)]
    assert produce(broker, name, "-z", codec, "--linger-ms", "100", input=b"\n".join(lines) + b"\n").code == 0
    read = run_bytes("consume", name, "-b", broker.bootstrap_servers)
    assert read.code == 0 and read.stdout == b"\n".join(lines) + b"\n"


def test_acks_zero_and_idempotent(broker, name):
    broker.create_topic(name, 1)
    ran = produce(broker, name, "--acks", "0", "--format", "json", input=b"a\n")
    assert [(r["offset"], r["error"]) for r in ran.json_lines()] == [(-1, None)]
    ran = produce(broker, name, "--idempotent", "--format", "json", input=b"b\nc\n")
    assert [r["offset"] for r in ran.json_lines()] == [1, 2]
    assert [r.value for r in broker.records(name, 0)] == [b"a", b"b", b"c"]


def test_java_producer_properties_where_no_option_is_given(broker, name, tmp_path):
    broker.create_topic(name, 1)
    by_property = produce(broker, name, "-X", "acks=0", "--format", "json", input=b"a\n")
    assert [r["offset"] for r in by_property.json_lines()] == [-1]
    option_wins = produce(broker, name, "--acks", "1", "-X", "acks=0", "--format", "json", input=b"b\n")
    assert [r["offset"] for r in option_wins.json_lines()] == [1]
    config = tmp_path / "producer.properties"
    config.write_text("compression.type=gzip\nlinger.ms=20\nenable.idempotence=true\n")
    assert produce(broker, name, "--command-config", str(config), input=b"c\n").code == 0
    assert [r.value for r in broker.records(name, 0)] == [b"a", b"b", b"c"]
    bad = produce(broker, name, "-X", "linger.ms=soon", input=b"d\n")
    assert bad.code == 2 and "linger.ms='soon'" in bad.stderr
    conflicting = produce(broker, name, "-X", "enable.idempotence=true", "-X", "acks=1", input=b"d\n")
    assert conflicting.code == 2
    assert len(broker.records(name, 0)) == 3


def test_file_input(broker, name, tmp_path):
    broker.create_topic(name, 1)
    path = tmp_path / "records.txt"
    path.write_bytes(b"from\nfile\n")
    assert produce(broker, name, "--file", str(path), input=b"not this\n").code == 0
    assert [r.value for r in broker.records(name, 0)] == [b"from", b"file"]


def test_failed_records_exit_1_with_one_line_per_error(broker, name):
    broker.create_topic(name, 1)
    broker.inject_error("Produce", "INVALID_RECORD", count=1, topic=name)
    ran = produce(broker, name, "--format", "json", input=b"a\nb\n")
    assert ran.code == 1
    assert [line for line in ran.stderr.splitlines() if line.startswith("compatbroker:")] == [
        f"compatbroker: produce {name}: INVALID_RECORD: The broker rejected a record that failed its validation."]
    results = [json.loads(line) for line in ran.stdout.splitlines()]
    assert [(r["offset"], r["error"]["name"]) for r in results] == [(None, "INVALID_RECORD")] * 2


def test_usage_unknown_partition_and_unreachable_exit_codes(broker, name):
    broker.create_topic(name, 1)
    usage = produce(broker, name, "--idempotent", "--acks", "1", input=b"a\n")
    assert usage.code == 2 and "needs --acks all" in usage.stderr
    assert produce(broker, name, "-H", "no-equals", input=b"a\n").code == 2
    missing = produce(broker, name, "-p", "5", input=b"a\n")
    assert missing.code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr
    unreachable = run_bytes("produce", name, "-b", "127.0.0.1:1", "-X", "request.timeout.ms=500", input=b"a\n")
    assert unreachable.code == 3 and "NETWORK_EXCEPTION" in unreachable.stderr
    assert broker.records(name, 0) == []


def test_the_real_entry_point_reads_stdin(broker, name):
    broker.create_topic(name, 1)
    ran = run_process("produce", name, "-b", broker.bootstrap_servers, input="one\ntwo\n")
    assert ran.code == 0, ran.stderr
    assert [r.value for r in broker.records(name, 0)] == [b"one", b"two"]


@pytest.mark.parametrize("stop, code, said", [(signal.SIGINT, 130, b"interrupted"),
                                               (signal.SIGTERM, 143, b"terminated")])
def test_a_line_typed_into_an_open_stdin_is_sent_after_linger_and_a_stop_signal_exits(broker, name, stop, code,
                                                                                       said):
    broker.create_topic(name, 1)
    process = start_process("produce", name, "-b", broker.bootstrap_servers, "--linger-ms", "50",
                            stdin=subprocess.PIPE)
    try:
        process.stdin.write(b"typed\n")
        process.stdin.flush()
        # stdin stays open: only linger.ms can have sent it
        wait_until(lambda: broker.records(name, 0), "the line sent while stdin stayed open")
        process.send_signal(stop)
        assert process.wait(60) == code
    finally:
        if process.poll() is None:
            process.kill()
    assert b"compatbroker: " + said in process.stderr.read()
    assert [r.value for r in broker.records(name, 0)] == [b"typed"]


def test_live_progress_line_only_when_stderr_is_a_terminal(broker, name, tmp_path):
    broker.create_topic(name, 1)
    path = tmp_path / "records.txt"
    path.write_bytes(b"x\n" * 1000)
    primary, secondary = pty.openpty()
    done = subprocess.run([sys.executable, "-m", "compatbroker", "produce", name, "-b", broker.bootstrap_servers,
                           "--file", str(path)], stdout=subprocess.DEVNULL, stderr=secondary, timeout=60,
                          cwd=REPO_ROOT)
    os.close(secondary)
    shown = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the terminal closed: everything has been read
            break
        if not chunk:
            break
        shown += chunk
    os.close(primary)
    assert done.returncode == 0
    assert re.search(rb"produced \d+ records, \d+ records/s, [\d.]+ MB/s", shown), shown
    assert b"produced 1000 records (1000 bytes)" in shown
    piped = produce(broker, name, input=b"y\n")
    assert re.fullmatch(r"produced 1 records \(1 bytes\) to \S+ in [\d.]+ s \(\d+ records/s, [\d.]+ MB/s\)\n",
                        piped.stderr)


def test_a_line_longer_than_max_request_size_fails_without_being_held_and_the_next_is_read(broker, name):
    """Kafka's console producer reports a record the producer refuses and reads on; the line is never held whole
    (a 24 MB line with max.request.size 1000 keeps the run far below 24 MB)."""
    import tracemalloc

    broker.create_topic(name, 1)
    huge = b"x" * (24 << 20)
    data = b"before\n" + huge + b"\r\nafter\n" + huge
    tracemalloc.start()
    try:
        ran = produce(broker, name, "-X", "max.request.size=1000", "--format", "json", input=data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak
    assert ran.code == 1
    results = [json.loads(line) for line in ran.stdout.splitlines()]
    assert [(r["offset"], r["error"] and r["error"]["name"]) for r in results] == \
        [(0, None), (None, "MESSAGE_TOO_LARGE"), (1, None), (None, "MESSAGE_TOO_LARGE")]
    assert results[1]["error"]["message"] == (f"The message is at least {len(huge) + 1} bytes which is larger than "
                                              "1000, which is the value of the max.request.size configuration.")
    assert [line for line in ran.stderr.splitlines() if line.startswith("compatbroker:")] == [
        f"compatbroker: produce {name}: MESSAGE_TOO_LARGE: {results[1]['error']['message']}"]
    assert [r.value for r in broker.records(name, 0)] == [b"before", b"after"]


def test_buffer_memory_and_max_block_ms_from_client_properties(broker, name):
    """While no leader answers, reading stops at buffer.memory; a record finding no room within max.block.ms
    fails with the Java producer's timeout."""
    broker.create_topic(name, 1)
    broker.inject_error("Produce", "NOT_LEADER_OR_FOLLOWER", count=None, topic=name)
    try:
        ran = produce(broker, name, "-X", "buffer.memory=3000", "-X", "max.block.ms=200", "-X", "batch.size=1000",
                      "-X", "linger.ms=0", "-X", "delivery.timeout.ms=3000", input=(b"y" * 800 + b"\n") * 5)
    finally:
        broker.clear_faults()
    assert ran.code == 3  # every record timed out: the cluster did not answer
    assert ran.stderr.count("compatbroker: produce") == 1  # each distinct error once
    assert "REQUEST_TIMED_OUT: Failed to allocate " in ran.stderr
    assert "within the configured max blocking time 200 ms" in ran.stderr
