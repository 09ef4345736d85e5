"""Transactions with real clients: kafka-python, aiokafka, confluent-kafka (librdkafka) and kafkajs, each as producer
and consumer of its own records (one matrix cell per client, flow "transactions").

- commit and abort: a transactional producer commits one transaction and aborts another, both across 3 partitions.
  The log holds each partition's records followed by a control batch (the COMMIT, then the ABORT marker); a
  read_committed consumer gets exactly the committed records in order and its position reaches the end offset (past
  the aborted records and both markers); a read_uncommitted consumer gets both transactions' records, the markers'
  offsets left out as gaps.
- fencing: a second producer with the same transactional.id fences the first. The broker aborts the first one's open
  transaction (its records are never read_committed, the LSO moves on), and the first one's commit fails with
  PRODUCER_FENCED or what its client makes of it (see FENCED).
- timeout: a producer begins a transaction, writes, and goes silent (kafkajs: its process exits without a word).
  The broker aborts the transaction once transaction.timeout.ms (TIMEOUT_MS) has passed, not before; the LSO then
  reaches the high watermark and a read_committed consumer reads past it to a later committed transaction.

The broker runs with transaction.abort.timed.out.transaction.cleanup.interval.ms at 500 ms, so that a timed-out
transaction is aborted within about half a second of its timeout.
"""
from __future__ import annotations

import time

import pytest

from . import clients
from .clients import catalog
from .broker_process import BrokerProcess
from .clients.base import OK, TxnStep
from .conftest import BROKER_SETTINGS
from .records import Consumed, Record, stored_batches

PARTITIONS = 3
PER_TRANSACTION = 30  # records of one transaction, spread over the partitions
TIMEOUT_MS = 3000  # the silent producer's transaction.timeout.ms
CLEANUP_INTERVAL_MS = 500
WAIT_S = 60.0  # bound on the timed-out transaction's abort, far above TIMEOUT_MS for a loaded machine
TXN_CLIENTS = catalog.with_tag("transactional")
# What each client's commit raises once a newer producer has fenced it. kafka-python and aiokafka turn
# INVALID_PRODUCER_EPOCH and PRODUCER_FENCED into their fenced error; librdkafka into its fatal _FENCED; kafkajs
# (EndTxn v1) reports the code as is, and Kafka answers EndTxn below v2 INVALID_PRODUCER_EPOCH instead of
# PRODUCER_FENCED.
FENCED = {"kafka-python": {"error:PRODUCER_FENCED"}, "aiokafka": {"error:ProducerFenced"},
          "confluent-kafka": {"error:_FENCED"}, "kafkajs": {"error:INVALID_PRODUCER_EPOCH"},
          "node-rdkafka": {"error:_FENCED"}, "confluent-kafka-javascript": {"error:_FENCED"},
          "kafka-python-2.2": {"error:INVALID_PRODUCER_EPOCH"},  # it sends EndTxn v1
          "aiokafka-0.10": {"error:ProducerFenced"},
          "confluent-kafka-2.4": {"error:_FENCED"}}


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory):
    settings = BROKER_SETTINGS | {
        "num.partitions": str(PARTITIONS),
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": str(CLEANUP_INTERVAL_MS)}
    with BrokerProcess(tmp_path_factory.mktemp("txn") / "data", settings) as running:
        yield running


@pytest.fixture(params=TXN_CLIENTS)
def txn_client(request) -> str:
    return request.param


def spread(prefix: str, count: int = PER_TRANSACTION) -> tuple[Record, ...]:
    """`count` records `<prefix>-<i>` over the partitions round-robin, key `k-<i>`."""
    return tuple(Record(f"k-{i}".encode(), f"{prefix}-{i}".encode(), partition=i % PARTITIONS)
                 for i in range(count))


def in_partition(records, partition: int) -> list[bytes]:
    return [r.value for r in records if r.partition == partition]


def transaction(producer: str, records, commit: bool) -> list[TxnStep]:
    return [TxnStep(producer, "begin"), TxnStep(producer, "send", records),
            TxnStep(producer, "commit" if commit else "abort")]


def create_topic(reference, broker: BrokerProcess, topic: str) -> None:
    assert reference.partitions_for(broker.bootstrap, topic) == set(range(PARTITIONS))


def high_watermarks(reference, broker: BrokerProcess, topic: str) -> dict[int, int]:
    return reference.end_offsets(broker.bootstrap, topic, range(PARTITIONS))


def last_stable_offsets(reference, broker: BrokerProcess, topic: str) -> dict[int, int]:
    """ListOffsets latest with isolation level read_committed: the LSO of each partition."""
    from kafka import TopicPartition
    consumer = reference.consumer(broker.bootstrap, isolation_level="read_committed")
    try:
        found = consumer.end_offsets([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout_ms=15000)
    finally:
        consumer.close()
    return {tp.partition: offset for tp, offset in found.items()}


def marker_offsets(broker: BrokerProcess, topic: str) -> dict[int, list[int]]:
    """The offsets of the control batches (transaction markers) on disk, per partition."""
    return {p: [b.base_offset for b in stored_batches(broker.segment_files(topic, p)) if b.control]
            for p in range(PARTITIONS)}


def values_by_partition(got: list[Consumed]) -> dict[int, list[bytes]]:
    ordered = sorted(got, key=lambda r: (r.partition, r.offset))
    return {p: [r.value for r in ordered if r.partition == p] for p in range(PARTITIONS)}


def offsets_by_partition(got: list[Consumed]) -> dict[int, list[int]]:
    return {p: sorted(r.offset for r in got if r.partition == p) for p in range(PARTITIONS)}


def close_abandoned(client) -> None:
    """Closes, without waiting, producers a script abandoned (their transactions are over by now)."""
    for producer in client.__dict__.pop("abandoned", []):
        close = getattr(producer, "close", None)
        if close is not None and not _is_coroutine_function(close):
            try:
                close(timeout=0)
            except Exception:  # noqa: BLE001 - a fenced or timed-out producer may complain; it is done with
                pass


def _is_coroutine_function(function) -> bool:
    import inspect
    return inspect.iscoroutinefunction(function)


# --- the tests ----------------------------------------------------------------------------------------------------

def test_commit_and_abort_across_partitions(txn_broker, reference, txn_client, topic):
    client = clients.load_or_fail(txn_client)
    create_topic(reference, txn_broker, topic)
    committed, aborted = spread("committed"), spread("aborted")
    steps = [TxnStep("a", "init", transactional_id=f"txn-{topic}"), *transaction("a", committed, True),
             *transaction("a", aborted, False)]

    outcomes = client.run_transactional(txn_broker.bootstrap, topic, steps)

    assert outcomes == [OK] * len(steps), list(zip([s.op for s in steps], outcomes))
    per_partition = PER_TRANSACTION // PARTITIONS
    ends = high_watermarks(reference, txn_broker, topic)
    assert ends == {p: 2 * per_partition + 2 for p in range(PARTITIONS)}, "records plus two markers per partition"
    assert marker_offsets(txn_broker, topic) == {p: [per_partition, 2 * per_partition + 1] for p in range(PARTITIONS)}
    assert last_stable_offsets(reference, txn_broker, topic) == ends, "no transaction is open: LSO = HWM"

    got, positions = client.read_to_end(txn_broker.bootstrap, topic, ends, read_committed=True)
    assert values_by_partition(got) == {p: in_partition(committed, p) for p in range(PARTITIONS)}
    assert offsets_by_partition(got) == {p: list(range(per_partition)) for p in range(PARTITIONS)}
    assert positions == ends, "read_committed: the position moves past the aborted records and the markers"

    got, positions = client.read_to_end(txn_broker.bootstrap, topic, ends, read_committed=False)
    assert values_by_partition(got) == {p: in_partition(committed, p) + in_partition(aborted, p)
                                        for p in range(PARTITIONS)}
    gaps = {p: sorted(set(range(ends[p])) - set(offsets)) for p, offsets in offsets_by_partition(got).items()}
    assert gaps == marker_offsets(txn_broker, topic), "read_uncommitted: only the markers' offsets are missing"
    assert positions == ends


def test_second_producer_fences_the_first(txn_broker, reference, txn_client, topic):
    client = clients.load_or_fail(txn_client)
    create_topic(reference, txn_broker, topic)
    fenced, newer = spread("fenced"), spread("newer")
    transactional_id = f"txn-{topic}"
    steps = [TxnStep("old", "init", transactional_id=transactional_id), TxnStep("old", "begin"),
             TxnStep("old", "send", fenced),
             TxnStep("new", "init", transactional_id=transactional_id),  # fences "old", aborts its transaction
             *transaction("new", newer, True),
             TxnStep("old", "commit")]

    outcomes = client.run_transactional(txn_broker.bootstrap, topic, steps)

    assert outcomes[:-1] == [OK] * (len(steps) - 1), list(zip([s.op for s in steps], outcomes))
    assert outcomes[-1] in FENCED[txn_client], f"the fenced producer's commit: {outcomes[-1]}"
    per_partition = PER_TRANSACTION // PARTITIONS
    ends = high_watermarks(reference, txn_broker, topic)
    # the fenced records, the ABORT marker the fencing wrote, the newer records, their COMMIT marker
    assert marker_offsets(txn_broker, topic) == {p: [per_partition, 2 * per_partition + 1] for p in range(PARTITIONS)}
    assert last_stable_offsets(reference, txn_broker, topic) == ends
    got, positions = client.read_to_end(txn_broker.bootstrap, topic, ends, read_committed=True)
    assert values_by_partition(got) == {p: in_partition(newer, p) for p in range(PARTITIONS)}
    assert positions == ends


def test_silent_producer_is_aborted_after_its_transaction_timeout(txn_broker, reference, txn_client, topic):
    client = clients.load_or_fail(txn_client)
    create_topic(reference, txn_broker, topic)
    stuck, later = spread("stuck"), spread("later")
    began = time.monotonic()  # the transaction starts after this on the broker's clock too
    try:
        outcomes = client.run_transactional(txn_broker.bootstrap, topic, [
            TxnStep("silent", "init", transactional_id=f"silent-{topic}", timeout_ms=TIMEOUT_MS),
            TxnStep("silent", "begin"), TxnStep("silent", "send", stuck), TxnStep("silent", "abandon")])
        assert outcomes == [OK] * 4, outcomes
        outcomes = client.run_transactional(txn_broker.bootstrap, topic, [
            TxnStep("later", "init", transactional_id=f"later-{topic}"), *transaction("later", later, True)])
        assert outcomes == [OK] * 4, outcomes

        stable = last_stable_offsets(reference, txn_broker, topic)
        in_time = time.monotonic() < began + TIMEOUT_MS / 1000
        print(f"LSO {stable} {'inside' if in_time else 'after'} the transaction timeout")
        if in_time:  # the transaction must still be open
            assert stable == {p: 0 for p in range(PARTITIONS)}, "the open transaction's first offset is the LSO"
        ends = high_watermarks(reference, txn_broker, topic)
        moved_at = wait_for_stable(reference, txn_broker, topic, ends)
    finally:
        close_abandoned(client)

    assert moved_at >= began + TIMEOUT_MS / 1000, (
        f"aborted {moved_at - began:.1f} s after the producer began, before its {TIMEOUT_MS} ms timeout")
    per_partition = PER_TRANSACTION // PARTITIONS
    ends = high_watermarks(reference, txn_broker, topic)
    assert ends == {p: 2 * per_partition + 2 for p in range(PARTITIONS)}, "records plus two markers per partition"
    markers = marker_offsets(txn_broker, topic)
    assert all(len(markers[p]) == 2 and markers[p][1] == ends[p] - 1 for p in range(PARTITIONS)), (
        f"the later transaction's COMMIT marker and the timed-out one's ABORT marker: {markers}")
    got, positions = client.read_to_end(txn_broker.bootstrap, topic, ends, read_committed=True)
    assert values_by_partition(got) == {p: in_partition(later, p) for p in range(PARTITIONS)}
    assert positions == ends


def wait_for_stable(reference, broker: BrokerProcess, topic: str, ends: dict[int, int]) -> float:
    """Polls the LSO until it reaches `ends` (the timed-out transaction aborted); returns when it was seen."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        stable = last_stable_offsets(reference, broker, topic)
        if all(stable[p] >= ends[p] for p in ends):  # past the open transaction: it was aborted
            return time.monotonic()
        time.sleep(0.1)  # a poll's pace, not a synchronisation: the condition above decides
    raise AssertionError(f"the LSO stayed at {stable} (HWM {ends}) for {WAIT_S} s: the transaction was not aborted")
