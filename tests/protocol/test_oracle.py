"""Our codecs agree with an independent one: kafka-python's, on bytes and on values, at every version it covers.

For every (message, version) kafka-python can encode and decode:
  (a) random valid objects (`message_strategy`) that we encode are decoded by kafka-python, which must use up every
      byte, to the same values;
  (b) kafka-python encodes the same values (built from ours field by field), and we decode its bytes to equal
      values and encode them back to the identical bytes.
Whole frames (request and response header plus body) are checked both ways as well, which pins the header version
each API version uses.

kafka-python's codec for a version is its schema-driven class (`kafka.protocol.{admin,consumer,producer,metadata}`,
`kafka.protocol.sasl`, `kafka.protocol.api_header`) when the version is within its bundled file's validVersions, and
otherwise its older hand-written `Struct` (`kafka.protocol.old`), whose fields are positional in schema order.
Fields are matched by position, so kafka-python's renamed fields (its `bitfield` authorized-operations patches) still
pair up. Representations are normalised: kafka-python reads the zero uuid as None and authorized-operation bitmasks
as sets of bit numbers, records as bytes where we give memoryviews.

kafka-python cannot write everything the format allows, so the values handed to it are narrowed first, and only in
these ways: it drops unknown tagged fields when encoding (direction (b) gets none), and it writes and reads structs
inside tagged fields without their own tagged-field section (no unknown tags there in either direction).

The (message, version) pairs neither kafka-python codec covers are listed in UNCOVERED with the reason; a test
asserts the table is exactly the uncovered set, so coverage cannot shrink silently.
"""
from __future__ import annotations

import importlib
import inspect
import io
import pkgutil
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol import api_header, sasl
from kafka.protocol.api_data import ApiData
from kafka.protocol.api_header import ApiHeader
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.old.api import Request as OldRequest
from kafka.protocol.old.api import Response as OldResponse
from kafka.protocol.schemas.fields.struct_array import StructArrayField

from compatbroker.protocol import (API_KEYS, MESSAGES, RequestHeader, decode_message, decode_request,
                                   decode_response, encode_message, encode_request, encode_response)
from compatbroker.protocol.schema import snake_case

from .strategies import all_message_versions, message_strategy, specs

ZERO_UUID = uuid.UUID(int=0)
EXAMPLES = settings(max_examples=10, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _versions(lo, hi):
    return set(range(lo, hi + 1))


# kafka-python's hand-written structs that contradict Kafka's definition of the version, so cannot be an oracle.
BROKEN_OLD_STRUCTS = {
    ("DescribeLogDirsRequest", 0): "kafka.protocol.old's DescribeLogDirsRequest_v0 declares Topics[].Partitions as "
                                   "a single Int32, Kafka's definition (and every client) as []int32",
}

# (message, version) -> why kafka-python cannot check it.
UNCOVERED = {
    ("ConsumerGroupDescribeRequest", 0): "kafka-python has no ConsumerGroupDescribe class",
    ("ConsumerGroupDescribeRequest", 1): "kafka-python has no ConsumerGroupDescribe class",
    ("ConsumerGroupDescribeResponse", 0): "kafka-python has no ConsumerGroupDescribe class",
    ("ConsumerGroupDescribeResponse", 1): "kafka-python has no ConsumerGroupDescribe class",
    ("ConsumerGroupHeartbeatRequest", 0): "kafka-python has no ConsumerGroupHeartbeat class",
    ("ConsumerGroupHeartbeatRequest", 1): "kafka-python has no ConsumerGroupHeartbeat class",
    ("ConsumerGroupHeartbeatResponse", 0): "kafka-python has no ConsumerGroupHeartbeat class",
    ("ConsumerGroupHeartbeatResponse", 1): "kafka-python has no ConsumerGroupHeartbeat class",
    **{(f"{api}{kind}", v): f"kafka-python has no {api} class"
       for api, versions in (("ShareGroupHeartbeat", (1,)), ("ShareGroupDescribe", (1,)), ("ShareFetch", (1, 2)),
                             ("ShareAcknowledge", (1, 2)), ("DescribeShareGroupOffsets", (0, 1)),
                             ("AlterShareGroupOffsets", (0,)), ("DeleteShareGroupOffsets", (0,)))
       for kind in ("Request", "Response") for v in versions},
    **{(f"{api}{kind}", 0): f"kafka-python has no {api} class"
       for api in ("GetTelemetrySubscriptions", "PushTelemetry") for kind in ("Request", "Response")},
    ("WriteTxnMarkersRequest", 0): "below kafka-python's bundled min version 1 and no kafka.protocol.old struct",
    ("WriteTxnMarkersResponse", 0): "below kafka-python's bundled min version 1 and no kafka.protocol.old struct",
    ("AlterReplicaLogDirsRequest", 0): "below kafka-python's bundled min version 1 and no kafka.protocol.old struct",
    ("AlterReplicaLogDirsResponse", 0): "below kafka-python's bundled min version 1 and no kafka.protocol.old struct",
    **BROKEN_OLD_STRUCTS,
    ("GroupMetadataKey", 0): "internal-topic record: kafka-python has no class",
    **{("GroupMetadataValue", v): "internal-topic record: kafka-python has no class" for v in _versions(0, 4)},
    ("OffsetCommitKey", 0): "internal-topic record: kafka-python has no class",
    **{("OffsetCommitValue", v): "internal-topic record: kafka-python has no class" for v in _versions(0, 4)},
    ("TransactionLogKey", 0): "internal-topic record: kafka-python has no class",
    **{("TransactionLogValue", v): "internal-topic record: kafka-python has no class" for v in _versions(0, 1)},
    # KIP-848 / KIP-932 records of __consumer_offsets (types 3-16) and __share_group_state (types 0-1)
    **{(f"{record}{part}", 0): "internal-topic record: kafka-python has no class"
       for record in ("ConsumerGroupMetadata", "ConsumerGroupPartitionMetadata", "ConsumerGroupMemberMetadata",
                      "ConsumerGroupTargetAssignmentMetadata", "ConsumerGroupTargetAssignmentMember",
                      "ConsumerGroupCurrentMemberAssignment", "ConsumerGroupRegularExpression",
                      "ShareGroupPartitionMetadata", "ShareGroupMemberMetadata", "ShareGroupMetadata",
                      "ShareGroupTargetAssignmentMetadata", "ShareGroupTargetAssignmentMember",
                      "ShareGroupCurrentMemberAssignment", "ShareGroupStatePartitionMetadata", "ShareSnapshot",
                      "ShareUpdate")
       for part in ("Key", "Value")},
}


# ---- finding kafka-python's codec for a (message, version) -----------------------------------------------------

def _schema_classes() -> dict[str, type]:
    found = {}
    modules = [sasl, api_header]
    for package in ("admin", "consumer", "producer", "metadata"):
        pkg = importlib.import_module(f"kafka.protocol.{package}")
        modules += [importlib.import_module(f"{pkg.__name__}.{m.name}") for m in pkgutil.iter_modules(pkg.__path__)]
    for module in modules:
        for cls in vars(module).values():
            if (inspect.isclass(cls) and issubclass(cls, (ApiMessage, ApiData, ApiHeader))
                    and getattr(cls, "_json", None) is not None):
                found[cls._json["name"]] = cls
    return found


def _old_classes() -> dict[tuple[str, int], type]:
    found = {}
    old = importlib.import_module("kafka.protocol.old")
    for info in pkgutil.iter_modules(old.__path__):
        module = importlib.import_module(f"kafka.protocol.old.{info.name}")
        for cls_name, cls in vars(module).items():
            if (inspect.isclass(cls) and issubclass(cls, (OldRequest, OldResponse)) and "_v" in cls_name
                    and isinstance(getattr(cls, "API_VERSION", None), int)):
                found[(cls_name.rsplit("_v", 1)[0], cls.API_VERSION)] = cls
    return found


SCHEMA_CLASSES = _schema_classes()
OLD_CLASSES = _old_classes()


def bundled_versions(kp_cls) -> range:
    lo, hi = (kp_cls._json["validVersions"] + "-").split("-")[:2]
    return range(int(lo), int(hi or lo) + 1)


def codec_for(name: str, version: int):
    kp_cls = SCHEMA_CLASSES.get(name)
    if kp_cls is not None and version in bundled_versions(kp_cls):
        return SchemaCodec(name, version, kp_cls)
    old_cls = OLD_CLASSES.get((name, version))
    if old_cls is not None and (name, version) not in BROKEN_OLD_STRUCTS:
        return OldStructCodec(name, version, old_cls)
    return None


# ---- our side: values in a comparable form ---------------------------------------------------------------------

class Walk:
    """What one (message, version) looks like: which fields are present and tagged, and how to build defaults."""

    def __init__(self, name: str, version: int):
        self.spec = specs()[name]
        self.cls = MESSAGES[name]
        self.version = version
        self.flexible = version in self.spec.flexible

    def present(self, struct):
        return [(i, f) for i, f in enumerate(struct.fields) if self.version in f.versions]

    def tagged(self, f) -> bool:
        return self.flexible and self.version in f.tagged

    def struct_cls(self, struct):
        return self.cls if struct is self.spec.struct else getattr(self.cls, struct.name)

    def default(self, struct, f):
        return getattr(self.struct_cls(struct)(), snake_case(f.name))

    def norm(self, struct, obj) -> dict:
        """Our object as {attribute: plain value} for the fields this version has, plus unknown tags."""
        out = {}
        for _, f in self.present(struct):
            out[snake_case(f.name)] = self.norm_value(f, getattr(obj, snake_case(f.name)))
        if self.flexible and obj.unknown_tagged_fields:
            out["_unknown"] = {tag: bytes(v) for tag, v in obj.unknown_tagged_fields.items()}
        return out

    def norm_value(self, f, value):
        if value is None:
            return None
        if f.is_array:
            return [self.norm_element(f, v) for v in value]
        return self.norm_element(f, value)

    def norm_element(self, f, value):
        if f.struct is not None:
            return self.norm(f.struct, value)
        if isinstance(value, (memoryview, bytearray)):
            return bytes(value)
        return value

    def narrowed(self, struct, obj, drop_unknown: bool):
        """A copy of `obj` that kafka-python can represent: unknown tags dropped everywhere (`drop_unknown`) or
        only inside tagged fields, whose nested structs kafka-python writes without a tagged-field section."""
        values = {}
        for _, f in self.present(struct):
            value = getattr(obj, snake_case(f.name))
            if f.struct is not None and value is not None:
                inner_drop = drop_unknown or self.tagged(f)
                if f.is_array:
                    value = [self.narrowed(f.struct, v, inner_drop) for v in value]
                else:
                    value = self.narrowed(f.struct, value, inner_drop)
            values[snake_case(f.name)] = value
        tags = None if drop_unknown else obj.unknown_tagged_fields
        return self.struct_cls(struct)(**values, unknown_tagged_fields=tags)


# ---- kafka-python's side ---------------------------------------------------------------------------------------

def _bits(value: int) -> set[int]:
    return {b for b in range(32) if (value & 0xFFFFFFFF) >> b & 1}


def _from_bits(bits) -> int:
    if bits is None:  # kafka-python's reading of a bare bit 31: "not requested" (-2**31)
        bits = {31}
    value = sum(1 << b for b in bits)
    return value - (1 << 32) if value >= 1 << 31 else value


def _subfields(kp_field):
    return (kp_field.array_of if isinstance(kp_field, StructArrayField) else kp_field)._fields


def _paired(walk, struct, kp_fields):
    """Our fields present at this version, each with kafka-python's field at the same position."""
    assert len(kp_fields) == len(struct.fields), f"{struct.name}: kafka-python has other fields"
    pairs = [(f, kp_fields[i]) for i, f in walk.present(struct)]
    for f, kf in pairs:  # kafka-python renames only the fields it patches into bitfields
        assert kf._name == f.name or kf.type_str == "bitfield", (struct.name, f.name, kf._name)
    return pairs


class SchemaCodec:
    """kafka-python's schema-driven class: fields paired with ours by position, values converted both ways."""

    def __init__(self, name, version, kp_cls):
        self.walk = Walk(name, version)
        self.kp_cls = kp_cls
        self.version = version
        self.flexible = self.walk.flexible
        self.kind = "header" if issubclass(kp_cls, ApiHeader) else "data" if issubclass(kp_cls, ApiData) else "api"

    # our object -> kafka-python object
    def to_kp(self, obj):
        kwargs = self._kwargs(self.walk.spec.struct, self.kp_cls._struct._fields, obj)
        if self.kind == "api":
            return self.kp_cls(version=self.version, **kwargs)
        return self.kp_cls(**kwargs)

    def _kwargs(self, struct, kp_fields, obj):
        kwargs = {}
        for f, kf in _paired(self.walk, struct, kp_fields):
            value = getattr(obj, snake_case(f.name))
            if self.walk.tagged(f) and value == self.walk.default(struct, f):
                continue  # neither codec writes a tagged field at its default
            kwargs[kf.name] = self._kp_value(f, kf, value)
        return kwargs

    def _kp_value(self, f, kf, value):
        if value is None:
            return None
        if f.struct is not None:
            make = kf.data_class
            sub = _subfields(kf)
            if f.is_array:
                return [make(**self._kwargs(f.struct, sub, v)) for v in value]
            return make(**self._kwargs(f.struct, sub, value))
        if kf.type_str == "bitfield":
            return _bits(value)
        if f.is_array:
            return list(value)
        return bytes(value) if isinstance(value, memoryview) else value

    def encode(self, kp_obj) -> bytes:
        if self.kind == "header":
            return kp_obj.encode(flexible=self.flexible)
        if self.kind == "data":
            return kp_obj.encode(version=self.version, header=False)
        return kp_obj.encode(version=self.version)

    # bytes -> comparable values, via kafka-python
    def decode(self, data: bytes) -> dict:
        if self.kind == "api":
            # The compiled decoder ApiMessage.decode uses, called directly to learn how many bytes it consumed.
            decode = self.kp_cls._struct.compiled_decode_from(self.version, compact=self.flexible,
                                                               tagged=self.flexible, data_class=self.kp_cls)
            obj, pos = decode(memoryview(data), 0)
        else:
            stream = io.BytesIO(data)
            if self.kind == "header":
                obj = self.kp_cls.decode(stream, flexible=self.flexible)
            else:
                obj = self.kp_cls.decode(stream, version=self.version, header=False)
            pos = stream.tell()
        assert pos == len(data), f"kafka-python read {pos} of {len(data)} bytes"
        return self.norm(obj)

    def norm(self, obj) -> dict:
        return self._norm(self.walk.spec.struct, self.kp_cls._struct._fields, obj)

    def _norm(self, struct, kp_fields, obj):
        out = {}
        present_tags = obj.tags or set()
        for f, kf in _paired(self.walk, struct, kp_fields):
            if self.walk.tagged(f) and kf.name not in present_tags:
                value = self.walk.norm_value(f, self.walk.default(struct, f))
            else:
                value = self._norm_value(f, kf, getattr(obj, kf.name))
            out[snake_case(f.name)] = value
        if obj.unknown_tags:
            out["_unknown"] = {int(k[1:]): bytes(v) for k, v in obj.unknown_tags.items()}
        return out

    def _norm_value(self, f, kf, value):
        if kf.type_str == "bitfield":
            return _from_bits(value)
        if value is None:
            return ZERO_UUID if f.element_type == "uuid" else None
        if f.struct is not None:
            sub = _subfields(kf)
            if f.is_array:
                return [self._norm(f.struct, sub, v) for v in value]
            return self._norm(f.struct, sub, value)
        if f.is_array:
            return [ZERO_UUID if v is None and f.element_type == "uuid" else v for v in value]
        return bytes(value) if isinstance(value, (memoryview, bytearray)) else value

    # whole frames
    def encode_frame(self, kp_obj, correlation_id, client_id) -> bytes:
        kp_obj.with_header(correlation_id=correlation_id, client_id=client_id)
        # The version was set when kp_obj was built; passing it again trips kafka-python on response headers.
        return kp_obj.encode(header=True)

    def decode_frame(self, frame: bytes):
        obj = self.kp_cls.decode(frame, version=self.version, header=True)
        return obj.header, self.norm(obj)


class OldStructCodec:
    """kafka-python's hand-written structs for versions Kafka 4 dropped: positional values, no tagged fields."""

    def __init__(self, name, version, old_cls):
        self.walk = Walk(name, version)
        self.old_cls = old_cls
        self.version = version
        assert not self.walk.flexible, "the old structs are only used for non-flexible versions"

    def to_kp(self, obj):
        return self.old_cls(*self._tuple(self.walk.spec.struct, obj))

    def _tuple(self, struct, obj):
        return tuple(self._value(f, getattr(obj, snake_case(f.name))) for _, f in self.walk.present(struct))

    def _value(self, f, value):
        if value is None or f.struct is None:
            return bytes(value) if isinstance(value, memoryview) else value
        if f.is_array:
            return [self._tuple(f.struct, v) for v in value]
        return self._tuple(f.struct, value)

    def encode(self, kp_obj) -> bytes:
        return kp_obj.encode()

    def decode(self, data: bytes) -> dict:
        stream = io.BytesIO(data)
        obj = self.old_cls.decode(stream)
        assert stream.tell() == len(data), f"kafka-python read {stream.tell()} of {len(data)} bytes"
        return self.norm(obj)

    def norm(self, obj) -> dict:
        return self._norm(self.walk.spec.struct, tuple(getattr(obj, n) for n in obj.SCHEMA.names))

    def _norm(self, struct, values):
        present = self.walk.present(struct)
        assert len(values) == len(present), f"{struct.name}: kafka-python's struct has other fields"
        return {snake_case(f.name): self._norm_value(f, v) for (_, f), v in zip(present, values)}

    def _norm_value(self, f, value):
        if value is None:
            return ZERO_UUID if f.element_type == "uuid" else None
        if f.struct is not None:
            return [self._norm(f.struct, v) for v in value] if f.is_array else self._norm(f.struct, value)
        return value

    def encode_frame(self, kp_obj, correlation_id, client_id) -> bytes:
        kp_obj.with_header(correlation_id=correlation_id, client_id=client_id)
        return kp_obj.encode(header=True)

    def decode_frame(self, frame: bytes):
        obj = self.old_cls.decode(frame, header=True)
        return obj.header, self.norm(obj)


# ---- the tests -------------------------------------------------------------------------------------------------

PAIRS = all_message_versions()
COVERED = [(n, v) for n, v in PAIRS if codec_for(n, v) is not None]
API_PAIRS = [(n, v) for n, v in COVERED if MESSAGES[n].TYPE in ("request", "response")]


def test_uncovered_table_is_exactly_what_kafka_python_cannot_check():
    uncovered = {(n, v) for n, v in PAIRS if codec_for(n, v) is None}
    assert uncovered == set(UNCOVERED), (
        f"newly uncovered: {sorted(uncovered - set(UNCOVERED))}; "
        f"listed but covered or gone: {sorted(set(UNCOVERED) - uncovered)}")


def test_both_kinds_of_kafka_python_codec_are_in_use():
    kinds = {type(codec_for(n, v)).__name__ for n, v in COVERED}
    assert kinds == {"SchemaCodec", "OldStructCodec"} and len(COVERED) > 400


@pytest.mark.parametrize(("name", "version"), COVERED)
@EXAMPLES
@given(data=st.data())
def test_kafka_python_decodes_what_we_encode(name, version, data):
    codec = codec_for(name, version)
    obj = data.draw(message_strategy(name, version))
    obj = codec.walk.narrowed(codec.walk.spec.struct, obj, drop_unknown=False)
    encoded = encode_message(MESSAGES[name], version, obj)
    assert codec.decode(encoded) == codec.walk.norm(codec.walk.spec.struct, obj)


@pytest.mark.parametrize(("name", "version"), COVERED)
@EXAMPLES
@given(data=st.data())
def test_we_decode_what_kafka_python_encodes(name, version, data):
    codec = codec_for(name, version)
    obj = data.draw(message_strategy(name, version))
    obj = codec.walk.narrowed(codec.walk.spec.struct, obj, drop_unknown=True)
    kp_bytes = codec.encode(codec.to_kp(obj))
    ours = decode_message(MESSAGES[name], version, kp_bytes)
    struct = codec.walk.spec.struct
    assert codec.walk.norm(struct, ours) == codec.walk.norm(struct, obj)
    assert encode_message(MESSAGES[name], version, ours) == kp_bytes


@pytest.mark.parametrize(("name", "version"), API_PAIRS)
def test_frames_agree_with_kafka_python(name, version):
    """Header and body together: the header version each API version uses, its fields, the body after it."""
    codec = codec_for(name, version)
    cls = MESSAGES[name]
    body = cls()
    kp_frame = codec.encode_frame(codec.to_kp(body), correlation_id=0x01020304, client_id="oracle-client")
    if cls.TYPE == "request":
        header = RequestHeader(request_api_key=cls.API_KEY, request_api_version=version, correlation_id=0x01020304,
                               client_id="oracle-client")
        ours = encode_request(header, body)
        decoded_header, decoded_body = decode_request(kp_frame)
        assert (decoded_header.request_api_key, decoded_header.request_api_version, decoded_header.client_id) == (
            cls.API_KEY, version, "oracle-client")
    else:
        ours = encode_response(cls.API_KEY, version, 0x01020304, body)
        decoded_header, decoded_body = decode_response(cls.API_KEY, version, kp_frame)
    assert ours == kp_frame
    assert decoded_header.correlation_id == 0x01020304 and decoded_body == body
    kp_header, kp_body = codec.decode_frame(ours)
    assert kp_header.correlation_id == 0x01020304
    assert kp_body == codec.walk.norm(codec.walk.spec.struct, body)


def test_every_api_key_has_frames_checked():
    checked = {MESSAGES[n].API_KEY for n, _ in API_PAIRS}
    unchecked = {key for key in API_KEYS if key not in checked}
    # the KIP-848 (68, 69), KIP-714 (71, 72) and KIP-932 (76-79, 90-92) APIs: kafka-python has no class for them
    assert unchecked == {68, 69, 71, 72, 76, 77, 78, 79, 90, 91, 92}


def _metadata_response():
    m = MESSAGES["MetadataResponse"]
    partition = m.MetadataResponsePartition(partition_index=0, leader_id=1, leader_epoch=2, replica_nodes=[1],
                                            isr_nodes=[1], offline_replicas=[])
    topic = m.MetadataResponseTopic(error_code=0, name="t", topic_id=uuid.UUID(int=5), is_internal=True,
                                    partitions=[partition], topic_authorized_operations=0x58)
    return m(throttle_time_ms=7, brokers=[m.MetadataResponseBroker(node_id=1, host="h", port=9092, rack=None)],
             cluster_id="c", controller_id=1, topics=[topic], cluster_authorized_operations=-2**31)


def _produce_request():
    p = MESSAGES["ProduceRequest"]
    partition = p.PartitionProduceData(index=0, records=b"abc")
    return p(acks=-1, timeout_ms=100, topic_data=[p.TopicProduceData(name="t", partition_data=[partition])])


@pytest.mark.parametrize(("name", "version", "make"), [
    ("MetadataResponse", 12, _metadata_response),  # schema-driven codec, uuid and bitfield conversions
    ("ProduceRequest", 9, _produce_request),       # schema-driven codec, records
    ("ProduceRequest", 2, _produce_request),       # hand-written struct
])
def test_the_comparison_notices_every_flipped_bit(name, version, make):
    """Guards the normalisation above: it must not make different wire values look equal."""
    codec = codec_for(name, version)
    obj = make()
    encoded = encode_message(MESSAGES[name], version, obj)
    expected = codec.walk.norm(codec.walk.spec.struct, obj)
    assert codec.decode(encoded) == expected
    for position in range(len(encoded)):
        damaged = bytearray(encoded)
        damaged[position] ^= 1
        try:
            decoded = codec.decode(bytes(damaged))
        except Exception:  # noqa: BLE001 - kafka-python refusing the bytes is noticing too
            continue
        assert decoded != expected, f"flipping a bit of byte {position} went unnoticed"
