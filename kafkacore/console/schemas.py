"""Confluent-framed keys and values in the message browser: recognised, their schema id shown,
JSON payloads decoded, Avro decoded when its schema is at hand.

Confluent's wire format (Confluent's Schema Registry docs, "Formats, Serializers, and
Deserializers" > "Wire format"): a magic byte 0, the schema id as a 4-byte big-endian integer,
then the payload - Avro binary, JSON text (the JSON Schema serializer) or Protobuf (message
indexes, then the message). Bytes are taken as framed when they start with 0 and hold more than
the 5-byte header: a heuristic, since plain binary can start with 0 too, so undecodable ones
stay binary, with the id and a one-line note.

Schemas come from a directory of ``<id>.avsc`` files (``--schema-dir``) and/or a Schema Registry
(``--schema-registry URL``): ``GET URL/schemas/ids/{id}`` answers {"schema": the schema as a
string, "schemaType": "AVRO" (when absent) | "JSON" | "PROTOBUF"} (Confluent's Schema Registry
API reference). Answers are kept for the console's life, failures for FAILURE_TTL_S, so a scan of
many records asks the registry once per id. Avro is decoded with fastavro, an optional
dependency (kafkacore's ``console`` extra); schema references to other subjects are not
followed.
"""
from __future__ import annotations

import datetime
import decimal
import io
import json
import os
import struct
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid

from ..clock import monotonic_ms
from ..tools.output import show_bytes
from .record_filter import MISSING

MAGIC_BYTE = 0
HEADER = struct.Struct(">bI")  # magic byte, schema id (Confluent's wire format)
REGISTRY_TIMEOUT_S = 5.0
FAILURE_TTL_S = 30.0
REGISTRY_ACCEPT = "application/vnd.schemaregistry.v1+json"
AVRO, JSON_SCHEMA, PROTOBUF = "AVRO", "JSON", "PROTOBUF"
INSTALL_HINT = "kafkacore's console extra, or fastavro alone"

try:
    import fastavro
except ImportError:  # an optional extra: without it Avro stays framed bytes, with a note
    fastavro = None


class SchemaUnavailable(Exception):
    """No schema for an id (not found, the registry unreachable, a bad file): the message says
    which, in one line."""


class Schema:
    def __init__(self, schema_id: int, schema_type: str, text: str):
        self.id = schema_id
        self.type = schema_type
        self.text = text
        self._parsed = None

    def avro_reader(self):
        """fastavro's parsed schema (parsed once)."""
        if self._parsed is None:
            try:
                self._parsed = fastavro.parse_schema(json.loads(self.text))
            except Exception as e:  # fastavro raises several kinds for a bad schema
                raise SchemaUnavailable(f"schema {self.id} is not a valid Avro schema: {e}") from None
        return self._parsed


class SchemaSource:
    """Schemas by id from ``directory`` (``<id>.avsc``, looked at first) and/or ``registry_url``."""

    def __init__(self, registry_url: str | None = None, directory: str | None = None):
        self.registry_url = registry_url.rstrip("/") if registry_url else None
        self.directory = directory
        self._found: dict[int, Schema] = {}
        self._failed: dict[int, tuple[float, str]] = {}  # id -> (when, message)
        self._lock = threading.Lock()

    def describe(self) -> str:
        parts = [f"registry {self.registry_url}" if self.registry_url else "",
                 f"directory {self.directory}" if self.directory else ""]
        return ", ".join(p for p in parts if p)

    def get(self, schema_id: int) -> Schema:
        with self._lock:
            if schema_id in self._found:
                return self._found[schema_id]
            failed = self._failed.get(schema_id)
            if failed and monotonic_ms() - failed[0] < FAILURE_TTL_S * 1000:
                raise SchemaUnavailable(failed[1])
        try:
            schema = self._load(schema_id)
        except SchemaUnavailable as e:
            with self._lock:
                self._failed[schema_id] = (monotonic_ms(), str(e))
            raise
        with self._lock:
            self._found[schema_id] = schema
        return schema

    def _load(self, schema_id: int) -> Schema:
        if self.directory:
            path = os.path.join(self.directory, f"{schema_id}.avsc")
            try:
                with open(path, encoding="utf-8") as f:
                    return Schema(schema_id, AVRO, f.read())
            except FileNotFoundError:
                pass
            except (OSError, UnicodeDecodeError) as e:
                raise SchemaUnavailable(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
        if not self.registry_url:
            raise SchemaUnavailable(f"schema {schema_id} is not in {self.directory}")
        url = f"{self.registry_url}/schemas/ids/{schema_id}"
        req = urllib.request.Request(url, headers={"Accept": REGISTRY_ACCEPT})
        try:
            with urllib.request.urlopen(req, timeout=REGISTRY_TIMEOUT_S) as resp:
                doc = json.loads(resp.read())
        except urllib.error.HTTPError as e:
            if e.code == 404:
                raise SchemaUnavailable(f"schema {schema_id} is not in the registry") from None
            raise SchemaUnavailable(f"the schema registry answered {e.code} for schema {schema_id}") from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", None) or e
            raise SchemaUnavailable(f"cannot reach the schema registry at {self.registry_url}: {reason}") from None
        except ValueError:
            raise SchemaUnavailable(f"the schema registry's answer for schema {schema_id} is not JSON") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("schema"), str):
            raise SchemaUnavailable(f"the schema registry's answer for schema {schema_id} has no schema")
        return Schema(schema_id, str(doc.get("schemaType") or AVRO).upper(), doc["schema"])


def check_registry_url(url: str) -> str:
    """The URL when it is one the console can ask (http or https, a host); else ValueError."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--schema-registry {url!r} is not an http:// or https:// URL")
    return url


def unframe(data: bytes):
    """(schema id, payload) of bytes in Confluent's wire format, or None."""
    if len(data) <= HEADER.size or data[0] != MAGIC_BYTE:
        return None
    _magic, schema_id = HEADER.unpack_from(data)
    return schema_id, data[HEADER.size:]


def describe_framed(data: bytes, source: SchemaSource | None, describe_plain, json_view):
    """(view, document) of framed bytes, or None when they are not framed (the caller shows them
    as they are). ``describe_plain(bytes)`` and ``json_view(doc)`` are records.py's."""
    framed = unframe(data)
    if framed is None:
        return None
    schema_id, payload = framed
    view, doc = describe_plain(payload)
    if view["kind"] == "json":
        # JSON Schema's serializer (or any JSON behind the header): the payload is JSON text
        view.update(size=len(data), schema_id=schema_id, format="json")
        return view, doc
    schema, problem = None, None
    if source is None:
        problem = "no schema at hand (start the console with --schema-registry URL or --schema-dir DIR)"
    else:
        try:
            schema = source.get(schema_id)
        except SchemaUnavailable as e:
            problem = str(e)
    if schema is not None:
        if schema.type != AVRO:
            problem = f"schema {schema_id} is {schema.type}: only Avro and JSON payloads are decoded"
        elif fastavro is None:
            problem = f"an Avro payload: decoding it needs fastavro ({INSTALL_HINT})"
        else:
            try:
                decoded = fastavro.schemaless_reader(io.BytesIO(payload), schema.avro_reader())
                doc = json.loads(json.dumps(decoded, default=_json_safe))
                out = {"size": len(data), **json_view(doc), "schema_id": schema_id, "format": "avro"}
                return out, doc
            except SchemaUnavailable as e:
                problem = str(e)
            except Exception as e:  # a payload that is not this schema's: fastavro raises many kinds
                problem = f"does not decode as Avro with schema {schema_id}: {type(e).__name__}: {e}"
    whole, _ = describe_plain(data)  # (binary: a NUL is not readable text)
    whole.update(schema_id=schema_id, note=f"Confluent-framed, schema id {schema_id}: {problem}")
    return whole, MISSING


def _json_safe(v):
    """Avro's values that JSON has no type for: bytes and fixed escaped as text, decimals and
    UUIDs as strings, dates and times in ISO 8601."""
    if isinstance(v, (bytes, bytearray)):
        return show_bytes(bytes(v))
    if isinstance(v, (decimal.Decimal, uuid.UUID)):
        return str(v)
    if isinstance(v, (datetime.datetime, datetime.date, datetime.time)):
        return v.isoformat()
    raise TypeError(f"{type(v).__name__} is not JSON serialisable")

