"""faust-streaming (0.15, on aiokafka 0.14) as an application: a worker of apps/faust_counter.py, whose agent counts
the words of a source topic in a Table and sends each new count to a result topic.

Flow "stream app (faust)": the worker's consumer group, producer and topic creation against compatbroker; the table's
changelog is created compacted (cleanup.policy=compact, read back with DescribeConfigs) and holds every update; after
the worker stops (SIGTERM) and a new one starts, the in-memory table is recovered from the changelog and the source is
read on from the committed offsets, so the counts go on where they were. Words are sent once each worker is ready,
because faust may lose records it fetches while it recovers (see send_when_ready).
"""
from __future__ import annotations

import json

import pytest

from .apps.faust_worker import changelog_topic, worker
from .checks import read_exactly
from .clients import ClientError, MissingClient
from .records import AtOffset, Record

pytestmark = pytest.mark.matrix(client="faust")
READY = "[^Worker]: Ready"  # what a faust worker logs once it has recovered its tables and fetches its topics
TIMEOUT_S = 90.0  # a bound on each read: a worker starts, joins its group and recovers its table within it


def words(*keys: str) -> list[Record]:
    return [Record(key.encode(), b"") for key in keys]


def counts_of(records) -> list[tuple[str, int]]:
    return [(r.key.decode(), int(r.value)) for r in sorted(records, key=lambda r: r.offset)]


def start_worker(tmp_path, broker, app_id: str, source: str, result: str, run: int):
    try:
        return worker(tmp_path, broker.bootstrap, app_id, source, result, run).start()
    except MissingClient as exc:
        pytest.fail(str(exc), pytrace=False)


def send_when_ready(reference, broker, worker, source: str, *keys: str) -> None:
    """Sends the words once the worker has recovered its table: faust itself may lose records it fetches during
    recovery (its queues are cleared when recovery ends; faust-streaming issue #596, open in 0.15.3)."""
    worker.wait_until(lambda: READY in worker.log_text(), "ready worker")
    reference.produce(broker.bootstrap, source, words(*keys))


def results(reference, broker, worker, topic: str, count: int, start: int) -> list[tuple[str, int]]:
    """(word, count) of the `count` results from offset `start`; the worker's log when they do not come."""
    try:
        return counts_of(reference.consume(broker.bootstrap, topic, count, start=AtOffset(start), timeout_s=TIMEOUT_S))
    except ClientError as exc:
        raise AssertionError(f"{exc}\n{worker.describe()}") from None


def topic_config(broker, topic: str) -> dict[str, str]:
    """The topic's non-default configs, through kafka-python's DescribeConfigs."""
    from kafka.admin import ConfigResource, KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=int(TIMEOUT_S * 1000))
    try:
        found = admin.describe_configs([ConfigResource("TOPIC", topic)])["topic"][topic]
    finally:
        admin.close()
    return {name: entry["value"] for name, entry in found.items()}


@pytest.mark.matrix(flow="stream app (faust)")
def test_table_counts_go_on_after_a_restart_from_the_compacted_changelog(broker, reference, tmp_path, topic):
    source, result, app_id = f"{topic}.words", f"{topic}.counts", topic
    reference.create_topics(broker.bootstrap, {source: 1, result: 1})
    first = start_worker(tmp_path, broker, app_id, source, result, 1)
    try:
        send_when_ready(reference, broker, first, source, "a", "b", "a", "a", "b")
        counted = results(reference, broker, first, result, 5, 0)
        assert counted == [("a", 1), ("b", 1), ("a", 2), ("a", 3), ("b", 2)]
    finally:
        assert first.stop() == 0, f"faust's worker did not exit cleanly on SIGTERM\n{first.describe()}"

    # the worker's consumer group (named after the app) committed what it counted, on shutdown at the latest
    assert reference.committed(broker.bootstrap, app_id, source, [0]) == {0: 5}
    changelog = changelog_topic(app_id)
    assert topic_config(broker, changelog).get("cleanup.policy") == "compact"
    updates = read_exactly(reference, broker, changelog, 5)  # every update of the table, keys and values as JSON
    assert [(json.loads(r.key), json.loads(r.value)) for r in updates] == counted

    second = start_worker(tmp_path, broker, app_id, source, result, 2)
    try:
        send_when_ready(reference, broker, second, source, "a", "c")
        counted = results(reference, broker, second, result, 2, 5)
        assert counted == [("a", 4), ("c", 1)], "the table was not recovered from its changelog"
    finally:
        assert second.stop() == 0, f"faust's worker did not exit cleanly on SIGTERM\n{second.describe()}"
    assert reference.end_offsets(broker.bootstrap, result, [0]) == {0: 7}, "a source record was counted twice"
