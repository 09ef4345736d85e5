"""The release tables of version emulation, and the registry they make.

The tables are facts copied from Apache Kafka; these tests hold them to what can be checked here: their shape, the
rules Kafka's history obeys, a few well-known ranges, and agreement with Kafka 4.3's own message definitions as
kafka-python bundles them. The registry tests call the real server with an emulated registry.
"""
from __future__ import annotations

import asyncio
import json
import re
from importlib import resources
from pathlib import Path

import pytest

from compatbroker.config import BrokerConfig
from compatbroker.handlers import default_registry
from compatbroker.protocol import API_KEYS
from compatbroker.protocol.messages import ApiVersionsRequest, MetadataRequest, ProduceRequest
from compatbroker.server.run import ClusterRuntime
from compatbroker.toolkit.emulation import (
    RELEASES,
    FeatureLevels,
    RefusedVersion,
    UnknownRelease,
    advertised,
    emulated_registry,
    feature_levels,
    finalized_transaction_version,
    release_of,
    release_table,
)
from compatbroker.toolkit.runtime import toolkit_for

from .async_tests import async_test
from .server.helpers import RawClient, handler_module, running_server

TABLES = resources.files("compatbroker.toolkit.emulation").joinpath("releases")
# Kafka 4.3's request files, as kafka-python 3.0.12 ships them
KAFKA_PYTHON_SCHEMAS = "kafka.protocol.schemas.resources"


def _document(release: str) -> dict:
    return json.loads(TABLES.joinpath(f"{release}.json").read_text(encoding="utf-8"))


def test_there_is_one_table_per_release_and_no_other():
    assert sorted(p.name for p in TABLES.iterdir() if p.name.endswith(".json")) == sorted(
        f"{release}.json" for release in RELEASES)


@pytest.mark.parametrize("release", RELEASES)
def test_each_table_names_its_release_and_source_and_lists_each_api_once(release):
    document = _document(release)
    assert document["release"] == release
    assert document["broker"].startswith(f"Apache Kafka {release}.")
    assert {"files", "rules"} <= set(document["source"])
    keys = [api["key"] for api in document["apis"]]
    assert keys == sorted(set(keys)), "keys are listed once, in order"
    for api in document["apis"]:
        assert 0 <= api["min"] <= api.get("accepted_min", api["min"]) <= api["max"], api
        assert re.fullmatch(r"[A-Z][A-Za-z]+", api["name"]), api


@pytest.mark.parametrize("release", RELEASES)
def test_names_and_ranges_fit_the_schemas_we_carry(release):
    for key, api in release_table(release).items():
        if key in API_KEYS:
            request = API_KEYS[key][0]
            assert request.NAME.removesuffix("Request") == api.name
            low, high = request.VALID_VERSIONS
            assert low <= api.min and api.max <= high, f"{api} outside our schema's {low}-{high}"


def test_later_releases_never_lower_a_maximum():
    for older, newer in zip(RELEASES, RELEASES[1:]):
        before, after = advertised(older), advertised(newer)
        for key in before.keys() & after.keys():
            assert after[key][1] >= before[key][1], f"API {key}: {older} {before[key]} -> {newer} {after[key]}"


@pytest.mark.parametrize("release, key, expected", [
    ("2.8", 0, (0, 9)), ("2.8", 3, (0, 11)), ("2.8", 18, (0, 3)), ("2.8", 1, (0, 12)),
    ("3.9", 18, (0, 4)), ("3.9", 1, (0, 17)), ("3.9", 3, (0, 12)),
    ("4.0", 1, (4, 17)), ("4.0", 11, (2, 9)), ("4.0", 3, (0, 13)), ("4.0", 0, (0, 12)),
    ("4.1", 11, (0, 9)), ("4.1", 0, (0, 13)), ("4.1", 1, (4, 18)),
    ("4.3", 8, (2, 10)), ("4.3", 2, (1, 11)),
])
def test_well_known_ranges(release, key, expected):
    assert advertised(release)[key] == expected


def test_kafka_4_advertises_produce_from_v0_but_accepts_it_from_v3():
    assert release_table("3.9")[0].accepted_min == 0
    for release in ("4.0", "4.1", "4.3"):
        assert (release_table(release)[0].min, release_table(release)[0].accepted_min) == (0, 3)


def test_apis_kafka_added_later_are_absent_from_older_tables():
    assert 68 not in advertised("2.8") and 68 in advertised("4.0")  # ConsumerGroupHeartbeat (KIP-848)
    assert 75 in advertised("3.9") and 75 not in advertised("2.8")  # DescribeTopicPartitions
    assert not ({71, 72} & set().union(*map(advertised, RELEASES))), "telemetry APIs need a receiver configured"


def test_the_4_3_table_agrees_with_kafka_4_3_request_files():
    """kafka-python bundles Apache Kafka 4.3's definitions of the client APIs: an independent copy of the facts."""
    files = resources.files(KAFKA_PYTHON_SCHEMAS)
    checked = 0
    for entry in files.iterdir():
        if not entry.name.endswith("Request.json"):
            continue
        facts = _kafka_file_facts(entry.read_text(encoding="utf-8"))
        low, high = facts["validVersions"]
        if facts.get("latestVersionUnstable"):
            high -= 1
        if facts["apiKey"] == 0:
            low = 0  # advertised from v0 (see the table's accepted_min)
        assert advertised("4.3")[facts["apiKey"]] == (low, high), entry.name
        checked += 1
    assert checked > 40


def _kafka_file_facts(text: str) -> dict:
    """apiKey, validVersions and latestVersionUnstable of a Kafka message file (JSON with // comments)."""
    head = re.sub(r'("(?:[^"\\]|\\.)*")|//[^\n]*', lambda m: m.group(1) or "", text).split('"fields"')[0]
    facts = {}
    for name in ("apiKey", "validVersions", "latestVersionUnstable"):
        match = re.search(rf'"{name}"\s*:\s*("[^"]*"|\w+)', head)
        if match:
            facts[name] = json.loads(match.group(1))
    low, _, high = facts["validVersions"].partition("-")
    facts["validVersions"] = (int(low), int(high or low))
    return facts


def test_unknown_release_is_refused():
    with pytest.raises(UnknownRelease, match="known: 2.8, 3.9, 4.0, 4.1, 4.3"):
        advertised("3.0")


# --- the emulated registry ------------------------------------------------------------------------------------

async def _answer(ctx, request):
    return "answered"


def test_registry_intersects_ranges_drops_what_the_release_lacks_and_never_adds():
    ours = {3: handler_module(3, _answer, min_version=1, max_version=12),   # Metadata: 2.8 has 0-11
            68: handler_module(68, _answer, max_version=0),                 # ConsumerGroupHeartbeat: not in 2.8
            18: handler_module(18, _answer, max_version=4)}                 # ApiVersions: 2.8 has 0-3
    emulated = emulated_registry(ours, "2.8")
    assert {key: (m.MIN_VERSION, m.MAX_VERSION) for key, m in emulated.items()} == {3: (1, 11), 18: (0, 3)}
    assert emulated[3].handle is ours[3].handle  # the same handler, only the range changes
    assert 0 in advertised("2.8") and 0 not in emulated  # Kafka's Produce, which this registry does not serve


def test_registry_of_every_release_keeps_the_declared_handlers():
    for release in RELEASES:
        emulated = emulated_registry(default_registry(), release)
        assert set(emulated) <= set(default_registry()) & set(advertised(release))
        for key, stand_in in emulated.items():
            assert stand_in.module is default_registry()[key]
            low, high = advertised(release)[key]
            assert low <= stand_in.MIN_VERSION <= stand_in.MAX_VERSION <= high


def test_produce_below_the_accepted_version_is_refused_by_the_stand_in():
    emulated = emulated_registry({0: handler_module(0, _answer)}, "4.0")
    produce = emulated[0]
    assert (produce.MIN_VERSION, produce.MAX_VERSION) == (0, 12)

    class Ctx:
        api_version = 2

    with pytest.raises(RefusedVersion):
        asyncio.run(produce.handle(Ctx(), None))
    Ctx.api_version = 3
    assert asyncio.run(produce.handle(Ctx(), None)) == "answered"


@async_test
async def test_a_served_connection_advertises_the_release_and_refuses_the_rest(tmp_path: Path):
    """Through the real server: ApiVersions lists Kafka 2.8's ranges of what we serve; a version 2.8 lacks (Metadata
    v12) closes the connection like any unserved version; ApiVersions v4 gets UNSUPPORTED_VERSION with 2.8's range."""
    emulated = emulated_registry(default_registry(), "2.8")
    async with running_server(tmp_path, emulated) as (_server, port):
        client = await RawClient.connect(port)
        hello = ApiVersionsRequest(client_software_name="emulation-test", client_software_version="1")
        await client.send(hello, version=3, correlation_id=1)
        _header, body = await client.read_response(18, 3)
        listed = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        await client.send(MetadataRequest(topics=[]), version=11, correlation_id=2)
        _header, metadata = await client.read_response(3, 11)
        await client.send(MetadataRequest(topics=[]), version=12, correlation_id=3)
        refused = await client.closed_by_server()
        await client.close()

        newer = await RawClient.connect(port)
        await newer.send(hello, version=4, correlation_id=4)
        _header, too_new = await newer.read_response(18, 0)
        await newer.close()

    assert listed == {key: (m.MIN_VERSION, m.MAX_VERSION) for key, m in emulated.items()}
    assert listed[3] == (0, 11) and listed[0] == (0, 9) and listed[18] == (0, 3)
    assert metadata.brokers, "v11 is served"
    assert refused
    assert too_new.error_code == 35 and [(k.api_key, k.min_version, k.max_version) for k in too_new.api_keys] == [
        (18, 0, 3)]


@async_test
async def test_produce_v2_to_an_emulated_kafka_4_closes_the_connection(tmp_path: Path):
    emulated = emulated_registry(default_registry(), "4.0")
    async with running_server(tmp_path, emulated) as (_server, port):
        client = await RawClient.connect(port)
        await client.send(ProduceRequest(acks=1, timeout_ms=1000, topic_data=[]), version=2, correlation_id=1)
        refused = await client.closed_by_server()
        await client.close()
        accepted = await RawClient.connect(port)
        await accepted.send(ProduceRequest(acks=1, timeout_ms=1000, topic_data=[]), version=3, correlation_id=2)
        _header, body = await accepted.read_response(0, 3)
        await accepted.close()

    assert refused
    assert body.responses == []


# --- feature levels ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("release, expected", [
    ("2.8", {}),                                                            # no transaction.version at all
    ("3.9", {"transaction.version": FeatureLevels(0, 0, 0)}),              # levels 1-2 not production-ready
    ("4.0", {"transaction.version": FeatureLevels(0, 2, 2)}),
    ("4.1", {"transaction.version": FeatureLevels(0, 2, 2)}),
    ("4.3", {"transaction.version": FeatureLevels(0, 2, 2)}),
])
def test_each_release_says_which_transaction_version_it_supports_and_finalizes(release, expected):
    assert feature_levels(release) == expected
    assert finalized_transaction_version(release) == (expected["transaction.version"].finalized if expected else 0)
    assert "features" in _document(release)["source"], "the table says where its feature levels come from"


@pytest.mark.parametrize("release", RELEASES)
def test_a_release_without_transactions_v2_advertises_no_transactions_v2_versions(release):
    """The first versions of transactions v2 (Produce 12, EndTxn 5, TxnOffsetCommit 5) appear exactly in the
    releases that finalize transaction.version 2: Kafka's own history, checked across the table."""
    api = advertised(release)
    tv2 = finalized_transaction_version(release) >= 2
    assert (api[0][1] >= 12, api[26][1] >= 5, api[28][1] >= 5) == (tv2, tv2, tv2)


@pytest.mark.parametrize("release, level", [(None, 2), ("2.8", 0), ("3.9", 0), ("4.0", 2)])
@async_test
async def test_the_runtime_finalizes_the_emulated_releases_level(tmp_path: Path, release, level):
    properties = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data")}
    runtime = ClusterRuntime(BrokerConfig(properties), **toolkit_for(emulate=release).runtime_options())
    await runtime.start()
    try:
        assert runtime.broker.finalized_transaction_version == level
        assert release_of(runtime.handlers) == release
    finally:
        await runtime.stop()
