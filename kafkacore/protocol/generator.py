"""Generates the protocol codecs from Kafka's message definitions.

Input: the JSON schemas Kafka keeps in ``clients/src/main/resources/common/message`` (here
``../shared/kafka-protocol/message``) and the coordinator record schemas
(``../shared/kafka-protocol/coordinator``). Output: one Python module per schema under
``kafkacore/protocol/messages/`` and ``kafkacore/protocol/coordinator/``, plus
``kafkacore/protocol/api_table.py``, which lists every API key with its request and response
classes and valid versions.

Each schema becomes classes with ``__slots__``, a keyword constructor filled with the schema's
defaults (an argument left out gets the default; None given for a nullable array is null, not
an empty array), ``read(reader, version)`` and ``write(writer, version)``. The code branches on the
version the way Kafka's own generated Java does: a field is read or written only in its
``versions``; strings, bytes and arrays switch to their compact forms in ``flexibleVersions``;
nullability follows ``nullableVersions``; tagged fields are written only when they differ from
their default. Unknown tagged fields are skipped on read.

Run: ``python -m kafkacore.protocol.generator [SCHEMA_ROOT]`` (default ``../shared/kafka-protocol``
next to the repository). ``tests/test_protocol_generated.py`` regenerates into a temporary
directory and diffs against the committed modules.
"""
from __future__ import annotations

import json
import keyword
import os
import re
import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
# $KAFKACORE_PROTOCOL_SCHEMAS overrides (ci/python_sanitize.sh tests a copy of the tree elsewhere)
DEFAULT_SCHEMA_ROOT = Path(os.environ.get("KAFKACORE_PROTOCOL_SCHEMAS")
                           or PACKAGE_DIR.parents[2] / "shared" / "kafka-protocol")

INT_TYPES = {"int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8}
SCALAR_MIN_SIZE = dict(INT_TYPES, bool=1, float64=8, uuid=16, string=1, bytes=1, records=1)

_COMMENT = re.compile(r"^\s*//.*$", re.M)

# Schemas of versions newer than ../shared's snapshot (Kafka 4.0-SNAPSHOT), written here from the
# KIP and the clients' encoders that speak them (each file's opening comment names its source).
# A file here replaces ../shared's file of the same name; a new name adds a schema.
NEWER_SCHEMA_ROOT = PACKAGE_DIR / "newer_schemas"


def load_schema(path: Path) -> dict:
    text = _COMMENT.sub("", path.read_text())
    return json.loads(text)


def snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()
    if keyword.iskeyword(s) or s in ("self", "cls", "r", "w", "v"):
        s += "_"
    return s


def module_name(schema_name: str) -> str:
    return snake(schema_name).rstrip("_")


class Versions:
    """A version range from Kafka's notation: "3", "3+", "3-7" or "none"."""

    def __init__(self, text, lo_cap: int = 0, hi_cap: int = 0x7FFF):
        text = str(text).strip()
        if text == "none" or text == "":
            self.lo, self.hi = 1, 0  # empty
        elif text.endswith("+"):
            self.lo, self.hi = int(text[:-1]), 0x7FFF
        elif "-" in text:
            a, b = text.split("-")
            self.lo, self.hi = int(a), int(b)
        else:
            self.lo = self.hi = int(text)
        self.lo = max(self.lo, lo_cap)
        self.hi = min(self.hi, hi_cap)

    @property
    def empty(self) -> bool:
        return self.lo > self.hi

    def condition(self, lo: int, hi: int, var: str = "v") -> str | None:
        """A Python condition on ``var`` meaning "in this range", given that ``var`` is
        known to lie in [lo, hi]. None means always; "False" never."""
        a, b = max(self.lo, lo), min(self.hi, hi)
        if a > b:
            return "False"
        parts = []
        if a > lo:
            parts.append(f"{var} >= {a}")
        if b < hi:
            parts.append(f"{var} <= {b}")
        if not parts:
            return None
        if len(parts) == 2 and a == b:
            return f"{var} == {a}"
        return " and ".join(parts)


class Field:
    def __init__(self, spec: dict, lo: int, hi: int):
        self.spec = spec
        self.name = spec["name"]
        self.attr = snake(self.name)
        self.type = spec["type"].strip()
        self.versions = Versions(spec.get("versions", "0+"), lo, hi)
        self.nullable = Versions(spec.get("nullableVersions", "none"), lo, hi)
        self.tagged = Versions(spec["taggedVersions"], lo, hi) if "taggedVersions" in spec else None
        self.tag = spec.get("tag")
        self.flexible_override = Versions(spec["flexibleVersions"], lo, hi) if "flexibleVersions" in spec else None
        self.default = spec.get("default")
        self.fields = spec.get("fields")

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.element_type not in SCALAR_MIN_SIZE


class Struct:
    def __init__(self, name: str, fields: list[Field]):
        self.name = name
        self.fields = fields


class ModuleGenerator:
    """Generates one module from one schema."""

    def __init__(self, schema: dict, source_name: str):
        self.schema = schema
        self.source_name = source_name
        vv = Versions(schema["validVersions"])
        self.lo, self.hi = vv.lo, vv.hi
        self.flexible = Versions(schema.get("flexibleVersions", "none"), self.lo, self.hi)
        self.common = {c["name"]: c for c in schema.get("commonStructs", [])}
        self.structs: list[Struct] = []
        self.struct_names: set[str] = set()
        self.out: list[str] = []

    # -- collecting the structs, inner ones first ------------------------------------------
    def collect(self) -> None:
        for name, spec in self.common.items():
            self._collect_struct(name, spec.get("fields", []))
        self._collect_struct(self.schema["name"], self.schema["fields"])

    def _collect_struct(self, name: str, field_specs: list[dict]) -> None:
        if name in self.struct_names:
            if field_specs and name not in self.common:
                raise ValueError(f"{self.source_name}: struct {name} is defined twice")
            return
        fields = [Field(f, self.lo, self.hi) for f in field_specs]
        for f in fields:
            if f.is_struct and f.fields is not None:
                self._collect_struct(f.element_type, f.fields)
        self.struct_names.add(name)
        self.structs.append(Struct(name, fields))

    # -- defaults ------------------------------------------------------------------------------
    def default_expr(self, f: Field) -> str:
        d = f.default
        if f.is_array:
            return "None" if d in ("null", None) and d is not None else "[]"
        t = f.type
        if t in INT_TYPES:
            return str(int(str(d), 0)) if d not in (None, "") else "0"
        if t == "float64":
            return repr(float(d)) if d not in (None, "") else "0.0"
        if t == "bool":
            return "True" if str(d).lower() == "true" else "False"
        if t == "string":
            if d == "null":
                return "None"
            return repr(d) if d is not None else "''"
        if t == "bytes":
            return "None" if d == "null" else "b''"
        if t == "records":
            return "None"
        if t == "uuid":
            return "ZERO_UUID"
        # a struct. Tagged structs default to None (absent), so that building and writing a
        # response does not construct and compare default instances for every partition.
        if d == "null" or f.tagged is not None:
            return "None"
        return f"{t}()"

    def mutable_default(self, f: Field) -> bool:
        return self.default_expr(f) in ("[]",) or (f.is_struct and not f.is_array and self.default_expr(f) != "None")

    def nullable_cond(self, f: Field) -> str | None:
        lo, hi = max(self.lo, f.versions.lo), min(self.hi, f.versions.hi)
        return f.nullable.condition(lo, hi)

    # -- reading -------------------------------------------------------------------------------
    def flex_var(self, f: Field, in_tag: bool) -> str:
        """The expression that tells whether this field uses compact encodings."""
        if in_tag:
            return "True"
        if f.flexible_override is not None:
            cond = f.flexible_override.condition(self.lo, self.hi)
            return "True" if cond is None else cond
        return "flex"

    def scalar_read(self, t: str, nullable_cond: str | None, flex: str, r: str) -> str:
        if t in INT_TYPES or t in ("bool", "float64", "uuid"):
            return f"{r}.{t}()"
        if t in ("string", "bytes", "records"):
            plain = "string" if t == "string" else t
            if t == "records":
                nn = nul = "records"
            else:
                nn, nul = plain, f"nullable_{plain}"
            def pick(name):
                compact = f"compact_{name}"
                if flex == "True":
                    return f"{r}.{compact}()"
                if flex == "False":
                    return f"{r}.{name}()"
                return f"({r}.{compact}() if {flex} else {r}.{name}())"
            if nullable_cond == "False":
                return pick(nn)
            if nullable_cond is None:
                return pick(nul)
            return f"({pick(nul)} if {nullable_cond} else {pick(nn)})"
        raise ValueError(f"unknown type {t}")

    def read_lines(self, f: Field, target: str, r: str, in_tag: bool, indent: str) -> list[str]:
        flex = self.flex_var(f, in_tag)
        nullable = self.nullable_cond(f)
        lines = []
        if f.is_array:
            et = f.element_type
            min_size = SCALAR_MIN_SIZE.get(et, 1)
            if flex == "True":
                count = f"{r}.compact_array_length({min_size})"
            elif flex == "False":
                count = f"{r}.array_length({min_size})"
            else:
                count = f"({r}.compact_array_length({min_size}) if {flex} else {r}.array_length({min_size}))"
            if f.is_struct:
                elem = f"{et}.read({r}, v)"
            else:
                elem = self.scalar_read(et, "False", flex, r)
            lines.append(f"{indent}n = {count}")
            lines.append(f"{indent}if n < 0:")
            if nullable == "False":
                lines.append(f"{indent}    raise ProtocolDecodeError('non-nullable field {f.name} is null')")
            elif nullable is None:
                lines.append(f"{indent}    {target} = None")
            else:
                lines.append(f"{indent}    if not ({nullable}):")
                lines.append(f"{indent}        raise ProtocolDecodeError('non-nullable field {f.name} is null')")
                lines.append(f"{indent}    {target} = None")
            lines.append(f"{indent}else:")
            lines.append(f"{indent}    {target} = [{elem} for _ in range(n)]")
            return lines
        if f.is_struct:
            if nullable == "False":
                lines.append(f"{indent}{target} = {f.type}.read({r}, v)")
            else:
                cond = "" if nullable is None else f"({nullable}) and "
                lines.append(f"{indent}if {cond}{r}.int8() < 0:")
                lines.append(f"{indent}    {target} = None")
                lines.append(f"{indent}else:")
                lines.append(f"{indent}    {target} = {f.type}.read({r}, v)")
            return lines
        lines.append(f"{indent}{target} = {self.scalar_read(f.type, nullable, flex, r)}")
        return lines

    # -- writing -------------------------------------------------------------------------------
    def scalar_write(self, t: str, value: str, nullable_cond: str | None, flex: str, w: str) -> str:
        if t in INT_TYPES or t in ("bool", "float64", "uuid"):
            return f"{w}.{t}({value})"
        if t in ("string", "bytes", "records"):
            if t == "records":
                nn = nul = "records"
            else:
                nn, nul = t, f"nullable_{t}"

            def pick(name):
                if flex == "True":
                    return f"{w}.compact_{name}({value})"
                if flex == "False":
                    return f"{w}.{name}({value})"
                return f"({w}.compact_{name}({value}) if {flex} else {w}.{name}({value}))"
            if nullable_cond == "False":
                return pick(nn)
            if nullable_cond is None:
                return pick(nul)
            return f"({pick(nul)} if {nullable_cond} else {pick(nn)})"
        raise ValueError(f"unknown type {t}")

    def write_lines(self, f: Field, value: str, w: str, in_tag: bool, indent: str) -> list[str]:
        flex = self.flex_var(f, in_tag)
        nullable = self.nullable_cond(f)
        lines = []
        if f.is_array:
            et = f.element_type
            if flex == "True":
                lines.append(f"{indent}{w}.compact_array_length({value})")
            elif flex == "False":
                lines.append(f"{indent}{w}.array_length({value})")
            else:
                lines.append(f"{indent}({w}.compact_array_length({value}) if {flex} else {w}.array_length({value}))")
            lines.append(f"{indent}if {value} is not None:")
            lines.append(f"{indent}    for e in {value}:")
            if f.is_struct:
                lines.append(f"{indent}        e.write({w}, v)")
            else:
                lines.append(f"{indent}        {self.scalar_write(et, 'e', 'False', flex, w)}")
            return lines
        if f.is_struct:
            if nullable == "False":
                lines.append(f"{indent}{value}.write({w}, v)")
            else:
                cond = "" if nullable is None else f"({nullable}) and "
                lines.append(f"{indent}if {cond}{value} is None:")
                lines.append(f"{indent}    {w}.int8(-1)")
                lines.append(f"{indent}else:")
                if nullable is not None:
                    lines.append(f"{indent}    if {nullable}:")
                    lines.append(f"{indent}        {w}.int8(1)")
                else:
                    lines.append(f"{indent}    {w}.int8(1)")
                lines.append(f"{indent}    {value}.write({w}, v)")
            return lines
        lines.append(f"{indent}{self.scalar_write(f.type, value, nullable, flex, w)}")
        return lines

    # -- emitting ------------------------------------------------------------------------------
    def emit_struct(self, s: Struct, top: bool) -> None:
        o = self.out
        fields = [f for f in s.fields if not f.versions.empty]
        o.append("")
        o.append("")
        o.append(f"class {s.name}:")
        if top:
            o.append(f'    """Generated from {self.source_name}."""')
            o.append("")
            if "apiKey" in self.schema:
                o.append(f"    API_KEY = {self.schema['apiKey']}")
            o.append(f"    MIN_VERSION = {self.lo}")
            o.append(f"    MAX_VERSION = {self.hi}")
            o.append(f"    FLEXIBLE_FROM = {None if self.flexible.empty else self.flexible.lo}")
        slots = ", ".join(repr(f.attr) for f in fields)
        o.append(f"    __slots__ = ({slots}{',' if len(fields) == 1 else ''})")
        o.append("")
        # constructor
        params = []
        body = []
        for f in fields:
            d = self.default_expr(f)
            if self.mutable_default(f):
                # A fresh list/struct per instance. Where the field is nullable, None is a
                # value of its own (a null MetadataRequest.Topics means "all topics", an empty
                # one "none"), so "not given" is marked with ... instead.
                unset = "None" if f.nullable.empty else "..."
                params.append(f"{f.attr}={unset}")
                body.append(f"        self.{f.attr} = {d} if {f.attr} is {unset} else {f.attr}")
            else:
                params.append(f"{f.attr}={d}")
                body.append(f"        self.{f.attr} = {f.attr}")
        o.append(f"    def __init__(self{', *, ' if params else ''}{', '.join(params)}):")
        o.extend(body or ["        pass"])
        # read
        o.append("")
        o.append("    @classmethod")
        o.append("    def read(cls, r, v):")
        o.append("        self = cls.__new__(cls)")
        flex_cond = self.flexible.condition(self.lo, self.hi)
        flex_expr = "False" if self.flexible.empty else ("True" if flex_cond is None else flex_cond)
        o.append(f"        flex = {flex_expr}")
        tagged = sorted([f for f in fields if f.tagged is not None], key=lambda f: f.tag)
        for f in fields:
            if f.tagged is not None:
                o.append(f"        self.{f.attr} = {self.default_expr(f)}")
                continue
            cond = f.versions.condition(self.lo, self.hi)
            if cond is None:
                o.extend(self.read_lines(f, f"self.{f.attr}", "r", False, "        "))
            else:
                o.append(f"        if {cond}:")
                o.extend(self.read_lines(f, f"self.{f.attr}", "r", False, "            "))
                o.append("        else:")
                o.append(f"            self.{f.attr} = {self.default_expr(f)}")
        if not self.flexible.empty:
            o.append("        if flex:")
            if tagged:
                o.append("            for _ in range(r.uvarint()):")
                o.append("                tag, tr = r.tagged_field()")
                first = True
                for f in tagged:
                    cond = f.tagged.condition(self.lo, self.hi)
                    test = f"tag == {f.tag}" + ("" if cond is None else f" and {cond}")
                    o.append(f"                {'if' if first else 'elif'} {test}:")
                    o.extend(self.read_lines(f, f"self.{f.attr}", "tr", True, "                    "))
                    first = False
            else:
                o.append("            r.skip_tagged_fields()")
        o.append("        return self")
        # write
        o.append("")
        o.append("    def write(self, w, v):")
        o.append(f"        flex = {flex_expr}")
        for f in fields:
            if f.tagged is not None:
                continue
            cond = f.versions.condition(self.lo, self.hi)
            if cond is None:
                o.extend(self.write_lines(f, f"self.{f.attr}", "w", False, "        "))
            else:
                o.append(f"        if {cond}:")
                o.extend(self.write_lines(f, f"self.{f.attr}", "w", False, "            "))
        if not self.flexible.empty:
            o.append("        if flex:")
            if tagged:
                o.append("            tags = []")
                for f in tagged:
                    cond = f.tagged.condition(self.lo, self.hi)
                    d = self.default_expr(f)
                    test = f"self.{f.attr} is not None" if d == "None" else f"self.{f.attr} != {d}"
                    if cond is not None:
                        test = f"({cond}) and {test}"
                    o.append(f"            if {test}:")
                    o.append("                tw = Writer()")
                    o.extend(self.write_lines(f, f"self.{f.attr}", "tw", True, "                "))
                    o.append(f"                tags.append(({f.tag}, tw.buf))")
                o.append("            w.uvarint(len(tags))")
                o.append("            for tag, data in tags:")
                o.append("                w.uvarint(tag)")
                o.append("                w.uvarint(len(data))")
                o.append("                w.buf += data")
            else:
                o.append("            w.uvarint(0)")
        o.append("")
        o.append("    def __eq__(self, other):")
        o.append("        return type(other) is type(self) and all(")
        o.append("            getattr(self, s) == getattr(other, s) for s in self.__slots__)")
        o.append("")
        o.append("    __hash__ = None")
        o.append("")
        o.append("    def __repr__(self):")
        o.append("        inner = ', '.join(f'{s}={getattr(self, s)!r}' for s in self.__slots__)")
        o.append("        return f'" + s.name + "({inner})'")

    def generate(self) -> str:
        self.collect()
        o = self.out
        o.append(f'"""{self.schema["name"]}: generated by kafkacore.protocol.generator from '
                 f'{self.source_name}. Do not edit."""')
        o.append("# flake8: noqa")
        o.append("from ..wire import ProtocolDecodeError, Writer, ZERO_UUID")
        for s in self.structs:
            self.emit_struct(s, top=(s.name == self.schema["name"]))
        o.append("")
        return "\n".join(o)


HEADER_FILES = ("RequestHeader.json", "ResponseHeader.json")


def schema_paths(schema_root: Path, kind: str, newer_root: Path = NEWER_SCHEMA_ROOT) -> list[tuple[str, Path]]:
    """(source label, path) of every ``kind`` ("message" or "coordinator") schema: ../shared's,
    with the files of ``newer_root`` in place of those of the same name, sorted by file name."""
    paths = {p.name: (f"kafka-protocol/{kind}/{p.name}", p) for p in (schema_root / kind).glob("*.json")}
    for p in (newer_root / kind).glob("*.json"):
        paths[p.name] = (f"kafkacore/protocol/newer_schemas/{kind}/{p.name}", p)
    return [paths[name] for name in sorted(paths)]


def generate_all(schema_root: Path, out_dir: Path) -> list[Path]:
    """Writes every generated module under out_dir (the kafkacore/protocol directory)."""
    written = []
    msg_dir = out_dir / "messages"
    coord_dir = out_dir / "coordinator"
    for d in (msg_dir, coord_dir):
        d.mkdir(parents=True, exist_ok=True)
    apis: dict[int, dict] = {}
    msg_modules = []
    for label, path in schema_paths(schema_root, "message"):
        schema = load_schema(path)
        mod = module_name(schema["name"])
        src = ModuleGenerator(schema, label).generate()
        target = msg_dir / f"{mod}.py"
        target.write_text(src)
        written.append(target)
        msg_modules.append(mod)
        if "apiKey" in schema:
            entry = apis.setdefault(schema["apiKey"], {})
            entry[schema["type"]] = (mod, schema["name"])
            if schema["type"] == "request":
                v = Versions(schema["validVersions"])
                fx = Versions(schema.get("flexibleVersions", "none"))
                entry["versions"] = (v.lo, v.hi)
                entry["flexible_from"] = None if fx.empty else fx.lo
                entry["name"] = schema["name"][: -len("Request")]
    coord_modules = []
    for label, path in schema_paths(schema_root, "coordinator"):
        schema = load_schema(path)
        mod = module_name(schema["name"])
        src = ModuleGenerator(schema, label).generate()
        target = coord_dir / f"{mod}.py"
        target.write_text(src)
        written.append(target)
        coord_modules.append(mod)
    for d, mods in ((msg_dir, msg_modules), (coord_dir, coord_modules)):
        init = d / "__init__.py"
        init.write_text('"""Generated codecs (kafkacore.protocol.generator). Import the module you need."""\n')
        written.append(init)
    lines = [
        '"""Every API key Kafka defines: name, request/response module and class, valid request',
        'versions and the first flexible version; ``ApiKey`` names each key (``ApiKey.FETCH``), so',
        'no module numbers them by hand. Generated by kafkacore.protocol.generator."""',
        "import enum",
        "",
        "",
        "class ApiKey(enum.IntEnum):",
        "    __str__ = int.__repr__  # printed as the number, on Python 3.10 too (3.11+ does so already)",
        "",
    ]
    for key in sorted(apis):
        lines.append(f"    {apis[key]['request'][0].rsplit('_', 1)[0].upper()} = {key}")
    lines += [
        "",
        "",
        "# api_key: (name, module, request class, response class, min version, max version, flexible from)",
        "API_TABLE = {",
    ]
    for key in sorted(apis):
        e = apis[key]
        req_mod, req_cls = e["request"]
        resp_mod, resp_cls = e["response"]
        assert req_mod.rsplit("_", 1)[0] == resp_mod.rsplit("_", 1)[0], (req_mod, resp_mod)
        lo, hi = e["versions"]
        lines.append(f"    {key}: ({e['name']!r}, {req_mod.rsplit('_', 1)[0]!r}, {req_cls!r}, {resp_cls!r}, "
                     f"{lo}, {hi}, {e['flexible_from']!r}),")
    lines.append("}")
    lines.append("")
    table = out_dir / "api_table.py"
    table.write_text("\n".join(lines))
    written.append(table)
    return written


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    root = Path(argv[0]) if argv else DEFAULT_SCHEMA_ROOT
    out = Path(argv[1]) if len(argv) > 1 else PACKAGE_DIR
    if not (root / "message").is_dir():
        print(f"no schemas at {root}/message", file=sys.stderr)
        return 2
    files = generate_all(root, out)
    print(f"wrote {len(files)} files under {os.path.relpath(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
