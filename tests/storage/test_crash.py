"""Crash test: a writer process with flush.messages=1 is SIGKILLed at random moments, 50 times; after every restart
each acknowledged batch reads back byte-identical and nothing in the log is garbage."""
import random

from compatbroker.protocol.records.batch import iter_batches, iter_records, validate_batch
from compatbroker.storage import LogManager

from .crash_writer import PROPERTIES, TIMESTAMP, payload
from .helpers import run_and_kill

KILLS = 50


def _run_and_kill(data_dir: str, round_number: int, acks_before_kill: int) -> list[tuple[int, int, int]]:
    """Start a writer, read `acks_before_kill` acknowledgements, SIGKILL it; return what it acknowledged."""
    return run_and_kill("tests.storage.crash_writer", [data_dir, round_number], acks_before_kill)


def _check_log(data_dir: str, acked: dict) -> int:
    """Every acknowledged batch is present, byte for byte after the stamped prefix; every batch is one a writer
    produced, with offsets in order. Returns the number of batches in the log."""
    manager = LogManager(data_dir, broker_properties=PROPERTIES, cluster_id="crash-test")
    manager.startup(TIMESTAMP)
    log = manager.get_log("crash", 0)
    data = log.read_bytes(0, 2**40) if log.log_end_offset else b""
    seen, next_offset = {}, 0
    for pos, header in iter_batches(data):
        raw = data[pos:pos + header.size]
        validate_batch(raw)
        first_key = next(iter_records(raw, max_size=1 << 20)).key.decode()
        round_number, n, _ = map(int, first_key.split(":"))
        assert raw[16:] == payload(round_number, n)[16:], f"batch {round_number}:{n} differs"
        assert header.base_offset == next_offset and header.partition_leader_epoch == round_number
        seen[(round_number, n)] = header.base_offset
        next_offset = header.last_offset + 1
    assert log.log_end_offset == next_offset
    for key, base_offset in acked.items():
        assert seen.get(key) == base_offset, f"acknowledged batch {key} at {base_offset} is missing"
    manager.close_unclean()
    return len(seen)


def test_sigkilled_writer_never_loses_an_acknowledged_batch(tmp_path):
    rng = random.Random(20261121)
    data_dir = str(tmp_path / "data")
    acked = {}
    for round_number in range(KILLS):
        # Mostly after some acknowledgements (the kill lands inside a later append or its fsync), sometimes at
        # once (inside start-up and recovery).
        acks = _run_and_kill(data_dir, round_number, 0 if rng.random() < 0.1 else rng.randrange(1, 60))
        acked.update({(r, n): base for r, n, base in acks})
        if round_number % 10 == 9:
            _check_log(data_dir, acked)
    batches = _check_log(data_dir, acked)
    assert batches >= len(acked) > KILLS
