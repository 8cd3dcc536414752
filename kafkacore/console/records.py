"""The message browser: records of one partition (or all) from an offset, from a time, or the
newest ones, read with plain Fetch requests to each partition's leader, and shown safely.

Bytes become one of these (``show``), never raw bytes that could garble a page or a terminal:
  {"kind": "null"}
  {"kind": "empty"}
  {"kind": "json",   "text": pretty-printed JSON, "size": n}   UTF-8 text that parses as JSON
  {"kind": "text",   "text": the text, "size": n}              other UTF-8 text
  {"kind": "binary", "text": escaped (\\x00...), "hex": "00 01 ..", "base64": exact bytes, "size": n}
Shown text is cut at MAX_SHOWN_BYTES (``"truncated": true``); base64 always holds every byte.
"""
from __future__ import annotations

import base64
import json

from ..client.admin import EARLIEST, LATEST
from ..client.consumer import decode_records
from ..errors import UnknownTopicOrPartitionError, error_for_code
from ..protocol.api_table import ApiKey
from ..protocol.frames import request_class
from ..tools.output import show_bytes

_FetchRequest = request_class(ApiKey.FETCH)
_fm = __import__("kafkacore.protocol.messages.fetch_request", fromlist=["x"])
_FetchTopic, _FetchPartition = _fm.FetchTopic, _fm.FetchPartition

MAX_RECORDS = 500            # the most one browse returns
DEFAULT_RECORDS = 50
MAX_SHOWN_BYTES = 64 * 1024  # of each key, value or header value, as text
FETCH_BYTES = 1 << 20        # per Fetch; the broker sends at least one whole batch anyway
MODES = ("newest", "offset", "timestamp")
TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


class BrowseError(ValueError):
    """A request the browser cannot answer as asked (bad partition, offset out of range);
    the message says what was wrong and what is possible."""


def show(data) -> dict:
    """Bytes (or None) as a JSON-safe description; see the module docstring."""
    if data is None:
        return {"kind": "null"}
    data = bytes(data)
    if not data:
        return {"kind": "empty", "size": 0}
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
            doc = _NOT_JSON
        if doc is not _NOT_JSON and isinstance(doc, (dict, list)):
            pretty = json.dumps(doc, indent=2, ensure_ascii=False)
            out.update(kind="json", text=pretty[:MAX_SHOWN_BYTES])
            if len(pretty) > MAX_SHOWN_BYTES:
                out["truncated"] = True
            return out
        out.update(kind="text", text=shown.decode("utf-8", errors="ignore"))
        return out
    out.update(kind="binary", text=show_bytes(shown), hex=shown.hex(" "), base64=base64.b64encode(data).decode())
    return out


_NOT_JSON = object()


def _readable(text: str) -> bool:
    """Text a person can read: printable apart from line breaks and tabs (a NUL or an escape
    sequence makes it binary, shown escaped)."""
    return all(c.isprintable() or c in "\n\r\t" for c in text)


def record_view(rec) -> dict:
    return {"partition": rec.partition, "offset": rec.offset, "timestamp": rec.timestamp_ms,
            "timestamp_type": TIMESTAMP_TYPES.get(rec.timestamp_type, str(rec.timestamp_type)),
            "key": show(rec.key), "value": show(rec.value),
            "headers": [{"key": k, "value": show(v)} for k, v in (rec.headers or ())]}


def parse_limit(text) -> int:
    if text in (None, ""):
        return DEFAULT_RECORDS
    n = _whole(text, "limit")
    if not 1 <= n <= MAX_RECORDS:
        raise BrowseError(f"limit must be between 1 and {MAX_RECORDS}, not {n}")
    return n


def _whole(text, what) -> int:
    try:
        return int(str(text).strip())
    except ValueError:
        raise BrowseError(f"{what} must be a whole number, not {text!r}") from None


def browse(admin, topic: str, mode: str = "newest", partition=None, offset=None, timestamp=None,
           limit: int = DEFAULT_RECORDS) -> dict:
    """Records of ``topic``:
      newest:    the last ``limit`` records (of ``partition``, or of all partitions merged), newest first;
      offset:    ``limit`` records of ``partition`` from ``offset`` on;
      timestamp: ``limit`` records from the first one at ``timestamp`` (ms) or later, oldest first.
    Returns {"topic", "mode", "partitions": {p: {"start", "end"}}, "records": [record_view]}."""
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

    if mode == "offset":
        p = chosen[0]
        first = _whole(offset, "offset")
        lo, hi = bounds[p]
        if not lo <= first <= hi:
            span = f"{lo}-{hi - 1}" if hi > lo else f"none yet, the next is {hi}"
            raise BrowseError(f"offset {first} is outside partition {p}'s records (offsets {span})")
        plan = {p: first}
    elif mode == "timestamp":
        ts = _whole(timestamp, "timestamp")
        found = admin.list_offsets({tp: ts for tp in tps})
        plan = {p: found[(topic, p)].offset for p in chosen if found[(topic, p)].offset >= 0}
    else:
        plan = {p: max(lo, hi - limit) for p, (lo, hi) in bounds.items()}

    records = []
    for p, first in plan.items():
        records += _read(admin, topic, p, leaders[p], first, bounds[p][1], limit)
    if mode == "newest":
        records.sort(key=lambda r: (r.timestamp_ms, r.offset), reverse=True)
    elif mode == "timestamp":
        records.sort(key=lambda r: (r.timestamp_ms, r.partition, r.offset))
    records = records[:limit]
    return {"topic": topic, "mode": mode,
            "partitions": {str(p): {"start": lo, "end": hi} for p, (lo, hi) in bounds.items()},
            "records": [record_view(r) for r in records]}


def _read(admin, topic, partition, leader, first, end, limit) -> list:
    """Up to ``limit`` records of one partition from ``first``, stopping at ``end`` (the high
    watermark when the browse started)."""
    out = []
    position = first
    while len(out) < limit and position < end:
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
        out += recs[:limit - len(out)]
        if recs:
            next_offset = max(next_offset, recs[-1].offset + 1)
        if next_offset <= position:
            break  # a partial batch or a corrupt one: what was decoded is what there is
        position = next_offset
    return out
