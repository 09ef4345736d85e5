"""Idempotent producers at the log: retries answered with their original offsets and never written twice, refused
batches that change nothing, and producer state that survives clean restarts, crashes (a real SIGKILL included),
torn tails, corrupt snapshots, truncation and retention.

Also the child process of the SIGKILL test:

    python -m tests.storage.test_log_idempotence <data dir> <round> <first batch number>
"""
import dataclasses
import os
import random
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compatbroker.protocol.records.batch import build_batch
from compatbroker.protocol.records.control import ControlRecordType, build_control_batch
from compatbroker.storage import LogManager
from compatbroker.storage.errors import (CorruptMessageError, InvalidProducerEpochError, InvalidTxnStateError,
                                         OutOfOrderSequenceError, UnknownProducerIdError)
from compatbroker.storage.log_config import LOG_APPEND_TIME
from compatbroker.storage.producer_snapshot import snapshot_offsets, snapshot_path
from compatbroker.storage.producer_state import NUM_BATCHES_TO_RETAIN
from compatbroker.storage.validator import COORDINATOR

from .helpers import (NOW, SMALL, abandon, all_bytes, batches_of, corrupt_crc, directory_snapshot, open_log,
                      run_and_kill)


def idem(pid, seq, count=1, *, epoch=0, tag=b"", size=0, timestamp=NOW, transactional=False) -> bytes:
    """A batch of `count` records from an idempotent producer, starting at sequence `seq`."""
    records = [(None, tag + f"{pid}/{epoch}/{seq + i}".encode() + b"." * size, (), timestamp + i)
               for i in range(count)]
    return build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       is_transactional=transactional)


def append(log, payload, **kwargs):
    kwargs.setdefault("now_ms", NOW)
    return log.append(payload, leader_epoch=0, **kwargs)


def described(log):
    """What DescribeProducers would report, sorted by producer id."""
    return sorted((e.producer_id, e.producer_epoch, e.last_sequence, e.last_timestamp, e.coordinator_epoch,
                   e.current_txn_start_offset) for e in log.producer_state.active_producers())


def stored_sequences(log):
    """(producer id, epoch, base sequence, record count) of every batch in the log, in offset order."""
    return [(h.producer_id, h.producer_epoch, h.base_sequence, h.last_offset_delta + 1)
            for h, _ in batches_of(all_bytes(log))]


def fill(log, batches, *, pid=1, first_seq=0, size=200):
    """Append `batches` two-record batches of one producer; returns their results."""
    return [append(log, idem(pid, first_seq + 2 * n, 2, size=size)) for n in range(batches)]


# --- retries and refusals ------------------------------------------------------------------------------------------

def test_a_retry_writes_nothing_and_answers_the_original_offsets(tmp_path):
    log = open_log(tmp_path)
    first = append(log, idem(1, 0, 3))
    append(log, idem(2, 0, 2))
    second = append(log, idem(1, 3, 1))
    assert not first.duplicate and not second.duplicate
    before = directory_snapshot(tmp_path)
    for original, payload in ((first, idem(1, 0, 3)), (second, idem(1, 3, 1))):
        retry = append(log, payload)
        assert retry.duplicate and (retry.base_offset, retry.last_offset) == (original.base_offset,
                                                                              original.last_offset)
        assert retry.log_append_time_ms == -1 and retry.log_start_offset == 0 and not retry.flush_needed
    assert directory_snapshot(tmp_path) == before and log.log_end_offset == 6
    assert stored_sequences(log) == [(1, 0, 0, 3), (2, 0, 0, 2), (1, 0, 3, 1)]
    log.close()


def test_a_retry_under_log_append_time_answers_the_original_append_time(tmp_path):
    log = open_log(tmp_path, dataclasses.replace(SMALL, message_timestamp_type=LOG_APPEND_TIME))
    original = append(log, idem(1, 0, 2), now_ms=NOW + 50)
    retry = append(log, idem(1, 0, 2), now_ms=NOW + 90)
    assert original.log_append_time_ms == NOW + 50
    assert retry.duplicate and (retry.base_offset, retry.log_append_time_ms) == (0, NOW + 50)
    log.close()


def test_a_retry_of_a_batch_awaiting_its_flush_asks_for_the_flush(tmp_path):
    log = open_log(tmp_path, dataclasses.replace(SMALL, flush_messages=1))
    assert append(log, idem(1, 0)).flush_needed
    assert append(log, idem(1, 0)).flush_needed  # the original is not durable yet: neither may the retry be
    log.flush()
    assert not append(log, idem(1, 0)).flush_needed
    log.close()


@pytest.mark.parametrize("payload, error", [
    (idem(1, 5, epoch=2), OutOfOrderSequenceError),
    (idem(1, 1, epoch=3), OutOfOrderSequenceError),
    (idem(1, 2, epoch=1), InvalidProducerEpochError),
    (idem(1, 0, 1, epoch=2), OutOfOrderSequenceError),
], ids=["gap", "new epoch not at 0", "zombie", "not a retry: the range differs"])
def test_refused_batches_change_nothing(tmp_path, payload, error):
    log = open_log(tmp_path)
    append(log, idem(1, 0, 2, epoch=2))
    before, producers = directory_snapshot(tmp_path), described(log)
    with pytest.raises(error) as info:
        append(log, payload)
    assert info.value.error_code == {OutOfOrderSequenceError: 45, InvalidProducerEpochError: 47}[error]
    assert directory_snapshot(tmp_path) == before and described(log) == producers
    assert append(log, idem(1, 2, epoch=2)).base_offset == 2
    log.close()


def test_producers_without_ids_are_not_checked(tmp_path):
    log = open_log(tmp_path)
    plain = build_batch([(None, b"v", (), NOW)])
    assert [append(log, plain).base_offset for _ in range(3)] == [0, 1, 2]
    assert described(log) == []
    log.close()


def test_transactions_are_tracked_through_data_and_markers(tmp_path):
    log = open_log(tmp_path)
    append(log, idem(5, 0, 2, transactional=True))
    with pytest.raises(InvalidTxnStateError):
        append(log, idem(5, 2))
    assert described(log) == [(5, 0, 1, NOW + 1, -1, 0)]
    log.close()
    log = open_log(tmp_path)  # the open transaction survives a restart
    assert described(log) == [(5, 0, 1, NOW + 1, -1, 0)]
    marker = build_control_batch(ControlRecordType.COMMIT, producer_id=5, producer_epoch=0, coordinator_epoch=3,
                                 timestamp=NOW + 9)
    append(log, marker, origin=COORDINATOR)
    assert described(log) == [(5, 0, 1, NOW + 9, 3, -1)]
    assert append(log, idem(5, 2)).base_offset == 3
    abandon(log)
    for snapshot in snapshot_offsets(log.directory):
        os.unlink(snapshot_path(log.directory, snapshot))
    log = open_log(tmp_path)  # rebuilt from the log alone: the marker's coordinator epoch is read back
    assert described(log) == [(5, 0, 2, NOW, 3, -1)]
    log.close()


def test_expire_producers(tmp_path):
    log = open_log(tmp_path)
    append(log, idem(1, 0, timestamp=NOW))
    append(log, idem(2, 0, timestamp=NOW + 100))
    assert log.expire_producers(NOW + 1000, 1000) == 1
    assert [entry[0] for entry in described(log)] == [2]
    with pytest.raises(UnknownProducerIdError):  # forgotten: it must start again at sequence 0
        append(log, idem(1, 7))
    assert append(log, idem(1, 0)).base_offset == 2
    log.close()


def test_unknown_producer_must_start_at_sequence_zero(tmp_path):
    log = open_log(tmp_path)
    with pytest.raises(UnknownProducerIdError) as refused:
        append(log, idem(9, 5))
    assert refused.value.error_code == 59
    assert log.log_end_offset == 0  # nothing written
    assert append(log, idem(9, 0)).base_offset == 0
    assert append(log, idem(9, 1)).base_offset == 1
    log.close()


def test_a_bad_crc_is_reported_before_a_producer_verdict(tmp_path):
    """A corrupt retry or zombie answers CORRUPT_MESSAGE, as in Kafka, which checks CRCs before producer state."""
    config = dataclasses.replace(SMALL, segment_bytes=1 << 20, max_message_bytes=1 << 20,
                                 segment_index_bytes=1 << 16)
    large = idem(1, 0, 700, size=1000)
    log = open_log(tmp_path, config)
    append(log, large)
    for payload in (corrupt_crc(large), corrupt_crc(idem(1, 700, 700, epoch=-2, size=1000))):
        with pytest.raises(CorruptMessageError):
            append(log, payload)
    assert append(log, large).duplicate
    with pytest.raises(InvalidProducerEpochError):
        append(log, idem(1, 700, 700, epoch=-2, size=1000))
    log.close()


# --- restarts ------------------------------------------------------------------------------------------------------

def test_clean_restart_loads_the_snapshot_written_at_close(tmp_path):
    log = open_log(tmp_path)
    results = fill(log, 30)  # several segments
    producers, end = described(log), log.log_end_offset
    log.flush()
    log.close()
    assert end in snapshot_offsets(log.directory)
    log = open_log(tmp_path, clean_shutdown=True, recovery_point=end)
    assert described(log) == producers
    retry = append(log, idem(1, 58, 2, size=200))
    assert retry.duplicate and retry.base_offset == results[-1].base_offset
    assert append(log, idem(1, 60, 2)).base_offset == end
    log.close()


def test_a_crash_rebuilds_the_state_from_the_roll_snapshot_and_the_log(tmp_path):
    log = open_log(tmp_path)
    results = fill(log, 30)
    append(log, idem(2, 0, 3))
    producers, end = described(log), log.log_end_offset
    bases = [segment.base_offset for segment in log.segments]
    assert snapshot_offsets(log.directory) == bases[1:]  # one per roll, at the new segment's base offset
    abandon(log)  # no close: no snapshot at the log end
    log = open_log(tmp_path)
    assert described(log) == producers
    assert snapshot_offsets(log.directory) == bases[1:] + [end]  # the rebuilt state is kept for the next start
    for n in (25, 29):  # recent batches still in the window of five
        retry = append(log, idem(1, 2 * n, 2, size=200))
        assert retry.duplicate and retry.base_offset == results[n].base_offset
    assert append(log, idem(2, 0, 3)).duplicate
    assert log.log_end_offset == end
    log.close()


def test_a_torn_tail_is_not_remembered_as_written(tmp_path):
    log = open_log(tmp_path)
    first = append(log, idem(1, 0, 2, size=300))
    second = append(log, idem(1, 2, 2, size=300))
    path = log.active_segment.file.path
    abandon(log)
    with open(path, "r+b") as segment_file:  # the crash cut the second batch in half
        segment_file.truncate(os.path.getsize(path) - 100)
    log = open_log(tmp_path)
    assert log.log_end_offset == second.base_offset
    assert described(log)[0][2] == 1  # last sequence: the first batch's
    again = append(log, idem(1, 2, 2, size=300))
    assert not again.duplicate and again.base_offset == second.base_offset
    assert append(log, idem(1, 0, 2, size=300)).base_offset == first.base_offset
    log.close()


def test_recovery_that_cuts_below_a_snapshot_deletes_it(tmp_path):
    log = open_log(tmp_path)
    fill(log, 10)
    rolled = log.segments[1].base_offset
    fill(log, 2, first_seq=20)
    assert rolled in snapshot_offsets(log.directory)
    first_file = log.segments[0].file.path
    abandon(log)
    with open(first_file, "r+b") as segment_file:  # garbage in the first segment: every later one is dropped
        segment_file.seek(os.path.getsize(first_file) - 50)
        segment_file.write(b"\xff" * 50)
    log = open_log(tmp_path)
    end = log.log_end_offset
    assert end < rolled and all(offset <= end for offset in snapshot_offsets(log.directory))
    assert described(log)[0][2] == end - 1  # two records a batch from sequence 0: the last kept sequence
    assert not append(log, idem(1, end, 2, size=200)).duplicate
    log.close()


def test_a_corrupt_snapshot_is_replaced_by_an_older_one_and_the_log(tmp_path):
    log = open_log(tmp_path)
    results = fill(log, 30)
    producers, end = described(log), log.log_end_offset
    log.close()
    with open(snapshot_path(log.directory, end), "r+b") as snapshot:
        snapshot.seek(20)
        snapshot.write(b"\x55")
    log = open_log(tmp_path, clean_shutdown=True, recovery_point=end)
    assert described(log) == producers
    assert append(log, idem(1, 58, 2, size=200)).base_offset == results[-1].base_offset
    log.close()


def test_without_any_snapshot_a_clean_start_does_not_read_the_log(tmp_path):
    """Kafka's rule for logs from brokers that kept no producer state: only an unclean start scans the log."""
    log = open_log(tmp_path)
    fill(log, 10)
    end = log.log_end_offset
    log.close()
    for offset in snapshot_offsets(log.directory):
        os.unlink(snapshot_path(log.directory, offset))
    log = open_log(tmp_path, clean_shutdown=True, recovery_point=end)
    assert described(log) == [] and snapshot_offsets(log.directory) == [end]
    log.close()
    os.unlink(snapshot_path(log.directory, end))
    log = open_log(tmp_path, recovery_point=end)
    assert described(log) == [(1, 0, 19, NOW + 1, -1, -1)]
    log.close()


# --- truncation and retention --------------------------------------------------------------------------------------

def test_truncation_rewinds_the_state(tmp_path):
    log = open_log(tmp_path)
    results = fill(log, 30)
    cut = results[20].base_offset
    log.truncate_to(cut)
    assert all(offset <= cut for offset in snapshot_offsets(log.directory))
    assert described(log)[0][2] == 39  # the last sequence of batch 19
    again = append(log, idem(1, 40, 2, size=200))
    assert not again.duplicate and again.base_offset == cut
    log.truncate_fully_and_start_at(1000, now_ms=NOW)
    assert described(log) == [] and snapshot_offsets(log.directory) == []
    log.close()


def test_retention_deletes_snapshots_but_keeps_the_producers(tmp_path):
    log = open_log(tmp_path)
    fill(log, 30)
    producers = described(log)
    start = log.delete_records(-1, now_ms=NOW)
    assert start == log.log_end_offset
    assert snapshot_offsets(log.directory) == [start]  # taken by the roll that emptied the log
    assert described(log) == producers
    assert append(log, idem(1, 60, 2)).base_offset == start  # the sequence goes on
    abandon(log)
    log = open_log(tmp_path)
    assert log.log_start_offset == start and described(log)[0][2] == 61
    assert append(log, idem(1, 60, 2)).duplicate
    log.close()


def test_snapshots_stay_bounded(tmp_path):
    log = open_log(tmp_path)
    for round_number in range(4):
        fill(log, 15, first_seq=30 * round_number)
        log.close()
        log = open_log(tmp_path)
        bases = {segment.base_offset for segment in log.segments}
        offsets = snapshot_offsets(log.directory)
        assert len(offsets) <= len(bases) + 1 and all(offset in bases for offset in offsets[:-1])
    log.close()


# --- random schedules ----------------------------------------------------------------------------------------------

SEND = st.tuples(st.just("send"), st.integers(0, 2), st.integers(1, 3))
RETRY = st.tuples(st.just("retry"), st.integers(0, 2), st.integers(1, 7))
OPS = st.lists(st.one_of(
    SEND, SEND, SEND, RETRY, RETRY,
    st.tuples(st.just("bump"), st.integers(0, 2)),
    st.tuples(st.just("zombie"), st.integers(0, 2)),
    st.tuples(st.just("restart"), st.booleans()),
    st.tuples(st.just("delete_records"),),
), min_size=20, max_size=80)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_random_schedules_never_write_a_batch_twice(ops):
    """Sends, retries of recent batches, epoch bumps, zombies, DeleteRecords and restarts (clean or crashed) in any
    order: the newest batch of a producer is always recognised, an older one is recognised or refused, never
    written again, and every sequence reaches the log once."""
    with tempfile.TemporaryDirectory() as directory:
        log = open_log(directory)
        epochs, next_seq, sent, written = [0, 0, 0], [0, 0, 0], [[], [], []], []
        for op in ops:
            if op[0] == "send":
                _, pid, count = op
                payload = idem(pid, next_seq[pid], count, epoch=epochs[pid], size=300)
                result = append(log, payload)
                assert not result.duplicate
                sent[pid].append((payload, result.base_offset))
                written.append((pid, epochs[pid], next_seq[pid], count))
                next_seq[pid] += count
            elif op[0] == "retry" and sent[op[1]]:
                _, pid, back = op
                payload, base_offset = sent[pid][-min(back, len(sent[pid]))]
                try:
                    result = append(log, payload)
                except OutOfOrderSequenceError:
                    assert back > 1 and len(sent[pid]) > 1
                else:
                    assert result.duplicate and result.base_offset == base_offset
            elif op[0] == "bump":
                epochs[op[1]] += 1
                next_seq[op[1]], sent[op[1]] = 0, []
            elif op[0] == "zombie" and epochs[op[1]] > 0 and sent[op[1]]:
                with pytest.raises(InvalidProducerEpochError):
                    append(log, idem(op[1], next_seq[op[1]], epoch=epochs[op[1]] - 1))
            elif op[0] == "restart":
                if op[1]:
                    log.close()
                    log = open_log(directory, clean_shutdown=True, recovery_point=log.log_end_offset)
                else:
                    abandon(log)
                    log = open_log(directory)
            elif op[0] == "delete_records":
                log.delete_records(-1, now_ms=NOW)
        assert stored_sequences(log) == written[len(written) - len(stored_sequences(log)):]
        assert sum(count for *_, count in written) == log.log_end_offset
        log.close()


# --- SIGKILL -------------------------------------------------------------------------------------------------------

PROPERTIES = {"log.flush.interval.messages": "1", "log.segment.bytes": "16384", "log.index.interval.bytes": "1024",
              "log.index.size.max.bytes": "8192", "log.message.timestamp.after.max.ms": str(2**62)}
TIMESTAMP = 1_700_000_000_000
PID = 4242
KILLS = 12


def payload(n: int) -> bytes:
    """The n-th batch of the test's producer: two records, sequences 2n and 2n+1, random sizes."""
    rng = random.Random(n)
    records = [(f"{n}:{i}".encode(), rng.randbytes(rng.randrange(0, 3000)), (), TIMESTAMP + n) for i in range(2)]
    return build_batch(records, producer_id=PID, producer_epoch=0, base_sequence=2 * n)


def writer_main(data_dir: str, round_number: int, first: int) -> None:
    """The broker half: append batches from `first` on, acknowledging each ("<n> <base offset>") after its fsync."""
    manager = LogManager(data_dir, broker_properties=PROPERTIES, cluster_id="idempotence-test")
    manager.startup(TIMESTAMP)
    log = manager.get_log("idem", 0) or manager.create_log("idem", 0, now_ms=TIMESTAMP)
    flusher = ThreadPoolExecutor(max_workers=1)
    n = first
    while True:
        result = log.append(payload(n), leader_epoch=round_number, now_ms=TIMESTAMP + n)
        if result.duplicate:
            raise AssertionError(f"batch {n} is new, yet was answered as a duplicate")
        flusher.submit(log.flush).result()
        sys.stdout.write(f"{n} {result.base_offset}\n")
        sys.stdout.flush()
        if not sys.stdin.readline():  # the producer read the acknowledgement: one batch in flight, as it models
            return
        n += 1


def _run_and_kill(data_dir: str, round_number: int, first: int, acks_before_kill: int) -> list[tuple[int, int]]:
    """Start a writer, read `acks_before_kill` acknowledgements, SIGKILL it; return what it acknowledged."""
    return run_and_kill("tests.storage.test_log_idempotence", [data_dir, round_number, first], acks_before_kill,
                        one_in_flight=True)


def test_after_a_sigkill_the_last_acknowledged_batch_is_still_a_duplicate(tmp_path):
    """The producer half: after each kill, the log holds every batch once, in order, the acknowledged ones at their
    acknowledged offsets (the writer may have got one batch further than the acknowledgements read before the
    kill: the producer it models has one batch in flight); a retry of the last acknowledged batch is a duplicate
    with its offsets, as is a retry of the batch that was in flight when it reached the log before the kill (else
    it is written once). The broker's restarts alternate between clean and unclean."""
    rng = random.Random(20261207)
    data_dir = str(tmp_path / "data")
    acked: dict[int, int] = {}
    first = 0
    for round_number in range(KILLS):
        acked.update(_run_and_kill(data_dir, round_number, first,
                                   0 if rng.random() < 0.15 else rng.randrange(1, 40)))
        manager = LogManager(data_dir, broker_properties=PROPERTIES, cluster_id="idempotence-test")
        manager.startup(TIMESTAMP)
        log = manager.get_log("idem", 0)
        stored = _stored_batches(log)
        assert list(stored) == list(range(len(stored))), f"round {round_number}: a gap or a batch twice"
        assert all(stored[n] == offset for n, offset in acked.items()), f"round {round_number}: an ack was lost"
        if acked and max(acked) >= len(stored) - NUM_BATCHES_TO_RETAIN:  # remembered: one of the last five
            last = max(acked)
            retry = log.append(payload(last), leader_epoch=99, now_ms=TIMESTAMP)
            assert retry.duplicate and retry.base_offset == acked[last], f"round {round_number}: batch {last}"
        in_flight = max(acked) + 1 if acked else first
        result = log.append(payload(in_flight), leader_epoch=99, now_ms=TIMESTAMP)
        assert result.duplicate == (in_flight in stored)
        assert result.base_offset == stored.get(in_flight, result.base_offset)
        acked[in_flight] = result.base_offset
        stored = _stored_batches(log)
        assert list(stored) == list(range(len(stored))) and stored[in_flight] == acked[in_flight]
        log.flush()
        if round_number % 2:
            manager.shutdown()
        else:
            manager.close_unclean()
        first = len(stored)
    assert len(acked) > KILLS


def _stored_batches(log) -> dict[int, int]:
    """Batch number -> base offset of the producer's batches in the log (batch n starts at sequence 2n)."""
    stored = {}
    for header, _ in batches_of(log.read_bytes(0, 2**40)):
        assert header.producer_id == PID and header.base_sequence % 2 == 0
        assert header.base_sequence // 2 not in stored, f"batch {header.base_sequence // 2} stored twice"
        stored[header.base_sequence // 2] = header.base_offset
    return stored


if __name__ == "__main__":
    writer_main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
