"""The generated protocol codecs against an independent implementation, kafka-python 3.

kafka-python 3's ``kafka.protocol`` is its own code (its own field codecs, its own compiled
encoders and decoders) built from its own copy of Kafka's schemas. Here:

1. codecs: for 26 APIs, at every version both implementations speak, a populated request and
   response (non-empty arrays, nullable values all set, all null and every third one null, tagged
   fields set, non-ASCII strings, distinct values per field so that swapped fields show) is
   encoded by kafka-python, decoded by kafkacore (values compared), re-encoded by kafkacore
   (bytes compared); and the other way round: kafkacore encodes, kafka-python decodes (values
   compared) and re-encodes (bytes compared);
2. framing: kafka-python's request frames (header v1 and v2) through ``frames.decode_request``;
   ``frames.encode_response`` through kafka-python's own response parsing (``KafkaProtocol``:
   header v0 for ApiVersions at every version, v1 for other flexible versions);
3. fuzz: ``frames.decode_request`` on arbitrary bytes and on mangled valid requests of every
   API key and version raises nothing but ``ProtocolDecodeError``; a huge claimed count fails
   fast without allocating.

The values come from Kafka's JSON schemas (``DEFAULT_SCHEMA_ROOT``), read here independently of
the generator; the only thing taken from the generator is its field naming (``snake``).
"""
from __future__ import annotations

import importlib
import json
import re
import struct
import time
import tracemalloc
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkacore.protocol import frames
from kafkacore.protocol.api_table import API_TABLE
from kafkacore.protocol.generator import DEFAULT_SCHEMA_ROOT, NEWER_SCHEMA_ROOT, snake
from kafkacore.protocol.wire import ProtocolDecodeError, Reader, Writer

pytest.importorskip("kafka.protocol.api_message", reason="kafka-python 3 is not installed")
from kafka.protocol.api_message import ApiMessage  # noqa: E402
from kafka.protocol.parser import KafkaProtocol  # noqa: E402
from kafka.protocol.schemas.fields.codecs import BitField  # noqa: E402

SCHEMAS = DEFAULT_SCHEMA_ROOT / "message"
pytestmark = pytest.mark.skipif(not SCHEMAS.is_dir(), reason="../shared/kafka-protocol is not here")

APIS = [
    "Produce", "Fetch", "ListOffsets", "Metadata", "OffsetCommit", "OffsetFetch", "FindCoordinator",
    "JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup", "DescribeGroups", "ListGroups",
    "ApiVersions", "CreateTopics", "DeleteTopics", "DeleteRecords", "InitProducerId",
    "DescribeConfigs", "AlterConfigs", "IncrementalAlterConfigs", "CreatePartitions",
    "DeleteGroups", "OffsetDelete", "DescribeCluster", "OffsetForLeaderEpoch",
]
KEY_OF = {entry[0]: key for key, entry in API_TABLE.items()}
INT_RANGES = {"int8": 7, "int16": 15, "uint16": 16, "int32": 31, "int64": 63}
ZERO_UUID = bytes(16)
FUZZ = settings(max_examples=600, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# -- Kafka's schemas, read independently of the generator ---------------------------------------
def _range(text) -> tuple[int, int]:
    text = str(text).strip()
    if text in ("none", ""):
        return 1, 0
    if text.endswith("+"):
        return int(text[:-1]), 0x7FFF
    lo, _, hi = text.partition("-")
    return int(lo), int(hi or lo)


def _in(text, v) -> bool:
    lo, hi = _range(text)
    return lo <= v <= hi


class Schema:
    _cache: dict = {}

    def __init__(self, name):
        # a schema newer than ../shared's (kafkacore/protocol/newer_schemas) replaces it, as in the generator
        newer = NEWER_SCHEMA_ROOT / "message" / f"{name}.json"
        path = newer if newer.exists() else SCHEMAS / f"{name}.json"
        raw = json.loads(re.sub(r"(?m)^\s*//.*$", "", path.read_text()))
        self.name = name
        self.json = raw
        self.common = {c["name"]: c["fields"] for c in raw.get("commonStructs", [])}
        self.lo, self.hi = _range(raw["validVersions"])
        self.flexible = _range(raw.get("flexibleVersions", "none"))

    @classmethod
    def get(cls, name) -> "Schema":
        if name not in cls._cache:
            cls._cache[name] = Schema(name)
        return cls._cache[name]

    def module(self):
        return importlib.import_module(f"kafkacore.protocol.messages.{snake(self.name).rstrip('_')}")

    def subfields(self, f):
        return f.get("fields") or self.common[_elem(f)]

    def is_flexible(self, v) -> bool:
        return self.flexible[0] <= v <= self.flexible[1]


def _elem(f) -> str:
    t = f["type"]
    return t[2:] if t.startswith("[]") else t


def _is_struct(f) -> bool:
    return _elem(f)[0].isupper()


def _tagged(f, v) -> bool:
    return "tag" in f and _in(f.get("taggedVersions", "none"), v)


def _present(fields, v):
    return [f for f in fields if _in(f.get("versions", "0+"), v)]


# -- populated values ------------------------------------------------------------------------------
# A value tree is a dict {JSON field name: value} holding the fields present at the version;
# structs are dicts, arrays lists, scalars plain Python (uuid as 16 bytes, records as bytes).
# Every scalar gets a different value so that a field read into another's place shows.
OVERRIDES = {
    # kafka-python decodes an ApiVersionsResponse carrying an error as v0 (KIP-511 fallback)
    ("ApiVersionsResponse", "ErrorCode"): 0,
    # acks=0 produce requests get no response (the framing test waits for one)
    ("ProduceRequest", "Acks"): -1,
}


NULLS = ("set", "null", "mixed")  # nullable values: all set, all null, every third one null


class Values:
    def __init__(self, schema: Schema, v: int, nulls: str):
        self.schema, self.v, self.nulls, self.n, self.nullables = schema, v, nulls, 0, 0

    def null(self, f) -> bool:
        if not _in(f.get("nullableVersions", "none"), self.v):
            return False
        self.nullables += 1
        return self.nulls == "null" or (self.nulls == "mixed" and self.nullables % 3 == 0)

    def struct(self, fields) -> dict:
        out = {}
        for f in _present(fields, self.v):
            key = (self.schema.name, f["name"])
            if key in OVERRIDES:
                out[f["name"]] = OVERRIDES[key]
            elif self.null(f):
                out[f["name"]] = None
            elif f["type"].startswith("[]"):
                out[f["name"]] = [self.one(f) for _ in range(2)]
            else:
                out[f["name"]] = self.one(f)
        return out

    def one(self, f):
        if _is_struct(f):
            return self.struct(self.schema.subfields(f))
        self.n += 1
        n, t = self.n, _elem(f)
        if t in INT_RANGES:
            bits = INT_RANGES[t]
            value = (n * 2654435761) % (1 << bits) or 1
            if t != "uint16" and n % 3 == 0:
                value = -value
        elif t == "bool":
            value = str(f.get("default", "false")).lower() != "true"  # never the default
        elif t == "float64":
            value = n + 0.25
        elif t == "string":
            value = f"{f['name']}-ñ{n}-€𝄞"
        elif t == "uuid":
            value = struct.pack(">QQ", 0x0123456789ABCDEF + n, n)
        elif t in ("bytes", "records"):
            value = bytes([n % 256, 0, 255]) * (n % 4 + 1)
        else:
            raise AssertionError(f"unknown type {t}")
        return value


def values(schema: Schema, v: int, nulls: str = "set") -> dict:
    return Values(schema, v, nulls).struct(schema.json["fields"])


# -- value trees <-> kafkacore objects -------------------------------------------------------------
def to_ours(schema: Schema, tree: dict, v: int):
    mod = schema.module()

    def build(cls, fields, tree):
        kwargs = {}
        for f in _present(fields, v):
            val = tree[f["name"]]
            if _is_struct(f) and val is not None:
                sub = getattr(mod, _elem(f))
                sf = schema.subfields(f)
                val = [build(sub, sf, e) for e in val] if f["type"].startswith("[]") else build(sub, sf, val)
            kwargs[snake(f["name"])] = val
        return cls(**kwargs)

    return build(getattr(mod, schema.name), schema.json["fields"], tree)


def from_ours(schema: Schema, obj, v: int) -> dict:
    def walk(fields, obj):
        out = {}
        for f in _present(fields, v):
            val = getattr(obj, snake(f["name"]))
            if val is not None:
                if _is_struct(f):
                    sf = schema.subfields(f)
                    val = [walk(sf, e) for e in val] if f["type"].startswith("[]") else walk(sf, val)
                elif isinstance(val, memoryview):
                    val = bytes(val)
            out[f["name"]] = val
        return out

    return walk(schema.json["fields"], obj)


# -- value trees <-> kafka-python objects ----------------------------------------------------------
def _kp_pairs(schema: Schema, fields, kstruct, v):
    """(schema field, kafka-python field) pairs at version v: untagged fields in order, tagged
    ones by tag. By position, not name: kafka-python renames a few fields (json_patch)."""
    ours = _present(fields, v)
    untagged = [f for f in ours if not _tagged(f, v)]
    kuntagged = kstruct.untagged_fields(v)
    assert len(untagged) == len(kuntagged), (schema.name, v, [f["name"] for f in untagged], kuntagged)
    pairs = list(zip(untagged, kuntagged))
    ktagged = {f.tag: f for f in kstruct.tagged_fields(v)._fields}
    for f in ours:
        if _tagged(f, v):
            assert f["tag"] in ktagged, f"kafka-python lacks tagged field {f['name']} of {schema.name} v{v}"
            pairs.append((f, ktagged[f["tag"]]))
    return pairs


def _kp_scalar_in(kf, val):
    if val is None:
        return None
    if getattr(kf, "_type", None) is BitField:
        return None if val == -(1 << 31) else {b for b in range(32) if (val >> b) & 1}
    if kf.type_str == "uuid":
        return uuid.UUID(bytes=val)
    return val


def _kp_scalar_out(kf, val):
    if getattr(kf, "_type", None) is BitField:
        if val is None:
            return -(1 << 31)
        n = sum(1 << b for b in val)
        return n - (1 << 32) if n >= 1 << 31 else n
    if kf.type_str == "uuid":  # kafka-python reads the zero uuid as None
        return ZERO_UUID if val is None else val.bytes
    if isinstance(val, (memoryview, bytearray)):
        return bytes(val)
    return val


def to_kp(schema: Schema, kcls, tree: dict, v: int):
    def kwargs(fields, kstruct, tree):
        out = {}
        for f, kf in _kp_pairs(schema, fields, kstruct, v):
            val = tree[f["name"]]
            if _is_struct(f) and val is not None:
                sf = schema.subfields(f)
                if f["type"].startswith("[]"):
                    val = [kf.data_class(**kwargs(sf, kf, e)) for e in val]
                else:
                    val = kf.data_class(**kwargs(sf, kf, val))
            else:
                val = _kp_scalar_in(kf, val)
            out[kf.name] = val
        return out

    return kcls(version=v, **kwargs(schema.json["fields"], kcls._struct, tree))


def from_kp(schema: Schema, kobj, v: int) -> dict:
    def walk(fields, kstruct, obj):
        out = {}
        for f, kf in _kp_pairs(schema, fields, kstruct, v):
            val = getattr(obj, kf.name)
            if _is_struct(f) and val is not None:
                sf = schema.subfields(f)
                val = [walk(sf, kf, e) for e in val] if f["type"].startswith("[]") else walk(sf, kf, val)
            else:
                val = _kp_scalar_out(kf, val)
            out[f["name"]] = val
        return out

    return walk(schema.json["fields"], type(kobj)._struct, kobj)


# -- kafka-python's classes ------------------------------------------------------------------------
def _kp_classes() -> dict:
    found = {}
    for pkg in ("admin", "consumer", "metadata", "producer"):
        mod = importlib.import_module(f"kafka.protocol.{pkg}")
        for obj in vars(mod).values():
            if (isinstance(obj, type) and issubclass(obj, ApiMessage) and obj is not ApiMessage
                    and obj._class_version is None):
                found[obj.name] = obj
    return found


KP = _kp_classes()


def _kp_class(name: str, v: int):
    kcls = KP.get(name)
    if kcls is None:
        pytest.skip(f"kafka-python has no {name}")
    if not 0 <= v <= kcls.max_version:
        pytest.skip(f"kafka-python's {name} stops at v{kcls.max_version}")
    return kcls


def _encode_ours(obj, v) -> bytes:
    w = Writer()
    obj.write(w, v)
    return bytes(w.buf)


def _decode_ours(cls, data, v):
    r = Reader(data)
    obj = cls.read(r, v)
    assert r.remaining() == 0, f"{r.remaining()} bytes left over"
    return obj


CODEC_CASES = [
    pytest.param(api, kind, v, id=f"{api}{kind}-v{v}")
    for api in APIS for kind in ("Request", "Response")
    for v in range(API_TABLE[KEY_OF[api]][4], API_TABLE[KEY_OF[api]][5] + 1)
]


@pytest.mark.parametrize("api,kind,v", CODEC_CASES)
def test_kafka_python_encodes_kafkacore_decodes_and_reencodes_identically(api, kind, v):
    schema = Schema.get(api + kind)
    kcls = _kp_class(schema.name, v)
    cls = getattr(schema.module(), schema.name)
    for nulls in NULLS:
        tree = values(schema, v, nulls)
        data = bytes(to_kp(schema, kcls, tree, v).encode(version=v))
        ours = _decode_ours(cls, data, v)
        assert from_ours(schema, ours, v) == tree
        assert _encode_ours(ours, v) == data


@pytest.mark.parametrize("api,kind,v", CODEC_CASES)
def test_kafkacore_encodes_kafka_python_decodes_the_same_values(api, kind, v):
    schema = Schema.get(api + kind)
    kcls = _kp_class(schema.name, v)
    for nulls in NULLS:
        tree = values(schema, v, nulls)
        data = _encode_ours(to_ours(schema, tree, v), v)
        theirs = kcls.decode(data, version=v)
        assert from_kp(schema, theirs, v) == tree
        theirs._header = None  # kafka-python's decode leaves this slot unset; encode() reads it
        assert bytes(theirs.encode(version=v)) == data


# -- 2. framing --------------------------------------------------------------------------------------
def _framing_versions(api) -> list[int]:
    """The newest non-flexible and the newest flexible version of an API."""
    _, _, _, _, lo, hi, flex = API_TABLE[KEY_OF[api]]
    out = []
    if flex is None or flex > lo:
        out.append(hi if flex is None else flex - 1)
    if flex is not None:
        out.append(hi)
    return out


REQUEST_FRAMES = [pytest.param(api, v, id=f"{api}-v{v}") for api in APIS for v in _framing_versions(api)]
RESPONSE_FRAMES = [pytest.param("ApiVersions", v, id=f"ApiVersions-v{v}") for v in range(0, 5)] + [
    p for p in REQUEST_FRAMES if p.values[0] != "ApiVersions"]


@pytest.mark.parametrize("client_id", ["kafkacore-tëst", "", None])
@pytest.mark.parametrize("api,v", REQUEST_FRAMES)
def test_kafka_python_request_frames_decode(api, v, client_id):
    key = KEY_OF[api]
    schema = Schema.get(api + "Request")
    kreq = to_kp(schema, _kp_class(schema.name, v), tree := values(schema, v), v)
    kreq.with_header(correlation_id=0x5EED0000 + v, client_id=client_id)
    frame = bytes(kreq.encode(header=True, framed=True))
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    assert frames.request_header_version(key, v) == (2 if schema.is_flexible(v) else 1)

    header, body = frames.decode_request(memoryview(frame)[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == \
        (key, v, 0x5EED0000 + v, client_id)
    assert from_ours(schema, body, v) == tree
    assert frames.encode_request(header, body) == frame


def test_flexible_request_header_skips_tagged_fields():
    schema = Schema.get("MetadataRequest")
    body = _encode_ours(to_ours(schema, tree := values(schema, 12), 12), 12)
    head = struct.pack(">hhih", 3, 12, 7, 3) + b"abc"
    tags = b"\x02" + b"\x00\x03xyz" + b"\x81\x01\x00"  # two unknown tagged fields (tags 0 and 129)
    header, req = frames.decode_request(head + tags + body)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (3, 12, 7, "abc")
    assert from_ours(schema, req, 12) == tree


def test_controlled_shutdown_v0_has_request_header_v0():
    # Kafka's generator special case (ApiMessageTypeGenerator): ControlledShutdownRequest v0 has
    # a header without client id; v1+ use the standard headers.
    assert frames.request_header_version(7, 0) == 0
    assert frames.request_header_version(7, 1) == 1
    assert frames.request_header_version(7, 3) == 2
    frame = struct.pack(">hhii", 7, 0, 42, 1001)
    header, req = frames.decode_request(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (7, 0, 42, None)
    assert req.broker_id == 1001
    assert frames.encode_request(header, req)[4:] == frame
    header, req = frames.decode_request(struct.pack(">hhih", 7, 1, 43, 1) + b"c" + struct.pack(">i", 1002))
    assert (header.client_id, req.broker_id) == ("c", 1002)


@pytest.mark.parametrize("api,v", RESPONSE_FRAMES)
def test_kafka_python_parses_encoded_responses(api, v):
    key = KEY_OF[api]
    req_schema, schema = Schema.get(api + "Request"), Schema.get(api + "Response")
    kreq = to_kp(req_schema, _kp_class(req_schema.name, v), values(req_schema, v), v)
    _kp_class(schema.name, v)  # (skips if kafka-python lacks it)
    client = KafkaProtocol(client_id="kafkacore-test")
    correlation_id = client.send_request(kreq)
    client.send_bytes()

    tree = values(schema, v)
    w = frames.encode_response(key, v, correlation_id, to_ours(schema, tree, v))
    data = b"".join(bytes(p) for p in w.parts())
    hv = 0 if api == "ApiVersions" or not schema.is_flexible(v) else 1
    assert frames.response_header_version(key, v) == hv
    assert struct.unpack_from(">ii", data) == (len(data) - 4, correlation_id)
    if hv:
        assert data[8] == 0  # the header's (empty) tagged fields

    got = client.receive_bytes(data[:5]) + client.receive_bytes(data[5:])  # as off a socket
    assert len(got) == 1 and got[0][0] == correlation_id
    assert from_kp(schema, got[0][1], v) == tree
    cid, ours = frames.decode_response(key, v, data[4:])
    assert cid == correlation_id and from_ours(schema, ours, v) == tree


# -- every API kafkacore knows, round trip (no kafka-python needed) ---------------------------------
KEY_VERSIONS = [(key, v) for key, e in sorted(API_TABLE.items()) for v in range(e[4], e[5] + 1)]


def _valid_frame(key, v):
    schema = Schema.get(API_TABLE[key][2])
    tree = values(schema, v, NULLS[v % 3])
    header = frames.RequestHeader(key, v, 1000 + v, None if v % 3 == 0 else "fuzz-ñ")
    return frames.encode_request(header, to_ours(schema, tree, v))[4:], tree


VALID_FRAMES = {kv: _valid_frame(*kv) for kv in KEY_VERSIONS} if SCHEMAS.is_dir() else {}


@pytest.mark.parametrize("key,v", KEY_VERSIONS, ids=[f"{API_TABLE[k][0]}-v{v}" for k, v in KEY_VERSIONS])
def test_every_request_round_trips_populated_values(key, v):
    frame, tree = VALID_FRAMES[key, v]
    header, body = frames.decode_request(frame)
    assert (header.api_key, header.api_version) == (key, v)
    assert from_ours(Schema.get(API_TABLE[key][2]), body, v) == tree
    assert frames.encode_request(header, body)[4:] == frame


# -- 3. fuzz -------------------------------------------------------------------------------------------
def _decode_or_reject(frame):
    """decode_request either succeeds or raises ProtocolDecodeError -- and that error comes from
    a bounds or validity check, not from a struct.error/IndexError caught on the way out."""
    try:
        frames.decode_request(frame)
    except ProtocolDecodeError as e:
        cause = e.__cause__
        assert cause is None or isinstance(cause, UnicodeDecodeError), f"wrapped {cause!r}"


@FUZZ
@given(st.one_of(
    st.binary(max_size=400),
    # any api key and version, a null client id: gets past the header more often
    st.builds(lambda key, v, rest: struct.pack(">hhih", key, v, 1, -1) + rest,
              st.integers(-2**15, 2**15 - 1), st.integers(-2**15, 2**15 - 1), st.binary(max_size=400))))
def test_fuzz_arbitrary_bytes(data):
    _decode_or_reject(data)


@pytest.mark.parametrize("key,v", [(-1, 0), (88, 0), (1000, 0), (3, 13), (3, -1), (18, 5), (0, 0x7FFF)])
def test_unknown_api_key_or_version_is_a_decode_error(key, v):
    with pytest.raises(ProtocolDecodeError):
        frames.decode_request(struct.pack(">hhih", key, v, 1, -1) + bytes(64))


def _header(key, v, correlation_id, client_id) -> bytes:
    w = Writer()
    w.buf += struct.pack(">hhi", key, v, correlation_id)
    if frames.request_header_version(key, v) >= 1:
        w.nullable_string(client_id)
    if frames.request_header_version(key, v) >= 2:
        w.uvarint(0)
    return bytes(w.buf)


@FUZZ
@given(st.sampled_from(KEY_VERSIONS), st.integers(-2**31, 2**31 - 1),
       st.one_of(st.none(), st.text(max_size=8)), st.binary(max_size=400))
def test_fuzz_arbitrary_body_behind_a_valid_header(kv, correlation_id, client_id, body):
    _decode_or_reject(_header(*kv, correlation_id, client_id) + body)


@st.composite
def mangled_frames(draw):
    kv = draw(st.sampled_from(KEY_VERSIONS))
    frame = bytearray(VALID_FRAMES[kv][0])
    keep_header = draw(st.booleans())  # most mangling should reach the body
    for _ in range(draw(st.integers(1, 4))):
        lo = 8 if keep_header and len(frame) > 8 else 0
        pos = draw(st.integers(lo, max(lo, len(frame))))
        op = draw(st.sampled_from(["flip", "byte", "int32", "varint", "truncate", "extend", "insert", "delete"]))
        if op == "flip" and pos < len(frame):
            frame[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "byte" and pos < len(frame):
            frame[pos] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF]))
        elif op == "int32":
            frame[pos:pos + 4] = draw(st.sampled_from([b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\x80\x00\x00\x00",
                                                        b"\xff\xfe\xff\xff", b"\x00\x00\x7f\xff"]))
        elif op == "varint":
            frame[pos:pos] = draw(st.sampled_from([b"\xff\xff\xff\xff\x07", b"\xff" * 9 + b"\x01", b"\xff" * 12,
                                                   b"\x80\x80\x80\x80\x10", b"\x00"]))
        elif op == "truncate":
            del frame[pos:]
        elif op == "extend":
            frame += draw(st.binary(min_size=1, max_size=16))
        elif op == "insert":
            frame[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del frame[pos:pos + draw(st.integers(1, 8))]
    return bytes(frame)


@FUZZ
@given(mangled_frames())
def test_fuzz_mangled_valid_requests(frame):
    _decode_or_reject(frame)


def _count_cases():
    def flex_header(key, v):
        return _header(key, v, 1, "c")

    int32_max = struct.pack(">i", 2**31 - 1)
    return {
        # Metadata v4: Topics ([]struct), int32 count
        "struct-array": _header(3, 4, 1, "c") + int32_max,
        # Metadata v12: Topics, compact count 2**31-1 (uvarint 2**31)
        "compact-struct-array": flex_header(3, 12) + b"\x80\x80\x80\x80\x08",
        # a 10-byte uvarint count (2**63-ish)
        "compact-huge-uvarint": flex_header(3, 12) + b"\xff" * 9 + b"\x01",
        # DescribeGroups v0: Groups ([]string)
        "string-array": _header(15, 0, 1, "c") + int32_max,
        # Produce v3: one topic, then PartitionData count 2**31-1 (nested struct array)
        "nested-struct-array": _header(0, 3, 1, "c") + b"\xff\xff" + struct.pack(">hii", 1, 1000, 1)
        + struct.pack(">h", 1) + b"t" + int32_max,
        # DescribeProducers v0: one topic, then PartitionIndexes ([]int32) claiming 2**31-1
        "int32-array": flex_header(61, 0) + b"\x02" + b"\x02t" + b"\x80\x80\x80\x80\x08",
        # []int32 whose count fits the remaining bytes but not 4 bytes per element
        "int32-array-short": flex_header(61, 0) + b"\x02" + b"\x02t" + b"\xe9\x07" + bytes(1000),
        # header tagged-field count 2**31
        "tagged-fields": struct.pack(">hhih", 3, 12, 1, 1) + b"c" + b"\x80\x80\x80\x80\x08",
        # string claiming 32767 bytes
        "string": _header(15, 0, 1, "c") + struct.pack(">ih", 1, 0x7FFF),
    }


@pytest.mark.parametrize("name", list(_count_cases()))
def test_huge_claimed_count_fails_fast_without_allocating(name):
    frame = _count_cases()[name]
    # arrays are refused on their count, before the first element is read
    match = "collection of" if "array" in name else None
    with pytest.raises(ProtocolDecodeError):
        frames.decode_request(frame)  # warm: imports the module
    tracemalloc.start()
    try:
        t0 = time.perf_counter()
        with pytest.raises(ProtocolDecodeError, match=match):
            frames.decode_request(frame)
        elapsed = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # refused on the count: (decoding 2**31 elements would take minutes); generous for a slow
    # build (AddressSanitizer) or a busy machine, the allocation bound below is the sharp check
    assert elapsed < 10, elapsed
    assert peak < 64 * 1024, peak
