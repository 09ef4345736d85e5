"""read_committed at the handlers: Fetch stops at the last stable offset and lists the aborted transactions of the
range it returns (still as file regions), read_uncommitted reports the real LSO, long polls wait for the LSO to
move, ListOffsets answers the LSO for "latest" and hides offsets at or past it, and DescribeProducers reports the
open transaction's start offset. Transactions are written straight to the log (client batches, coordinator
markers), so these tests do not depend on the transaction coordinator."""
from __future__ import annotations

import asyncio

import pytest

from compatbroker.protocol import FileRegion
from compatbroker.protocol.messages import DescribeProducersRequest
from compatbroker.protocol.records.batch import build_batch, iter_batches, iter_records
from compatbroker.protocol.records.control import ControlRecordType, build_control_batch
from compatbroker.storage.validator import COORDINATOR

from .helpers import call, records_of, start
from .test_fetch import WaitSpy, fetch_one, fetch_request, region_bytes
from .test_list_offsets import ask

READ_COMMITTED = 1
ABORT, COMMIT = ControlRecordType.ABORT, ControlRecordType.COMMIT


class Txn:
    """A transactional producer appending to partition t-0 of `broker` the way Produce and the markers do."""

    def __init__(self, broker, producer_id, epoch=0):
        self.broker, self.producer_id, self.epoch, self.sequence = broker, producer_id, epoch, 0

    def send(self, *values, timestamp=None):
        stamp = self.broker.now_ms() if timestamp is None else timestamp
        payload = build_batch([(b"k", value, (), stamp) for value in values], producer_id=self.producer_id,
                              producer_epoch=self.epoch, base_sequence=self.sequence, is_transactional=True)
        self.sequence += len(values)
        return self._append(payload, "client")

    def end(self, marker_type):
        marker = build_control_batch(marker_type, producer_id=self.producer_id, producer_epoch=self.epoch,
                                     coordinator_epoch=0, timestamp=self.broker.now_ms())
        return self._append(marker, COORDINATOR)

    def _append(self, payload, origin):
        log = self.broker.get_log("t", 0)
        offset = log.append(payload, leader_epoch=0, now_ms=self.broker.now_ms(), origin=origin).base_offset
        self.broker.notify_appended("t", 0)
        return offset


def plain(broker, *values, timestamp=None):
    stamp = broker.now_ms() if timestamp is None else timestamp
    log = broker.get_log("t", 0)
    offset = log.append(build_batch([(b"k", v, (), stamp) for v in values]), leader_epoch=0,
                        now_ms=broker.now_ms()).base_offset
    broker.notify_appended("t", 0)
    return offset


def offsets_and_values(records) -> list[tuple[int, bytes]]:
    """(offset, value) of the data records (markers are control records: the client skips them)."""
    view = memoryview(bytes(records))
    return [(record.offset, record.value) for position, header in iter_batches(view) if not header.is_control
            for record in iter_records(view[position:position + header.size], max_size=2**31 - 1)]


@pytest.fixture
def mixed(broker):
    """t-0: 0 plain, 1-2 aborted (marker 3), 4 committed (marker 5), 6 plain, 7 open (producer 3)."""
    broker.create_topic("t", 1)
    plain(broker, b"before")
    aborted, committed, still_open = Txn(broker, 1), Txn(broker, 2), Txn(broker, 3)
    aborted.send(b"a1", b"a2")
    aborted.end(ABORT)
    committed.send(b"c1")
    committed.end(COMMIT)
    plain(broker, b"middle")
    still_open.send(b"open")
    return broker


@pytest.mark.parametrize("version", [4, 11, 18])
async def test_read_committed_stops_at_the_lso_and_lists_the_aborts(mixed, version):
    raw, decoded = await fetch_one(mixed, version, isolation_level=READ_COMMITTED)
    assert isinstance(raw.records, FileRegion)  # still sent with sendfile
    assert decoded.high_watermark == 8 and decoded.last_stable_offset == 7
    assert [(txn.producer_id, txn.first_offset) for txn in decoded.aborted_transactions] == [(1, 1)]
    values = offsets_and_values(decoded.records)
    assert values == [(0, b"before"), (1, b"a1"), (2, b"a2"), (4, b"c1"), (6, b"middle")]  # markers skipped
    assert 7 not in [offset for offset, _ in values]


async def test_read_uncommitted_gets_everything_the_real_lso_and_no_aborted_list(mixed):
    _, decoded = await fetch_one(mixed, 11)
    assert decoded.last_stable_offset == 7 and decoded.aborted_transactions is None
    assert offsets_and_values(decoded.records)[-1] == (7, b"open")


async def test_aborts_outside_the_returned_range_are_not_listed(mixed):
    _, decoded = await fetch_one(mixed, 11, offset=4, isolation_level=READ_COMMITTED)
    assert decoded.aborted_transactions == []  # the abort ended at 3, before the fetch offset
    assert offsets_and_values(decoded.records) == [(4, b"c1"), (6, b"middle")]


async def test_a_fetch_at_the_lso_returns_nothing_until_the_transaction_ends(mixed):
    _, decoded = await fetch_one(mixed, 11, offset=7, isolation_level=READ_COMMITTED)
    assert records_of(decoded.records) == [] and decoded.aborted_transactions == []
    Txn(mixed, 3).end(ABORT)
    _, decoded = await fetch_one(mixed, 11, offset=7, isolation_level=READ_COMMITTED)
    assert decoded.last_stable_offset == 9
    assert [(txn.producer_id, txn.first_offset) for txn in decoded.aborted_transactions] == [(3, 7)]
    assert offsets_and_values(decoded.records) == [(7, b"open")]  # the client drops it by the aborted list


async def test_a_long_poll_waits_for_the_marker_that_moves_the_lso(broker):
    broker.create_topic("t", 1)
    producer = Txn(broker, 5)
    spy = WaitSpy(broker)
    poll = asyncio.create_task(start(broker, 11, fetch_request(broker, 11, ("t", 0, 0, 1 << 20),
                                                                max_wait_ms=20_000, isolation_level=1)))
    await spy.until(1)
    producer.send(b"pending")  # above the LSO: not data for read_committed
    await spy.until(2)
    assert not poll.done()
    producer.end(COMMIT)
    response = await poll
    partition = response.responses[0].partitions[0]
    assert partition.last_stable_offset == 2
    assert offsets_and_values(region_bytes(partition.records)) == [(0, b"pending")]


async def test_describe_producers_reports_the_open_transactions_start(mixed):
    request = DescribeProducersRequest(topics=[DescribeProducersRequest.TopicRequest(name="t",
                                                                                     partition_indexes=[0])])
    producers = (await call(mixed, 0, request)).decoded.topics[0].partitions[0].active_producers
    assert [(p.producer_id, p.current_txn_start_offset) for p in producers] == [(1, -1), (2, -1), (3, 7)]


# --- ListOffsets --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [2, 7, 11])
async def test_list_offsets_latest_is_the_lso_for_read_committed(mixed, version):
    assert (await ask(mixed, version, -1, isolation_level=READ_COMMITTED)).offset == 7
    assert (await ask(mixed, version, -1)).offset == 8


async def test_timestamp_lookups_stop_at_the_lso_for_read_committed(broker):
    broker.create_topic("t", 1)
    plain(broker, b"old", timestamp=1000)
    Txn(broker, 1).send(b"open", timestamp=5000)
    committed = await ask(broker, 11, 1000, isolation_level=READ_COMMITTED)
    assert (committed.offset, committed.timestamp) == (0, 1000)
    hidden = await ask(broker, 11, 2000, isolation_level=READ_COMMITTED)
    assert (hidden.offset, hidden.timestamp) == (-1, -1)  # offset 1 is at the LSO: not fetchable yet
    assert (await ask(broker, 11, 2000)).offset == 1
    newest = await ask(broker, 11, -3, isolation_level=READ_COMMITTED)  # MAX_TIMESTAMP
    assert newest.offset == -1
    assert (await ask(broker, 11, -3)).offset == 1
