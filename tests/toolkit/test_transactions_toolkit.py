"""The toolkit's view of transactions: `EmbeddedBroker.transactions()` in both modes, the control API's
`/transactions` and the CLI's `transactions`, and fault injection on the transaction APIs (a retriable error on
EndTxn, which the producer retries; a fatal one, which reaches the application)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from compatbroker import EmbeddedBroker
from compatbroker.toolkit.control.client import ControlClient

MODES = ("thread", "subprocess")
DEADLINE_S = 60


def transactional_producer(bootstrap: str, transactional_id: str):
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "transaction.timeout.ms": 60000, "retry.backoff.ms": 50, "linger.ms": 0})
    producer.init_transactions(DEADLINE_S)
    return producer


def write_transaction(producer, topic: str, partitions: list[int], *, commit: bool) -> None:
    producer.begin_transaction()
    for partition in partitions:
        producer.produce(topic, key=b"k", value=f"p{partition}".encode(), partition=partition)
    producer.flush(DEADLINE_S)
    if commit:
        producer.commit_transaction(DEADLINE_S)
    else:
        producer.abort_transaction(DEADLINE_S)


@pytest.mark.parametrize("mode", MODES)
def test_transactions_shows_each_transactional_id_with_its_state_and_partitions(mode):
    with EmbeddedBroker(mode=mode) as broker:
        broker.create_topic("orders", 3)
        producer = transactional_producer(broker.bootstrap_servers, "orders-writer")
        write_transaction(producer, "orders", [0, 2], commit=True)
        committed = broker.transactions()["orders-writer"]
        assert committed.state == "CompleteCommit"
        assert committed.producer_id >= 0 and committed.producer_epoch >= 0
        assert committed.transaction_timeout_ms == 60000
        producer.begin_transaction()
        producer.produce("orders", value=b"open", partition=1)
        producer.flush(DEADLINE_S)
        ongoing = broker.transactions()["orders-writer"]
        assert (ongoing.state, ongoing.partitions) == ("Ongoing", [("orders", 1)])
        assert ongoing.producer_id == committed.producer_id
        assert ongoing.transaction_start_time_ms > 0
        producer.abort_transaction(DEADLINE_S)
        assert broker.transactions()["orders-writer"].state == "CompleteAbort"


def test_the_control_api_and_the_cli_show_the_same_transactions():
    with EmbeddedBroker(mode="subprocess") as broker:
        broker.create_topic("audit", 1)
        write_transaction(transactional_producer(broker.bootstrap_servers, "audit-writer"), "audit", [0],
                          commit=False)
        over_http = ControlClient(broker.control_url).transactions("audit-writer")
        assert [(entry["transactional_id"], entry["state"]) for entry in over_http] == [
            ("audit-writer", "CompleteAbort")]
        assert ControlClient(broker.control_url).transactions("nobody") == []
        shown = subprocess.run([sys.executable, "-m", "compatbroker", "control", "--control", broker.control_url,
                                "transactions"], capture_output=True, text=True, timeout=DEADLINE_S, check=True)
        assert json.loads(shown.stdout) == over_http


def test_a_retriable_error_injected_on_end_txn_is_retried_and_the_transaction_commits(compatbroker_fresh):
    broker = compatbroker_fresh
    broker.create_topic("retried", 1)
    producer = transactional_producer(broker.bootstrap_servers, "retried-writer")
    broker.inject_error(api="EndTxn", error="CONCURRENT_TRANSACTIONS", count=2)
    since = broker.requests()[-1].seq if broker.requests() else 0
    write_transaction(producer, "retried", [0], commit=True)
    assert broker.transactions()["retried-writer"].state == "CompleteCommit"
    assert len(broker.requests(since=since, api="EndTxn")) == 3  # two refused, the third served


def test_a_fatal_error_injected_on_add_partitions_reaches_the_producer(compatbroker_fresh):
    from confluent_kafka import KafkaException
    broker = compatbroker_fresh
    broker.create_topic("refused", 1)
    producer = transactional_producer(broker.bootstrap_servers, "refused-writer")
    broker.inject_error(api="AddPartitionsToTxn", error="TRANSACTIONAL_ID_AUTHORIZATION_FAILED", count=1)
    producer.begin_transaction()
    producer.produce("refused", value=b"x", partition=0)
    with pytest.raises(KafkaException) as raised:  # librdkafka raises it from flush() or, at the latest, commit
        producer.flush(DEADLINE_S)
        producer.commit_transaction(DEADLINE_S)
    assert "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in raised.value.args[0].name()
    assert broker.records("refused", 0) == []
