"""The Go client sarama (Debian's 1.22 package) with its default settings, which assume a Kafka 0.8.2 broker: no
ApiVersions, Metadata v0, Produce v0 with magic 0 messages, Fetch v0, ListOffsets v0. The broker must take magic 0
messages (storing them as v2 batches, as Kafka 3+ does) and down-convert what it serves to Fetch v0.

Flows: metadata, produce with each acks and codec (lz4 needs sarama's 0.10 protocol; zstd, which sarama 1.22 sends
with Produce v3, is refused as Kafka refuses it below v7), consume from
the oldest and the newest offset, and a consumer group with committed offsets (sarama's groups need 0.10.2).
Requests go through a recording proxy, so each test also checks the versions sarama really sent. sarama's part in
the other flows (admin, committed offsets, idempotence, metadata, restart) is in those flows' modules.
"""
from __future__ import annotations

import pytest

from . import clients
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
