"""Logging pipelines that ship to Kafka: rsyslog's omkafka (Debian's rsyslog-kafka 8.2302) and syslog-ng's kafka-c()
destination (Debian's syslog-ng-mod-rdkafka 3.38), both on Debian's librdkafka 2.0.2. Each daemon runs in the
foreground with a configuration of the test's own (apps/log_shippers.py), reads syslog datagrams from the test's
Unix socket, and the reference consumer reads what it shipped.

Flows:
- produce (both): every line arrives once, in order per program, as the configured JSON, keyed by the program's name,
  compressed with each codec its destination is configured with (syslog-ng: in the Java client's partition).
- restart (both): lines logged while the broker is down are delivered once it is back (rsyslog: at least once).
- transactions (syslog-ng): sync-send(yes) commits each batch in a transaction; read_committed reads every line.
- consume and committed_offsets (rsyslog's imkafka): a consumer group member reads every partition from the
  earliest offset, commits on shutdown, and a second run reads only what came after.
What the daemons cannot do at all is in their catalog entries (clients/catalog.py).
"""
from __future__ import annotations

import json
import time

import pytest

from .apps.log_shippers import Destination, rsyslog_process, rsyslog_reader, syslog_ng_process
from .apps.process import send_syslog
from .broker_process import BrokerProcess
from .checks import POSITIONING_BOUND_S, assert_stored_as, read_exactly
from .clients import MissingClient
from .conftest import BROKER_SETTINGS
from .records import CODEC_IDS, CODECS, Record, java_partition, stored_batches

SHIPPERS = {"rsyslog": rsyslog_process, "syslog-ng": syslog_ng_process}
PROGRAMS = ("billing", "web")  # two keys, so that partitioning by key shows
PARTITIONS = (0, 1)
each_shipper = pytest.mark.parametrize(
    "shipper", [pytest.param(name, marks=pytest.mark.matrix(client=name), id=name) for name in SHIPPERS])


def daemon(shipper: str, directory, bootstrap: str, destinations):
    """The shipper's (process, socket); a missing daemon fails the test with how to install it."""
    try:
        return SHIPPERS[shipper](directory, bootstrap, destinations)
    except MissingClient as exc:
        pytest.fail(str(exc), pytrace=False)


def log_lines(process, socket_path, tag: str, count: int) -> dict[str, list[str]]:
    """Logs `count` lines per program once the daemon's socket is there; returns them by program."""
    process.wait_until(socket_path.exists, f"input socket {socket_path}")
    # long enough to compress: librdkafka sends a batch uncompressed when compressing does not make it smaller
    sent = {program: [f"{tag} {i} of {program} \"quoted\" ü {'request served ' * 8}" for i in range(count)]
            for program in PROGRAMS}
    for program, lines in sent.items():
        send_syslog(socket_path, program, lines)
    return sent


def assert_shipped(got, sent: dict[str, list[str]], *, repeats: bool = False, murmur2: bool = False) -> None:
    """Each program's lines, in order, as JSON keyed by the program; one program's lines in one partition (with
    `murmur2`, the Java client's partition for the key). With `repeats`, a line may come again right after a delivery
    failure (at least once): later copies are left out."""
    by_program: dict[str, list] = {}
    for record in got:
        by_program.setdefault(record.key.decode(), []).append(record)
    assert set(by_program) == set(sent), f"keys {sorted(by_program)}"
    for program, records in by_program.items():
        assert len({r.partition for r in records}) == 1, f"{program}'s lines in partitions {records}"
        if murmur2:
            assert records[0].partition == java_partition(program.encode(), len(PARTITIONS))
        shipped = [json.loads(r.value) for r in sorted(records, key=lambda r: r.offset)]
        assert {tuple(entry) for entry in shipped} == {("program", "message")}, shipped[0]
        assert {entry["program"] for entry in shipped} == {program}
        # RFC 3164 leaves the space after "tag:" to the parser: rsyslog keeps it in the message, syslog-ng drops it
        messages = [entry["message"].lstrip(" ") for entry in shipped]
        assert (list(dict.fromkeys(messages)) if repeats else messages) == sent[program]


def read_distinct(reference, broker, topic: str, count: int) -> list:
    """Every record of the topic once `count` different values are among them (a shipper that delivers at least once
    may have stored some twice)."""
    deadline = time.monotonic() + POSITIONING_BOUND_S
    while True:
        ends = reference.end_offsets(broker.bootstrap, topic, PARTITIONS)
        if sum(ends.values()) >= count:
            got = reference.consume(broker.bootstrap, topic, sum(ends.values()), partitions=PARTITIONS)
            if len({r.value for r in got}) >= count:
                return got
        assert time.monotonic() < deadline, f"{topic} holds {ends} records per partition, {count} lines were logged"
        time.sleep(0.2)  # a poll interval: the loop ends on the condition, or at the deadline


@pytest.mark.matrix(flow="produce")
@each_shipper
def test_ships_log_lines_keyed_with_each_codec(shipper, broker, reference, tmp_path, topic):
    destinations = [Destination(f"{topic}.{codec}", codec) for codec in ("none", *CODECS)]
    reference.create_topics(broker.bootstrap, {d.topic: len(PARTITIONS) for d in destinations})
    process, socket_path = daemon(shipper, tmp_path, broker.bootstrap, destinations)
    with process:
        sent = log_lines(process, socket_path, "line", 5)
        for destination in destinations:
            got = read_exactly(reference, broker, destination.topic, 5 * len(PROGRAMS), PARTITIONS)
            assert_shipped(got, sent, murmur2=shipper == "syslog-ng")  # kafka-c()'s default partitioner
            assert_stored_as(broker, destination.topic, len(got), codec=CODEC_IDS[destination.codec],
                             partitions=PARTITIONS)


@pytest.mark.matrix(flow="restart")
@each_shipper
def test_delivers_lines_logged_while_the_broker_was_down(shipper, reference, tmp_path, topic):
    with BrokerProcess(tmp_path / "data", BROKER_SETTINGS) as broker:
        reference.create_topics(broker.bootstrap, {topic: len(PARTITIONS)})
        process, socket_path = daemon(shipper, tmp_path, broker.bootstrap, [Destination(topic)])
        with process:
            before = log_lines(process, socket_path, "before", 3)
            read_exactly(reference, broker, topic, 3 * len(PROGRAMS), PARTITIONS)  # shipping works, then:
            port = broker.port
            broker.stop()
            during = log_lines(process, socket_path, "down", 3)
            broker.start(listen=f"{broker.host}:{port}")
            # omkafka delivers at least once: a line librdkafka had queued when the broker went away is retried by
            # rsyslog's action queue after the action resumes (rsyslog 8.2302), so that line may come twice.
            got = read_distinct(reference, broker, topic, 6 * len(PROGRAMS))
    assert_shipped(got, {program: before[program] + during[program] for program in PROGRAMS},
                   repeats=shipper == "rsyslog")


@pytest.mark.matrix(client="syslog-ng", flow="transactions")
def test_syslog_ng_commits_its_batches_in_transactions(broker, reference, tmp_path, topic):
    """sync-send(yes): each batch of lines in a transaction of kafka-c()'s own; read_committed reads them all."""
    reference.create_topics(broker.bootstrap, {topic: len(PARTITIONS)})
    process, socket_path = daemon("syslog-ng", tmp_path, broker.bootstrap, [Destination(topic, transactional=True)])
    with process:
        sent = log_lines(process, socket_path, "txn", 5)
        process.wait_until(lambda: committed_on_disk(broker, topic) == 5 * len(PROGRAMS), "lines in transactions")
    batches = [b for p in PARTITIONS for b in stored_batches(broker.segment_files(topic, p))]
    assert min(b.producer_id for b in batches) >= 0, "transactional batches without a producer id"
    ends = reference.end_offsets(broker.bootstrap, topic, PARTITIONS)
    got, _ = reference.read_to_end(broker.bootstrap, topic, ends, read_committed=True)
    assert_shipped(got, sent, murmur2=True)


def committed_on_disk(broker, topic: str) -> int:
    """How many records the partitions' logs hold before their last transaction marker (committed or aborted)."""
    total = 0
    for partition in PARTITIONS:
        batches = stored_batches(broker.segment_files(topic, partition))
        last_marker = max((i for i, b in enumerate(batches) if b.control), default=-1)
        total += sum(b.records for b in batches[:last_marker] if not b.control)
    return total


# --- rsyslog's imkafka: a consumer group member writing what it reads to a file ----------------------------------

def produce_values(reference, broker, topic: str, tag: str, per_partition: int) -> list[bytes]:
    values = [f"{tag}-{p}-{i}".encode() for p in PARTITIONS for i in range(per_partition)]
    reference.produce(broker.bootstrap, topic, [Record(None, v, partition=int(v.split(b"-")[1])) for v in values])
    return values


def read_by(reader, out, count: int) -> list[bytes]:
    """The lines rsyslogd has written once there are `count` (it keeps running)."""
    reader.wait_until(lambda: out.exists() and out.read_bytes().count(b"\n") >= count, f"{count} lines in {out}")
    return out.read_bytes().splitlines()


def assert_partition_order(lines: list[bytes], values: list[bytes]) -> None:
    """Every value once; each partition's in offset order (partitions interleave as they are fetched)."""
    assert sorted(lines) == sorted(values)
    for partition in PARTITIONS:
        mine = [line for line in lines if line.split(b"-")[1] == str(partition).encode()]
        assert mine == [v for v in values if v.split(b"-")[1] == str(partition).encode()]


@pytest.mark.matrix(client="rsyslog", flow="consume")
def test_rsyslog_imkafka_reads_every_partition_from_the_earliest(broker, reference, tmp_path, topic):
    reference.create_topics(broker.bootstrap, {topic: len(PARTITIONS)})
    values = produce_values(reference, broker, topic, "v", 3)
    try:
        reader, out = rsyslog_reader(tmp_path, broker.bootstrap, topic, f"{topic}.group")
    except MissingClient as exc:
        pytest.fail(str(exc), pytrace=False)
    with reader:
        assert_partition_order(read_by(reader, out, len(values)), values)


@pytest.mark.matrix(client="rsyslog", flow="committed_offsets")
def test_rsyslog_imkafka_resumes_from_its_groups_committed_offsets(broker, reference, tmp_path, topic):
    group = f"{topic}.group"
    reference.create_topics(broker.bootstrap, {topic: len(PARTITIONS)})
    first = produce_values(reference, broker, topic, "first", 2)
    try:
        reader, out = rsyslog_reader(tmp_path, broker.bootstrap, topic, group)
    except MissingClient as exc:
        pytest.fail(str(exc), pytrace=False)
    with reader:
        read_by(reader, out, len(first))
    # librdkafka commits what imkafka consumed when rsyslogd closes the consumer on SIGTERM
    assert reference.committed(broker.bootstrap, group, topic, PARTITIONS) == {p: 2 for p in PARTITIONS}
    second = produce_values(reference, broker, topic, "second", 2)
    with reader:  # appends to the same file: a record read twice would show
        lines = read_by(reader, out, len(first) + len(second))
    assert_partition_order(lines, first + second)
