"""The Go client sarama (Debian's 1.22 package) with its default settings, which assume a Kafka 0.8.2 broker: no
ApiVersions, Metadata v0, Produce v0 with magic 0 messages, Fetch v0, ListOffsets v0. The broker must take magic 0
messages (storing them as v2 batches, as Kafka 3+ does) and down-convert what it serves to Fetch v0.

Flows: metadata, produce with each acks and codec (lz4 needs sarama's 0.10 protocol; zstd, which sarama 1.22 sends
with Produce v3, is refused as Kafka refuses it below v7), consume from
the oldest and the newest offset, and a consumer group with committed offsets (sarama's groups need 0.10.2).
Requests go through a recording proxy, so each test also checks the versions sarama really sent. sarama's part in
the other flows (admin, committed offsets, idempotence, metadata, restart) is in those flows' modules.

The end of the module is the "sarama-2.1" row's: the same client at protocol 2.1.0, through the shared produce,
consume and restart tests (it joins the shared metadata, committed offsets, group membership and idempotence tests
by its catalog tags).
"""
from __future__ import annotations

import pytest

from . import clients, test_consume, test_produce, test_restart
from .broker_process import BrokerProcess
from .checks import POSITIONING_BOUND_S, assert_stored_as, first_new_record, read_exactly
from .conftest import BROKER_SETTINGS
from .fault_proxy import FaultProxy, advertising
from .records import CODEC_IDS, LATEST, assert_same, numbered
from .test_emulation import API_VERSIONS, FETCH, METADATA, PRODUCE

pytestmark = pytest.mark.matrix(client="sarama")
LIST_OFFSETS = 2
# The oldest sarama protocol version that can send each codec, and the Produce version sarama 1.22 then sends.
CODEC_PROTOCOL = {"gzip": (None, 0), "snappy": (None, 0), "lz4": ("0.10.0.0", 2)}


@pytest.fixture(scope="module")
def sarama():
    return clients.load_or_fail("sarama")


@pytest.fixture(scope="module")
def proxied(tmp_path_factory):
    """(broker, proxy): a broker advertising a request-logging proxy in front of it."""
    data_dir = tmp_path_factory.mktemp("sarama") / "data"
    with (FaultProxy() as proxy,  # no faults: it only logs the requests
          BrokerProcess(data_dir, BROKER_SETTINGS | advertising(proxy)) as broker):
        yield broker, proxy.start(broker.host, broker.port)


def _sarama_requests(proxy: FaultProxy) -> set[tuple[int, int]]:
    return {(key, version) for client_id, key, version in proxy.take() if client_id == "sarama-compat"}


@pytest.mark.matrix(flow="metadata")
def test_metadata_v0_creates_and_describes_the_topic(sarama, proxied, topic):
    broker, proxy = proxied
    proxy.take()
    answer = sarama.metadata_answer(proxy.bootstrap, topic)
    assert answer["brokers"] == [proxy.bootstrap]
    assert answer["topics"][topic] == [0]
    sent = _sarama_requests(proxy)
    assert sent == {(METADATA, 0)}, f"sarama's defaults send Metadata v0 only, not {sorted(sent)}"


@pytest.mark.matrix(flow="produce")
@pytest.mark.parametrize("acks", [0, 1, -1])
def test_produce_v0_with_each_acks(sarama, proxied, reference, topic, acks):
    broker, proxy = proxied
    sent = numbered(30, f"acks{acks}")
    proxy.take()
    placed = sarama.produce(proxy.bootstrap, topic, sent, acks=acks)
    # Read first: with acks=0 sarama returns before the proxy has relayed (and logged) its requests; the proxy logs
    # a request before forwarding it, so once the records are stored their Produce requests are in the log.
    assert_same(sent, read_exactly(reference, broker, topic, len(sent)))
    assert {(k, v) for k, v in _sarama_requests(proxy) if k == PRODUCE} == {(PRODUCE, 0)}
    if acks != 0:
        assert placed == [(0, offset) for offset in range(len(sent))]
    assert_stored_as(broker, topic, len(sent), codec=CODEC_IDS["none"])


@pytest.mark.matrix(flow="produce")
@pytest.mark.parametrize("codec", list(CODEC_PROTOCOL))
def test_produce_compressed(sarama, proxied, reference, topic, codec):
    broker, proxy = proxied
    protocol, produce_version = CODEC_PROTOCOL[codec]
    sent = numbered(200, codec, size=200)
    proxy.take()
    sarama.with_protocol(protocol).produce(proxy.bootstrap, topic, sent, compression=codec)
    assert {v for k, v in _sarama_requests(proxy) if k == PRODUCE} == {produce_version}
    assert_same(sent, read_exactly(reference, broker, topic, len(sent)))
    assert_stored_as(broker, topic, len(sent), codec=CODEC_IDS[codec])


@pytest.mark.matrix(flow="produce")
def test_zstd_below_produce_v7_is_refused_as_kafka_does(sarama, proxied, reference, topic):
    broker, proxy = proxied
    proxy.take()
    with pytest.raises(clients.ClientError, match="compression type"):  # UNSUPPORTED_COMPRESSION_TYPE
        sarama.with_protocol("2.1.0").produce(proxy.bootstrap, topic, numbered(10, "zstd"), compression="zstd",
                                              timeout_s=10)
    assert {v for k, v in _sarama_requests(proxy) if k == PRODUCE} == {3}
    assert reference.end_offsets(broker.bootstrap, topic, [0]) == {0: 0}, "nothing may be stored"


@pytest.mark.matrix(flow="consume")
def test_consume_from_oldest_with_fetch_v0(sarama, proxied, reference, topic):
    """The reference writes v2 batches; sarama reads them as magic 0 messages through Fetch v0."""
    broker, proxy = proxied
    sent = numbered(50, "oldest", key_every=5)
    reference.produce(broker.bootstrap, topic, sent)
    proxy.take()
    got = sarama.consume(proxy.bootstrap, topic, len(sent))
    assert_same(sent, got)
    assert [r.offset for r in got] == list(range(len(sent)))
    requests = _sarama_requests(proxy)
    assert {v for k, v in requests if k == FETCH} == {0} and (API_VERSIONS, 0) not in requests


@pytest.mark.matrix(flow="consume")
@pytest.mark.parametrize("codec", ["gzip", "snappy"])
def test_consume_compressed_batches_down_converted(sarama, proxied, reference, topic, codec):
    broker, proxy = proxied
    sent = numbered(100, codec, size=100)
    reference.produce(broker.bootstrap, topic, sent, compression=codec)
    assert_same(sent, sarama.consume(proxy.bootstrap, topic, len(sent)))


@pytest.mark.matrix(flow="consume")
def test_consume_from_newest(sarama, proxied, reference, topic):
    """Starting at the newest offset, sarama sees only records produced after it positioned itself (ListOffsets
    v0 with the latest sentinel). New records are produced until it reports one."""
    broker, proxy = proxied
    reference.produce(broker.bootstrap, topic, numbered(10, "old"))
    proxy.take()
    first = first_new_record(reference, broker, topic,
                             lambda: sarama.consume(proxy.bootstrap, topic, 1, start=LATEST,
                                                    timeout_s=POSITIONING_BOUND_S))
    assert first.value.startswith(b"new-") and first.offset >= 10, f"got an old record: {first.short()}"
    assert (LIST_OFFSETS, 0) in _sarama_requests(proxy)


@pytest.mark.matrix(flow="groups")
def test_consumer_group_commits_and_resumes(sarama, proxied, reference, topic):
    broker, proxy = proxied
    group = f"{topic}.group"
    sent = numbered(30, "grouped")
    reference.produce(broker.bootstrap, topic, sent)
    first = sarama.group_consume(proxy.bootstrap, topic, group, 20)
    assert_same(sent[:20], first)
    assert reference.group_offsets(broker.bootstrap, group) == {(topic, 0): 20}
    rest = sarama.group_consume(proxy.bootstrap, topic, group, 10)
    assert_same(sent[20:], rest)
    assert reference.group_offsets(broker.bootstrap, group) == {(topic, 0): 30}


# --- the "sarama-2.1" row: sarama with Config.Version 2.1.0, the default protocol of newer sarama releases ----------
# It writes v2 batches (Produce v3, with headers and timestamps), reads with Fetch v4 and looks offsets up with
# ListOffsets v1. The shared produce, consume and restart tests run here with it as their client: it cannot join their
# tag ("client") because two of them do not fit sarama 1.22 at 2.1.0. Producing zstd: it sends Produce v3, which
# Kafka refuses for zstd below v7 (test_zstd_below_produce_v7_is_refused_as_kafka_does); keyed records: its default
# partitioner hashes with FNV-1a, not the Java client's murmur2. It reads zstd batches (Fetch v4 serves them as
# stored, as Kafka 4 does).

@pytest.fixture(scope="module")
def sarama_2_1():
    return clients.load_or_fail("sarama-2.1")


@pytest.mark.matrix(client="sarama-2.1", flow="produce")
def test_2_1_produces_record_shapes(sarama_2_1, reference, broker, topic):
    test_produce.test_record_shapes(sarama_2_1, reference, broker, topic)


@pytest.mark.matrix(client="sarama-2.1", flow="produce")
@pytest.mark.parametrize("acks", [0, 1, -1])
def test_2_1_produces_with_each_acks(sarama_2_1, reference, broker, topic, acks):
    test_produce.test_acks(sarama_2_1, reference, broker, topic, acks)


@pytest.mark.matrix(client="sarama-2.1", flow="produce")
@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
def test_2_1_produces_compressed(sarama_2_1, reference, broker, topic, codec):
    test_produce.test_compression(sarama_2_1, reference, broker, topic, codec)


@pytest.mark.matrix(client="sarama-2.1", flow="produce")
def test_2_1_produces_a_one_mib_record_and_twenty_producers(sarama_2_1, reference, broker, topic):
    test_produce.test_one_mib_record(sarama_2_1, reference, broker, topic)
    test_produce.test_twenty_producers(sarama_2_1, reference, broker, f"{topic}.twenty")


@pytest.mark.matrix(client="sarama-2.1", flow="consume")
def test_2_1_consumes_record_shapes(sarama_2_1, reference, broker, topic):
    test_consume.test_record_shapes(sarama_2_1, reference, broker, topic)


@pytest.mark.matrix(client="sarama-2.1", flow="consume")
def test_2_1_consumes_compressed_and_big_records(sarama_2_1, reference, broker, topic):
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        test_consume.test_compressed(sarama_2_1, reference, broker, f"{topic}.{codec}", codec)
    test_consume.test_one_mib_record(sarama_2_1, reference, broker, topic)


@pytest.mark.matrix(client="sarama-2.1", flow="consume")
def test_2_1_consumes_ten_partitions(sarama_2_1, reference, partitioned_broker, topic):
    test_consume.test_ten_partitions(sarama_2_1, reference, partitioned_broker, topic)


@pytest.mark.matrix(client="sarama-2.1", flow="consume")
def test_2_1_starts_at_a_timestamp_an_offset_and_the_latest(sarama_2_1, reference, broker, topic):
    test_consume.test_start_at_timestamp(sarama_2_1, reference, broker, f"{topic}.timestamp")
    test_consume.test_start_at_offset(sarama_2_1, reference, broker, f"{topic}.offset")
    test_consume.test_start_at_latest(sarama_2_1, reference, broker, f"{topic}.latest")


@pytest.mark.matrix(client="sarama-2.1", flow="consume")
def test_2_1_long_poll(sarama_2_1, reference, broker, topic):
    test_consume.test_long_poll(sarama_2_1, reference, broker, topic)


@pytest.mark.matrix(client="sarama-2.1", flow="consume")
def test_2_1_twenty_consumers(sarama_2_1, reference, broker, topic):
    test_consume.test_twenty_consumers(sarama_2_1, reference, broker, topic)


@pytest.mark.matrix(client="sarama-2.1", flow="consume")
def test_2_1_lists_offsets(sarama_2_1, reference, broker, topic):
    test_consume.test_list_offsets(sarama_2_1, reference, broker, topic)


@pytest.mark.matrix(client="sarama-2.1", flow="restart")
def test_2_1_restart_between_produce_and_consume(sarama_2_1, reference, fresh_broker, topic):
    test_restart.test_restart_between_produce_and_consume(sarama_2_1, reference, fresh_broker, topic)
