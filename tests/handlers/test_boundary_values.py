"""Every handler, at every version it serves, answers every integer value its request schema admits.

For each API of the handler registry and each of its versions, a baseline request is built from the schema (one
element in every array, names of a real topic and group, Kafka's defaults or a valid value in every field); then
each integer field in turn (int8/16/32/64 and uint16/32, including the elements of integer arrays) takes the
boundary values of its type (min, -1, 0, 1, max) while every other field keeps its baseline. Each request goes
through the codec as a client of that version would send it, the handler runs against a real Broker (with its
coordinator loaded), and the test asserts that no exception escapes, that it answers within a bound, and that the
response encodes at that version. (Request schemas have no varint fields: varints live inside record batches.)

A failure lists every case that broke, as "API vN field=value: what happened".
"""
from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from compatbroker.coordinator import coordinator_of
from compatbroker.handlers import default_registry
from compatbroker.protocol import API_KEYS, encode_response_chunks
from compatbroker.protocol.schema import FieldSpec, StructSpec, load_schemas, snake_case
from compatbroker.protocol.wire import ZERO_UUID

from tests.coordinator.membership_support import assignment, subscription

from .helpers import as_received, batch, context

INT_TYPES = {"int8": (-2**7, 2**7 - 1), "int16": (-2**15, 2**15 - 1), "int32": (-2**31, 2**31 - 1),
             "int64": (-2**63, 2**63 - 1), "uint16": (0, 2**16 - 1), "uint32": (0, 2**32 - 1)}
ANSWER_BOUND_S = 10  # a handler that has not answered by then is wedged (no baseline waits anywhere near it)
TOPIC = "boundary"
PARTITIONS = 2

# Baseline values where the schema's default (or 0) would make the whole request invalid, by field.
INT_BASELINE = {"acks": 1, "timeout_ms": 5000, "partition_max_bytes": 1 << 20, "session_timeout_ms": 10_000,
                "rebalance_timeout_ms": 10_000, "num_partitions": 1, "replication_factor": 1,
                "count": PARTITIONS + 1, "resource_type": 2, "transaction_timeout_ms": 60_000, "replica_id": -1,
                "timestamp": -1, "resource_type_filter": 2, "operation": 3, "permission_type": 3}
STRING_BASELINE = {"protocol_type": "consumer", "protocol_name": "range", "client_software_name": "boundary",
                   "client_software_version": "1.0", "transactional_id": None}
ARRAY_STRING_BASELINE = {"configuration_keys": "retention.ms", "states_filter": "Empty", "types_filter": "classic"}
# Values Kafka's request parser refuses by closing the connection (the handlers raise CloseConnection): the ACL
# enums' UNKNOWN code.
CLOSES_CONNECTION = {(api, field, 0) for api, fields in {
    "CreateAclsRequest": ("resource_type", "resource_pattern_type", "operation", "permission_type"),
    "DescribeAclsRequest": ("resource_type_filter", "pattern_type_filter", "operation", "permission_type"),
    "DeleteAclsRequest": ("resource_type_filter", "pattern_type_filter", "operation", "permission_type"),
}.items() for field in fields}
# Arrays whose presence changes the meaning of the fields beside them: cases are made both with one element and
# empty, each with the counts that make that baseline valid.
OPTIONAL_ARRAYS = {("CreatableTopic", "Assignments"): {"num_partitions": -1, "replication_factor": -1},
                   ("CreatePartitionsTopic", "Assignments"): {}}


@dataclass(frozen=True)
class Case:
    path: tuple  # attribute names and list indexes from the request body to the field
    value: int

    def __str__(self):
        return ".".join(str(step) for step in self.path) + f"={self.value}"


class Baseline:
    """Builds the baseline request of one API version against the broker's current state."""

    def __init__(self, broker, spec, version: int, *, with_optional_arrays: bool, serial: Iterator[int]):
        self.broker, self.spec, self.version = broker, spec, version
        self.with_optional_arrays = with_optional_arrays
        self.serial = serial
        self.overrides = {} if not with_optional_arrays else {
            name: value for (owner, _), values in OPTIONAL_ARRAYS.items() if owner in spec.structs
            for name, value in values.items()}

    def build(self):
        request_cls = API_KEYS[self.spec.api_key][0]
        number = next(self.serial)
        self.group = f"group-{number}"  # a fresh group per case: no member of an earlier case waits in it
        self.new_topic = f"created-{number}"
        return self._struct(self.spec.struct, request_cls, request_cls)

    def _struct(self, struct: StructSpec, cls, request_cls):
        values = {}
        for field in struct.fields:
            if self.version in field.versions:
                values[snake_case(field.name)] = self._field(struct, field, request_cls)
        return cls(**values)

    def _field(self, struct: StructSpec, field: FieldSpec, request_cls):
        if field.struct is not None:
            element = self._struct(field.struct, getattr(request_cls, field.struct.name), request_cls)
            if not field.is_array:
                return element
            if (struct.name, field.name) in OPTIONAL_ARRAYS and not self.with_optional_arrays:
                return None if self.version in field.nullable else []
            return [element]
        value = self._primitive(struct, field)
        return [value] if field.is_array else value

    def _primitive(self, struct: StructSpec, field: FieldSpec):
        name, kind = snake_case(field.name), field.element_type
        entity = field.raw.get("entityType")
        if kind in INT_TYPES:
            if entity == "brokerId" and field.is_array:
                return self.broker.node_id
            if name in self.overrides:
                return self.overrides[name]
            if name in INT_BASELINE:
                return INT_BASELINE[name]
            return int(field.default, 0) if field.default not in (None, "null") else 0
        if kind == "string":
            return self._string(struct, field, name, entity)
        if kind == "uuid":
            info = self.broker.topic(TOPIC)
            by_name_too = struct.name == "DeleteTopicState"  # both a name and an id is INVALID_REQUEST there
            return info.topic_id if name == "topic_id" and info is not None and not by_name_too else ZERO_UUID
        if kind == "records":
            return batch(b"boundary")
        if kind == "bytes":  # JoinGroup's protocol metadata, SyncGroup's assignments: the consumer protocol's
            return subscription(TOPIC) if name == "metadata" else assignment({TOPIC: [0]})
        if kind == "bool":  # validate-only where there is one: CreateTopics/Partitions make nothing at baseline
            return name == "validate_only" or (field.default == "true")
        raise AssertionError(f"{kind} is not a primitive of the schemas")

    def _string(self, struct: StructSpec, field: FieldSpec, name: str, entity: str | None):
        if entity == "topicName":
            return self.new_topic if struct.name == "CreatableTopic" else TOPIC
        if entity == "groupId" or name in ("key", "coordinator_keys"):
            return self.group
        if entity == "transactionalId":  # Produce's is nullable: null keeps its batch non-transactional
            return None if self.version in field.nullable else "boundary-tx"
        if name == "resource_name":
            return TOPIC
        if struct.name == "JoinGroupRequestProtocol":
            return "range"
        if struct.name in ("CreatableTopicConfig", "AlterableConfig"):
            return "retention.ms" if name == "name" else "86400000"
        if name in STRING_BASELINE:
            return STRING_BASELINE[name]
        if field.is_array:  # the elements of a list of strings are never null
            return ARRAY_STRING_BASELINE.get(name, "")
        if field.default == "null" or (field.default is None and self.version in field.nullable):
            return None
        return field.default or ""


def int_fields(struct: StructSpec, version: int, *, with_optional_arrays: bool, prefix=()) -> Iterator[tuple]:
    """(path, type) of every integer field of `struct` present at `version` in the baseline."""
    for field in struct.fields:
        if version not in field.versions:
            continue
        path = prefix + (snake_case(field.name),)
        if field.struct is not None:
            if (struct.name, field.name) in OPTIONAL_ARRAYS and not with_optional_arrays:
                continue
            inner = path + (0,) if field.is_array else path
            yield from int_fields(field.struct, version, with_optional_arrays=with_optional_arrays, prefix=inner)
        elif field.element_type in INT_TYPES:
            yield (path + (0,) if field.is_array else path), field.element_type


def boundary_values(kind: str) -> list[int]:
    low, high = INT_TYPES[kind]
    return sorted({value for value in (low, -1, 0, 1, high) if low <= value <= high})


def with_value(request, path: tuple, value: int):
    target = request
    for step in path[:-1]:
        target = target[step] if isinstance(step, int) else getattr(target, step)
    if isinstance(path[-1], int):
        target[path[-1]] = value
    else:
        setattr(target, path[-1], value)
    return request


def variants(spec) -> list[bool]:
    has_optional = any(struct.name == owner and any(f.name == name for f in struct.fields)
                       for owner, name in OPTIONAL_ARRAYS for struct in spec.structs.values())
    return [True, False] if has_optional else [True]


def cases_of(spec, version: int) -> Iterator[tuple[bool, Case]]:
    for with_arrays in variants(spec):
        for path, kind in int_fields(spec.struct, version, with_optional_arrays=with_arrays):
            for value in boundary_values(kind):
                yield with_arrays, Case(path, value)


SPECS = load_schemas()
REGISTRY = default_registry()
APIS = [(key, API_KEYS[key][0].NAME) for key in REGISTRY]


def test_the_cases_stay_bounded():
    total = sum(1 for key, name in APIS for version in range(REGISTRY[key].MIN_VERSION, REGISTRY[key].MAX_VERSION + 1)
                for _ in cases_of(SPECS[name], version))
    assert 1000 < total < 5000, total


# --- running them ---------------------------------------------------------------------------------------------------

def prepare(broker) -> None:
    """The topic every baseline names, with a record in each partition (DeleteTopics deletes it: made again)."""
    if broker.topic(TOPIC) is None:
        broker.create_topic(TOPIC, PARTITIONS)
        for partition in range(PARTITIONS):
            broker.get_log(TOPIC, partition).append(batch(b"a", b"b"), leader_epoch=0, now_ms=broker.now_ms())


async def run_case(broker, api_key: int, version: int, request) -> str | None:
    """What went wrong with this request, or None when it was answered and the answer encodes."""
    try:
        body = as_received(api_key, version, request)
    except Exception as exc:  # noqa: BLE001 - the value cannot be sent by a client: not a case
        return f"could not be encoded as a request ({exc})"
    handler = REGISTRY[api_key]
    try:
        response = await asyncio.wait_for(handler.handle(context(broker, api_key, version), body), ANSWER_BOUND_S)
    except asyncio.TimeoutError:
        return f"no answer within {ANSWER_BOUND_S} s"
    except Exception as exc:  # noqa: BLE001 - what the test looks for
        return f"handler raised {type(exc).__name__}: {exc}"
    if response is None:
        return None  # Produce with acks=0: no response, as in Kafka
    try:
        encode_response_chunks(api_key, version, 1, response)
    except Exception as exc:  # noqa: BLE001 - what the test looks for
        return f"response does not encode: {type(exc).__name__}: {exc}"
    return None


@pytest.mark.parametrize("api_key, name", APIS, ids=[name.removesuffix("Request") for _, name in APIS])
async def test_every_int_field_at_its_boundaries(broker, api_key, name):
    coordinator = coordinator_of(broker)
    await coordinator.start()
    spec, handler = SPECS[name], REGISTRY[api_key]
    serial = itertools.count()
    failures = []
    try:
        for version in range(handler.MIN_VERSION, handler.MAX_VERSION + 1):
            for with_arrays, case in cases_of(spec, version):
                prepare(broker)
                baseline = Baseline(broker, spec, version, with_optional_arrays=with_arrays, serial=serial)
                problem = await run_case(broker, api_key, version, with_value(baseline.build(), case.path,
                                                                               case.value))
                if (name, case.path[-1], case.value) in CLOSES_CONNECTION:
                    if not (problem or "").startswith("handler raised CloseConnection"):
                        failures.append(f"{name} v{version} {case}: not refused by closing ({problem})")
                elif problem is not None:
                    failures.append(f"{name} v{version} {case}: {problem}")
    finally:
        await coordinator.stop()
    assert not failures, f"{len(failures)} case(s) failed:\n" + "\n".join(failures)


async def test_every_baseline_is_answered_without_a_request_error(broker):
    """Every baseline request is answered, and its answer encodes (the cases above start from these)."""
    coordinator = coordinator_of(broker)
    await coordinator.start()
    refused = []
    serial = itertools.count()
    try:
        for api_key, name in APIS:
            spec, handler = SPECS[name], REGISTRY[api_key]
            for version in range(handler.MIN_VERSION, handler.MAX_VERSION + 1):
                prepare(broker)
                baseline = Baseline(broker, spec, version, with_optional_arrays=True, serial=serial)
                problem = await run_case(broker, api_key, version, baseline.build())
                if problem is not None:
                    refused.append(f"{name} v{version}: {problem}")
    finally:
        await coordinator.stop()
    assert not refused, "\n".join(refused)
