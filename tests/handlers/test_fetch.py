"""Fetch without sessions: every version, size limits, long polling, errors and down-conversion."""
from __future__ import annotations

import asyncio
import os
import time
import uuid

import pytest

from compatbroker.handlers import fetch
from compatbroker.protocol import FileRegion
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import FetchRequest, ProduceRequest
from compatbroker.protocol.records.compression import Compression
from compatbroker.protocol.records.legacy import iter_legacy_messages

from .helpers import batch, call, records_of, start

INT32_MAX = 2**31 - 1


def fetch_request(broker, version, *wanted, max_wait_ms=0, min_bytes=1, max_bytes=INT32_MAX, isolation_level=0,
                  session_id=0, session_epoch=-1, forgotten=(), topic_ids=None) -> FetchRequest:
    """`wanted`: (topic, partition, fetch offset, partition max bytes[, extra partition fields]) tuples."""
    topics = {}
    for topic, partition, offset, limit, *extra in wanted:
        fields = extra[0] if extra else {}
        topics.setdefault(topic, []).append(FetchRequest.FetchPartition(
            partition=partition, fetch_offset=offset, partition_max_bytes=limit, **fields))
    ids = topic_ids or {}

    def topic_id(name):
        if name in ids:
            return ids[name]
        info = broker.topic(name)
        return info.topic_id if info else uuid.UUID(int=0)

    return FetchRequest(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
        isolation_level=isolation_level, session_id=session_id, session_epoch=session_epoch,
        topics=[FetchRequest.FetchTopic(topic=name if version < 13 else "",
                                        topic_id=topic_id(name) if version >= 13 else uuid.UUID(int=0),
                                        partitions=parts) for name, parts in topics.items()],
        forgotten_topics_data=[FetchRequest.ForgottenTopic(topic=name if version < 13 else "",
                                                           topic_id=topic_id(name) if version >= 13 else
                                                           uuid.UUID(int=0), partitions=[partition])
                               for name, partition in forgotten],
        rack_id="")


async def fetch_one(broker, version, topic="t", partition=0, offset=0, limit=1 << 20, **options):
    """(raw partition data, decoded partition data) of a one-partition fetch."""
    answer = await call(broker, version, fetch_request(broker, version, (topic, partition, offset, limit), **options))
    return answer.raw.responses[0].partitions[0], answer.decoded.responses[0].partitions[0]


def append(broker, records, topic="t", partition=0):
    result = broker.get_log(topic, partition).append(records, leader_epoch=0, now_ms=broker.now_ms())
    broker.notify_appended(topic, partition)
    return result


def legacy(data):
    return [(m.magic, m.offset, m.value) for m in iter_legacy_messages(data, max_size=1 << 26)]


@pytest.fixture
def three(broker):
    """Topic t: one batch holding offsets 0-2, then one batch at offset 3."""
    broker.create_topic("t", 1)
    append(broker, batch(b"a", b"b", b"c"))
    append(broker, batch(b"d"))
    return broker


def test_declares_every_schema_version():
    assert (fetch.API_KEY, fetch.MIN_VERSION, fetch.MAX_VERSION) == (1, 0, 18)


@pytest.mark.parametrize("version", range(4, 19))
async def test_records_stay_file_regions_and_whole_batches(three, version):
    raw, decoded = await fetch_one(three, version, offset=1)
    assert isinstance(raw.records, FileRegion)  # sent with os.sendfile, never read into Python
    assert raw.records.length == three.get_log("t", 0).size
    assert decoded.error_code == 0 and decoded.high_watermark == 4
    assert [(r.offset, r.value) for r in records_of(decoded.records)] == [(0, b"a"), (1, b"b"), (2, b"c"),
                                                                            (3, b"d")]
    assert decoded.last_stable_offset == 4
    assert decoded.log_start_offset == (0 if version >= 5 else -1)
    assert decoded.aborted_transactions is None
    assert decoded.preferred_read_replica == -1


@pytest.mark.parametrize("version, magic", [(0, 0), (1, 0), (2, 1), (3, 1)])
async def test_old_versions_get_legacy_messages_from_the_fetch_offset(three, version, magic):
    raw, decoded = await fetch_one(three, version, offset=1)
    assert isinstance(raw.records, bytes)
    assert legacy(decoded.records) == [(magic, 1, b"b"), (magic, 2, b"c"), (magic, 3, b"d")]
    assert decoded.high_watermark == 4


async def test_compressed_batches_are_converted_whole(broker):
    broker.create_topic("t", 1)
    append(broker, batch(b"a", b"b", compression=Compression.GZIP))
    _, decoded = await fetch_one(broker, 2, offset=1)
    assert legacy(decoded.records) == [(1, 0, b"a"), (1, 1, b"b")]


async def test_zstd_cannot_be_converted(broker):
    broker.create_topic("t", 1)
    append(broker, batch(b"z", compression=Compression.ZSTD))
    _, decoded = await fetch_one(broker, 3)
    assert (decoded.error_code, decoded.high_watermark) == (ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, -1)
    _, modern = await fetch_one(broker, 4)
    assert modern.error_code == 0 and records_of(modern.records)[0].value == b"z"


async def test_zstd_topics_serve_v4_to_v9_as_kafka_4_does(broker):
    broker.create_topic("t", 1, {"compression.type": "zstd"})
    append(broker, batch(b"v", compression=Compression.ZSTD))
    for version in (4, 9, 10):
        _, decoded = await fetch_one(broker, version)
        assert decoded.error_code == 0 and records_of(decoded.records)[0].value == b"v"


async def test_zstd_topics_need_v10_where_the_broker_emulates_kafka_3(broker):
    broker.emulated_release = "3.9"
    broker.create_topic("t", 1, {"compression.type": "zstd"})
    append(broker, batch(b"v"))
    assert (await fetch_one(broker, 9))[1].error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert (await fetch_one(broker, 10))[1].error_code == 0


async def test_control_batches_are_left_out_of_legacy_sets(broker):
    from compatbroker.protocol.records.control import ControlRecordType, build_control_batch
    broker.create_topic("t", 1)
    append(broker, batch(b"a"))
    marker = build_control_batch(ControlRecordType.COMMIT, producer_id=1, producer_epoch=0, coordinator_epoch=0,
                                 timestamp=broker.now_ms())
    broker.get_log("t", 0).append(marker, leader_epoch=0, now_ms=broker.now_ms(), origin="coordinator")
    append(broker, batch(b"b"))
    _, decoded = await fetch_one(broker, 1)
    assert legacy(decoded.records) == [(0, 0, b"a"), (0, 2, b"b")]


async def test_at_least_one_batch_even_over_the_limits(three):
    _, decoded = await fetch_one(three, 4, limit=10, max_bytes=10)
    assert [r.offset for r in records_of(decoded.records)] == [0, 1, 2]


async def test_partition_limit_keeps_whole_batches(three):
    first_size = len(batch(b"a", b"b", b"c"))
    _, decoded = await fetch_one(three, 11, limit=first_size + 5)
    assert [r.offset for r in records_of(decoded.records)] == [0, 1, 2]


async def test_response_limit_spans_partitions(broker):
    broker.create_topic("t", 3)
    for partition in range(3):
        append(broker, batch(b"x" * 100), partition=partition)
    size = len(batch(b"x" * 100))
    request = fetch_request(broker, 7, *[("t", p, 0, 1 << 20) for p in range(3)], max_bytes=size * 2)
    answer = (await call(broker, 7, request)).decoded
    sizes = [len(p.records) for p in answer.responses[0].partitions]
    assert sizes == [size, size, 0]


async def test_later_partitions_get_nothing_oversized(broker):
    broker.create_topic("t", 2)
    append(broker, batch(b"small"), partition=0)
    append(broker, batch(b"x" * 500), partition=1)
    request = fetch_request(broker, 7, ("t", 0, 0, 1 << 20), ("t", 1, 0, 100))
    answer = (await call(broker, 7, request)).decoded
    assert [len(records_of(p.records)) for p in answer.responses[0].partitions] == [1, 0]


async def test_v2_hard_limit_cuts_an_oversized_message(broker):
    broker.create_topic("t", 1)
    append(broker, batch(b"x" * 500))
    _, decoded = await fetch_one(broker, 2, limit=100)
    assert len(decoded.records) == 100  # a partial message: old clients report "message too large"
    assert list(iter_legacy_messages(decoded.records, max_size=1 << 26, allow_partial_tail=True)) == []
    _, roomy = await fetch_one(broker, 2, limit=1000)
    assert legacy(roomy.records) == [(1, 0, b"x" * 500)]


async def test_offset_out_of_range(three):
    _, decoded = await fetch_one(three, 11, offset=5)
    assert (decoded.error_code, decoded.high_watermark, decoded.log_start_offset) == (
        ErrorCode.OFFSET_OUT_OF_RANGE, -1, -1)
    _, at_end = await fetch_one(three, 11, offset=4)
    assert (at_end.error_code, at_end.records) == (0, b"")


@pytest.mark.parametrize("version", [0, 12])
async def test_unknown_topic_or_partition(three, version):
    request = fetch_request(three, version, ("nope", 0, 0, 100), ("t", 9, 0, 100))
    answer = (await call(three, version, request)).decoded
    assert [(t.topic, [p.error_code for p in t.partitions]) for t in answer.responses] == [
        ("nope", [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]), ("t", [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION])]


@pytest.mark.parametrize("version", [13, 18])
async def test_unknown_topic_id(three, version):
    stranger = uuid.uuid4()
    answer = (await call(three, version, fetch_request(three, version, ("ghost", 0, 0, 100),
                                                       topic_ids={"ghost": stranger}))).decoded
    assert answer.responses[0].topic_id == stranger
    assert answer.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


async def test_read_committed_lists_no_aborted_transactions(three):
    _, decoded = await fetch_one(three, 4, isolation_level=1)
    assert decoded.aborted_transactions == [] and decoded.last_stable_offset == 4


async def test_current_leader_epoch_from_v9(three):
    newer = {"current_leader_epoch": 3}
    answer = (await call(three, 9, fetch_request(three, 9, ("t", 0, 0, 100, newer)))).decoded
    assert answer.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    same = {"current_leader_epoch": 0}
    answer = (await call(three, 9, fetch_request(three, 9, ("t", 0, 0, 100, same)))).decoded
    assert answer.responses[0].partitions[0].error_code == 0


async def test_last_fetched_epoch_from_v12(three):
    ahead = {"last_fetched_epoch": 2}
    answer = (await call(three, 12, fetch_request(three, 12, ("t", 0, 4, 100, ahead)))).decoded
    partition = answer.responses[0].partitions[0]
    assert (partition.error_code, partition.diverging_epoch.epoch, partition.diverging_epoch.end_offset) == (0, 0, 4)
    assert partition.records in (b"", None)
    agreed = {"last_fetched_epoch": 0}
    answer = (await call(three, 12, fetch_request(three, 12, ("t", 0, 3, 100, agreed)))).decoded
    partition = answer.responses[0].partitions[0]
    assert partition.diverging_epoch.epoch == -1 and records_of(partition.records)[0].offset == 3


async def test_reads_one_segment_at_a_time(broker):
    broker.create_topic("t", 1)
    log = broker.get_log("t", 0)
    append(broker, batch(b"first"))
    log.roll(broker.now_ms())
    append(broker, batch(b"second"))
    _, decoded = await fetch_one(broker, 11)
    assert [r.value for r in records_of(decoded.records)] == [b"first"]
    _, following = await fetch_one(broker, 11, offset=1)
    assert [r.value for r in records_of(following.records)] == [b"second"]


async def test_groups_consecutive_partitions_by_topic(broker):
    broker.create_topic("a", 2)
    broker.create_topic("b", 1)
    request = fetch_request(broker, 11, ("a", 1, 0, 100), ("a", 0, 0, 100), ("b", 0, 0, 100))
    answer = (await call(broker, 11, request)).decoded
    assert [(t.topic, [p.partition_index for p in t.partitions]) for t in answer.responses] == [
        ("a", [1, 0]), ("b", [0])]


# --- long polling ---------------------------------------------------------------------------------------------

class WaitSpy:
    """Counts the handler's waits on the broker and lets a test await the n-th one."""

    def __init__(self, broker):
        self.calls = 0
        self.changed = asyncio.Event()
        self.original = broker.wait_for_append
        broker.wait_for_append = self.wait_for_append

    async def wait_for_append(self, partitions, timeout_s, *, until=None):
        self.calls += 1
        self.changed.set()
        await self.original(partitions, timeout_s, until=until)  # registers before it yields: no append is missed

    async def until(self, calls: int):
        while self.calls < calls:
            self.changed.clear()
            await self.changed.wait()


def produce_request(value: bytes) -> ProduceRequest:
    return ProduceRequest(acks=1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
        name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch(value))])])


@pytest.mark.parametrize("version", [3, 11])
async def test_long_poll_is_woken_by_a_produce(broker, version):
    broker.create_topic("t", 1)
    spy = WaitSpy(broker)
    began = time.monotonic()
    poll = asyncio.create_task(start(broker, version, fetch_request(broker, version, ("t", 0, 0, 1 << 20),
                                                                     max_wait_ms=20_000)))
    await spy.until(1)
    assert not poll.done()
    await call(broker, 9, produce_request(b"wake up"))
    response = await poll
    assert time.monotonic() - began < 10
    records = response.responses[0].partitions[0].records
    if version < 4:
        assert [message[2] for message in legacy(records)] == [b"wake up"]
    else:
        assert [record.value for record in records_of(region_bytes(records))] == [b"wake up"]


def region_bytes(region) -> bytes:
    return os.pread(region.file.fileno(), region.length, region.position)


async def test_long_poll_waits_for_min_bytes(broker):
    broker.create_topic("t", 1)
    spy = WaitSpy(broker)
    needed = 2 * len(batch(b"x" * 50)) - 10
    poll = asyncio.create_task(start(broker, 11, fetch_request(broker, 11, ("t", 0, 0, 1 << 20),
                                                                max_wait_ms=20_000, min_bytes=needed)))
    await spy.until(1)
    await call(broker, 9, produce_request(b"x" * 50))
    await spy.until(2)  # not enough yet: it waits again
    assert not poll.done()
    await call(broker, 9, produce_request(b"y" * 50))
    response = await poll
    assert [r.value for r in records_of(region_bytes(response.responses[0].partitions[0].records))] == [
        b"x" * 50, b"y" * 50]


async def test_long_poll_gives_up_after_max_wait(broker):
    broker.create_topic("t", 1)
    began = time.monotonic()
    _, decoded = await fetch_one(broker, 11, max_wait_ms=100)
    elapsed = time.monotonic() - began
    assert decoded.error_code == 0 and decoded.records == b""
    assert 0.09 <= elapsed < 5


async def test_errors_answer_at_once(three):
    three.create_topic("empty", 1)
    spy = WaitSpy(three)
    request = fetch_request(three, 11, ("empty", 0, 0, 100), ("t", 0, 99, 100), max_wait_ms=20_000)
    answer = (await call(three, 11, request)).decoded
    assert [p.error_code for t in answer.responses for p in t.partitions] == [0, ErrorCode.OFFSET_OUT_OF_RANGE]
    assert spy.calls == 0


async def test_unknown_topics_do_not_end_the_wait(three):
    spy = WaitSpy(three)
    request = fetch_request(three, 11, ("nope", 0, 0, 100), ("t", 0, 4, 100), max_wait_ms=50)
    answer = (await call(three, 11, request)).decoded
    assert spy.calls >= 1
    assert [p.error_code for t in answer.responses for p in t.partitions] == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0]


async def test_nothing_but_unknown_topics_answers_at_once(three):
    spy = WaitSpy(three)
    await call(three, 11, fetch_request(three, 11, ("nope", 0, 0, 100), max_wait_ms=20_000))
    assert spy.calls == 0


async def test_shutdown_ends_long_polls(broker):
    broker.create_topic("t", 1)
    spy = WaitSpy(broker)
    began = time.monotonic()
    poll = asyncio.create_task(start(broker, 11, fetch_request(broker, 11, ("t", 0, 0, 1 << 20),
                                                                max_wait_ms=20_000)))
    await spy.until(1)
    broker.begin_shutdown()
    response = await poll
    assert response.responses[0].partitions[0].records == b""
    assert time.monotonic() - began < 10


@pytest.mark.parametrize("version", [15, 16, 17, 18])
async def test_newest_request_fields(three, version):
    extra = {"replica_directory_id": uuid.uuid4()} if version >= 17 else {}
    if version >= 18:
        extra["high_watermark"] = -1
    request = fetch_request(three, version, ("t", 0, 3, 1000, extra))
    request.replica_state = FetchRequest.ReplicaState(replica_id=-1, replica_epoch=-1)
    answer = await call(three, version, request)
    partition = answer.decoded.responses[0].partitions[0]
    assert [record.offset for record in records_of(partition.records)] == [3]
    assert answer.decoded.node_endpoints == []
    assert partition.current_leader.leader_id == -1  # only sent along with leadership errors


def test_a_session_id_that_no_longer_names_the_topic(three):
    from compatbroker.fetch_session import PartitionRequest
    state, log = three.partition_state("t", 0), three.get_log("t", 0)
    limits = fetch._Limits(max_bytes=100, min_bytes=1, hard=False, read_committed=False, consumer=True,
                           only_leader=True, client_rack=None)
    stale = PartitionRequest(topic="t", topic_id=uuid.uuid4(), partition=0, fetch_offset=0, partition_max_bytes=100)
    assert fetch._partition_problem(three, stale, state, log, limits) == ErrorCode.INCONSISTENT_TOPIC_ID
    current = PartitionRequest(topic="t", topic_id=three.topic("t").topic_id, partition=0, fetch_offset=0,
                               partition_max_bytes=100)
    assert fetch._partition_problem(three, current, state, log, limits) is None


@pytest.mark.parametrize("isolation_level", [0, 1])
async def test_a_caught_up_partition_answers_what_a_read_of_the_log_answers(three, isolation_level):
    """A fetch at the offset where reading stops answers without reading the log: the same offsets, no records, and
    for read_committed an empty list of aborted transactions, as `Log.read` gives."""
    log = three.get_log("t", 0)
    raw, decoded = await fetch_one(three, 12, offset=log.high_watermark, isolation_level=isolation_level)
    read = log.read(log.high_watermark, 1 << 20, aborted=isolation_level == 1)
    assert read.regions == []
    for data in (raw, decoded):
        assert (data.error_code, data.high_watermark, data.last_stable_offset, data.log_start_offset) == (
            0, read.high_watermark, read.last_stable_offset, read.log_start_offset)
        assert data.aborted_transactions == read.aborted_transactions and not data.records
