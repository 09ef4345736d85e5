"""Kafka's own command-line tools against the broker: kafka-topics (metadata, admin_topics), kafka-console-producer
(produce), kafka-console-consumer (consume, committed_offsets), kafka-consumer-groups (groups, committed_offsets) and
kafka-configs (admin_configs), each run as `java -cp <jars> <main class> --bootstrap-server ...` (kafka_tools.py).

The tools are Kafka's, unmodified, at the version of the jars COMPATBROKER_KAFKA_TOOLS names (Kafka 3.9.0 when this
was written; the matrix row shows it). Without that variable every test skips with how to set it; a tool whose main
class the jars lack skips with that reason. The tests check what the tools print (topic descriptions, consumed
lines, the lag table, config values), their exit codes, and the errors they print for Kafka's error codes, and read
back through kafka-python what the tools did.

Covered: the producer with keys and headers parsed from lines, acks all (idempotent) and 1, one codec (zstd); the
consumer from the beginning, from an offset and from the latest offset (3.9's has no start by timestamp), alone and in
a group; the group tool's list, describe (lag, state), delete and reset-offsets; topic create/alter/delete with
their errors; topic and broker configs. The tools' own timeouts are short for a loaded machine
(kafka-consumer-groups' --timeout is 5 s by default), so they get TOOL_TIMEOUT_MS wherever they take one.
"""
from __future__ import annotations

import contextlib
import re
import time
import uuid

import pytest

from . import kafka_tools
from .checks import assert_stored_as, first_new_record, read_exactly
from .kafka_tools import TOOL_TIMEOUT_MS, KafkaTools, Run, ToolsUnavailable
from .records import CODEC_IDS, MAX_MESSAGE_BYTES, Record

pytestmark = [pytest.mark.matrix(client="kafka-tools"),
              # decided before any fixture: without the jars not even the session's broker is started
              pytest.mark.skipif(not kafka_tools.configured(), reason=kafka_tools.HOW_TO)]

TIMEOUT = str(TOOL_TIMEOUT_MS)
WAIT_BOUND_S = 60.0  # for what the broker does after a tool returned (a deleted topic leaving the listing)


@pytest.fixture(scope="module")
def jars() -> KafkaTools:
    return kafka_tools.find()


@pytest.fixture
def topic(topic) -> str:
    """The test's own topic, with '-' for '.' and '_': kafka-topics warns about names holding either."""
    return re.sub(r"[._]", "-", topic)


@pytest.fixture
def tools(jars, broker) -> KafkaTools:
    return jars.on(broker.bootstrap)


def needs(tools: KafkaTools, tool: str) -> None:
    try:
        tools.main_class(tool)
    except ToolsUnavailable as missing:
        pytest.skip(str(missing))


def ok(run: Run) -> Run:
    assert run.returncode == 0, str(run)
    return run


def failed(run: Run) -> Run:
    assert run.returncode == 1, str(run)
    return run


def wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_BOUND_S
    while not condition():
        assert time.monotonic() < deadline, f"not within {WAIT_BOUND_S} s: {what}"
        time.sleep(0.1)


def group_name(topic: str) -> str:
    return f"tools-{topic[-6:]}-{uuid.uuid4().hex[:6]}"


def filled(reference, broker, topic: str, per_partition: int = 5, partitions: int = 2) -> list[Record]:
    """A topic of `partitions` partitions holding `per_partition` keyed records with a header in each."""
    reference.create_topics(broker.bootstrap, {topic: partitions})
    records = [Record(f"k{p}-{i}".encode(), f"v{p}-{i}".encode(), (("n", str(i).encode()),), partition=p)
               for p in range(partitions) for i in range(per_partition)]
    reference.produce(broker.bootstrap, topic, records)
    return records


# --- kafka-topics ----------------------------------------------------------------------------------------------------

@pytest.mark.matrix(flow="metadata")
def test_kafka_topics_describe_and_list(tools, broker, reference, topic):
    """--describe: the topic's id, partitions, and each partition's leader, replicas and ISR as the broker's
    metadata has them; --list names it."""
    needs(tools, "kafka-topics")
    reference.create_topics(broker.bootstrap, {topic: 3})
    described = ok(tools.run("kafka-topics", "--describe", "--topic", topic)).lines()
    assert re.fullmatch(rf"Topic: {re.escape(topic)}\tTopicId: \S{{22}}\tPartitionCount: 3\tReplicationFactor: 1\t"
                        r"Configs: \S*", described[0]), described
    leaders = reference.metadata(broker.bootstrap, [topic]).topics[topic]
    assert len(described) == 4, described
    for partition, line in enumerate(described[1:]):
        leader = leaders[partition]
        assert line.startswith(f"\tTopic: {topic}\tPartition: {partition}\tLeader: {leader}\tReplicas: {leader}\t"
                               f"Isr: {leader}\t"), described
    assert topic in ok(tools.run("kafka-topics", "--list")).lines()


@pytest.mark.matrix(flow="admin_topics")
def test_kafka_topics_create_alter_delete(tools, broker, reference, topic):
    """Create with a config (shown by --describe), the TopicExistsException of a second create, grow with
    --alter, the InvalidPartitionsException of shrinking, delete, and describing the deleted topic."""
    needs(tools, "kafka-topics")
    create = ("--create", "--topic", topic, "--partitions", "2", "--replication-factor", "1",
              "--config", "retention.ms=86400000")
    assert ok(tools.run("kafka-topics", *create)).lines() == [f"Created topic {topic}."]
    assert failed(tools.run("kafka-topics", *create)).lines() == [
        f"Error while executing topic command : Topic '{topic}' already exists."]
    described = ok(tools.run("kafka-topics", "--describe", "--topic", topic)).lines()
    head = re.fullmatch(r"Topic: .*\tPartitionCount: 2\tReplicationFactor: 1\tConfigs: (?P<configs>\S*)", described[0])
    assert head, described
    # the configs not at their defaults: the topic's own, and the broker's static message.max.bytes (conftest)
    assert set(head["configs"].split(",")) == {"retention.ms=86400000", f"max.message.bytes={MAX_MESSAGE_BYTES}"}

    assert ok(tools.run("kafka-topics", "--alter", "--topic", topic, "--partitions", "4")).lines() == []
    assert reference.partitions_for(broker.bootstrap, topic) == {0, 1, 2, 3}
    assert failed(tools.run("kafka-topics", "--alter", "--topic", topic, "--partitions", "3")).lines() == [
        f"Error while executing topic command : The topic {topic} currently has 4 partition(s); 3 would not be "
        "an increase."]

    assert ok(tools.run("kafka-topics", "--delete", "--topic", topic)).lines() == []
    wait_until(lambda: topic not in reference.list_topics(broker.bootstrap), f"{topic} deleted")
    gone = failed(tools.run("kafka-topics", "--describe", "--topic", topic)).lines()
    # 3.9 prints the topic as Optional[...], later versions plainly
    assert re.fullmatch(rf"Error while executing topic command : Topic '(Optional\[)?{re.escape(topic)}\]?' "
                        r"does not exist as expected", gone[0]), gone


# --- kafka-console-producer ----------------------------------------------------------------------------------------

@pytest.mark.matrix(flow="produce")
def test_console_producer_keys_headers_acks_and_codec(tools, broker, reference, topic):
    """Lines parsed into headers, key and value (parse.headers, parse.key with key.separator ':', the value keeping
    its own ':'), sent with acks=all by an idempotent producer; then with acks=1 (no longer idempotent) and zstd,
    stored as zstd batches."""
    needs(tools, "kafka-console-producer")
    lines = [f"app:tools,n:{i}\tkey-{i}:value:{i}" for i in range(6)]
    run = tools.run("kafka-console-producer", "--topic", topic, "--request-required-acks", "all",
                    "--property", "parse.key=true", "--property", "key.separator=:",
                    "--property", "parse.headers=true", stdin="\n".join(lines) + "\n")
    assert ok(run).stdout.strip(">\n ") == "", run  # only its prompts
    got = read_exactly(reference, broker, topic, 6)
    assert [(r.key, r.value, r.headers) for r in got] == [
        (f"key-{i}".encode(), f"value:{i}".encode(), (("app", b"tools"), ("n", str(i).encode())))
        for i in range(6)]
    assert_stored_as(broker, topic, 6, idempotent=True)  # Kafka 3+'s producer default with acks=all

    zstd_topic = f"{topic}-zstd"
    ok(tools.run("kafka-console-producer", "--topic", zstd_topic, "--request-required-acks", "1",
                 "--compression-codec", "zstd", stdin="".join(f"z{i}\n" for i in range(20))))
    assert [r.value for r in read_exactly(reference, broker, zstd_topic, 20)] == [f"z{i}".encode() for i in range(20)]
    assert_stored_as(broker, zstd_topic, 20, codec=CODEC_IDS["zstd"])


# --- kafka-console-consumer ----------------------------------------------------------------------------------------

def formatted(record: Record, offset: int) -> str:
    """A record as the console consumer prints it with print.partition, print.offset, print.headers, print.key."""
    headers = ",".join(f"{key}:{value.decode()}" for key, value in record.headers)
    return f"Partition:{record.partition}\tOffset:{offset}\t{headers}\t{record.key.decode()}\t{record.value.decode()}"


PRINT_ALL = ("--property", "print.partition=true", "--property", "print.offset=true",
             "--property", "print.headers=true", "--property", "print.key=true")


@pytest.mark.matrix(flow="consume")
def test_console_consumer_from_beginning_and_from_a_partition_offset(tools, broker, reference, topic):
    """--from-beginning --max-messages reads every record of both partitions, each partition in order; --partition
    --offset starts exactly there."""
    needs(tools, "kafka-console-consumer")
    records = filled(reference, broker, topic)
    expected = {p: [formatted(r, offset) for offset, r in enumerate(r for r in records if r.partition == p)]
                for p in (0, 1)}

    run = ok(tools.run("kafka-console-consumer", "--topic", topic, "--from-beginning", "--max-messages", "10",
                       "--timeout-ms", TIMEOUT, *PRINT_ALL))
    assert "Processed a total of 10 messages" in run.stderr, run
    for partition in (0, 1):
        assert [line for line in run.lines() if line.startswith(f"Partition:{partition}\t")] == expected[partition]
    assert len(run.lines()) == 10, run

    run = ok(tools.run("kafka-console-consumer", "--topic", topic, "--partition", "1", "--offset", "3",
                       "--max-messages", "2", "--timeout-ms", TIMEOUT, *PRINT_ALL))
    assert run.lines() == expected[1][3:5], run


@pytest.mark.matrix(flow="consume")
def test_console_consumer_from_the_latest_offset(tools, broker, reference, topic):
    """--partition 0 --offset latest skips what is there and prints the first record produced after it positioned
    itself (3.9's console consumer has no start by timestamp)."""
    needs(tools, "kafka-console-consumer")
    reference.produce(broker.bootstrap, topic, [Record(None, b"old")])

    def consume_latest() -> list[str]:
        return ok(tools.run("kafka-console-consumer", "--topic", topic, "--partition", "0", "--offset", "latest",
                            "--max-messages", "1", "--timeout-ms", TIMEOUT)).lines()

    assert re.fullmatch(r"new-\d+", first_new_record(reference, broker, topic, consume_latest))


@pytest.mark.matrix(flow="committed_offsets")
def test_console_consumer_in_a_group_commits_where_it_stopped(tools, broker, reference, topic):
    """--group: the console consumer joins, reads everything from the beginning, and commits on leaving."""
    needs(tools, "kafka-console-consumer")
    filled(reference, broker, topic)
    group = group_name(topic)
    run = ok(tools.run("kafka-console-consumer", "--topic", topic, "--group", group, "--from-beginning",
                       "--max-messages", "10", "--timeout-ms", TIMEOUT))
    assert sorted(run.lines()) == sorted(f"v{p}-{i}" for p in (0, 1) for i in range(5)), run
    assert reference.committed(broker.bootstrap, group, topic, [0, 1]) == {0: 5, 1: 5}


# --- kafka-consumer-groups -----------------------------------------------------------------------------------------

def lag_table(run: Run, group: str) -> dict[int, tuple[str, str, str]]:
    """partition -> (CURRENT-OFFSET, LOG-END-OFFSET, LAG) of --describe's table."""
    header, *rows = run.lines()
    assert header.split()[:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"], run
    table = {}
    for row in rows:
        cells = row.split()
        assert cells[0] == group, run
        table[int(cells[2])] = (cells[3], cells[4], cells[5])
    return table


@pytest.mark.matrix(flow="groups")
def test_kafka_consumer_groups_list_describe_state_and_delete(tools, broker, reference, topic):
    """A group that committed 5 + 5 of 7 + 5 records: listed, its lag table, its state; deleting it while a member
    is in it fails with GroupNotEmptyException, then succeeds, and describing or deleting it again gives
    GroupIdNotFoundException's answers."""
    needs(tools, "kafka-consumer-groups")
    filled(reference, broker, topic)
    group = group_name(topic)
    reference.group_consume(broker.bootstrap, topic, group, 10)
    reference.produce(broker.bootstrap, topic, [Record(b"late", f"late-{i}".encode(), partition=0) for i in range(2)])

    assert group in ok(tools.run("kafka-consumer-groups", "--list", "--timeout", TIMEOUT)).lines()
    described = ok(tools.run("kafka-consumer-groups", "--describe", "--group", group, "--timeout", TIMEOUT))
    assert lag_table(described, group) == {0: ("5", "7", "2"), 1: ("5", "5", "0")}
    assert f"Consumer group '{group}' has no active members." in described.stderr, described
    state = ok(tools.run("kafka-consumer-groups", "--describe", "--group", group, "--state", "--timeout", TIMEOUT))
    assert state.lines()[0].split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
    assert state.lines()[1].split()[0] == group and state.lines()[1].split()[-2:] == ["Empty", "0"], state

    with member_of(reference, broker, topic, group):
        busy = ok(tools.run("kafka-consumer-groups", "--delete", "--group", group, "--timeout", TIMEOUT))
        assert_not_deleted(busy, group, "GroupNotEmptyException: The group is not empty.")
    deleted = ok(tools.run("kafka-consumer-groups", "--delete", "--group", group, "--timeout", TIMEOUT))
    assert deleted.lines() == [f"Deletion of requested consumer groups ('{group}') was successful."], deleted
    assert group not in reference.list_groups(broker.bootstrap)
    again = ok(tools.run("kafka-consumer-groups", "--delete", "--group", group, "--timeout", TIMEOUT))
    assert_not_deleted(again, group, "GroupIdNotFoundException: The group id does not exist.")


def assert_not_deleted(run: Run, group: str, error: str) -> None:
    """--delete's report of a group it could not delete, with the exception of the error code (3.9 prints it
    wrapped in an ExecutionException)."""
    reason = f"* Group '{group}' could not be deleted due to: "
    assert any(line.startswith(reason) and line.endswith(f"org.apache.kafka.common.errors.{error}")
               for line in run.lines()), run


@contextlib.contextmanager
def member_of(reference, broker, topic: str, group: str):
    """A kafka-python consumer in `group`, assigned its partitions, for the time of a `with` block."""
    consumer = reference.consumer(broker.bootstrap, group_id=group, session_timeout_ms=30000,
                                  heartbeat_interval_ms=1000)
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + WAIT_BOUND_S
        while not consumer.assignment():
            assert time.monotonic() < deadline, "the member got no assignment"
            consumer.poll(timeout_ms=200)
        yield
    finally:
        consumer.close(autocommit=False)


@pytest.mark.matrix(flow="committed_offsets")
def test_kafka_consumer_groups_reset_offsets(tools, broker, reference, topic):
    """--reset-offsets: --dry-run changes nothing, --to-earliest --execute commits 0 everywhere, --to-offset on
    one partition commits there only."""
    needs(tools, "kafka-consumer-groups")
    filled(reference, broker, topic)
    group = group_name(topic)
    reference.group_consume(broker.bootstrap, topic, group, 10)
    reset = ("--reset-offsets", "--group", group, "--timeout", TIMEOUT)

    planned = ok(tools.run("kafka-consumer-groups", *reset, "--topic", topic, "--to-earliest", "--dry-run"))
    assert new_offsets(planned, group, topic) == {0: 0, 1: 0}
    assert reference.committed(broker.bootstrap, group, topic, [0, 1]) == {0: 5, 1: 5}
    done = ok(tools.run("kafka-consumer-groups", *reset, "--topic", topic, "--to-earliest", "--execute"))
    assert new_offsets(done, group, topic) == {0: 0, 1: 0}
    assert reference.committed(broker.bootstrap, group, topic, [0, 1]) == {0: 0, 1: 0}
    one = ok(tools.run("kafka-consumer-groups", *reset, "--topic", f"{topic}:1", "--to-offset", "3", "--execute"))
    assert new_offsets(one, group, topic) == {1: 3}
    assert reference.committed(broker.bootstrap, group, topic, [0, 1]) == {0: 0, 1: 3}


def new_offsets(run: Run, group: str, topic: str) -> dict[int, int]:
    """partition -> NEW-OFFSET of --reset-offsets' table (GROUP TOPIC PARTITION NEW-OFFSET). Read as words: 3.9
    prints the rows without line breaks between them."""
    words = run.stdout.split()
    assert words[:4] == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"] and len(words) % 4 == 0, run
    rows = [words[i:i + 4] for i in range(4, len(words), 4)]
    assert all(row[:2] == [group, topic] for row in rows), run
    return {int(row[2]): int(row[3]) for row in rows}


# --- kafka-configs -------------------------------------------------------------------------------------------------

@pytest.fixture
def configs_jars(jars) -> KafkaTools:
    """The jars, when they hold kafka-configs (asked before a broker of the test's own is started)."""
    needs(jars, "kafka-configs")
    return jars


@pytest.mark.matrix(flow="admin_configs")
def test_kafka_configs_topic_and_broker(configs_jars, fresh_broker, reference, topic):
    """--alter --add-config / --delete-config and --describe on a topic (and the InvalidConfigurationException of an
    unknown config name), and on the broker (its dynamic message.max.bytes)."""
    tools = configs_jars.on(fresh_broker.bootstrap)
    reference.create_topics(fresh_broker.bootstrap, {topic: 1})
    on_topic = ("--entity-type", "topics", "--entity-name", topic)
    assert ok(tools.run("kafka-configs", *on_topic, "--alter", "--add-config",
                        "retention.ms=1234,cleanup.policy=compact")).lines() == [
        f"Completed updating config for topic {topic}."]
    described = ok(tools.run("kafka-configs", *on_topic, "--describe")).lines()
    assert described[0] == f"Dynamic configs for topic {topic} are:", described
    assert any(line.startswith("  retention.ms=1234 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1234")
               for line in described), described
    unknown = failed(tools.run("kafka-configs", *on_topic, "--alter", "--add-config", "no.such.config=1"))
    assert ("org.apache.kafka.common.errors.InvalidConfigurationException: Unknown topic config name: no.such.config"
            in unknown.stderr), unknown  # INVALID_CONFIG, with Kafka's message (LogConfig.validateNames)
    ok(tools.run("kafka-configs", *on_topic, "--alter", "--delete-config", "retention.ms"))
    described = ok(tools.run("kafka-configs", *on_topic, "--describe")).lines()
    assert not any(line.strip().startswith("retention.ms=") for line in described), described
    assert any(line.strip().startswith("cleanup.policy=compact ") for line in described), described

    (node,) = {b[0] for b in reference.metadata(fresh_broker.bootstrap).brokers}
    on_broker = ("--entity-type", "brokers", "--entity-name", str(node))
    assert ok(tools.run("kafka-configs", *on_broker, "--alter", "--add-config",
                        "message.max.bytes=2000000")).lines() == [f"Completed updating config for broker {node}."]
    described = ok(tools.run("kafka-configs", *on_broker, "--describe")).lines()
    assert described[0] == f"Dynamic configs for broker {node} are:", described
    assert any(line.startswith("  message.max.bytes=2000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
                               "message.max.bytes=2000000") for line in described), described
