"""The share-partition state machine (compatbroker.share.partition) with a fake clock: acquisition, locks, delivery
counts, acknowledgements and the start offset, as Kafka's SharePartition has them."""
from __future__ import annotations

import uuid

import pytest

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.share.partition import (AckBatch, AcknowledgeType, AcquiredRange, LogBatch, RecordState,
                                          ShareAckError, SharePartition, StateBatch)

LOCK_MS = 30_000
LIMIT = 5
TOPIC_ID = uuid.uuid4()


def partition(start=0, **options) -> SharePartition:
    return SharePartition("g", TOPIC_ID, 0, start, **options)


def acquire(sp, member="m1", batches=((0, 9),), *, max_records=500, batch_size=500, strict=False, locks=2000,
            now=0, fetch_offset=None):
    logged = [LogBatch(*batch) for batch in batches]
    offset = sp.next_fetch_offset() if fetch_offset is None else fetch_offset
    return sp.acquire(member, logged, fetch_offset=offset, max_records=max_records, batch_size=batch_size,
                      strict=strict, max_record_locks=locks, now_ms=now, lock_duration_ms=LOCK_MS)


def ack(sp, first, last, *types, member="m1", now=0):
    return sp.acknowledge(member, [AckBatch(first, last, tuple(types))], delivery_count_limit=LIMIT, now_ms=now,
                          lock_duration_ms=LOCK_MS)


def test_new_records_are_acquired_with_delivery_count_one():
    sp = partition()
    result = acquire(sp, batches=[(0, 4), (5, 9)])
    assert result.ranges == [AcquiredRange(0, 9, 1)]
    assert result.count == 10 and sp.next_offset == 10 and sp.start_offset == 0
    assert sp.record(3).state is RecordState.ACQUIRED and sp.record(3).member_id == "m1"


def test_acquired_records_are_not_acquired_by_another_member():
    sp = partition()
    acquire(sp, "m1", [(0, 9)])
    assert acquire(sp, "m2", [(0, 9)], fetch_offset=0).ranges == []
    assert acquire(sp, "m2", [(10, 14)]).ranges == [AcquiredRange(10, 14, 1)]


def test_batch_optimized_max_records_is_a_soft_limit_aligned_to_log_batches():
    sp = partition()
    result = acquire(sp, batches=[(0, 4), (5, 9), (10, 14)], max_records=3)
    assert result.ranges == [AcquiredRange(0, 4, 1)]


def test_record_limit_mode_acquires_exactly_max_records():
    sp = partition()
    result = acquire(sp, batches=[(0, 4), (5, 9)], max_records=3, strict=True)
    assert result.ranges == [AcquiredRange(0, 2, 1)] and sp.next_offset == 3
    assert acquire(sp, "m2", [(0, 4), (5, 9)], max_records=3, strict=True).ranges == [AcquiredRange(3, 5, 1)]


def test_batch_size_cuts_ranges_at_log_batch_boundaries():
    sp = partition()
    result = acquire(sp, batches=[(0, 2), (3, 5), (6, 8), (9, 11)], batch_size=5)
    assert result.ranges == [AcquiredRange(0, 5, 1), AcquiredRange(6, 11, 1)]


def test_accept_moves_the_start_offset():
    sp = partition()
    acquire(sp, batches=[(0, 9)])
    ack(sp, 0, 4, AcknowledgeType.ACCEPT)
    assert sp.start_offset == 5
    assert sp.record(0) is None


def test_per_offset_types_and_gap():
    sp = partition()
    acquire(sp, batches=[(0, 3)])
    ack(sp, 0, 3, AcknowledgeType.ACCEPT, AcknowledgeType.GAP, AcknowledgeType.REJECT, AcknowledgeType.RELEASE)
    assert sp.start_offset == 3
    assert sp.record(3).state is RecordState.AVAILABLE and sp.record(3).delivery_count == 1


def test_released_record_is_redelivered_with_a_higher_delivery_count():
    sp = partition()
    acquire(sp, batches=[(0, 4)])
    assert ack(sp, 2, 2, AcknowledgeType.RELEASE) is True
    assert sp.next_fetch_offset() == 2
    result = acquire(sp, "m2", [(0, 4)])
    assert result.ranges == [AcquiredRange(2, 2, 2)]


def test_rejected_record_is_not_redelivered():
    sp = partition()
    acquire(sp, batches=[(0, 4)])
    ack(sp, 2, 2, AcknowledgeType.REJECT)
    assert acquire(sp, "m2", [(0, 4)], fetch_offset=0).ranges == []
    assert sp.record(2).state is RecordState.ARCHIVED


def test_ack_by_another_member_is_invalid_record_state_and_changes_nothing():
    sp = partition()
    acquire(sp, "m1", [(0, 4)])
    with pytest.raises(ShareAckError) as raised:
        sp.acknowledge("m2", [AckBatch(0, 1, (1,))], delivery_count_limit=LIMIT, now_ms=0,
                       lock_duration_ms=LOCK_MS)
    assert raised.value.error_code == ErrorCode.INVALID_RECORD_STATE
    assert sp.record(0).state is RecordState.ACQUIRED and sp.start_offset == 0


def test_ack_is_all_or_nothing_across_batches():
    sp = partition()
    acquire(sp, batches=[(0, 4)])
    ack(sp, 3, 3, AcknowledgeType.ACCEPT)
    with pytest.raises(ShareAckError):
        sp.acknowledge("m1", [AckBatch(0, 0, (1,)), AckBatch(3, 3, (1,))], delivery_count_limit=LIMIT, now_ms=0,
                       lock_duration_ms=LOCK_MS)
    assert sp.record(0).state is RecordState.ACQUIRED


def test_ack_past_the_window_is_invalid_request_and_with_nothing_in_flight_invalid_record_state():
    sp = partition()
    with pytest.raises(ShareAckError) as empty:
        ack(sp, 0, 0, AcknowledgeType.ACCEPT)
    assert empty.value.error_code == ErrorCode.INVALID_RECORD_STATE
    acquire(sp, batches=[(0, 4)])
    with pytest.raises(ShareAckError) as past:
        ack(sp, 3, 7, AcknowledgeType.ACCEPT)
    assert past.value.error_code == ErrorCode.INVALID_REQUEST


def test_ack_below_the_start_offset_is_skipped():
    sp = partition()
    acquire(sp, batches=[(0, 4)])
    ack(sp, 0, 1, AcknowledgeType.ACCEPT)
    ack(sp, 0, 1, AcknowledgeType.ACCEPT)  # already gone: no error
    assert sp.start_offset == 2


def test_lock_expiry_releases_and_the_delivery_count_limit_archives():
    sp = partition()
    now = 0
    for delivery in range(1, LIMIT + 1):
        result = acquire(sp, f"m{delivery}", [(0, 0)], now=now)
        assert result.ranges == [AcquiredRange(0, 0, delivery)]
        assert not sp.expire_locks(now + LOCK_MS - 1, LIMIT)
        now += LOCK_MS
        sp.expire_locks(now, LIMIT)
    assert sp.record(0) is None and sp.start_offset == 1  # archived at the limit, then passed


def test_renew_extends_the_lock():
    sp = partition()
    acquire(sp, batches=[(0, 0)], now=0)
    ack(sp, 0, 0, AcknowledgeType.RENEW, now=20_000)
    assert not sp.expire_locks(LOCK_MS, LIMIT)
    assert sp.record(0).state is RecordState.ACQUIRED
    assert sp.expire_locks(20_000 + LOCK_MS, LIMIT)


def test_release_member_releases_only_its_records():
    sp = partition()
    acquire(sp, "m1", [(0, 4)])
    acquire(sp, "m2", [(5, 9)])
    assert sp.release_member("m1", LIMIT)
    assert sp.next_fetch_offset() == 0
    assert sp.record(5).member_id == "m2"


def test_max_record_locks_stops_new_records_but_not_redelivery():
    sp = partition()
    acquire(sp, batches=[(0, 99)], locks=100)
    assert acquire(sp, "m2", [(100, 109)], locks=100).ranges == []
    ack(sp, 50, 50, AcknowledgeType.RELEASE)
    assert acquire(sp, "m2", [(0, 99), (100, 109)], locks=100).ranges == [AcquiredRange(50, 50, 2)]


def test_compacted_offsets_are_archived_and_passed():
    sp = partition()
    result = acquire(sp, batches=[(0, 1), (5, 6)])
    assert result.ranges == [AcquiredRange(0, 1, 1), AcquiredRange(5, 6, 1)]
    ack(sp, 0, 1, AcknowledgeType.ACCEPT)
    assert sp.start_offset == 5


def test_aborted_batches_are_archived_not_acquired():
    sp = partition()
    result = acquire(sp, batches=[(0, 1), (2, 3, True), (4, 5)])
    assert result.ranges == [AcquiredRange(0, 1, 1), AcquiredRange(4, 5, 1)]
    assert sp.record(2).state is RecordState.ARCHIVED


def test_state_batches_persist_acquired_as_available_and_restore():
    sp = partition(start=10)
    acquire(sp, batches=[(10, 14)])
    ack(sp, 11, 11, AcknowledgeType.ACCEPT)
    ack(sp, 12, 12, AcknowledgeType.REJECT)
    batches = sp.state_batches()
    assert batches == [StateBatch(10, 10, 0, 1), StateBatch(11, 11, 2, 1), StateBatch(12, 12, 4, 1),
                       StateBatch(13, 14, 0, 1)]
    restored = partition(start=sp.start_offset, batches=batches)
    assert restored.next_offset == 15 and restored.next_fetch_offset() == 10
    result = acquire(restored, "m9", [(10, 14)])
    assert result.ranges == [AcquiredRange(10, 10, 2), AcquiredRange(13, 14, 2)]


def test_log_start_offset_moving_moves_the_start_offset():
    sp = partition()
    acquire(sp, batches=[(0, 9)])
    assert sp.move_start_to_log_start(5)
    assert sp.start_offset == 5 and sp.record(4) is None


def test_batches_sharing_an_offset_are_invalid_record_state():
    sp = partition()
    acquire(sp, batches=[(0, 4)])
    with pytest.raises(ShareAckError) as raised:
        sp.acknowledge("m1", [AckBatch(0, 2, (1,)), AckBatch(2, 3, (2,))], delivery_count_limit=LIMIT, now_ms=0,
                       lock_duration_ms=LOCK_MS)
    assert raised.value.error_code == ErrorCode.INVALID_RECORD_STATE
    assert sp.record(2).state is RecordState.ACQUIRED


def test_a_batch_spanning_a_huge_offset_range_does_not_grow_the_window_without_bound():
    sp = partition()
    result = acquire(sp, batches=[(0, 1_000_000)], max_records=10, locks=100)  # e.g. a compacted batch
    assert result.ranges == [AcquiredRange(0, 109, 1)] and sp.next_offset == 110


def test_a_huge_max_records_does_not_lift_the_bound_on_the_window():
    sp = partition()  # MaxRecords is the client's: the window stays within twice the in-flight limit
    result = acquire(sp, batches=[(0, 1_000_000)], max_records=2**31 - 1, locks=100)
    assert result.ranges == [AcquiredRange(0, 199, 1)] and sp.next_offset == 200
