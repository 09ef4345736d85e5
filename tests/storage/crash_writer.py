"""Child process of the crash test: appends batches to a log with flush.messages=1 and acknowledges each one on
stdout ("<round> <n> <base offset>") only after the flush that `append` asked for (`flush_needed`) has returned, as
the broker does: the fsync runs in an executor thread, never inside `append`. Runs until it is killed.

    python -m tests.storage.crash_writer <data dir> <round>
"""
import random
import sys
from concurrent.futures import ThreadPoolExecutor

from compatbroker.protocol.records.batch import build_batch
from compatbroker.storage import LogManager

PROPERTIES = {"log.flush.interval.messages": "1", "log.segment.bytes": "65536", "log.index.interval.bytes": "1024",
              "log.index.size.max.bytes": "8192", "log.message.timestamp.after.max.ms": str(2**62)}
TIMESTAMP = 1_700_000_000_000


def payload(round_number: int, n: int) -> bytes:
    """The batch a given round writes as its n-th append: random sizes, identified by its first key."""
    rng = random.Random(round_number * 1_000_003 + n)
    records = [(f"{round_number}:{n}:{i}".encode(), rng.randbytes(rng.randrange(0, 3000)), (), TIMESTAMP + n)
               for i in range(rng.randrange(1, 4))]
    return build_batch(records)


def main() -> None:
    data_dir, round_number = sys.argv[1], int(sys.argv[2])
    manager = LogManager(data_dir, broker_properties=PROPERTIES, cluster_id="crash-test")
    manager.startup(TIMESTAMP)
    log = manager.get_log("crash", 0) or manager.create_log("crash", 0, now_ms=TIMESTAMP)
    flusher = ThreadPoolExecutor(max_workers=1)
    n = 0
    while True:
        result = log.append(payload(round_number, n), leader_epoch=round_number, now_ms=TIMESTAMP + n)
        if not result.flush_needed:
            raise AssertionError("flush.messages=1 must ask for a flush after every append")
        flusher.submit(log.flush).result()
        if log.recovery_point <= result.last_offset:  # SIGKILL keeps the page cache: check the fsync claim here
            raise AssertionError(f"recovery point {log.recovery_point} does not cover offset {result.last_offset}")
        sys.stdout.write(f"{round_number} {n} {result.base_offset}\n")
        sys.stdout.flush()
        n += 1
        if n % 50 == 0:
            manager.checkpoint()  # recovery points move on, as the broker's periodic task would do


if __name__ == "__main__":
    main()
