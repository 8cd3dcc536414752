"""``kafkacore consume TOPIC``: print a topic's records, through kafkacore's Consumer.

Where it starts, per partition:
  --from-beginning   the log start offset
  --offset N         offset N of --partition; a negative N means the last -N records of each
                     partition (``--offset -10``); ``earliest`` / ``latest`` are accepted too
  --from-time T      the first record with a timestamp at or after T (ISO-8601 or ms), found
                     with ListOffsets by timestamp; a partition with none starts at its end
  (none of these)    the group's committed offset with --group, else the beginning; with
                     --follow, the end (only new records), as kafka-console-consumer.sh does
With --group the committed offsets come first for --from-beginning and the default: the
option only says where a partition without one starts (auto.offset.reset, as Kafka's console
consumer). --offset and --from-time are explicit and always win.

Where it stops: without --follow, at the end of the partitions as they were when it started
(their high watermark, or last stable offset with read_committed), like kcat's -e, so
``kafkacore consume T`` prints what the topic holds and exits. With --follow it keeps waiting
for new records until Ctrl-C (or --timeout-ms without a record). --max-messages N stops after N.

--group G joins group G (subscribe, or assign with --partition) and commits the offsets of
what was printed: as it goes (enable.auto.commit) and when it stops. Without --group nothing is
committed anywhere.

Output: ``raw`` the value per line; ``json`` one object per line (topic, partition, offset,
timestamp, timestamp_type, key, value, headers as [key, value] pairs); or a template with named
fields such as ``'{offset} {key} {value}'`` (fields: topic partition offset timestamp time key
value headers; \\t and \\n are understood). Bytes are shown as text when they are UTF-8 and
printable, else escaped (output.show_bytes), so binary never garbles a terminal; a null key or
value prints as ``null``. Ctrl-C prints what was consumed and exits 130; a closed pipe
(``| head``) ends it quietly.
"""
from __future__ import annotations

import json
import os
import string
import sys
import time

from .clients import (TIMESTAMP_TYPES, add_property_option, check_partition, make_consumer, parse_time_ms,
                      properties, topic_partitions, unescape)
from .common import (EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_TERMINATED, EXIT_USAGE, ToolError,
                     interrupted_exit_code, plural, positive_int, sigterm_as_interrupt)
from .output import iso_utc, show_bytes

TEMPLATE_FIELDS = ("topic", "partition", "offset", "timestamp", "time", "key", "value", "headers")
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
POLL_TIMEOUT = 0.5  # seconds per poll: how quickly an end, a timeout or Ctrl-C is noticed
NULL = "null"  # how a null key or value prints outside JSON (kafka-console-consumer's way)


def register(sub, common):
    p = sub.add_parser(
        "consume", parents=[common], help="print a topic's records",
        description="Print the records of TOPIC. Without --follow it stops at the end of the partitions as they "
                    "were at start; with --follow it waits for new records until Ctrl-C.")
    p.add_argument("topic", metavar="TOPIC")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the log start offset")
    start.add_argument("--offset", metavar="N",
                       help="start at offset N (needs --partition); -N: the last N records of each partition; "
                            "earliest or latest")
    start.add_argument("--from-time", metavar="TIME",
                       help="start at the first record at or after TIME (ISO-8601, e.g. 2024-05-01T12:00:00Z, or ms)")
    p.add_argument("--partition", "-p", type=int, metavar="P", help="read only partition P")
    p.add_argument("--group", "-g", metavar="GROUP", help="consume as a member of GROUP and commit its offsets")
    p.add_argument("--max-messages", "-n", type=positive_int, metavar="N", help="stop after N records")
    p.add_argument("--follow", "-F", action="store_true", help="keep waiting for new records (until Ctrl-C)")
    p.add_argument("--timeout-ms", type=positive_int, metavar="MS", help="stop when no record came for MS milliseconds")
    p.add_argument("--format", metavar="raw|json|TEMPLATE",
                   help="raw: the value (default); json: an object per record; or a template such as "
                        "'{offset} {key} {value}' (fields: " + " ".join(TEMPLATE_FIELDS) + ")")
    p.add_argument("--isolation-level", choices=ISOLATION_LEVELS, help="isolation.level (default read_uncommitted)")
    add_property_option(p, "consumer")
    p.set_defaults(run=run)


# -- formats ---------------------------------------------------------------------------------
def formatter(fmt: str | None, output: str):
    """A function ConsumerRecord -> one line of text (without its newline)."""
    if fmt is None:
        fmt = "json" if output in ("json", "jsonl") else "raw"
    if fmt == "raw":
        return lambda r: _text(r.value)
    if fmt == "json":
        return _json_line
    template = unescape(fmt)
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as e:
        raise ToolError(f"--format {fmt!r}: {e}", EXIT_USAGE) from None
    if not fields:
        raise ToolError(f"--format {fmt!r} is not raw, json or a template with fields such as {{value}}", EXIT_USAGE)
    for f in fields:
        if f not in TEMPLATE_FIELDS:
            raise ToolError(f"--format: unknown field {{{f}}} (fields: {' '.join(TEMPLATE_FIELDS)})", EXIT_USAGE)
    used = set(fields)
    getters = {name: get for name, get in _FIELD_GETTERS.items() if name in used}
    return lambda r: template.format_map({name: get(r) for name, get in getters.items()})


def _text(data) -> str:
    return NULL if data is None else show_bytes(data)


def _headers_text(headers) -> str:
    return ",".join(f"{k}={_text(v)}" for k, v in headers or ())


_FIELD_GETTERS = {
    "topic": lambda r: r.topic,
    "partition": lambda r: r.partition,
    "offset": lambda r: r.offset,
    "timestamp": lambda r: r.timestamp_ms,
    "time": lambda r: iso_utc(r.timestamp_ms) or NULL,
    "key": lambda r: _text(r.key),
    "value": lambda r: _text(r.value),
    "headers": lambda r: _headers_text(r.headers),
}


def record_json(r) -> dict:
    return {"topic": r.topic, "partition": r.partition, "offset": r.offset, "timestamp": r.timestamp_ms,
            "timestamp_type": TIMESTAMP_TYPES[1 if r.timestamp_type == 1 else 0],
            "key": show_bytes(r.key), "value": show_bytes(r.value),
            "headers": [[k, show_bytes(v)] for k, v in r.headers or ()]}


def _json_line(r) -> str:
    return json.dumps(record_json(r), ensure_ascii=False)


# -- where to start --------------------------------------------------------------------------
def _parse_offset(text):
    if text in ("earliest", "beginning"):
        return "earliest"
    if text in ("latest", "end"):
        return "latest"
    try:
        return int(text)
    except ValueError:
        raise ToolError(f"--offset {text!r} is not a number, earliest or latest", EXIT_USAGE) from None


class _Start:
    """The start options, resolved to offsets for a set of partitions."""

    def __init__(self, args):
        self.offset = None if args.offset is None else _parse_offset(args.offset)
        self.time_ms = None if args.from_time is None else parse_time_ms(args.from_time, "--from-time")
        if isinstance(self.offset, int) and self.offset >= 0 and args.partition is None:
            raise ToolError("--offset N needs --partition (a negative N, earliest or latest apply to every "
                            "partition)", EXIT_USAGE)
        self.from_beginning = args.from_beginning or self.offset == "earliest"
        self.latest = self.offset == "latest"
        self.follow = args.follow

    @property
    def explicit(self) -> bool:
        """Whether the option overrides a group's committed offsets."""
        return self.time_ms is not None or isinstance(self.offset, int)

    @property
    def reset(self) -> str:
        """auto.offset.reset: where a partition without a committed offset starts."""
        if self.from_beginning:
            return "earliest"
        if self.latest or self.follow:
            return "latest"
        return "earliest"

    def offsets(self, consumer, tps) -> dict:
        """{tp: offset} for the explicit options (or the reset policy when not explicit)."""
        if self.time_ms is not None:
            found = consumer.offsets_for_times({tp: self.time_ms for tp in tps})
            missing = [tp for tp, f in found.items() if f is None]
            ends = consumer.end_offsets(missing) if missing else {}
            return {tp: (f[0] if f is not None else ends[tp]) for tp, f in found.items()}
        begin = consumer.beginning_offsets(tps)
        end = consumer.end_offsets(tps)
        if isinstance(self.offset, int):
            if self.offset < 0:
                return {tp: max(begin[tp], end[tp] + self.offset) for tp in tps}
            for tp in tps:
                if not begin[tp] <= self.offset <= end[tp]:
                    raise ToolError(f"offset {self.offset} is out of range for {tp[0]}-{tp[1]} "
                                    f"(offsets {begin[tp]} to {end[tp]})", EXIT_FAILED)
            return {tp: self.offset for tp in tps}
        return dict(begin if self.reset == "earliest" else end)


# -- the command -----------------------------------------------------------------------------
def run(args) -> int:
    with sigterm_as_interrupt():  # a service manager's or kill's stop ends it as Ctrl-C does
        return _run(args)


def _run(args) -> int:
    fmt = formatter(args.format, args.output)
    start = _Start(args)
    overrides = {"group.id": args.group, "isolation.level": args.isolation_level,
                 "auto.offset.reset": start.reset}
    props = properties(args, overrides)
    count = topic_partitions(props, args.topic)
    check_partition(args.topic, args.partition, count)
    tps = [(args.topic, p) for p in ([args.partition] if args.partition is not None else range(count))]
    consumer = make_consumer(props)
    session = _Session(args, consumer, fmt, start, tps)
    try:
        code = session.run()
    except KeyboardInterrupt as e:
        code = interrupted_exit_code(e)
    except BrokenPipeError:
        # the reader went away (| head): stop quietly; Python must not complain at exit either
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        session.close(interrupted=True)
        return EXIT_OK
    try:
        session.close(interrupted=code in (EXIT_INTERRUPTED, EXIT_TERMINATED))
    except KeyboardInterrupt as e:
        code = interrupted_exit_code(e)
    print(f"kafkacore consume: {plural(session.printed, 'record')} from {args.topic}",
          file=sys.stderr)
    return code


class _Session:
    def __init__(self, args, consumer, fmt, start, tps):
        self.args = args
        self.consumer = consumer
        self.format = fmt
        self.start = start
        self.tps = tps
        self.printed = 0
        self.printed_next = {}  # tp -> offset after the last record printed (what Ctrl-C commits)
        self.ends = None  # tp -> end offset at start (without --follow)
        self.joined = False  # subscribe: the first assignment arrived
        self.subscribed = args.group is not None and args.partition is None
        self.out = sys.stdout.buffer

    def run(self) -> int:
        c = self.consumer
        if not self.start.follow:
            self.ends = c.end_offsets(self.tps)  # the partitions as they are now: where we stop
        if self.subscribed:
            c.subscribe([self.args.topic], on_assign=self._on_assign)
        else:
            c.assign(self.tps)
            if self.args.group is None or self.start.explicit:
                for tp, off in self.start.offsets(c, self.tps).items():
                    c.seek(tp[0], tp[1], off)
            # else: the group's committed offsets, then auto.offset.reset
        remaining = self.args.max_messages
        idle_since = time.monotonic()
        while remaining is None or remaining > 0:
            if self.ends is not None and self._at_end():
                break
            records = c.poll(POLL_TIMEOUT, max_records=min(remaining, 500) if remaining else None)
            if records:
                self._print(records)
                if remaining is not None:
                    remaining -= len(records)
                idle_since = time.monotonic()
            elif self.args.timeout_ms and time.monotonic() - idle_since >= self.args.timeout_ms / 1000:
                break
        return EXIT_OK

    def _on_assign(self, consumer, added):
        self.joined = True
        if self.start.explicit and added:
            for tp, off in self.start.offsets(consumer, list(added)).items():
                consumer.seek(tp[0], tp[1], off)

    def _at_end(self) -> bool:
        from ..errors import KafkaTimeoutError

        if self.subscribed and not self.joined:
            return False
        for tp in self.consumer.assignment():
            try:
                if self.consumer.position(tp[0], tp[1], timeout=POLL_TIMEOUT) < self.ends.get(tp, 0):
                    return False
            except KafkaTimeoutError:  # no position yet (being reset): not at the end
                return False
        return True

    def _print(self, records):
        fmt = self.format
        text = "\n".join([fmt(r) for r in records]) + "\n"
        for r in records:
            self.printed_next[(r.topic, r.partition)] = r.offset + 1
        self.printed += len(records)  # counted first: a Ctrl-C right after the write must not lose them
        self.out.write(text.encode("utf-8", "surrogateescape"))
        self.out.flush()

    def close(self, interrupted: bool):
        """Commits (with --group) and leaves. After Ctrl-C or a closed pipe, only what was
        printed is committed: the consumer's positions may be past it."""
        c = self.consumer
        try:
            if self.args.group is not None:
                if interrupted:
                    if self.printed_next:
                        c.commit(dict(self.printed_next))
                elif c.assignment():
                    c.commit()
        finally:
            c.close(autocommit=False)
