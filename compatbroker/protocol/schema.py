"""Loading and validating the message schema files in `schemas/`.

The files follow the layout of Apache Kafka's message definitions. Every file is checked against the format before
anything is generated from it, so a typo in a schema fails loudly here instead of producing a subtly wrong codec.
This module is used by the generator and by the reference codec; nothing on a request's path imports it.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

SCHEMA_DIR = Path(__file__).resolve().parent.parent.parent / "schemas"

PRIMITIVES = {"bool", "int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "string", "bytes", "uuid",
              "records"}
FIXED_SIZE = {"bool": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint16": 2, "uint32": 4, "float64": 8,
              "uuid": 16}
MESSAGE_TYPES = {"request", "response", "header", "data", "coordinator-key", "coordinator-value", "metadata"}
TOP_KEYS = {"apiKey", "type", "name", "validVersions", "flexibleVersions", "latestVersionUnstable", "about", "fields",
            "commonStructs", "deprecatedVersions"}
FIELD_KEYS = {"name", "type", "versions", "nullableVersions", "taggedVersions", "tag", "default", "ignorable",
              "mapKey", "entityType", "about", "fields", "flexibleVersions", "zeroCopy"}
NAME_RE = re.compile(r"^[A-Z][A-Za-z0-9]*$")
FIELD_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")


class SchemaError(ValueError):
    """A schema file does not follow the format."""


@dataclass(frozen=True)
class Versions:
    """An inclusive version range; `hi` None means open-ended ("3+"), an empty range is `lo > hi`."""
    lo: int
    hi: int | None

    @classmethod
    def parse(cls, text: str) -> "Versions":
        text = text.strip()
        if text == "none":
            return cls(1, 0)
        m = re.fullmatch(r"(\d+)(\+|-(\d+))?", text)
        if not m:
            raise SchemaError(f"bad version range {text!r}")
        lo = int(m.group(1))
        if m.group(2) == "+":
            return cls(lo, None)
        hi = int(m.group(3)) if m.group(3) else lo
        if hi < lo:
            raise SchemaError(f"bad version range {text!r}")
        return cls(lo, hi)

    def __contains__(self, version: int) -> bool:
        return self.lo <= version and (self.hi is None or version <= self.hi)

    @property
    def empty(self) -> bool:
        return self.hi is not None and self.hi < self.lo

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.hi is None:
            return f"{self.lo}+"
        return str(self.lo) if self.lo == self.hi else f"{self.lo}-{self.hi}"


NO_VERSIONS = Versions(1, 0)


@dataclass
class FieldSpec:
    name: str
    type: str                      # as written: "int32", "[]Topic", "Topic"
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    default: str | None
    ignorable: bool
    flexible_override: Versions | None   # field-level "flexibleVersions" (strings and bytes only)
    about: str
    struct: "StructSpec | None" = None   # for struct and array-of-struct fields
    raw: dict = field(default_factory=dict, repr=False)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.struct is not None


@dataclass
class StructSpec:
    name: str
    versions: Versions
    fields: list[FieldSpec]
    about: str = ""


@dataclass
class MessageSpec:
    name: str
    type: str
    api_key: int | None
    valid: Versions
    flexible: Versions
    about: str
    struct: StructSpec            # the top-level fields, as a struct named like the message
    structs: dict[str, StructSpec]  # every struct of the message, by name
    latest_unstable: bool
    path: Path

    def versions(self) -> range:
        return range(self.valid.lo, (self.valid.hi if self.valid.hi is not None else self.valid.lo) + 1)


def load_schema_file(path: Path) -> MessageSpec:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise SchemaError(f"{path.name}: not valid JSON: {exc}") from None
    return parse_message(data, path)


def load_schemas(directory: Path = SCHEMA_DIR) -> dict[str, MessageSpec]:
    specs = {}
    for path in sorted(Path(directory).glob("*.json")):
        spec = load_schema_file(path)
        if spec.name in specs:
            raise SchemaError(f"{path.name}: message {spec.name} defined twice")
        if path.stem != spec.name:
            raise SchemaError(f"{path.name}: file name does not match message name {spec.name}")
        specs[spec.name] = spec
    return specs


def parse_message(data: dict, path: Path) -> MessageSpec:
    where = path.name
    if not isinstance(data, dict):
        raise SchemaError(f"{where}: top level must be an object")
    unknown = set(data) - TOP_KEYS
    if unknown:
        raise SchemaError(f"{where}: unknown keys {sorted(unknown)}")
    for key in ("type", "name", "validVersions", "fields"):
        if key not in data:
            raise SchemaError(f"{where}: missing {key!r}")
    if data["type"] not in MESSAGE_TYPES:
        raise SchemaError(f"{where}: unknown message type {data['type']!r}")
    if not NAME_RE.match(data["name"]):
        raise SchemaError(f"{where}: bad message name {data['name']!r}")
    if data["type"] in ("request", "response") and not isinstance(data.get("apiKey"), int):
        raise SchemaError(f"{where}: requests and responses need an integer apiKey")
    valid = _versions(data["validVersions"], where)
    flexible = _versions(data.get("flexibleVersions", "none"), where)
    common = {}
    for raw in data.get("commonStructs", []):
        _require_keys(raw, {"name", "versions", "fields", "about"}, {"name", "versions", "fields"}, where)
        common[raw["name"]] = StructSpec(raw["name"], _versions(raw["versions"], where), [], raw.get("about", ""))
    structs: dict[str, StructSpec] = {}
    ctx = _Context(where, common, structs)
    for raw in data.get("commonStructs", []):
        st = common[raw["name"]]
        st.fields = [_parse_field(f, ctx, f"{raw['name']}") for f in raw["fields"]]
        structs.setdefault(st.name, st)
    top = StructSpec(data["name"], valid, [_parse_field(f, ctx, data["name"]) for f in data["fields"]],
                     data.get("about", ""))
    _check_tags(top, where)
    for st in structs.values():
        _check_tags(st, where)
    return MessageSpec(data["name"], data["type"], data.get("apiKey"), valid, flexible, data.get("about", ""), top,
                       structs, bool(data.get("latestVersionUnstable", False)), path)


@dataclass
class _Context:
    where: str
    common: dict[str, StructSpec]
    structs: dict[str, StructSpec]


def _versions(text, where) -> Versions:
    if not isinstance(text, str):
        raise SchemaError(f"{where}: version range must be a string, got {text!r}")
    try:
        return Versions.parse(text)
    except SchemaError as exc:
        raise SchemaError(f"{where}: {exc}") from None


def _require_keys(raw, allowed, required, where):
    if not isinstance(raw, dict):
        raise SchemaError(f"{where}: expected an object, got {raw!r}")
    unknown = set(raw) - allowed
    if unknown:
        raise SchemaError(f"{where}: unknown keys {sorted(unknown)} in {raw.get('name', raw)!r}")
    missing = required - set(raw)
    if missing:
        raise SchemaError(f"{where}: missing {sorted(missing)} in {raw.get('name', raw)!r}")


def _parse_field(raw: dict, ctx: _Context, parent: str) -> FieldSpec:
    _require_keys(raw, FIELD_KEYS, {"name", "type", "versions"}, ctx.where)
    name, typ = raw["name"], raw["type"]
    where = f"{ctx.where}: {parent}.{name}"
    if not FIELD_NAME_RE.match(name):
        raise SchemaError(f"{where}: bad field name")
    if not isinstance(typ, str) or not typ:
        raise SchemaError(f"{where}: bad type {typ!r}")
    spec = FieldSpec(
        name=name, type=typ, versions=_versions(raw["versions"], where),
        nullable=_versions(raw.get("nullableVersions", "none"), where),
        tagged=_versions(raw.get("taggedVersions", "none"), where),
        tag=raw.get("tag"), default=_default_text(raw.get("default"), where),
        ignorable=bool(raw.get("ignorable", False)),
        flexible_override=_versions(raw["flexibleVersions"], where) if "flexibleVersions" in raw else None,
        about=raw.get("about", ""), raw=raw)
    element = spec.element_type
    if element.startswith("[]"):
        raise SchemaError(f"{where}: nested arrays are not part of the format")
    if element in PRIMITIVES:
        if "fields" in raw:
            raise SchemaError(f"{where}: a {typ} field cannot have nested fields")
        if element == "records" and spec.is_array:
            raise SchemaError(f"{where}: arrays of records are not part of the format")
    else:
        if not NAME_RE.match(element):
            raise SchemaError(f"{where}: bad struct type name {element!r}")
        spec.struct = _struct_for(spec, raw, ctx, where)
    if spec.tagged.empty != (spec.tag is None):
        raise SchemaError(f"{where}: tag and taggedVersions go together")
    if spec.tag is not None and (not isinstance(spec.tag, int) or spec.tag < 0):
        raise SchemaError(f"{where}: bad tag {spec.tag!r}")
    if spec.flexible_override is not None and element not in ("string", "bytes"):
        raise SchemaError(f"{where}: field-level flexibleVersions only applies to strings and bytes")
    _check_default(spec, where)
    return spec


def _default_text(value, where):
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, str)):
        return str(value)
    raise SchemaError(f"{where}: bad default {value!r}")


def _struct_for(spec: FieldSpec, raw: dict, ctx: _Context, where: str) -> StructSpec:
    name = spec.element_type
    if "fields" in raw:
        if name in ctx.common or name in ctx.structs:
            raise SchemaError(f"{where}: struct {name} defined twice")
        st = StructSpec(name, spec.versions, [], raw.get("about", ""))
        ctx.structs[name] = st
        st.fields = [_parse_field(f, ctx, name) for f in raw["fields"]]
        return st
    if name in ctx.common:
        return ctx.common[name]
    raise SchemaError(f"{where}: unknown struct type {name}")


def _check_default(spec: FieldSpec, where: str):
    d = spec.default
    if d is None:
        return
    if d == "null":
        if spec.nullable.empty:
            raise SchemaError(f"{where}: default null on a field that is never nullable")
        return
    t = spec.element_type
    if spec.is_array or spec.is_struct:
        raise SchemaError(f"{where}: arrays and structs only take a null default")
    try:
        if t in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
            int(d, 0)
        elif t == "float64":
            float(d)
        elif t == "bool":
            if d not in ("true", "false"):
                raise ValueError(d)
    except ValueError:
        raise SchemaError(f"{where}: default {d!r} does not fit type {t}") from None


def _check_tags(struct: StructSpec, where: str):
    seen = {}
    for f in struct.fields:
        if f.tag is not None:
            if f.tag in seen:
                raise SchemaError(f"{where}: {struct.name} uses tag {f.tag} twice ({seen[f.tag]}, {f.name})")
            seen[f.tag] = f.name


def snake_case(name: str) -> str:
    """Kafka's PascalCase field names as Python attribute names: `ThrottleTimeMs` -> `throttle_time_ms`."""
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()
