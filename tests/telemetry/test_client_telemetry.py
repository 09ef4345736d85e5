"""ClientTelemetry: instance ids, subscription ids, Kafka's push checks, decoding, the store, expiry, export."""
from __future__ import annotations

import uuid

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from opentelemetry.proto.metrics.v1.metrics_pb2 import Gauge, Metric, NumberDataPoint

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.records.compression import compress
from compatbroker.telemetry import ClientInfo, ClientTelemetry, TelemetryError, client_metrics_config, export
from compatbroker.telemetry.client_telemetry import ZERO_UUID, subscription_id

from .payloads import CONNECTIONS, LATENCY, counter, gauge, metrics_data, sample_payload

LIBRDKAFKA = ClientInfo(client_id="app-1", software_name="librdkafka", software_version="2.16.0",
                        source_address="127.0.0.1", source_port=50000)


class Clock:
    def __init__(self):
        self.now = 5  # a monotonic clock may start low: a new instance must not look throttled

    def __call__(self):
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def telemetry(clock):
    made = ClientTelemetry(clock=clock, wall_clock=lambda: 1_700_000_000_000)
    made.set_subscription("all", {"metrics": "*", "interval.ms": "1000"})
    return made


def subscribe(telemetry, info=LIBRDKAFKA, instance_id=ZERO_UUID):
    return telemetry.get_subscriptions(instance_id, info)


def push(telemetry, answer, *, data=None, compression=0, terminating=False, subscription=None, info=LIBRDKAFKA):
    telemetry.push(answer.client_instance_id, info, compression_type=compression, terminating=terminating,
                   subscription_id=answer.subscription_id if subscription is None else subscription,
                   metrics=sample_payload() if data is None else data)


def error_of(call, *args, **kwargs) -> ErrorCode:
    with pytest.raises(TelemetryError) as raised:
        call(*args, **kwargs)
    return raised.value.error_code


def test_a_zero_id_gets_a_new_instance_and_the_matching_subscription(telemetry):
    answer = subscribe(telemetry)
    assert answer.client_instance_id not in (ZERO_UUID, uuid.UUID(int=1))
    assert answer.requested_metrics == ("*",)
    assert answer.push_interval_ms == 1000
    assert answer.accepted_compression_types == (4, 3, 1, 2)  # zstd, lz4, gzip, snappy
    assert answer.telemetry_max_bytes == 1024 * 1024 and answer.delta_temporality
    assert answer.subscription_id == subscription_id(("*",), 1000, answer.client_instance_id)
    assert subscribe(telemetry).client_instance_id != answer.client_instance_id


def test_subscription_id_is_kafkas_crc32c_xor_the_uuid_hash():
    instance = uuid.UUID("00000000-0000-0001-0000-000000000002")  # hashCode: (1 ^ 2) = 3
    import crc32c
    expected = crc32c.crc32c(b"[a, b]1000") ^ 3
    assert subscription_id(("a", "b"), 1000, instance) == (expected - 2**32 if expected >= 2**31 else expected)


def test_no_matching_subscription_asks_for_nothing_at_the_default_interval(telemetry):
    telemetry.set_subscription("all", {"metrics": "org.apache.kafka.", "match": "client_software_name=java"})
    answer = subscribe(telemetry)
    assert (answer.requested_metrics, answer.push_interval_ms) == ((), 300_000)


def test_overlapping_subscriptions_union_their_prefixes_and_take_the_smallest_interval(clock):
    telemetry = ClientTelemetry(clock=clock)
    telemetry.set_subscription("a", {"metrics": "x.,y.", "interval.ms": "5000"})
    telemetry.set_subscription("b", {"metrics": "y.,z.", "interval.ms": "2000", "match": "client_id=app-.*"})
    telemetry.set_subscription("c", {"metrics": "w.", "interval.ms": "100", "match": "client_id=other"})
    answer = subscribe(telemetry)
    assert (answer.requested_metrics, answer.push_interval_ms) == (("x.", "y.", "z."), 2000)


def test_asking_again_within_the_interval_is_throttled(telemetry, clock):
    answer = subscribe(telemetry)
    assert error_of(subscribe, telemetry, instance_id=answer.client_instance_id) == \
        ErrorCode.THROTTLING_QUOTA_EXCEEDED
    clock.now += 1000
    assert subscribe(telemetry, instance_id=answer.client_instance_id).client_instance_id == \
        answer.client_instance_id


def test_a_subscription_change_is_seen_at_once(telemetry, clock):
    answer = subscribe(telemetry)
    telemetry.set_subscription("all", {"metrics": "org.", "interval.ms": "2000"})
    again = subscribe(telemetry, instance_id=answer.client_instance_id)
    assert (again.requested_metrics, again.push_interval_ms) == (("org.",), 2000)
    assert error_of(push, telemetry, answer) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    clock.now += 2000
    push(telemetry, again)


def test_pushes_sooner_than_the_interval_are_throttled_but_a_terminating_one_is_not(telemetry, clock):
    answer = subscribe(telemetry)
    push(telemetry, answer)                     # the first push after a Get is always let through
    clock.now += 999
    assert error_of(push, telemetry, answer) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    clock.now += 1
    push(telemetry, answer)
    push(telemetry, answer, terminating=True)
    clock.now += 1000
    assert error_of(push, telemetry, answer) == ErrorCode.INVALID_REQUEST  # nothing after terminating


@pytest.mark.parametrize("kwargs, code", [
    ({"subscription": 12345}, ErrorCode.UNKNOWN_SUBSCRIPTION_ID),
    ({"compression": 5}, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    ({"data": b"\x00" * (1024 * 1024 + 1)}, ErrorCode.TELEMETRY_TOO_LARGE),
    ({"data": b"\xff\xff\xff"}, ErrorCode.INVALID_RECORD),
    ({"data": b"not gzip", "compression": 1}, ErrorCode.INVALID_RECORD),
])
def test_push_errors(telemetry, kwargs, code):
    answer = subscribe(telemetry)
    assert error_of(push, telemetry, answer, **kwargs) == code
    assert telemetry.clients() == []


def test_a_payload_decompressing_beyond_the_limit_is_invalid_record(telemetry):
    """A few kilobytes of zstd expanding to 3 MB of empty data points would cost ~40x that in memory to parse."""
    empty_points = Metric(name="g", gauge=Gauge(data_points=[NumberDataPoint()] * 1_500_000))
    bomb = compress(4, metrics_data(empty_points))
    assert len(bomb) < 64 * 1024
    assert error_of(push, telemetry, subscribe(telemetry), data=bomb, compression=4) == ErrorCode.INVALID_RECORD
    assert telemetry.clients() == []


def test_the_reserved_instance_ids_are_invalid(telemetry):
    for reserved in (ZERO_UUID, uuid.UUID(int=1)):
        assert error_of(telemetry.push, reserved, LIBRDKAFKA, subscription_id=0, terminating=False,
                        compression_type=0, metrics=b"") == ErrorCode.INVALID_REQUEST


def test_after_unknown_subscription_the_client_may_ask_again_at_once(telemetry):
    answer = subscribe(telemetry)
    assert error_of(push, telemetry, answer, subscription=answer.subscription_id + 1) == \
        ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    assert subscribe(telemetry, instance_id=answer.client_instance_id).subscription_id == answer.subscription_id


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_every_codec_is_read(telemetry, codec):
    answer = subscribe(telemetry)
    push(telemetry, answer, data=compress(codec, sample_payload(latency=7.5)), compression=codec)
    (client,) = telemetry.clients()
    assert {m["name"]: m["value"] for m in client["metrics"]}[LATENCY] == 7.5


def test_clients_shows_who_pushed_what(telemetry):
    answer = subscribe(telemetry)
    push(telemetry, answer)
    (client,) = telemetry.clients()
    assert client["client_instance_id"] == str(answer.client_instance_id)
    assert (client["client_id"], client["client_software_name"], client["client_software_version"],
            client["client_source_address"], client["client_source_port"]) == (
        "app-1", "librdkafka", "2.16.0", "127.0.0.1", 50000)
    assert (client["requested_metrics"], client["push_interval_ms"], client["pushes"]) == (["*"], 1000, 1)
    assert client["last_push_ms"] == 1_700_000_000_000 and client["resource"] == {"client_rack": "r1"}
    latency = next(m for m in client["metrics"] if m["name"] == LATENCY)
    assert latency["kind"] == "gauge" and latency["attributes"] == {"node.id": "1"} and latency["value"] == 2.5


def test_delta_counters_are_summed_across_pushes(telemetry, clock):
    answer = subscribe(telemetry)
    push(telemetry, answer, data=sample_payload(connections=3))
    clock.now += 1000
    push(telemetry, answer, data=sample_payload(connections=2))
    (client,) = telemetry.clients()
    assert {m["name"]: m["value"] for m in client["metrics"]}[CONNECTIONS] == 5
    clock.now += 1000
    push(telemetry, answer, data=metrics_data(counter(CONNECTIONS, 9, delta=False)))
    (client,) = telemetry.clients()
    assert {m["name"]: m["value"] for m in client["metrics"]}[CONNECTIONS] == 9  # cumulative: as pushed


def test_pushed_data_expires_after_three_intervals_or_a_minute(telemetry, clock):
    answer = subscribe(telemetry)
    push(telemetry, answer)
    clock.now += 59_999
    assert len(telemetry.clients()) == 1
    clock.now += 1
    assert telemetry.clients() == []


class Connection:
    """Stands for a connection's client_gone future: its done callbacks run when it closes."""

    def __init__(self):
        self.callbacks = []

    def add_done_callback(self, callback):
        self.callbacks.append(callback)

    def close(self):
        for callback in self.callbacks:
            callback(self)


def test_instances_are_dropped_when_their_connection_closes(telemetry):
    connection = Connection()
    for _ in range(3):  # one connection making instance after instance: one callback, the last instance kept
        telemetry.get_subscriptions(ZERO_UUID, LIBRDKAFKA, client_gone=connection)
    assert len(connection.callbacks) == 1 and telemetry.instance_count() == 3
    connection.close()
    assert telemetry.instance_count() == 2  # the two made before the last stay until they expire


def test_the_store_is_bounded(clock):
    telemetry = ClientTelemetry(clock=clock)
    telemetry.set_subscription("all", {"metrics": "*"})
    telemetry.store.max_clients, telemetry.store.max_points = 2, 3
    many = metrics_data(*(gauge(f"g{n}", n) for n in range(10)))
    for _ in range(3):
        push(telemetry, subscribe(telemetry), data=many)
    clients = telemetry.clients()
    assert len(clients) == 2
    assert all(len(client["metrics"]) == 3 and client["skipped"] == 7 for client in clients)


def scraped(telemetry) -> str:
    registry = CollectorRegistry()

    class Collector:
        def collect(self):
            return export.metric_families(telemetry)
    registry.register(Collector())
    return generate_latest(registry).decode()


def test_the_store_keeps_a_bounded_amount_of_pushed_text(clock):
    """Few points with large attributes: the bytes kept, not only the counts, are bounded."""
    telemetry = ClientTelemetry(clock=clock)
    telemetry.set_subscription("all", {"metrics": "*"})
    telemetry.store.max_bytes = 250_000
    large = metrics_data(*(gauge(f"g{n}", n, label="x" * 50_000) for n in range(2)))
    pushed = [subscribe(telemetry) for _ in range(4)]
    for answer in pushed:
        push(telemetry, answer, data=large)
    kept = [client["client_instance_id"] for client in telemetry.clients()]
    assert kept == [str(answer.client_instance_id) for answer in reversed(pushed[-2:])]
    assert 200_000 < telemetry.store.stored_bytes() <= 250_000


def test_export_names_labels_and_kinds(telemetry, clock):
    answer = subscribe(telemetry)
    push(telemetry, answer, data=sample_payload(connections=3))
    clock.now += 1000
    push(telemetry, answer, data=sample_payload(connections=4))
    text = scraped(telemetry)
    instance = str(answer.client_instance_id)
    assert "# TYPE org_apache_kafka_producer_node_request_latency_avg gauge" in text
    assert (f'org_apache_kafka_producer_node_request_latency_avg{{client_id="app-1",client_instance_id="{instance}",'
            'node_id="1"} 2.5') in text
    assert "# TYPE org_apache_kafka_producer_connection_creation_total counter" in text
    assert (f'org_apache_kafka_producer_connection_creation_total{{client_id="app-1",'
            f'client_instance_id="{instance}"}} 7.0') in text
    assert f'kafka_client_telemetry_pushes_total{{client_id="app-1",client_instance_id="{instance}"' in text


def test_export_survives_names_prometheus_would_refuse(telemetry):
    push(telemetry, subscribe(telemetry), data=metrics_data(gauge("", 1.0), counter("9_total", 2), gauge("9x", 3.0)))
    text = scraped(telemetry)
    assert '\n_{client_id="app-1"' in text and "\n_9_total{" in text and "\n_9x{" in text


def test_client_metrics_config_describes_validates_and_applies(telemetry):
    entries = {e.name: e for e in client_metrics_config.describe(telemetry, "all")}
    assert [(e.name, e.value, e.source) for e in entries.values()] == [
        ("interval.ms", "1000", 7), ("match", "", 5), ("metrics", "*", 7)]
    assert entries["interval.ms"].synonyms == [("interval.ms", "1000", 7)] and entries["match"].synonyms == []
    assert [e.value for e in client_metrics_config.describe(telemetry, "none")] == ["300000", "", ""]
    changed = client_metrics_config.incremental(telemetry, "all", [("interval.ms", 1, None),
                                                                   ("match", 0, "client_id=a , client_id=b")])
    assert changed == {"metrics": "*", "match": "client_id=a , client_id=b"}
    with pytest.raises(client_metrics_config.ClientMetricsConfigError) as raised:
        client_metrics_config.incremental(telemetry, "all", [("metrics", 2, "x")])
    assert (raised.value.error_code, raised.value.message) == (
        ErrorCode.INVALID_CONFIG, "Can't APPEND to key metrics because its type is not LIST.")
    client_metrics_config.apply(telemetry, "all", changed)
    assert client_metrics_config.describe(telemetry, "all")[1].value == "client_id=a,client_id=b"
    client_metrics_config.apply(telemetry, "all", {})
    assert telemetry.subscription_names() == []
    with pytest.raises(client_metrics_config.ClientMetricsConfigError, match="must not be empty"):
        client_metrics_config.describe(telemetry, "")
