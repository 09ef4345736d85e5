"""Generates the codecs in `compatbroker/protocol/messages/` from the schema files in `schemas/`.

    python -m compatbroker.protocol.generate [--out DIR]

For every message it writes a class per struct and, per distinct wire layout, one straight-line decode function and
one encode function: no field descriptions are interpreted at run time, because these functions sit on every
request's path. Versions whose layouts are identical share a function. Consecutive fixed-size fields are read and
written with one precompiled `struct.Struct`. The output is committed; `tests/protocol/test_generated.py` fails when
it drifts from the schemas.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from .schema import FIXED_SIZE, SCHEMA_DIR, FieldSpec, MessageSpec, StructSpec, load_schemas, snake_case

OUT_DIR = Path(__file__).resolve().parent / "messages"
FIXED_CODES = {"bool": "?", "int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H", "uint32": "I",
               "float64": "d"}
INT_TYPES = {"int8", "int16", "int32", "int64", "uint16", "uint32"}
TAGS_ATTR = "unknown_tagged_fields"

# Extra members for a few classes, for the names the rest of the code base uses.
EXTRA_MEMBERS = {
    "RequestHeader": [
        "api_key = property(lambda self: self.request_api_key)",
        "api_version = property(lambda self: self.request_api_version)",
    ],
}


def module_name(spec: MessageSpec) -> str:
    name = spec.name
    for suffix in ("Request", "Response"):
        if spec.type in ("request", "response") and name.endswith(suffix):
            name = name[: -len(suffix)]
    return snake_case(name)


class _Field:
    """A field as it appears at one version."""

    def __init__(self, f: FieldSpec, version: int, flexible: bool):
        self.spec = f
        self.attr = snake_case(f.name)
        self.present = version in f.versions
        self.tagged = self.present and version in f.tagged
        self.nullable = version in f.nullable
        override = f.flexible_override
        self.compact = flexible and (override is None or version in override)


class StructGen:
    """Emits the class and the per-layout codec functions of one struct (or of the message's top level)."""

    def __init__(self, mod: "ModuleGen", msg: MessageSpec, struct: StructSpec, top: bool):
        self.mod = mod
        self.msg = msg
        self.struct = struct
        self.top = top
        self.cls = msg.name if top else msg.name + struct.name
        self.layouts: dict[tuple, int] = {}

    # -- layouts ----------------------------------------------------------------------------------------------
    def layout_key(self, version: int) -> tuple:
        flexible = version in self.msg.flexible
        key = []
        for f in self.struct.fields:
            fv = _Field(f, version, flexible)
            nested = self.mod.struct_gen(f.struct).layout_key(version) if f.struct and fv.present else None
            key.append((fv.attr, fv.present, fv.tagged, fv.nullable, fv.compact, nested))
        return (flexible, tuple(key))

    def layout_index(self, version: int) -> int:
        key = self.layout_key(version)
        if key not in self.layouts:
            self.layouts[key] = len(self.layouts)
            self.mod.pending.append((self, version, self.layouts[key]))
        return self.layouts[key]

    # -- the class --------------------------------------------------------------------------------------------
    def emit_class(self, out: list[str]):
        attrs = [snake_case(f.name) for f in self.struct.fields]
        if TAGS_ATTR in attrs or len(set(attrs)) != len(attrs):
            raise ValueError(f"{self.cls}: field names collide")
        out.append(f"class {self.cls}(Data):")
        doc = [self.struct.about or f"The {self.struct.name} struct of {self.msg.name}."]
        for f in self.struct.fields:
            doc.append(f"{snake_case(f.name)} ({f.type}, v{f.versions}): {f.about}")
        out.append('    """' + _docstring(doc) + '"""')
        out.append(f"    __slots__ = {tuple(attrs + [TAGS_ATTR])!r}")
        out.append(f"    _NAME = {self.struct.name if not self.top else self.msg.name!r}")
        if self.top:
            out.append(f"    NAME = {self.msg.name!r}")
            out.append(f"    TYPE = {self.msg.type!r}")
            out.append(f"    API_KEY = {self.msg.api_key!r}")
            out.append(f"    VALID_VERSIONS = ({self.msg.valid.lo}, {self.msg.valid.hi})")
            flex = self.msg.flexible
            out.append(f"    FLEXIBLE_VERSIONS = {None if flex.empty else (flex.lo, flex.hi)!r}")
            if self.msg.latest_unstable:
                out.append("    LATEST_VERSION_UNSTABLE = True")
        for line in EXTRA_MEMBERS.get(self.cls, []):
            out.append("    " + line)
        params, body = [], []
        for f in self.struct.fields:
            attr = snake_case(f.name)
            default = self.mod.default_expr(f)
            if _mutable_default(f):
                params.append(f"{attr}=_UNSET")
                body.append(f"        self.{attr} = {default} if {attr} is _UNSET else {attr}")
            else:
                params.append(f"{attr}={default}")
                body.append(f"        self.{attr} = {attr}")
        params.append(f"{TAGS_ATTR}=None")
        body.append(f"        self.{TAGS_ATTR} = {TAGS_ATTR}")
        out.append("")
        out.append(f"    def __init__(self, *, {', '.join(params)}):")
        out.extend(body)
        out.append("")
        out.append("")

    # -- decode -----------------------------------------------------------------------------------------------
    def emit_decoder(self, out: list[str], version: int, index: int):
        flexible = version in self.msg.flexible
        fields = [_Field(f, version, flexible) for f in self.struct.fields]
        out.append(f"def _d_{self.cls}_{index}(b, p):")
        out.append(f"    o = _new({self.cls})")
        for fv in fields:
            if not fv.present or fv.tagged:
                out.append(f"    o.{fv.attr} = {self.mod.default_expr(fv.spec)}")
        out.append(f"    o.{TAGS_ATTR} = None")
        regular = [fv for fv in fields if fv.present and not fv.tagged]
        self._emit_reads(out, regular, "    ", version, target=lambda fv: f"o.{fv.attr}")
        if flexible:
            self._emit_tagged_reads(out, [fv for fv in fields if fv.tagged], version, index)
        out.append("    return o, p")
        out.append("")
        out.append("")

    def _emit_reads(self, out, fields, ind, version, target):
        i = 0
        while i < len(fields):
            run = []
            while i < len(fields) and _is_fixed(fields[i]):
                run.append(fields[i])
                i += 1
            if run:
                fmt = ">" + "".join(FIXED_CODES[fv.spec.type] for fv in run)
                size = sum(FIXED_SIZE[fv.spec.type] for fv in run)
                unpack = self.mod.struct_const(fmt, "unpack_from")
                if len(run) == 1:
                    out.append(f"{ind}{target(run[0])} = {unpack}(b, p)[0]")
                else:
                    out.append(f"{ind}{', '.join(target(fv) for fv in run)} = {unpack}(b, p)")
                out.append(f"{ind}p += {size}")
                continue
            self._emit_read_one(out, fields[i], ind, version, target(fields[i]))
            i += 1

    def _emit_read_one(self, out, fv: _Field, ind, version, tgt):
        f = fv.spec
        if f.is_array:
            reader = "_read_" + ("compact_" if fv.compact else "") + ("nullable_" if fv.nullable else "") + "array_len"
            out.append(f"{ind}n, p = {reader}(b, p)")
            inner = ind
            if fv.nullable:
                out.append(f"{ind}if n < 0:")
                out.append(f"{ind}    {tgt} = None")
                out.append(f"{ind}else:")
                inner = ind + "    "
            et = f.element_type
            if f.struct is not None:
                fn = f"_d_{self.mod.struct_gen(f.struct).cls}_{self.mod.struct_gen(f.struct).layout_index(version)}"
                out.append(f"{inner}a = []")
                out.append(f"{inner}for _ in range(n):")
                out.append(f"{inner}    e, p = {fn}(b, p)")
                out.append(f"{inner}    a.append(e)")
                out.append(f"{inner}{tgt} = a")
            elif et in FIXED_CODES:
                out.append(f"{inner}{tgt}, p = _read_fixed_array(b, p, n, {FIXED_CODES[et]!r}, {FIXED_SIZE[et]})")
            else:
                reader = _var_reader(et, fv.compact, nullable=False)
                out.append(f"{inner}a = []")
                out.append(f"{inner}for _ in range(n):")
                out.append(f"{inner}    e, p = {reader}(b, p)")
                out.append(f"{inner}    a.append(e)")
                out.append(f"{inner}{tgt} = a")
        elif f.struct is not None:
            sg = self.mod.struct_gen(f.struct)
            fn = f"_d_{sg.cls}_{sg.layout_index(version)}"
            if fv.nullable:
                out.append(f"{ind}m = _unpack_i8(b, p)[0]")
                out.append(f"{ind}p += 1")
                out.append(f"{ind}if m < 0:")
                out.append(f"{ind}    {tgt} = None")
                out.append(f"{ind}else:")
                out.append(f"{ind}    {tgt}, p = {fn}(b, p)")
            else:
                out.append(f"{ind}{tgt}, p = {fn}(b, p)")
        elif f.type in FIXED_CODES:
            unpack = self.mod.struct_const(">" + FIXED_CODES[f.type], "unpack_from")
            out.append(f"{ind}{tgt} = {unpack}(b, p)[0]")
            out.append(f"{ind}p += {FIXED_SIZE[f.type]}")
        else:
            out.append(f"{ind}{tgt}, p = {_var_reader(f.type, fv.compact, fv.nullable)}(b, p)")

    def _emit_tagged_reads(self, out, tagged, version, index):
        out.append("    nt, p = _read_uvarint(b, p)")
        out.append("    for _ in range(nt):")
        out.append("        tag, p = _read_uvarint(b, p)")
        out.append("        size, p = _read_uvarint(b, p)")
        out.append("        end = p + size")
        out.append("        if end > len(b):")
        out.append("            raise _Short('tagged field overruns the buffer')")
        kw = "if"
        for fv in sorted(tagged, key=lambda x: x.spec.tag):
            fn = self.mod.tagged_reader(self, fv, version, index)
            out.append(f"        {kw} tag == {fv.spec.tag}:")
            out.append(f"            o.{fv.attr} = _read_tagged_value(b, p, end, {fn})")
            kw = "elif"
        if tagged:
            out.append("        else:")
            ind = "            "
        else:
            ind = "        "
        out.append(f"{ind}if o.{TAGS_ATTR} is None:")
        out.append(f"{ind}    o.{TAGS_ATTR} = {{}}")
        out.append(f"{ind}o.{TAGS_ATTR}[tag] = bytes(b[p:end])")
        out.append("        p = end")

    # -- encode -----------------------------------------------------------------------------------------------
    def emit_encoder(self, out: list[str], version: int, index: int):
        flexible = version in self.msg.flexible
        fields = [_Field(f, version, flexible) for f in self.struct.fields]
        out.append(f"def _e_{self.cls}_{index}(o, w):")
        for fv in fields:
            if not fv.present and not fv.spec.ignorable:
                out.append(f"    if o.{fv.attr}{_differs(self.mod.compared_default(fv.spec))}:")
                out.append(f"        raise _EncodeError('{self.cls}.{fv.attr} must keep its default: version "
                           f"{version} does not have it')")
        regular = [fv for fv in fields if fv.present and not fv.tagged]
        self._emit_writes(out, regular, "    ", version)
        if flexible:
            tagged = sorted((fv for fv in fields if fv.tagged), key=lambda x: x.spec.tag)
            if not tagged:
                out.append(f"    u = o.{TAGS_ATTR}")
                out.append("    if u:")
                out.append("        _write_tagged_fields(w, list(u.items()))")
                out.append("    else:")
                out.append("        w.append(0)")
            else:
                out.append("    t = []")
                for fv in tagged:
                    fn = self.mod.tagged_writer(self, fv, version, index)
                    out.append(f"    if o.{fv.attr}{_differs(self.mod.compared_default(fv.spec))}:")
                    out.append(f"        t.append(({fv.spec.tag}, _encode_tagged_value({fn}, o.{fv.attr})))")
                out.append(f"    u = o.{TAGS_ATTR}")
                out.append("    if u:")
                out.append("        t.extend(u.items())")
                out.append("    _write_tagged_fields(w, t)")
        if len(out[-1]) and out[-1].startswith(f"def _e_{self.cls}_{index}"):
            out.append("    pass")
        out.append("")
        out.append("")

    def _emit_writes(self, out, fields, ind, version, source=None):
        src = source or (lambda fv: f"o.{fv.attr}")
        i = 0
        while i < len(fields):
            run = []
            while i < len(fields) and _is_fixed(fields[i]):
                run.append(fields[i])
                i += 1
            if run:
                fmt = ">" + "".join(FIXED_CODES[fv.spec.type] for fv in run)
                pack = self.mod.struct_const(fmt, "pack")
                out.append(f"{ind}w += {pack}({', '.join(src(fv) for fv in run)})")
                continue
            self._emit_write_one(out, fields[i], ind, version, src(fields[i]))
            i += 1

    def _emit_write_one(self, out, fv: _Field, ind, version, val):
        f = fv.spec
        if f.is_array:
            out.append(f"{ind}a = {val}")
            inner = ind
            if fv.nullable:
                out.append(f"{ind}if a is None:")
                out.append(f"{ind}    " + ("w.append(0)" if fv.compact else "w += b'\\xff\\xff\\xff\\xff'"))
                out.append(f"{ind}else:")
                inner = ind + "    "
            if fv.compact:
                out.append(f"{inner}_write_uvarint(w, len(a) + 1)")
            else:
                out.append(f"{inner}w += _pack_i32(len(a))")
            et = f.element_type
            if f.struct is not None:
                sg = self.mod.struct_gen(f.struct)
                out.append(f"{inner}for e in a:")
                out.append(f"{inner}    _e_{sg.cls}_{sg.layout_index(version)}(e, w)")
            elif et in FIXED_CODES:
                out.append(f"{inner}_write_fixed_array(w, a, {FIXED_CODES[et]!r})")
            else:
                out.append(f"{inner}for e in a:")
                out.append(f"{inner}    {_var_writer(et, fv.compact, nullable=False)}(w, e)")
        elif f.struct is not None:
            sg = self.mod.struct_gen(f.struct)
            fn = f"_e_{sg.cls}_{sg.layout_index(version)}"
            if fv.nullable:
                out.append(f"{ind}if {val} is None:")
                out.append(f"{ind}    w += b'\\xff'")
                out.append(f"{ind}else:")
                out.append(f"{ind}    w += b'\\x01'")
                out.append(f"{ind}    {fn}({val}, w)")
            else:
                out.append(f"{ind}{fn}({val}, w)")
        elif f.type in FIXED_CODES:
            out.append(f"{ind}w += {self.mod.struct_const('>' + FIXED_CODES[f.type], 'pack')}({val})")
        else:
            out.append(f"{ind}{_var_writer(f.type, fv.compact, fv.nullable)}(w, {val})")


def _differs(default: str) -> str:
    return " is not None" if default == "None" else f" != {default}"


def _is_fixed(fv: _Field) -> bool:
    return not fv.spec.is_array and fv.spec.struct is None and fv.spec.type in FIXED_CODES


def _mutable_default(f: FieldSpec) -> bool:
    return (f.is_array or f.struct is not None) and f.default != "null"


def _var_reader(t, compact, nullable):
    if t == "uuid":
        return "_read_uuid"
    return "_read_" + ("compact_" if compact else "") + ("nullable_" if nullable else "") + t


def _var_writer(t, compact, nullable):
    if t == "uuid":
        return "_write_uuid"
    return "_write_" + ("compact_" if compact else "") + ("nullable_" if nullable else "") + t


def _docstring(lines: list[str]) -> str:
    text = "\n\n    ".join([lines[0]] + (["Fields:\n      " + "\n      ".join(lines[1:])] if len(lines) > 1 else []))
    return text.replace("\\", "\\\\").replace('"""', "'''")


class ModuleGen:
    """One generated module: the messages of one API (request and response), or one data message."""

    def __init__(self, name: str, specs: list[MessageSpec]):
        self.name = name
        self.specs = specs
        self.structs: dict[tuple[str, str], StructGen] = {}
        self.consts: dict[tuple[str, str], str] = {}
        self.default_instances: dict[str, str] = {}  # struct class -> its module-level default instance
        self.pending: list = []
        self.extra_funcs: list[str] = []
        self.tagged_funcs: dict[str, str] = {}
        self._msg: MessageSpec | None = None

    def struct_gen(self, struct: StructSpec) -> StructGen:
        return self.structs[(self._msg.name, struct.name)]

    def struct_const(self, fmt: str, kind: str) -> str:
        key = (fmt, kind)
        if key not in self.consts:
            code = fmt[1:].replace("?", "B")  # '?' (bool) is not a valid identifier character
            self.consts[key] = f"_{'u' if kind == 'unpack_from' else 'p'}_{code}"
        return self.consts[key]

    def default_expr(self, f: FieldSpec) -> str:
        if f.default == "null":
            return "None"
        if f.is_array:
            return "[]"
        if f.struct is not None:
            return f"{self.struct_gen(f.struct).cls}()"
        t = f.type
        if t in INT_TYPES:
            return str(int(f.default, 0)) if f.default else "0"
        if t == "bool":
            return "True" if f.default == "true" else "False"
        if t == "float64":
            return repr(float(f.default)) if f.default else "0.0"
        if t == "string":
            return repr(f.default) if f.default is not None else "''"
        if t in ("bytes", "records"):
            return "b''"
        if t == "uuid":
            return "_ZERO_UUID"
        raise ValueError(f"no default for type {t}")

    def compared_default(self, f: FieldSpec) -> str:
        """What an encoder compares a field with to tell whether it was left at its default: for a struct, one
        default instance made when the module loads (never handed out, so never changed), not one per call."""
        if f.struct is None or f.is_array or f.default == "null":
            return self.default_expr(f)
        cls = self.struct_gen(f.struct).cls
        self.default_instances[cls] = f"_default_{cls}"
        return self.default_instances[cls]

    def tagged_reader(self, sg: StructGen, fv: _Field, version: int, index: int) -> str:
        name = f"_rt_{sg.cls}_{index}_{fv.attr}"
        if name not in self.tagged_funcs:
            lines = [f"def {name}(b, p):"]
            plain = _Field(fv.spec, version, version in sg.msg.flexible)
            plain.tagged = False
            sg._emit_reads(lines, [plain], "    ", version, target=lambda _: "v")
            lines += ["    return v, p", "", ""]
            self.tagged_funcs[name] = "\n".join(lines)
        return name

    def tagged_writer(self, sg: StructGen, fv: _Field, version: int, index: int) -> str:
        name = f"_wt_{sg.cls}_{index}_{fv.attr}"
        if name not in self.tagged_funcs:
            lines = [f"def {name}(w, v):"]
            plain = _Field(fv.spec, version, version in sg.msg.flexible)
            plain.tagged = False
            sg._emit_writes(lines, [plain], "    ", version, source=lambda _: "v")
            lines += ["", ""]
            self.tagged_funcs[name] = "\n".join(lines)
        return name

    def render(self, schema_names: list[str]) -> str:
        classes: list[str] = []
        funcs: list[str] = []
        tables: list[str] = []
        for msg in self.specs:
            self._msg = msg
            top = StructGen(self, msg, msg.struct, top=True)
            self.structs[(msg.name, msg.name)] = top
            for st in msg.structs.values():
                self.structs[(msg.name, st.name)] = StructGen(self, msg, st, top=False)
            # classes: nested structs first so defaults can refer to them
            order = [self.structs[(msg.name, st.name)] for st in msg.structs.values()] + [top]
            for sg in order:
                sg.emit_class(classes)
            for sg in order[:-1]:
                classes.append(f"{msg.name}.{sg.struct.name} = {sg.cls}")
            classes.append("")
            classes.append("")
            decoders, encoders = {}, {}
            for v in msg.versions():
                idx = top.layout_index(v)
                decoders[v] = f"_d_{top.cls}_{idx}"
                encoders[v] = f"_e_{top.cls}_{idx}"
            done = set()
            while self.pending:
                sg, version, index = self.pending.pop(0)
                if (sg.cls, index) in done:
                    continue
                done.add((sg.cls, index))
                sg.emit_decoder(funcs, version, index)
                sg.emit_encoder(funcs, version, index)
            tables.append(f"{msg.name}.DECODERS = {{{', '.join(f'{v}: {fn}' for v, fn in decoders.items())}}}")
            tables.append(f"{msg.name}.ENCODERS = {{{', '.join(f'{v}: {fn}' for v, fn in encoders.items())}}}")
        head = [
            f"# Generated by `python -m compatbroker.protocol.generate` from {', '.join(schema_names)}.",
            "# Do not edit: change the schema and regenerate.",
            '"""' + "Codecs of " + " and ".join(m.name for m in self.specs) + '."""',
            "# flake8: noqa",
            "from struct import Struct",
            "",
            "from ..data import Data",
            "from ..exceptions import EncodeError as _EncodeError",
            "from ..wire import _Short, ZERO_UUID as _ZERO_UUID",
            "__IMPORTS__",
            "",
            "_new = object.__new__",
            "_UNSET = object()",
        ]
        for (fmt, kind), name in sorted(self.consts.items(), key=lambda kv: kv[1]):
            head.append(f"{name} = Struct({fmt!r}).{kind}")
        head += ["", ""]
        defaults = [f"{name} = {cls}()" for cls, name in sorted(self.default_instances.items())]
        body = classes + (defaults + ["", ""] if defaults else []) + funcs + list(self.tagged_funcs.values()) + tables
        text = "\n".join(head + body).rstrip() + "\n"
        used = sorted(set(re.findall(r"\b_((?:read|write|pack|unpack|encode)_\w+)\(", text)))
        imports = "from ..wire import (\n" + "".join(f"    {n} as _{n},\n" for n in used) + ")" if used else ""
        text = text.replace("__IMPORTS__", imports)
        return text.replace("\n\n\n\n", "\n\n\n")


def group_modules(specs: dict[str, MessageSpec]) -> dict[str, list[MessageSpec]]:
    modules: dict[str, list[MessageSpec]] = {}
    for spec in specs.values():
        modules.setdefault(module_name(spec), []).append(spec)
    for group in modules.values():
        group.sort(key=lambda s: (s.type != "request", s.name))
    return modules


def render_registry(modules: dict[str, list[MessageSpec]]) -> str:
    """The package's `__init__`: tables that name where each class lives, loaded on first use so that importing
    the protocol package stays cheap (a broker only ever needs the modules of the APIs its clients call)."""
    lines = [
        "# Generated by `python -m compatbroker.protocol.generate` from schemas/. Do not edit.",
        '"""Every generated message class, by name (`MESSAGES`) and by API key (`API_KEYS`: request class, response',
        'class). Modules are imported on first use; `from compatbroker.protocol.messages import ProduceRequest`',
        'works as usual."""',
        "from ..lazy_registry import LazyApiKeys, LazyMessages, load",
        "",
        "# message name -> module",
        "_MODULE_OF = {",
    ]
    for mod in sorted(modules):
        for s in modules[mod]:
            lines.append(f"    {s.name!r}: {mod!r},")
    lines += ["}", "", "# api key -> (request name, response name)", "_API_NAMES = {"]
    apis = {}
    for group in modules.values():
        for s in group:
            if s.type in ("request", "response"):
                apis.setdefault(s.api_key, {})[s.type] = s.name
    for key in sorted(apis):
        lines.append(f"    {key}: ({apis[key]['request']!r}, {apis[key]['response']!r}),")
    lines += [
        "}",
        "",
        "MESSAGES = LazyMessages(__name__, _MODULE_OF)",
        "API_KEYS = LazyApiKeys(MESSAGES, _API_NAMES)",
        "",
        "",
        "def __getattr__(name):",
        "    if name in _MODULE_OF:",
        "        return load(__name__, _MODULE_OF, name)",
        "    raise AttributeError(f\"module {__name__!r} has no attribute {name!r}\")",
        "",
    ]
    return "\n".join(lines)


def generate(schema_dir: Path = SCHEMA_DIR, out_dir: Path = OUT_DIR) -> list[Path]:
    specs = load_schemas(schema_dir)
    modules = group_modules(specs)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for mod, group in sorted(modules.items()):
        text = ModuleGen(mod, group).render([f"schemas/{s.name}.json" for s in group])
        path = out_dir / f"{mod}.py"
        path.write_text(text)
        written.append(path)
    reg = out_dir / "__init__.py"
    reg.write_text(render_registry(modules))
    written.append(reg)
    for stale in out_dir.glob("*.py"):
        if stale not in written:
            stale.unlink()
    return written


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schemas", type=Path, default=SCHEMA_DIR)
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    args = parser.parse_args(argv)
    written = generate(args.schemas, args.out)
    print(f"wrote {len(written)} modules to {args.out}")


if __name__ == "__main__":
    sys.exit(main())
