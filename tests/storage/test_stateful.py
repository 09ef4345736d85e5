"""Model-based test: random appends, reads, rolls, flushes, retention runs, DeleteRecords, compactions and restarts
(clean and crashed) against an in-memory model of a compacted-and-deleted partition: a list of (offset, key, value,
timestamp) records plus the log start and end offsets."""
import dataclasses
import shutil
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from compatbroker.protocol.records.batch import build_batch, iter_records
from compatbroker.protocol.records.compression import Compression
from compatbroker.storage.cleaner import clean
from compatbroker.storage.retention import apply_retention

from .helpers import NOW, SMALL, abandon, batches_of, open_log

CONFIG = dataclasses.replace(SMALL, segment_bytes=2048, index_interval_bytes=128, retention_bytes=6000,
                             retention_ms=-1, cleanup_policy=("compact", "delete"), file_delete_delay_ms=0,
                             min_cleanable_dirty_ratio=0.0)
KEYS = [b"a", b"b", b"c", b"d", b"e"]


def _records_from(data):
    """(offset, key, value, timestamp) of every record in the bytes of a read."""
    out = []
    for _, raw in batches_of(data):
        out += [(r.offset, r.key, r.value, r.timestamp) for r in iter_records(raw, max_size=1 << 24)]
    return out


class LogMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="storage-model-")
        self.log = open_log(self.directory, CONFIG)
        self.records = []  # the model
        self.start = 0
        self.end = 0
        self.clock = NOW

    def teardown(self):
        self.log.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    @rule(entries=st.lists(st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(max_size=300))),
                           min_size=1, max_size=5),
          codec=st.sampled_from([Compression.NONE, Compression.NONE, Compression.GZIP, Compression.ZSTD]),
          skew=st.integers(-5, 5))
    def append(self, entries, codec, skew):
        self.clock += 10
        records = [(key, value, (), self.clock + skew + i) for i, (key, value) in enumerate(entries)]
        result = self.log.append(build_batch(records, compression=codec), leader_epoch=0, now_ms=self.clock)
        assert result.base_offset == self.end
        for i, (key, value, _, timestamp) in enumerate(records):
            self.records.append((self.end + i, key, value, timestamp))
        self.end += len(records)

    @precondition(lambda self: self.end > self.start)
    @rule(data=st.data(), max_bytes=st.integers(1, 5000))
    def read(self, data, max_bytes):
        offset = data.draw(st.integers(self.start, self.end))
        raw = self.log.read_bytes(offset, max_bytes)
        got = [r for r in _records_from(raw) if r[0] >= offset]
        expected = [r for r in self.records if r[0] >= offset]
        assert got == expected[:len(got)]
        if offset < self.end:  # at least one batch, ending at or after the offset (compaction may empty it)
            assert raw and batches_of(raw)[-1][0].last_offset >= offset
        else:
            assert raw == b""

    @rule()
    def roll(self):
        self.log.roll(self.clock)

    @rule()
    def retention(self):
        before = self.log.log_start_offset
        deleted = apply_retention(self.log, self.clock)
        self.start = self.log.log_start_offset
        assert self.start >= before and (deleted > 0 or self.start == before)
        if self.start > before:  # only the size rule moves the start here (retention.ms is off)
            assert self.log.size >= CONFIG.retention_bytes
        self.records = [r for r in self.records if r[0] >= self.start]

    @precondition(lambda self: self.end > self.start)
    @rule(data=st.data())
    def delete_records(self, data):
        offset = data.draw(st.integers(self.start, self.end))
        assert self.log.delete_records(offset, now_ms=self.clock) == offset
        self.start = offset
        self.records = [r for r in self.records if r[0] >= offset]

    @rule()
    def compact(self):
        limit = clean(self.log, 0, self.clock)
        if limit is None:
            return
        latest = {}
        for record in self.records:
            if record[0] < limit:
                latest[record[1]] = record[0]
        self.records = [r for r in self.records if r[0] >= limit or latest[r[1]] == r[0]]

    @rule(data=st.data())
    def flush(self, data):
        up_to = data.draw(st.one_of(st.none(), st.integers(self.start, self.end)))
        before = self.log.recovery_point
        self.log.flush(up_to=up_to)
        assert self.log.recovery_point == max(before, self.end if up_to is None else up_to)

    @rule()
    def periodic_flush(self):
        """What the broker's scheduler runs: with Kafka's default policy, only the segments rolled since."""
        rolled = self.log.flush_due(self.clock)
        assert self.log.maybe_flush(self.clock) == rolled
        if rolled:
            assert self.log.recovery_point >= self.log.active_segment.base_offset
        assert not self.log.flush_due(self.clock)

    @rule(crash=st.booleans())
    def restart(self, crash):
        recovery_point = self.log.recovery_point
        if crash:
            abandon(self.log)
        else:
            self.log.flush()
            self.log.close()
            recovery_point = self.log.log_end_offset
        self.log = open_log(self.directory, CONFIG, log_start_offset=self.start, recovery_point=recovery_point,
                            clean_shutdown=not crash, now_ms=self.clock)

    @precondition(lambda self: self.records)
    @rule(data=st.data())
    def offset_for_timestamp(self, data):
        timestamp = data.draw(st.integers(NOW, self.clock + 10))
        found = self.log.offset_for_timestamp(timestamp)
        expected = next(((r[3], r[0]) for r in self.records if r[3] >= timestamp), None)
        assert (tuple(found) if found else None) == expected

    @invariant()
    def offsets_and_contents_match(self):
        assert (self.log.log_start_offset, self.log.log_end_offset) == (self.start, self.end)
        assert self.log.recovery_point <= self.end
        stored = [r for r in _records_from(self.log.read_bytes(self.start, 1 << 30)) if r[0] >= self.start]
        assert stored == self.records


LogMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow])
TestLog = LogMachine.TestCase
