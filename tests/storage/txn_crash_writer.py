"""Child process of the transaction crash test: writes transactions (data batches of several producers, then COMMIT
or ABORT markers, some left open) to a log, flushing after every append as flush.messages=1 asks, and acknowledges
each append on stdout ("<round> <base offset>") once flushed. Before writing, it aborts the transactions a previous
round left open, with markers of the epoch the log remembers. Runs until it is killed.

    python -m tests.storage.txn_crash_writer <data dir> <round>
"""
import random
import sys

from compatbroker.protocol.records.batch import build_batch
from compatbroker.protocol.records.control import ControlRecordType, build_control_batch
from compatbroker.storage import LogManager
from compatbroker.storage.validator import COORDINATOR

PROPERTIES = {"log.flush.interval.messages": "1", "log.segment.bytes": "16384", "log.index.interval.bytes": "1024",
              "log.index.size.max.bytes": "8192", "log.message.timestamp.after.max.ms": str(2**62)}
TIMESTAMP = 1_700_000_000_000


def open_log(data_dir: str):
    manager = LogManager(data_dir, broker_properties=PROPERTIES, cluster_id="txn-crash-test")
    manager.startup(TIMESTAMP)
    return manager, manager.get_log("txn", 0) or manager.create_log("txn", 0, now_ms=TIMESTAMP)


def marker(log, producer_id: int, marker_type: ControlRecordType) -> bytes:
    epoch = log.producer_state.entry(producer_id).producer_epoch
    return build_control_batch(marker_type, producer_id=producer_id, producer_epoch=epoch, coordinator_epoch=0,
                               timestamp=TIMESTAMP)


def main() -> None:
    data_dir, round_number = sys.argv[1], int(sys.argv[2])
    manager, log = open_log(data_dir)
    rng = random.Random(round_number)
    sequences = {}

    def write(payload: bytes, origin: str = "client") -> None:
        result = log.append(payload, leader_epoch=0, now_ms=TIMESTAMP, origin=origin)
        if result.flush_needed:
            log.flush()
        sys.stdout.write(f"{round_number} {result.base_offset}\n")
        sys.stdout.flush()

    for producer_id in list(log.ongoing_transactions()):  # left open by the previous round's kill
        write(marker(log, producer_id, ControlRecordType.ABORT), COORDINATOR)
    while True:
        producer_id = round_number * 1000 + rng.randrange(4)
        if producer_id in log.ongoing_transactions() and rng.random() < 0.3:
            marker_type = ControlRecordType.ABORT if rng.random() < 0.5 else ControlRecordType.COMMIT
            write(marker(log, producer_id, marker_type), COORDINATOR)
            continue
        sequence = sequences.get(producer_id, 0)
        count = rng.randrange(1, 4)
        records = [(None, rng.randbytes(rng.randrange(10, 600)), (), TIMESTAMP) for _ in range(count)]
        write(build_batch(records, producer_id=producer_id, producer_epoch=0, base_sequence=sequence,
                          is_transactional=True))
        sequences[producer_id] = sequence + count


if __name__ == "__main__":
    main()
