"""The message browser: records of one partition (or all) from an offset, from a time, or the
newest ones, read with plain Fetch requests to each partition's leader, optionally searched
(record_filter.py) over a bounded scan, and shown safely.

Bytes become one of these (``show``), never raw bytes that could garble a page or a terminal:
  {"kind": "null"}
  {"kind": "empty"}
  {"kind": "json",   "text": pretty-printed JSON, "size": n}   UTF-8 text that parses as JSON
  {"kind": "text",   "text": the text, "size": n}              other UTF-8 text
  {"kind": "binary", "text": escaped (\\x00...), "hex": "00 01 ..", "base64": exact bytes, "size": n}
Shown text is cut at MAX_SHOWN_BYTES (``"truncated": true``); base64 always holds every byte.
Confluent-framed bytes (schemas.py) add "schema_id" and "format" (json, avro), and a "note"
when they could not be decoded.
"""
from __future__ import annotations

import base64
import collections
import json

from ..client.admin import EARLIEST, LATEST
from ..client.consumer import decode_records
from ..errors import UnknownTopicOrPartitionError, error_for_code
from ..protocol.api_table import ApiKey
from ..protocol.frames import request_class
from ..tools.output import show_bytes
from .record_filter import MISSING, RecordFilter
from .schemas import describe_framed, unframe

_FetchRequest = request_class(ApiKey.FETCH)
_fm = __import__("kafkacore.protocol.messages.fetch_request", fromlist=["x"])
_FetchTopic, _FetchPartition = _fm.FetchTopic, _fm.FetchPartition

MAX_RECORDS = 500            # the most one browse returns
DEFAULT_RECORDS = 50
DEFAULT_SCAN = 10_000        # the records a search reads at most, unless asked for more
MAX_SCAN = 100_000
MAX_SHOWN_BYTES = 64 * 1024  # of each key, value or header value, as text
FETCH_BYTES = 1 << 20        # per Fetch; the broker sends at least one whole batch anyway
MODES = ("newest", "offset", "timestamp")
TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


class BrowseError(ValueError):
    """A request the browser cannot answer as asked (bad partition, offset out of range);
    the message says what was wrong and what is possible."""


def show(data, schemas=None) -> dict:
    """Bytes (or None) as a JSON-safe description; see the module docstring."""
    return describe(data, schemas)[0]


def describe(data, schemas=None) -> tuple[dict, object]:
    """(``show``'s description, the bytes as a decoded JSON document or MISSING): the document
    is what a JSON path search looks at. ``schemas`` (a schemas.SchemaSource or None) decodes
    Confluent-framed Avro."""
    if data is None:
        return {"kind": "null"}, MISSING
    data = bytes(data)
    if not data:
        return {"kind": "empty", "size": 0}, MISSING
    framed = describe_framed(data, schemas, _describe_plain, json_view)
    return framed if framed is not None else _describe_plain(data)


def value_document(data, schemas=None):
    """``describe``'s document without its view (a search parses every value it reads, but
    shows only the ones it keeps): JSON text parsed, framed bytes decoded, else MISSING."""
    if not data:
        return MISSING
    data = bytes(data)
    if unframe(data) is not None:
        return describe(data, schemas)[1]
    try:
        return json.loads(data)  # (valid JSON holds no raw control characters: no _readable needed)
    except ValueError:  # (UnicodeDecodeError is one)
        return MISSING


def _describe_plain(data: bytes) -> tuple[dict, object]:
    size = len(data)
    shown = data[:MAX_SHOWN_BYTES]
    out = {"size": size}
    if size > MAX_SHOWN_BYTES:
        out["truncated"] = True
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and _readable(text):
        try:
            doc = json.loads(text)
        except ValueError:
            doc = MISSING
        if isinstance(doc, (dict, list)):
            out.update(json_view(doc))
            return out, doc
        out.update(kind="text", text=shown.decode("utf-8", errors="ignore"))
        return out, doc
    out.update(kind="binary", text=show_bytes(shown), hex=shown.hex(" "), base64=base64.b64encode(data).decode())
    return out, MISSING


def json_view(doc) -> dict:
    """{"kind": "json", "text": ...} of a JSON-safe document, pretty-printed and cut."""
    pretty = json.dumps(doc, indent=2, ensure_ascii=False)
    out = {"kind": "json", "text": pretty[:MAX_SHOWN_BYTES]}
    if len(pretty) > MAX_SHOWN_BYTES:
        out["truncated"] = True
    return out


def _readable(text: str) -> bool:
    """Text a person can read: printable apart from line breaks and tabs (a NUL or an escape
    sequence makes it binary, shown escaped)."""
    return all(c.isprintable() or c in "\n\r\t" for c in text)


def record_view(rec, schemas=None, value=None) -> dict:
    """A record as the API answers it; ``value`` its value's description when already made."""
    key = show(rec.key, schemas)
    value = value if value is not None else show(rec.value, schemas)
    headers = [{"key": k, "value": show(v)} for k, v in (rec.headers or ())]
    size = (key.get("size", 0) + value.get("size", 0) +
            sum(len(h["key"].encode()) + h["value"].get("size", 0) for h in headers))
    return {"partition": rec.partition, "offset": rec.offset, "timestamp": rec.timestamp_ms,
            "timestamp_type": TIMESTAMP_TYPES.get(rec.timestamp_type, str(rec.timestamp_type)),
            "key": key, "value": value, "headers": headers, "size": size}


def parse_limit(text) -> int:
    return _bounded(text, "limit", DEFAULT_RECORDS, MAX_RECORDS)


def parse_scan(text) -> int:
    return _bounded(text, "scan", DEFAULT_SCAN, MAX_SCAN)


def _bounded(text, what, default, most) -> int:
    if text in (None, ""):
        return default
    n = _whole(text, what)
    if not 1 <= n <= most:
        raise BrowseError(f"{what} must be between 1 and {most:,}, not {n}")
    return n


def _whole(text, what) -> int:
    try:
        return int(str(text).strip())
    except ValueError:
        raise BrowseError(f"{what} must be a whole number, not {text!r}") from None


def browse(admin, topic: str, mode: str = "newest", partition=None, offset=None, timestamp=None,
           limit: int = DEFAULT_RECORDS, search: RecordFilter | None = None, scan: int = DEFAULT_SCAN,
           schemas=None) -> dict:
    """Records of ``topic``:
      newest:    the last ``limit`` records (of ``partition``, or of all partitions merged), newest first;
      offset:    ``limit`` records of ``partition`` from ``offset`` on;
      timestamp: ``limit`` records from the first one at ``timestamp`` (ms) or later, oldest first.
    With an active ``search``, the records it matches among at most ``scan`` records read
    (shared evenly between the partitions): newest reads each partition's last records, the
    others read on from their starting point and stop once ``limit`` records matched.
    Returns {"topic", "mode", "partitions": {p: {"start", "end"}}, "records": [record_view],
    "scan": {"searched", "scanned", "total", "limit", "complete"}}: ``total`` is the number of
    offsets from the starting points to the ends (what a scan without a bound would read)."""
    if mode not in MODES:
        raise BrowseError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    info = admin.describe_topics([topic])[topic]
    leaders = {p.partition: p.leader for p in info.partitions}
    if partition in (None, "", "all"):
        if mode == "offset":
            raise BrowseError("reading from an offset needs a partition")
        chosen = sorted(leaders)
    else:
        p = _whole(partition, "partition")
        if p not in leaders:
            raise BrowseError(f"topic {topic!r} has no partition {p} (it has {len(leaders)}: 0-{len(leaders) - 1})")
        chosen = [p]
    offline = [p for p in chosen if leaders[p] < 0]
    if offline:
        raise BrowseError(f"partition {offline[0]} of {topic!r} has no leader (offline): its records cannot be read now")
    tps = [(topic, p) for p in chosen]
    starts = admin.list_offsets({tp: EARLIEST for tp in tps})
    ends = admin.list_offsets({tp: LATEST for tp in tps})
    bounds = {p: (starts[(topic, p)].offset, ends[(topic, p)].offset) for p in chosen}
    searching = search is not None and search.active
    share = max(1, scan // len(chosen)) if searching else limit

    if mode == "offset":
        p = chosen[0]
        first = _whole(offset, "offset")
        lo, hi = bounds[p]
        if not lo <= first <= hi:
            span = f"{lo}-{hi - 1}" if hi > lo else f"none yet, the next is {hi}"
            raise BrowseError(f"offset {first} is outside partition {p}'s records (offsets {span})")
        origin = {p: first}
    elif mode == "timestamp":
        ts = _whole(timestamp, "timestamp")
        found = admin.list_offsets({tp: ts for tp in tps})
        # a partition with nothing at or after the time starts at its end: nothing to read there
        origin = {p: found[(topic, p)].offset if found[(topic, p)].offset >= 0 else bounds[p][1] for p in chosen}
    else:
        origin = {p: lo for p, (lo, _hi) in bounds.items()}
    plan = {p: max(lo, bounds[p][1] - share) for p, lo in origin.items()} if mode == "newest" else origin

    def keep(rec):
        # the search first, on the bytes and the parsed value; views only for the records kept
        parsed = []
        def document():
            if not parsed:
                parsed.append(value_document(rec.value, schemas))
            return parsed[0]
        if searching and not search.matches(rec, document):
            return None
        return record_view(rec, schemas)

    views, scanned = [], 0
    for p, first in plan.items():
        found, n = _read(admin, topic, p, leaders[p], first, bounds[p][1], share,
                         None if mode == "newest" else limit, keep, limit)
        views += found
        scanned += n
    if mode == "newest":
        views.sort(key=lambda r: (r["timestamp"], r["offset"]), reverse=True)
    elif mode == "timestamp":
        views.sort(key=lambda r: (r["timestamp"], r["partition"], r["offset"]))
    total = sum(max(0, bounds[p][1] - origin[p]) for p in chosen)
    return {"topic": topic, "mode": mode,
            "partitions": {str(p): {"start": lo, "end": hi} for p, (lo, hi) in bounds.items()},
            "records": views[:limit],
            "scan": {"searched": searching, "scanned": scanned, "total": total, "limit": scan if searching else limit,
                     "complete": scanned >= total}}


def _read(admin, topic, partition, leader, first, end, budget, want, keep, newest) -> tuple[list, int]:
    """(kept views, records read) of one partition from ``first``: reads at most ``budget``
    records, stopping at ``end`` (the high watermark when the browse started) or once ``want``
    were kept (None: read the whole budget and keep the last ``newest`` kept)."""
    out = collections.deque(maxlen=newest if want is None else None)
    scanned = 0
    position = first
    while scanned < budget and (want is None or len(out) < want) and position < end:
        part = _FetchPartition(partition=partition, current_leader_epoch=-1, fetch_offset=position,
                               last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=FETCH_BYTES)
        body = _FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=FETCH_BYTES, isolation_level=0,
                             session_id=0, session_epoch=-1,
                             topics=[_FetchTopic(topic=topic, partitions=[part])], forgotten_topics_data=[],
                             rack_id="")
        resp = admin.call_node(leader, ApiKey.FETCH, body)
        if resp.error_code:
            raise error_for_code(resp.error_code, f"fetch {topic}-{partition}")
        answer = next((pp for t in resp.responses for pp in t.partitions if pp.partition_index == partition), None)
        if answer is None:
            raise UnknownTopicOrPartitionError(f"fetch {topic}-{partition}: the broker left the partition out")
        if answer.error_code:
            raise error_for_code(answer.error_code, f"fetch {topic}-{partition} at offset {position}")
        data = answer.records
        if data is None or len(data) == 0:
            break  # nothing more below the high watermark (e.g. only aborted or compacted away)
        recs, next_offset, _error = decode_records(data, topic, partition, position, True, None)
        for rec in recs:
            if rec.offset >= end or scanned >= budget or (want is not None and len(out) >= want):
                break
            scanned += 1
            view = keep(rec)
            if view is not None:
                out.append(view)
        if recs:
            next_offset = max(next_offset, recs[-1].offset + 1)
        if next_offset <= position:
            break  # a partial batch or a corrupt one: what was decoded is what there is
        position = next_offset
    return list(out), scanned
