"""Crash test of the transaction state: a writer of transactions is SIGKILLed at random moments; after every restart
the open transactions, the last stable offset and every segment's `.txnindex` equal what Kafka's rules give for
the batches the log holds (recomputed here from the log alone), and the next writer completes what was left open."""
import os
import random

from compatbroker.protocol.records.batch import iter_batches
from compatbroker.storage.producer_state import transaction_marker
from compatbroker.storage.transaction_index import AbortedTxn

from .helpers import run_and_kill
from .txn_crash_writer import open_log

KILLS = 12


def _expected(log) -> tuple[dict[int, int], dict[int, list[AbortedTxn]]]:
    """(open transactions, segment base -> its aborted entries) from the log's batches, by Kafka's rules."""
    ongoing: dict[int, int] = {}
    aborted: dict[int, list[AbortedTxn]] = {}
    for segment in log.segments:
        data = segment.read_bytes(0, segment.size)
        for position, header in iter_batches(data):
            if not header.is_transactional:
                continue
            if not header.is_control:
                ongoing.setdefault(header.producer_id, header.base_offset)
                continue
            first = ongoing.pop(header.producer_id, None)
            found = transaction_marker(data[position:position + header.size])
            if first is not None and found.type == 0:  # ABORT
                lso = min(ongoing.values(), default=header.base_offset + 1)
                aborted.setdefault(segment.base_offset, []).append(
                    AbortedTxn(header.producer_id, first, header.base_offset, lso))
    return ongoing, aborted


def _check(data_dir: str) -> int:
    manager, log = open_log(data_dir)
    ongoing, aborted = _expected(log)
    assert log.ongoing_transactions() == ongoing
    assert log.last_stable_offset == min(ongoing.values(), default=log.log_end_offset)
    for segment in log.segments:
        assert segment.aborted_transactions() == aborted.get(segment.base_offset, [])
    count = sum(len(entries) for entries in aborted.values())
    manager.close_unclean()
    return count


def test_transactions_and_the_aborted_index_survive_sigkills(tmp_path):
    rng = random.Random(20261127)
    data_dir = str(tmp_path / "data")
    aborts = 0
    for round_number in range(KILLS):
        acks = run_and_kill("tests.storage.txn_crash_writer", [data_dir, round_number], rng.randrange(5, 120))
        assert all(int(round_) == round_number for round_, _ in acks)
        aborts = _check(data_dir)
    assert aborts > KILLS  # aborts happened, among them those of transactions a kill left open
    names = os.listdir(os.path.join(data_dir, "txn-0"))
    assert any(name.endswith(".txnindex") for name in names)
