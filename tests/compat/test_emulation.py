"""Version emulation with real clients: against `compatbroker serve --emulate 2.8` and `--emulate 4.3` each client
of the matrix negotiates versions inside what that Kafka release advertises, and its flows still pass.

The broker advertises a proxy in front of it (tests/compat/fault_proxy.py, injecting no faults here), so every
request of the client under test goes through the proxy, which logs each request's API key and version. Each test produces records with one client and reads them
back with the same client, then checks the log against the release's table.
"""
from __future__ import annotations


import pytest

from compatbroker.toolkit.emulation import emulated_registry
from compatbroker.handlers import default_registry

from . import clients
from .broker_process import BrokerProcess
from .conftest import BROKER_SETTINGS
from .fault_proxy import FaultProxy, advertising
from .records import assert_same, numbered

RELEASES = ("2.8", "4.3")
API_VERSIONS, PRODUCE, FETCH, METADATA = 18, 0, 1, 3


class EmulatingBroker(BrokerProcess):
    """`compatbroker serve --emulate RELEASE`."""

    def __init__(self, data_dir, settings, release: str):
        super().__init__(data_dir, settings)
        self.release = release

    def command(self, listen: str) -> list[str]:
        return [*super().command(listen), "--emulate", self.release]


@pytest.fixture(scope="module", params=RELEASES)
def emulated(request, tmp_path_factory):
    """(release, broker, proxy): a broker emulating the release, reached through the request log."""
    release = request.param
    data_dir = tmp_path_factory.mktemp(f"emulate{release}") / "data"
    with (FaultProxy() as proxy,  # no faults: it only logs the requests
          EmulatingBroker(data_dir, BROKER_SETTINGS | advertising(proxy), release) as broker):
        yield release, broker, proxy.start(broker.host, broker.port)


def served_ranges(release: str) -> dict[int, tuple[int, int]]:
    """What the emulating broker advertises: the release's table intersected with what we implement."""
    return {key: (m.MIN_VERSION, m.MAX_VERSION) for key, m in emulated_registry(default_registry(), release).items()}


def assert_negotiated_within(release: str, requests: list[tuple[str | None, int, int]]) -> None:
    """Every request is of an API and version the release advertises (ApiVersions probes newer than ours are
    what KIP-511 allows: the broker answers them with its range)."""
    assert requests, "the proxy saw no request"
    ranges = served_ranges(release)
    for client_id, api_key, version in requests:
        if api_key == API_VERSIONS and version > ranges[API_VERSIONS][1]:
            continue
        assert api_key in ranges, f"{client_id} sent API {api_key}, which Kafka {release} does not advertise here"
        low, high = ranges[api_key]
        assert low <= version <= high, (f"{client_id} sent API {api_key} v{version}; Kafka {release} advertises "
                                        f"{low}-{high}")


def _used(requests, api_key: int) -> set[int]:
    return {version for _client, key, version in requests if key == api_key}


@pytest.mark.matrix(flow="emulation")
def test_produce_and_consume_negotiated_for_the_release(client, emulated, topic):
    release, _broker, proxy = emulated
    bootstrap = proxy.bootstrap
    proxy.take()
    sent = numbered(20, f"emulated{release}")
    client.produce(bootstrap, topic, sent)
    assert_same(sent, client.consume(bootstrap, topic, len(sent)))
    requests = proxy.take()
    assert_negotiated_within(release, requests)
    assert _used(requests, PRODUCE) and _used(requests, FETCH) and _used(requests, METADATA), \
        f"expected Produce, Fetch and Metadata in {sorted({(k, v) for _c, k, v in requests})}"


@pytest.mark.matrix(client="sarama", flow="emulation")
def test_sarama_defaults_against_the_release(emulated, topic):
    """sarama's defaults (a 0.8.2 broker assumed, no ApiVersions) work against 2.8; Kafka 4.x refuses Produce v0
    (advertised, not accepted) and no longer has Fetch v0, so there the client must name a newer protocol."""
    sarama = clients.load_or_fail("sarama")
    release, _broker, proxy = emulated
    bootstrap = proxy.bootstrap
    sent = numbered(10, "sarama")
    proxy.take()
    if release == "2.8":
        sarama.produce(bootstrap, topic, sent)
        assert_same(sent, sarama.consume(bootstrap, topic, len(sent)))
        requests = proxy.take()
        assert_negotiated_within(release, requests)
        assert _used(requests, PRODUCE) == {0} and _used(requests, FETCH) == {0} and _used(requests, METADATA) == {0}
        return
    with pytest.raises(clients.ClientError):
        sarama.produce(bootstrap, topic, sent, timeout_s=10)
    assert _used(proxy.take(), PRODUCE) == {0}, "sarama's default producer sends Produce v0"
    modern = sarama.with_protocol("2.1.0")
    modern.produce(bootstrap, topic, sent)
    assert_same(sent, modern.consume(bootstrap, topic, len(sent)))
    requests = proxy.take()
    assert_negotiated_within(release, requests)
    assert min(_used(requests, PRODUCE)) >= 3 and min(_used(requests, FETCH)) >= 4
