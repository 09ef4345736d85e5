"""The `.txnindex` file format: Kafka's 34-byte entries, read back, written whole, appended, truncated, and searched
by Kafka's rule."""
import struct

from compatbroker.storage.transaction_index import (ENTRY_SIZE, TXN_INDEX_SUFFIX, AbortedTxn,
                                                    append_transaction_index, collect_aborted_txns,
                                                    read_transaction_index, truncate_transaction_index,
                                                    write_transaction_index)


def test_entries_are_kafkas_34_bytes_big_endian(tmp_path):
    path = str(tmp_path / f"{0:020d}{TXN_INDEX_SUFFIX}")
    entries = [AbortedTxn(7, 10, 20, 21), AbortedTxn(2**62, 30, 40, 35)]
    write_transaction_index(path, entries)
    data = open(path, "rb").read()
    assert ENTRY_SIZE == 34 and len(data) == 68
    assert data[:34] == struct.pack(">hqqqq", 0, 7, 10, 20, 21)  # version 0, then four int64s
    assert read_transaction_index(path) == entries


def test_a_missing_file_is_empty_and_append_creates_it(tmp_path):
    path = str(tmp_path / "x.txnindex")
    assert read_transaction_index(path) == []
    assert append_transaction_index(path, AbortedTxn(1, 0, 5, 6)) is True
    assert append_transaction_index(path, AbortedTxn(2, 3, 9, 10)) is False
    assert read_transaction_index(path) == [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 9, 10)]


def test_a_torn_last_entry_and_an_unknown_version_end_the_entries(tmp_path):
    path = str(tmp_path / "x.txnindex")
    write_transaction_index(path, [AbortedTxn(1, 0, 5, 6)])
    with open(path, "ab") as target:
        target.write(struct.pack(">hqqqq", 0, 2, 6, 8, 9)[:20])  # a crash mid-append
    assert read_transaction_index(path) == [AbortedTxn(1, 0, 5, 6)]
    write_transaction_index(path, [AbortedTxn(1, 0, 5, 6)])
    with open(path, "ab") as target:
        target.write(struct.pack(">hqqqq", 1, 2, 6, 8, 9))
    assert read_transaction_index(path) == [AbortedTxn(1, 0, 5, 6)]


def test_truncation_keeps_a_prefix(tmp_path):
    path = str(tmp_path / "x.txnindex")
    write_transaction_index(path, [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 9, 10)])
    truncate_transaction_index(path, 1)
    assert read_transaction_index(path) == [AbortedTxn(1, 0, 5, 6)]
    truncate_transaction_index(str(tmp_path / "missing.txnindex"), 0)  # nothing to do, no error


def test_collect_uses_kafkas_overlap_and_stop_rule():
    entries = [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 12, 13), AbortedTxn(3, 14, 20, 30), AbortedTxn(4, 25, 40, 41)]
    # overlap: last offset >= fetch offset and first offset < upper bound
    assert collect_aborted_txns(entries, 6, 14) == ([AbortedTxn(2, 3, 12, 13)], True)
    assert collect_aborted_txns(entries[:2], 6, 14) == ([AbortedTxn(2, 3, 12, 13)], False)  # go on to the next
    # the third entry's LSO (30) reaches the upper bound: the search is complete there, the fourth is not looked at
    assert collect_aborted_txns(entries, 0, 26) == (entries[:3], True)
    assert collect_aborted_txns(entries, 41, 50) == ([], False)
