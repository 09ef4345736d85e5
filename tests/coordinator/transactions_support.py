"""Helpers of the transaction coordinator tests: a started coordinator on a real Broker, transactions begun in one
call, and the markers a partition holds."""
from __future__ import annotations

from compatbroker.coordinator.transactions import transactions_of
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.records.batch import batch_crc, iter_batches, iter_records
from compatbroker.protocol.records.control import parse_control_record
from tests.handlers.helpers import make_broker

TIMEOUT_MS = 60_000


async def loaded(broker):
    coordinator = transactions_of(broker)
    await coordinator.start()
    return coordinator


async def begin(coordinator, transactional_id: str, partitions, *, timeout_ms: int = TIMEOUT_MS):
    """InitProducerId, then AddPartitionsToTxn: returns (producer id, epoch)."""
    init = await coordinator.init_producer_id(transactional_id, timeout_ms, None)
    assert init.error == ErrorCode.NONE, init
    added = await coordinator.add_partitions(transactional_id, init.producer_id, init.producer_epoch,
                                             list(partitions))
    assert added == ErrorCode.NONE
    return init.producer_id, init.producer_epoch


def markers(broker, topic: str, partition: int) -> list[tuple[int, int, str, int]]:
    """(producer id, producer epoch, COMMIT/ABORT, coordinator epoch) of each control batch in the partition,
    after checking every batch's CRC-32C."""
    log = broker.get_log(topic, partition)
    data = memoryview(log.read_bytes(log.log_start_offset, 1 << 24))
    found = []
    for start, header in iter_batches(data):
        assert batch_crc(data[start:], header.size) == header.crc, "a batch with a bad CRC"
        if header.is_control:
            assert header.is_transactional
            for record in iter_records(data[start:start + header.size], max_size=1 << 20):
                marker = parse_control_record(bytes(record.key), bytes(record.value))
                found.append((header.producer_id, header.producer_epoch, marker.type.name,
                              marker.coordinator_epoch))
    return found


def new_broker(data_dir, **properties):
    return make_broker(data_dir, **properties)
