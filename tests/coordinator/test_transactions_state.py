"""The transaction state machine and the `__transaction_state` record codec, without a broker."""
from __future__ import annotations

import struct

import pytest

from compatbroker.coordinator.transactions.records import encode_key, encode_value, parse_record
from compatbroker.coordinator.transactions.state import (IllegalTransition, TransactionMetadata,
                                                          TransactionState)
from compatbroker.protocol import DecodeError, encode_message
from compatbroker.protocol.messages import TransactionLogValue

S = TransactionState


def test_state_ids_and_names_are_kafkas():
    assert [(s.value, s.kafka_name) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"), (4, "CompleteCommit"),
        (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
    assert S.from_kafka_name("PrepareEpochFence") is S.PREPARE_EPOCH_FENCE and S.from_kafka_name("ongoing") is None


@pytest.mark.parametrize("start, target", [
    (S.EMPTY, S.ONGOING), (S.COMPLETE_ABORT, S.ONGOING), (S.ONGOING, S.PREPARE_COMMIT),
    (S.ONGOING, S.PREPARE_ABORT), (S.PREPARE_COMMIT, S.COMPLETE_COMMIT), (S.PREPARE_ABORT, S.COMPLETE_ABORT),
    (S.COMPLETE_COMMIT, S.EMPTY), (S.COMPLETE_COMMIT, S.PREPARE_ABORT), (S.EMPTY, S.DEAD),
    (S.ONGOING, S.PREPARE_EPOCH_FENCE), (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT), (S.EMPTY, S.PREPARE_ABORT)])
def test_legal_transitions(start, target):
    assert TransactionMetadata("tx", 1, 0, 1000, start).transition(target).state is target


@pytest.mark.parametrize("start, target", [
    (S.EMPTY, S.PREPARE_COMMIT), (S.ONGOING, S.EMPTY), (S.PREPARE_COMMIT, S.COMPLETE_ABORT),
    (S.PREPARE_ABORT, S.ONGOING), (S.ONGOING, S.DEAD), (S.COMPLETE_ABORT, S.PREPARE_COMMIT),
    (S.PREPARE_COMMIT, S.EMPTY)])
def test_illegal_transitions_raise(start, target):
    with pytest.raises(IllegalTransition):
        TransactionMetadata("tx", 1, 0, 1000, start).transition(target)


def test_a_value_round_trips_with_every_field():
    metadata = TransactionMetadata("tx", 5, 3, 60_000, S.ONGOING, frozenset({("b", 2), ("a", 1), ("a", 0)}), 10,
                                   20, previous_producer_id=4, next_producer_id=9, client_transaction_version=2)
    value = encode_value(metadata)
    assert struct.unpack_from(">h", value)[0] == 1  # written as version 1, as Kafka 4.x does
    assert parse_record(encode_key("tx"), value).metadata == metadata
    assert encode_key("tx") == b"\x00\x00\x00\x02tx"


def test_empty_state_writes_null_partitions():
    value = encode_value(TransactionMetadata("tx", 5, 0, 1000))
    # version, producer id, epoch, timeout, status, then a compact nullable array: 0 means null
    assert value[2 + 8 + 2 + 4 + 1] == 0


def test_a_version_0_value_is_read():
    body = TransactionLogValue(producer_id=7, producer_epoch=2, transaction_timeout_ms=500, transaction_status=4,
                               transaction_partitions=[], transaction_last_update_timestamp_ms=99,
                               transaction_start_timestamp_ms=90)
    record = parse_record(encode_key("old"), b"\x00\x00" + encode_message(TransactionLogValue, 0, body))
    assert (record.metadata.producer_id, record.metadata.state, record.metadata.previous_producer_id) == \
        (7, S.COMPLETE_COMMIT, -1)


def test_a_tombstone_and_bad_records():
    assert parse_record(encode_key("gone"), None) == ("gone", None)
    with pytest.raises(DecodeError):
        parse_record(b"\x00", None)
    with pytest.raises(DecodeError):
        parse_record(b"\x00\x05" + encode_key("x")[2:], None)  # an unknown key version
    bad_state = bytearray(encode_value(TransactionMetadata("tx", 5, 0, 1000)))
    bad_state[2 + 8 + 2 + 4] = 9
    with pytest.raises(DecodeError):
        parse_record(encode_key("tx"), bytes(bad_state))
