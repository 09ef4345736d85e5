"""An exactly-once consume-transform-produce loop, run as a process of its own so that test_exactly_once.py can
SIGKILL it at any moment:

    python -m tests.compat.eos_loop '<spec json>'

spec: {"client": "confluent-kafka" | "kafka-python", "bootstrap", "input", "output", "partitions", "group",
"transactional_id", "batch"}. The loop initialises its transactional producer (fencing a predecessor with the same
transactional.id, whose open transaction the broker aborts), reads the group's committed offsets, and from there
reads the input read_committed (assign(), no group membership) in batches of up to `batch` records. Each batch is
one transaction: every record goes to the output partition of its input partition, value `out:<input value>`,
and the offsets after the batch are committed with send_offsets_to_transaction. It prints `PHASE produced` once
the batch's output records are acknowledged (in the log, the transaction open), `PHASE offsets` once the offsets
are added to the transaction, and after each commit `COMMITTED {"<partition>": <next offset>, ...}`: the test
picks its moments to kill by them. Any error ends the process with status 1, as an application that
restarts from its last commit would; the test starts a new one.
"""
from __future__ import annotations

import json
import sys
import traceback

TIMEOUT_S = 30.0  # bound on each blocking client call: generous for a broker that is restarting


def report(positions: dict[int, int]) -> None:
    print("COMMITTED " + json.dumps({str(p): o for p, o in positions.items()}), flush=True)


def phase(name: str) -> None:
    print(f"PHASE {name}", flush=True)


def run_confluent(spec: dict) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
    # metadata.recovery.strategy=none: librdkafka 2.16 re-bootstraps when its only broker is down, and its
    # coordinator handles (TxnCoordinator, GroupCoordinator) keep the decommissioned broker from terminating:
    # it spins in "Handle is terminating in state INIT" and never reconnects to the restarted broker.
    common = {"bootstrap.servers": spec["bootstrap"], "broker.address.family": "v4", "retry.backoff.ms": 50,
              "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500, "metadata.recovery.strategy": "none"}
    if spec.get("debug"):
        common["debug"] = spec["debug"]
    producer = Producer(common | {"transactional.id": spec["transactional_id"], "linger.ms": 5})
    producer.init_transactions(TIMEOUT_S)
    consumer = Consumer(common | {"group.id": spec["group"], "isolation.level": "read_committed",
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "fetch.wait.max.ms": 100})
    tps = [TopicPartition(spec["input"], p) for p in range(spec["partitions"])]
    committed = consumer.committed(tps, timeout=TIMEOUT_S)
    consumer.assign([TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
                     for tp in committed])
    failures = []
    while True:
        messages = consumer.consume(num_messages=spec["batch"], timeout=0.5)
        for msg in messages:
            if msg.error():
                raise KafkaException(msg.error())
        if not messages:
            continue
        producer.begin_transaction()
        positions: dict[int, int] = {}
        for msg in messages:
            producer.produce(spec["output"], key=msg.key(), value=b"out:" + msg.value(), partition=msg.partition(),
                             on_delivery=lambda err, _m: err is not None and failures.append(err))
            positions[msg.partition()] = msg.offset() + 1
        producer.flush(TIMEOUT_S)
        if failures:
            raise KafkaException(failures[0])
        phase("produced")
        producer.send_offsets_to_transaction(
            [TopicPartition(spec["input"], p, o) for p, o in positions.items()],
            consumer.consumer_group_metadata(), TIMEOUT_S)
        phase("offsets")
        producer.commit_transaction(TIMEOUT_S)
        if failures:
            raise KafkaException(failures[0])
        report(positions)


def run_kafka_python(spec: dict) -> None:
    if spec.get("debug"):
        import logging
        logging.basicConfig(level=logging.DEBUG)
    from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
    producer = KafkaProducer(bootstrap_servers=spec["bootstrap"], transactional_id=spec["transactional_id"],
                             linger_ms=5, retry_backoff_ms=50, reconnect_backoff_ms=50,
                             reconnect_backoff_max_ms=500, request_timeout_ms=30000, max_block_ms=60000)
    producer.init_transactions()
    consumer = KafkaConsumer(bootstrap_servers=spec["bootstrap"], group_id=spec["group"],
                             isolation_level="read_committed", enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100, retry_backoff_ms=50,
                             reconnect_backoff_ms=50, reconnect_backoff_max_ms=500)
    tps = [TopicPartition(spec["input"], p) for p in range(spec["partitions"])]
    consumer.assign(tps)
    for tp in tps:
        offset = consumer.committed(tp)
        if offset is None:
            consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, offset)
    while True:
        records = [r for batch in consumer.poll(timeout_ms=500, max_records=spec["batch"]).values() for r in batch]
        if not records:
            continue
        producer.begin_transaction()
        futures = []
        positions: dict[int, int] = {}
        for r in records:
            futures.append(producer.send(spec["output"], key=r.key, value=b"out:" + r.value, partition=r.partition))
            positions[r.partition] = r.offset + 1
        # kafka-python 3.0.12 can lose its AddPartitionsToTxn when the broker goes away while it re-finds the
        # coordinator: nothing is sent again and the flush times out; this process then ends and a new one
        # takes over, as an application restarting from its last commit would.
        producer.flush(timeout=TIMEOUT_S)
        for future in futures:
            future.get(timeout=0)  # acknowledged by the flush: raises if one failed
        phase("produced")
        producer.send_offsets_to_transaction(
            {TopicPartition(spec["input"], p): OffsetAndMetadata(o, "", -1) for p, o in positions.items()},
            consumer.group_metadata())
        phase("offsets")
        producer.commit_transaction()
        report(positions)


def main() -> None:
    spec = json.loads(sys.argv[1])
    try:
        {"confluent-kafka": run_confluent, "kafka-python": run_kafka_python}[spec["client"]](spec)
    except Exception:  # noqa: BLE001 - any failure ends this process; the test starts another
        traceback.print_exc()
        sys.stderr.flush()
        sys.exit(1)


if __name__ == "__main__":
    main()
