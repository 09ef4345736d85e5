"""Client metrics subscriptions: Kafka's validation of the CLIENT_METRICS configs, their storage, their matching."""
from __future__ import annotations

import pytest

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.telemetry import subscriptions as subs
from compatbroker.telemetry.subscriptions import ClientMetricsConfigError, SubscriptionStore


def refused(name, configs) -> tuple[ErrorCode, str]:
    with pytest.raises(ClientMetricsConfigError) as raised:
        subs.validate(name, configs)
    return raised.value.error_code, raised.value.message


def test_a_full_subscription_is_valid_and_parses():
    configs = {"metrics": "org.apache.kafka.producer., org.apache.kafka.consumer.", "interval.ms": " 1000 ",
               "match": "client_software_name=librdkafka, client_id=app-.*"}
    subs.validate("s", configs)
    parsed = subs.parse(configs, "s")
    assert parsed.metrics == {"org.apache.kafka.producer.", "org.apache.kafka.consumer."}
    assert parsed.interval_ms == 1000
    assert parsed.match == (("client_software_name", "librdkafka"), ("client_id", "app-.*"))


def test_a_large_pattern_is_compiled_once_not_for_every_client(monkeypatch):
    large = "client_id=" + "|".join(f"app-{n}" for n in range(300))  # beyond re2j's cache of small patterns
    parsed = subs.parse({"match": large}, "s")
    compiled = []
    monkeypatch.setattr(subs, "compile_pattern", lambda text: compiled.append(text))
    assert [parsed.matches({"client_id": client}) for client in ("app-1", "app-299", "app-300")] == [True, True, False]
    assert compiled == []


def test_defaults():
    parsed = subs.parse({})
    assert (parsed.metrics, parsed.interval_ms, parsed.match) == (frozenset(), 300_000, ())


@pytest.mark.parametrize("name, configs, expected", [
    ("", {"metrics": "*"}, (ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")),
    ("s", {"metric": "*"}, (ErrorCode.INVALID_REQUEST, "Unknown client metrics configuration: metric")),
    ("s", {"interval.ms": "99"}, (ErrorCode.INVALID_REQUEST, "Invalid value 99 for interval.ms, interval must be "
                                                             "between 100 and 3600000 (1 hour)")),
    ("s", {"interval.ms": "3600001"}, (ErrorCode.INVALID_REQUEST, "Invalid value 3600001 for interval.ms, interval "
                                                                  "must be between 100 and 3600000 (1 hour)")),
    ("s", {"interval.ms": "soon"}, (ErrorCode.INVALID_CONFIG, "Invalid value soon for configuration interval.ms: "
                                                              "Not a number of type INT")),
    ("s", {"metrics": "a,a"}, (ErrorCode.INVALID_CONFIG, "Configuration 'metrics' values must not be duplicated.")),
    ("s", {"match": "client_id=a,,client_id=b"}, (ErrorCode.INVALID_CONFIG,
                                                  "Configuration 'match' values must not be empty.")),
    ("s", {"match": "client_name=x"}, (ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: client_name=x")),
    ("s", {"match": "client_id"}, (ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: client_id")),
    ("s", {"match": "client_id=a=b"}, (ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: client_id=a=b")),
    ("s", {"match": "client_id=(x"}, (ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: client_id=(x")),
    ("s", {"metrics": "x" * 32768}, (ErrorCode.INVALID_CONFIG, "The configuration value cannot be added because it "
                                                               "exceeds the maximum value size of 32767 bytes.")),
])
def test_refusals_have_kafkas_codes_and_messages(name, configs, expected):
    assert refused(name, configs) == expected


def test_the_interval_bound_is_checked_before_the_match_patterns():
    assert refused("s", {"interval.ms": "1", "match": "bogus"})[0] == ErrorCode.INVALID_REQUEST


def test_matching_needs_every_selector_on_the_whole_value():
    parsed = subs.parse({"match": "client_id=app-.*,client_software_name=librdkafka"})
    client = {"client_id": "app-1", "client_software_name": "librdkafka"}
    assert parsed.matches(client)
    assert not parsed.matches({**client, "client_software_name": "librdkafka-x"})  # whole value
    assert not parsed.matches({**client, "client_id": None})                      # missing attribute
    assert subs.parse({}).matches({})                                             # no selector: everyone


def test_the_store_persists_and_an_empty_set_removes(tmp_path):
    store = SubscriptionStore(str(tmp_path))
    store.set("b", {"metrics": "*"})
    store.set("a", {"interval.ms": "100"})
    assert SubscriptionStore.load(str(tmp_path)).items() == [("a", {"interval.ms": "100"}), ("b", {"metrics": "*"})]
    store.set("a", {})
    assert SubscriptionStore.load(str(tmp_path)).names() == ["b"]


def test_an_unreadable_file_is_an_error(tmp_path):
    (tmp_path / subs.SUBSCRIPTIONS_FILE).write_text("{not json")
    with pytest.raises(ValueError, match="unreadable client metrics subscriptions"):
        SubscriptionStore.load(str(tmp_path))
