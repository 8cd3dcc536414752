"""Printing results: aligned tables for people, JSON for scripts, and bytes shown safely."""
from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta, timezone


def show_bytes(data) -> str | None:
    """Record bytes as text: UTF-8 when they are, else Python's escaped form (b'\\x00...')
    without the b'' wrapper, so binary never garbles a terminal."""
    if data is None:
        return None
    data = bytes(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return repr(data)[2:-1]
    if text.isprintable() or text.replace("\t", "").isprintable():  # tabs are fine too (C speed, no per-char loop)
        return text
    return text.encode("unicode_escape").decode("ascii")


def iso_utc(ms) -> str | None:
    """A Kafka timestamp (ms since the epoch) as ISO-8601 UTC, e.g. 2024-05-01T12:00:00.250Z;
    None for Kafka's "no timestamp" (-1)."""
    if ms is None or ms < 0:
        return None
    # whole seconds and milliseconds apart: ms / 1000 as a float can print a millisecond early
    moment = datetime.fromtimestamp(ms // 1000, tz=timezone.utc) + timedelta(milliseconds=ms % 1000)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def human_bytes(n) -> str | None:
    """A byte count for people: 0 B, 512 B, 1.5 KiB, 20.0 MiB... (binary units); None stays None."""
    if n is None:
        return None
    if n < 1024:
        return f"{n} B"
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        n /= 1024
        if n < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}"


def table(rows, columns, out=None) -> None:
    """Rows (dicts or sequences) under upper-case headers, columns padded to fit; numbers
    right-aligned. ``columns``: [(key or index, header)]."""
    out = out or sys.stdout
    cells = [[_cell(_get(r, k)) for k, _ in columns] for r in rows]
    heads = [h for _, h in columns]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(heads)]
    numeric = [bool(cells) and all(_is_number(_get(r, k)) for r in rows) for k, _ in columns]
    out.write("  ".join(h.ljust(w) for h, w in zip(heads, widths)).rstrip() + "\n")
    for c in cells:
        out.write("  ".join((v.rjust(w) if num else v.ljust(w)) for v, w, num in zip(c, widths, numeric)).rstrip()
                  + "\n")


def emit(args, obj, rows=None, columns=None, out=None) -> None:
    """``obj`` as JSON (-o json: one document; -o jsonl: one line per element of ``rows`` or of
    ``obj`` when it is a list), or ``rows`` as a table (-o table)."""
    out = out or sys.stdout
    fmt = getattr(args, "output", "table")
    if fmt == "json":
        out.write(json.dumps(obj, indent=2, default=_json_default) + "\n")
    elif fmt == "jsonl":
        items = obj if isinstance(obj, list) else [obj]
        for item in items:
            out.write(json.dumps(item, default=_json_default) + "\n")
    else:
        table(rows if rows is not None else obj, columns, out)


def report(args, obj, line: str, out=None) -> None:
    """The outcome of a change: ``line`` for people, ``obj`` for -o json/jsonl."""
    if getattr(args, "output", "table") == "table":
        (out or sys.stdout).write(line + "\n")
    else:
        emit(args, obj, out=out)


def _get(row, key):
    if isinstance(row, dict):
        return row.get(key)
    if isinstance(key, int):
        return row[key]
    return getattr(row, key)


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    return str(v)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) or v is None


def _json_default(v):
    if isinstance(v, (bytes, bytearray, memoryview)):
        return show_bytes(v)
    if hasattr(v, "__dataclass_fields__"):
        return {k: getattr(v, k) for k in v.__dataclass_fields__}
    if isinstance(v, (set, frozenset, tuple)):
        return list(v)
    raise TypeError(f"{type(v).__name__} is not JSON serialisable")
