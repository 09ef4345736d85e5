"""Our schema files state the same protocol facts as Apache Kafka's message definitions.

kafka-python 3.0.12 bundles Kafka 4.3's JSON message definitions; they are the reference. For every schema of ours
whose `name` has a counterpart there, every wire-relevant fact must be equal: the message's apiKey, type,
flexibleVersions, latestVersionUnstable and validVersions, and for every field, recursively and in order (common
structs included), its name, type, versions, nullableVersions, taggedVersions, tag, default, ignorable, mapKey,
entityType, field-level flexibleVersions and zeroCopy. Defaults are compared by meaning ("0x7fffffff" equals
2147483647, true equals "true", an absent int default equals "0"). Each difference is reported with its path
(`Message.Field.SubField.fact`). `about` texts are prose and are not compared; neither is `listeners` (which
server roles accept an API: routing, not wire format).

One deliberate exception, the validVersions lower bound: Kafka 4.0 (KIP-896) removed the oldest versions of several
APIs, but Kafka 3.9 still accepted every API from version 0 and old clients still send them, so our request and
response schemas start at version 0 everywhere; the upper bound must match Kafka's. Header and data schemas carry no
such exception.

Schemas without a counterpart (the KIP-848 consumer group and KIP-932 share group APIs kafka-python does not ship,
the internal-topic records) are only checked to load; the share group APIs start at version 1 as Kafka 4.1+ does
(version 0 was 4.0's early access). Finally, the set of API keys our request/response schemas define is exactly the
list the broker is specified to serve.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import kafka.protocol
import pytest

from compatbroker.protocol.schema import SCHEMA_DIR, load_schema_file

KAFKA_DIR = Path(kafka.protocol.__file__).parent / "schemas" / "resources"
EXPECTED_API_KEYS = {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28,
                     29, 30, 31, 32, 33, 34, 35, 36, 37, 42, 43, 44, 45, 46, 47, 50, 51, 55, 60, 61, 65, 66, 68, 69, 71,
                     72, 74, 75, 76, 77, 78, 79, 90, 91, 92}
IGNORED_KEYS = {"about", "listeners"}
INT_TYPES = {"int8", "int16", "int32", "int64", "uint16", "uint32"}
_COMMENT = re.compile(r"(?m)^\s*//.*$")


def load_json(path: Path) -> dict:
    """Kafka's files carry `//` comment lines, which JSON does not allow."""
    return json.loads(_COMMENT.sub("", path.read_text()))


def by_name(directory: Path) -> dict[str, Path]:
    return {load_json(p)["name"]: p for p in sorted(directory.glob("*.json"))}


OURS = by_name(SCHEMA_DIR)
KAFKA = by_name(KAFKA_DIR)
SHARED = sorted(set(OURS) & set(KAFKA))
OURS_ONLY = sorted(set(OURS) - set(KAFKA))


# ---- normalisation: one canonical value per fact ---------------------------------------------------------------

def versions(text):
    """(lo, hi) with hi None for open ranges; None for "none" or an absent range."""
    if text is None:
        return None
    text = str(text).strip()
    if text == "none":
        return None
    if text.endswith("+"):
        return (int(text[:-1]), None)
    lo, _, hi = text.partition("-")
    return (int(lo), int(hi or lo))


def default(field: dict):
    """The default a field takes when the message does not carry it, whatever way the file spells it."""
    raw = field.get("default")
    kind = field["type"]
    if raw == "null":
        return None
    if kind in INT_TYPES:
        return 0 if raw in (None, "") else (raw if isinstance(raw, int) else int(str(raw), 0))
    if kind == "bool":
        return raw is True or str(raw).lower() == "true"
    if kind == "float64":
        return 0.0 if raw in (None, "") else float(raw)
    if kind == "string":
        return "" if raw is None else str(raw)
    return "" if raw is None else raw  # arrays, structs, bytes, uuid: absent or the literal text


FIELD_FACTS = {
    "name": lambda f: f["name"],
    "type": lambda f: f["type"],
    "versions": lambda f: versions(f["versions"]),
    "nullableVersions": lambda f: versions(f.get("nullableVersions")),
    "taggedVersions": lambda f: versions(f.get("taggedVersions")),
    "tag": lambda f: f.get("tag"),
    "default": default,
    "ignorable": lambda f: bool(f.get("ignorable", False)),
    "mapKey": lambda f: bool(f.get("mapKey", False)),
    "entityType": lambda f: f.get("entityType"),
    "flexibleVersions": lambda f: versions(f.get("flexibleVersions")) if "flexibleVersions" in f else "inherited",
    "zeroCopy": lambda f: bool(f.get("zeroCopy", False)),
}
FIELD_KEYS = set(FIELD_FACTS) | {"fields"} | IGNORED_KEYS

MESSAGE_FACTS = {
    "apiKey": lambda m: m.get("apiKey"),
    "type": lambda m: m["type"],
    "flexibleVersions": lambda m: versions(m.get("flexibleVersions", "none")),
    "latestVersionUnstable": lambda m: bool(m.get("latestVersionUnstable", False)),
    "deprecatedVersions": lambda m: versions(m.get("deprecatedVersions")),
}
MESSAGE_KEYS = set(MESSAGE_FACTS) | {"name", "validVersions", "fields", "commonStructs"} | IGNORED_KEYS


# ---- comparison ------------------------------------------------------------------------------------------------

def compare_fields(ours: list, theirs: list, path: str, diffs: list):
    names_ours = [f["name"] for f in ours]
    names_theirs = [f["name"] for f in theirs]
    if names_ours != names_theirs:
        diffs.append(f"{path}: field order/names {names_ours} != Kafka's {names_theirs}")
    theirs_by_name = {f["name"]: f for f in theirs}
    for field in ours:
        other = theirs_by_name.get(field["name"])
        if other is not None:
            compare_field(field, other, f"{path}.{field['name']}", diffs)


def compare_field(ours: dict, theirs: dict, path: str, diffs: list):
    for side, raw in (("ours", ours), ("Kafka's", theirs)):
        unknown = set(raw) - FIELD_KEYS
        if unknown:
            diffs.append(f"{path}: {side} has keys this test does not know: {sorted(unknown)}")
    for fact, get in FIELD_FACTS.items():
        a, b = get(ours), get(theirs)
        if a != b:
            diffs.append(f"{path}.{fact}: ours {a!r} != Kafka's {b!r}")
    if ("fields" in ours) != ("fields" in theirs):
        diffs.append(f"{path}: one side defines the struct inline, the other refers to a common struct")
    elif "fields" in ours:
        compare_fields(ours["fields"], theirs["fields"], path, diffs)


def compare_valid_versions(ours: dict, theirs: dict, name: str, diffs: list):
    mine, kafka = versions(ours["validVersions"]), versions(theirs["validVersions"])
    if ours["type"] in ("request", "response"):
        # KIP-896: Kafka 4.0 dropped the oldest versions; we keep serving them from 0, as Kafka 3.9 did.
        if mine[0] != 0:
            diffs.append(f"{name}.validVersions: ours starts at {mine[0]}, must start at 0")
        if mine[1] != kafka[1]:
            diffs.append(f"{name}.validVersions: ours ends at {mine[1]} != Kafka's {kafka[1]}")
    elif mine != kafka:
        diffs.append(f"{name}.validVersions: ours {ours['validVersions']!r} != Kafka's {theirs['validVersions']!r}")


def compare_messages(ours: dict, theirs: dict) -> list[str]:
    name = ours["name"]
    diffs: list[str] = []
    for side, raw in (("ours", ours), ("Kafka's", theirs)):
        unknown = set(raw) - MESSAGE_KEYS
        if unknown:
            diffs.append(f"{name}: {side} has top-level keys this test does not know: {sorted(unknown)}")
    for fact, get in MESSAGE_FACTS.items():
        a, b = get(ours), get(theirs)
        if a != b:
            diffs.append(f"{name}.{fact}: ours {a!r} != Kafka's {b!r}")
    compare_valid_versions(ours, theirs, name, diffs)
    compare_fields(ours["fields"], theirs["fields"], name, diffs)
    common_ours = {s["name"]: s for s in ours.get("commonStructs", [])}
    common_theirs = {s["name"]: s for s in theirs.get("commonStructs", [])}
    if list(common_ours) != list(common_theirs):
        diffs.append(f"{name}.commonStructs: ours {list(common_ours)} != Kafka's {list(common_theirs)}")
    for struct_name in common_ours.keys() & common_theirs.keys():
        a, b = common_ours[struct_name], common_theirs[struct_name]
        path = f"{name}.{struct_name}"
        if versions(a["versions"]) != versions(b["versions"]):
            diffs.append(f"{path}.versions: ours {a['versions']!r} != Kafka's {b['versions']!r}")
        compare_fields(a["fields"], b["fields"], path, diffs)
    return diffs


# ---- tests -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", SHARED)
def test_schema_states_kafkas_facts(name):
    diffs = compare_messages(load_json(OURS[name]), load_json(KAFKA[name]))
    assert not diffs, f"{len(diffs)} difference(s) from Kafka's {name}:\n" + "\n".join(diffs)


@pytest.mark.parametrize("name", OURS_ONLY)
def test_schema_without_a_kafka_python_counterpart_loads(name):
    spec = load_schema_file(OURS[name])
    assert spec.name == name and list(spec.versions())


def test_api_keys_are_exactly_the_served_list():
    requests, responses = {}, {}
    for name, path in OURS.items():
        raw = load_json(path)
        if raw["type"] == "request":
            requests[raw["apiKey"]] = name
        elif raw["type"] == "response":
            responses[raw["apiKey"]] = name
    assert set(requests) == EXPECTED_API_KEYS, (
        f"missing {sorted(EXPECTED_API_KEYS - set(requests))}, unexpected {sorted(set(requests) - EXPECTED_API_KEYS)}")
    assert set(responses) == set(requests)
    for key, name in requests.items():
        assert responses[key] == name.removesuffix("Request") + "Response"


def test_the_comparison_catches_each_kind_of_difference():
    """Guards the checker itself: a copy of Kafka's file with one fact changed must be reported at its path."""
    theirs = load_json(KAFKA["FetchRequest"])
    assert compare_messages(json.loads(json.dumps(theirs)) | {"validVersions": "0-18"}, theirs) == []
    mutations = {
        "FetchRequest.Topics.Partitions.FetchOffset.type": lambda m: _field(m, "Topics", "Partitions",
                                                                            "FetchOffset").update(type="int32"),
        "FetchRequest.ReplicaState.tag": lambda m: _field(m, "ReplicaState").update(tag=9),
        "FetchRequest.MaxBytes.default": lambda m: _field(m, "MaxBytes").update(default="0x7ffffffe"),
        "FetchRequest.flexibleVersions": lambda m: m.update(flexibleVersions="11+"),
        "FetchRequest.validVersions": lambda m: m.update(validVersions="0-17"),
    }
    for expected_path, mutate in mutations.items():
        ours = json.loads(json.dumps(theirs)) | {"validVersions": "0-18"}
        mutate(ours)
        diffs = compare_messages(ours, theirs)
        assert len(diffs) == 1 and diffs[0].startswith(expected_path), (expected_path, diffs)
    assert default({"type": "int32", "default": "0x7fffffff"}) == default({"type": "int32", "default": 2147483647})
    assert default({"type": "bool", "default": True}) == default({"type": "bool", "default": "true"})


def _field(message: dict, *names: str) -> dict:
    fields = message["fields"]
    found = None
    for name in names:
        found = next(f for f in fields if f["name"] == name)
        fields = found.get("fields", [])
    return found
