"""`compatbroker consume` against compatbroker: output formats (raw, JSON lines, kcat templates), start offsets,
-n and the end of partitions, consumer groups of CLI processes, Ctrl-C and the exit codes."""
from __future__ import annotations

import base64
import re
import shlex
import signal
import subprocess
import sys
import threading

import pytest
from kafka import KafkaProducer

from compatbroker.cli import consume as consume_command
from compatbroker.client import ClientConfig, KafkaClient
from compatbroker.client.consumer import Consumer, OffsetSpec

from .helpers import REPO_ROOT, wait_until
from .stream_helpers import exit_code, run_bytes, start_process

WAIT_S = 60
RECORD_KEYS = {"topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers"}


def consume(broker, *args):
    return run_bytes("consume", *args, "-b", broker.bootstrap_servers)


def produce(broker, topic, records, partition=0, timestamps=None):
    """(key, value, headers) records to one partition, with kafka-python; returns their timestamps."""
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    stamps = timestamps or [None] * len(records)
    try:
        futures = [producer.send(topic, key=key, value=value, headers=list(headers), partition=partition,
                                 timestamp_ms=stamp) for (key, value, headers), stamp in zip(records, stamps)]
        return [future.get(timeout=30).timestamp for future in futures]
    finally:
        producer.close(timeout=5)




# --- formats ------------------------------------------------------------------------------------------------------

def test_raw_values_until_the_end_of_every_partition(broker, name):
    broker.create_topic(name, 2)
    produce(broker, name, [(None, b"p0-%d" % i, ()) for i in range(3)], partition=0)
    produce(broker, name, [(b"k", None, ())], partition=1)
    ran = consume(broker, name)
    assert ran.code == 0, ran.stderr
    assert sorted(ran.stdout.splitlines()) == [b"", b"p0-0", b"p0-1", b"p0-2"]  # a null value: an empty line
    assert ran.stderr.startswith("consumed 4 records (") and f"from {name} in " in ran.stderr
    empty = consume(broker, name, "-o", "end")
    assert (empty.code, empty.stdout) == (0, b"")


def test_json_lines_with_metadata_and_base64_for_binary(broker, name):
    broker.create_topic(name, 1)
    (stamp, _) = produce(broker, name, [(b"key", b"text \xe2\x82\xac", [("h", b"1"), ("h", b"\xff")]),
                                        (None, b"\x00\xff\xfe", [])])
    documents = consume(broker, name, "--format", "json").json_lines()
    assert all(set(document) == RECORD_KEYS for document in documents)
    assert documents[0] == {"topic": name, "partition": 0, "offset": 0, "timestamp": stamp,
                            "timestamp_type": "CreateTime", "key": "key", "value": "text \u20ac",
                            "headers": [{"key": "h", "value": "1"},
                                        {"key": "h", "value": {"base64": base64.b64encode(b"\xff").decode()}}]}
    binary = {"base64": base64.b64encode(b"\x00\xff\xfe").decode()}
    assert (documents[1]["key"], documents[1]["value"]) == (None, binary)


def test_kcat_like_template(broker, name):
    broker.create_topic(name, 1)
    (stamp,) = produce(broker, name, [(b"k1", b"value", [("a", b"1"), ("b", b"2")])])
    ran = consume(broker, name, "-f", "%t|%p|%o|%k|%K|%s|%S|%h|%T|100%%\\t\\x41\\n")
    assert ran.stdout == f"{name}|0|0|k1|2|value|5|a=1,b=2|{stamp}|100%\tA\n".encode()
    lengths = consume(broker, name, "-f", "%R%s")
    assert lengths.stdout == b"\x00\x00\x00\x05value"
    bad = consume(broker, name, "-f", "%z")
    assert bad.code == 2 and "unknown directive %z" in bad.stderr
    dangling = consume(broker, name, "-f", "%s%")
    assert dangling.code == 2 and "lone '%'" in dangling.stderr


def test_log_append_time_is_reported_as_such(broker, name):
    broker.create_topic(name, 1, {"message.timestamp.type": "LogAppendTime"})
    produce(broker, name, [(None, b"v", ())], timestamps=[1_000])
    (document,) = consume(broker, name, "--format", "json").json_lines()
    assert document["timestamp_type"] == "LogAppendTime" and document["timestamp"] > 1_000


# --- where to start and when to stop -------------------------------------------------------------------------------

def test_offsets_from_the_end_absolute_and_by_timestamp(broker, name):
    broker.create_topic(name, 1)
    base = 1_700_000_000_000
    produce(broker, name, [(None, b"v%d" % i, ()) for i in range(10)],
            timestamps=[base + 1000 * i for i in range(10)])
    assert consume(broker, name, "-o", "-3").stdout == b"v7\nv8\nv9\n"
    assert consume(broker, name, "-o", "8").stdout == b"v8\nv9\n"
    assert consume(broker, name, "-o", "-100").stdout.count(b"\n") == 10
    assert consume(broker, name, "-o", f"@{base + 7000}").stdout == b"v7\nv8\nv9\n"
    assert consume(broker, name, "-o", f"@{base + 6500}").stdout == b"v7\nv8\nv9\n"
    assert consume(broker, name, "-o", f"@{base + 60_000}").stdout == b""
    assert consume(broker, name, "-o", "bogus").code == 2


def test_count_and_partition_selection(broker, name):
    broker.create_topic(name, 3)
    for partition in range(3):
        produce(broker, name, [(None, b"%d-%d" % (partition, i), ()) for i in range(5)], partition=partition)
    assert consume(broker, name, "-p", "1", "-n", "2").stdout == b"1-0\n1-1\n"
    both = consume(broker, name, "-p", "0", "-p", "2").stdout.splitlines()
    assert sorted(both) == sorted(b"%d-%d" % (p, i) for p in (0, 2) for i in range(5))
    assert consume(broker, name, "-n", "7").stdout.count(b"\n") == 7
    missing = consume(broker, name, "-p", "3")
    assert missing.code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr


def test_several_topics_and_read_committed(broker, name):
    broker.create_topic(name + "-a", 1)
    broker.create_topic(name + "-b", 1)
    produce(broker, name + "-a", [(None, b"a", ())])
    produce(broker, name + "-b", [(None, b"b", ())])
    ran = consume(broker, name + "-a", name + "-b", "--isolation-level", "read_committed", "-f", "%t:%s\\n")
    assert sorted(ran.stdout.splitlines()) == [f"{name}-a:a".encode(), f"{name}-b:b".encode()]


def test_exit_codes(broker, name):
    unknown = consume(broker, "no-such-topic-" + name)
    assert unknown.code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in unknown.stderr
    broker.create_topic(name, 1)
    assert consume(broker, name, "-g", "g", "-p", "0").code == 2
    assert consume(broker, name, "-g", "g", "-o", "end").code == 2
    unreachable = run_bytes("consume", name, "-b", "127.0.0.1:1", "-X", "request.timeout.ms=500")
    assert unreachable.code == 3 and "NETWORK_EXCEPTION" in unreachable.stderr


# --- groups -------------------------------------------------------------------------------------------------------

class _Lines:
    """The stdout lines of a child process, collected by a thread."""

    def __init__(self, process):
        self.lines: list[bytes] = []
        self.thread = threading.Thread(target=self._read, args=(process.stdout,), daemon=True)
        self.thread.start()

    def _read(self, stream):
        for line in stream:
            self.lines.append(line.rstrip(b"\n"))


def _members(broker, group):
    try:
        described = broker.describe_group(group)
    except Exception:  # noqa: BLE001 - the group does not exist yet
        return []
    return [sorted(p for _, p in member["assignment"]) for member in described["members"]] \
        if described["state"] == "Stable" else []


def test_two_cli_consumers_split_partitions_and_commit_on_ctrl_c(broker, name):
    broker.create_topic(name, 4)
    group = f"group-{name}"
    args = ("consume", name, "-g", group, "--follow", "-b", broker.bootstrap_servers, "-f", "%p:%s\\n")
    first = start_process(*args)
    second = None
    try:
        first_lines = _Lines(first)
        wait_until(lambda: _members(broker, group) == [[0, 1, 2, 3]], "the first consumer holding 4 partitions")
        second = start_process(*args)
        second_lines = _Lines(second)
        wait_until(lambda: sorted(_members(broker, group)) == [[0, 1], [2, 3]], "a 2 + 2 split")
        for partition in range(4):
            produce(broker, name, [(None, b"%d-%d" % (partition, i), ()) for i in range(10)], partition=partition)
        wait_until(lambda: len(first_lines.lines) + len(second_lines.lines) == 40, "40 records between the two")
        for process in (first, second):
            process.send_signal(signal.SIGINT)
        assert [exit_code(process, WAIT_S) for process in (first, second)] == [130, 130]
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
    errors = [process.stderr.read().decode(errors="replace") for process in (first, second)]
    for error in errors:
        assert "compatbroker: interrupted" in error, errors
    got = [{line.split(b":")[0] for line in lines.lines} for lines in (first_lines, second_lines)]
    assert sorted(map(sorted, got)) == [[b"0", b"1"], [b"2", b"3"]]  # each partition read by one consumer
    assert sorted(first_lines.lines + second_lines.lines) == sorted(
        b"%d:%d-%d" % (p, p, i) for p in range(4) for i in range(10))
    assert broker.committed_offsets(group) == {(name, p): 10 for p in range(4)}, errors
    assert broker.describe_group(group)["members"] == []  # both left the group on the way out


def test_sigterm_commits_and_leaves_the_group_then_exits_143(broker, name):
    broker.create_topic(name, 2)
    group = f"group-{name}"
    process = start_process("consume", name, "-g", group, "--follow", "-b", broker.bootstrap_servers)
    try:
        lines = _Lines(process)
        wait_until(lambda: _members(broker, group) == [[0, 1]], "the consumer holding both partitions")
        produce(broker, name, [(None, b"%d" % i, ()) for i in range(5)], partition=1)
        wait_until(lambda: len(lines.lines) == 5, "the 5 records written out")
        process.send_signal(signal.SIGTERM)
        assert exit_code(process, WAIT_S) == 143
    finally:
        if process.poll() is None:
            process.kill()
    assert b"compatbroker: terminated" in process.stderr.read()
    assert broker.committed_offsets(group) == {(name, 0): 0, (name, 1): 5}
    assert broker.describe_group(group)["members"] == []  # left at once, not after session.timeout.ms


def test_a_ctrl_c_landing_as_poll_hands_records_out_takes_them_back(broker, name):
    # The records leave the consumer (positions move on) but never reach the command: they must not be committed.
    broker.create_topic(name, 1)
    produce(broker, name, [(None, b"%d" % i, ()) for i in range(5)])
    with KafkaClient(ClientConfig(bootstrap=broker.bootstrap_servers)) as client:
        consumer = Consumer(client)
        consumer.assign([(name, 0)], OffsetSpec("earliest"))
        drain = consumer._drain

        def interrupted_after_handing_out(max_records):
            records = drain(max_records)
            if records:
                raise KeyboardInterrupt
            return records

        consumer._drain = interrupted_after_handing_out
        before = consumer.positions()
        with pytest.raises(KeyboardInterrupt):
            wait_until(lambda: consume_command._poll(consumer, 500) and False, "records handed out")
        assert consumer.positions() == before == {(name, 0): 0}
        consumer._drain = drain
        assert [r.offset for r in wait_until(lambda: consume_command._poll(consumer, 500), "the records again")] \
            == [0, 1, 2, 3, 4]


def test_group_resumes_from_committed_offsets(broker, name):
    broker.create_topic(name, 2)
    group = f"group-{name}"
    produce(broker, name, [(None, b"old", ())])
    assert consume(broker, name, "-g", group).stdout == b"old\n"
    assert broker.committed_offsets(group) == {(name, 0): 1, (name, 1): 0}
    produce(broker, name, [(None, b"new", ())], partition=1)
    assert consume(broker, name, "-g", group).stdout == b"new\n"
    fresh = consume(broker, name, "-g", group + "-latest", "--reset", "latest")
    assert (fresh.code, fresh.stdout) == (0, b"")


def test_count_commits_exactly_what_was_written(broker, name):
    broker.create_topic(name, 1)
    group = f"group-{name}"
    produce(broker, name, [(None, b"%d" % i, ()) for i in range(10)])
    assert consume(broker, name, "-g", group, "-n", "4").stdout == b"0\n1\n2\n3\n"
    assert broker.committed_offsets(group) == {(name, 0): 4}
    assert consume(broker, name, "-g", group, "-n", "1", "--format", "json").json_lines()[0]["offset"] == 4


def test_java_consumer_properties_where_no_option_is_given(broker, name, tmp_path):
    broker.create_topic(name, 1)
    produce(broker, name, [(None, b"a", ()), (None, b"b", ())])
    config = tmp_path / "consumer.properties"
    config.write_text(f"group.id=props-{name}\nauto.offset.reset=earliest\nisolation.level=read_committed\n"
                      "fetch.max.wait.ms=100\nheartbeat.interval.ms=1000\n")
    assert consume(broker, name, "--command-config", str(config), "-n", "1").stdout == b"a\n"
    assert broker.committed_offsets(f"props-{name}") == {(name, 0): 1}
    latest = consume(broker, name, "-X", f"group.id=latest-{name}", "-X", "auto.offset.reset=latest")
    assert (latest.code, latest.stdout) == (0, b"")
    assert broker.committed_offsets(f"latest-{name}") == {(name, 0): 2}
    bad = consume(broker, name, "-X", "auto.offset.reset=sometimes")
    assert bad.code == 2 and "auto.offset.reset" in bad.stderr


def test_a_reader_that_goes_away_ends_quietly_and_only_written_records_are_committed(broker, name):
    broker.create_topic(name, 1)
    lines = b"".join(b"%05d" % i + b"x" * 100 + b"\n" for i in range(20000))  # far more than a pipe buffer holds
    assert run_bytes("produce", name, "-b", broker.bootstrap_servers, input=lines).code == 0
    group = f"group-{name}"
    command = (f"{shlex.quote(sys.executable)} -m compatbroker consume {name} -g {group} "
               f"-b {broker.bootstrap_servers} | head -n 1; exit ${{PIPESTATUS[0]}}")
    done = subprocess.run(["bash", "-c", command], capture_output=True, cwd=REPO_ROOT, timeout=WAIT_S)
    assert done.returncode == 0 and done.stdout == lines[:106], done.stderr
    assert b"Traceback" not in done.stderr
    written = int(re.search(rb"consumed (\d+) records", done.stderr).group(1))
    assert broker.committed_offsets(group) == {(name, 0): written} and written < 20000
